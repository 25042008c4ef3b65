//! `mdpilot bitmap add` and the advisor in `mdpilot status`, run as the real binary against
//! temporary `--root` trees shaped like Linux 7.3's md sysfs (`bitmap_type`, `logical_block_size`,
//! `consistency_policy`, `bitmap/location`), with a stand-in mdadm that records its argv
//! ([`support::mdadm::FakeMdadm`]; `tests/vm` runs the real one).

use crate::support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use support::mdadm::FakeMdadm;
use support::tree::{mdstat_root, write_all, write_speed_limits};
use support::{assert_exit, stderr, stdout, BIN};

const UUID: &str = "3b6c2a6e-0d0e-4b7a-9d5e-8a7b1c2d3e4f";
const MDADM_UUID: &str = "3b6c2a6e:0d0e4b7a:9d5e8a7b:1c2d3e4f";

/// md0: a raid1 of 2 × 1 GiB, created on 7.3 by `mdadm --create --run` (mdadm 4.4: no bitmap),
/// `action` in `md/sync_action`; md1: a raid0.
fn tree(action: &str) -> tempfile::TempDir {
    let sync = if action == "resync" {
        "      [==>..................]  resync = 12.5% (131072/1048576) finish=15.2min speed=1000K/sec\n"
    } else {
        ""
    };
    let d = mdstat_root(&format!(
        "Personalities : [raid0] [raid1]\n\
         md0 : active raid1 vdb[1] vda[0]\n      1048576 blocks super 1.2 [2/2] [UU]\n{sync}      \n\
         md1 : active raid0 vdd[1] vdc[0]\n      2095104 blocks super 1.2 512k chunks\n      \n\
         unused devices: <none>\n"
    ));
    write_speed_limits(d.path());
    let completed = if action == "resync" {
        "262144 / 2097152"
    } else {
        "none"
    };
    write_all(
        d.path(),
        "sys/block/md0/md",
        &[
            ("level", "raid1\n"),
            ("array_state", "clean\n"),
            ("metadata_version", "1.2\n"),
            ("component_size", "1048576\n"),
            ("uuid", &format!("{UUID}\n")),
            ("sync_action", &format!("{action}\n")),
            ("sync_completed", &format!("{completed}\n")),
            ("sync_speed_min", "1000 (system)\n"),
            ("sync_speed_max", "200000 (system)\n"),
            ("consistency_policy", "resync\n"),
            ("bitmap/location", "none\n"),
            ("bitmap_type", "[none] bitmap\n"),
            ("logical_block_size", "512\n"),
        ],
    );
    write_all(
        d.path(),
        "sys/block/md1/md",
        &[("level", "raid0\n"), ("consistency_policy", "none\n")],
    );
    d
}

fn mdpilot(root: &Path, mdadm: &FakeMdadm, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.arg("--root")
        .arg(root)
        .args(args)
        .env("MDPILOT_MDADM", mdadm.program())
        .env_remove("MDPILOT_ROOT")
        .env_remove("RUST_LOG");
    c
}

fn run(root: &Path, mdadm: &FakeMdadm, args: &[&str]) -> Output {
    mdpilot(root, mdadm, args).output().unwrap()
}

#[test]
fn an_idle_array_gets_its_bitmap_from_mdadm_at_once() {
    let d = tree("idle");
    let mdadm = FakeMdadm::new(0);
    let out = run(d.path(), &mdadm, &["bitmap", "add", "/dev/md0"]);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("md0: added an internal write-intent bitmap"),
        "{}",
        stdout(&out)
    );
    assert_eq!(mdadm.calls(), ["--grow --bitmap=internal /dev/md0"]);
    // The stand-in changed the tree as md does: a second add runs nothing.
    let out = run(d.path(), &mdadm, &["bitmap", "add", "md0"]);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("has a internal bitmap already") || stdout(&out).contains("already")
    );
    assert_eq!(mdadm.calls().len(), 1);
}

