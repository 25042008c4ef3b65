//! The device an admin approves is the device wiped: `StartWipe` resolves the caller's path
//! once, before polkit is asked, under the trust rules (a node under `/dev`, reached only
//! through directories no one but root can change and everyone can search); the job is bound
//! to that device number and size, re-checked after the `O_EXCL` open.
//!
//! Root only (loop devices the tests attach themselves, RAII guards detach them), on a private
//! `dbus-daemon` with `mdpilot serve --root TMP` and the fake polkit of `support::polkit`. The
//! unprivileged caller is this test binary re-run as `nobody` ([`trust_caller_helper`]).

use crate::support;

use mdpilot::host::Root;
use mdpilot::wipe::plan::{Method, Options};
use mdpilot::wipe::{Job, Request, WipeError};
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use support::bus::{
    call, error_name, helper_connection, job_iface, opts, run_helper_as_nobody, try_get,
    MANAGER_IFACE, MANAGER_PATH,
};
use support::tree::job_root;
use support::{Behaviour, Bus, FakePolkit, LoopDev, Service, MIB};
use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};

/// A service root like [`job_root`] whose `dev` is a real root-owned 0755 directory (not the
/// host's `/dev`), so a test can put links in a directory the trust rules accept.
fn root_with_own_dev() -> tempfile::TempDir {
    let t = job_root();
    let dev = t.path().join("dev");
    std::fs::remove_file(&dev).unwrap();
    std::fs::create_dir(&dev).unwrap();
    std::fs::set_permissions(&dev, std::fs::Permissions::from_mode(0o755)).unwrap();
    t
}

/// Points the link `link` at `target` atomically (a new link renamed over it).
fn repoint(link: &Path, target: &Path) {
    let tmp = link.with_extension("new");
    let _ = std::fs::remove_file(&tmp);
    symlink(target, &tmp).unwrap();
    std::fs::rename(&tmp, link).unwrap();
}

/// `StartWipe(device, {method: zero})` on `c`.
async fn start_wipe(c: &zbus::Connection, device: &str) -> zbus::Result<OwnedObjectPath> {
    let o = opts(&[("method", Value::from("zero"))]);
    call(c, MANAGER_PATH, MANAGER_IFACE, "StartWipe", &(device, o))
        .await?
        .body()
        .deserialize::<OwnedObjectPath>()
}

/// Runs as `nobody` inside the tests below: StartWipe of `MDPILOT_TEST_DEV`; prints
/// `RESULT <error name or success>`, `MESSAGE <error message>` and `JOB <path>`.
#[tokio::test]
#[ignore = "helper: run by the wipe_trust tests as nobody"]
async fn trust_caller_helper() {
    let Some(c) = helper_connection("the wipe_trust tests").await else {
        return;
    };
    let dev = std::env::var("MDPILOT_TEST_DEV").unwrap();
    let r = start_wipe(&c, &dev).await;
    match &r {
        Ok(job) => println!("JOB {}", job.as_str()),
        Err(zbus::Error::MethodError(_, Some(m), _)) => println!("MESSAGE {m}"),
        Err(_) => {}
    }
    println!("RESULT {}", error_name(r));
}

/// The line of `out` starting with `key `, without it.
fn line<'a>(out: &'a str, key: &str) -> Option<&'a str> {
    out.lines().find_map(|l| l.strip_prefix(&format!("{key} ")))
}

