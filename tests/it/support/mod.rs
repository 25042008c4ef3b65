//! The one helper module of the integration tests (`tests/it/main.rs` declares it first, with
//! `#[macro_use]`; the benches include it by `#[path]`). Each test module says
//! `use crate::support;` and takes what it needs:
//!
//! - [`bus`]: a private `dbus-daemon` per test (never the host's bus), the real `mdpilot serve`
//!   on it, calls and property reads by the crate's own names (`mdpilot::dbus::*`).
//! - [`tree`]: temporary kernel trees (`/proc`, `/sys`, `/run` under a temp root) and the
//!   writers that fill them.
//! - [`loopdev`]: loop devices, mounts, swap and device-mapper tables the tests set up
//!   themselves; RAII guards undo each on drop.
//! - [`polkit`]: a stand-in polkit authority that answers yes or no and records the questions.
//! - [`stall`]: a disk that stops answering (a loop device over a FUSE file that can be made
//!   to wait), whose opens then wait in the kernel.
//!
//! A test that cannot run here (not root, no `dbus-daemon`, no device-mapper, ...) says so with
//! [`skip!`], [`have`] or [`skipped`]: one line `skipped: <test>: <reason>` on stderr (naming the
//! tool and its Debian package), never a silent pass; under `MDPILOT_REQUIRE_ALL=1` it fails.
//!
//! The crate paths the helpers use are imported here and in the submodules only, so a move in
//! `src/` is fixed in one place.

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
pub mod logind;
pub mod loopdev;
pub mod mdadm;
pub mod polkit;
pub mod stall;
pub mod tree;

pub use bus::{Bus, Service};
pub use loopdev::{is_root, LoopDev};
#[allow(unused_imports)] // for the authorization race tests (delay, on_ask)
pub use polkit::Behaviour;
pub use polkit::{Asked, FakePolkit};
pub use tree::FakeTree;

use std::process::Output;

/// The crate's one error-chain printer (`error: cause: cause`), as the CLI prints errors.
pub use mdpilot::error::error_chain;

/// The `mdpilot` binary cargo built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_mdpilot");

/// 1 MiB in bytes.
pub const MIB: u64 = 1 << 20;

/// Whether a skip must fail instead: `MDPILOT_REQUIRE_ALL=1` in the environment (`tests/run` and
/// `.ci/run` set it, so a CI machine that lacks a tool or root cannot pass by skipping).
pub fn require_all() -> bool {
    std::env::var_os("MDPILOT_REQUIRE_ALL").is_some_and(|v| v == "1")
}

/// Prints `skipped: <test>: <reason>` on stderr: the one wording of every skip; also appended to
/// the file `MDPILOT_SKIP_LOG` names, when set (`tests/run` counts the lines there). The test is
/// the libtest thread's name (the test's path); the caller returns by itself (see [`skip!`]) or
/// goes on with the part that can run.
///
/// Panics instead under [`require_all`]: there a skip is a failure.
pub fn skipped(reason: impl std::fmt::Display) {
    assert!(
        !require_all(),
        "{} cannot run here: {reason} (MDPILOT_REQUIRE_ALL=1: a skip is a failure)",
        current_test()
    );
    log_skip(&reason.to_string());
}

/// A skip for a kernel feature this machine's kernel lacks (device-mapper, say): no package can
/// add it, so it is never a failure, not even under [`require_all`]; it is printed and counted
/// as every skip is ([`skipped`]), and `covered_by` names where the behaviour is proven instead
/// (a VM scenario with a real kernel).
pub fn kernel_lacks(feature: &str, covered_by: &str) {
    log_skip(&format!(
        "this kernel has no {feature} (covered by {covered_by})"
    ));
}

/// The running test's name (libtest names each test's thread after the test's path).
fn current_test() -> String {
    let thread = std::thread::current();
    match thread.name() {
        Some(n) if n != "main" => n.to_string(),
        _ => "this test".to_string(),
    }
}

