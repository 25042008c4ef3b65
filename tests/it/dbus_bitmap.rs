//! `Array.AddBitmap` and the bitmap advisor's properties on the real `mdpilot serve --sim`, with
//! a stand-in mdadm that records its argv ([`support::mdadm::FakeMdadm`]; `tests/vm` runs the
//! real one): added at once on an idle array, queued while a resync runs and added by the
//! service when it ends; hostile and impatient callers never get mdadm run.

use crate::support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::bus::{
    call, error_name, eventually, find_array_path, get, helper_connection, opts,
    run_helper_as_nobody, sim_array_path, ARRAY_IFACE,
};
use support::mdadm::FakeMdadm;
use support::{Behaviour, Bus, FakePolkit, Service};
use zbus::zvariant::{OwnedValue, Value};

fn text(v: OwnedValue) -> String {
    String::try_from(v).unwrap()
}

/// `prop` of the array object at `path`, as a string (`s`) or its `Debug` form otherwise.
async fn prop(c: &zbus::Connection, path: &str, name: &str) -> String {
    let v = get(c, path, ARRAY_IFACE, name).await;
    match v.value_signature().to_string().as_str() {
        "s" => text(v),
        _ => format!("{:?}", Value::from(v)),
    }
}

async fn add_bitmap(c: &zbus::Connection, path: &str) -> zbus::Result<bool> {
    call(c, path, ARRAY_IFACE, "AddBitmap", &(opts(&[]),))
        .await?
        .body()
        .deserialize()
}

