//! The durable records against odd numbers: a request the service or the CLI accepts is saved
//! in a form that loads back, one it cannot save is refused before anything is written (the
//! kernel knob and the file stay as they were), and durations are bounded
//! (`mdpilot::units::MAX_DURATION_S`). The real `mdpilot serve --sim` on a private bus, the
//! CLI on a temporary tree, and the policy and check executors directly under proptest.

use crate::support;

use mdpilot::policy::state;
use mdpilot::policy::{LeaseKind, LeaseRequest, Limits, Owner};
use mdpilot::units::MAX_DURATION_S;
use proptest::prelude::*;
use std::collections::BTreeMap;
use support::bus::{acquire, call, call_manager, error_name, opts, sim_array_path, ARRAY_IFACE};
use support::tree::read_trim;
use support::{describe, stderr, Bus, FakeTree, Service};
use zbus::zvariant::Value;

const INVALID: &str = "org.mdpilot.MdPilot1.Error.InvalidArgument";

/// A check record the service must not lose: another array's last result.
const CHECKS: &str = "[array.\"0a1b2c3d:00000000:00000000:00000009\"]\nname = \"md9\"\n\n\
                      [array.\"0a1b2c3d:00000000:00000000:00000009\".last]\naction = \"check\"\n\
                      completed_s = 1700000000\nmismatch_cnt = 0\nlevel = \"raid1\"\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_duration_on_the_bus_is_refused_and_changes_nothing() {
    let Some(bus) = Bus::start() else { return };
    let svc = Service::sim(&bus, &[]).await;
    let c = bus.connect().await;
    let installer = [("holder", Value::from("installer")), ("min", Value::U64(0))];
    assert_eq!(error_name(acquire(&c, &installer).await), "success");
    let policy = svc.sim_path("run/mdpilot/policy.toml");
    let gmax = svc.sim_path("proc/sys/dev/raid/speed_limit_max");
    let (saved, max0) = (std::fs::read(&policy).unwrap(), read_trim(&gmax));

    // AcquirePriority {max: 0, duration: 2^64-1}, and one second above the bound.
    for d in [u64::MAX, MAX_DURATION_S + 1] {
        let r = acquire(&c, &[("max", Value::U64(0)), ("duration", Value::U64(d))]).await;
        let Err(zbus::Error::MethodError(name, Some(msg), _)) = r else {
            panic!("duration {d} accepted: {r:?}");
        };
        assert_eq!(name.as_str(), INVALID, "{msg}");
        assert!(msg.contains("3650 days"), "{msg}");
        assert_eq!(std::fs::read(&policy).unwrap(), saved, "state file changed");
        assert_eq!(read_trim(&gmax), max0, "kernel limit changed");
    }
    let st = state::read(&policy).expect("the state file loads");
    assert_eq!(st.leases.keys().collect::<Vec<_>>(), ["installer"]);

    // The longest duration is accepted, saved, and loads back with its end.
    let r = acquire(
        &c,
        &[
            ("max", Value::U64(5)),
            ("duration", Value::U64(MAX_DURATION_S)),
        ],
    )
    .await;
    let id = r.unwrap();
    let st = state::read(&policy).expect("the state file loads");
    let end = st.expires[&id];
    assert!(
        end > mdpilot::host::unix_now_s() + MAX_DURATION_S - 60,
        "{end}"
    );
    assert_eq!(read_trim(&gmax), "5");

    // StartCheck {duration: 2^64-1}: refused, the record and md0 untouched.
    let checks = svc.sim_path("var/lib/mdpilot/checks.toml");
    std::fs::create_dir_all(checks.parent().unwrap()).unwrap();
    std::fs::write(&checks, CHECKS).unwrap();
    let md0 = sim_array_path("md0");
    let start = opts(&[("duration", Value::U64(u64::MAX))]);
    let r = call(&c, &md0, ARRAY_IFACE, "StartCheck", &(start,)).await;
    assert_eq!(error_name(r), INVALID);
    assert_eq!(std::fs::read_to_string(&checks).unwrap(), CHECKS);
    assert_eq!(
        read_trim(svc.sim_path("sys/block/md0/md/sync_action")),
        "idle"
    );
    assert!(support::bus::leases(&c)
        .await
        .iter()
        .all(|l| l.id != "check-md0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_defaults_on_the_bus_mends_an_empty_state_file() {
    let Some(bus) = Bus::start() else { return };
    let svc = Service::sim(&bus, &[]).await;
    let c = bus.connect().await;
    let r = acquire(&c, &[("holder", Value::from("h")), ("max", Value::U64(0))]).await;
    assert_eq!(error_name(r), "success");
    let policy = svc.sim_path("run/mdpilot/policy.toml");
    let gmax = svc.sim_path("proc/sys/dev/raid/speed_limit_max");
    assert_eq!(read_trim(&gmax), "0");
    // What an unrepresentable save used to leave: an empty state file.
    std::fs::write(&policy, "").unwrap();
    let r = call_manager(&c, "RestoreLimits", &(opts(&[]),)).await;
    assert_ne!(
        error_name(r),
        "success",
        "plain restore needs the originals"
    );
    let r = call_manager(
        &c,
        "RestoreLimits",
        &(opts(&[("defaults", Value::Bool(true))]),),
    )
    .await;
    assert_eq!(error_name(r), "success");
    assert_eq!(read_trim(&gmax), "200000");
    assert_eq!(
        read_trim(svc.sim_path("proc/sys/dev/raid/speed_limit_min")),
        "1000"
    );
    let st = state::read(&policy).expect("the state file loads back");
    assert!(
        st.leases.is_empty() && st.originals_unknown.is_none(),
        "{st:?}"
    );
    let aside: Vec<String> = std::fs::read_dir(policy.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("policy.toml.corrupt-"))
        .collect();
    assert_eq!(aside.len(), 1, "the corrupt file is kept aside: {aside:?}");
}

#[test]
fn a_huge_duration_on_the_cli_is_refused_and_changes_nothing() {
    let t = FakeTree::new();
    let o = t
        .policy_cmd()
        .args(["apply", "--holder", "i", "--min", "0"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", describe(&o));
    let saved = std::fs::read(t.state_path()).unwrap();
    let o = t
        .policy_cmd()
        .args(["apply", "--max", "0", "--for", "18446744073709551615"])
        .output()
        .unwrap();
    assert!(!o.status.success(), "{}", describe(&o));
    assert!(stderr(&o).contains("3650 days"), "{}", describe(&o));
    assert_eq!(std::fs::read(t.state_path()).unwrap(), saved);
    assert_eq!(t.gmax(), "200000");
    // The same through a profile's duration: the config is refused, nothing is applied.
    support::tree::write(
        t.dir.path(),
        "etc/mdpilot/config.d/50-forever.toml",
        "[profiles.forever]\nmax = 0\nduration = \"18446744073709551615\"\n",
    );
    let o = t
        .policy_cmd()
        .args(["apply", "--profile", "forever"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(stderr(&o).contains("3650 days"), "{}", describe(&o));
    assert_eq!(std::fs::read(t.state_path()).unwrap(), saved);
    assert_eq!(t.gmax(), "200000");
}

#[test]
fn restore_defaults_on_the_cli_mends_an_empty_state_file() {
    let t = FakeTree::new();
    let o = t
        .policy_cmd()
        .args(["apply", "--max", "0"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", describe(&o));
    std::fs::write(t.state_path(), "").unwrap();
    let o = t
        .policy_cmd()
        .args(["restore", "--defaults"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", describe(&o));
    assert_eq!((t.gmin(), t.gmax()), ("1000".into(), "200000".into()));
    assert!(state::read(&t.state_path()).unwrap().leases.is_empty());
    assert!(t
        .state_dir_names()
        .iter()
        .any(|n| n.starts_with("policy.toml.corrupt-")));
}

fn owner() -> impl Strategy<Value = Owner> {
    prop_oneof![
        Just(Owner::None),
        any::<u32>().prop_map(Owner::Pid),
        (any::<u32>(), any::<u64>())
            .prop_map(|(pid, start_time)| Owner::Process { pid, start_time }),
        "[:.0-9a-z]{1,12}".prop_map(Owner::BusName),
    ]
}

fn limit() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![
        Just(None),
        (0u64..300_000).prop_map(Some),
        any::<u64>().prop_map(Some),
    ]
}

fn duration() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![
        Just(None),
        (1u64..=MAX_DURATION_S).prop_map(Some),
        (MAX_DURATION_S..=u64::MAX).prop_map(Some),
        Just(Some(u64::MAX)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Any lease the policy accepts is saved and loads back as it was asked (the lease, its
    /// end); any it refuses leaves the state file and the knobs as they were.
    #[test]
    fn an_accepted_lease_loads_back_and_a_refused_one_changes_nothing(
        holder in "[a-z][a-z0-9-]{0,8}",
        min in limit(),
        max in limit(),
        owner in owner(),
        d in duration(),
    ) {
        let t = FakeTree::new();
        let p = t.policy();
        p.acquire(support::global("base", Some(0), None)).unwrap();
        let before = (std::fs::read(t.state_path()).unwrap(), t.gmin(), t.gmax());
        let req = LeaseRequest {
            holder: holder.clone(),
            kind: LeaseKind::Admin,
            owner,
            global: Limits { min, max, io_depth: None },
            arrays: BTreeMap::new(),
        };
        match p.acquire_for(req.clone(), d) {
            Ok(_) => {
                let st = state::load(&t.state_path()).unwrap();
                prop_assert_eq!(&st.leases[&holder], &req);
                prop_assert_eq!(st.expires.contains_key(&holder), d.is_some());
                prop_assert!(d.is_none_or(|d| d <= MAX_DURATION_S));
            }
            Err(_) => {
                let after = (std::fs::read(t.state_path()).unwrap(), t.gmin(), t.gmax());
                prop_assert_eq!(after, before);
                state::load(&t.state_path()).unwrap();
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// Any `StartCheck` the service's option parser and the check executor accept is saved and
    /// loads back as the record the step made; a refused one leaves the record file as it was.
    #[test]
    fn an_accepted_check_start_loads_back_and_a_refused_one_changes_nothing(
        d in prop_oneof![Just(0u64), 1u64..=MAX_DURATION_S, any::<u64>()],
        max in prop_oneof![Just(0u64), 1u64..100_000, any::<u64>()],
    ) {
        let sim = mdpilot::sim::Sim::create().unwrap();
        let root = sim.root().clone();
        let config = mdpilot::config::Config::load(&root).unwrap();
        let path = root.path(&config.check.state_path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, CHECKS).unwrap();
        let o = opts(&[("duration", Value::U64(d)), ("max", Value::U64(max))]);
        let o = o.into_iter().map(|(k, v)| (k, v.try_into().unwrap())).collect();
        let now = mdpilot::host::unix_now_s();
        let Ok(op) = mdpilot::dbus::check::parse_start(&o, now) else {
            prop_assert!(d > MAX_DURATION_S);
            prop_assert_eq!(std::fs::read_to_string(&path).unwrap(), CHECKS);
            return Ok(());
        };
        let origin = mdpilot::check::Origin::Admin;
        let run = mdpilot::check::run::execute(&root, &config, &op, &["md0".into()], origin)
            .unwrap();
        let loaded = mdpilot::check::store::CheckStore::new(&root, &config).load().unwrap();
        prop_assert_eq!(&loaded, &run.state);
        if run.failures.is_empty() {
            let rec = loaded.array.values().find(|r| r.name == "md0").unwrap();
            prop_assert_eq!(rec.until_s, (d != 0).then(|| now + d));
        } else {
            // Refused (a limit above the kernel's int): md0 untouched.
            prop_assert_eq!(read_trim(root.sys("block/md0/md/sync_action")), "idle");
        }
    }
}

/// A SIGHUP that moves `[check] state_path` while a check runs: the service keeps the record
/// it started with (the check is paused there, its position kept), and the new path is only
/// read at the next start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_moves_the_check_record_keeps_the_running_checks_record() {
    let Some(bus) = Bus::start() else { return };
    let sim = mdpilot::sim::Sim::create().unwrap();
    let mut svc = Service::on_root(&bus, sim.path(), &[]).await;
    let c = bus.connect().await;
    let md0 = sim_array_path("md0");
    let r = call(&c, &md0, ARRAY_IFACE, "StartCheck", &(opts(&[]),)).await;
    assert_eq!(error_name(r), "success");
    let old = sim.path().join("var/lib/mdpilot/checks.toml");
    let moved = sim.path().join("var/lib/mdpilot/moved.toml");
    assert!(read_trim(&old).contains("running = \"check\""));
    // The reload also adds a schedule: NextCheckStart shows when it is in effect.
    support::tree::write(
        sim.path(),
        "etc/mdpilot/config.d/50-check.toml",
        "[check]\nstate_path = \"/var/lib/mdpilot/moved.toml\"\nschedule = \"Sun *-*-1..7 01:00\"\n",
    );
    svc.reload();
    support::bus::eventually("the reloaded schedule", || {
        let (c, p) = (c.clone(), md0.clone());
        async move {
            let v = support::bus::get(&c, &p, ARRAY_IFACE, "NextCheckStart").await;
            u64::try_from(v).unwrap() > 0
        }
    })
    .await;
    let r = call(&c, &md0, ARRAY_IFACE, "PauseCheck", &()).await;
    assert_eq!(error_name(r), "success");
    assert!(!moved.exists(), "the record moved to {}", moved.display());
    let text = read_trim(&old);
    assert!(
        !text.contains("running"),
        "the check stays recorded as running:\n{text}"
    );
    assert!(svc.term().success());
}