#[test]
fn refusals_are_clear_and_run_nothing() {
    let d = tree("resync");
    let mdadm = FakeMdadm::new(0);
    // A resync runs: md would refuse; without --wait or --queue the command says what to do.
    let out = run(d.path(), &mdadm, &["bitmap", "add", "md0"]);
    assert_exit(&out, 1);
    assert!(
        stderr(&out).contains("md0 runs resync") && stderr(&out).contains("--wait"),
        "{}",
        stderr(&out)
    );
    // No redundancy; an unknown array.
    let out = run(d.path(), &mdadm, &["bitmap", "add", "md1", "md7"]);
    assert_exit(&out, 1);
    assert!(stderr(&out).contains("md1 is raid0"), "{}", stderr(&out));
    assert!(stderr(&out).contains("md7"), "{}", stderr(&out));
    assert!(mdadm.calls().is_empty());
    // mdadm's own failure is reported with its message.
    let d = tree("idle");
    let failing = FakeMdadm::new(1);
    let out = run(d.path(), &failing, &["bitmap", "add", "md0"]);
    assert_exit(&out, 1);
    assert!(
        stderr(&out).contains("Cannot add bitmap while array is resyncing"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn queue_leaves_it_to_the_service_in_bitmap_wanted() {
    let d = tree("resync");
    let mdadm = FakeMdadm::new(0);
    let out = run(d.path(), &mdadm, &["bitmap", "add", "--queue", "md0"]);
    assert_exit(&out, 0);
    let wanted = d.path().join("var/lib/mdpilot/bitmap-wanted");
    assert_eq!(
        std::fs::read_to_string(&wanted).unwrap(),
        format!("{MDADM_UUID}\n")
    );
    // Twice: one line.
    assert_exit(
        &run(d.path(), &mdadm, &["bitmap", "add", "--queue", "md0"]),
        0,
    );
    assert_eq!(
        std::fs::read_to_string(&wanted).unwrap(),
        format!("{MDADM_UUID}\n")
    );
    assert!(mdadm.calls().is_empty());
}

#[test]
fn wait_adds_the_bitmap_once_the_resync_has_ended() {
    let d = tree("resync");
    let mdadm = FakeMdadm::new(0);
    let mut child = mdpilot(d.path(), &mdadm, &["bitmap", "add", "--wait", "md0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // It says it waits once it has seen the resync: only then does the resync end.
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut err, &mut line).unwrap();
    assert!(line.contains("md0 runs resync; waiting"), "{line}");
    assert!(mdadm.calls().is_empty(), "nothing ran during the resync");
    // The resync ends (as md shows it): the command sees idle and adds the bitmap.
    support::tree::replace(d.path(), "sys/block/md0/md/sync_action", "idle\n");
    support::tree::replace(d.path(), "sys/block/md0/md/sync_completed", "none\n");
    let out = child.wait_with_output().unwrap();
    assert_exit(&out, 0);
    assert_eq!(mdadm.calls(), ["--grow --bitmap=internal /dev/md0"]);
}

#[test]
fn status_shows_the_advisor_and_the_new_attributes() {
    let d = tree("idle");
    let mdadm = FakeMdadm::new(0);
    let out = run(d.path(), &mdadm, &["status"]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    for want in [
        "     Consistency : resync",
        "     Bitmap Type : none",
        "          Bitmap : none: a crash or power loss means a full resync, about 17m 29s at speed_limit_min 1000 KiB/s",
        "   Logical Block : 512 bytes (recorded in the superblock: Linux 6.18 and older cannot assemble it)",
        "Warning: md0 has no write-intent bitmap",
        "Warning: md0: its superblock records a logical block size (512 bytes",
    ] {
        assert!(text.contains(want), "{want:?} in\n{text}");
    }
    let v: serde_json::Value =
        serde_json::from_slice(&run(d.path(), &mdadm, &["status", "--json"]).stdout).unwrap();
    let md0 = &v["arrays"][0];
    assert_eq!(md0["write_intent_bitmap"], "none");
    assert_eq!(md0["bitmap_advised"], true);
    assert_eq!(md0["full_resync_estimate"]["basis"], "speed_limit_min");
    assert_eq!(md0["full_resync_estimate"]["kib"], 1_048_576);
    assert_eq!(md0["sysfs"]["bitmap_type"], "none");
    assert_eq!(md0["sysfs"]["md_logical_block_size"], 512);
    assert_eq!(md0["sysfs"]["consistency_policy"], "resync");
    assert_eq!(
        v["arrays"][1]["write_intent_bitmap"],
        serde_json::Value::Null
    );
    assert_eq!(v["warnings"].as_array().unwrap().len(), 2, "{v}");
    // Attributes that vanish (6.19+ removes bitmap/ without a bitmap; an older kernel has
    // none of them) are no error: the array shows what is left.
    std::fs::remove_dir_all(d.path().join("sys/block/md0/md/bitmap")).unwrap();
    std::fs::remove_file(d.path().join("sys/block/md0/md/bitmap_type")).unwrap();
    std::fs::remove_file(d.path().join("sys/block/md0/md/logical_block_size")).unwrap();
    let out = run(d.path(), &mdadm, &["status"]);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("          Bitmap : none: a crash"),
        "{}",
        stdout(&out)
    );
    assert!(!stdout(&out).contains("Logical Block"), "{}", stdout(&out));
}
