//! Wipe jobs over D-Bus: `Manager.StartWipe` and `org.mdpilot.MdPilot1.Job` on a private
//! `dbus-daemon` with the real `mdpilot serve --root TMP`. The `loop_*` tests write only to loop
//! devices they attached themselves (RAII guards detach them) and skip when not root.
//!
//! TMP is a root whose `sys` and `dev` are links to the host's (read for the probe; a loop device
//! is no md array, so nothing is written there) while `proc` is a private tree: the policy's
//! speed-limit files and its state file stay in TMP.

mod common;
#[macro_use]
mod wipe_support;

use common::{Bus, FakePolkit, Service};
use futures_util::StreamExt;
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;
use wipe_support::LoopDev;
use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};

const NAME: &str = "org.mdpilot.MdPilot1";
const PATH: &str = "/org/mdpilot/MdPilot1";
const MANAGER: &str = "org.mdpilot.MdPilot1.Manager";
const JOB: &str = "org.mdpilot.MdPilot1.Job";
const MIB: u64 = 1 << 20;

fn opts(kv: &[(&str, Value<'static>)]) -> HashMap<String, Value<'static>> {
    kv.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

fn error_name<T>(r: zbus::Result<T>) -> String {
    match r {
        Err(zbus::Error::MethodError(name, _, _)) => name.to_string(),
        Err(e) => format!("other error: {e}"),
        Ok(_) => "success".into(),
    }
}

/// The test root described in the module docs.
fn job_root() -> tempfile::TempDir {
    let t = tempfile::Builder::new()
        .prefix("mdpilot-jobroot.")
        .tempdir()
        .unwrap();
    let r = t.path();
    std::os::unix::fs::symlink("/sys", r.join("sys")).unwrap();
    std::os::unix::fs::symlink("/dev", r.join("dev")).unwrap();
    std::fs::create_dir_all(r.join("proc/self")).unwrap();
    std::fs::create_dir_all(r.join("proc/sys/dev/raid")).unwrap();
    std::fs::write(
        r.join("proc/mdstat"),
        "Personalities : \nunused devices: <none>\n",
    )
    .unwrap();
    std::fs::write(r.join("proc/sys/dev/raid/speed_limit_min"), "1000\n").unwrap();
    std::fs::write(r.join("proc/sys/dev/raid/speed_limit_max"), "200000\n").unwrap();
    std::fs::copy("/proc/self/mountinfo", r.join("proc/self/mountinfo")).unwrap();
    std::fs::copy("/proc/swaps", r.join("proc/swaps")).unwrap();
    std::fs::create_dir_all(r.join("etc/mdpilot/config.d")).unwrap();
    std::fs::write(
        r.join("etc/mdpilot/config.d/test.toml"),
        "[service]\nprogress_interval_ms = 100\n",
    )
    .unwrap();
    t
}

/// Every signal under `/org/mdpilot/MdPilot1/jobs` (subscribed before the job starts, so a
/// fast job's signals are not missed).
async fn job_signals(conn: &zbus::Connection) -> zbus::MessageStream {
    let rule = zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .path_namespace("/org/mdpilot/MdPilot1/jobs")
        .unwrap()
        .build();
    zbus::MessageStream::for_match_rule(rule, conn, Some(256))
        .await
        .unwrap()
}

async fn start_wipe(
    conn: &zbus::Connection,
    dev: &Path,
    o: HashMap<String, Value<'static>>,
) -> zbus::Result<OwnedObjectPath> {
    let r = conn
        .call_method(
            Some(NAME),
            PATH,
            Some(MANAGER),
            "StartWipe",
            &(dev.to_str().unwrap(), o),
        )
        .await?;
    r.body().deserialize::<OwnedObjectPath>()
}

async fn job_prop(conn: &zbus::Connection, path: &str, prop: &str) -> OwnedValue {
    conn.call_method(
        Some(NAME),
        path,
        Some("org.freedesktop.DBus.Properties"),
        "Get",
        &(JOB, prop),
    )
    .await
    .unwrap()
    .body()
    .deserialize::<OwnedValue>()
    .unwrap()
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
        let m = tokio::time::timeout_at(deadline, s.next())
            .await
            .expect("timed out waiting for job signals")
            .unwrap()
            .unwrap();
        let h = m.header();
        if h.path().map(|p| p.as_str()) != Some(path) {
            continue;
        }
        match h.member().map(|m| m.as_str()) {
            Some("PropertiesChanged") => {
                let (iface, changed, _): (String, HashMap<String, OwnedValue>, Vec<String>) =
                    m.body().deserialize().unwrap();
                assert_eq!(iface, JOB);
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
        mdpilot::dbus::auth::Authority::new(mdpilot::dbus::BusChoice::Address(bus.address.clone())),
    ));
    let conn = zbus::connection::Builder::address(bus.address.as_str())
        .unwrap()
        .serve_at("/org/mdpilot/MdPilot1/jobs/1", obj)
        .unwrap()
        .build()
        .await
        .unwrap();
    let doc: String = conn
        .call_method(
            conn.unique_name().map(|n| n.to_string()),
            "/org/mdpilot/MdPilot1/jobs/1",
            Some("org.freedesktop.DBus.Introspectable"),
            "Introspect",
            &(),
        )
        .await
        .unwrap()
        .body()
        .deserialize()
        .unwrap();
    let start = doc.find(&format!("<interface name=\"{JOB}\">")).unwrap();
    let end = doc[start..].find("</interface>").unwrap() + start + "</interface>".len();
    let live: String = doc[start..end]
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n");
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("dbus/{JOB}.xml"));
    if std::env::var_os("MDPILOT_UPDATE_XML").is_some() {
        let doc = format!(
            "<!DOCTYPE node PUBLIC \"-//freedesktop//DTD D-BUS Object Introspection 1.0//EN\"\n \"http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd\">\n<!-- Generated from the live object: MDPILOT_UPDATE_XML=1 cargo test --test dbus_jobs introspection -->\n<node>\n  {live}\n{}</node>\n",
            mdpilot::dbus::errors::xml_doc()
        );
        std::fs::write(&file, doc).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&file).unwrap();
    let cs = committed
        .find(&format!("<interface name=\"{JOB}\">"))
        .unwrap();
    let ce = committed[cs..].find("</interface>").unwrap() + cs + "</interface>".len();
    let committed: String = committed[cs..ce]
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n");
    pretty_assertions::assert_eq!(
        committed,
        live,
        "{} drifted; regenerate with MDPILOT_UPDATE_XML=1",
        file.display()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_start_wipe_reports_progress_and_completes() {
    need_root!();
    let Some(bus) = Bus::start() else { return };
    let root = job_root();
    let _svc = Service::start(&bus, &["--root", root.path().to_str().unwrap()], &[]).await;
    let dev = LoopDev::filled(64 * MIB, 0xa5);
    let c = bus.connect().await;
    let mut sig = job_signals(&c).await;
    let job = start_wipe(&c, &dev.path, opts(&[("method", Value::from("zero"))]))
        .await
        .unwrap();
    assert!(
        job.as_str().starts_with("/org/mdpilot/MdPilot1/jobs/"),
        "{job}"
    );
    let seen = watch(&mut sig, job.as_str(), Duration::from_secs(60), |_| false).await;
    let (ok, msg) = seen.completed.clone().unwrap();
    assert!(ok, "{msg}");
    assert!(msg.contains(&dev.path.display().to_string()), "{msg}");
    assert_eq!(seen.progress.last().copied(), Some(1.0), "{seen:?}");
    // The object lingers after Completed with its final values.
    let s = |v: OwnedValue| String::try_from(v).unwrap();
    let u = |v: OwnedValue| u64::try_from(v).unwrap();
    assert_eq!(
        s(job_prop(&c, job.as_str(), "Operation").await),
        "wipe-zero"
    );
    assert_eq!(
        s(job_prop(&c, job.as_str(), "Device").await),
        dev.path.display().to_string()
    );
    assert_eq!(u(job_prop(&c, job.as_str(), "Bytes").await), 64 * MIB);
    assert_eq!(u(job_prop(&c, job.as_str(), "BytesDone").await), 64 * MIB);
    assert!(u(job_prop(&c, job.as_str(), "StartTime").await) > 1_600_000_000_000_000);
    assert!(!s(job_prop(&c, job.as_str(), "Plan").await).is_empty());
    assert!(bool::try_from(job_prop(&c, job.as_str(), "ProgressValid").await).unwrap());
    // A loop device is no array: no array object.
    let objects =
        <Vec<OwnedObjectPath>>::try_from(job_prop(&c, job.as_str(), "Objects").await).unwrap();
    assert!(objects.is_empty(), "{objects:?}");
    let plan =
        <HashMap<String, OwnedValue>>::try_from(job_prop(&c, job.as_str(), "PlanData").await)
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
    assert!(!bool::try_from(job_prop(&c, job.as_str(), "Cancelable").await).unwrap());
    assert_eq!(
        u32::try_from(job_prop(&c, job.as_str(), "StartedByUID").await).unwrap(),
        0
    );
    // The typed client proxy reads the same object.
    let jp = mdpilot::dbus::client::JobProxy::builder(&c)
        .path(job.as_str())
        .unwrap()
        .build()
        .await
        .unwrap();
    assert_eq!(jp.started_by_uid().await.unwrap(), 0);
    assert_eq!(jp.progress().await.unwrap(), 1.0);
    let data = dev.read_all();
    assert!(data.iter().all(|&b| b == 0), "device not zeroed");
    // Cancel after the end is Failed; refusals name the device.
    let r = c
        .call_method(Some(NAME), job.as_str(), Some(JOB), "Cancel", &(opts(&[]),))
        .await;
    assert_eq!(error_name(r), "org.mdpilot.MdPilot1.Error.Failed");
    let r = start_wipe(&c, Path::new("/dev/null"), opts(&[])).await;
    assert_eq!(error_name(r), "org.mdpilot.MdPilot1.Error.InvalidArgument");
    let r = start_wipe(&c, &dev.path, opts(&[("method", Value::from("shred"))])).await;
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
    let Some(bus) = Bus::start() else { return };
    let root = job_root();
    let _svc = Service::start(&bus, &["--root", root.path().to_str().unwrap()], &[]).await;
    let dev = LoopDev::new(1024 * MIB);
    let c = bus.connect().await;
    let mut sig = job_signals(&c).await;
    let job = start_slow_job(&c, &dev, &mut sig).await;
    // A second job on the same device is Busy while the first runs.
    let r = start_wipe(&c, &dev.path, opts(&[])).await;
    assert_eq!(error_name(r), "org.mdpilot.MdPilot1.Error.Busy");
    c.call_method(Some(NAME), job.as_str(), Some(JOB), "Cancel", &(opts(&[]),))
        .await
        .unwrap();
    // A second Cancel, racing the first's completion or after it, is Cancelled.
    let r = c
        .call_method(Some(NAME), job.as_str(), Some(JOB), "Cancel", &(opts(&[]),))
        .await;
    assert_eq!(error_name(r), "org.mdpilot.MdPilot1.Error.Cancelled");
    let seen = watch(&mut sig, job.as_str(), Duration::from_secs(60), |_| false).await;
    let (ok, msg) = seen.completed.unwrap();
    assert!(!ok);
    assert!(msg.contains("cancelled"), "{msg}");
    let r = c
        .call_method(Some(NAME), job.as_str(), Some(JOB), "Cancel", &(opts(&[]),))
        .await;
    assert_eq!(error_name(r), "org.mdpilot.MdPilot1.Error.Cancelled");
    let done = u64::try_from(job_prop(&c, job.as_str(), "BytesDone").await).unwrap();
    assert!(done > 0 && done < 1024 * MIB, "{done}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_sigterm_cancels_running_jobs() {
    need_root!();
    let Some(bus) = Bus::start() else { return };
    let root = job_root();
    let mut svc = Service::start(&bus, &["--root", root.path().to_str().unwrap()], &[]).await;
    let dev = LoopDev::new(1024 * MIB);
    let c = bus.connect().await;
    let mut sig = job_signals(&c).await;
    let job = start_slow_job(&c, &dev, &mut sig).await;
    let t = std::time::Instant::now();
    let st = tokio::task::spawn_blocking(move || svc.term())
        .await
        .unwrap();
    assert!(st.success(), "{st}");
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    let seen = watch(&mut sig, job.as_str(), Duration::from_secs(5), |_| false).await;
    assert_eq!(seen.completed.map(|c| c.0), Some(false));
}

/// Runs as `nobody` inside `loop_unprivileged_caller_cannot_start_or_cancel`.
#[tokio::test]
#[ignore = "helper: run by loop_unprivileged_caller_cannot_start_or_cancel as nobody"]
async fn job_unprivileged_helper() {
    let (Ok(addr), Ok(dev), Ok(job)) = (
        std::env::var("MDPILOT_TEST_BUS"),
        std::env::var("MDPILOT_TEST_DEV"),
        std::env::var("MDPILOT_TEST_JOB"),
    ) else {
        return;
    };
    let c = zbus::connection::Builder::address(addr.as_str())
        .unwrap()
        .build()
        .await
        .unwrap();
    // SAFETY: geteuid has no preconditions.
    println!("UID {}", unsafe { libc::geteuid() });
    // Reads are open.
    let _ = job_prop(&c, &job, "Progress").await;
    let no_prompt = ("auth.no_user_interaction", Value::Bool(true));
    let r = start_wipe(&c, Path::new(&dev), opts(&[no_prompt])).await;
    if let Ok(own) = &r {
        // Cancelling one's own job asks polkit nothing (it may have finished already).
        let r = c
            .call_method(Some(NAME), own.as_str(), Some(JOB), "Cancel", &(opts(&[]),))
            .await;
        println!("RESULT CancelOwn {}", error_name(r));
    }
    println!("RESULT StartWipe {}", error_name(r));
    let r = c
        .call_method(Some(NAME), job.as_str(), Some(JOB), "Cancel", &(opts(&[]),))
        .await;
    println!("RESULT Cancel {}", error_name(r));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_unprivileged_caller_cannot_start_or_cancel() {
    need_root!();
    let Some(bus) = Bus::start() else { return };
    let root = job_root();
    let _svc = Service::start(&bus, &["--root", root.path().to_str().unwrap()], &[]).await;
    let dev = LoopDev::new(1024 * MIB);
    let other = LoopDev::new(16 * MIB);
    let c = bus.connect().await;
    let mut sig = job_signals(&c).await;
    let job = start_slow_job(&c, &dev, &mut sig).await;
    let out = tokio::process::Command::new("setpriv")
        .args(["--reuid", "nobody", "--regid", "nogroup", "--clear-groups"])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "job_unprivileged_helper",
            "--ignored",
            "--nocapture",
        ])
        .env("MDPILOT_TEST_BUS", &bus.address)
        .env("MDPILOT_TEST_DEV", &other.path)
        .env("MDPILOT_TEST_JOB", job.as_str())
        .output()
        .await
        .expect("setpriv");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("UID 65534"), "{stdout}");
    let na = "org.mdpilot.MdPilot1.Error.NotAuthorized";
    assert!(
        stdout.contains(&format!("RESULT StartWipe {na}")),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("RESULT Cancel {na}")), "{stdout}");
    // The job still runs; root cancels it.
    assert!(bool::try_from(job_prop(&c, job.as_str(), "Cancelable").await).unwrap());
    c.call_method(Some(NAME), job.as_str(), Some(JOB), "Cancel", &(opts(&[]),))
        .await
        .unwrap();
    let seen = watch(&mut sig, job.as_str(), Duration::from_secs(60), |_| false).await;
    assert_eq!(seen.completed.map(|c| c.0), Some(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_polkit_is_asked_for_wiping_and_for_cancelling_anothers_job() {
    need_root!();
    let Some(bus) = Bus::start() else { return };
    let polkit = FakePolkit::serve(&bus, true).await;
    let root = job_root();
    let _svc = Service::start(
        &bus,
        &["--root", root.path().to_str().unwrap()],
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
    let out = tokio::process::Command::new("setpriv")
        .args(["--reuid", "nobody", "--regid", "nogroup", "--clear-groups"])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "job_unprivileged_helper",
            "--ignored",
            "--nocapture",
        ])
        .env("MDPILOT_TEST_BUS", &bus.address)
        .env("MDPILOT_TEST_DEV", &other.path)
        .env("MDPILOT_TEST_JOB", job.as_str())
        .output()
        .await
        .expect("setpriv");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{stdout}");
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
    let Some(bus) = Bus::start() else { return };
    let root = job_root();
    let _svc = Service::start(
        &bus,
        &["--root", root.path().to_str().unwrap()],
        &[("MDPILOT_JOB_LINGER_MS", "300")],
    )
    .await;
    let dev = LoopDev::filled(16 * MIB, 0x11);
    let c = bus.connect().await;
    let rule = zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .interface("org.freedesktop.DBus.ObjectManager")
        .unwrap()
        .build();
    let mut om = zbus::MessageStream::for_match_rule(rule, &c, Some(64))
        .await
        .unwrap();
    let mut sig = job_signals(&c).await;
    let job = start_wipe(&c, &dev.path, opts(&[("verify", Value::Bool(true))]))
        .await
        .unwrap();
    let seen = watch(&mut sig, job.as_str(), Duration::from_secs(60), |_| false).await;
    let (ok, msg) = seen.completed.unwrap();
    assert!(ok && msg.contains("verified"), "{msg}");
    let mut added = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let m = tokio::time::timeout_at(deadline, om.next())
            .await
            .expect("no InterfacesRemoved for the job")
            .unwrap()
            .unwrap();
        let member = m.header().member().map(|m| m.to_string());
        let (path, _): (OwnedObjectPath, zbus::zvariant::OwnedValue) = match member.as_deref() {
            Some("InterfacesAdded") | Some("InterfacesRemoved") => {
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
    let r = c
        .call_method(
            Some(NAME),
            job.as_str(),
            Some("org.freedesktop.DBus.Properties"),
            "Get",
            &(JOB, "Progress"),
        )
        .await;
    assert_ne!(error_name(r), "success", "the job object should be gone");
}
