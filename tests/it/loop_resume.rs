//! Loop-device tests of wipe resume and member offload (root only; each attaches its own loop devices): the hand-over
//! after a wipe (partitions gone), resume after SIGKILL (bytes written twice counted, random
//! verifies), checkpoint identity refusals.

use crate::support;

use mdpilot::wipe::checkpoint::{self, Checkpoint};
use mdpilot::wipe::plan::{Method, Options};
use mdpilot::wipe::stream::Seed;
use mdpilot::wipe::{Job, Request};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use support::tree::Root;
use support::{LoopDev, BIN, MIB};

fn part_exists(dev: &LoopDev, n: u32) -> bool {
    Path::new(&format!(
        "/sys/class/block/{}/{}p{n}",
        dev.name(),
        dev.name()
    ))
    .exists()
}

fn wipe_now(dev: &Path, method: Method) -> mdpilot::wipe::Outcome {
    let req = Request {
        device: dev.to_path_buf(),
        method,
        options: Options {
            seed: Some(Seed([9; 32])),
            ..Options::default()
        },
    };
    let plan = mdpilot::wipe::plan_for(&Root::system(), &req).unwrap();
    assert!(plan.reread_partitions, "{}", plan.describe());
    Job::new(plan, Root::system())
        .run(&AtomicBool::new(false))
        .unwrap()
}

#[test]
fn loop_signatures_wipe_drops_the_partitions() {
    need_root!();
    let d = LoopDev::partitioned(64 * MIB);
    assert!(
        part_exists(&d, 1) && part_exists(&d, 2),
        "sfdisk made no partitions"
    );
    let o = wipe_now(&d.path, Method::Signatures);
    assert!(o.partitions_reread, "{o:?}");
    assert!(o.uevent_sent, "{o:?}");
    // BLKRRPART is synchronous: the partitions are gone when the job returns.
    assert!(!part_exists(&d, 1) && !part_exists(&d, 2));
}

#[test]
fn loop_zero_wipe_drops_the_partitions() {
    need_root!();
    let d = LoopDev::partitioned(64 * MIB);
    assert!(part_exists(&d, 1));
    let o = wipe_now(&d.path, Method::Zero);
    assert!(o.partitions_reread && o.uevent_sent, "{o:?}");
    assert!(!part_exists(&d, 1) && !part_exists(&d, 2));
}

/// Bytes written to a block device since it appeared (`stat` field 7, 512-byte sectors).
fn written_bytes(dev: &LoopDev) -> u64 {
    let s = std::fs::read_to_string(format!("/sys/block/{}/stat", dev.name())).unwrap();
    s.split_whitespace().nth(6).unwrap().parse::<u64>().unwrap() * 512
}

/// `mdpilot wipe DEV --yes --progress json --state-dir DIR ARGS...`.
fn mdp(dev: &Path, dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.arg("wipe")
        .arg(dev)
        .args(["--yes", "--progress", "json", "--state-dir"])
        .arg(dir)
        .args(args);
    c
}

/// Starts `mdp ... ARGS` held at `at` bytes ([`support::WipeHold`]) and SIGKILLs it there;
/// returns the offset the held job had saved.
fn kill_at(dev: &Path, dir: &Path, args: &[&str], at: u64) -> u64 {
    let hold = support::WipeHold::at(at);
    let (k, v) = hold.env();
    let mut child = mdp(dev, dir, args)
        .env(k, v)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let held = hold.wait(std::time::Duration::from_secs(300));
    child.kill().unwrap();
    child.wait().unwrap();
    held
}

