//! `mdpilot status` run as the real binary against temporary `--root` trees holding
//! proc/mdstat, proc/sys/dev/raid/* and sys/block/mdN/{md,queue}/*. Nothing touches the host.

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use support::tree::{mdstat_root, write_all, write_speed_limits};
use support::{stderr, stdout, BIN};

const RESYNC: &str = "Personalities : [raid1] [raid6] [raid5] [raid4] \n\
md0 : active raid1 vdb[1] vda[0]\n      523264 blocks super 1.2 [2/2] [UU]\n      \
[=============>.......]  resync = 68.5% (359232/523264) finish=0.0min speed=179616K/sec\n      \
bitmap: 0/8 pages [0KB], 65536KB chunk\n\n\
md1 : active raid0 vdc[0] vdd[1]\n      1046528 blocks super 1.2 512k chunks\n      \n\
unused devices: <none>\n";

fn status(root: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("--root")
        .arg(root)
        .arg("status")
        .args(args)
        .env_remove("MDPILOT_ROOT")
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

/// `actual` without the object keys `contract` lacks, recursively: the contract's fields only
/// (it is additive: new fields may appear beside them).
fn contract_only(actual: &Value, contract: &Value) -> Value {
    match (actual, contract) {
        (Value::Object(a), Value::Object(c)) => Value::Object(
            a.iter()
                .filter_map(|(k, v)| Some((k.clone(), contract_only(v, c.get(k)?))))
                .collect(),
        ),
        (Value::Array(a), Value::Array(c)) if a.len() == c.len() => {
            Value::Array(a.iter().zip(c).map(|(v, w)| contract_only(v, w)).collect())
        }
        _ => actual.clone(),
    }
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn json_follows_the_contract_example() {
    let d = mdstat_root(RESYNC);
    write_speed_limits(d.path());
    let out = status(d.path(), &["--json", "md0"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let expected: Value = serde_json::from_str(
        r#"{
  "speed_limit_min": 1000,
  "speed_limit_max": 200000,
  "personalities": ["raid1", "raid6", "raid5", "raid4"],
  "arrays": [
    {
      "name": "md0",
      "state": "active",
      "read_only": null,
      "level": "raid1",
      "size_kib": 523264,
      "metadata": "1.2",
      "raid_disks": 2,
      "active_disks": 2,
      "member_status": "UU",
      "members": [
        {"name": "vdb", "slot": 1, "flags": []},
        {"name": "vda", "slot": 0, "flags": []}
      ],
      "sync": {
        "action": "resync",
        "state": "running",
        "percent": 68.5,
        "done_kib": 359232,
        "total_kib": 523264,
        "finish_min": 0.0,
        "speed_kib_s": 179616
      },
      "bitmap": {"pages_used": 0, "pages_total": 8, "memory_kib": 0, "chunk_bytes": 67108864, "file": null}
    }
  ],
  "errors": [],
  "warnings": []
}"#,
    )
    .unwrap();
    let got = json(&out);
    assert_eq!(contract_only(&got, &expected), expected);
    // The bitmap facts, added beside the contract's fields: this one has a bitmap.
    assert_eq!(got["arrays"][0]["write_intent_bitmap"], "internal");
    assert_eq!(got["arrays"][0]["bitmap_advised"], false);
    assert_eq!(got["arrays"][0]["full_resync_estimate"], Value::Null);
}

#[test]
fn speed_limits_are_null_without_proc_sys() {
    let d = mdstat_root(RESYNC);
    let v = json(&status(d.path(), &["--json"]));
    assert_eq!(v["speed_limit_min"], Value::Null);
    assert_eq!(v["speed_limit_max"], Value::Null);
    assert_eq!(v["arrays"].as_array().unwrap().len(), 2);
    assert!(
        v["arrays"][0].get("sysfs").is_none(),
        "no sysfs key without sysfs"
    );
}

#[test]
fn sysfs_enriches_and_repair_wins() {
    let d = mdstat_root(RESYNC);
    let b = d.path();
    write_speed_limits(b);
    write_all(
        b,
        "sys/block/md0/md",
        &[
            ("array_state", "active\n"),
            ("level", "raid1\n"),
            ("raid_disks", "2\n"),
            ("degraded", "0\n"),
            ("sync_action", "repair\n"),
            ("sync_completed", "718464 / 1046528\n"),
            ("sync_speed", "179616\n"),
            ("sync_speed_min", "1000 (system)\n"),
            ("sync_speed_max", "50000 (local)\n"),
            ("metadata_version", "1.2\n"),
            ("chunk_size", "0\n"),
            ("component_size", "523264\n"),
            ("uuid", "0c5c1a8e-6f1b-4b3a-9d43-0b6f7c2d9e11\n"),
            ("mismatch_cnt", "0\n"),
            ("dev-vda/state", "in_sync\n"),
            ("dev-vda/slot", "0\n"),
            ("dev-vda/errors", "0\n"),
            ("dev-vdb/state", "in_sync,write_mostly\n"),
            ("dev-vdb/slot", "1\n"),
        ],
    );
    write_all(
        b,
        "sys/block/md0/queue",
        &[
            ("logical_block_size", "512\n"),
            ("physical_block_size", "4096\n"),
            ("optimal_io_size", "0\n"),
        ],
    );
    let out = status(b, &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    let a = &v["arrays"][0];
    assert_eq!(a["sync"]["action"], "repair");
    let s = &a["sysfs"];
    // The array's UUID in mdadm's spelling; md/uuid's text as the extra field.
    assert_eq!(s["uuid"], "0c5c1a8e:6f1b4b3a:9d430b6f:7c2d9e11");
    assert_eq!(s["md_uuid"], "0c5c1a8e-6f1b-4b3a-9d43-0b6f7c2d9e11");
    assert_eq!(s["degraded"], 0);
    assert_eq!(
        s["sync_completed"],
        serde_json::json!({"sectors": {"done": 718464, "total": 1046528}})
    );
    assert_eq!(
        s["sync_speed_min"],
        serde_json::json!({"kib_s": 1000, "system": true})
    );
    assert_eq!(s["sync_speed_max"]["system"], false);
    assert_eq!(s["physical_block_size"], 4096);
    assert_eq!(s["members"][1]["name"], "vdb");
    assert_eq!(
        s["members"][1]["state"],
        serde_json::json!(["in_sync", "write_mostly"])
    );
    assert_eq!(s["members"][0]["errors"], 0);
    // md1 has no sysfs directory: no key at all.
    assert!(v["arrays"][1].get("sysfs").is_none());

    let text = stdout(&status(b, &["md0"]));
    assert!(text.contains("Repair Status"), "{text}");
    assert!(text.contains("UUID : 0c5c1a8e"), "{text}");
    assert!(
        text.contains("min 1000 KiB/s (system), max 50000 KiB/s (local)"),
        "{text}"
    );
}

#[test]
fn human_output_like_mdadm_detail() {
    let d = mdstat_root(RESYNC);
    write_speed_limits(d.path());
    let out = status(d.path(), &[]);
    assert_eq!(out.status.code(), Some(0));
    let t = stdout(&out);
    for want in [
        "/dev/md0:",
        "Raid Level : raid1",
        "State : active, resyncing",
        "Array Size : 511.0 MiB (523264 KiB)",
        "Active Devices : 2 [UU]",
        "Resync Status : [=============>......]  68.5% (359232/523264 KiB) at 175.4 MiB/s, ETA 0s",
        "Bitmap : 0/8 pages [0 KiB], 64.0 MiB chunk",
        "/dev/md1:",
        "Raid Level : raid0",
        "Resync speed limits: min 1000 KiB/s, max 200000 KiB/s",
    ] {
        assert!(t.contains(want), "missing {want:?} in:\n{t}");
    }
}

#[test]
fn array_filter_accepts_names_and_dev_paths() {
    let d = mdstat_root(RESYNC);
    let v = json(&status(d.path(), &["--json", "/dev/md1"]));
    let names: Vec<&str> = v["arrays"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["md1"]);
    let v = json(&status(d.path(), &["--json", "md1", "md0"]));
    assert_eq!(v["arrays"].as_array().unwrap().len(), 2);
}

#[test]
fn unknown_array_is_exit_1_naming_it() {
    let d = mdstat_root(RESYNC);
    let out = status(d.path(), &["md7"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("md7"), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
}

#[test]
fn missing_mdstat_is_exit_1_with_the_message() {
    let d = tempfile::tempdir().unwrap();
    for args in [&["--json"][..], &[][..]] {
        let out = status(d.path(), args);
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(
            stderr(&out).trim(),
            "mdpilot: no /proc/mdstat: the md driver is not loaded"
        );
    }
}

#[test]
fn parse_errors_are_exit_3_and_the_rest_is_shown() {
    let d = mdstat_root(&format!("# cat /proc/mdstat\n{RESYNC}"));
    let out = status(d.path(), &["--json"]);
    assert_eq!(out.status.code(), Some(3));
    let v = json(&out);
    assert_eq!(v["errors"][0]["line"], 1);
    assert_eq!(v["errors"][0]["text"], "# cat /proc/mdstat");
    assert_eq!(v["arrays"].as_array().unwrap().len(), 2);
    let out = status(d.path(), &[]);
    assert_eq!(out.status.code(), Some(3));
    assert!(stdout(&out).contains("/dev/md0:"));
    assert!(stderr(&out).contains("line 1"), "{}", stderr(&out));
}

#[test]
fn non_utf8_mdstat_does_not_fail() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("proc");
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(p.join("mdstat"), b"Personalities : [raid1]\n\xff\xfe\n").unwrap();
    let out = status(d.path(), &["--json"]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(json(&out)["errors"][0]["line"], 2);
}

#[test]
fn no_arrays() {
    let d = mdstat_root("Personalities : \nunused devices: <none>\n");
    let out = status(d.path(), &[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("no md arrays"));
}

/// Every shared fixture through the binary: the exit status says whether errors were expected.
#[test]
fn every_fixture_through_the_binary() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mdstat");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".txt") {
            continue;
        }
        let expected: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("expected").join(format!("{}.json", &name[..3])))
                .unwrap(),
        )
        .unwrap();
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("proc")).unwrap();
        std::fs::copy(&path, d.path().join("proc/mdstat")).unwrap();
        let out = status(d.path(), &["--json"]);
        let want = if expected["errors"].as_array().unwrap().is_empty() {
            0
        } else {
            3
        };
        assert_eq!(out.status.code(), Some(want), "{name}: {}", stderr(&out));
        let arrays = contract_only(&json(&out)["arrays"], &expected["arrays"]);
        assert_eq!(arrays, expected["arrays"], "{name}");
        n += 1;
    }
    assert!(n >= 54, "only {n} fixtures found");
}
