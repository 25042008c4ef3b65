//! The watcher: turns kernel notifications into owned [`Event`]s on a channel, without polling.
//!
//! Sources (kernel Documentation/admin-guide/md.rst, drivers/md/md.c):
//! - udev, subsystem `block`: md devices and their members appearing, changing, leaving.
//! - `/proc/mdstat`, kept open and polled for `POLLPRI|POLLERR`: md.c calls `md_new_event()` on
//!   array start/stop, failure, add/remove and when a sync starts or ends — not on progress.
//! - `/sys/block/mdN/md/{sync_action,array_state,degraded,sync_completed}`, polled for
//!   `POLLPRI|POLLERR` (`sysfs_notify`); `sync_completed` is notified only about every 1/16 of the
//!   sync, so the service adds a progress timer while a sync runs (not here: no timer in the watcher).
//!
//! sysfs and procfs need the attribute read once before `poll` and re-read (from offset 0) after
//! each notification to re-arm it. On regular files (test roots, `serve --sim`) `poll` for
//! `POLLPRI` never fires, so the simulator sends its events into the same channel itself.
//!
//! One thread blocks in `poll(2)` with no timeout: an idle system costs no wake-ups.

use crate::host::Root;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::thread::JoinHandle;
use tokio::sync::mpsc::UnboundedSender;

/// The sysfs attributes of an array the watcher polls (`/sys/block/<array>/md/<attr>`).
pub const POLLED_ATTRS: [&str; 4] = ["sync_action", "array_state", "degraded", "sync_completed"];

/// Something changed; the service re-reads what the event concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// `/proc/mdstat` was notified (or the simulator rewrote it): re-read everything.
    Mdstat,
    /// `/sys/block/<array>/md/<attr>` was notified: re-read that array's sysfs.
    ArrayAttr {
        /// Kernel array name (`md0`).
        array: String,
        /// Attribute file name (`sync_completed`).
        attr: String,
    },
    /// A udev event for a block device (an md array or anything that may be a member).
    Udev {
        /// `add`, `change`, `remove`, ...
        action: String,
        /// Kernel name (`md0`, `sda1`).
        device: String,
    },
}

impl From<&udev::Event> for Event {
    fn from(e: &udev::Event) -> Self {
        let action = match e.event_type() {
            udev::EventType::Add => "add",
            udev::EventType::Change => "change",
            udev::EventType::Remove => "remove",
            udev::EventType::Bind => "bind",
            udev::EventType::Unbind => "unbind",
            udev::EventType::Unknown => "unknown",
        };
        Event::Udev {
            action: action.to_string(),
            device: e.sysname().to_string_lossy().into_owned(),
        }
    }
}

impl Event {
    /// True when this event needs the whole model re-read: `/proc/mdstat` changed, or a udev
    /// event concerns an md device (`md*`, including `md_d0` and `md127p1`) or a member of a
    /// known array (`members`: kernel names as in the model, `sda1`, `cciss!c0d0p1` or
    /// `cciss/c0d0p1`). Other block devices (a USB stick, a loop device of a container) do
    /// not concern any array: a new member shows up through md's own events first.
    pub fn needs_full_refresh(&self, members: &std::collections::BTreeSet<String>) -> bool {
        match self {
            Event::Mdstat => true,
            Event::Udev { device, .. } => {
                device.starts_with("md")
                    || members.contains(device)
                    || members.contains(&device.replace('!', "/"))
            }
            Event::ArrayAttr { .. } => false,
        }
    }
}

