//! A stand-in systemd-logind (`org.freedesktop.login1`, object `/org/freedesktop/login1`,
//! interface `org.freedesktop.login1.Manager`) on a test's private bus: `Inhibit(what, who,
//! why, mode) -> h` hands the caller one end of a socket pair and keeps the other, so the test
//! sees the moment the caller lets go (end of file on its end); `PrepareForShutdown(b)` is sent
//! when the test says. Point the service at it with `DBUS_SYSTEM_BUS_ADDRESS=<the bus>`.

use super::bus::Bus;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// logind's object path and Manager interface.
pub const PATH: &str = "/org/freedesktop/login1";
/// The Manager interface.
pub const IFACE: &str = "org.freedesktop.login1.Manager";

/// One `Inhibit` call: its arguments and the stand-in's end of the descriptor it handed out.
#[derive(Debug)]
pub struct Inhibitor {
    /// `what` (`shutdown`, `sleep:shutdown`, ...).
    pub what: String,
    /// `who`.
    pub who: String,
    /// `why`.
    pub why: String,
    /// `mode`: `delay` or `block`.
    pub mode: String,
    held: tokio::net::UnixStream,
}

impl Inhibitor {
    /// Waits until every copy of the caller's end is closed (end of file on ours): the lock
    /// released. Panics after `bound` (a hang guard, not a measurement) or on anything else
    /// read.
    pub async fn released(mut self, bound: Duration) {
        let mut buf = [0u8; 16];
        let n = tokio::time::timeout(bound, self.held.read(&mut buf))
            .await
            .expect("the inhibitor was not released")
            .unwrap();
        assert_eq!(n, 0, "the caller wrote on the inhibitor");
    }

    /// Whether the caller still holds it (no end of file yet), without waiting.
    pub fn held(&self) -> bool {
        let mut buf = [0u8; 1];
        matches!(self.held.try_read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }
}

struct Manager {
    calls: UnboundedSender<Inhibitor>,
}

#[zbus::interface(name = "org.freedesktop.login1.Manager")]
impl Manager {
    async fn inhibit(
        &self,
        what: String,
        who: String,
        why: String,
        mode: String,
    ) -> zbus::fdo::Result<zbus::zvariant::OwnedFd> {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair()
            .map_err(|e| zbus::fdo::Error::Failed(e.to_string()))?;
        ours.set_nonblocking(true).unwrap();
        let held = tokio::net::UnixStream::from_std(ours).unwrap();
        let _ = self.calls.send(Inhibitor {
            what,
            who,
            why,
            mode,
            held,
        });
        // Sent, then closed here: the caller's copy is the only one left.
        Ok(std::os::fd::OwnedFd::from(theirs).into())
    }
}

/// A served stand-in: its connection (owning `org.freedesktop.login1`) and the calls.
pub struct FakeLogind {
    conn: zbus::Connection,
    calls: UnboundedReceiver<Inhibitor>,
}

impl FakeLogind {
    /// Serves the stand-in on `bus`.
    pub async fn serve(bus: &Bus) -> FakeLogind {
        let (tx, calls) = unbounded_channel();
        let conn = zbus::connection::Builder::address(bus.address.as_str())
            .unwrap()
            .serve_at(PATH, Manager { calls: tx })
            .unwrap()
            .name("org.freedesktop.login1")
            .unwrap()
            .build()
            .await
            .unwrap();
        FakeLogind { conn, calls }
    }

    /// The next `Inhibit` call; panics after `bound` (a hang guard).
    pub async fn next_inhibit(&mut self, bound: Duration) -> Inhibitor {
        tokio::time::timeout(bound, self.calls.recv())
            .await
            .expect("no Inhibit call")
            .expect("the stand-in stopped")
    }

    /// Sends `PrepareForShutdown(start)`.
    pub async fn prepare_for_shutdown(&self, start: bool) {
        self.conn
            .emit_signal(
                None::<zbus::names::BusName<'_>>,
                PATH,
                IFACE,
                "PrepareForShutdown",
                &start,
            )
            .await
            .unwrap();
    }
}
