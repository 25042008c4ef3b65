//! The one helper module of the integration tests (and `benches/dbus_bench.rs`). Each test file
//! says `#[macro_use] mod support;` and takes what it needs:
//!
//! - [`bus`]: a private `dbus-daemon` per test (never the host's bus), the real `mdpilot serve`
//!   on it, calls and property reads by the crate's own names (`mdpilot::dbus::*`).
//! - [`tree`]: temporary kernel trees (`/proc`, `/sys`, `/run` under a temp root) and the
//!   writers that fill them.
//! - [`loopdev`]: loop devices, mounts, swap and device-mapper tables the tests set up
//!   themselves; RAII guards undo each on drop.
//! - [`polkit`]: a stand-in polkit authority that answers yes or no and records the questions.
//!
//! A test that cannot run here (not root, no `dbus-daemon`, no device-mapper, ...) says so with
//! [`skip!`] or [`skipped`]: one line `skipped: <test>: <reason>` on stderr, never a silent pass.
//!
//! The crate paths the helpers use are imported here and in the submodules only, so a move in
//! `src/` is fixed in one place.

// Every test binary uses a different part of this module (re-exports included).
#![allow(dead_code, unused_macros, unused_imports)]

/// Returns from the calling test after printing `skipped: <test>: <reason>` (format arguments).
macro_rules! skip {
    ($($reason:tt)+) => {{
        $crate::support::skipped(format_args!($($reason)+));
        return;
    }};
}

/// Skips the calling test (see [`skip!`]) unless it runs as root; the optional reason says what
/// root is needed for (default: loop devices).
macro_rules! need_root {
    () => {
        need_root!("for loop devices")
    };
    ($what:literal) => {
        if !$crate::support::is_root() {
            skip!("needs root {}", $what)
        }
    };
}

pub mod bus;
pub mod loopdev;
pub mod polkit;
pub mod tree;

pub use bus::{Bus, Service};
pub use loopdev::{is_root, LoopDev};
pub use polkit::{Asked, Behaviour, FakePolkit};
pub use tree::FakeTree;

use std::process::Output;

/// The crate's one error-chain printer (`error: cause: cause`), as the CLI prints errors.
pub use mdpilot::error::error_chain;

/// The `mdpilot` binary cargo built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_mdpilot");

/// 1 MiB in bytes.
pub const MIB: u64 = 1 << 20;

/// Prints `skipped: <test>: <reason>` on stderr: the one wording of every skip. The test is the
/// libtest thread's name (the test's path); the caller returns by itself (see [`skip!`]) or
/// goes on with the part that can run.
pub fn skipped(reason: impl std::fmt::Display) {
    let thread = std::thread::current();
    let test = match thread.name() {
        Some(n) if n != "main" => n,
        _ => "this test",
    };
    eprintln!("skipped: {test}: {reason}");
}

/// The process's stdout, lossily decoded.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The process's stderr, lossily decoded.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit status, stdout and stderr in one text, for assertion messages.
pub fn describe(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        stdout(o),
        stderr(o)
    )
}

/// Asserts the exit code, showing stderr when it differs.
#[track_caller]
pub fn assert_exit(o: &Output, code: i32) {
    assert_eq!(o.status.code(), Some(code), "{}", stderr(o));
}

/// A `Command` that runs `program` as the unprivileged user nobody (65534) through `setpriv`.
pub fn as_nobody(program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    let mut c = std::process::Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(program);
    c
}

/// Whether `setpriv` (util-linux) can be run here.
pub fn have_setpriv() -> bool {
    std::process::Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok()
}
