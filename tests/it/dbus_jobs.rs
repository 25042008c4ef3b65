//! Wipe jobs over D-Bus: `Manager.StartWipe` and `org.mdpilot.MdPilot1.Job` on a private
//! `dbus-daemon` with the real `mdpilot serve --root TMP`. The `loop_*` tests write only to loop
//! devices they attached themselves (RAII guards detach them) and skip when not root.
//!
//! TMP is a root whose `sys` and `dev` are links to the host's (read for the probe; a loop device
//! is no md array, so nothing is written there) while `proc` is a private tree: the policy's
//! speed-limit files and its state file stay in TMP.

use crate::support;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;
use support::bus::{
    assert_committed_xml, call, error_name, get, helper_connection, introspect, job_iface,
    job_signals, jobs_path, next_before, opts, run_helper_as_nobody, signals, try_get, BusChoice,
    JobProxy, MANAGER_IFACE, MANAGER_PATH,
};
use support::tree::job_root;
use support::{Bus, FakePolkit, LoopDev, Service, MIB};
use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};

/// What every `loop_*` test starts with: a private bus, `mdpilot serve --root <job_root>` on it
/// (plus `env`) and a root connection subscribed to the job signals. Fields drop in order.
struct Env {
    sig: zbus::MessageStream,
    c: zbus::Connection,
    svc: Service,
    _root: tempfile::TempDir,
    bus: Bus,
}

impl Env {
    /// `None` (having said "skipped") without a `dbus-daemon`.
    async fn start(env: &[(&str, &str)]) -> Option<Env> {
        let bus = Bus::start()?;
        let root = job_root();
        let svc = Service::on_root(&bus, root.path(), env).await;
        let c = bus.connect().await;
        let sig = job_signals(&c).await;
        Some(Env {
            sig,
            c,
            svc,
            _root: root,
            bus,
        })
    }
}

async fn start_wipe(
    conn: &zbus::Connection,
    dev: &Path,
    o: HashMap<String, Value<'static>>,
) -> zbus::Result<OwnedObjectPath> {
    let r = call(
        conn,
        MANAGER_PATH,
        MANAGER_IFACE,
        "StartWipe",
        &(dev.to_str().unwrap(), o),
    )
    .await?;
    r.body().deserialize::<OwnedObjectPath>()
}

async fn job_prop(conn: &zbus::Connection, path: &str, prop: &str) -> OwnedValue {
    get(conn, path, job_iface(), prop).await
}

/// `Job.Cancel` of the job at `path`.
async fn cancel(conn: &zbus::Connection, path: &str) -> zbus::Result<zbus::Message> {
    call(conn, path, job_iface(), "Cancel", &(opts(&[]),)).await
}

/// What the job's signals said, until Completed (at most `limit`).
#[derive(Debug, Default)]
struct Seen {
    progress: Vec<f64>,
    completed: Option<(bool, String)>,
}

