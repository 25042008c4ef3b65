//! Checks (scrubs) over D-Bus: the Array object's `StartCheck`, `PauseCheck`, `ResumeCheck`,
//! `CancelCheck` and its `CheckPosition`, `LastCheckResult`, `LastCheckCompleted`,
//! `NextCheckStart`, against `mdpilot serve --sim` (whose md0 is an idle raid1 of 2097152
//! sectors per member and md1 a resyncing raid5) on a private bus.

use crate::support;

use std::collections::HashMap;
use std::time::Duration;
use support::bus::{
    call, error_name, eventually, get, helper_connection, leases, next_before, opts, signals,
    sim_array_path, ARRAY_IFACE,
};
use support::tree::{read_trim, Sim};
use support::{Asked, Bus, FakePolkit, Service};
use zbus::zvariant::{OwnedValue, Value};

async fn prop_u64(c: &zbus::Connection, path: &str, prop: &str) -> u64 {
    u64::try_from(get(c, path, ARRAY_IFACE, prop).await).unwrap()
}

async fn prop_str(c: &zbus::Connection, path: &str, prop: &str) -> String {
    String::try_from(get(c, path, ARRAY_IFACE, prop).await).unwrap()
}

async fn last_result(c: &zbus::Connection, path: &str) -> HashMap<String, OwnedValue> {
    let v = get(c, path, ARRAY_IFACE, "LastCheckResult").await;
    assert_eq!(v.value_signature().to_string(), "a{sv}");
    v.try_into().unwrap()
}

