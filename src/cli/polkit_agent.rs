//! A polkit text agent for CLI commands that go through the service as non-root, as
//! `udisksctl` and `systemctl` do: when stdin is a terminal and `pkttyagent` (package polkitd)
//! is installed, spawn `pkttyagent --notify-fd N --fallback --process <our pid>`, wait until it
//! closes fd N (it has registered for this process), and stop it when the command ends.
//! Otherwise nothing is spawned and, should the service answer NotAuthorized, [`hint`] says how
//! to get a prompt.
//!
//! Source of truth: pkttyagent(1) (`--notify-fd`, `--fallback`, `--process`).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// Where pkttyagent is looked for (Debian, Fedora, Arch install it in /usr/bin).
pub const PKTTYAGENT_PATHS: &[&str] = &["/usr/bin/pkttyagent", "/bin/pkttyagent"];

/// What to do about a polkit agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Root: the service never asks polkit.
    NotNeeded,
    /// Spawn this pkttyagent.
    Spawn(PathBuf),
    /// No agent possible; the hint to print if authorization fails.
    Unavailable(String),
}

/// The decision, pure: `euid` of this process, whether stdin is a terminal, and the pkttyagent
/// found (if any).
pub fn decide(euid: u32, stdin_is_tty: bool, pkttyagent: Option<&Path>) -> Decision {
    if euid == 0 {
        return Decision::NotNeeded;
    }
    match (stdin_is_tty, pkttyagent) {
        (true, Some(p)) => Decision::Spawn(p.to_path_buf()),
        (true, None) => Decision::Unavailable(
            "run as root, or install pkttyagent (package polkitd) for a password prompt here, \
             or run it in a desktop session with a polkit agent"
                .into(),
        ),
        (false, _) => Decision::Unavailable(
            "stdin is not a terminal, so no password prompt is possible: run as root, or from a \
             terminal with pkttyagent (package polkitd) installed"
                .into(),
        ),
    }
}

/// A running pkttyagent; stopped (SIGTERM, then waited for) on drop.
pub struct TextAgent {
    child: Child,
}

impl Drop for TextAgent {
    fn drop(&mut self) {
        // SIGTERM lets pkttyagent restore the terminal's echo if it was prompting.
        // SAFETY: signalling our own child, by its pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

static HINT: OnceLock<String> = OnceLock::new();

/// The hint recorded by [`start`] when no agent could be started (print it after a
/// NotAuthorized answer).
pub fn hint() -> Option<&'static str> {
    HINT.get().map(String::as_str)
}

/// Starts a text agent if one is needed and possible (see [`decide`]); waits at most 5 s for it
/// to register. Failures are logged, never fatal: the call then goes without an agent.
pub fn start() -> Option<TextAgent> {
    // SAFETY: geteuid and isatty have no preconditions.
    let (euid, tty) = unsafe { (libc::geteuid(), libc::isatty(0) == 1) };
    let found = PKTTYAGENT_PATHS.iter().map(Path::new).find(|p| p.exists());
    match decide(euid, tty, found) {
        Decision::NotNeeded => None,
        Decision::Unavailable(h) => {
            let _ = HINT.set(h);
            None
        }
        Decision::Spawn(p) => match spawn(&p) {
            Ok(a) => Some(a),
            Err(e) => {
                tracing::warn!("cannot start {}: {e}", p.display());
                let _ = HINT.set(format!(
                    "{} did not start ({e}): run as root for this command",
                    p.display()
                ));
                None
            }
        },
    }
}

fn spawn(pkttyagent: &Path) -> std::io::Result<TextAgent> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 just returned these two descriptors, owned by nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let wfd = write.as_raw_fd();
    let mut cmd = Command::new(pkttyagent);
    cmd.arg("--notify-fd")
        .arg(wfd.to_string())
        .arg("--fallback")
        .arg("--process")
        .arg(std::process::id().to_string())
        .stdout(Stdio::null());
    // SAFETY: fcntl is async-signal-safe; it only clears FD_CLOEXEC on the notify fd so the
    // agent inherits it.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(wfd, libc::F_SETFD, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    drop(write);
    // pkttyagent closes its end once registered (or exits): wait for EOF.
    let mut pfd = libc::pollfd {
        fd: read.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let limit = Duration::from_secs(5).as_millis() as i32;
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut pfd, 1, limit) };
    if n == 0 {
        tracing::warn!("{} did not register within 5 s", pkttyagent.display());
    }
    Ok(TextAgent { child })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawning_returns_once_the_agent_registered_or_gave_up() {
        let Some(p) = PKTTYAGENT_PATHS.iter().map(Path::new).find(|p| p.exists()) else {
            eprintln!("skipped: pkttyagent not installed");
            return;
        };
        let t = std::time::Instant::now();
        let agent = spawn(p).unwrap();
        assert!(t.elapsed() < Duration::from_secs(6), "{:?}", t.elapsed());
        drop(agent);
    }

    #[test]
    fn root_needs_no_agent() {
        assert_eq!(
            decide(0, true, Some(Path::new("/usr/bin/pkttyagent"))),
            Decision::NotNeeded
        );
        assert_eq!(decide(0, false, None), Decision::NotNeeded);
    }

    #[test]
    fn a_terminal_with_pkttyagent_gets_an_agent() {
        assert_eq!(
            decide(1000, true, Some(Path::new("/usr/bin/pkttyagent"))),
            Decision::Spawn(PathBuf::from("/usr/bin/pkttyagent"))
        );
    }

    #[test]
    fn otherwise_the_hint_says_how_to_get_one() {
        let Decision::Unavailable(h) = decide(1000, true, None) else {
            panic!()
        };
        assert!(h.contains("run as root") && h.contains("pkttyagent"), "{h}");
        let Decision::Unavailable(h) = decide(1000, false, Some(Path::new("/usr/bin/pkttyagent")))
        else {
            panic!()
        };
        assert!(h.contains("not a terminal"), "{h}");
    }
}