/// Reads signals of `path` until Completed or until `stop` returns true for the progress seen.
async fn watch(
    s: &mut zbus::MessageStream,
    path: &str,
    limit: Duration,
    stop: impl Fn(&Seen) -> bool,
) -> Seen {
    let mut seen = Seen::default();
    let deadline = tokio::time::Instant::now() + limit;
    while seen.completed.is_none() && !stop(&seen) {
        let m = next_before(s, deadline, "timed out waiting for job signals").await;
        let h = m.header();
        if h.path().map(|p| p.as_str()) != Some(path) {
            continue;
        }
        match h.member().map(|m| m.as_str()) {
            Some("PropertiesChanged") => {
                let (iface, changed, _): (String, HashMap<String, OwnedValue>, Vec<String>) =
                    m.body().deserialize().unwrap();
                assert_eq!(iface, job_iface());
                if let Some(v) = changed.get("Progress") {
                    seen.progress.push(f64::try_from(v).unwrap());
                }
            }
            Some("Completed") => {
                seen.completed = Some(m.body().deserialize().unwrap());
            }
            _ => {}
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_introspection_matches_committed_xml() {
    let Some(bus) = Bus::start() else { return };
    // A job object that drives nothing, served in-process: its introspection is the interface's.
    let obj = mdpilot::dbus::job::JobObject::idle(std::sync::Arc::new(
        mdpilot::dbus::auth::Authority::new(BusChoice::Address(bus.address.clone())),
    ));
    let path = format!("{}/1", jobs_path());
    let conn = zbus::connection::Builder::address(bus.address.as_str())
        .unwrap()
        .serve_at(path.as_str(), obj)
        .unwrap()
        .build()
        .await
        .unwrap();
    let doc = introspect(&conn, conn.unique_name().map(|n| n.as_str()), &path).await;
    assert_committed_xml(
        job_iface(),
        &doc,
        "live object (regenerate: MDPILOT_UPDATE_XML=1 with cargo test, test binary dbus_jobs, test introspection)",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_start_wipe_reports_progress_and_completes() {
    need_root!();
    let Some(mut e) = Env::start(&[]).await else {
        return;
    };
    let dev = LoopDev::filled(64 * MIB, 0xa5);
    let job = start_wipe(&e.c, &dev.path, opts(&[("method", Value::from("zero"))]))
        .await
        .unwrap();
    assert!(
        job.as_str().starts_with("/org/mdpilot/MdPilot1/jobs/"),
        "{job}"
    );
    let seen = watch(&mut e.sig, job.as_str(), Duration::from_secs(60), |_| false).await;
    let (ok, msg) = seen.completed.clone().unwrap();
    assert!(ok, "{msg}");
    assert!(msg.contains(&dev.path.display().to_string()), "{msg}");
    assert_eq!(seen.progress.last().copied(), Some(1.0), "{seen:?}");
    // The object lingers after Completed with its final values.
    let s = |v: OwnedValue| String::try_from(v).unwrap();
    let u = |v: OwnedValue| u64::try_from(v).unwrap();
    assert_eq!(
        s(job_prop(&e.c, job.as_str(), "Operation").await),
        "wipe-zero"
    );
    assert_eq!(
        s(job_prop(&e.c, job.as_str(), "Device").await),
        dev.path.display().to_string()
    );
    assert_eq!(u(job_prop(&e.c, job.as_str(), "Bytes").await), 64 * MIB);
    assert_eq!(u(job_prop(&e.c, job.as_str(), "BytesDone").await), 64 * MIB);
    assert!(u(job_prop(&e.c, job.as_str(), "StartTime").await) > 1_600_000_000_000_000);
    assert!(!s(job_prop(&e.c, job.as_str(), "Plan").await).is_empty());
    assert!(bool::try_from(job_prop(&e.c, job.as_str(), "ProgressValid").await).unwrap());
    // A loop device is no array: no array object.
    let objects =
        <Vec<OwnedObjectPath>>::try_from(job_prop(&e.c, job.as_str(), "Objects").await).unwrap();
    assert!(objects.is_empty(), "{objects:?}");
    let plan =
        <HashMap<String, OwnedValue>>::try_from(job_prop(&e.c, job.as_str(), "PlanData").await)
            .unwrap();
    let ps = |k: &str| String::try_from(plan[k].try_clone().unwrap()).unwrap();
    let pt = |k: &str| u64::try_from(plan[k].try_clone().unwrap()).unwrap();
    assert_eq!(ps("method"), "zero");
    assert!(
        ["write", "zeroout"].contains(&ps("operation").as_str()),
        "{plan:?}"
    );
    assert!(pt("block-bytes") >= 4 * MIB, "{plan:?}");
    assert_eq!(pt("total-bytes"), 64 * MIB);
    assert!(u32::try_from(plan["queue-depth"].try_clone().unwrap()).unwrap() >= 1);
    assert_eq!(ps("resync-action"), "leave");
    assert!(ps("open-flags").contains("O_EXCL"), "{plan:?}");
    assert!(plan.contains_key("leases"), "{plan:?}");
    assert!(!bool::try_from(job_prop(&e.c, job.as_str(), "Cancelable").await).unwrap());
    assert_eq!(
        u32::try_from(job_prop(&e.c, job.as_str(), "StartedByUID").await).unwrap(),
        0
    );
    // The typed client proxy reads the same object.
    let jp = JobProxy::builder(&e.c)
        .path(job.as_str())
        .unwrap()
        .build()
        .await
        .unwrap();
    assert_eq!(jp.started_by_uid().await.unwrap(), 0);
    assert_eq!(jp.progress().await.unwrap(), 1.0);
    assert!(jp.progress_valid().await.unwrap());
    assert!(jp.objects().await.unwrap().is_empty());
    assert_eq!(jp.plan_data().await.unwrap().len(), plan.len());
    let data = dev.read_all();
    assert!(data.iter().all(|&b| b == 0), "device not zeroed");
    // Cancel after the end is Failed; refusals name the device.
    let r = cancel(&e.c, job.as_str()).await;
    assert_eq!(error_name(r), "org.mdpilot.MdPilot1.Error.Failed");
    let r = start_wipe(&e.c, Path::new("/dev/null"), opts(&[])).await;
    assert_eq!(error_name(r), "org.mdpilot.MdPilot1.Error.InvalidArgument");
    let r = start_wipe(&e.c, &dev.path, opts(&[("method", Value::from("shred"))])).await;
    assert_eq!(error_name(r), "org.mdpilot.MdPilot1.Error.InvalidArgument");
}

/// Starts a random wipe of a 1 GiB loop device and waits until some bytes are durable.
async fn start_slow_job(
    c: &zbus::Connection,
    dev: &LoopDev,
    sig: &mut zbus::MessageStream,
) -> OwnedObjectPath {
    let job = start_wipe(c, &dev.path, opts(&[("method", Value::from("random"))]))
        .await
        .unwrap();
    let seen = watch(sig, job.as_str(), Duration::from_secs(60), |s| {
        s.progress.iter().any(|&p| p > 0.0)
    })
    .await;
    assert!(
        seen.completed.is_none(),
        "the job finished before it could be cancelled: {seen:?}"
    );
    job
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_cancel_half_way_completes_false() {
    need_root!();
    let Some(mut e) = Env::start(&[]).await else {
        return;
    };
    let dev = LoopDev::new(1024 * MIB);
    let job = start_slow_job(&e.c, &dev, &mut e.sig).await;
    // A second job on the same device is Busy while the first runs.
    let r = start_wipe(&e.c, &dev.path, opts(&[])).await;
    assert_eq!(error_name(r), "org.mdpilot.MdPilot1.Error.Busy");
    cancel(&e.c, job.as_str()).await.unwrap();
    // A second Cancel, racing the first's completion or after it, is Cancelled.
    let r = cancel(&e.c, job.as_str()).await;
    assert_eq!(error_name(r), "org.mdpilot.MdPilot1.Error.Cancelled");
    let seen = watch(&mut e.sig, job.as_str(), Duration::from_secs(60), |_| false).await;
    let (ok, msg) = seen.completed.unwrap();
    assert!(!ok);
    assert!(msg.contains("cancelled"), "{msg}");
    let r = cancel(&e.c, job.as_str()).await;
    assert_eq!(error_name(r), "org.mdpilot.MdPilot1.Error.Cancelled");
    let done = u64::try_from(job_prop(&e.c, job.as_str(), "BytesDone").await).unwrap();
    assert!(done > 0 && done < 1024 * MIB, "{done}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_sigterm_cancels_running_jobs() {
    need_root!();
    let Some(mut e) = Env::start(&[]).await else {
        return;
    };
    let dev = LoopDev::new(1024 * MIB);
    let job = start_slow_job(&e.c, &dev, &mut e.sig).await;
    let t = std::time::Instant::now();
    let mut svc = e.svc;
    let st = tokio::task::spawn_blocking(move || svc.term())
        .await
        .unwrap();
    assert!(st.success(), "{st}");
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    let seen = watch(&mut e.sig, job.as_str(), Duration::from_secs(5), |_| false).await;
    assert_eq!(seen.completed.map(|c| c.0), Some(false));
}

/// Runs as `nobody` inside `loop_unprivileged_caller_cannot_start_or_cancel`.
#[tokio::test]
#[ignore = "helper: run by loop_unprivileged_caller_cannot_start_or_cancel as nobody"]
async fn job_unprivileged_helper() {
    let Some(c) = helper_connection("loop_unprivileged_caller_cannot_start_or_cancel").await else {
        return;
    };
    let dev = std::env::var("MDPILOT_TEST_DEV").unwrap();
    let job = std::env::var("MDPILOT_TEST_JOB").unwrap();
    // Reads are open.
    let _ = job_prop(&c, &job, "Progress").await;
    let no_prompt = ("auth.no_user_interaction", Value::Bool(true));
    let r = start_wipe(&c, Path::new(&dev), opts(&[no_prompt])).await;
    if let Ok(own) = &r {
        // Cancelling one's own job asks polkit nothing (it may have finished already).
        let r = cancel(&c, own.as_str()).await;
        println!("RESULT CancelOwn {}", error_name(r));
    }
    println!("RESULT StartWipe {}", error_name(r));
    let r = cancel(&c, job.as_str()).await;
    println!("RESULT Cancel {}", error_name(r));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_unprivileged_caller_cannot_start_or_cancel() {
    need_root!();
    let Some(mut e) = Env::start(&[]).await else {
        return;
    };
    let dev = LoopDev::new(1024 * MIB);
    let other = LoopDev::new(16 * MIB);
    let job = start_slow_job(&e.c, &dev, &mut e.sig).await;
    let other_path = other.path.to_str().unwrap();
    let stdout = run_helper_as_nobody(
        "dbus_jobs::job_unprivileged_helper",
        &[
            ("MDPILOT_TEST_BUS", &e.bus.address),
            ("MDPILOT_TEST_DEV", other_path),
            ("MDPILOT_TEST_JOB", job.as_str()),
        ],
    )
    .await;
    let na = "org.mdpilot.MdPilot1.Error.NotAuthorized";
    assert!(
        stdout.contains(&format!("RESULT StartWipe {na}")),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("RESULT Cancel {na}")), "{stdout}");
    // The job still runs; root cancels it.
    assert!(bool::try_from(job_prop(&e.c, job.as_str(), "Cancelable").await).unwrap());
    cancel(&e.c, job.as_str()).await.unwrap();
    let seen = watch(&mut e.sig, job.as_str(), Duration::from_secs(60), |_| false).await;
    assert_eq!(seen.completed.map(|c| c.0), Some(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_polkit_is_asked_for_wiping_and_for_cancelling_anothers_job() {
    need_root!();
    let Some(bus) = Bus::start() else { return };
    let polkit = FakePolkit::serve(&bus, true).await;
    let root = job_root();
    // The service asks "the system bus" for polkit: point it at the private one.
    let _svc = Service::on_root(
        &bus,
        root.path(),
        &[("DBUS_SYSTEM_BUS_ADDRESS", bus.address.as_str())],
    )
    .await;
    let dev = LoopDev::new(1024 * MIB);
    let other = LoopDev::new(16 * MIB);
    let c = bus.connect().await;
    let mut sig = job_signals(&c).await;
    // Root's job: root never asks polkit.
    let job = start_slow_job(&c, &dev, &mut sig).await;
    assert!(polkit.asked().is_empty(), "{:?}", polkit.asked());
    let stdout = run_helper_as_nobody(
        "dbus_jobs::job_unprivileged_helper",
        &[
            ("MDPILOT_TEST_BUS", &bus.address),
            ("MDPILOT_TEST_DEV", other.path.to_str().unwrap()),
            ("MDPILOT_TEST_JOB", job.as_str()),
        ],
    )
    .await;
    assert!(stdout.contains("RESULT StartWipe success"), "{stdout}");
    assert!(stdout.contains("RESULT Cancel success"), "{stdout}");
    let asked = polkit.asked();
    assert_eq!(asked.len(), 2, "own Cancel asks nothing: {asked:?}");
    let wipe = "org.mdpilot.MdPilot1.wipe";
    let (s, k) = (&asked[0], &asked[1]);
    assert_eq!(
        (s.action.as_str(), s.details["method"].as_str()),
        (wipe, "StartWipe")
    );
    assert_eq!(s.details["device"], other.path.display().to_string());
    assert_eq!(s.flags, 0, "auth.no_user_interaction: no prompt");
    assert_eq!(
        (k.action.as_str(), k.details["method"].as_str()),
        (wipe, "Cancel")
    );
    assert_eq!(k.details["device"], dev.path.display().to_string());
    assert_eq!(k.flags, 1, "interaction allowed by default");
    let seen = watch(&mut sig, job.as_str(), Duration::from_secs(60), |_| false).await;
    assert_eq!(seen.completed.map(|c| c.0), Some(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_job_objects_come_and_go_through_the_object_manager() {
    need_root!();
    let Some(mut e) = Env::start(&[("MDPILOT_JOB_LINGER_MS", "300")]).await else {
        return;
    };
    let dev = LoopDev::filled(16 * MIB, 0x11);
    let mut om = signals(&e.c, "org.freedesktop.DBus.ObjectManager", None, 64).await;
    let job = start_wipe(&e.c, &dev.path, opts(&[("verify", Value::Bool(true))]))
        .await
        .unwrap();
    let seen = watch(&mut e.sig, job.as_str(), Duration::from_secs(60), |_| false).await;
    let (ok, msg) = seen.completed.unwrap();
    assert!(ok && msg.contains("verified"), "{msg}");
    let mut added = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let m = next_before(&mut om, deadline, "no InterfacesRemoved for the job").await;
        let member = m.header().member().map(|m| m.to_string());
        let (path, _): (OwnedObjectPath, zbus::zvariant::OwnedValue) = match member.as_deref() {
            Some("InterfacesAdded" | "InterfacesRemoved") => {
                let b = m.body();
                let s: zbus::zvariant::Structure = b.deserialize().unwrap();
                let f = s.into_fields();
                (
                    OwnedObjectPath::try_from(f[0].try_clone().unwrap()).unwrap(),
                    OwnedValue::try_from(f[1].try_clone().unwrap()).unwrap(),
                )
            }
            _ => continue,
        };
        if path != job {
            continue;
        }
        if member.as_deref() == Some("InterfacesAdded") {
            added = true;
        } else {
            break;
        }
    }
    assert!(added, "no InterfacesAdded for {job}");
    let r = try_get(&e.c, job.as_str(), job_iface(), "Progress").await;
    assert_ne!(error_name(r), "success", "the job object should be gone");
}

/// `WipeCandidates` under `--sim` with two loop devices shown to it (`MDPILOT_SIM_DEVICES`), one
/// of them listed as mounted: the free one is accepted, the mounted one refused with the
/// service's words, and once a job wipes the free one it is refused too (nothing written by the
/// probe: the device still holds its fill).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_wipe_candidates_accept_a_free_device_and_say_why_others_are_refused() {
    need_root!();
    let Some(bus) = Bus::start() else { return };
    // Large enough for a random wipe to outlast a second listing; a marked first MiB shows the
    // probe wrote nothing.
    let free = LoopDev::new(1024 * MIB);
    let head = || {
        use std::io::Read;
        let mut b = vec![0u8; MIB as usize];
        std::fs::File::open(&free.path)
            .unwrap()
            .read_exact(&mut b)
            .unwrap();
        b
    };
    std::fs::write(&free.file, vec![0xa5u8; MIB as usize]).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&free.file)
        .unwrap()
        .set_len(1024 * MIB)
        .unwrap();
    let used = LoopDev::new(8 * MIB);
    let spec = format!("{},{}@/srv/sim", free.path.display(), used.path.display());
    let _svc = Service::sim(&bus, &[("MDPILOT_SIM_DEVICES", &spec)]).await;
    let c = bus.connect().await;
    let list = || async {
        call(
            &c,
            MANAGER_PATH,
            MANAGER_IFACE,
            "WipeCandidates",
            &(opts(&[]),),
        )
        .await
        .unwrap()
        .body()
        .deserialize::<Vec<(String, bool, String)>>()
        .unwrap()
    };
    let l = list().await;
    let find = |l: &[(String, bool, String)], d: &LoopDev| {
        let want = format!("/dev/{}", d.name());
        l.iter().find(|c| c.0 == want).cloned().unwrap()
    };
    assert_eq!(
        find(&l, &free),
        (format!("/dev/{}", free.name()), true, String::new())
    );
    let (_, ok, why) = find(&l, &used);
    assert!(
        !ok && why.contains("mounted") && why.contains("/srv/sim"),
        "{why}"
    );
    assert!(head().iter().all(|b| *b == 0xa5), "the probe wrote");
    let bad = call(
        &c,
        MANAGER_PATH,
        MANAGER_IFACE,
        "WipeCandidates",
        &(opts(&[("force", Value::from(true))]),),
    )
    .await;
    assert_eq!(
        error_name(bad),
        "org.mdpilot.MdPilot1.Error.InvalidArgument"
    );
    let job = start_wipe(&c, &free.path, opts(&[("method", Value::from("random"))]))
        .await
        .unwrap();
    let (_, ok, why) = find(&list().await, &free);
    assert!(!ok && why.contains("already wiping"), "{why}");
    cancel(&c, job.as_str()).await.unwrap();
}
