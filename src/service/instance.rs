//! What makes `serve` one instance under systemd: the `flock` on `/run/mdpilot/serve.lock` and
//! the `sd_notify` messages (READY, STATUS, STOPPING, WATCHDOG) of a `Type=notify` unit.

use super::ServeError;
use crate::host::Root;
use std::os::fd::AsRawFd;

/// Holds `flock(LOCK_EX)` on the lock file for the life of the service.
pub(super) struct InstanceLock {
    _file: std::fs::File,
}

/// Takes the single-instance lock `/run/mdpilot/serve.lock` under `root` (created with its
/// directory). Errors: [`ServeError::AlreadyRunning`] when another `serve` holds it,
/// [`ServeError::Lock`] when the file cannot be created or locked.
pub(super) fn lock_instance(root: &Root) -> Result<InstanceLock, ServeError> {
    let path = root.run("mdpilot/serve.lock");
    let err = |source| ServeError::Lock {
        path: path.display().to_string(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(err)?;
    // SAFETY: flock on an fd we own; the lock lives as long as the file.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Err(ServeError::AlreadyRunning(path.display().to_string()));
        }
        return Err(ServeError::Lock {
            path: path.display().to_string(),
            source: e,
        });
    }
    Ok(InstanceLock { _file: file })
}

/// Tells systemd `state` (`sd_notify(3)`; a no-op without `$NOTIFY_SOCKET`); a failure is logged.
pub(super) fn notify(state: &[sd_notify::NotifyState]) {
    if let Err(e) = sd_notify::notify(false, state) {
        tracing::warn!("sd_notify failed: {e}");
    }
}

/// The watchdog keep-alive interval systemd asks for (`WatchdogSec=` in the unit, passed as
/// `$WATCHDOG_USEC`, microseconds): half of it, as `sd_watchdog_enabled(3)` recommends. Pure:
/// `usec` and `pid` are the values of `$WATCHDOG_USEC` and `$WATCHDOG_PID`, `me` this process.
/// `None` (no watchdog) when `usec` is absent, not a positive integer, or `pid` is set and is
/// another process (a child that inherited the variables); an absent `pid` is accepted, as
/// libsystemd does.
pub(super) fn watchdog_interval(
    usec: Option<&str>,
    pid: Option<&str>,
    me: u32,
) -> Option<std::time::Duration> {
    let usec: u64 = usec?.trim().parse().ok().filter(|&u| u > 0)?;
    if let Some(p) = pid {
        if p.trim().parse::<u32>().ok()? != me {
            return None;
        }
    }
    Some(std::time::Duration::from_micros(usec / 2).max(std::time::Duration::from_millis(1)))
}

/// The watchdog interval of this process's environment ([`watchdog_interval`]).
pub(super) fn watchdog_from_env() -> Option<std::time::Duration> {
    let var = |k| std::env::var(k).ok();
    watchdog_interval(
        var("WATCHDOG_USEC").as_deref(),
        var("WATCHDOG_PID").as_deref(),
        std::process::id(),
    )
}

/// Sends one `WATCHDOG=1` keep-alive (a no-op without `$NOTIFY_SOCKET`). A failure is never
/// fatal; only the first of a run is logged (`warned` remembers it), the next ones would
/// repeat it every interval.
pub(super) fn watchdog_ping(warned: &mut bool) {
    if let Err(e) = sd_notify::notify(false, &[sd_notify::NotifyState::Watchdog]) {
        if !std::mem::replace(warned, true) {
            tracing::warn!("sd_notify WATCHDOG=1 failed (not logged again): {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::watchdog_interval;
    use std::time::Duration;

    #[test]
    fn watchdog_interval_is_half_of_watchdog_usec_for_this_process_only() {
        let half = Some(Duration::from_secs(30));
        assert_eq!(watchdog_interval(Some("60000000"), Some("42"), 42), half);
        assert_eq!(watchdog_interval(Some("60000000"), None, 42), half);
        assert_eq!(watchdog_interval(Some("60000000"), Some("41"), 42), None);
        assert_eq!(watchdog_interval(Some("60000000"), Some("x"), 42), None);
        assert_eq!(watchdog_interval(None, Some("42"), 42), None);
        for bad in ["0", "", "-5", "1.5", "99999999999999999999999"] {
            assert_eq!(watchdog_interval(Some(bad), None, 42), None, "{bad}");
        }
    }
}
