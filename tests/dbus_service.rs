//! `mdpilot serve` on a private bus: each test starts its own `dbus-daemon` and the real binary
//! (`--sim`, or `--root` over a simulated tree the test owns).

mod common;

use common::{Bus, FakePolkit, Service, BIN};
use futures_util::{FutureExt, StreamExt};
use std::collections::HashMap;
use std::time::Duration;
use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};

const NAME: &str = "org.mdpilot.MdPilot1";
const PATH: &str = "/org/mdpilot/MdPilot1";
const MANAGER: &str = "org.mdpilot.MdPilot1.Manager";
const ARRAY: &str = "org.mdpilot.MdPilot1.Array";

type Managed = HashMap<OwnedObjectPath, HashMap<String, HashMap<String, OwnedValue>>>;

async fn call<B>(
    conn: &zbus::Connection,
    path: &str,
    iface: &str,
    method: &str,
    body: &B,
) -> zbus::Result<zbus::Message>
where
    B: serde::Serialize + zbus::zvariant::DynamicType,
{
    conn.call_method(Some(NAME), path, Some(iface), method, body)
        .await
}

fn error_name(r: zbus::Result<zbus::Message>) -> String {
    match r {
        Err(zbus::Error::MethodError(name, _, _)) => name.to_string(),
        Err(e) => format!("other error: {e}"),
        Ok(_) => "success".into(),
    }
}

async fn get(conn: &zbus::Connection, path: &str, iface: &str, prop: &str) -> OwnedValue {
    let r = call(
        conn,
        path,
        "org.freedesktop.DBus.Properties",
        "Get",
        &(iface, prop),
    )
    .await
    .unwrap();
    r.body().deserialize::<OwnedValue>().unwrap()
}

async fn get_u64(conn: &zbus::Connection, prop: &str) -> u64 {
    u64::try_from(get(conn, PATH, MANAGER, prop).await).unwrap()
}

async fn leases(conn: &zbus::Connection) -> usize {
    let v = get(conn, PATH, MANAGER, "Leases").await;
    match &*v {
        Value::Array(a) => a.len(),
        other => panic!("Leases is {other:?}"),
    }
}

