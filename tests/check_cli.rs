//! `mdpilot check` on a temporary `--root` tree: the kernel files it writes (`sync_action`,
//! `sync_min`, `sync_speed_max` through the lease) and the record it keeps. The test plays the
//! kernel by editing the files between commands. Nothing touches the host.

mod support;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use support::tree::{read_trim, write};
use support::{describe, BIN};

const IDLE: &str = "Personalities : [raid5]\nmd0 : active raid5 loop2[2] loop1[1] loop0[0]\n      2093056 blocks super 1.2 level 5, 512k chunk, algorithm 2 [3/3] [UUU]\n\nunused devices: <none>\n";
const CHECKING: &str = "Personalities : [raid5]\nmd0 : active raid5 loop2[2] loop1[1] loop0[0]\n      2093056 blocks super 1.2 level 5, 512k chunk, algorithm 2 [3/3] [UUU]\n      [====>................]  check = 25.0% (261632/1046528) finish=0.1min speed=100000K/sec\n\nunused devices: <none>\n";

fn tree() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let r = d.path();
    write(r, "proc/mdstat", IDLE);
    write(r, "proc/sys/dev/raid/speed_limit_min", "1000\n");
    write(r, "proc/sys/dev/raid/speed_limit_max", "200000\n");
    for (f, v) in [
        ("sync_action", "idle"),
        ("sync_min", "0"),
        ("sync_completed", "none"),
        ("chunk_size", "524288"),
        ("uuid", "0a1b2c3d:00000000:00000000:00000001"),
        ("mismatch_cnt", "0"),
        ("level", "raid5"),
        ("sync_speed_min", "1000 (system)"),
        ("sync_speed_max", "200000 (system)"),
    ] {
        write(r, &format!("sys/block/md0/md/{f}"), &format!("{v}\n"));
    }
    d
}

fn check(root: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("--root")
        .arg(root)
        .arg("check")
        .args(args)
        .env_remove("MDPILOT_ROOT")
        .env_remove("MDPILOT_BUS")
        .output()
        .unwrap()
}

fn md(root: &Path, f: &str) -> String {
    read_trim(root.join("sys/block/md0/md").join(f))
}

fn record(root: &Path) -> String {
    std::fs::read_to_string(root.join("var/lib/mdpilot/checks.toml")).unwrap()
}

#[test]
fn start_throttle_pause_resume_finish() {
    let d = tree();
    let r = d.path();
    let o = check(r, &["start", "--max", "5000", "md0"]);
    assert!(o.status.success(), "{}", describe(&o));
    assert_eq!(md(r, "sync_action"), "check");
    assert_eq!(md(r, "sync_min"), "0");
    assert_eq!(md(r, "sync_speed_max"), "5000");
    assert!(record(r).contains("running = \"check\""), "{}", record(r));

    // The kernel runs it: a quarter done.
    write(r, "proc/mdstat", CHECKING);
    write(r, "sys/block/md0/md/sync_completed", "523300 / 2093056\n");
    let o = check(r, &["status", "--json", "md0"]);
    assert!(o.status.success(), "{}", describe(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["arrays"][0]["sync_action"], "check");
    assert_eq!(v["arrays"][0]["percent"], 25.0);

    // Another sync may not be started over it.
    let o = check(r, &["start", "md0"]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));

    let o = check(r, &["pause", "/dev/md0"]);
    assert!(o.status.success(), "{}", describe(&o));
    assert_eq!(md(r, "sync_action"), "idle");
    assert_ne!(md(r, "sync_speed_max"), "5000");
    // 523300 rounded down to the 512 KiB chunk (1024 sectors).
    assert!(record(r).contains("sectors = 523264"), "{}", record(r));

    // The kernel kept sync_min at the interruption point; resume writes ours.
    write(r, "proc/mdstat", IDLE);
    write(r, "sys/block/md0/md/sync_completed", "none\n");
    write(r, "sys/block/md0/md/sync_min", "523300\n");
    // The kernel's read-back form of the released limit.
    write(r, "sys/block/md0/md/sync_speed_max", "200000 (system)\n");
    let o = check(r, &["resume", "md0"]);
    assert!(o.status.success(), "{}", describe(&o));
    assert_eq!(md(r, "sync_min"), "523264");
    assert_eq!(md(r, "sync_action"), "check");
    // Without --max, the throttle it was started with.
    assert_eq!(md(r, "sync_speed_max"), "5000");

    // It finishes: the kernel resets sync_min and counts mismatches.
    write(r, "sys/block/md0/md/sync_action", "idle\n");
    write(r, "sys/block/md0/md/sync_min", "0\n");
    write(r, "sys/block/md0/md/mismatch_cnt", "16\n");
    let o = check(r, &["status", "--json"]);
    assert!(o.status.success(), "{}", describe(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let a = &v["arrays"][0];
    assert_eq!(a["last"]["mismatch_cnt"], 16);
    assert_eq!(a["mismatch_warning"], true, "{a}");
    assert_eq!(a["position"], Value::Null);
    let o = check(r, &["status"]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("mismatch_cnt 16 (warning: parity mismatches)"),
        "{}",
        describe(&o)
    );

    // Nothing to resume now; cancel is always allowed.
    let o = check(r, &["resume", "md0"]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    let o = check(r, &["cancel", "md0"]);
    assert!(o.status.success(), "{}", describe(&o));
    assert_eq!(md(r, "sync_min"), "0");
    let o = check(r, &["status", "md9"]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
}
