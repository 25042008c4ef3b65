//! Auto-resume of wipe jobs: `mdpilot serve` continues, when it starts, the wipe jobs it ran
//! before it was killed, from their checkpoints under `<root>/var/lib/mdpilot/wipe`; it leaves
//! CLI checkpoints, checkpoints of devices that no longer match, and everything when
//! `wipe.auto_resume` is off. Root only (loop devices the tests attach themselves); a private
//! `dbus-daemon`; the service runs with `--root` over [`job_root`] (host `/sys` and `/dev`).

use crate::support;

use mdpilot::wipe::checkpoint::{self, Checkpoint};
use mdpilot::wipe::plan::{Method, Options, StartedBy};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::bus::{
    call, job_signals, jobs_path, managed_objects, next_before, opts, MANAGER_IFACE, MANAGER_PATH,
};
use support::tree::job_root;
use support::{Bus, LoopDev, Service, MIB};
use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};

/// The first `Completed(b, s)` under the jobs path: (job path, success, message).
async fn completed(s: &mut zbus::MessageStream, limit: Duration) -> (String, bool, String) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let m = next_before(s, deadline, "timed out waiting for Completed").await;
        let h = m.header();
        if h.member().map(|m| m.as_str()) == Some("Completed") {
            let (ok, msg): (bool, String) = m.body().deserialize().unwrap();
            return (h.path().unwrap().to_string(), ok, msg);
        }
    }
}

/// The job object paths the service publishes now.
async fn jobs(conn: &zbus::Connection) -> Vec<String> {
    managed_objects(conn)
        .await
        .keys()
        .map(ToString::to_string)
        .filter(|p| p.starts_with(&jobs_path()))
        .collect()
}