fn opts(kv: &[(&str, Value<'static>)]) -> HashMap<String, Value<'static>> {
    kv.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

/// Waits until `f` holds (at most 10 s).
async fn eventually<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !f().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The `<interface name="...">...</interface>` element of an introspection document.
fn interface_xml(doc: &str, iface: &str) -> String {
    let start = doc
        .find(&format!("<interface name=\"{iface}\">"))
        .unwrap_or_else(|| panic!("{iface} not in introspection:\n{doc}"));
    let end = doc[start..].find("</interface>").unwrap() + start + "</interface>".len();
    doc[start..end]
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
}

async fn introspect(conn: &zbus::Connection, path: &str) -> String {
    call(
        conn,
        path,
        "org.freedesktop.DBus.Introspectable",
        "Introspect",
        &(),
    )
    .await
    .unwrap()
    .body()
    .deserialize::<String>()
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn introspection_matches_committed_xml() {
    let Some(bus) = Bus::start() else { return };
    let _svc = Service::start(&bus, &["--sim"], &[]).await;
    let conn = bus.connect().await;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("dbus");
    for (path, iface) in [
        (PATH.to_string(), MANAGER),
        (format!("{PATH}/arrays/md0"), ARRAY),
    ] {
        let live = interface_xml(&introspect(&conn, &path).await, iface);
        let file = dir.join(format!("{iface}.xml"));
        if std::env::var_os("MDPILOT_UPDATE_XML").is_some() {
            let doc = format!(
                "<!DOCTYPE node PUBLIC \"-//freedesktop//DTD D-BUS Object Introspection 1.0//EN\"\n \"http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd\">\n<!-- Generated from the live service: MDPILOT_UPDATE_XML=1 cargo test --test dbus_service introspection -->\n<node>\n  {live}\n{}</node>\n",
                mdpilot::dbus::errors::xml_doc()
            );
            std::fs::write(&file, doc).unwrap();
            continue;
        }
        let committed = std::fs::read_to_string(&file).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (regenerate with MDPILOT_UPDATE_XML=1)",
                file.display()
            )
        });
        pretty_assertions::assert_eq!(
            interface_xml(&committed, iface),
            live,
            "{} drifted from the live object; regenerate with MDPILOT_UPDATE_XML=1",
            file.display()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arrays_are_listed_with_their_properties() {
    let Some(bus) = Bus::start() else { return };
    let _svc = Service::start(&bus, &["--sim"], &[]).await;
    let conn = bus.connect().await;
    let r = call(
        &conn,
        PATH,
        "org.freedesktop.DBus.ObjectManager",
        "GetManagedObjects",
        &(),
    )
    .await
    .unwrap();
    let objs: Managed = r.body().deserialize().unwrap();
    let md = |n: &str| {
        let p = OwnedObjectPath::try_from(format!("{PATH}/arrays/{n}")).unwrap();
        objs.get(&p)
            .unwrap_or_else(|| panic!("{n} missing: {objs:?}"))[ARRAY]
            .clone()
    };
    let md0 = md("md0");
    let s = |m: &HashMap<String, OwnedValue>, k: &str| {
        String::try_from(m[k].try_clone().unwrap()).unwrap()
    };
    let t = |m: &HashMap<String, OwnedValue>, k: &str| {
        u64::try_from(m[k].try_clone().unwrap()).unwrap()
    };
    assert_eq!(s(&md0, "Name"), "md0");
    assert_eq!(s(&md0, "Level"), "raid1");
    assert_eq!(
        u32::try_from(md0["NumDevices"].try_clone().unwrap()).unwrap(),
        2
    );
    assert_eq!(t(&md0, "Size"), 1 << 30);
    assert_eq!(s(&md0, "SyncAction"), "idle");
    assert_eq!(s(&md0, "State"), "clean");
    assert_eq!(s(&md0, "UUID"), "3b6c2a6e-0d0e-4b7a-9d5e-8a7b1c2d3e4f");
    let devs: Vec<(String, i32, Vec<String>, u64)> = md0["ActiveDevices"]
        .try_clone()
        .unwrap()
        .try_into()
        .unwrap();
    assert_eq!(devs[0], ("sda1".into(), 0, vec!["in_sync".into()], 0));
    let md1 = md("md1");
    assert_eq!(s(&md1, "Level"), "raid5");
    assert_eq!(s(&md1, "SyncAction"), "resync");
    assert_eq!(t(&md1, "SyncTotalSectors"), 64 * 1_048_576 * 2);
    assert_eq!(t(&md1, "ChunkSize"), 512 * 1024);
    let (min, how): (u64, String) = md1["SyncSpeedMin"].try_clone().unwrap().try_into().unwrap();
    assert_eq!((min, how.as_str()), (1000, "system"));
    // The ObjectManager lists the objects below it; the manager itself is read directly.
    // (zbus also lists the interface-less parent node `.../arrays`.)
    assert_eq!(
        objs.values().filter(|i| !i.is_empty()).count(),
        2,
        "{objs:?}"
    );
    assert_eq!(get_u64(&conn, "SpeedLimitMax").await, 200_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_reaches_a_subscribed_client_as_properties_changed() {
    let Some(bus) = Bus::start() else { return };
    let _svc = Service::start(&bus, &["--sim"], &[("MDPILOT_SIM_TICK_MS", "100")]).await;
    let conn = bus.connect().await;
    let rule = zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .interface("org.freedesktop.DBus.Properties")
        .unwrap()
        .member("PropertiesChanged")
        .unwrap()
        .path(format!("{PATH}/arrays/md1"))
        .unwrap()
        .build();
    let mut stream = zbus::MessageStream::for_match_rule(rule, &conn, None)
        .await
        .unwrap();
    let msg = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("no PropertiesChanged within 10 s")
        .unwrap()
        .unwrap();
    let (iface, changed, _): (String, HashMap<String, OwnedValue>, Vec<String>) =
        msg.body().deserialize().unwrap();
    assert_eq!(iface, ARRAY);
    assert!(changed.contains_key("SyncCompletedSectors"), "{changed:?}");
    // Only what changed: constant facts of the array are not repeated.
    for k in [
        "Name",
        "Level",
        "UUID",
        "Size",
        "ChunkSize",
        "ActiveDevices",
    ] {
        assert!(!changed.contains_key(k), "{k} sent although unchanged");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_is_released_when_its_client_disconnects() {
    let Some(bus) = Bus::start() else { return };
    let svc = Service::start(&bus, &["--sim"], &[]).await;
    let knob = svc
        .sim_root
        .clone()
        .unwrap()
        .join("proc/sys/dev/raid/speed_limit_min");
    let watcher = bus.connect().await;
    let client = bus.connect().await;
    let r = call(
        &client,
        PATH,
        MANAGER,
        "AcquirePriority",
        &(opts(&[("min", Value::U64(50_000))]),),
    )
    .await
    .unwrap();
    let id: String = r.body().deserialize().unwrap();
    assert!(!id.is_empty());
    assert_eq!(leases(&watcher).await, 1);
    assert_eq!(get_u64(&watcher, "SpeedLimitMin").await, 50_000);
    assert_eq!(get_u64(&watcher, "OriginalSpeedLimitMin").await, 1000);
    assert_eq!(std::fs::read_to_string(&knob).unwrap().trim(), "50000");
    drop(client);
    eventually("lease released after disconnect", || async {
        leases(&watcher).await == 0
    })
    .await;
    assert_eq!(get_u64(&watcher, "SpeedLimitMin").await, 1000);
    assert_eq!(std::fs::read_to_string(&knob).unwrap().trim(), "1000");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_get_typed_errors() {
    let Some(bus) = Bus::start() else { return };
    let _svc = Service::start(&bus, &["--sim"], &[]).await;
    let c = bus.connect().await;
    let inv = "org.mdpilot.MdPilot1.Error.InvalidArgument";
    let r = call(
        &c,
        PATH,
        MANAGER,
        "AcquirePriority",
        &(opts(&[("bogus", Value::U64(1))]),),
    )
    .await;
    assert_eq!(error_name(r), inv);
    let r = call(
        &c,
        PATH,
        MANAGER,
        "AcquirePriority",
        &(opts(&[("min", Value::from("x"))]),),
    )
    .await;
    assert_eq!(error_name(r), inv);
    let r = call(&c, PATH, MANAGER, "ReleasePriority", &("no-such-lease",)).await;
    assert_eq!(error_name(r), inv);
    let r = call(
        &c,
        PATH,
        MANAGER,
        "SetArraySpeedLimits",
        &("md0", 9u64, 3u64, opts(&[])),
    )
    .await;
    assert_eq!(error_name(r), inv);
    let r = call(
        &c,
        PATH,
        MANAGER,
        "SetArraySpeedLimits",
        &("md9", 1u64, 3u64, opts(&[])),
    )
    .await;
    assert_eq!(error_name(r), "org.mdpilot.MdPilot1.Error.NoSuchArray");
    let r = call(
        &c,
        PATH,
        MANAGER,
        "RestoreLimits",
        &(opts(&[("defaults", Value::U32(1))]),),
    )
    .await;
    assert_eq!(error_name(r), inv);
    // The service survives all of it.
    assert_eq!(get_u64(&c, "SpeedLimitMin").await, 1000);
    call(
        &c,
        PATH,
        MANAGER,
        "SetArraySpeedLimits",
        &("md1", 0u64, 50_000u64, opts(&[])),
    )
    .await
    .unwrap();
    eventually("per-array limit visible", || async {
        let v = get(&c, &format!("{PATH}/arrays/md1"), ARRAY, "SyncSpeedMax").await;
        <(u64, String)>::try_from(v).unwrap() == (50_000, "local".to_string())
    })
    .await;
}

/// The calls an unprivileged client makes; each must answer NotAuthorized.
async fn mutating_calls(c: &zbus::Connection) -> Vec<(&'static str, String)> {
    vec![
        (
            "AcquirePriority",
            error_name(
                call(
                    c,
                    PATH,
                    MANAGER,
                    "AcquirePriority",
                    &(opts(&[("min", Value::U64(1))]),),
                )
                .await,
            ),
        ),
        (
            "ReleasePriority",
            error_name(call(c, PATH, MANAGER, "ReleasePriority", &("x",)).await),
        ),
        (
            "SetArraySpeedLimits",
            error_name(
                call(
                    c,
                    PATH,
                    MANAGER,
                    "SetArraySpeedLimits",
                    &("md0", 1u64, 2u64, opts(&[])),
                )
                .await,
            ),
        ),
        (
            "RestoreLimits",
            // udisks2's standard option: no polkit prompt for this one.
            error_name(
                call(
                    c,
                    PATH,
                    MANAGER,
                    "RestoreLimits",
                    &(opts(&[("auth.no_user_interaction", Value::Bool(true))]),),
                )
                .await,
            ),
        ),
        (
            "StartWipe",
            error_name(call(c, PATH, MANAGER, "StartWipe", &("/dev/md0", opts(&[]))).await),
        ),
    ]
}

/// Runs inside `unprivileged_caller_gets_not_authorized` as `nobody` (re-executed test binary).
#[tokio::test]
#[ignore = "helper: run by unprivileged_caller_gets_not_authorized as nobody"]
async fn unprivileged_client_helper() {
    let Ok(addr) = std::env::var("MDPILOT_TEST_BUS") else {
        return;
    };
    let c = zbus::connection::Builder::address(addr.as_str())
        .unwrap()
        .build()
        .await
        .unwrap();
    // SAFETY: geteuid has no preconditions.
    println!("UID {}", unsafe { libc::geteuid() });
    // Reads stay open to everyone.
    let _ = get(&c, PATH, MANAGER, "SpeedLimitMin").await;
    for (m, e) in mutating_calls(&c).await {
        println!("RESULT {m} {e}");
    }
    let own = match c.request_name("org.mdpilot.MdPilot1").await {
        Ok(()) => "owned".to_string(),
        Err(zbus::Error::FDO(e)) => format!("{}", zbus::DBusError::name(&*e)),
        Err(e) => format!("{e}"),
    };
    println!("OWN {own}");
}

/// Runs the helper as `nobody` against `bus`; returns its RESULT and OWN lines.
async fn run_helper_as_nobody(bus: &Bus) -> Vec<String> {
    let exe = std::env::current_exe().unwrap();
    let out = tokio::process::Command::new("setpriv")
        .args(["--reuid", "nobody", "--regid", "nogroup", "--clear-groups"])
        .arg(&exe)
        .args([
            "--exact",
            "unprivileged_client_helper",
            "--ignored",
            "--nocapture",
        ])
        .env("MDPILOT_TEST_BUS", &bus.address)
        .output()
        .await
        .expect("setpriv");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "helper failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("UID 65534"),
        "helper did not run as nobody: {stdout}"
    );
    stdout
        .lines()
        .filter(|l| l.starts_with("RESULT ") || l.starts_with("OWN "))
        .map(str::to_string)
        .collect()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shipped_bus_policy_lets_everyone_call_but_only_root_own_the_name() {
    if !is_root() {
        eprintln!("skipping: needs root to switch to nobody");
        return;
    }
    let Some(bus) = Bus::start_system_like() else {
        return;
    };
    let _svc = Service::start(&bus, &["--sim"], &[]).await;
    let lines = run_helper_as_nobody(&bus).await;
    // Calls get through the bus policy and are refused by the service itself.
    let results: Vec<&String> = lines.iter().filter(|l| l.starts_with("RESULT ")).collect();
    assert_eq!(results.len(), 5, "{lines:?}");
    for l in results {
        assert!(
            l.ends_with(" org.mdpilot.MdPilot1.Error.NotAuthorized"),
            "{l}"
        );
    }
    let own = lines.iter().find(|l| l.starts_with("OWN ")).unwrap();
    assert!(own.contains("AccessDenied"), "{own}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unprivileged_caller_gets_not_authorized() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping: needs root to switch to nobody");
        return;
    }
    let Some(bus) = Bus::start() else { return };
    let svc = Service::start(&bus, &["--sim"], &[]).await;
    let knob = svc
        .sim_root
        .clone()
        .unwrap()
        .join("proc/sys/dev/raid/speed_limit_min");
    let exe = std::env::current_exe().unwrap();
    let out = tokio::process::Command::new("setpriv")
        .args(["--reuid", "nobody", "--regid", "nogroup", "--clear-groups"])
        .arg(&exe)
        .args([
            "--exact",
            "unprivileged_client_helper",
            "--ignored",
            "--nocapture",
        ])
        .env("MDPILOT_TEST_BUS", &bus.address)
        .output()
        .await
        .expect("setpriv");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "helper failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("RESULT "))
        .collect();
    assert_eq!(results.len(), 5, "{stdout}");
    for l in results {
        assert!(
            l.ends_with(" org.mdpilot.MdPilot1.Error.NotAuthorized"),
            "{l}"
        );
    }
    assert_eq!(std::fs::read_to_string(&knob).unwrap().trim(), "1000");
    // Root (this process) is allowed.
    let c = bus.connect().await;
    let r = call(&c, PATH, MANAGER, "RestoreLimits", &(opts(&[]),)).await;
    assert_eq!(error_name(r), "success");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_restores_limits_and_exits_0_and_a_second_instance_refuses() {
    let Some(bus) = Bus::start() else { return };
    let sim = mdpilot::sim::Sim::create().unwrap();
    let root = sim.path().to_str().unwrap().to_string();
    let knob = sim.root().proc("sys/dev/raid/speed_limit_min");
    let mut svc = Service::start(&bus, &["--root", &root], &[]).await;
    // A second instance on the same root refuses (lock), exit 3.
    let second = std::process::Command::new(BIN)
        .args(["serve", "--root", &root, "--bus", &bus.address])
        .output()
        .unwrap();
    assert_eq!(
        second.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let client = bus.connect().await;
    call(
        &client,
        PATH,
        MANAGER,
        "AcquirePriority",
        &(opts(&[
            ("min", Value::U64(70_000)),
            ("kind", Value::from("installer")),
        ]),),
    )
    .await
    .unwrap();
    assert_eq!(std::fs::read_to_string(&knob).unwrap().trim(), "70000");
    let st = svc.term();
    assert_eq!(st.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&knob).unwrap().trim(), "1000");
    let dbus = zbus::fdo::DBusProxy::new(&client).await.unwrap();
    let name = zbus::names::BusName::try_from(NAME).unwrap();
    assert!(
        !dbus.name_has_owner(name).await.unwrap(),
        "name not released"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_prints_one_json_line_per_change() {
    let Some(bus) = Bus::start() else { return };
    let _svc = Service::start(&bus, &["--sim"], &[("MDPILOT_SIM_TICK_MS", "100")]).await;
    let mut mon = tokio::process::Command::new(BIN)
        .args(["monitor", "--json", "--bus", &bus.address])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines =
        tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(mon.stdout.take().unwrap()));
    let mut added = 0;
    let found = tokio::time::timeout(Duration::from_secs(10), async {
        while let Ok(Some(l)) = lines.next_line().await {
            let j: serde_json::Value = serde_json::from_str(&l).unwrap();
            if j["event"] == "added" {
                added += 1;
            }
            if j["event"] == "changed" && j["object"] == "md1" {
                return j;
            }
        }
        panic!("monitor ended");
    })
    .await
    .expect("no change line within 10 s");
    assert!(
        found["properties"]["SyncCompletedSectors"].is_u64(),
        "{found}"
    );
    assert!(added >= 3, "initial objects not listed ({added})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arrays_appearing_and_vanishing_are_interfaces_added_and_removed() {
    let Some(bus) = Bus::start() else { return };
    let sim = mdpilot::sim::Sim::create().unwrap();
    let root = sim.root().clone();
    let _svc = Service::start(&bus, &["--root", sim.path().to_str().unwrap()], &[]).await;
    let conn = bus.connect().await;
    let rule = zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .interface("org.freedesktop.DBus.ObjectManager")
        .unwrap()
        .build();
    let mut stream = zbus::MessageStream::for_match_rule(rule, &conn, None)
        .await
        .unwrap();
    let manager = mdpilot::dbus::client::ManagerProxy::new(&conn)
        .await
        .unwrap();
    assert_eq!(manager.version().await.unwrap(), env!("CARGO_PKG_VERSION"));

    // md0 stops: its stanza leaves mdstat and its md/ directory goes.
    let mdstat = std::fs::read_to_string(root.proc("mdstat")).unwrap();
    let without: String = {
        let start = mdstat.find("md0 : ").unwrap();
        let end = mdstat.find("md1 : ").unwrap();
        format!("{}{}", &mdstat[..start], &mdstat[end..])
    };
    let md0 = root.sys("block/md0");
    let parked = sim.path().join("md0.parked");
    std::fs::rename(&md0, &parked).unwrap();
    std::fs::write(root.proc("mdstat"), &without).unwrap();
    // A regular-file tree raises no POLLPRI; any limit change makes the service re-read all.
    manager.restore_limits(HashMap::new()).await.unwrap();
    let msg = next_signal(&mut stream).await;
    assert_eq!(msg.header().member().unwrap().as_str(), "InterfacesRemoved");
    let (path, ifaces): (OwnedObjectPath, Vec<String>) = msg.body().deserialize().unwrap();
    assert_eq!(path.as_str(), "/org/mdpilot/MdPilot1/arrays/md0");
    assert_eq!(ifaces, vec![ARRAY.to_string()]);

    // It comes back.
    std::fs::rename(&parked, &md0).unwrap();
    std::fs::write(root.proc("mdstat"), &mdstat).unwrap();
    manager.restore_limits(HashMap::new()).await.unwrap();
    let msg = next_signal(&mut stream).await;
    assert_eq!(msg.header().member().unwrap().as_str(), "InterfacesAdded");
    let (path, ifaces): (
        OwnedObjectPath,
        HashMap<String, HashMap<String, OwnedValue>>,
    ) = msg.body().deserialize().unwrap();
    assert_eq!(path.as_str(), "/org/mdpilot/MdPilot1/arrays/md0");
    let level = String::try_from(ifaces[ARRAY]["Level"].try_clone().unwrap()).unwrap();
    assert_eq!(level, "raid1");
}

async fn next_signal(s: &mut zbus::MessageStream) -> zbus::Message {
    tokio::time::timeout(Duration::from_secs(10), s.next())
        .await
        .expect("no ObjectManager signal")
        .unwrap()
        .unwrap()
}

/// Voluntary context switches of every thread of `pid`.
fn switches(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .flat_map(|s| {
            s.lines()
                .filter(|l| l.starts_with("voluntary_ctxt_switches"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_service_does_not_wake_up() {
    let Some(bus) = Bus::start() else { return };
    let mut sim = mdpilot::sim::Sim::create().unwrap();
    // No sync running: no progress timer, nothing to poll.
    sim.step(Duration::from_secs(1_000_000)).unwrap();
    let svc = Service::start(&bus, &["--root", sim.path().to_str().unwrap()], &[]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = switches(svc.pid());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = switches(svc.pid());
    // Threads that end in the window make the sum drop; count only growth.
    let woke = after.saturating_sub(before);
    assert!(woke <= 2, "{woke} wake-ups in 3 s while idle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_is_sent_after_the_name_is_owned_and_stopping_on_sigterm() {
    let Some(bus) = Bus::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let sock_path = dir.path().join("notify");
    let sock = std::os::unix::net::UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut child = std::process::Command::new(BIN)
        .args(["serve", "--sim", "--bus", &bus.address])
        .env("NOTIFY_SOCKET", &sock_path)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 512];
    let n = sock.recv(&mut buf).unwrap();
    let msg = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(msg.lines().any(|l| l == "READY=1"), "{msg}");
    // By the time READY arrives, the objects are served and the name is owned.
    let conn = bus.connect().await;
    let dbus = zbus::fdo::DBusProxy::new(&conn).await.unwrap();
    let name = zbus::names::BusName::try_from(NAME).unwrap();
    assert!(dbus.name_has_owner(name).await.unwrap());
    assert_eq!(leases(&conn).await, 0);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let n = sock.recv(&mut buf).unwrap();
    let msg = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(msg.lines().any(|l| l == "STOPPING=1"), "{msg}");
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polkit_decides_for_unprivileged_callers() {
    if !is_root() {
        eprintln!("skipping: needs root to switch to nobody");
        return;
    }
    for allow in [true, false] {
        let Some(bus) = Bus::start() else { return };
        let polkit = FakePolkit::serve(&bus, allow).await;
        // The service asks "the system bus" for polkit: point it at the private one.
        let _svc = Service::start(
            &bus,
            &["--sim"],
            &[("DBUS_SYSTEM_BUS_ADDRESS", bus.address.as_str())],
        )
        .await;
        let lines = run_helper_as_nobody(&bus).await;
        let got: HashMap<&str, &str> = lines
            .iter()
            .filter_map(|l| {
                let mut w = l.strip_prefix("RESULT ")?.split(' ');
                Some((w.next()?, w.next()?))
            })
            .collect();
        let na = "org.mdpilot.MdPilot1.Error.NotAuthorized";
        if allow {
            assert_eq!(got["AcquirePriority"], "success", "{lines:?}");
            assert_eq!(
                got["ReleasePriority"],
                "org.mdpilot.MdPilot1.Error.InvalidArgument"
            );
            assert_eq!(got["SetArraySpeedLimits"], "success");
            assert_eq!(got["RestoreLimits"], "success");
            // Authorized, then refused by the probe: there is no /dev/md0 here.
            assert_eq!(
                got["StartWipe"],
                "org.mdpilot.MdPilot1.Error.InvalidArgument"
            );
        } else {
            assert!(got.values().all(|e| *e == na), "{lines:?}");
        }
        let asked = polkit.asked();
        assert_eq!(asked.len(), 5, "{asked:?}");
        let priority = "org.mdpilot.MdPilot1.manage-priority";
        let wipe = "org.mdpilot.MdPilot1.wipe";
        // method -> (action, device detail, flags): interaction allowed (1) unless the
        // options said auth.no_user_interaction (RestoreLimits in mutating_calls).
        let want: HashMap<&str, (&str, Option<&str>, u32)> = HashMap::from([
            ("AcquirePriority", (priority, None, 1)),
            ("ReleasePriority", (priority, None, 1)),
            ("SetArraySpeedLimits", (priority, Some("/dev/md0"), 1)),
            ("RestoreLimits", (priority, None, 0)),
            ("StartWipe", (wipe, Some("/dev/md0"), 1)),
        ]);
        for common::Asked {
            subject,
            action,
            details,
            flags,
        } in &asked
        {
            assert_eq!(subject, "unix-process uid=65534");
            let method = details["method"].as_str();
            let (a, dev, f) = want[method];
            assert_eq!(action, a, "{method}");
            assert_eq!(details.get("device").map(String::as_str), dev, "{method}");
            assert_eq!(*flags, f, "{method}: flags");
            assert!(details["polkit.message"].starts_with("Authentication is required"));
            assert_eq!(details["polkit.gettext_domain"], "mdpilot");
        }
        let methods: std::collections::BTreeSet<&str> =
            asked.iter().map(|a| a.details["method"].as_str()).collect();
        assert_eq!(methods.len(), 5, "one question per method: {asked:?}");
        // One system-bus connection for every question, not one per call.
        assert_eq!(polkit.askers().len(), 1, "{:?}", polkit.askers());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_on_max_slows_the_simulated_resync() {
    let Some(bus) = Bus::start() else { return };
    let _svc = Service::start(&bus, &["--sim"], &[("MDPILOT_SIM_TICK_MS", "100")]).await;
    let conn = bus.connect().await;
    let md1 = format!("{PATH}/arrays/md1");
    let rate = |c: zbus::Connection, p: String| async move {
        u64::try_from(get(&c, &p, ARRAY, "SyncRate").await).unwrap()
    };
    eventually("resync at the system max", || {
        rate(conn.clone(), md1.clone()).map(|r| r == 200_000 * 1024)
    })
    .await;
    let manager = mdpilot::dbus::client::ManagerProxy::new(&conn)
        .await
        .unwrap();
    let id = manager
        .acquire_priority(HashMap::from([("max", Value::U64(50_000))]))
        .await
        .unwrap();
    assert_eq!(manager.speed_limit_max().await.unwrap(), 50_000);
    eventually("resync at the leased max", || {
        rate(conn.clone(), md1.clone()).map(|r| r == 50_000 * 1024)
    })
    .await;
    manager.release_priority(&id).await.unwrap();
    eventually("resync back at the system max", || {
        rate(conn.clone(), md1.clone()).map(|r| r == 200_000 * 1024)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_bus_stops_the_service_and_restores_limits() {
    let Some(mut bus) = Bus::start() else { return };
    let sim = mdpilot::sim::Sim::create().unwrap();
    let knob = sim.root().proc("sys/dev/raid/speed_limit_min");
    let mut svc = Service::start(&bus, &["--root", sim.path().to_str().unwrap()], &[]).await;
    let client = bus.connect().await;
    call(
        &client,
        PATH,
        MANAGER,
        "AcquirePriority",
        &(opts(&[("min", Value::U64(60_000))]),),
    )
    .await
    .unwrap();
    assert_eq!(std::fs::read_to_string(&knob).unwrap().trim(), "60000");
    bus.kill();
    let mut child = svc.child.take().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "service kept running without a bus"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        status.code(),
        Some(1),
        "a lost bus is a failure (systemd restarts)"
    );
    assert_eq!(std::fs::read_to_string(&knob).unwrap().trim(), "1000");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_min_zero_install_policy_and_named_leases() {
    let Some(bus) = Bus::start() else { return };
    let svc = Service::start(&bus, &["--sim"], &[]).await;
    let knob = svc
        .sim_root
        .clone()
        .unwrap()
        .join("proc/sys/dev/raid/speed_limit_min");
    let watcher = bus.connect().await;
    // A present min of 0 means 0 (it used to mean "unset").
    let client = bus.connect().await;
    let r = call(
        &client,
        PATH,
        MANAGER,
        "AcquirePriority",
        &(opts(&[("min", Value::U64(0))]),),
    )
    .await
    .unwrap();
    let id: String = r.body().deserialize().unwrap();
    assert_eq!(std::fs::read_to_string(&knob).unwrap().trim(), "0");
    assert_eq!(get_u64(&watcher, "SpeedLimitMin").await, 0);
    call(&client, PATH, MANAGER, "ReleasePriority", &(id.as_str(),))
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(&knob).unwrap().trim(), "1000");
    // Empty options: the install policy (install_min defaults to 0). A holder lease outlives
    // the connection that took it.
    let r = call(
        &client,
        PATH,
        MANAGER,
        "AcquirePriority",
        &(opts(&[
            ("holder", Value::from("installer")),
            ("kind", Value::from("installer")),
        ]),),
    )
    .await
    .unwrap();
    let id: String = r.body().deserialize().unwrap();
    assert_eq!(id, "installer");
    assert_eq!(std::fs::read_to_string(&knob).unwrap().trim(), "0");
    drop(client);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        leases(&watcher).await,
        1,
        "a holder lease is not a bus lease"
    );
    let v = get(&watcher, PATH, MANAGER, "Leases").await;
    let l: Vec<mdpilot::dbus::manager::LeaseInfo> = v.try_into().unwrap();
    assert_eq!(l[0].0, "installer");
    assert_eq!(l[0].1, "installer");
    assert_eq!(l[0].2, "");
    // Another client releases it by name.
    call(&watcher, PATH, MANAGER, "ReleasePriority", &("installer",))
        .await
        .unwrap();
    assert_eq!(leases(&watcher).await, 0);
    assert_eq!(std::fs::read_to_string(&knob).unwrap().trim(), "1000");
    // A pid lease dies with its process (reaped at the next AcquirePriority).
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = child.id();
    call(
        &watcher,
        PATH,
        MANAGER,
        "AcquirePriority",
        &(opts(&[("pid", Value::U32(pid)), ("min", Value::U64(5))]),),
    )
    .await
    .unwrap();
    assert_eq!(leases(&watcher).await, 1);
    child.kill().unwrap();
    child.wait().unwrap();
    let r = call(
        &watcher,
        PATH,
        MANAGER,
        "AcquirePriority",
        &(opts(&[
            ("holder", Value::from("x")),
            ("max", Value::U64(0)),
        ]),),
    )
    .await
    .unwrap();
    assert_eq!(r.body().deserialize::<String>().unwrap(), "x");
    let v = get(&watcher, PATH, MANAGER, "Leases").await;
    let l: Vec<mdpilot::dbus::manager::LeaseInfo> = v.try_into().unwrap();
    assert_eq!(l.len(), 1, "{l:?}");
    assert_eq!(l[0].0, "x");
}
