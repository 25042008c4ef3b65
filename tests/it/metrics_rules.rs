//! The shipped alert rules (docs/prometheus/mdpilot-alerts.yml): `promtool check rules`
//! accepts them and `promtool test rules tests/fixtures/metrics/alerts-test.yml` makes each
//! alert fire for a broken series and stay silent for the healthy ones. Needs Debian's
//! `prometheus` package (promtool); prints "skipped: ..." without it.

use crate::support;

use std::path::Path;
use std::process::Command;

/// `promtool ARGS` run in the source tree; `None` (having said "skipped") without promtool.
fn promtool(args: &[&str]) -> Option<std::process::Output> {
    if !support::have("promtool", "prometheus") {
        return None;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let o = Command::new("promtool")
        .args(args)
        .current_dir(root)
        .output();
    Some(o.unwrap_or_else(|e| panic!("promtool: {e}")))
}

fn assert_ok(what: &str, o: &std::process::Output) {
    assert!(
        o.status.success(),
        "{what} failed:\n{}",
        support::describe(o)
    );
}

#[test]
fn promtool_check_rules_accepts_the_shipped_rules() {
    let Some(o) = promtool(&["check", "rules", "docs/prometheus/mdpilot-alerts.yml"]) else {
        return;
    };
    assert_ok("promtool check rules", &o);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("SUCCESS: 8 rules found"), "{out}");
}

#[test]
fn promtool_test_rules_each_alert_fires_and_stays_silent_when_healthy() {
    let Some(o) = promtool(&["test", "rules", "tests/fixtures/metrics/alerts-test.yml"]) else {
        return;
    };
    assert_ok("promtool test rules", &o);
}

/// Every alert of the rules file has a test group, and every metric the rules use is one the
/// code renders (a renamed family would otherwise leave an alert that never fires).
#[test]
fn rules_use_only_rendered_families_and_each_alert_is_tested() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let rules = std::fs::read_to_string(root.join("docs/prometheus/mdpilot-alerts.yml")).unwrap();
    let tests =
        std::fs::read_to_string(root.join("tests/fixtures/metrics/alerts-test.yml")).unwrap();
    let names: Vec<&str> = mdpilot::metrics::FAMILIES.iter().map(|(n, _)| *n).collect();
    for word in rules.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if word.starts_with("mdpilot_") && !word.ends_with('_') {
            assert!(
                names.contains(&word),
                "the rules use {word}, which is not rendered"
            );
        }
    }
    for line in rules.lines() {
        if let Some(alert) = line.trim().strip_prefix("- alert: ") {
            assert!(
                tests.contains(&format!("alertname: {alert}\n")),
                "{alert} has no promtool test"
            );
        }
    }
}
