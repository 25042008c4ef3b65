//! The systemd watchdog: `mdpilot serve` under `WATCHDOG_USEC` sends `WATCHDOG=1` keep-alives
//! to `$NOTIFY_SOCKET` from its event loop at half that interval (a test datagram socket stands
//! in for systemd's).

use crate::support;

use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};
use support::{Bus, BIN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_keep_alives_come_at_half_of_watchdog_usec() {
    let Some(bus) = Bus::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let sock_path = dir.path().join("notify");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut child = std::process::Command::new(BIN)
        .args(["serve", "--sim", "--bus", &bus.address])
        .env("NOTIFY_SOCKET", &sock_path)
        .env("WATCHDOG_USEC", "2000000")
        .env_remove("WATCHDOG_PID")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 512];
    let mut recv = |sock: &UnixDatagram| {
        let n = sock.recv(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).to_string()
    };
    loop {
        let msg = recv(&sock);
        if msg.lines().any(|l| l == "READY=1") {
            break;
        }
    }
    let t0 = Instant::now();
    let mut pings = Vec::new();
    while t0.elapsed() < Duration::from_secs(3) {
        sock.set_read_timeout(Some(
            Duration::from_secs(3).saturating_sub(t0.elapsed()) + Duration::from_millis(1),
        ))
        .unwrap();
        let Ok(n) = sock.recv(&mut buf) else { break };
        if String::from_utf8_lossy(&buf[..n])
            .lines()
            .any(|l| l == "WATCHDOG=1")
        {
            pings.push(t0.elapsed());
        }
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(child.wait().unwrap().code(), Some(0));
    eprintln!("WATCHDOG=1 at {pings:?} after READY (WATCHDOG_USEC=2000000)");
    assert!(pings.len() >= 2, "{pings:?}");
    // Half of 2 s: never much faster than once a second.
    assert!(pings.len() <= 5, "{pings:?}");
}