fn ck_dir(root: &Path) -> PathBuf {
    root.join(checkpoint::DIR.trim_start_matches('/'))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_service_killed_mid_wipe_resumes_its_job_at_start() {
    need_root!();
    interrupted_then_resumed(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_service_stopped_mid_wipe_keeps_the_checkpoint_and_resumes() {
    need_root!();
    interrupted_then_resumed(true).await;
}

/// A random wipe with verify of a 1 GiB loop device through StartWipe, the service stopped
/// (SIGTERM with `term`, else SIGKILL) once some bytes are durable, then a new service: the job
/// continues from the checkpoint, completes, verifies, and the checkpoint goes.
async fn interrupted_then_resumed(term: bool) {
    let Some(bus) = Bus::start() else {
        return;
    };
    let root = job_root();
    let dev = LoopDev::filled(1024 * MIB, 0x5a);
    let c = bus.connect().await;
    let (ck, at_kill) = wipe_then_stop(&bus, &c, root.path(), &dev, term).await;
    resumed_completes(&bus, &c, root.path(), term, &ck, at_kill).await;
}

/// Starts the service and a random wipe with verify of `dev`, stops the service (SIGTERM with
/// `term`, else SIGKILL) once some bytes are durable; returns the checkpoint seen before the stop
/// and the durable offset (bytes) after it.
async fn wipe_then_stop(
    bus: &Bus,
    c: &zbus::Connection,
    root: &Path,
    dev: &LoopDev,
    term: bool,
) -> (Checkpoint, u64) {
    let dir = ck_dir(root);
    // Held once half the device is durable: stopped there, however fast the host writes.
    let hold = support::WipeHold::at(512 * MIB);
    let (k, v) = hold.env();
    let mut svc = Service::on_root(bus, root, &[(k, &v)]).await;
    let o: HashMap<String, Value<'static>> = opts(&[
        ("method", Value::from("random")),
        ("verify", Value::from(true)),
    ]);
    let r = call(
        c,
        MANAGER_PATH,
        MANAGER_IFACE,
        "StartWipe",
        &(dev.path.to_str().unwrap(), o),
    )
    .await
    .unwrap();
    let _job: OwnedObjectPath = r.body().deserialize().unwrap();
    let held = tokio::task::block_in_place(|| hold.wait(Duration::from_secs(300)));
    let ck: Checkpoint = checkpoint::list(&dir).into_iter().next().unwrap().1;
    assert_eq!(ck.durable_offset, held, "the checkpoint the hold saved");
    if term {
        assert!(svc.term().success());
    } else {
        let mut child = svc.child.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }
    assert_eq!(ck.started_by, StartedBy::Service { uid: 0 }, "{ck:?}");
    let after_kill = checkpoint::list(&dir);
    assert_eq!(
        after_kill.len(),
        1,
        "the checkpoint survives the stop (term {term})"
    );
    let at_kill = after_kill[0].1.durable_offset;
    assert!(
        at_kill < ck.total_bytes(),
        "the job finished before the kill: {at_kill} of {}",
        ck.total_bytes()
    );
    (ck, at_kill)
}

/// A new service on `root` publishes the continued job, which completes and verifies, and the
/// checkpoint goes.
async fn resumed_completes(
    bus: &Bus,
    c: &zbus::Connection,
    root: &Path,
    term: bool,
    ck: &Checkpoint,
    at_kill: u64,
) {
    let dir = ck_dir(root);
    // The new instance publishes the continued job before it owns the name.
    let mut sig = job_signals(c).await;
    let _svc2 = Service::on_root(bus, root, &[]).await;
    let now = jobs(c).await;
    assert_eq!(now.len(), 1, "one resumed job object: {now:?}");
    let prop = |name: &'static str| {
        let c = c.clone();
        let p = now[0].clone();
        async move { support::bus::get(&c, &p, support::bus::job_iface(), name).await }
    };
    let op: OwnedValue = prop("Operation").await;
    assert_eq!(String::try_from(op).unwrap(), "wipe-random");
    let plan = String::try_from(prop("Plan").await).unwrap();
    assert!(plan.contains("resume:"), "{plan}");
    let (path, ok, msg) = completed(&mut sig, Duration::from_secs(300)).await;
    assert_eq!(path, now[0]);
    assert!(ok, "{msg}");
    assert!(msg.contains("verified"), "{msg}");
    assert!(
        checkpoint::list(&dir).is_empty(),
        "a completed job removes its checkpoint"
    );
    eprintln!(
        "auto-resume figures (term {term}): stopped with {at_kill} of {} bytes durable ({:.0}%); resumed job: {msg}",
        ck.total_bytes(),
        100.0 * at_kill as f64 / ck.total_bytes() as f64
    );
}