/// Waits until the array's `prop` satisfies `f` (at most 10 s); returns the value.
async fn wait_u64(
    c: &zbus::Connection,
    path: &str,
    prop: &'static str,
    f: impl Fn(u64) -> bool,
) -> u64 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let v = prop_u64(c, path, prop).await;
        if f(v) {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out: {path} {prop} is {v}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn wait_action(c: &zbus::Connection, path: &str, want: &str) {
    let what = format!("{path} SyncAction {want}");
    eventually(&what, || {
        let (c, p, w) = (c.clone(), path.to_string(), want.to_string());
        async move { prop_str(&c, &p, "SyncAction").await == w }
    })
    .await;
}

async fn check_call(
    c: &zbus::Connection,
    path: &str,
    method: &str,
    o: Option<HashMap<String, Value<'static>>>,
) -> zbus::Result<zbus::Message> {
    match o {
        Some(o) => call(c, path, ARRAY_IFACE, method, &(o,)).await,
        None => call(c, path, ARRAY_IFACE, method, &()).await,
    }
}

/// The throttle lease of `array`'s check: its per-array max, if the lease exists.
async fn throttle(c: &zbus::Connection, array: &str) -> Option<Option<u64>> {
    leases(c)
        .await
        .into_iter()
        .find(|l| l.id == format!("check-{array}"))
        .map(|l| l.arrays.get(array).and_then(|l| l.max))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_pause_resume_cancel_a_check_on_the_sim() {
    let Some(bus) = Bus::start() else { return };
    let svc = Service::sim(&bus, &[("MDPILOT_SIM_TICK_MS", "100")]).await;
    let c = bus.connect().await;
    let md0 = sim_array_path("md0");
    let sync_min = || read_trim(svc.sim_path("sys/block/md0/md/sync_min"));
    assert_eq!(prop_u64(&c, &md0, "CheckPosition").await, 0);
    assert_eq!(prop_u64(&c, &md0, "LastCheckCompleted").await, 0);
    assert!(last_result(&c, &md0).await.is_empty());

    // Start, throttled to 1000 KiB/s (2000 sectors/s): a lease on md0's sync_speed_max.
    let start = opts(&[("max", Value::U64(1000))]);
    check_call(&c, &md0, "StartCheck", Some(start))
        .await
        .unwrap();
    assert_eq!(throttle(&c, "md0").await, Some(Some(1000)));
    wait_action(&c, &md0, "check").await;
    let first = wait_u64(&c, &md0, "SyncCompletedSectors", |n| n > 0).await;
    wait_u64(&c, &md0, "SyncCompletedSectors", |n| n > first).await;
    let limit = get(&c, &md0, ARRAY_IFACE, "SyncSpeedMax").await;
    let (kib, _): (u64, String) = limit.try_into().unwrap();
    assert_eq!(kib, 1000);
    // The running position is saved (the service saves it; first right after the start).
    wait_u64(&c, &md0, "CheckPosition", |n| n > 0).await;
    // Another sync runs on md1 (its resync): no check there.
    let md1 = sim_array_path("md1");
    assert_eq!(
        error_name(check_call(&c, &md1, "StartCheck", Some(opts(&[]))).await),
        "org.mdpilot.MdPilot1.Error.Busy"
    );

    // Pause: idle, the position kept, the throttle gone.
    tokio::time::sleep(Duration::from_millis(500)).await;
    check_call(&c, &md0, "PauseCheck", None).await.unwrap();
    wait_action(&c, &md0, "idle").await;
    let pos = wait_u64(&c, &md0, "CheckPosition", |n| n > first).await;
    assert_eq!(throttle(&c, "md0").await, None);
    assert!(read_trim(svc.sim_path("var/lib/mdpilot/checks.toml")).contains(&pos.to_string()));
    // What the kernel keeps in sync_min after an interrupted check is at least that far.
    let what = format!("sync_min set by the stop to at least {pos}");
    eventually(&what, || {
        let v: u64 = sync_min().parse().unwrap();
        async move { v >= pos }
    })
    .await;
    // Pausing again is nothing to do.
    check_call(&c, &md0, "PauseCheck", None).await.unwrap();

    // Resume: sync_min is the saved position, the check goes on from there with its throttle.
    check_call(&c, &md0, "ResumeCheck", None).await.unwrap();
    assert_eq!(sync_min(), pos.to_string());
    assert_eq!(throttle(&c, "md0").await, Some(Some(1000)));
    wait_action(&c, &md0, "check").await;
    let resumed = wait_u64(&c, &md0, "SyncCompletedSectors", |n| n > 0).await;
    assert!(
        resumed >= pos,
        "resumed at {resumed}, saved {pos}: restarted"
    );
    assert_eq!(
        error_name(check_call(&c, &md0, "StartCheck", Some(opts(&[]))).await),
        "org.mdpilot.MdPilot1.Error.Busy",
        "a check already runs"
    );

    // Cancel: idle, sync_min 0, the position forgotten, the throttle gone.
    check_call(&c, &md0, "CancelCheck", None).await.unwrap();
    wait_action(&c, &md0, "idle").await;
    wait_u64(&c, &md0, "CheckPosition", |n| n == 0).await;
    assert_eq!(throttle(&c, "md0").await, None);
    // The simulator sees the stop after the service's writes; md keeps the later 0.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(sync_min(), "0");
    assert_eq!(
        error_name(check_call(&c, &md0, "ResumeCheck", None).await),
        "org.mdpilot.MdPilot1.Error.Failed",
        "nothing to resume"
    );
    // Unknown options and wrong types are InvalidArgument.
    for o in [
        opts(&[("bogus", Value::Bool(true))]),
        opts(&[("max", Value::Str("fast".into()))]),
    ] {
        assert_eq!(
            error_name(check_call(&c, &md0, "StartCheck", Some(o)).await),
            "org.mdpilot.MdPilot1.Error.InvalidArgument"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_runs_to_the_end_and_its_result_is_published() {
    let Some(bus) = Bus::start() else { return };
    let _svc = Service::sim(&bus, &[("MDPILOT_SIM_TICK_MS", "100")]).await;
    let c = bus.connect().await;
    let md0 = sim_array_path("md0");
    let mut changes = signals(&c, "org.freedesktop.DBus.Properties", Some(&md0), 10_000).await;
    let before = mdpilot::host::unix_now_s();
    // Unthrottled (200000 KiB/s): md0's 2097152 sectors take about 5 s.
    check_call(
        &c,
        &md0,
        "StartCheck",
        Some(opts(&[("repair", Value::Bool(true))])),
    )
    .await
    .unwrap();
    wait_action(&c, &md0, "repair").await;
    let done = wait_u64(&c, &md0, "LastCheckCompleted", |n| n > 0).await;
    assert!(done >= before, "{done} < {before}");
    assert_eq!(prop_str(&c, &md0, "SyncAction").await, "idle");
    assert_eq!(prop_u64(&c, &md0, "CheckPosition").await, 0);
    let r = last_result(&c, &md0).await;
    let s = |k: &str| String::try_from(r[k].try_clone().unwrap()).unwrap();
    let t = |k: &str| u64::try_from(&*r[k]).unwrap();
    assert_eq!(s("action"), "repair");
    assert_eq!(s("level"), "raid1");
    assert_eq!(s("severity"), "info");
    assert_eq!((t("mismatch_cnt"), t("completed")), (0, done));
    // No schedule configured: no next start.
    assert_eq!(prop_u64(&c, &md0, "NextCheckStart").await, 0);
    // Each check property that changed came as PropertiesChanged.
    let mut seen = std::collections::BTreeSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while seen.len() < 3 {
        let m = next_before(
            &mut changes,
            deadline,
            &format!("PropertiesChanged: {seen:?}"),
        )
        .await;
        let (iface, changed, _): (String, HashMap<String, OwnedValue>, Vec<String>) =
            m.body().deserialize().unwrap();
        if iface != ARRAY_IFACE {
            continue;
        }
        if let Some(v) = changed.get("LastCheckResult") {
            let d: HashMap<String, OwnedValue> = v.try_clone().unwrap().try_into().unwrap();
            assert_eq!(u64::try_from(&*d["completed"]).unwrap(), done);
        }
        for k in ["CheckPosition", "LastCheckResult", "LastCheckCompleted"] {
            if changed.contains_key(k) {
                seen.insert(k);
            }
        }
    }
}

/// A check that ends while nothing else happens on the machine: md notifies `sync_action`
/// once (here: one re-read of the tree, which has no other array changing), and the result is
/// published from that one look, without waiting for another event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_that_ends_with_no_later_event_is_published_at_once() {
    let Some(bus) = Bus::start() else { return };
    let sim = Sim::create().unwrap();
    // No progress timer while the check runs: only the look below re-reads the tree.
    support::tree::write(
        sim.path(),
        "etc/mdpilot/config.d/50-progress.toml",
        "[service]\nprogress_interval_ms = 600000\n",
    );
    let _svc = Service::on_root(&bus, sim.path(), &[]).await;
    let c = bus.connect().await;
    let md0 = sim_array_path("md0");
    check_call(&c, &md0, "StartCheck", Some(opts(&[])))
        .await
        .unwrap();
    let action = sim.path().join("sys/block/md0/md/sync_action");
    assert_eq!(read_trim(&action), "check");
    wait_action(&c, &md0, "check").await;
    // md ends the check: the attribute reads idle (md named the check in last_sync_action as
    // it started), and the service looks once (a lease change re-reads the tree, as the
    // kernel's notification would).
    support::tree::write(sim.path(), "sys/block/md0/md/last_sync_action", "check\n");
    support::tree::write(sim.path(), "sys/block/md0/md/sync_action", "idle\n");
    support::bus::acquire(&c, &[("min", Value::U64(5000))])
        .await
        .unwrap();
    wait_action(&c, &md0, "idle").await;
    let done = wait_u64(&c, &md0, "LastCheckCompleted", |n| n > 0).await;
    let r = last_result(&c, &md0).await;
    assert_eq!(u64::try_from(&*r["completed"]).unwrap(), done);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_with_a_duration_is_paused_at_its_window_end() {
    let Some(bus) = Bus::start() else { return };
    let _svc = Service::sim(&bus, &[("MDPILOT_SIM_TICK_MS", "100")]).await;
    let c = bus.connect().await;
    let md0 = sim_array_path("md0");
    // A 3 s window: long enough that a loaded machine still shows the running check before the
    // window ends (1 s was seen to end before the first look).
    let o = opts(&[("max", Value::U64(1000)), ("duration", Value::U64(3))]);
    check_call(&c, &md0, "StartCheck", Some(o)).await.unwrap();
    wait_action(&c, &md0, "check").await;
    // The service pauses it itself (at its next look, within the progress interval).
    wait_action(&c, &md0, "idle").await;
    // Paused, not finished: the position is kept (how far 3 s got depends on the machine's
    // load, so no bound on it: the resume below checks it is where the check goes on from).
    let pos = prop_u64(&c, &md0, "CheckPosition").await;
    assert_eq!(throttle(&c, "md0").await, None);
    assert_eq!(prop_u64(&c, &md0, "LastCheckCompleted").await, 0);
    // It resumes where the window left it (a paused check, not nothing to resume).
    check_call(&c, &md0, "ResumeCheck", None).await.unwrap();
    wait_action(&c, &md0, "check").await;
    let at = wait_u64(&c, &md0, "SyncCompletedSectors", |n| n > 0).await;
    assert!(at >= pos, "{at} < {pos}");
    check_call(&c, &md0, "CancelCheck", None).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_check_start_comes_from_the_schedule() {
    let Some(bus) = Bus::start() else { return };
    let sim = Sim::create().unwrap();
    support::tree::write(
        sim.path(),
        "etc/mdpilot/config.d/50-check.toml",
        "[check]\nschedule = \"Sun *-*-1..7 01:00\"\ncontinue = \"*-*-* 01:00\"\nskip = [\"md1\"]\n",
    );
    let now = mdpilot::host::unix_now_s() as i64;
    let config = mdpilot::config::Config::load(sim.root()).unwrap();
    let s = config.check.schedule.unwrap();
    let offset = mdpilot::host::utc_offset_s(now);
    let want = s.next_window_start(now, 0, offset).unwrap() as u64;
    let _svc = Service::on_root(&bus, sim.path(), &[]).await;
    let c = bus.connect().await;
    let next = prop_u64(&c, &sim_array_path("md0"), "NextCheckStart").await;
    assert_eq!(
        next, want,
        "the schedule's next window (a window boundary passed?)"
    );
    assert!(next > now as u64);
    // Skipped by the schedule: none.
    assert_eq!(
        prop_u64(&c, &sim_array_path("md1"), "NextCheckStart").await,
        0
    );
}

/// The check schedule is a step of the service loop: inside a window, the loop's schedule
/// step starts the scheduled check on the loop's arrays and publishes `SyncAction` at once,
/// and the record marks the check as the schedule's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loop_starts_a_scheduled_check_in_its_window_and_publishes_it() {
    let Some(bus) = Bus::start() else { return };
    let sim = Sim::create().unwrap();
    support::tree::write(
        sim.path(),
        "etc/mdpilot/config.d/50-check.toml",
        "[check]\nschedule = \"*-*-* 00:00\"\nwindow = \"24h\"\nrandom_delay = \"0\"\nskip = [\"md1\"]\n",
    );
    let svc = Service::on_root(&bus, sim.path(), &[]).await;
    let c = bus.connect().await;
    let md0 = sim_array_path("md0");
    wait_action(&c, &md0, "check").await;
    assert_eq!(
        read_trim(sim.root().sys("block/md0/md/sync_action")),
        "check"
    );
    let config = mdpilot::config::Config::load(sim.root()).unwrap();
    let st = mdpilot::check::store::CheckStore::new(sim.root(), &config)
        .load()
        .unwrap();
    let rec = st.array.values().find(|r| r.name == "md0").unwrap();
    assert!(rec.scheduled && rec.running.is_some(), "{rec:?}");
    drop(svc);
}

/// `systemctl reload` (SIGHUP) puts an edited `config.d` in effect: a schedule added after the
/// start shows in `NextCheckStart`; a broken fragment then keeps the configuration in effect
/// (the schedule stays) and the service keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_configuration_and_a_broken_file_keeps_the_old_one() {
    let Some(bus) = Bus::start() else { return };
    let sim = Sim::create().unwrap();
    let mut svc = Service::on_root(&bus, sim.path(), &[]).await;
    let pid = svc.pid();
    let c = bus.connect().await;
    let md0 = sim_array_path("md0");
    assert_eq!(
        prop_u64(&c, &md0, "NextCheckStart").await,
        0,
        "no schedule yet"
    );
    let fragment = "etc/mdpilot/config.d/50-check.toml";
    support::tree::write(
        sim.path(),
        fragment,
        "[check]\nschedule = \"Sun *-*-1..7 01:00\"\n",
    );
    let hup = || {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid as i32, libc::SIGHUP) };
    };
    hup();
    let next = wait_u64(&c, &md0, "NextCheckStart", |n| n > 0).await;
    support::tree::write(
        sim.path(),
        fragment,
        "[check]\nschedule = \"Mon 01:00\"\nbogus = 1\n",
    );
    hup();
    // The broken file is logged; a lease change then makes the loop re-read and republish.
    support::bus::acquire(&c, &[("min", Value::U64(5000))])
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(prop_u64(&c, &md0, "NextCheckStart").await, next);
    // Fixed: the next reload puts it in effect.
    support::tree::write(sim.path(), fragment, "[check]\nschedule = \"Mon 01:00\"\n");
    hup();
    wait_u64(&c, &md0, "NextCheckStart", |n| n != next).await;
    assert!(svc.term().success());
}

const CHECK_METHODS: [&str; 4] = ["StartCheck", "PauseCheck", "ResumeCheck", "CancelCheck"];

/// Runs inside `loop_unprivileged_callers_need_polkit_for_checks` as `nobody`.
#[tokio::test]
#[ignore = "helper: run by loop_unprivileged_callers_need_polkit_for_checks as nobody"]
async fn unprivileged_check_helper() {
    let Some(c) = helper_connection("loop_unprivileged_callers_need_polkit_for_checks").await
    else {
        return;
    };
    let md0 = sim_array_path("md0");
    // Reads stay open to everyone.
    let _ = get(&c, &md0, ARRAY_IFACE, "CheckPosition").await;
    for m in CHECK_METHODS {
        let o =
            (m == "StartCheck").then(|| opts(&[("auth.no_user_interaction", Value::Bool(true))]));
        println!(
            "RESULT {m} {}",
            error_name(check_call(&c, &md0, m, o).await)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_unprivileged_callers_need_polkit_for_checks() {
    need_root!("to switch to nobody");
    for polkit_answer in [None, Some(false)] {
        let Some(bus) = Bus::start() else { return };
        let polkit = match polkit_answer {
            Some(allow) => Some(FakePolkit::serve(&bus, allow).await),
            None => None,
        };
        // The service asks "the system bus" for polkit: the private one (none answers there
        // without the fake: polkit unreachable is NotAuthorized too).
        let svc = Service::start(
            &bus,
            &["--sim"],
            &[("DBUS_SYSTEM_BUS_ADDRESS", bus.address.as_str())],
        )
        .await;
        let out = support::bus::run_helper_as_nobody(
            "dbus_check::unprivileged_check_helper",
            &[("MDPILOT_TEST_BUS", &bus.address)],
        )
        .await;
        let results: Vec<&str> = out.lines().filter(|l| l.starts_with("RESULT ")).collect();
        assert_eq!(results.len(), CHECK_METHODS.len(), "{out}");
        for l in results {
            assert!(
                l.ends_with(" org.mdpilot.MdPilot1.Error.NotAuthorized"),
                "{l}"
            );
        }
        assert_eq!(
            read_trim(svc.sim_path("sys/block/md0/md/sync_action")),
            "idle"
        );
        if let Some(p) = polkit {
            let asked = p.asked();
            let methods: Vec<&str> = asked.iter().map(|a| a.details["method"].as_str()).collect();
            assert_eq!(methods, CHECK_METHODS, "{asked:?}");
            for Asked {
                action,
                details,
                flags,
                ..
            } in &asked
            {
                assert_eq!(action, "org.mdpilot.MdPilot1.manage-priority");
                assert_eq!(details["device"], "/dev/md0");
                // auth.no_user_interaction on StartCheck only.
                let want = u32::from(details["method"] != "StartCheck");
                assert_eq!(*flags, want, "{details:?}");
            }
        }
    }
}
