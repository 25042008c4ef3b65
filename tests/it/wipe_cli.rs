//! The wipe commands' command-line contract without a device: exit codes of usage errors and
//! the documented exit statuses. (Device tests are in `loop_wipe.rs`.)

use crate::support;

use std::process::Command;
use support::{stderr, stdout, BIN};

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    (out.status.code(), stdout(&out), stderr(&out))
}

#[test]
fn blockdev_wipe_usage_errors_exit_1_with_the_message() {
    let (code, _, err) = run(&["blockdev-wipe", "-s", "abc", "/dev/null"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("invalid value 'abc'"), "{err}");
    let (code, _, err) = run(&["blockdev-wipe"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("<DEVICE>"), "{err}");
    let (code, _, err) = run(&["--root", "/", "blockdev-wipe", "--bogus", "/dev/null"]);
    assert_eq!(code, Some(1), "{err}");
}

#[test]
fn blockdev_wipe_usage_errors_exit_1_when_invoked_by_that_name() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("blockdev-wipe");
    std::os::unix::fs::symlink(BIN, &link).unwrap();
    let out = Command::new(&link).args(["-s", "abc"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let out = Command::new(&link).arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn blockdev_wipe_help_exits_0_and_documents_exit_codes() {
    let (code, out, _) = run(&["blockdev-wipe", "--help"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("Exit status"), "{out}");
}

#[test]
fn other_commands_keep_clap_usage_exit_2() {
    let (code, _, _) = run(&["wipe"]);
    assert_eq!(code, Some(2));
    let (code, _, _) = run(&["status", "--bogus"]);
    assert_eq!(code, Some(2));
}

#[test]
fn wipe_help_documents_exit_codes() {
    let (code, out, _) = run(&["wipe", "--help"]);
    assert_eq!(code, Some(0));
    for needle in ["Exit status", "not confirmed", "130", "refused"] {
        assert!(out.contains(needle), "{needle}: {out}");
    }
}

#[test]
fn wipe_error_before_the_job_with_progress_json_prints_an_error_event() {
    let (code, out, err) = run(&["wipe", "--yes", "--progress", "json", "/dev/does-not-exist"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("/dev/does-not-exist"), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(v["event"], "error");
    assert_eq!(v["exit_code"], 1);
    assert!(v["message"]
        .as_str()
        .unwrap()
        .contains("/dev/does-not-exist"));
}

fn progress(
    phase: mdpilot::wipe::Phase,
    done: u64,
    verified: u64,
    rate: f64,
) -> mdpilot::wipe::Progress {
    mdpilot::wipe::Progress {
        done_bytes: done,
        total_bytes: 1 << 30,
        verified_bytes: verified,
        rate_bytes_per_s: rate,
        elapsed_s: 1.0,
        phase,
    }
}

#[test]
fn progress_bar_shows_no_eta_before_the_first_durable_bytes() {
    use mdpilot::cli::progress::BarFields;
    use mdpilot::wipe::Phase;
    for pr in [
        progress(Phase::Starting, 0, 0, 0.0),
        progress(Phase::Wipe, 0, 0, 0.0),
        progress(Phase::Verify, 1 << 30, 0, 0.0),
    ] {
        let f = BarFields::of(&pr).unwrap();
        assert_eq!(f.tail, "", "{pr:?}");
        assert!(!f.tail.contains("ETA"), "{pr:?}");
    }
    let f = BarFields::of(&progress(Phase::Wipe, 1 << 29, 0, 100.0 * 1048576.0)).unwrap();
    assert_eq!(f.message, "wipe");
    assert_eq!(f.position, 1 << 29);
    assert_eq!(f.tail, "100 MiB/s ETA 6s");
    // Flush keeps the rate but has no ETA; verify counts read-back bytes.
    let f = BarFields::of(&progress(Phase::Flush, 1 << 30, 0, 1048576.0)).unwrap();
    assert_eq!(f.tail, "1 MiB/s");
    let f = BarFields::of(&progress(Phase::Verify, 1 << 30, 1 << 28, 1048576.0)).unwrap();
    assert_eq!((f.message, f.position), ("verify", 1 << 28));
    assert!(f.tail.ends_with("ETA 12m48s"), "{}", f.tail);
}

#[test]
fn progress_bar_draws_no_done_frame_before_the_final_full_bar() {
    use mdpilot::cli::progress::BarFields;
    use mdpilot::wipe::Phase;
    // The Done snapshot is left to the caller, which sets the full position and then "done".
    assert_eq!(BarFields::of(&progress(Phase::Done, 0, 0, 0.0)), None);
    assert_eq!(BarFields::of(&progress(Phase::Done, 1 << 30, 0, 5.0)), None);
}

#[test]
fn blockdev_wipe_block_size_out_of_bounds_exits_1_without_a_panic() {
    for s in ["18446744073709551615", "0", "511", "1000", "134217728"] {
        let (code, _, err) = run(&["blockdev-wipe", "-s", s, "/dev/null"]);
        assert_eq!(code, Some(1), "-s {s}: {err}");
        assert!(err.contains("multiple of 512"), "-s {s}: {err}");
        assert!(!err.contains("panicked"), "-s {s}: {err}");
    }
    // partman-crypto's 512 KiB passes the bound (then /dev/null is refused: not a block device).
    let (code, _, err) = run(&["blockdev-wipe", "-s", "524288", "/dev/null"]);
    assert_eq!(code, Some(1));
    assert!(!err.contains("block size"), "{err}");
}