/// Waits until the job at `path` is no longer cancelable (it ended).
async fn wait_ended(c: &zbus::Connection, path: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let m = try_get(c, path, job_iface(), "Cancelable").await.unwrap();
        let v = m.body().deserialize::<OwnedValue>().unwrap();
        if !bool::try_from(v).unwrap() {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "job did not end");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_start_wipe_wipes_the_device_polkit_was_asked_about_when_the_link_moves() {
    need_root!();
    let Some(bus) = Bus::start() else { return };
    let root = root_with_own_dev();
    let approved = LoopDev::filled(16 * MIB, 0xaa);
    let other = LoopDev::filled(16 * MIB, 0xbb);
    let link = root.path().join("dev/disk");
    symlink(&approved.path, &link).unwrap();
    // While polkit is deciding, the link is re-pointed at the other device.
    let (l2, o2) = (link.clone(), other.path.clone());
    let polkit = FakePolkit::serve_with(
        &bus,
        Behaviour {
            allow: true,
            delay: Duration::from_secs(2),
            on_ask: Some(Arc::new(move |_| repoint(&l2, &o2))),
        },
    )
    .await;
    let _svc = Service::on_root(
        &bus,
        root.path(),
        &[("DBUS_SYSTEM_BUS_ADDRESS", bus.address.as_str())],
    )
    .await;
    let out = run_helper_as_nobody(
        "wipe_trust::trust_caller_helper",
        &[
            ("MDPILOT_TEST_BUS", &bus.address),
            ("MDPILOT_TEST_DEV", "/dev/disk"),
        ],
    )
    .await;
    let asked = polkit.asked();
    assert_eq!(asked.len(), 1, "{asked:?}\n{out}");
    let shown = asked[0].details["device"].clone();
    assert_eq!(
        shown,
        approved.path.display().to_string(),
        "the prompt names the node"
    );
    let c = bus.connect().await;
    if let Some(job) = line(&out, "JOB") {
        let dev = try_get(&c, job, job_iface(), "Device").await.unwrap();
        let dev = String::try_from(dev.body().deserialize::<OwnedValue>().unwrap()).unwrap();
        assert_eq!(
            dev, shown,
            "the job's device is the one polkit was asked about"
        );
        wait_ended(&c, job).await;
        assert!(
            approved.read_all().iter().all(|&b| b == 0),
            "approved device wiped"
        );
    } else {
        assert_ne!(line(&out, "RESULT"), Some("success"), "{out}");
    }
    assert!(
        other.read_all().iter().all(|&b| b == 0xbb),
        "the device the link moved to is untouched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_start_wipe_refuses_a_path_through_a_world_writable_directory() {
    need_root!();
    let Some(bus) = Bus::start() else { return };
    let root = job_root(); // dev -> the host's /dev
    let _svc = Service::on_root(&bus, root.path(), &[]).await;
    let d = LoopDev::filled(16 * MIB, 0xaa);
    // /dev/shm is sticky and world-writable: anyone may have made this directory.
    let shm = tempfile::Builder::new()
        .prefix("mdpilot-trust.")
        .tempdir_in("/dev/shm")
        .unwrap();
    symlink(&d.path, shm.path().join("disk")).unwrap();
    let c = bus.connect().await;
    let r = start_wipe(&c, shm.path().join("disk").to_str().unwrap()).await;
    let msg = format!("{r:?}");
    assert_eq!(
        error_name(r),
        "org.mdpilot.MdPilot1.Error.InvalidArgument",
        "{msg}"
    );
    assert!(
        msg.contains("/dev/shm") && msg.contains("writable by others"),
        "{msg}"
    );
    assert!(d.read_all().iter().all(|&b| b == 0xaa), "nothing written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_a_link_in_a_private_directory_is_refused_before_polkit_is_asked() {
    need_root!();
    let Some(bus) = Bus::start() else { return };
    let polkit = FakePolkit::serve(&bus, true).await;
    let root = root_with_own_dev();
    let d = LoopDev::filled(16 * MIB, 0xaa);
    let private = root.path().join("dev/private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    symlink(&d.path, private.join("link")).unwrap();
    let _svc = Service::on_root(
        &bus,
        root.path(),
        &[("DBUS_SYSTEM_BUS_ADDRESS", bus.address.as_str())],
    )
    .await;
    let out = run_helper_as_nobody(
        "wipe_trust::trust_caller_helper",
        &[
            ("MDPILOT_TEST_BUS", &bus.address),
            ("MDPILOT_TEST_DEV", "/dev/private/link"),
        ],
    )
    .await;
    assert_eq!(
        line(&out, "RESULT"),
        Some("org.mdpilot.MdPilot1.Error.InvalidArgument"),
        "{out}"
    );
    assert!(polkit.asked().is_empty(), "{:?}", polkit.asked());
    let msg = line(&out, "MESSAGE").unwrap_or_default();
    assert!(!msg.contains(&d.name()), "the link's target leaked: {msg}");
    assert!(d.read_all().iter().all(|&b| b == 0xaa), "nothing written");
}

#[test]
fn loop_a_job_whose_node_now_names_another_device_writes_nothing() {
    need_root!();
    let probed = LoopDev::filled(16 * MIB, 0xaa);
    let now = LoopDev::filled(16 * MIB, 0xbb);
    let req = Request {
        device: probed.path.clone(),
        method: Method::Zero,
        options: Options::default(),
    };
    let mut plan = mdpilot::wipe::plan_for(&Root::system(), &req).unwrap();
    plan.checkpoint = None;
    // The node the job opens is another device than the one probed (a replaced node).
    plan.device = now.path.clone();
    let e = Job::new(plan, Root::system())
        .run(&AtomicBool::new(false))
        .unwrap_err();
    assert!(matches!(e, WipeError::Changed { .. }), "{e:?}");
    assert!(e.to_string().contains("nothing was written"), "{e}");
    assert!(now.read_all().iter().all(|&b| b == 0xbb), "untouched");
    assert!(probed.read_all().iter().all(|&b| b == 0xaa), "untouched");
}

/// A checkpoint of a zero wipe of `dev`, half durable, by `by`, in `dir` (the device itself was
/// never written: its content is whatever the test put there). With `weak`, the identity is the
/// kernel name only (`name:loopN`, what a disk without a UUID, by-id link or backing file gets).
fn half_done_checkpoint(
    root: &Root,
    dir: &Path,
    dev: &LoopDev,
    by: mdpilot::wipe::plan::StartedBy,
    weak: bool,
) -> std::path::PathBuf {
    use mdpilot::wipe::checkpoint::{self, Checkpoint};
    let req = Request {
        device: dev.path.clone(),
        method: Method::Zero,
        options: Options {
            checkpoint_dir: Some(dir.to_path_buf()),
            ..Options::default()
        },
    };
    let plan = mdpilot::wipe::plan_for(root, &req).unwrap();
    let mut identity = plan.identity.clone();
    if weak {
        identity.stable_id = format!("name:{}", plan.name);
    }
    let path = checkpoint::path_for(dir, &identity.stable_id);
    let ck = Checkpoint {
        version: 1,
        device: plan.device.clone(),
        name: plan.name.clone(),
        identity,
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
    path
}

#[test]
fn loop_a_manual_resume_onto_a_device_that_does_not_hold_the_wipes_data_is_refused() {
    need_root!();
    let state = tempfile::tempdir().unwrap();
    // Another disk under the name: nothing of the first run's zeroes is on it.
    let d = LoopDev::filled(16 * MIB, 0xbb);
    let by = mdpilot::wipe::plan::StartedBy::Cli;
    let path = half_done_checkpoint(&Root::system(), state.path(), &d, by, false);
    // A checkpoint of an earlier mdpilot (no digest of the first bytes): the samples find it.
    use mdpilot::wipe::checkpoint;
    let mut ck = checkpoint::load(&path).unwrap().unwrap();
    ck.head = None;
    checkpoint::save(&path, &ck).unwrap();
    let req = Request {
        device: d.path.clone(),
        method: Method::Zero,
        options: Options {
            resume: true,
            checkpoint_dir: Some(state.path().to_path_buf()),
            ..Options::default()
        },
    };
    let plan = mdpilot::wipe::plan_for(&Root::system(), &req).unwrap();
    let e = Job::new(plan, Root::system())
        .run(&AtomicBool::new(false))
        .unwrap_err();
    assert!(
        matches!(e, WipeError::ResumeMismatch { offset: 0, .. }),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(msg.contains(&d.name()) && msg.contains("offset 0"), "{msg}");
    assert!(d.read_all().iter().all(|&b| b == 0xbb), "nothing written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_the_service_never_resumes_a_checkpoint_known_only_by_kernel_name() {
    need_root!();
    let Some(bus) = Bus::start() else { return };
    let root = job_root();
    let dir = root
        .path()
        .join(mdpilot::wipe::checkpoint::DIR.trim_start_matches('/'));
    // The checkpoint was of "loopN"; after a reboot loopN is another, equal-sized image.
    let d = LoopDev::filled(16 * MIB, 0xbb);
    let by = mdpilot::wipe::plan::StartedBy::Service { uid: 0 };
    let path = half_done_checkpoint(&Root::new(root.path()), &dir, &d, by, true);
    let c = bus.connect().await;
    // Every checkpoint is decided on before the name is owned (what Service waits for): a
    // resumed job would be published by now.
    let _svc = Service::on_root(&bus, root.path(), &[]).await;
    let jobs = support::bus::managed_objects(&c).await;
    let prefix = support::bus::jobs_path();
    assert!(
        !jobs.keys().any(|p| p.as_str().starts_with(&prefix)),
        "a job was resumed: {:?}",
        jobs.keys()
    );
    assert!(
        d.read_all().iter().all(|&b| b == 0xbb),
        "the service wrote it"
    );
    assert!(
        path.exists(),
        "the checkpoint stays for `mdpilot wipe --resume`"
    );
}