/// Prints and logs one skip line (see [`skipped`]).
fn log_skip(reason: &str) {
    let test = current_test();
    eprintln!("skipped: {test}: {reason}");
    // libtest captures a passing test's stderr: tests/run counts the skips from this file.
    if let Some(log) = std::env::var_os("MDPILOT_SKIP_LOG") {
        use std::io::Write;
        let line = format!("skipped: {test}: {reason}\n");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log);
        // One write per line: O_APPEND keeps the lines of parallel tests whole.
        let _ = file.and_then(|mut f| f.write_all(line.as_bytes()));
    }
}

/// Whether `tool` is an executable file in a `PATH` directory. When it is not, prints the skip
/// line `<tool> not installed (apt-get install <package>)` ([`skipped`], so it fails under
/// [`require_all`]) and returns false; `package` is the Debian package that ships it.
pub fn have(tool: &str, package: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path).any(|dir| {
        std::fs::metadata(dir.join(tool))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    });
    if !found {
        skipped(format_args!(
            "{tool} not installed (apt-get install {package})"
        ));
    }
    found
}

/// `promtool check metrics` (Debian's `prometheus`) on `text`, the exposition named `name` in
/// the failure message; panics with promtool's output when it objects. Skips the check (see
/// [`have`]) when promtool is missing.
pub fn promtool_check_metrics(name: &str, text: &str) {
    use std::io::Write;
    use std::process::{Command, Stdio};
    if !have("promtool", "prometheus") {
        return;
    }
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics rejects {name}:\n{}\n{text}",
        describe(&out)
    );
}

/// `mdpilot --root ROOT policy ARGS` with `MDPILOT_BUS` set to `bus` (the CLI goes through the
/// service on that bus when one runs there), waited for.
pub fn policy_cli(bus: &str, root: &str, args: &[&str]) -> Output {
    std::process::Command::new(BIN)
        .args(["--root", root, "policy"])
        .args(args)
        .env("MDPILOT_BUS", bus)
        .output()
        .unwrap()
}

/// An admin lease request named `holder` on the global speed limits (KiB/s; `None`: no bound).
pub fn global(holder: &str, min: Option<u64>, max: Option<u64>) -> mdpilot::policy::LeaseRequest {
    use mdpilot::policy::{LeaseKind, LeaseRequest, Limits, Owner};
    LeaseRequest {
        holder: holder.into(),
        kind: LeaseKind::Admin,
        owner: Owner::None,
        global: Limits {
            min,
            max,
            io_depth: None,
        },
        arrays: std::collections::BTreeMap::new(),
    }
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

/// The failpoint `MDPILOT_FAILPOINT_WIPE_HOLD` (`--features failpoints`): a wipe job, in the CLI
/// or the service, stands still once `at` bytes are complete and saved in its checkpoint, until
/// its cancel (or forever), so a test stops or kills it at a known point however fast the host
/// writes. The job says `held OFFSET` on a FIFO this helper made.
pub struct WipeHold {
    _dir: tempfile::TempDir,
    fifo: std::path::PathBuf,
    at: u64,
}

impl WipeHold {
    /// A hold at `at` bytes (a new FIFO in a temporary directory).
    pub fn at(at: u64) -> WipeHold {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("held");
        let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid C string; mkfifo has no other precondition.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        WipeHold {
            _dir: dir,
            fifo,
            at,
        }
    }

    /// The environment variable that arms the hold in the process that runs the job.
    pub fn env(&self) -> (&'static str, String) {
        (
            "MDPILOT_FAILPOINT_WIPE_HOLD",
            format!("{}:{}", self.at, self.fifo.display()),
        )
    }

    /// Waits (at most `limit`, a guard against a job that never gets there) until the job
    /// holds; returns the durable offset its checkpoint then says.
    pub fn wait(&self, limit: std::time::Duration) -> u64 {
        use std::io::Read;
        let (tx, rx) = std::sync::mpsc::channel();
        let fifo = self.fifo.clone();
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::fs::File::open(&fifo).and_then(|mut f| f.read_to_string(&mut s));
            let _ = tx.send(s);
        });
        let Ok(held) = rx.recv_timeout(limit) else {
            // Release the blocked reader before failing.
            use std::os::unix::fs::OpenOptionsExt;
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&self.fifo);
            panic!("the wipe job never held at {} bytes", self.at);
        };
        held.trim()
            .strip_prefix("held ")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("the hold said {held:?}"))
    }
}
