//! Watching the processes that own `pid` leases: one pidfd per pid (`pidfd_open(2)`, Linux
//! 5.3), polled through tokio's [`AsyncFd`]. A pidfd becomes readable when its process exits
//! (even while it is still a zombie, which `kill(pid, 0)` would call alive), so the service
//! drops the lease right away instead of at the next AcquirePriority.

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::OwnedFd;
use tokio::io::unix::AsyncFd;

/// The watched pids and their pidfds.
#[derive(Default)]
pub struct PidWatch {
    fds: BTreeMap<u32, AsyncFd<OwnedFd>>,
}

/// `pidfd_open(pid, 0)` ([`rustix::process::pidfd_open`]): the pidfd, or `None` when the
/// process does not exist (ESRCH), the pid is out of range, or the kernel has no pidfds (ENOSYS:
/// the service then only reaps at AcquirePriority).
fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    let pid = rustix::process::Pid::from_raw(i32::try_from(pid).ok()?)?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
}

impl PidWatch {
    /// An empty watch.
    pub fn new() -> Self {
        PidWatch::default()
    }

    /// Watches exactly `pids`: new ones get a pidfd, ones no longer wanted are dropped. Returns
    /// the wanted pids that could not be watched because they are gone already.
    pub fn sync(&mut self, pids: &BTreeSet<u32>) -> Vec<u32> {
        self.fds.retain(|p, _| pids.contains(p));
        let mut gone = Vec::new();
        for &p in pids {
            if self.fds.contains_key(&p) {
                continue;
            }
            // SAFETY: the OwnedFd is moved into the AsyncFd, which owns it until dropped; it is
            // closed only after deregistration (the I/O-safety condition of `register`).
            match pidfd_open(p).map(|fd| unsafe { AsyncFd::register(fd) }) {
                Some(Ok(fd)) => {
                    self.fds.insert(p, fd);
                }
                Some(Err(e)) => tracing::warn!("cannot watch pid {p}: {e}"),
                None if !crate::host::pid_alive(p) => gone.push(p),
                None => {}
            }
        }
        gone
    }

    /// Waits until a watched process exits and returns its pid (no longer watched). Pending
    /// forever while nothing is watched.
    pub async fn exited(&mut self) -> u32 {
        if self.fds.is_empty() {
            return std::future::pending().await;
        }
        let fds = &self.fds;
        let pid = std::future::poll_fn(|cx| {
            for (p, fd) in fds {
                if fd.poll_read_ready(cx).is_ready() {
                    return std::task::Poll::Ready(*p);
                }
            }
            std::task::Poll::Pending
        })
        .await;
        self.fds.remove(&pid);
        pid
    }

    /// How many pids are watched.
    pub fn len(&self) -> usize {
        self.fds.len()
    }

    /// True when nothing is watched.
    pub fn is_empty(&self) -> bool {
        self.fds.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[tokio::test]
    async fn exit_of_a_child_is_seen_at_once() {
        let mut child = std::process::Command::new("sleep")
            .arg("0.3")
            .spawn()
            .unwrap();
        let pid = child.id();
        let mut w = PidWatch::new();
        assert!(w.sync(&[pid].into()).is_empty());
        assert_eq!(w.len(), 1);
        let t0 = Instant::now();
        let got = tokio::time::timeout(Duration::from_secs(5), w.exited())
            .await
            .unwrap();
        assert_eq!(got, pid);
        assert!(t0.elapsed() < Duration::from_secs(2));
        assert!(w.is_empty());
        child.wait().unwrap();
        // A pid that is gone is reported by sync.
        assert_eq!(w.sync(&[pid].into()), vec![pid]);
    }
}
