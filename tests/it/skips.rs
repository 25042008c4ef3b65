//! The skip rules themselves: a test whose tool is missing says so in one line naming the tool
//! and its Debian package, and under `MDPILOT_REQUIRE_ALL=1` (tests/run, .ci/run) it fails
//! instead of passing. Re-runs one promtool test of this binary with a `PATH` that has no
//! promtool.

use crate::support;

use std::process::{Command, Output};

/// A test that needs promtool and nothing else from `PATH`.
const PROMTOOL_TEST: &str = "metrics_rules::promtool_check_rules_accepts_the_shipped_rules";

/// This binary's [`PROMTOOL_TEST`] with an empty `PATH` directory, `MDPILOT_REQUIRE_ALL` set to
/// `require_all` and the skip log in `dir`.
fn without_promtool(require_all: &str, dir: &std::path::Path) -> Output {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", PROMTOOL_TEST, "--nocapture", "--test-threads=1"])
        .env("PATH", dir)
        .env("MDPILOT_REQUIRE_ALL", require_all)
        .env("MDPILOT_SKIP_LOG", dir.join("skips.txt"))
        .output()
        .unwrap()
}

#[test]
fn require_all_turns_a_missing_tool_into_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let o = without_promtool("1", dir.path());
    let err = support::stderr(&o);
    assert_eq!(o.status.code(), Some(101), "{}", support::describe(&o));
    assert!(
        err.contains("promtool not installed (apt-get install prometheus)")
            && err.contains("MDPILOT_REQUIRE_ALL=1"),
        "{err}"
    );
    assert!(
        !dir.path().join("skips.txt").exists(),
        "a failure, not a skip"
    );
}

#[test]
fn without_require_all_a_missing_tool_is_one_counted_skip_line() {
    let dir = tempfile::tempdir().unwrap();
    let o = without_promtool("0", dir.path());
    assert!(o.status.success(), "{}", support::describe(&o));
    let want =
        format!("skipped: {PROMTOOL_TEST}: promtool not installed (apt-get install prometheus)");
    assert!(
        support::stderr(&o).contains(&want),
        "{}",
        support::describe(&o)
    );
    let log = std::fs::read_to_string(dir.path().join("skips.txt")).unwrap();
    assert_eq!(log, format!("{want}\n"));
}
