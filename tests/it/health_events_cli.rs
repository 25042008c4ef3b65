//! `mdpilot status --test` exit codes and `mdpilot monitor --events` run as the real binary
//! against temporary `--root` trees (proc/mdstat, sys/block/mdN/md/*). Nothing touches the host.

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use support::tree::{mdstat_root, replace, write};
use support::{stderr, BIN};

const R1_OK: &str = "Personalities : [raid1]\nmd1 : active raid1 loop4[1] loop3[0]\n      1046528 blocks super 1.2 [2/2] [UU]\n\nunused devices: <none>\n";
const R1_FAILED: &str = "Personalities : [raid1]\nmd1 : active raid1 loop4[1](F) loop3[0]\n      1046528 blocks super 1.2 [2/1] [U_]\n\nunused devices: <none>\n";
const R5_LOST: &str = "Personalities : [raid5]\nmd2 : active raid5 loop2[2](F) loop1[1](F) loop0[0]\n      2093056 blocks super 1.2 level 5, 512k chunk, algorithm 2 [3/1] [U__]\n\nunused devices: <none>\n";
const R5_CREATED: &str = "Personalities : [raid6] [raid5] [raid4]\nmd0 : active raid5 loop2[3] loop1[1] loop0[0]\n      2093056 blocks super 1.2 level 5, 512k chunk, algorithm 2 [3/2] [UU_]\n      [>....................]  recovery =  3.1% (32768/1046528) finish=0.5min speed=32768K/sec\n\nunused devices: <none>\n";

fn status_test(root: &Path) -> Option<i32> {
    let out = Command::new(BIN)
        .arg("--root")
        .arg(root)
        .args(["status", "--test"])
        .env_remove("MDPILOT_ROOT")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    out.status.code()
}

#[test]
fn status_test_exits_like_mdadm_detail_test() {
    assert_eq!(status_test(mdstat_root(R1_OK).path()), Some(0));
    assert_eq!(status_test(mdstat_root(R1_FAILED).path()), Some(1));
    assert_eq!(status_test(mdstat_root(R5_LOST).path()), Some(2));
    let both = format!(
        "{R1_FAILED}{}",
        R5_LOST.replace("Personalities : [raid5]\n", "")
    );
    assert_eq!(status_test(mdstat_root(&both).path()), Some(2));
    let none = tempfile::tempdir().unwrap();
    assert_eq!(status_test(none.path()), Some(4));
    let help = Command::new(BIN)
        .args(["status", "--help"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(text.contains("mdadm --detail --test"), "{text}");
}

/// Runs `monitor --events` with a 50 ms re-read; lines arrive on the returned channel.
/// The monitor's process, killed and reaped when dropped: also when an assertion fails first.
struct Monitor(std::process::Child);

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn monitor(root: &Path, json: bool) -> (Monitor, mpsc::Receiver<String>) {
    let mut cmd = Command::new(BIN);
    cmd.arg("--root")
        .arg(root)
        .args(["monitor", "--events", "--interval-ms", "50"])
        .env_remove("MDPILOT_ROOT")
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if json {
        cmd.arg("--json");
    }
    let mut child = cmd.spawn().unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    (Monitor(child), rx)
}

fn next(rx: &mpsc::Receiver<String>) -> String {
    rx.recv_timeout(Duration::from_secs(10))
        .expect("an event line within 10 s")
}

#[test]
fn monitor_events_reports_fail_and_degraded_and_a_fresh_raid5_build() {
    let d = mdstat_root(R1_OK);
    let (child, rx) = monitor(d.path(), false);
    std::thread::sleep(Duration::from_millis(300));
    replace(d.path(), "proc/mdstat", R1_FAILED);
    assert_eq!(next(&rx), "Fail md1 loop4 severity=critical");
    assert_eq!(next(&rx), "DegradedArray md1 severity=critical");
    // A raid5 created now: its recovery is the initial build, not a degradation.
    let both = format!(
        "{}{}",
        R5_CREATED.replace("\nunused devices: <none>\n", ""),
        R1_FAILED.replace("Personalities : [raid1]\n", "")
    );
    replace(d.path(), "proc/mdstat", &both);
    assert_eq!(next(&rx), "NewArray md0");
    assert_eq!(next(&rx), "InitialBuildStarted md0 action=recovery");
    drop(child);
    assert!(rx.recv_timeout(Duration::from_secs(2)).is_err());
}

#[test]
fn monitor_events_json_and_oneshot() {
    let d = mdstat_root(R1_FAILED);
    write(
        d.path(),
        "sys/block/md1/md/uuid",
        "0a1b2c3d-0000-0000-0000-000000000001\n",
    );
    let out = Command::new(BIN)
        .arg("--root")
        .arg(d.path())
        .args(["monitor", "--events", "--oneshot", "--json"])
        .env_remove("MDPILOT_ROOT")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let line = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(v["event"], "DegradedArray");
    assert_eq!(v["array"], "md1");
    assert_eq!(v["severity"], "critical");
    // mdadm's spelling of md/uuid, as the journal's MD_UUID= and udev's MD_UUID.
    assert_eq!(v["uuid"], "0a1b2c3d:00000000:00000000:00000001");
    // --oneshot needs --events.
    let bad = Command::new(BIN)
        .args(["monitor", "--oneshot"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}
