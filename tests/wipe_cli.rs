//! The wipe commands' command-line contract without a device: exit codes of usage errors and
//! the documented exit statuses. (Device tests are in `loop_wipe.rs`.)

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_mdpilot");

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
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
