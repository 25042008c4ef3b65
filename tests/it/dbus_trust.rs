//! What a caller can do to the service with its own timing and its own data: no lease outlives
//! a caller that leaves while polkit decides, and nothing the caller sends reaches polkit (or
//! anything else) before it is validated. The real `mdpilot serve` on a private bus, the fake
//! polkit answering after a delay.

use crate::support;

use mdpilot::policy::journal::{ArrayRef, Change};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::bus::{
    acquire, call, call_manager, error_name, helper_connection, leases, opts, sim_array_path,
    ARRAY_IFACE,
};
use support::tree::{read_trim, Sim};
use support::{Behaviour, Bus, FakePolkit, Service};
use zbus::zvariant::Value;

/// How long the fake polkit "decides" in the leaving-caller test.
const POLKIT_DELAY: Duration = Duration::from_secs(3);

/// Starts this test binary's `#[ignore]`d `helper` as nobody with `MDPILOT_TEST_BUS`; returns
/// the child (its pid is the helper's: `setpriv` execs).
fn spawn_helper_as_nobody(helper: &str, bus: &Bus) -> tokio::process::Child {
    let mut cmd = support::as_nobody(std::env::current_exe().unwrap());
    cmd.args(["--exact", helper, "--ignored", "--nocapture"])
        .env("MDPILOT_TEST_BUS", &bus.address)
        .stdout(std::process::Stdio::piped());
    tokio::process::Command::from(cmd)
        .kill_on_drop(true)
        .spawn()
        .expect("setpriv")
}