/// Errors starting the watcher.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// `/proc/mdstat` could not be opened (md module not loaded?).
    #[error("cannot open {path}")]
    Mdstat {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The wake-up pipe or the watcher thread could not be created.
    #[error("cannot start the watcher thread")]
    Thread(#[source] std::io::Error),
}

/// A running watcher thread. Dropping it stops and joins the thread.
pub struct Watcher {
    stop_w: Option<OwnedFd>,
    thread: Option<JoinHandle<()>>,
}

impl Watcher {
    /// Starts watching under `root`, sending events to `tx`. udev is used only when `root` is the
    /// real system (a test tree gets no uevents); a failing udev monitor is logged, not fatal.
    ///
    /// Errors: `/proc/mdstat` cannot be opened under a test root (on the real system a missing
    /// mdstat is waited for through udev); the thread cannot be started.
    pub fn start(root: Root, tx: UnboundedSender<Event>) -> Result<Watcher, WatchError> {
        let mdstat_path = crate::sysfs::arrays::mdstat_path(&root);
        let mdstat = match crate::sysfs::arrays::open_mdstat(&root) {
            Ok(f) => Some(f),
            // Without udev nothing would ever tell us md appeared: that is an error then.
            Err(source) if !root.is_system() => {
                return Err(WatchError::Mdstat {
                    path: mdstat_path.display().to_string(),
                    source,
                })
            }
            Err(e) => {
                tracing::info!(
                    "{} not there yet ({e}); waiting for md arrays via udev",
                    mdstat_path.display()
                );
                None
            }
        };
        // O_CLOEXEC: an event program (or its background children) must not inherit the write
        // end, or dropping the watcher would wait for their exit before the pipe reads EOF.
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| WatchError::Thread(e.into()))?;
        let thread = std::thread::Builder::new()
            .name("mdpilot-watch".into())
            .spawn(move || watch_loop(root, mdstat, r, tx))
            .map_err(WatchError::Thread)?;
        Ok(Watcher {
            stop_w: Some(w),
            thread: Some(thread),
        })
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        // Closing the write end makes the pipe readable (EOF) and ends the loop.
        drop(self.stop_w.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads a pollable attribute to the end from offset 0: required to (re-)arm `POLLPRI`.
/// Returns false when the read fails (a removed array's attribute answers ENODEV).
fn drain(f: &mut File) -> bool {
    let mut buf = [0u8; 4096];
    if f.seek(SeekFrom::Start(0)).is_err() {
        return false;
    }
    loop {
        match f.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

struct AttrFd {
    array: String,
    attr: &'static str,
    file: File,
}

fn open_attrs(root: &Root) -> Vec<AttrFd> {
    let mut out = Vec::new();
    for array in crate::sysfs::list_arrays(root) {
        for attr in POLLED_ATTRS {
            match crate::sysfs::arrays::open_attr(root, &array, attr) {
                Ok(mut file) => {
                    let _ = drain(&mut file);
                    out.push(AttrFd {
                        array: array.clone(),
                        attr,
                        file,
                    });
                }
                // Missing attributes are normal (raid0 has no sync_action on old kernels).
                Err(e) => tracing::debug!("not watching {array} md/{attr}: {e}"),
            }
        }
    }
    out
}

/// The udev monitor of the block subsystem, on the real system only (a test tree gets no
/// uevents); a failing monitor is logged, not fatal.
fn udev_monitor(root: &Root) -> Option<udev::MonitorSocket> {
    if !root.is_system() {
        return None;
    }
    match udev::MonitorBuilder::new()
        .and_then(|b| b.match_subsystem("block"))
        .and_then(udev::MonitorBuilder::listen)
    {
        Ok(m) => Some(m),
        Err(e) => {
            tracing::warn!("udev monitor unavailable, relying on /proc/mdstat: {e}");
            None
        }
    }
}

/// Waits in poll(2) on the stop pipe, `/proc/mdstat`, the udev monitor and the attributes; the
/// `revents` of each in that order (attributes from index 3), or `None` when poll failed for
/// good.
fn wait(
    stop_r: &OwnedFd,
    mdstat: Option<&File>,
    monitor: Option<&udev::MonitorSocket>,
    attrs: &[AttrFd],
) -> Option<Vec<libc::c_short>> {
    let pfd = |fd: RawFd, events: libc::c_short| libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    let mut fds: Vec<libc::pollfd> = Vec::with_capacity(3 + attrs.len());
    fds.push(pfd(stop_r.as_raw_fd(), libc::POLLIN));
    // A negative fd is ignored by poll(2): no mdstat yet (md module not loaded).
    fds.push(pfd(mdstat.map_or(-1, AsRawFd::as_raw_fd), libc::POLLPRI));
    fds.push(pfd(monitor.map_or(-1, AsRawFd::as_raw_fd), libc::POLLIN));
    for a in attrs {
        fds.push(pfd(a.file.as_raw_fd(), libc::POLLPRI));
    }
    loop {
        // SAFETY: fds is a valid array of pollfd of the given length for the whole call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if n >= 0 {
            return Some(fds.iter().map(|f| f.revents).collect());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            tracing::error!("watcher poll failed, stopping: {e}");
            return None;
        }
    }
}

/// Sends the events of the ready attributes; `Some(rescan)` (true when one failed to read: a
/// removed array), `None` when the receiver has gone.
fn attr_events(
    attrs: &mut [AttrFd],
    revents: &[libc::c_short],
    tx: &UnboundedSender<Event>,
) -> Option<bool> {
    let mut rescan = false;
    for (a, &rev) in attrs.iter_mut().zip(revents) {
        if rev != 0 {
            // kernfs reports POLLERR|POLLPRI on every notification, so POLLERR alone says
            // nothing; a removed array's attribute fails to read: reopen the set then, or
            // the loop would spin on it.
            rescan |= !drain(&mut a.file) || rev & libc::POLLNVAL != 0;
            let ev = Event::ArrayAttr {
                array: a.array.clone(),
                attr: a.attr.to_string(),
            };
            tx.send(ev).ok()?;
        }
    }
    Some(rescan)
}

/// Sends the udev monitor's pending events; `Some(rescan)` (true when one was about an md
/// device), `None` when the receiver has gone.
fn udev_events(monitor: &udev::MonitorSocket, tx: &UnboundedSender<Event>) -> Option<bool> {
    let mut rescan = false;
    for ev in monitor.iter() {
        let ev = Event::from(&ev);
        if let Event::Udev { device, .. } = &ev {
            rescan |= device.starts_with("md");
        }
        tx.send(ev).ok()?;
    }
    Some(rescan)
}

fn watch_loop(root: Root, mut mdstat: Option<File>, stop_r: OwnedFd, tx: UnboundedSender<Event>) {
    let monitor = udev_monitor(&root);
    if let Some(f) = mdstat.as_mut() {
        let _ = drain(f);
    }
    let mut attrs = open_attrs(&root);
    loop {
        let Some(revents) = wait(&stop_r, mdstat.as_ref(), monitor.as_ref(), &attrs) else {
            return;
        };
        if revents[0] != 0 {
            return;
        }
        let mut rescan = false;
        if revents[1] != 0 {
            if let Some(f) = mdstat.as_mut() {
                let _ = drain(f);
            }
            rescan = true;
            if tx.send(Event::Mdstat).is_err() {
                return;
            }
        }
        if let (true, Some(m)) = (revents[2] != 0, &monitor) {
            let Some(r) = udev_events(m, &tx) else {
                return;
            };
            rescan |= r;
        }
        let Some(r) = attr_events(&mut attrs, &revents[3..], &tx) else {
            return;
        };
        if rescan || r {
            // Arrays may have come or gone: reopen the set (old fds of removed arrays get POLLERR).
            attrs = open_attrs(&root);
            if mdstat.is_none() {
                // The md module may just have been loaded.
                mdstat = crate::sysfs::arrays::open_mdstat(&root).ok();
                if let Some(f) = mdstat.as_mut() {
                    let _ = drain(f);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watcher_stops_on_drop_and_regular_files_give_no_events() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::new(d.path());
        std::fs::create_dir_all(root.sys("block/md0/md")).unwrap();
        std::fs::create_dir_all(root.proc("")).unwrap();
        std::fs::write(root.proc("mdstat"), "Personalities :\n").unwrap();
        for a in POLLED_ATTRS {
            std::fs::write(root.sys(format!("block/md0/md/{a}")), "x\n").unwrap();
        }
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let w = Watcher::start(root, tx).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        drop(w);
        assert!(
            rx.try_recv().is_err(),
            "regular files must not raise POLLPRI"
        );
    }

    #[test]
    fn only_md_devices_and_members_need_a_full_refresh() {
        let members: std::collections::BTreeSet<String> = ["sda1", "cciss/c0d0p1"]
            .iter()
            .map(|s| (*s).to_string())
            .collect();
        let udev = |d: &str| Event::Udev {
            action: "change".into(),
            device: d.into(),
        };
        assert!(Event::Mdstat.needs_full_refresh(&members));
        assert!(udev("md0").needs_full_refresh(&members));
        assert!(udev("md127p1").needs_full_refresh(&members));
        assert!(udev("sda1").needs_full_refresh(&members));
        assert!(udev("cciss!c0d0p1").needs_full_refresh(&members));
        assert!(!udev("sdb").needs_full_refresh(&members));
        assert!(!udev("loop7").needs_full_refresh(&members));
        assert!(!udev("sda").needs_full_refresh(&members));
        let attr = Event::ArrayAttr {
            array: "md0".into(),
            attr: "sync_completed".into(),
        };
        assert!(!attr.needs_full_refresh(&members));
    }
}