/// Waits until `name` of the array at `path` reads `want` (as [`prop`] shows it).
async fn wait_prop(c: &zbus::Connection, path: &str, name: &str, want: &str) {
    let what = format!("{name} of {path} reads {want}");
    eventually(&what, || {
        let (c, path) = (c.clone(), path.to_string());
        async move { prop(&c, &path, name).await == want }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_bitmap_adds_at_once_or_when_the_resync_ends() {
    let Some(bus) = Bus::start() else { return };
    let _polkit = FakePolkit::serve(&bus, true).await;
    let mdadm = FakeMdadm::new(0);
    let svc = Service::sim(
        &bus,
        &[
            ("DBUS_SYSTEM_BUS_ADDRESS", bus.address.as_str()),
            ("MDPILOT_MDADM", &mdadm.program_str()),
        ],
    )
    .await;
    let c = bus.connect().await;
    let (md0, md1) = (
        find_array_path(&c, "md0").await,
        find_array_path(&c, "md1").await,
    );
    // The advisor: neither has a bitmap; md1 shows Linux 6.19+'s attributes.
    assert_eq!(prop(&c, &md0, "WriteIntentBitmap").await, "none");
    assert_eq!(prop(&c, &md0, "BitmapAdvised").await, "Bool(true)");
    assert_eq!(prop(&c, &md1, "BitmapType").await, "none");
    assert_eq!(prop(&c, &md1, "LogicalBlockSize").await, "U64(512)");
    assert_eq!(prop(&c, &md0, "LogicalBlockSize").await, "U64(0)");
    let warnings: Vec<String> = get(&c, &md1, ARRAY_IFACE, "Warnings")
        .await
        .try_into()
        .unwrap();
    assert!(warnings[0].contains("full resync"), "{warnings:?}");
    assert!(warnings[1].contains("Linux 6.18 and older"), "{warnings:?}");
    let t: u64 = get(&c, &md0, ARRAY_IFACE, "FullResyncTime")
        .await
        .try_into()
        .unwrap();
    // 1 GiB at the floor of 1000 KiB/s: 1048.576 s.
    assert_eq!(t, 1_048_576_000);

    // md0 is idle: mdadm runs now, and the array shows its bitmap.
    assert!(!add_bitmap(&c, &md0).await.unwrap(), "added, not queued");
    assert_eq!(mdadm.calls(), ["--grow --bitmap=internal /dev/md0"]);
    wait_prop(&c, &md0, "WriteIntentBitmap", "internal").await;
    assert_eq!(prop(&c, &md0, "BitmapAdvised").await, "Bool(false)");
    // Again: it has one, nothing runs.
    assert!(!add_bitmap(&c, &md0).await.unwrap());
    assert_eq!(mdadm.calls().len(), 1);

    // md1 resyncs: md would refuse, so it is queued and mdadm does not run yet.
    assert!(add_bitmap(&c, &md1).await.unwrap(), "queued");
    assert_eq!(mdadm.calls().len(), 1);
    let wanted = svc.sim_path("var/lib/mdpilot/bitmap-wanted");
    let uuid = prop(&c, &md1, "UUID").await;
    assert_eq!(
        std::fs::read_to_string(&wanted).unwrap(),
        format!("{uuid}\n")
    );
    wait_prop(&c, &md1, "BitmapPending", "Bool(true)").await;
    // The resync ends (idle written, the simulator told): the service adds the bitmap.
    std::fs::write(svc.sim_path("sys/block/md1/md/sync_action"), "idle\n").unwrap();
    // SAFETY: signalling the service child this test started.
    unsafe { libc::kill(svc.pid() as i32, libc::SIGUSR1) };
    wait_prop(&c, &md1, "WriteIntentBitmap", "internal").await;
    wait_prop(&c, &md1, "BitmapPending", "Bool(false)").await;
    assert_eq!(
        mdadm.calls(),
        [
            "--grow --bitmap=internal /dev/md0",
            "--grow --bitmap=internal /dev/md1"
        ]
    );
    assert!(!wanted.exists(), "the line went with the bitmap");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_installers_list_is_consumed_and_unknown_uuids_stay() {
    let Some(bus) = Bus::start() else { return };
    let _polkit = FakePolkit::serve(&bus, true).await;
    let mdadm = FakeMdadm::new(0);
    // The list is in the simulated tree, which exists once the service runs; md1's resync
    // sends an event every simulator step, and every step of the loop reads the list.
    let svc = Service::sim(
        &bus,
        &[
            ("DBUS_SYSTEM_BUS_ADDRESS", bus.address.as_str()),
            ("MDPILOT_MDADM", &mdadm.program_str()),
        ],
    )
    .await;
    let c = bus.connect().await;
    let md0 = find_array_path(&c, "md0").await;
    let uuid = prop(&c, &md0, "UUID").await;
    let other = "00000000:11111111:22222222:33333333";
    let wanted = svc.sim_path("var/lib/mdpilot/bitmap-wanted");
    std::fs::create_dir_all(wanted.parent().unwrap()).unwrap();
    std::fs::write(&wanted, format!("{other}\n{}\n", uuid.to_uppercase())).unwrap();
    wait_prop(&c, &md0, "WriteIntentBitmap", "internal").await;
    assert_eq!(mdadm.calls(), ["--grow --bitmap=internal /dev/md0"]);
    eventually("the list keeps the unknown UUID only", || {
        let w = wanted.clone();
        let want = format!("{other}\n");
        async move { std::fs::read_to_string(&w).ok() == Some(want) }
    })
    .await;
}

/// Runs inside `loop_add_bitmap_refuses_hostile_and_unauthorized_callers` as nobody.
#[tokio::test]
#[ignore = "helper: run by loop_add_bitmap_refuses_hostile_and_unauthorized_callers"]
async fn hostile_add_bitmap_helper() {
    let Some(c) =
        helper_connection("loop_add_bitmap_refuses_hostile_and_unauthorized_callers").await
    else {
        return;
    };
    let md0 = sim_array_path("md0");
    let huge: HashMap<String, Value> = (0..30_000)
        .map(|i| (format!("k{i}"), Value::U64(u64::MAX)))
        .collect();
    let cases: [(&str, HashMap<String, Value>); 4] = [
        ("unknown", opts(&[("bitmap", Value::from("llbitmap"))])),
        ("huge", huge),
        (
            "bad-type",
            opts(&[("auth.no_user_interaction", Value::U64(u64::MAX))]),
        ),
        ("plain", opts(&[])),
    ];
    for (what, o) in cases {
        let r: zbus::Result<bool> = async {
            call(&c, &md0, ARRAY_IFACE, "AddBitmap", &(o,))
                .await?
                .body()
                .deserialize()
        }
        .await;
        println!("RESULT {what} {}", error_name(r));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_add_bitmap_refuses_hostile_and_unauthorized_callers() {
    need_root!("to switch to nobody");
    let Some(bus) = Bus::start() else { return };
    let polkit = FakePolkit::serve(&bus, false).await;
    let mdadm = FakeMdadm::new(0);
    let _svc = Service::sim(
        &bus,
        &[
            ("DBUS_SYSTEM_BUS_ADDRESS", bus.address.as_str()),
            ("MDPILOT_MDADM", &mdadm.program_str()),
        ],
    )
    .await;
    let out = run_helper_as_nobody(
        "dbus_bitmap::hostile_add_bitmap_helper",
        &[("MDPILOT_TEST_BUS", &bus.address)],
    )
    .await;
    let got: HashMap<&str, &str> = out
        .lines()
        .filter_map(|l| {
            let mut w = l.strip_prefix("RESULT ")?.split(' ');
            Some((w.next()?, w.next()?))
        })
        .collect();
    let inv = "org.mdpilot.MdPilot1.Error.InvalidArgument";
    for what in ["unknown", "huge", "bad-type"] {
        assert_eq!(got[what], inv, "{what}: {out}");
    }
    assert_eq!(
        got["plain"], "org.mdpilot.MdPilot1.Error.NotAuthorized",
        "{out}"
    );
    // Only the valid call reached polkit, with the bitmap action and the device.
    let asked = polkit.asked();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(
        asked[0].action, "org.mdpilot.MdPilot1.add-bitmap",
        "{asked:?}"
    );
    assert_eq!(
        asked[0].details.get("device").map(String::as_str),
        Some("/dev/md0")
    );
    assert!(mdadm.calls().is_empty(), "{:?}", mdadm.calls());
}

/// Runs inside `loop_a_caller_leaving_during_authorization_gets_no_bitmap` as nobody.
#[tokio::test]
#[ignore = "helper: run by loop_a_caller_leaving_during_authorization_gets_no_bitmap"]
async fn leaving_add_bitmap_helper() {
    let Some(c) =
        helper_connection("loop_a_caller_leaving_during_authorization_gets_no_bitmap").await
    else {
        return;
    };
    let r = add_bitmap(&c, &sim_array_path("md0")).await;
    println!("RESULT {}", error_name(r));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_a_caller_leaving_during_authorization_gets_no_bitmap() {
    need_root!("to switch to nobody");
    let Some(bus) = Bus::start() else { return };
    let delay = Duration::from_secs(2);
    let victim = Arc::new(AtomicU32::new(0));
    let kill = victim.clone();
    let polkit = FakePolkit::serve_with(
        &bus,
        Behaviour {
            allow: true,
            delay,
            on_ask: Some(Arc::new(move |_| {
                let pid = kill.load(Ordering::SeqCst);
                if pid != 0 {
                    // SAFETY: signalling the helper child this test started.
                    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                }
            })),
        },
    )
    .await;
    let mdadm = FakeMdadm::new(0);
    let _svc = Service::sim(
        &bus,
        &[
            ("DBUS_SYSTEM_BUS_ADDRESS", bus.address.as_str()),
            ("MDPILOT_MDADM", &mdadm.program_str()),
        ],
    )
    .await;
    let mut cmd = support::as_nobody(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "dbus_bitmap::leaving_add_bitmap_helper",
        "--ignored",
        "--nocapture",
    ])
    .env("MDPILOT_TEST_BUS", &bus.address)
    .stdout(std::process::Stdio::piped());
    let mut child = tokio::process::Command::from(cmd)
        .kill_on_drop(true)
        .spawn()
        .expect("setpriv");
    victim.store(child.id().unwrap(), Ordering::SeqCst);
    let st = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("helper ends")
        .unwrap();
    assert!(!st.success(), "killed mid-authorization: {st}");
    assert_eq!(polkit.asked().len(), 1);
    // The question is withdrawn when the caller goes; polkit's late yes runs nothing.
    eventually("CancelCheckAuthorization", || {
        let p = polkit.cancelled();
        async move { p.len() == 1 }
    })
    .await;
    tokio::time::sleep(delay + Duration::from_secs(1)).await;
    assert!(mdadm.calls().is_empty(), "{:?}", mdadm.calls());
}