/// Runs inside `loop_a_caller_that_leaves_during_authorization_holds_no_lease` as nobody: asks for
/// `max 0` (globally and on md0) and is killed while polkit decides.
#[tokio::test]
#[ignore = "helper: run by loop_a_caller_that_leaves_during_authorization_holds_no_lease"]
async fn leaving_client_helper() {
    let Some(c) =
        helper_connection("loop_a_caller_that_leaves_during_authorization_holds_no_lease").await
    else {
        return;
    };
    let mut md0 = HashMap::new();
    md0.insert("md0".to_string(), HashMap::from([("max", Value::U64(0))]));
    let r = acquire(&c, &[("max", Value::U64(0)), ("arrays", Value::from(md0))]).await;
    println!("RESULT {}", error_name(r));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_a_caller_that_leaves_during_authorization_holds_no_lease() {
    need_root!("to switch to nobody");
    let Some(bus) = Bus::start() else { return };
    let victim = Arc::new(AtomicU32::new(0));
    let kill = victim.clone();
    let polkit = FakePolkit::serve_with(
        &bus,
        Behaviour {
            allow: true,
            delay: POLKIT_DELAY,
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
    let svc = Service::start(
        &bus,
        &["--sim"],
        &[("DBUS_SYSTEM_BUS_ADDRESS", bus.address.as_str())],
    )
    .await;
    let gmax = svc.sim_path("proc/sys/dev/raid/speed_limit_max");
    let amax = svc.sim_path("sys/block/md0/md/sync_speed_max");
    let (gmax0, amax0) = (read_trim(&gmax), read_trim(&amax));
    let mut child = spawn_helper_as_nobody("dbus_trust::leaving_client_helper", &bus);
    victim.store(child.id().unwrap(), Ordering::SeqCst);
    let st = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("helper ends")
        .unwrap();
    assert!(
        !st.success(),
        "the helper was killed mid-authorization: {st}"
    );
    assert_eq!(polkit.asked().len(), 1, "{:?}", polkit.asked());
    // The question is withdrawn as soon as the caller has gone, before polkit answers.
    let asked_at = Instant::now();
    while polkit.cancelled().is_empty() {
        assert!(
            asked_at.elapsed() < POLKIT_DELAY,
            "no CancelCheckAuthorization while polkit decided"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cancelled = polkit.cancelled();
    assert_eq!(cancelled.len(), 1, "{cancelled:?}");
    assert!(cancelled[0].starts_with("mdpilot-"), "{cancelled:?}");
    // polkit's (late) yes changes nothing: no lease, the original limits.
    tokio::time::sleep(POLKIT_DELAY + Duration::from_secs(1)).await;
    let watcher = bus.connect().await;
    assert!(leases(&watcher).await.is_empty());
    assert_eq!((read_trim(&gmax), read_trim(&amax)), (gmax0, amax0));
}

/// Runs inside `loop_huge_or_unknown_arguments_are_refused_before_polkit_is_asked` as nobody.
#[tokio::test]
#[ignore = "helper: run by loop_huge_or_unknown_arguments_are_refused_before_polkit_is_asked"]
async fn hostile_arguments_helper() {
    let Some(c) =
        helper_connection("loop_huge_or_unknown_arguments_are_refused_before_polkit_is_asked")
            .await
    else {
        return;
    };
    let huge: HashMap<String, HashMap<String, Value>> = (0..30_000)
        .map(|i| {
            (
                format!("md{i}"),
                HashMap::from([("max".into(), Value::U64(0))]),
            )
        })
        .collect();
    // The same message refused at its first (unknown) option: the cost of carrying it
    // (serializing, the bus, deserializing), which the service cannot avoid.
    let huge = Value::from(huge);
    for (what, key) in [("baseline", "bogus"), ("huge-arrays", "arrays")] {
        let t = Instant::now();
        let r = acquire(&c, &[(key, huge.try_clone().unwrap())]).await;
        println!(
            "RESULT {what} {} {}",
            error_name(r),
            t.elapsed().as_millis()
        );
    }
    let md0 = sim_array_path("md0");
    for (what, word) in [
        ("frozen", "frozen".to_string()),
        ("unknown-word", "scrub".to_string()),
        ("long-word", "check".repeat(200_000)),
    ] {
        let t = Instant::now();
        let r = call(
            &c,
            &md0,
            ARRAY_IFACE,
            "RequestSyncAction",
            &(word, opts(&[])),
        )
        .await;
        println!(
            "RESULT {what} {} {}",
            error_name(r),
            t.elapsed().as_millis()
        );
    }
    let r = call_manager(&c, "SetArraySpeedLimits", &("md99", 1u64, 2u64, opts(&[]))).await;
    println!("RESULT unknown-array {} 0", error_name(r));
    let r = acquire(
        &c,
        &[("holder", Value::from("check-md0")), ("max", Value::U64(0))],
    )
    .await;
    println!("RESULT reserved-holder {} 0", error_name(r));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_huge_or_unknown_arguments_are_refused_before_polkit_is_asked() {
    need_root!("to switch to nobody");
    let Some(bus) = Bus::start() else { return };
    let polkit = FakePolkit::serve(&bus, true).await;
    let _svc = Service::start(
        &bus,
        &["--sim"],
        &[("DBUS_SYSTEM_BUS_ADDRESS", bus.address.as_str())],
    )
    .await;
    let out = support::bus::run_helper_as_nobody(
        "dbus_trust::hostile_arguments_helper",
        &[("MDPILOT_TEST_BUS", &bus.address)],
    )
    .await;
    let got: HashMap<&str, (&str, u64)> = out
        .lines()
        .filter_map(|l| {
            let mut w = l.strip_prefix("RESULT ")?.split(' ');
            Some((w.next()?, (w.next()?, w.next()?.parse().ok()?)))
        })
        .collect();
    let inv = "org.mdpilot.MdPilot1.Error.InvalidArgument";
    for what in [
        "baseline",
        "huge-arrays",
        "frozen",
        "unknown-word",
        "long-word",
        "reserved-holder",
    ] {
        assert_eq!(got[what].0, inv, "{what}: {out}");
    }
    assert_eq!(
        got["unknown-array"].0, "org.mdpilot.MdPilot1.Error.NoSuchArray",
        "{out}"
    );
    // The count is checked before any key is resolved or shown to polkit; what is left is
    // carrying the message, as for the call refused at its first option. Debug builds on a
    // shared machine make both slow and noisy, so the figures are printed, not compared.
    let (huge, base) = (got["huge-arrays"].1, got["baseline"].1);
    eprintln!("30 000 arrays keys: {huge} ms, the same message refused at once: {base} ms");
    assert!(polkit.asked().is_empty(), "{:?}", polkit.asked());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_limits_is_busy_while_a_wipe_holds_a_freeze() {
    let Some(bus) = Bus::start() else { return };
    let sim = Sim::create().unwrap();
    let root = sim.root().clone();
    let _svc = Service::start(&bus, &["--root", sim.path().to_str().unwrap()], &[]).await;
    let c = bus.connect().await;
    // A wipe's freeze as the engine journals it (owner: a live process, this one).
    let config = mdpilot::config::Config::load(&root).unwrap();
    let policy = mdpilot::policy::Policy::new(root.clone(), config.policy_settings(&root));
    let freeze = Change::freeze(
        ArrayRef {
            name: "md0".into(),
            uuid: None,
        },
        mdpilot::policy::process_owner(std::process::id()),
    );
    policy.hold(freeze).unwrap();
    let r = call_manager(&c, "RestoreLimits", &(opts(&[]),)).await;
    let msg = format!("{r:?}");
    assert_eq!(error_name(r), "org.mdpilot.MdPilot1.Error.Busy", "{msg}");
    assert!(msg.contains("md0"), "{msg}");
    assert_eq!(
        read_trim(root.sys("block/md0/md/sync_action")),
        "frozen",
        "the freeze stays"
    );
    policy.let_go("freeze:md0", None).unwrap();
    let r = call_manager(&c, "RestoreLimits", &(opts(&[]),)).await;
    assert_eq!(error_name(r), "success");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caller_holders_may_not_use_the_service_prefixes() {
    let Some(bus) = Bus::start() else { return };
    let _svc = Service::sim(&bus, &[]).await;
    let c = bus.connect().await;
    for h in [
        "check-md0",
        "admin-md0",
        "dbus-1.2-3",
        "wipe:/dev/sda",
        "freeze:md0",
    ] {
        let r = acquire(&c, &[("holder", Value::from(h)), ("max", Value::U64(0))]).await;
        assert_eq!(
            error_name(r),
            "org.mdpilot.MdPilot1.Error.InvalidArgument",
            "{h}"
        );
    }
    assert!(leases(&c).await.is_empty());
    let r = acquire(
        &c,
        &[("holder", Value::from("installer")), ("max", Value::U64(0))],
    )
    .await;
    assert_eq!(error_name(r), "success");
}

/// The hostile holder of the policy lock (a `mdpilot policy` command, or a freeze whose
/// `sync_action` write md has not answered): an AcquirePriority waits for the lock, and
/// meanwhile the service still answers everyone else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_call_blocked_on_the_lock_does_not_delay_other_calls() {
    let Some(bus) = Bus::start() else { return };
    let _polkit = FakePolkit::serve(&bus, true).await;
    let svc = Service::start(
        &bus,
        &["--sim"],
        &[("DBUS_SYSTEM_BUS_ADDRESS", bus.address.as_str())],
    )
    .await;
    let state = svc.sim_path("run/mdpilot/policy.toml");
    let lock = mdpilot::policy::state::lock(&state).unwrap();
    let impatient = bus.connect().await;
    let blocked =
        tokio::spawn(async move { acquire(&impatient, &[("max", Value::U64(7000))]).await });
    // The call is in the service (it cannot finish while the lock is held) ...
    let other = bus.connect().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!blocked.is_finished(), "AcquirePriority passed a held lock");
    // ... and another caller's property Get and method are answered while it waits.
    // (A bound only so that a service that does block fails the test instead of hanging it.)
    let v = tokio::time::timeout(
        Duration::from_secs(10),
        support::bus::get(
            &other,
            support::bus::MANAGER_PATH,
            support::bus::MANAGER_IFACE,
            "Version",
        ),
    )
    .await
    .expect("Version was not answered while AcquirePriority waited for the lock");
    assert_eq!(String::try_from(v).unwrap(), mdpilot::dbus::API_VERSION);
    assert!(leases(&other).await.is_empty());
    assert!(!blocked.is_finished(), "the first call was still blocked");
    drop(lock);
    let id = tokio::time::timeout(Duration::from_secs(20), blocked)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(id.starts_with("dbus-"), "{id}");
    assert_eq!(
        read_trim(svc.sim_path("proc/sys/dev/raid/speed_limit_max")),
        "7000"
    );
}

/// How long the fake polkit "waits for the admin" in the no-prompt test: far longer than any
/// call answered without a prompt takes.
const PROMPT_DELAY: Duration = Duration::from_secs(60);

/// Runs inside `loop_release_and_check_steps_without_a_prompt_are_answered_at_once` as nobody:
/// the `...WithOptions` methods with `auth.no_user_interaction`, each timed.
#[tokio::test]
#[ignore = "helper: run by loop_release_and_check_steps_without_a_prompt_are_answered_at_once"]
async fn no_prompt_helper() {
    let Some(c) =
        helper_connection("loop_release_and_check_steps_without_a_prompt_are_answered_at_once")
            .await
    else {
        return;
    };
    let no_prompt = || opts(&[("auth.no_user_interaction", Value::Bool(true))]);
    let t = Instant::now();
    let r = call_manager(
        &c,
        "ReleasePriorityWithOptions",
        &("installer", no_prompt()),
    )
    .await;
    println!(
        "RESULT ReleasePriority {} {}",
        error_name(r),
        t.elapsed().as_millis()
    );
    let md0 = sim_array_path("md0");
    for m in ["PauseCheck", "ResumeCheck", "CancelCheck"] {
        let t = Instant::now();
        let method = format!("{m}WithOptions");
        let r = call(&c, &md0, ARRAY_IFACE, &method, &(no_prompt(),)).await;
        println!("RESULT {m} {} {}", error_name(r), t.elapsed().as_millis());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_release_and_check_steps_without_a_prompt_are_answered_at_once() {
    need_root!("to switch to nobody");
    let Some(bus) = Bus::start() else { return };
    let polkit = FakePolkit::serve_with(
        &bus,
        Behaviour {
            allow: false,
            delay: PROMPT_DELAY,
            on_ask: None,
        },
    )
    .await;
    let _svc = Service::start(
        &bus,
        &["--sim"],
        &[("DBUS_SYSTEM_BUS_ADDRESS", bus.address.as_str())],
    )
    .await;
    let t = Instant::now();
    let out = support::bus::run_helper_as_nobody(
        "dbus_trust::no_prompt_helper",
        &[("MDPILOT_TEST_BUS", &bus.address)],
    )
    .await;
    let got: HashMap<&str, (&str, u64)> = out
        .lines()
        .filter_map(|l| {
            let mut w = l.strip_prefix("RESULT ")?.split(' ');
            Some((w.next()?, (w.next()?, w.next()?.parse().ok()?)))
        })
        .collect();
    for m in [
        "ReleasePriority",
        "PauseCheck",
        "ResumeCheck",
        "CancelCheck",
    ] {
        assert_eq!(
            got[m].0, "org.mdpilot.MdPilot1.Error.NotAuthorized",
            "{m}: {out}"
        );
        eprintln!("{m}WithOptions without a prompt: {} ms", got[m].1);
    }
    // None of them waited for the admin a prompt would have waited for.
    assert!(t.elapsed() < PROMPT_DELAY, "{out}");
    let asked = polkit.asked();
    assert_eq!(asked.len(), 4, "{asked:?}");
    for a in &asked {
        assert_eq!(a.flags, 0, "no AllowUserInteraction: {a:?}");
        // Off the system bus: the process, pinned by its start time (never left for polkit to
        // look up after the pid may have been reused).
        assert!(a.subject.starts_with("unix-process uid=65534"), "{a:?}");
        assert_ne!(a.start_time, 0, "{a:?}");
    }
}
