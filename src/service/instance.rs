//! What makes `serve` one instance under systemd: the `flock` on `/run/mdpilot/serve.lock` and
//! the `sd_notify` messages (READY, STATUS, STOPPING) of a `Type=notify` unit.

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
