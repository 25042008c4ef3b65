//! `mdpilot serve` start-up against a bus that accepts the connection and never answers (a
//! `UnixListener` in the test standing in for a wedged dbus-daemon): it gives up after the
//! connect timeout with a clear error and exit 1, and a SIGTERM during the wait ends it at once.

use crate::support;

use std::os::unix::net::UnixListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::BIN;

/// A socket that accepts every connection and never writes a byte; the accepted streams are
/// kept open for the life of the test process.
fn silent_bus() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bus");
    let l = UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming().map_while(Result::ok) {
            held.push(s);
        }
    });
    (dir, format!("unix:path={}", path.display()))
}

/// `mdpilot serve --sim` on the system bus at `address`, with `args`.
fn serve(address: &str, args: &[&str]) -> Child {
    Command::new(BIN)
        .args(["serve", "--sim"])
        .args(args)
        .env("DBUS_SYSTEM_BUS_ADDRESS", address)
        .env_remove("NOTIFY_SOCKET")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits at most `limit` for `child` to exit; kills it (and panics) past that.
fn exit_within(child: &mut Child, limit: Duration, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stderr_of(child: &mut Child) -> String {
    let mut s = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut s).unwrap();
    s
}

#[test]
fn start_up_against_a_bus_that_never_answers_gives_up_after_the_connect_timeout() {
    let (_dir, address) = silent_bus();
    let t0 = Instant::now();
    let mut c = serve(&address, &["--bus-timeout-ms", "1000"]);
    let st = exit_within(&mut c, Duration::from_secs(10), "serve on a silent bus");
    let took = t0.elapsed();
    let err = stderr_of(&mut c);
    assert_eq!(st.code(), Some(1), "{err}");
    assert!(err.contains("did not answer within 1 s"), "{err}");
    assert!(took >= Duration::from_millis(900), "gave up after {took:?}");
    eprintln!("silent bus: gave up after {took:?}");
}

#[test]
fn sigterm_while_waiting_for_the_bus_ends_start_up_within_2_s() {
    let (_dir, address) = silent_bus();
    // The default timeout (30 s): only the signal can end it within the test's limit.
    let mut c = serve(&address, &[]);
    // Let it reach the connect (the simulated tree is created first).
    std::thread::sleep(Duration::from_millis(700));
    assert!(c.try_wait().unwrap().is_none(), "{}", stderr_of(&mut c));
    let t0 = Instant::now();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    let st = exit_within(&mut c, Duration::from_secs(2), "serve after SIGTERM");
    let err = stderr_of(&mut c);
    assert_eq!(st.code(), Some(0), "{err}");
    eprintln!("SIGTERM during start-up: exited after {:?}", t0.elapsed());
    // The simulated tree goes with it.
    if let Some(p) = err
        .lines()
        .find_map(|l| l.strip_prefix("mdpilot: simulated tree in "))
    {
        assert!(!std::path::Path::new(p).exists(), "{p} left behind");
    }
}