/// A checkpoint of a fresh zero wipe of `dev`, half done, by `by`, saved under `root`.
fn fake_checkpoint(root: &Path, dev: &LoopDev, by: StartedBy) -> (PathBuf, Checkpoint) {
    let req = mdpilot::wipe::Request {
        device: dev.path.clone(),
        method: Method::Zero,
        options: Options {
            checkpoint_dir: Some(ck_dir(root)),
            ..Options::default()
        },
    };
    let plan = mdpilot::wipe::plan_for(&mdpilot::host::Root::new(root), &req).unwrap();
    let path = plan.checkpoint.as_ref().unwrap().path.clone();
    let ck = Checkpoint {
        version: 1,
        device: plan.device.clone(),
        name: plan.name.clone(),
        identity: plan.identity.clone(),
        method: "zero".into(),
        seed_hex: None,
        verify: false,
        ranges: plan.ranges.clone(),
        durable_offset: plan.size_bytes / 2,
        resync: None,
        started_by: by,
        head: checkpoint::head_digest(&plan.op, &plan.ranges),
    };
    checkpoint::save(&path, &ck).unwrap();
    (path, ck)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_start_up_leaves_cli_mismatched_and_switched_off_checkpoints_alone() {
    need_root!();
    let Some(bus) = Bus::start() else {
        return;
    };
    let root = job_root();
    let (a, b, d) = (
        LoopDev::filled(64 * MIB, 1),
        LoopDev::filled(64 * MIB, 2),
        LoopDev::filled(64 * MIB, 3),
    );
    let service = StartedBy::Service { uid: 0 };
    // A CLI wipe's checkpoint: the CLI user's to resume.
    let (pa, _) = fake_checkpoint(root.path(), &a, StartedBy::Cli);
    // A service checkpoint of a device that has another size now.
    let (pb, mut cb) = fake_checkpoint(root.path(), &b, service);
    cb.identity.size_bytes *= 2;
    checkpoint::save(&pb, &cb).unwrap();
    // A checkpoint written before `started_by` existed reads as the CLI's.
    let text = std::fs::read_to_string(&pa).unwrap();
    let old: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut old = old.as_object().unwrap().clone();
    old.remove("started_by");
    std::fs::write(&pa, serde_json::to_vec(&old).unwrap()).unwrap();
    assert_eq!(
        checkpoint::load(&pa).unwrap().unwrap().started_by,
        StartedBy::Cli
    );

    let c = bus.connect().await;
    let mut svc = Service::on_root(&bus, root.path(), &[]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(jobs(&c).await.is_empty(), "nothing resumed");
    assert!(pa.exists() && pb.exists(), "both checkpoints left in place");
    assert!(svc.term().success());

    // A valid service checkpoint, but auto_resume is off.
    let (pd, _) = fake_checkpoint(root.path(), &d, service);
    std::fs::write(
        root.path().join("etc/mdpilot/config.d/50-wipe.toml"),
        "[wipe]\nauto_resume = false\n",
    )
    .unwrap();
    let mut svc = Service::on_root(&bus, root.path(), &[]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        jobs(&c).await.is_empty(),
        "nothing resumed with auto_resume off"
    );
    assert!(pd.exists());
    assert!(svc.term().success());

    // What the first run made durable: zeroes in the first half (read back before resuming).
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&d.path)
            .unwrap();
        f.write_all_at(&vec![0u8; (32 * MIB) as usize], 0).unwrap();
        f.sync_all().unwrap();
    }
    // Switched on again: that one (only) continues and completes; the others stay.
    std::fs::remove_file(root.path().join("etc/mdpilot/config.d/50-wipe.toml")).unwrap();
    let mut sig = job_signals(&c).await;
    let _svc = Service::on_root(&bus, root.path(), &[]).await;
    let (_, ok, msg) = completed(&mut sig, Duration::from_secs(60)).await;
    assert!(ok, "{msg}");
    assert!(!pd.exists(), "completed: its checkpoint is gone");
    assert!(pa.exists() && pb.exists());
    // Continued from the checkpoint after the read-back of the durable half.
    let back = d.read_all();
    let half = back.len() / 2;
    assert!(back[half..].iter().all(|&x| x == 0), "the rest is zeroed");
}

