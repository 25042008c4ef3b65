//! Who may take and end which lease, the same with and without the service: a caller's holder
//! name is never in one of the service's schemes (`mdpilot::policy::Holder`), a wipe job's,
//! a freeze, a check's throttle and another client's lease are not ended by name, and a `pid`
//! lease is tied to the caller's own process or one of its descendants. The real
//! `mdpilot serve --sim` on a private bus, and the CLI on a temporary tree.

use crate::support;

use mdpilot::policy::{LeaseKind, LeaseRequest, Limits, Owner, Policy, PolicySettings};
use std::collections::BTreeMap;
use support::bus::{acquire, call, call_manager, error_name, leases, opts, sim_array_path};
use support::tree::{read_trim, Root};
use support::{describe, stderr, Bus, FakeTree, Service};
use zbus::zvariant::Value;

const INVALID: &str = "org.mdpilot.MdPilot1.Error.InvalidArgument";

/// A lease under a reserved holder, as a wipe job (or the service) records it.
fn reserved(holder: &str) -> LeaseRequest {
    LeaseRequest {
        holder: holder.into(),
        kind: LeaseKind::WipeJob,
        owner: Owner::None,
        global: Limits {
            min: None,
            max: Some(50_000),
            io_depth: None,
        },
        arrays: BTreeMap::new(),
    }
}

async fn ids(c: &zbus::Connection) -> Vec<String> {
    leases(c).await.into_iter().map(|l| l.id).collect()
}

async fn release(c: &zbus::Connection, id: &str) -> String {
    error_name(call_manager(c, "ReleasePriority", &(id,)).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserved_and_other_clients_leases_are_not_released_by_name_on_the_bus() {
    let Some(bus) = Bus::start() else { return };
    let svc = Service::sim(&bus, &[]).await;
    let (a, b) = (bus.connect().await, bus.connect().await);
    let id = acquire(&a, &[("max", Value::U64(90_000))]).await.unwrap();
    assert_eq!(release(&b, &id).await, INVALID, "another client's lease");
    // A check's throttle.
    let md0 = sim_array_path("md0");
    let start = opts(&[("max", Value::U64(1000))]);
    let r = call(&a, &md0, support::bus::ARRAY_IFACE, "StartCheck", &(start,)).await;
    assert_eq!(error_name(r), "success");
    assert_eq!(release(&a, "check-md0").await, INVALID);
    // A wipe job's lease, as a job records it in the state file.
    let root = svc.sim_root.clone().unwrap();
    let policy = Policy::new(
        Root::new(&root),
        PolicySettings {
            state_path: root.join("run/mdpilot/policy.toml"),
            install_min: 0,
            install_max: None,
        },
    );
    policy.acquire(reserved("wipe:/dev/loop9")).unwrap();
    for h in ["wipe:/dev/loop9", "freeze:md0"] {
        assert_eq!(release(&a, h).await, INVALID, "{h}");
    }
    // (The state file: the service publishes only the leases it changed itself.)
    let state = root.join("run/mdpilot/policy.toml");
    let held = || -> Vec<String> {
        let st = mdpilot::policy::state::read(&state).unwrap();
        st.leases.into_keys().collect()
    };
    for h in [id.as_str(), "check-md0", "wipe:/dev/loop9"] {
        let held = held();
        assert!(held.iter().any(|i| i == h), "{h} was released: {held:?}");
    }
    // The caller's own lease is released; so is a named one.
    assert_eq!(release(&a, &id).await, "success");
    let r = acquire(
        &b,
        &[("holder", Value::from("named")), ("min", Value::U64(0))],
    )
    .await;
    assert_eq!(error_name(r), "success");
    assert_eq!(release(&a, "named").await, "success");
    // The CLI through the service: the same rules.
    let root_s = root.to_str().unwrap();
    for args in [
        &["apply", "--holder", "wipe:/dev/sda", "--min", "0"][..],
        &["release", "--holder", "wipe:/dev/loop9"],
        &["release", "--holder", "check-md0"],
    ] {
        let o = support::policy_cli(&bus.address, root_s, args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", describe(&o));
    }
    let held = held();
    assert!(!held.iter().any(|i| i == "wipe:/dev/sda"), "{held:?}");
    assert!(held.iter().any(|i| i == "wipe:/dev/loop9"), "{held:?}");
}

#[test]
fn reserved_holders_are_refused_by_the_cli_on_the_files() {
    let t = FakeTree::new();
    let o = t
        .policy_cmd()
        .args(["apply", "--holder", "wipe:/dev/sda", "--min", "0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(stderr(&o).contains("keeps for its own"), "{}", describe(&o));
    assert!(!t.state_path().exists(), "nothing saved");
    assert_eq!(t.gmin(), "1000");
    let p = t.policy();
    for h in ["wipe:/dev/sda", "check-md0", "dbus-1.5-1"] {
        p.acquire(reserved(h)).unwrap();
        let o = t
            .policy_cmd()
            .args(["release", "--holder", h])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{h}: {}", describe(&o));
    }
    let held: Vec<String> = p
        .show()
        .unwrap()
        .leases
        .into_iter()
        .map(|l| l.holder)
        .collect();
    assert_eq!(held, ["check-md0", "dbus-1.5-1", "wipe:/dev/sda"]);
    p.acquire(reserved("admin-md0")).unwrap();
    for h in ["admin-md0", "installer"] {
        let o = t
            .policy_cmd()
            .args(["release", "--holder", h])
            .output()
            .unwrap();
        assert!(o.status.success(), "{h}: {}", describe(&o));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pid_option_takes_only_the_callers_process_or_its_descendants() {
    let Some(bus) = Bus::start() else { return };
    let svc = Service::sim(&bus, &[]).await;
    let c = bus.connect().await;
    let knob = svc.sim_path("proc/sys/dev/raid/speed_limit_min");
    let me = std::process::id();
    let parent = mdpilot::host::parent_pid(me).unwrap();
    for pid in [1, parent] {
        let r = acquire(&c, &[("pid", Value::U32(pid)), ("min", Value::U64(5))]).await;
        assert_eq!(error_name(r), INVALID, "pid {pid}");
    }
    assert!(ids(&c).await.is_empty());
    assert_eq!(read_trim(&knob), "1000");
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    for pid in [me, child.id()] {
        let r = acquire(&c, &[("pid", Value::U32(pid)), ("min", Value::U64(5))]).await;
        assert_eq!(error_name(r), "success", "pid {pid}");
    }
    assert_eq!(ids(&c).await.len(), 2);
    assert_eq!(read_trim(&knob), "5");
    child.kill().unwrap();
    child.wait().unwrap();
}
