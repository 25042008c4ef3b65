//! `mdpilot check` on a temporary `--root` tree: the kernel files it writes (`sync_action`,
//! `sync_min`, `sync_speed_max` through the lease) and the record it keeps. The test plays the
//! kernel by editing the files between commands. Nothing touches the host.

use crate::support;

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

/// `check_max_working` inside `working_hours`, `check_max` outside: at start, and for a running
/// check the service's upkeep rewrites the lease when the band begins or ends.
#[test]
fn working_hours_throttle_follows_the_clock() {
    let d = tree();
    let r = d.path();
    write(
        r,
        "etc/mdpilot/config.d/50-check.toml",
        "[check]\ncheck_max = 20000\ncheck_max_working = 5000\n\
         working_hours = \"*-*-* 08:00:00\"\nworking_hours_length = \"10h\"\n",
    );
    let root = mdpilot::host::Root::new(r);
    let config = mdpilot::config::Config::load(&root).unwrap();
    // 09:00 and 20:00 local time of one day (offset from this machine's TZ).
    let at = |h: i64| {
        let t = 20_000 * 86_400 + h * 3600;
        t - mdpilot::host::utc_offset_s(t)
    };
    let off = |t: i64| mdpilot::host::utc_offset_s(t);
    assert_eq!(config.check.check_max_at(at(9), off(at(9))), Some(5000));
    assert_eq!(config.check.check_max_at(at(20), off(at(20))), Some(20000));
    assert_eq!(
        config.check.check_max_at(at(18), off(at(18))),
        Some(20000),
        "end is exclusive"
    );

    // Started by hand without --max: the config's value for now, either band.
    let o = check(r, &["start", "md0"]);
    assert!(o.status.success(), "{}", describe(&o));
    let first = md(r, "sync_speed_max");
    assert!(first == "5000" || first == "20000", "{first}");
    write(r, "proc/mdstat", CHECKING);
    write(r, "sys/block/md0/md/sync_completed", "523300 / 2093056\n");
    let model = |root: &mdpilot::host::Root| mdpilot::sysfs::collect(root).unwrap();
    for (h, want) in [(9, "5000"), (20, "20000"), (10, "5000")] {
        let now = u64::try_from(at(h)).unwrap();
        mdpilot::check::run::upkeep_all(&root, &config, &model(&root), now).unwrap();
        assert_eq!(md(r, "sync_speed_max"), want, "at {h}:00");
    }
    // An explicit --max is the admin's: working hours leave it alone.
    let o = check(r, &["pause", "md0"]);
    assert!(o.status.success(), "{}", describe(&o));
    write(r, "proc/mdstat", IDLE);
    // The kernel's read-back of the released limit.
    write(r, "sys/block/md0/md/sync_speed_max", "200000 (system)\n");
    let o = check(r, &["resume", "--max", "7000", "md0"]);
    assert!(o.status.success(), "{}", describe(&o));
    write(r, "proc/mdstat", CHECKING);
    mdpilot::check::run::upkeep_all(&root, &config, &model(&root), u64::try_from(at(9)).unwrap())
        .unwrap();
    assert_eq!(md(r, "sync_speed_max"), "7000");
}

/// A pause keeps the point md has reached, not md's checkpoint: on the simulated tree, where
/// `md/sync_completed` moves only every 1/16 of the sync (as md's `curr_resync_completed`) and
/// `/proc/mdstat` shows the exact count, the record holds mdstat's point (rounded down to
/// 4 KiB), md itself keeps only its checkpoint in `sync_min`, and the resume writes the
/// record's point there: nothing between the checkpoint and the pause is checked twice.
#[test]
fn a_pause_keeps_the_point_mdstat_shows_not_mds_checkpoint() {
    let mut sim = support::tree::Sim::create().unwrap();
    sim.set_checkpoint(Some(16));
    let r = sim.path().to_path_buf();
    let o = check(&r, &["start", "md0"]);
    assert!(o.status.success(), "{}", describe(&o));
    sim.absorb_writes().unwrap();
    // md0: 2097152 sectors per member, the checkpoint every 131072; at 200000 KiB/s half a
    // second reaches 200000 sectors (mdstat: 100000 KiB), the checkpoint 131072.
    sim.step(std::time::Duration::from_millis(500)).unwrap();
    assert_eq!(md(&r, "sync_completed"), "131072 / 2097152");
    let mdstat = read_trim(r.join("proc/mdstat"));
    assert!(mdstat.contains("(100000/1048576)"), "{mdstat}");
    let o = check(&r, &["pause", "md0"]);
    assert!(o.status.success(), "{}", describe(&o));
    assert!(record(&r).contains("sectors = 200000"), "{}", record(&r));
    assert!(
        record(&r).contains("total_sectors = 2097152"),
        "{}",
        record(&r)
    );
    // md stops there and keeps its checkpoint in sync_min; the resume writes the record's.
    sim.absorb_writes().unwrap();
    assert_eq!(md(&r, "sync_min"), "131072");
    let o = check(&r, &["resume", "md0"]);
    assert!(o.status.success(), "{}", describe(&o));
    assert_eq!(md(&r, "sync_min"), "200000");
    assert_eq!(md(&r, "sync_action"), "check");
    let o = check(&r, &["cancel", "md0"]);
    assert!(o.status.success(), "{}", describe(&o));
}

/// With `[check] pressure_target`, a check starts (and resumes) under the pressure throttle's
/// first decision, written before `sync_action`: above the band the floor, below it the
/// ceiling. No service runs here, so nothing else could have written the limit.
#[test]
fn a_pressure_throttled_check_starts_under_its_first_decision() {
    let pressure = |full: f64| {
        format!("some avg10={full:.2} avg60=0.00 avg300=0.00 total=5\nfull avg10={full:.2} avg60=0.00 avg300=0.00 total=5\n")
    };
    let d = tree();
    let r = d.path();
    write(
        r,
        "etc/mdpilot/config.d/50-pressure.toml",
        "[check]\npressure_target = \"full 5%..10%\"\npressure_floor = 2000\npressure_ceiling = 20000\n",
    );
    write(r, "proc/pressure/io", &pressure(30.0));
    let o = check(r, &["start", "md0"]);
    assert!(o.status.success(), "{}", describe(&o));
    assert_eq!(md(r, "sync_action"), "check");
    assert_eq!(md(r, "sync_speed_max"), "2000");

    let o = check(r, &["pause", "md0"]);
    assert!(o.status.success(), "{}", describe(&o));
    write(r, "sys/block/md0/md/sync_speed_max", "200000 (system)\n");
    write(r, "proc/pressure/io", &pressure(0.5));
    let o = check(r, &["resume", "md0"]);
    assert!(o.status.success(), "{}", describe(&o));
    assert_eq!(md(r, "sync_action"), "check");
    assert_eq!(md(r, "sync_speed_max"), "20000");
}
