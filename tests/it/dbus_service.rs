//! `mdpilot serve` on a private bus: each test starts its own `dbus-daemon` and the real binary
//! (`--sim`, or `--root` over a simulated tree the test owns).

use crate::support;

use futures_util::FutureExt;
use std::collections::HashMap;
use std::time::Duration;
use support::bus::{
    acquire, assert_committed_xml, call, call_manager, error_name, eventually, find_array_path,
    get, helper_connection, introspect, leases, managed_objects, name_owned, next_within, opts,
    signals, sim_array_path, ManagerProxy, ARRAY_IFACE, BUS_NAME, MANAGER_IFACE, MANAGER_PATH,
};
use support::tree::{read_trim, Sim};
use support::{assert_exit, Asked, Bus, FakePolkit, Service, BIN};
use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};

async fn get_u64(conn: &zbus::Connection, prop: &str) -> u64 {
    u64::try_from(get(conn, MANAGER_PATH, MANAGER_IFACE, prop).await).unwrap()
}

async fn lease_count(conn: &zbus::Connection) -> usize {
    leases(conn).await.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn introspection_matches_committed_xml() {
    let Some(bus) = Bus::start() else { return };
    let _svc = Service::sim(&bus, &[]).await;
    let conn = bus.connect().await;
    for (path, iface) in [
        (MANAGER_PATH.to_string(), MANAGER_IFACE),
        (sim_array_path("md0"), ARRAY_IFACE),
    ] {
        let doc = introspect(&conn, None, &path).await;
        assert_committed_xml(
            iface,
            &doc,
            "live service (regenerate: MDPILOT_UPDATE_XML=1 with cargo test, test binary dbus_service, test introspection)",
        );
    }
}

/// The string property `k` of the interface's properties `m`.
fn s(m: &HashMap<String, OwnedValue>, k: &str) -> String {
    String::try_from(
        m.get(k)
            .unwrap_or_else(|| panic!("no {k}: {m:?}"))
            .try_clone()
            .unwrap(),
    )
    .unwrap()
}

/// The `t` (u64) property `k` of the interface's properties `m`.
fn t(m: &HashMap<String, OwnedValue>, k: &str) -> u64 {
    u64::try_from(m[k].try_clone().unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arrays_are_listed_with_their_properties() {
    let Some(bus) = Bus::start() else { return };
    let _svc = Service::sim(&bus, &[]).await;
    let conn = bus.connect().await;
    // The ObjectManager is alone at ROOT_PATH; the arrays are keyed by UUID.
    let objs = managed_objects(&conn).await;
    let (md0_path, md1_path) = (sim_array_path("md0"), sim_array_path("md1"));
    let md = |p: &str| {
        objs.get(&OwnedObjectPath::try_from(p).unwrap())
            .unwrap_or_else(|| panic!("{p} missing: {objs:?}"))[ARRAY_IFACE]
            .clone()
    };
    let md0 = md(&md0_path);
    check_md0(&md0);
    check_documented_properties(&md0);
    let md1 = md(&md1_path);
    assert_eq!(s(&md1, "KernelName"), "md1");
    assert_eq!(s(&md1, "Name"), "sim:data");
    assert_eq!(s(&md1, "Level"), "raid5");
    assert_eq!(s(&md1, "SyncAction"), "resync");
    assert_eq!(t(&md1, "SyncTotalSectors"), 64 * 1_048_576 * 2);
    assert_eq!(t(&md1, "ChunkSize"), 512 * 1024);
    let (min, how): (u64, String) = md1["SyncSpeedMin"].try_clone().unwrap().try_into().unwrap();
    assert_eq!((min, how.as_str()), (1000, "system"));
    check_listing(&objs, &md0_path, &md1_path);
    assert_eq!(get_u64(&conn, "SpeedLimitMax").await, 200_000);
}

/// md0's properties: udisks2's names with udisks2's types and meanings; ours for the rest.
fn check_md0(md0: &HashMap<String, OwnedValue>) {
    assert_eq!(s(md0, "KernelName"), "md0");
    assert_eq!(s(md0, "Name"), "sim:root");
    assert_eq!(s(md0, "UUID"), "3b6c2a6e:0d0e4b7a:9d5e8a7b:1c2d3e4f");
    assert_eq!(s(md0, "DeviceNode"), "/dev/md0");
    assert_eq!(s(md0, "NamedDevice"), "/dev/md/root");
    assert_eq!(s(md0, "ConsistencyPolicy"), "resync");
    assert_eq!(s(md0, "MetadataVersion"), "1.2");
    let bitmap: Vec<u8> = md0["BitmapLocation"]
        .try_clone()
        .unwrap()
        .try_into()
        .unwrap();
    assert_eq!(bitmap, b"none");
    assert_eq!(s(md0, "Level"), "raid1");
    assert_eq!(
        u32::try_from(md0["NumDevices"].try_clone().unwrap()).unwrap(),
        2
    );
    assert_eq!(t(md0, "Size"), 1 << 30);
    assert_eq!(s(md0, "SyncAction"), "idle");
    assert_eq!(s(md0, "State"), "clean");
    assert!(
        !md0.contains_key("ActiveDevices"),
        "udisks2 has another type"
    );
    let devs: Vec<(String, i32, Vec<String>, u64)> =
        md0["Members"].try_clone().unwrap().try_into().unwrap();
    assert_eq!(devs[0], ("sda1".into(), 0, vec!["in_sync".into()], 0));
}

/// Every documented property is on the array object, with its documented signature.
fn check_documented_properties(md0: &HashMap<String, OwnedValue>) {
    let xml = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("dbus/{ARRAY_IFACE}.xml")),
    )
    .unwrap();
    for line in xml.lines().filter(|l| l.contains("<property ")) {
        let attr = |a: &str| {
            let i = line.find(&format!("{a}=\"")).unwrap() + a.len() + 2;
            line[i..i + line[i..].find('"').unwrap()].to_string()
        };
        let (name, sig) = (attr("name"), attr("type"));
        let v = md0
            .get(&name)
            .unwrap_or_else(|| panic!("{name} missing on the array object"));
        assert_eq!(v.value_signature().to_string(), sig, "{name}");
    }
}

/// The ObjectManager lists the Manager (with its properties) and the two arrays, and no
/// interface-less node such as `.../arrays`.
fn check_listing(objs: &support::bus::Managed, md0_path: &str, md1_path: &str) {
    let mut paths: Vec<&str> = objs.keys().map(|p| p.as_str()).collect();
    paths.sort();
    let mut want = [MANAGER_PATH, md0_path, md1_path];
    want.sort();
    assert_eq!(paths, want, "{objs:?}");
    assert!(objs.values().all(|i| !i.is_empty()), "{objs:?}");
    let m = &objs[&OwnedObjectPath::try_from(MANAGER_PATH).unwrap()][MANAGER_IFACE];
    assert_eq!(s(m, "Version"), "1.6");
    assert_eq!(t(m, "SpeedLimitMax"), 200_000);
    for k in [
        "SpeedLimitMin",
        "OriginalSpeedLimitMin",
        "OriginalSpeedLimitMax",
        "Leases",
        "ServiceVersion",
    ] {
        assert!(m.contains_key(k), "Manager lacks {k}: {m:?}");
    }
    let (saved, _): (bool, u64) = m["OriginalSpeedLimitMin"]
        .try_clone()
        .unwrap()
        .try_into()
        .unwrap();
    assert!(!saved, "nothing is saved without a lease");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_reaches_a_subscribed_client_as_properties_changed() {
    let Some(bus) = Bus::start() else { return };
    let _svc = Service::sim(&bus, &[("MDPILOT_SIM_TICK_MS", "100")]).await;
    let conn = bus.connect().await;
    let md1 = sim_array_path("md1");
    let mut stream = signals(&conn, "org.freedesktop.DBus.Properties", Some(&md1), 64).await;
    let msg = next_within(
        &mut stream,
        Duration::from_secs(10),
        "no PropertiesChanged within 10 s",
    )
    .await;
    let (iface, changed, _): (String, HashMap<String, OwnedValue>, Vec<String>) =
        msg.body().deserialize().unwrap();
    assert_eq!(iface, ARRAY_IFACE);
    assert!(changed.contains_key("SyncCompletedSectors"), "{changed:?}");
    // Only what changed: constant facts of the array are not repeated.
    for k in ["Name", "Level", "UUID", "Size", "ChunkSize", "Members"] {
        assert!(!changed.contains_key(k), "{k} sent although unchanged");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_is_released_when_its_client_disconnects() {
    let Some(bus) = Bus::start() else { return };
    let svc = Service::sim(&bus, &[]).await;
    let knob = svc.sim_path("proc/sys/dev/raid/speed_limit_min");
    let watcher = bus.connect().await;
    let client = bus.connect().await;
    let id = acquire(&client, &[("min", Value::U64(50_000))])
        .await
        .unwrap();
    assert!(!id.is_empty());
    assert_eq!(lease_count(&watcher).await, 1);
    assert_eq!(get_u64(&watcher, "SpeedLimitMin").await, 50_000);
    let orig: (bool, u64) = get(
        &watcher,
        MANAGER_PATH,
        MANAGER_IFACE,
        "OriginalSpeedLimitMin",
    )
    .await
    .try_into()
    .unwrap();
    assert_eq!(orig, (true, 1000));
    assert_eq!(read_trim(&knob), "50000");
    drop(client);
    eventually("lease released after disconnect", || async {
        lease_count(&watcher).await == 0
    })
    .await;
    assert_eq!(get_u64(&watcher, "SpeedLimitMin").await, 1000);
    assert_eq!(read_trim(&knob), "1000");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_get_typed_errors() {
    let Some(bus) = Bus::start() else { return };
    let _svc = Service::sim(&bus, &[]).await;
    let c = bus.connect().await;
    let inv = "org.mdpilot.MdPilot1.Error.InvalidArgument";
    let r = acquire(&c, &[("bogus", Value::U64(1))]).await;
    assert_eq!(error_name(r), inv);
    let r = acquire(&c, &[("min", Value::from("x"))]).await;
    assert_eq!(error_name(r), inv);
    let r = call_manager(&c, "ReleasePriority", &("no-such-lease",)).await;
    assert_eq!(error_name(r), inv);
    let r = call_manager(&c, "SetArraySpeedLimits", &("md0", 9u64, 3u64, opts(&[]))).await;
    assert_eq!(error_name(r), inv);
    let r = call_manager(&c, "SetArraySpeedLimits", &("md9", 1u64, 3u64, opts(&[]))).await;
    assert_eq!(error_name(r), "org.mdpilot.MdPilot1.Error.NoSuchArray");
    let r = call_manager(
        &c,
        "RestoreLimits",
        &(opts(&[("defaults", Value::U32(1))]),),
    )
    .await;
    assert_eq!(error_name(r), inv);
    // The service survives all of it.
    assert_eq!(get_u64(&c, "SpeedLimitMin").await, 1000);
    call_manager(
        &c,
        "SetArraySpeedLimits",
        &("md1", 0u64, 50_000u64, opts(&[])),
    )
    .await
    .unwrap();
    eventually("per-array limit visible", || async {
        let v = get(&c, &sim_array_path("md1"), ARRAY_IFACE, "SyncSpeedMax").await;
        <(u64, String)>::try_from(v).unwrap() == (50_000, "local".to_string())
    })
    .await;
}

/// The calls an unprivileged client makes; each must answer NotAuthorized.
async fn mutating_calls(c: &zbus::Connection) -> Vec<(&'static str, String)> {
    vec![
        (
            "AcquirePriority",
            error_name(acquire(c, &[("min", Value::U64(1))]).await),
        ),
        (
            "ReleasePriority",
            error_name(call_manager(c, "ReleasePriority", &("x",)).await),
        ),
        (
            "SetArraySpeedLimits",
            error_name(
                call_manager(c, "SetArraySpeedLimits", &("md0", 1u64, 2u64, opts(&[]))).await,
            ),
        ),
        (
            "RestoreLimits",
            // udisks2's standard option: no polkit prompt for this one.
            error_name(
                call_manager(
                    c,
                    "RestoreLimits",
                    &(opts(&[("auth.no_user_interaction", Value::Bool(true))]),),
                )
                .await,
            ),
        ),
        (
            "StartWipe",
            error_name(call_manager(c, "StartWipe", &("/dev/md0", opts(&[]))).await),
        ),
        (
            "RequestSyncAction",
            error_name(
                call(
                    c,
                    &sim_array_path("md0"),
                    ARRAY_IFACE,
                    "RequestSyncAction",
                    &("idle", opts(&[])),
                )
                .await,
            ),
        ),
    ]
}

/// How many calls [`mutating_calls`] makes.
const MUTATING_CALLS: usize = 6;

/// Runs inside `loop_unprivileged_caller_gets_not_authorized` as `nobody` (re-executed test binary).
#[tokio::test]
#[ignore = "helper: run by loop_unprivileged_caller_gets_not_authorized as nobody"]
async fn unprivileged_client_helper() {
    let Some(c) = helper_connection("loop_unprivileged_caller_gets_not_authorized").await else {
        return;
    };
    // Reads stay open to everyone.
    let _ = get(&c, MANAGER_PATH, MANAGER_IFACE, "SpeedLimitMin").await;
    for (m, e) in mutating_calls(&c).await {
        println!("RESULT {m} {e}");
    }
    let own = match c.request_name(BUS_NAME).await {
        Ok(()) => "owned".to_string(),
        Err(zbus::Error::FDO(e)) => format!("{}", zbus::DBusError::name(&*e)),
        Err(e) => format!("{e}"),
    };
    println!("OWN {own}");
}

/// Runs the helper as `nobody` against `bus`; returns its RESULT and OWN lines.
async fn run_helper_as_nobody(bus: &Bus) -> Vec<String> {
    support::bus::run_helper_as_nobody(
        "dbus_service::unprivileged_client_helper",
        &[("MDPILOT_TEST_BUS", &bus.address)],
    )
    .await
    .lines()
    .filter(|l| l.starts_with("RESULT ") || l.starts_with("OWN "))
    .map(str::to_string)
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_shipped_bus_policy_lets_everyone_call_but_only_root_own_the_name() {
    need_root!("to switch to nobody");
    let Some(bus) = Bus::start_system_like() else {
        return;
    };
    let _svc = Service::sim(&bus, &[]).await;
    let lines = run_helper_as_nobody(&bus).await;
    // Calls get through the bus policy and are refused by the service itself.
    let results: Vec<&String> = lines.iter().filter(|l| l.starts_with("RESULT ")).collect();
    assert_eq!(results.len(), MUTATING_CALLS, "{lines:?}");
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
async fn loop_unprivileged_caller_gets_not_authorized() {
    need_root!("to switch to nobody");
    let Some(bus) = Bus::start() else { return };
    let svc = Service::sim(&bus, &[]).await;
    let knob = svc.sim_path("proc/sys/dev/raid/speed_limit_min");
    let lines = run_helper_as_nobody(&bus).await;
    let results: Vec<&String> = lines.iter().filter(|l| l.starts_with("RESULT ")).collect();
    assert_eq!(results.len(), MUTATING_CALLS, "{lines:?}");
    for l in results {
        assert!(
            l.ends_with(" org.mdpilot.MdPilot1.Error.NotAuthorized"),
            "{l}"
        );
    }
    assert_eq!(read_trim(&knob), "1000");
    // Root (this process) is allowed.
    let c = bus.connect().await;
    let r = call_manager(&c, "RestoreLimits", &(opts(&[]),)).await;
    assert_eq!(error_name(r), "success");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_restores_limits_and_exits_0_and_a_second_instance_refuses() {
    let Some(bus) = Bus::start() else { return };
    let sim = Sim::create().unwrap();
    let root = sim.path().to_str().unwrap().to_string();
    let knob = sim.root().proc("sys/dev/raid/speed_limit_min");
    let mut svc = Service::start(&bus, &["--root", &root], &[]).await;
    // A second instance on the same root refuses (lock), exit 3.
    let second = std::process::Command::new(BIN)
        .args(["serve", "--root", &root, "--bus", &bus.address])
        .output()
        .unwrap();
    assert_exit(&second, 3);
    let client = bus.connect().await;
    acquire(
        &client,
        &[
            ("min", Value::U64(70_000)),
            ("kind", Value::from("installer")),
        ],
    )
    .await
    .unwrap();
    assert_eq!(read_trim(&knob), "70000");
    let st = svc.term();
    assert_eq!(st.code(), Some(0));
    assert_eq!(read_trim(&knob), "1000");
    assert!(!name_owned(&client).await, "name not released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_prints_one_json_line_per_change() {
    let Some(bus) = Bus::start() else { return };
    let _svc = Service::sim(&bus, &[("MDPILOT_SIM_TICK_MS", "100")]).await;
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
    let sim = Sim::create().unwrap();
    let root = sim.root().clone();
    let _svc = Service::on_root(&bus, sim.path(), &[]).await;
    let conn = bus.connect().await;
    let mut stream = signals(&conn, "org.freedesktop.DBus.ObjectManager", None, 64).await;
    let manager = ManagerProxy::new(&conn).await.unwrap();
    assert_eq!(manager.version().await.unwrap(), mdpilot::dbus::API_VERSION);
    assert_eq!(
        manager.service_version().await.unwrap(),
        env!("CARGO_PKG_VERSION")
    );
    let md0_path = find_array_path(&conn, "md0").await;
    assert_eq!(md0_path, sim_array_path("md0"));

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
    let msg = reread(&manager, &mut stream).await;
    assert_eq!(msg.header().member().unwrap().as_str(), "InterfacesRemoved");
    let (path, ifaces): (OwnedObjectPath, Vec<String>) = msg.body().deserialize().unwrap();
    assert_eq!(path.as_str(), md0_path);
    assert_eq!(ifaces, vec![ARRAY_IFACE.to_string()]);

    // It comes back.
    std::fs::rename(&parked, &md0).unwrap();
    std::fs::write(root.proc("mdstat"), &mdstat).unwrap();
    let msg = reread(&manager, &mut stream).await;
    assert_eq!(msg.header().member().unwrap().as_str(), "InterfacesAdded");
    let (path, ifaces): (
        OwnedObjectPath,
        HashMap<String, HashMap<String, OwnedValue>>,
    ) = msg.body().deserialize().unwrap();
    assert_eq!(path.as_str(), md0_path);
    let level = String::try_from(ifaces[ARRAY_IFACE]["Level"].try_clone().unwrap()).unwrap();
    assert_eq!(level, "raid1");
}

/// Makes the service re-read the tree and returns the next ObjectManager signal: a
/// regular-file tree raises no POLLPRI, but any limit change makes the service re-read all.
async fn reread(manager: &ManagerProxy<'_>, stream: &mut zbus::MessageStream) -> zbus::Message {
    manager.restore_limits(HashMap::new()).await.unwrap();
    next_within(stream, Duration::from_secs(10), "no ObjectManager signal").await
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
    let mut sim = Sim::create().unwrap();
    // No sync running: no progress timer, nothing to poll.
    sim.step(Duration::from_secs(1_000_000)).unwrap();
    let svc = Service::on_root(&bus, sim.path(), &[]).await;
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
    assert!(name_owned(&conn).await);
    assert_eq!(lease_count(&conn).await, 0);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let n = sock.recv(&mut buf).unwrap();
    let msg = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(msg.lines().any(|l| l == "STOPPING=1"), "{msg}");
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_polkit_decides_for_unprivileged_callers() {
    need_root!("to switch to nobody");
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
            assert_eq!(got["RequestSyncAction"], "success");
        } else {
            assert!(got.values().all(|e| *e == na), "{lines:?}");
        }
        let asked = polkit.asked();
        assert_eq!(asked.len(), MUTATING_CALLS, "{asked:?}");
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
            ("RequestSyncAction", (priority, Some("/dev/md0"), 1)),
        ]);
        for Asked {
            subject,
            action,
            details,
            flags,
            ..
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
        let sync = asked
            .iter()
            .find(|a| a.details["method"] == "RequestSyncAction")
            .unwrap();
        assert_eq!(sync.details["sync-action"], "idle", "{sync:?}");
        let methods: std::collections::BTreeSet<&str> =
            asked.iter().map(|a| a.details["method"].as_str()).collect();
        assert_eq!(
            methods.len(),
            MUTATING_CALLS,
            "one question per method: {asked:?}"
        );
        // One system-bus connection for every question, not one per call.
        assert_eq!(polkit.askers().len(), 1, "{:?}", polkit.askers());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_on_max_slows_the_simulated_resync() {
    let Some(bus) = Bus::start() else { return };
    let _svc = Service::sim(&bus, &[("MDPILOT_SIM_TICK_MS", "100")]).await;
    let conn = bus.connect().await;
    let md1 = sim_array_path("md1");
    let rate = |c: zbus::Connection, p: String| async move {
        u64::try_from(get(&c, &p, ARRAY_IFACE, "SyncRate").await).unwrap()
    };
    eventually("resync at the system max", || {
        rate(conn.clone(), md1.clone()).map(|r| r == 200_000 * 1024)
    })
    .await;
    let manager = ManagerProxy::new(&conn).await.unwrap();
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
    let sim = Sim::create().unwrap();
    let knob = sim.root().proc("sys/dev/raid/speed_limit_min");
    let mut svc = Service::on_root(&bus, sim.path(), &[]).await;
    let client = bus.connect().await;
    acquire(&client, &[("min", Value::U64(60_000))])
        .await
        .unwrap();
    assert_eq!(read_trim(&knob), "60000");
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
    assert_eq!(read_trim(&knob), "1000");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_min_zero_install_policy_and_named_leases() {
    let Some(bus) = Bus::start() else { return };
    let svc = Service::sim(&bus, &[]).await;
    let knob = svc.sim_path("proc/sys/dev/raid/speed_limit_min");
    let watcher = bus.connect().await;
    // A present min of 0 means 0 (it used to mean "unset").
    let client = bus.connect().await;
    let id = acquire(&client, &[("min", Value::U64(0))]).await.unwrap();
    assert_eq!(read_trim(&knob), "0");
    assert_eq!(get_u64(&watcher, "SpeedLimitMin").await, 0);
    call_manager(&client, "ReleasePriority", &(id.as_str(),))
        .await
        .unwrap();
    assert_eq!(read_trim(&knob), "1000");
    // Empty options: the install policy (install_min defaults to 0). A holder lease outlives
    // the connection that took it.
    let id = acquire(
        &client,
        &[
            ("holder", Value::from("installer")),
            ("kind", Value::from("installer")),
        ],
    )
    .await
    .unwrap();
    assert_eq!(id, "installer");
    assert_eq!(read_trim(&knob), "0");
    drop(client);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        lease_count(&watcher).await,
        1,
        "a holder lease is not a bus lease"
    );
    let l = leases(&watcher).await;
    assert_eq!(l[0].id, "installer");
    assert_eq!(l[0].kind, "installer");
    assert_eq!(
        (l[0].owner_kind.as_str(), l[0].owner.as_str()),
        ("holder", "installer")
    );
    // The install policy's min 0 reads back as a present 0, its unset max as absent.
    assert_eq!((l[0].min, l[0].max), (Some(0), None));
    // Another client releases it by name.
    call_manager(&watcher, "ReleasePriority", &("installer",))
        .await
        .unwrap();
    assert_eq!(lease_count(&watcher).await, 0);
    assert_eq!(read_trim(&knob), "1000");
    // A pid lease dies with its process (reaped at the next AcquirePriority).
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = child.id();
    acquire(
        &watcher,
        &[("pid", Value::U32(pid)), ("min", Value::U64(5))],
    )
    .await
    .unwrap();
    assert_eq!(lease_count(&watcher).await, 1);
    child.kill().unwrap();
    child.wait().unwrap();
    let r = acquire(
        &watcher,
        &[("holder", Value::from("x")), ("max", Value::U64(0))],
    )
    .await
    .unwrap();
    assert_eq!(r, "x");
    let l = leases(&watcher).await;
    assert_eq!(l.len(), 1, "{l:?}");
    assert_eq!(l[0].id, "x");
    assert_eq!((l[0].min, l[0].max), (None, Some(0)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_sync_action_check_then_idle_on_the_sim() {
    let Some(bus) = Bus::start() else { return };
    let _svc = Service::sim(&bus, &[("MDPILOT_SIM_TICK_MS", "100")]).await;
    let conn = bus.connect().await;
    let md0 = sim_array_path("md0");
    let request = |word: &'static str, o: HashMap<String, Value<'static>>| {
        let (c, p) = (conn.clone(), md0.clone());
        async move { call(&c, &p, ARRAY_IFACE, "RequestSyncAction", &(word, o)).await }
    };
    let action = |c: zbus::Connection, p: String| async move {
        String::try_from(get(&c, &p, ARRAY_IFACE, "SyncAction").await).unwrap()
    };
    assert_eq!(action(conn.clone(), md0.clone()).await, "idle");
    request("check", opts(&[])).await.unwrap();
    eventually("md0 checks", || {
        action(conn.clone(), md0.clone()).map(|a| a == "check")
    })
    .await;
    eventually("the check progresses", || {
        let (c, p) = (conn.clone(), md0.clone());
        async move {
            u64::try_from(get(&c, &p, ARRAY_IFACE, "SyncCompletedSectors").await).unwrap() > 0
        }
    })
    .await;
    request("idle", opts(&[])).await.unwrap();
    eventually("md0 idle again", || {
        action(conn.clone(), md0.clone()).map(|a| a == "idle")
    })
    .await;
    // Only udisks2's three words; unknown options are refused too.
    for (word, o) in [
        ("resync", opts(&[])),
        ("frozen", opts(&[])),
        ("check", opts(&[("bogus", Value::Bool(true))])),
    ] {
        assert_eq!(
            error_name(request(word, o).await),
            "org.mdpilot.MdPilot1.Error.InvalidArgument",
            "{word}"
        );
    }
    request(
        "idle",
        opts(&[("auth.no_user_interaction", Value::Bool(true))]),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arrays_are_named_as_users_type_them_and_per_array_zero_is_sent() {
    let Some(bus) = Bus::start() else { return };
    let svc = Service::sim(&bus, &[]).await;
    let conn = bus.connect().await;
    // The simulator rewrites md1's files on every step: read until the file is whole.
    let max = |a: &str| loop {
        let t = std::fs::read_to_string(svc.sim_path(&format!("sys/block/{a}/md/sync_speed_max")))
            .unwrap();
        if t.ends_with('\n') {
            return t;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    for (word, kernel) in [
        ("/dev/md/root", "md0"),
        ("md/data", "md1"),
        ("sim:root", "md0"),
        ("/dev/md1", "md1"),
    ] {
        call_manager(
            &conn,
            "SetArraySpeedLimits",
            &(word, 0u64, 7000u64, opts(&[])),
        )
        .await
        .unwrap_or_else(|e| panic!("{word}: {e}"));
        assert!(max(kernel).starts_with("7000"), "{word}: {}", max(kernel));
        let l = leases(&conn).await;
        assert!(l.iter().any(|l| l.id == format!("admin-{kernel}")), "{l:?}");
    }
    assert_eq!(
        error_name(
            call_manager(
                &conn,
                "SetArraySpeedLimits",
                &("/dev/md/nothing", 0u64, 7000u64, opts(&[])),
            )
            .await
        ),
        "org.mdpilot.MdPilot1.Error.NoSuchArray"
    );
    call_manager(&conn, "RestoreLimits", &(opts(&[]),))
        .await
        .unwrap();
    // AcquirePriority: a per-array max 0 (written as 1 KiB/s, md's floor), the array by link.
    let per_array: HashMap<String, HashMap<String, Value<'static>>> = HashMap::from([(
        "/dev/md/data".to_string(),
        HashMap::from([("max".to_string(), Value::U64(0))]),
    )]);
    let id = acquire(&conn, &[("arrays", Value::from(per_array))])
        .await
        .unwrap();
    // The service writes `1`; the simulator shows it as `1 (local)` at its next step.
    let m = max("md1");
    assert_eq!(m.split_whitespace().next(), Some("1"), "{m}");
    let l = leases(&conn).await;
    let mine = l.iter().find(|l| l.id == id).unwrap();
    assert_eq!(
        (mine.arrays["md1"].min, mine.arrays["md1"].max),
        (None, Some(0))
    );
    assert_eq!((mine.min, mine.max), (None, None));
    assert_eq!(mine.owner_kind, "bus-name");
    assert_eq!(mine.kind, "client");
    assert!(mine.owner.starts_with(':'), "{mine:?}");
    assert_eq!(mine.expires, None);
}