#[test]
fn loop_random_wipe_killed_at_half_resumes_and_verifies() {
    need_root!();
    let size = 1024 * MIB;
    let d = LoopDev::filled(size, 0x5a);
    let state = tempfile::tempdir().unwrap();
    let before = written_bytes(&d);
    let seen = kill_at(&d.path, state.path(), &["--method", "random"], size / 2);
    let first = written_bytes(&d) - before;
    let cks = checkpoint::list(state.path());
    assert_eq!(cks.len(), 1, "one checkpoint after SIGKILL");
    let ck: &Checkpoint = &cks[0].1;
    assert_eq!(ck.method, "random");
    assert!(ck.seed_hex.is_some());
    assert!(ck.durable_offset <= first, "{ck:?}, {first} written");
    assert_eq!(
        ck.durable_offset, seen,
        "the checkpoint is the one the hold saved"
    );
    assert!(seen >= size / 2 && seen < size, "held at {seen} of {size}");

    // A fresh start is refused while the checkpoint exists.
    let o = mdp(&d.path, state.path(), &[]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--resume"));

    let o = mdp(&d.path, state.path(), &["--resume", "--verify"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let last: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(last["outcome"]["verified"], true, "{last}");
    assert_eq!(
        last["outcome"]["resumed_bytes"], ck.durable_offset,
        "{last}"
    );
    let total = written_bytes(&d) - before;
    let twice = total - size;
    eprintln!(
        "resume figures: held and killed with {seen} bytes saved ({first} written), checkpoint at {}, \
         written twice {twice} bytes ({:.1} MiB)",
        ck.durable_offset,
        twice as f64 / MIB as f64
    );
    assert!(twice <= 1024 * MIB + 4 * MIB, "written twice: {twice}");
    assert!(
        checkpoint::list(state.path()).is_empty(),
        "completed job removes its checkpoint"
    );
}

#[test]
fn loop_resume_refuses_a_checkpoint_of_another_size_or_device() {
    need_root!();
    let d = LoopDev::filled(64 * MIB, 0x11);
    let state = tempfile::tempdir().unwrap();
    // No checkpoint: nothing to resume.
    let o = mdp(&d.path, state.path(), &["--resume"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no checkpoint"));
    let req = Request {
        device: d.path.clone(),
        method: Method::Zero,
        options: Options {
            checkpoint_dir: Some(state.path().to_path_buf()),
            ..Options::default()
        },
    };
    let plan = mdpilot::wipe::plan_for(&Root::system(), &req).unwrap();
    let path = plan.checkpoint.as_ref().unwrap().path.clone();
    let mut ck = Checkpoint {
        version: 1,
        device: plan.device.clone(),
        name: plan.name.clone(),
        identity: plan.identity.clone(),
        method: "zero".into(),
        seed_hex: None,
        verify: false,
        ranges: plan.ranges.clone(),
        durable_offset: 32 * MIB,
        resync: None,
        started_by: Default::default(),
        head: None,
    };
    ck.identity.size_bytes = 128 * MIB;
    checkpoint::save(&path, &ck).unwrap();
    let o = mdp(&d.path, state.path(), &["--resume"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("was 134217728 bytes, it is 67108864 bytes now"),
        "{err}"
    );
    // Another device under this name (e.g. after a reboot or a re-attach).
    std::fs::remove_file(&path).unwrap();
    ck.identity = plan.identity.clone();
    ck.identity.stable_id = "by-id:some-other-disk".into();
    checkpoint::save(&state.path().join("other.json"), &ck).unwrap();
    let o = mdp(&d.path, state.path(), &["--resume"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("it is for device by-id:some-other-disk"),
        "{err}"
    );
    // --restart starts again and the finished job leaves no checkpoint of its own.
    let o = mdp(&d.path, state.path(), &["--restart"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(d.read_all().iter().all(|&b| b == 0));
    assert!(!path.exists());
}

#[test]
fn loop_zero_wipe_resumes_from_the_checkpoint_offset() {
    need_root!();
    let d = LoopDev::filled(64 * MIB, 0x77);
    let state = tempfile::tempdir().unwrap();
    let req = Request {
        device: d.path.clone(),
        method: Method::Zero,
        options: Options {
            checkpoint_dir: Some(state.path().to_path_buf()),
            ..Options::default()
        },
    };
    let plan = mdpilot::wipe::plan_for(&Root::system(), &req).unwrap();
    let ck = Checkpoint {
        version: 1,
        device: plan.device.clone(),
        name: plan.name.clone(),
        identity: plan.identity.clone(),
        method: "zero".into(),
        seed_hex: None,
        verify: false,
        ranges: plan.ranges.clone(),
        durable_offset: 40 * MIB,
        resync: None,
        started_by: Default::default(),
        head: checkpoint::head_digest(&plan.op, &plan.ranges),
    };
    checkpoint::save(&plan.checkpoint.as_ref().unwrap().path, &ck).unwrap();
    // What the first run made durable: zeroes below the checkpoint (read back before resuming).
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&d.path)
            .unwrap();
        f.write_all_at(&vec![0u8; (40 * MIB) as usize], 0).unwrap();
        f.sync_all().unwrap();
    }
    let mut req = req;
    req.options.resume = true;
    let plan = mdpilot::wipe::plan_for(&Root::system(), &req).unwrap();
    assert_eq!(plan.total_bytes(), 24 * MIB);
    assert!(
        plan.reasons.iter().any(|r| r.starts_with("resume:")),
        "{:?}",
        plan.reasons
    );
    let o = Job::new(plan, Root::system())
        .run(&AtomicBool::new(false))
        .unwrap();
    assert_eq!((o.bytes, o.resumed_bytes), (24 * MIB, 40 * MIB));
    let data = d.read_all();
    // Below the checkpoint the job read samples back and kept the first run's bytes.
    assert!(data.iter().all(|&b| b == 0));
    assert!(checkpoint::list(state.path()).is_empty());
}

#[test]
fn loop_member_offload_zeroes_each_member_region_only() {
    need_root!();
    use mdpilot::wipe::plan::{MemberRegion, Op, OpenFlags, Plan, Range, ResyncAction};
    use mdpilot::wipe::sink::MemSink;
    use std::sync::Arc;
    let members = [
        LoopDev::filled(16 * MIB, 0xaa),
        LoopDev::filled(16 * MIB, 0xbb),
    ];
    let array = Arc::new(MemSink::new((8 * MIB) as usize, 0xcc));
    let plan = Plan {
        device: "/dev/md-test".into(),
        dev: (0, 0),
        name: "md-test".into(),
        size_bytes: 8 * MIB,
        method: Method::Zero,
        op: Op::ZeroOut,
        open: OpenFlags {
            direct: true,
            exclusive: true,
            read: false,
        },
        block_bytes: 4 * MIB,
        step_bytes: 4 * MIB,
        queue_depth: 1,
        ranges: vec![Range {
            offset: 0,
            len: 8 * MIB,
        }],
        resync: ResyncAction::Leave,
        leases: vec![],
        verify: false,
        reasons: vec![],
        reread_partitions: false,
        identity: Default::default(),
        checkpoint: None,
        offload: members
            .iter()
            .map(|m| MemberRegion {
                name: m.name(),
                path: m.path.clone(),
                dev: Some(m.devnum()),
                size_bytes: 16 * MIB,
                offset_bytes: 2 * MIB,
                len_bytes: 8 * MIB,
            })
            .collect(),
    };
    let o = Job::new(plan, Root::new("/nonexistent-root-for-tests"))
        .with_sink(array.clone())
        .run(&AtomicBool::new(false))
        .unwrap();
    assert!(o.offloaded && o.bytes == 8 * MIB, "{o:?}");
    for (m, fill) in members.iter().zip([0xaa, 0xbb]) {
        let data = m.read_all();
        let (a, b) = ((2 * MIB) as usize, (10 * MIB) as usize);
        assert!(
            data[..a].iter().all(|&x| x == fill),
            "{} before its data region",
            m.name()
        );
        assert!(
            data[a..b].iter().all(|&x| x == 0),
            "{} data region",
            m.name()
        );
        assert!(
            data[b..].iter().all(|&x| x == fill),
            "{} after its data region",
            m.name()
        );
    }
    // The array itself was not written through (its members were).
    assert!(array.contents().iter().all(|&x| x == 0xcc));
}