/// A root like [`job_root`] whose `/dev` is the test's own: only `disk/by-id/<link>`, a link to
/// `target` (a `by-id` name two disks share: USB enclosures that report one serial).
fn root_with_by_id(link: &str, target: &Path) -> tempfile::TempDir {
    let root = job_root();
    let dev = root.path().join("dev");
    std::fs::remove_file(&dev).unwrap();
    std::fs::create_dir_all(dev.join("disk/by-id")).unwrap();
    std::os::unix::fs::symlink(target, dev.join("disk/by-id").join(link)).unwrap();
    root
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_start_up_never_resumes_a_checkpoint_with_nothing_durable_onto_a_shared_by_id_name() {
    need_root!();
    let Some(bus) = Bus::start() else {
        return;
    };
    // The disk the interrupted job was wiping is gone; another disk of the same size, holding
    // data, now answers to the same by-id name.
    let other = LoopDev::filled(16 * MIB, 0xbb);
    let link = "usb-Enclosure_SAME_SERIAL-0:0";
    let root = root_with_by_id(link, &other.path);
    let req = mdpilot::wipe::Request {
        device: Path::new("/dev/disk/by-id").join(link),
        method: Method::Zero,
        options: Options {
            checkpoint_dir: Some(ck_dir(root.path())),
            ..Options::default()
        },
    };
    let plan = mdpilot::wipe::plan_for(&mdpilot::host::Root::new(root.path()), &req).unwrap();
    assert_eq!(plan.identity.stable_id, format!("by-id:{link}"));
    let path = plan.checkpoint.as_ref().unwrap().path.clone();
    // Saved at the start of the first run: nothing durable yet.
    let ck = Checkpoint {
        version: 1,
        device: "/dev/sdz".into(),
        name: "sdz".into(),
        identity: plan.identity.clone(),
        method: "zero".into(),
        seed_hex: None,
        verify: false,
        ranges: plan.ranges.clone(),
        durable_offset: 0,
        resync: None,
        started_by: StartedBy::Service { uid: 0 },
        head: checkpoint::head_digest(&plan.op, &plan.ranges),
    };
    checkpoint::save(&path, &ck).unwrap();
    let c = bus.connect().await;
    // The service decides on every checkpoint before it owns the name (Service waits for it):
    // a resumed job would be published by now.
    let _svc = Service::on_root(&bus, root.path(), &[]).await;
    assert!(jobs(&c).await.is_empty(), "nothing resumed");
    assert!(
        path.exists(),
        "the checkpoint stays for a person's `--resume`"
    );
    assert!(
        other.read_all().iter().all(|&b| b == 0xbb),
        "the other disk was written"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_start_up_reports_a_resume_whose_first_bytes_do_not_match_and_writes_nothing() {
    need_root!();
    let Some(bus) = Bus::start() else {
        return;
    };
    // Another disk under the shared by-id name: zeroes wherever the samples look, but an md 1.2
    // superblock at 4 KiB (a whole-disk member has no partition table before it).
    let other = LoopDev::new(16 * MIB);
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&other.path)
            .unwrap();
        f.write_all_at(&0xa92b_4efc_u32.to_le_bytes(), 4096)
            .unwrap();
        f.sync_all().unwrap();
    }
    let before = other.read_all();
    let link = "usb-Enclosure_SAME_SERIAL-0:0";
    let root = root_with_by_id(link, &other.path);
    let req = mdpilot::wipe::Request {
        device: Path::new("/dev/disk/by-id").join(link),
        method: Method::Zero,
        options: Options {
            checkpoint_dir: Some(ck_dir(root.path())),
            ..Options::default()
        },
    };
    let plan = mdpilot::wipe::plan_for(&mdpilot::host::Root::new(root.path()), &req).unwrap();
    let path = plan.checkpoint.as_ref().unwrap().path.clone();
    let ck = Checkpoint {
        version: 1,
        device: "/dev/sdz".into(),
        name: "sdz".into(),
        identity: plan.identity.clone(),
        method: "zero".into(),
        seed_hex: None,
        verify: false,
        ranges: plan.ranges.clone(),
        durable_offset: plan.size_bytes / 2,
        resync: None,
        started_by: StartedBy::Service { uid: 0 },
        head: checkpoint::head_digest(&plan.op, &plan.ranges),
    };
    checkpoint::save(&path, &ck).unwrap();
    let c = bus.connect().await;
    let mut sig = job_signals(&c).await;
    let _svc = Service::on_root(&bus, root.path(), &[]).await;
    // The job is published, reads the first bytes back and fails: its error says why.
    let (_, ok, msg) = completed(&mut sig, Duration::from_secs(60)).await;
    assert!(!ok, "{msg}");
    assert!(
        msg.contains("do not read back as the checkpoint recorded") && msg.contains("nothing"),
        "{msg}"
    );
    assert!(path.exists(), "the checkpoint stays");
    assert_eq!(other.read_all(), before, "the other disk was written");
}
