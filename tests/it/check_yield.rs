//! Checks that yield to the machine's users: the pressure throttle (`[check] pressure_target`,
//! `CheckThrottle`), and of resyncs where an admin opts in (`[resync] pressure_target`,
//! `ResyncThrottle`: off by default, aside for the installer's lease, gone at SIGTERM), the guards (`CheckHeld`, StartCheck's `force`), the pause when the array
//! degrades, and the pause at the service's stop with the resume at its next start. Against
//! `mdpilot serve --sim` (md0 an idle raid1 on sda1/sdb1, md1 a resyncing raid5 on sdc1..sde1)
//! or a static simulated tree on a private bus.

use crate::support;

use std::collections::HashMap;
use std::time::Duration;
use support::bus::{call, error_name, get, opts, sim_array_path, ARRAY_IFACE};
use support::tree::{read_trim, write, Sim};
use support::{Bus, Service};
use zbus::zvariant::{OwnedValue, Value};

async fn throttle_dict(c: &zbus::Connection, path: &str) -> HashMap<String, OwnedValue> {
    let v = get(c, path, ARRAY_IFACE, "CheckThrottle").await;
    assert_eq!(v.value_signature().to_string(), "a{sv}");
    v.try_into().unwrap()
}

fn text(d: &HashMap<String, OwnedValue>, k: &str) -> String {
    d.get(k)
        .map(|v| String::try_from(v.try_clone().unwrap()).unwrap())
        .unwrap_or_default()
}

fn num(d: &HashMap<String, OwnedValue>, k: &str) -> u64 {
    d.get(k).map_or(0, |v| u64::try_from(&**v).unwrap())
}

async fn held(c: &zbus::Connection, path: &str) -> String {
    String::try_from(get(c, path, ARRAY_IFACE, "CheckHeld").await).unwrap()
}

/// Polls `f` every 50 ms for at most `secs` seconds (a decision waits for its interval: 10 s
/// for a step up).
async fn within<F, Fut>(secs: u64, what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !f().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `/proc/pressure/io` with `full avg10` at `full` percent and the `full` stall counter at
/// `total_us` (`some` one more of each).
fn pressure(full: f64, total_us: u64) -> String {
    format!(
        "some avg10={:.2} avg60=0.00 avg300=0.00 total={}\nfull avg10={full:.2} avg60=0.00 avg300=0.00 total={total_us}\n",
        full + 1.0,
        total_us + 1
    )
}

/// Plays the kernel's io pressure for the service under test: while `busy`, the `full` stall
/// counter grows by a whole second every 50 ms (any look's interval reads 100 %); else it
/// stands still (0 %). `/proc/pressure/io` is replaced by rename, so a look never reads half a
/// file. The test never rewrites a file the service writes (a read-modify-write beside the
/// service's own write could lose it): `md0/md/sync_io_depth` keeps what the service wrote,
/// and [`depth_reads`] reads it as the kernel would print it.
fn play_kernel(
    root: std::path::PathBuf,
    busy: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let (psi, tmp) = (
            root.join("proc/pressure/io"),
            root.join("proc/pressure/.io"),
        );
        let mut total = 1_000_000u64;
        loop {
            if busy.load(std::sync::atomic::Ordering::SeqCst) {
                total += 1_000_000;
                std::fs::write(&tmp, pressure(3.0, total)).unwrap();
                std::fs::rename(&tmp, &psi).unwrap();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
}

/// `md/sync_io_depth`'s text as the kernel prints it: what the service wrote (`1`, `system`)
/// in the kernel's read-back form (`1 (local)`, `32 (system)`); a read-back form unchanged.
fn as_kernel_prints(written: &str) -> String {
    match written {
        "system" => "32 (system)".to_string(),
        w => match w.parse::<u64>() {
            Ok(n) => format!("{n} (local)"),
            Err(_) => w.to_string(),
        },
    }
}

/// Waits (10 s at most) for `md0/md/sync_io_depth` under `root` to read `want` (in the
/// kernel's read-back form, [`as_kernel_prints`]).
async fn depth_reads(root: &std::path::Path, want: &str) {
    let f = root.join("sys/block/md0/md/sync_io_depth");
    within(10, &format!("md0 sync_io_depth {want}"), || {
        let f = f.clone();
        async move { as_kernel_prints(&read_trim(f)) == want }
    })
    .await;
}

/// The io pressure drives md0's check: its first decision (no interval yet: `avg10`), taken
/// before the check starts, above the band, starts at the floor with `md/sync_io_depth` 1; quiet (the stall counter
/// still) it climbs to the ceiling, doubling at each look after a quiet one, and gives the
/// io depth back; busy again (the counter growing) it drops to the floor at the first look.
/// The limit is the lease's and md's `sync_speed_max`, and `CheckThrottle` says why and from
/// which signal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pressure_throttle_steps_down_when_busy_and_climbs_when_quiet() {
    let Some(bus) = Bus::start() else { return };
    // The simulator's own tree: it runs the check.
    let svc = Service::sim(&bus, &[("MDPILOT_SIM_TICK_MS", "100")]).await;
    let p = |rel: &str| svc.sim_path(rel);
    write(
        &p(""),
        "etc/mdpilot/config.d/50-p.toml",
        "[check]\npressure_target = \"full 5%..10%\"\npressure_floor = 2000\npressure_ceiling = 100000\n",
    );
    write(&p(""), "proc/pressure/io", &pressure(30.0, 1_000_000));
    // A kernel with sync_io_depth (Linux 6.16+), at md's default.
    write(&p(""), "proc/sys/dev/raid/sync_io_depth", "32\n");
    write(&p(""), "sys/block/md0/md/sync_io_depth", "32 (system)\n");
    let busy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let kernel = play_kernel(p(""), busy.clone());
    // The configuration in effect: the service says when the reload is done.
    svc.reload();
    let c = bus.connect().await;
    let md0 = sim_array_path("md0");
    call(&c, &md0, ARRAY_IFACE, "StartCheck", &(opts(&[]),))
        .await
        .unwrap();
    // The first decision is the lease the check starts under: md's limit is the floor before
    // the reply, not md's own 200000 until the service's next look.
    let max = read_trim(p("sys/block/md0/md/sync_speed_max"));
    assert!(max.starts_with("2000"), "{max}");
    let limit_is = |want: u64| {
        let (c, md0) = (c.clone(), md0.clone());
        move || {
            let (c, md0) = (c.clone(), md0.clone());
            async move { num(&throttle_dict(&c, &md0).await, "limit") == want }
        }
    };
    within(30, "a first decision at the floor", limit_is(2000)).await;
    let d = throttle_dict(&c, &md0).await;
    let why = text(&d, "why");
    assert!(
        why.starts_with("io pressure 30.0% (avg10, first look)") && why.ends_with("io depth 1"),
        "{why}"
    );
    assert_eq!(
        (text(&d, "source"), num(&d, "io_depth")),
        ("avg10".into(), 1)
    );
    assert!(read_trim(p("sys/block/md0/md/sync_speed_max")).starts_with("2000"));
    depth_reads(&p(""), "1 (local)").await;
    // Quiet: the counter stands still; from the floor to the ceiling (x2 per look after a
    // quiet one: 4000, 8000, ... 64000, 100000), the io depth given back.
    within(60, "the ceiling", limit_is(100_000)).await;
    let d = throttle_dict(&c, &md0).await;
    assert_eq!(text(&d, "source"), "interval");
    assert!(!d.contains_key("io_depth"), "{d:?}");
    assert!(
        text(&d, "why").starts_with("io pressure 0.0% over "),
        "{d:?}"
    );
    assert!(num(&d, "interval_ms") >= 500, "{d:?}");
    depth_reads(&p(""), "32 (system)").await;
    // Busy again: the counter grows by a second every 50 ms: to the floor at the next look.
    busy.store(true, std::sync::atomic::Ordering::SeqCst);
    within(30, "the floor again", limit_is(2000)).await;
    let d = throttle_dict(&c, &md0).await;
    assert_eq!(
        (text(&d, "decision"), num(&d, "io_depth")),
        ("down".into(), 1)
    );
    assert!(
        text(&d, "why").starts_with("io pressure 100.0% over "),
        "{d:?}"
    );
    // Each change is counted by its decision (holds between the steps are not).
    let notes = read_trim(p("run/mdpilot/check-throttle.json"));
    assert!(
        notes.contains(r#""decisions":{"down":1,"start":1,"up":6}"#),
        "{notes}"
    );
    cancel_and_give_back(&c, &md0, &p("")).await;
    kernel.abort();
}

/// The check ends by cancel: the note goes with it, and so does the io depth.
async fn cancel_and_give_back(c: &zbus::Connection, md0: &str, root: &std::path::Path) {
    call(c, md0, ARRAY_IFACE, "CancelCheck", &()).await.unwrap();
    within(10, "the note gone", || {
        let (c, md0) = (c.clone(), md0.to_string());
        async move { throttle_dict(&c, &md0).await.is_empty() }
    })
    .await;
    depth_reads(root, "32 (system)").await;
}

/// Without `/proc/pressure/io` the throttle is the fixed `check_max`, and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_psi_the_throttle_is_fixed_and_says_why() {
    let Some(bus) = Bus::start() else { return };
    let svc = Service::sim(&bus, &[("MDPILOT_SIM_TICK_MS", "100")]).await;
    write(
        &svc.sim_path(""),
        "etc/mdpilot/config.d/50-p.toml",
        "[check]\npressure_target = \"full 5%..10%\"\ncheck_max = 3000\n",
    );
    // The configuration in effect: the service says when the reload is done.
    svc.reload();
    let c = bus.connect().await;
    let md0 = sim_array_path("md0");
    call(&c, &md0, ARRAY_IFACE, "StartCheck", &(opts(&[]),))
        .await
        .unwrap();
    within(10, "a fixed decision", || {
        let (c, md0) = (c.clone(), md0.clone());
        async move { text(&throttle_dict(&c, &md0).await, "decision") == "fixed" }
    })
    .await;
    let d = throttle_dict(&c, &md0).await;
    assert_eq!(num(&d, "limit"), 3000);
    assert_eq!(
        text(&d, "why"),
        "fixed at 3000 KiB/s: no /proc/pressure/io (kernel without CONFIG_PSI)"
    );
    assert!(!d.contains_key("full_avg10"));
}

/// A check does not start on an array that resyncs, nor (without `force`) on one that shares a
/// disk with it; the reason is in the error and in `CheckHeld`; `force` overrides the shared
/// disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guards_refuse_with_their_reason_and_force_overrides() {
    let Some(bus) = Bus::start() else { return };
    let sim = Sim::create().unwrap();
    let root = sim.path();
    // md0 on sda1/sdb1, md1 (resyncing) on sdc1..sde1: make sdb1 a partition of sdc, the disk
    // md1 uses too.
    for (part, disk) in [
        ("sda1", "sda"),
        ("sdb1", "sdc"),
        ("sdc1", "sdc"),
        ("sdd1", "sdd"),
        ("sde1", "sde"),
    ] {
        let d = root.join(format!("sys/devices/virtual/{disk}/{part}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("partition"), "1\n").unwrap();
        std::fs::create_dir_all(root.join("sys/class/block")).unwrap();
        let _ = std::os::unix::fs::symlink(&d, root.join(format!("sys/class/block/{part}")));
    }
    let svc = Service::on_root(&bus, root, &[]).await;
    let c = bus.connect().await;
    let (md0, md1) = (sim_array_path("md0"), sim_array_path("md1"));
    assert_eq!(held(&c, &md1).await, "md1 runs resync");
    assert_eq!(held(&c, &md0).await, "it shares disk sdc: md1 runs resync");
    let e = call(&c, &md1, ARRAY_IFACE, "StartCheck", &(opts(&[]),)).await;
    let msg = format!("{:?}", e.as_ref().err());
    assert_eq!(error_name(e), "org.mdpilot.MdPilot1.Error.Busy");
    assert!(msg.contains("md1 runs resync (force overrides)"), "{msg}");
    let e = call(&c, &md0, ARRAY_IFACE, "StartCheck", &(opts(&[]),)).await;
    let msg = format!("{:?}", e.as_ref().err());
    assert!(msg.contains("it shares disk sdc"), "{msg}");
    assert_eq!(read_trim(root.join("sys/block/md0/md/sync_action")), "idle");
    // force: started, the reason overridden in the journal.
    let force = opts(&[("force", Value::Bool(true))]);
    call(&c, &md0, ARRAY_IFACE, "StartCheck", &(force,))
        .await
        .unwrap();
    assert_eq!(
        read_trim(root.join("sys/block/md0/md/sync_action")),
        "check"
    );
    drop(svc);
}

/// A running check pauses when its array degrades: `idle`, its position kept, `CheckHeld`
/// "paused: degraded".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_check_pauses_when_its_array_degrades() {
    let Some(bus) = Bus::start() else { return };
    let svc = Service::sim(&bus, &[("MDPILOT_SIM_TICK_MS", "100")]).await;
    let c = bus.connect().await;
    let md0 = sim_array_path("md0");
    let o = opts(&[("max", Value::U64(1000))]);
    call(&c, &md0, ARRAY_IFACE, "StartCheck", &(o,))
        .await
        .unwrap();
    within(10, "progress", || {
        let c = c.clone();
        let md0 = md0.clone();
        async move {
            u64::try_from(get(&c, &md0, ARRAY_IFACE, "SyncCompletedSectors").await).unwrap() > 0
        }
    })
    .await;
    std::fs::write(svc.sim_path("sys/block/md0/md/dev-sdb1/state"), "faulty\n").unwrap();
    // SAFETY: signalling our own child (the simulator's "mdadm --fail").
    unsafe { libc::kill(svc.pid() as i32, libc::SIGUSR1) };
    within(10, "paused: degraded", || {
        let (c, md0) = (c.clone(), md0.clone());
        async move { held(&c, &md0).await == "paused: degraded" }
    })
    .await;
    assert_eq!(
        read_trim(svc.sim_path("sys/block/md0/md/sync_action")),
        "idle"
    );
    let pos = u64::try_from(get(&c, &md0, ARRAY_IFACE, "CheckPosition").await).unwrap();
    assert!(pos > 0);
    let rec = read_trim(svc.sim_path("var/lib/mdpilot/checks.toml"));
    assert!(rec.contains("paused_for = \"degraded\""), "{rec}");
}

/// SIGTERM pauses the check the service runs (position saved, `idle`) and the next start
/// resumes it from there; the service does not wait for the check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_pauses_the_check_and_the_next_start_resumes_it() {
    let Some(bus) = Bus::start() else { return };
    let sim = Sim::create().unwrap();
    let root = sim.path();
    let md = |f: &str| root.join(format!("sys/block/md0/md/{f}"));
    let mut svc = Service::on_root(&bus, root, &[]).await;
    let c = bus.connect().await;
    let md0 = sim_array_path("md0");
    call(&c, &md0, ARRAY_IFACE, "StartCheck", &(opts(&[]),))
        .await
        .unwrap();
    assert_eq!(read_trim(md("sync_action")), "check");
    // What md shows while the check runs (the tree is static: the test plays the kernel).
    std::fs::write(md("sync_completed"), "524288 / 2097152\n").unwrap();
    let t = std::time::Instant::now();
    assert!(svc.term().success());
    let took = t.elapsed();
    assert_eq!(read_trim(md("sync_action")), "idle");
    let rec = read_trim(root.join("var/lib/mdpilot/checks.toml"));
    assert!(rec.contains("paused_for = \"shutdown\""), "{rec}");
    assert!(rec.contains("sectors = 524288"), "{rec}");
    // md keeps the point reached in sync_min after an interrupted check.
    std::fs::write(md("sync_completed"), "none\n").unwrap();
    std::fs::write(md("sync_min"), "524288\n").unwrap();
    let _svc = Service::on_root(&bus, root, &[]).await;
    assert_eq!(read_trim(md("sync_action")), "check");
    assert_eq!(read_trim(md("sync_min")), "524288");
    let rec = read_trim(root.join("var/lib/mdpilot/checks.toml"));
    assert!(!rec.contains("paused_for"), "{rec}");
    eprintln!("stop with a running check took {took:?}");
}

/// The holders of the leases in the simulated tree's policy state file.
fn lease_holders(root: &std::path::Path) -> Vec<String> {
    let path = root.join("run/mdpilot/policy.toml");
    if !path.exists() {
        return Vec::new();
    }
    let st = mdpilot::policy::state::read(&path).unwrap();
    st.leases.into_keys().collect()
}

async fn synced_sectors(c: &zbus::Connection, path: &str) -> u64 {
    u64::try_from(get(c, path, ARRAY_IFACE, "SyncCompletedSectors").await).unwrap()
}

/// Waits until the service's loop has published md1's progress three times: the second
/// publication follows the first step's upkeep (the resync throttle's look included), so a
/// look has been taken since the call.
async fn two_looks(c: &zbus::Connection, md1: &str) {
    let mut seen = synced_sectors(c, md1).await;
    for _ in 0..2 {
        within(30, "md1's progress published", || {
            let (c, md1) = (c.clone(), md1.to_string());
            let before = seen;
            async move { synced_sectors(&c, &md1).await != before }
        })
        .await;
        seen = synced_sectors(c, md1).await;
    }
}

/// Whether the policy wrote `original` back to a per-array limit: the value, or `system` for
/// an original that followed the system limit (a kernel reads that back as `200000 (system)`;
/// the simulated tree, once idle, keeps the word as written).
fn restored(original: &str, now: &str) -> bool {
    now == original || (original.ends_with("(system)") && now == "system")
}

const RESYNC_OPT_IN: &str = "[resync]\npressure_target = \"full 5%..10%\"\npressure_floor = 2000\npressure_ceiling = 100000\n";

/// Resync and recovery restore redundancy: without `[resync] pressure_target` the throttle
/// holds no lease however busy the machine (md's own limits); with it, md1's resync gets the
/// lease `resync-md1`, which follows the io pressure (`ResyncThrottle` says why), and goes when
/// the resync ends, md's `sync_speed_max` back to what it was.
/// The test plays the stall counter ([`play_kernel`]): busy, then quiet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resync_throttle_is_opt_in_follows_pressure_and_goes_with_the_resync() {
    let Some(bus) = Bus::start() else { return };
    let svc = Service::sim(&bus, &[("MDPILOT_SIM_TICK_MS", "100")]).await;
    let p = |rel: &str| svc.sim_path(rel);
    let original = read_trim(p("sys/block/md1/md/sync_speed_max"));
    write(&p(""), "proc/pressure/io", &pressure(30.0, 1_000_000));
    let busy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let kernel = play_kernel(p(""), busy.clone());
    let c = bus.connect().await;
    let md1 = sim_array_path("md1");
    // Off: two looks of the loop while md1 resyncs under pressure, and nothing held.
    two_looks(&c, &md1).await;
    assert!(
        lease_holders(&p("")).is_empty(),
        "{:?}",
        lease_holders(&p(""))
    );
    let d = get(&c, &md1, ARRAY_IFACE, "ResyncThrottle").await;
    let d: HashMap<String, OwnedValue> = d.try_into().unwrap();
    assert!(d.is_empty(), "{d:?}");
    assert_eq!(read_trim(p("sys/block/md1/md/sync_speed_max")), original);
    // On: busy, so the floor at once.
    write(&p(""), "etc/mdpilot/config.d/50-r.toml", RESYNC_OPT_IN);
    svc.reload();
    let resync = |c: &zbus::Connection| {
        let (c, md1) = (c.clone(), md1.clone());
        async move {
            let v = get(&c, &md1, ARRAY_IFACE, "ResyncThrottle").await;
            let d: HashMap<String, OwnedValue> = v.try_into().unwrap();
            d
        }
    };
    within(30, "a first decision at the floor", || async {
        num(&resync(&c).await, "limit") == 2000
    })
    .await;
    let d = resync(&c).await;
    // The first decision (its avg10 may be the played kernel's 3 %: the ceiling), or a later
    // look's on the interval: at the floor.
    assert!(["start", "floor", "down"].contains(&text(&d, "decision").as_str()));
    assert!(
        text(&d, "why").starts_with("resync: io pressure "),
        "{}",
        text(&d, "why")
    );
    within(10, "md1 at the floor under resync-md1", || async {
        read_trim(p("sys/block/md1/md/sync_speed_max")).starts_with("2000")
            && lease_holders(&p("")) == ["resync-md1"]
    })
    .await;
    // Quiet (the counter stands still): it climbs to the ceiling.
    busy.store(false, std::sync::atomic::Ordering::SeqCst);
    within(60, "the ceiling", || async {
        num(&resync(&c).await, "limit") == 100_000
    })
    .await;
    assert_eq!(text(&resync(&c).await, "source"), "interval");
    within(10, "md1 at the ceiling", || async {
        read_trim(p("sys/block/md1/md/sync_speed_max")).starts_with("100000")
    })
    .await;
    // The resync ends (here stopped, as `idle` does): the lease goes, md's value returns.
    write(&p(""), "sys/block/md1/md/sync_action", "idle\n");
    // SAFETY: signalling our own child (the simulator looks at its tree again).
    unsafe { libc::kill(svc.pid() as i32, libc::SIGUSR1) };
    within(30, "the throttle gone with the resync", || async {
        resync(&c).await.is_empty()
    })
    .await;
    // The lease, md's value and the notes file go in one release; each is waited for, as the
    // test reads them while the service writes.
    within(10, "the lease released", || async {
        lease_holders(&p("")).is_empty()
    })
    .await;
    within(10, "md's sync_speed_max restored", || async {
        restored(&original, &read_trim(p("sys/block/md1/md/sync_speed_max")))
    })
    .await;
    within(10, "the notes file gone", || async {
        !p("run/mdpilot/resync-throttle.json").exists()
    })
    .await;
    kernel.abort();
}

/// The throttle never fights a lease that asks for priority: with the installer's lease (or
/// any other on the speed limits) it holds none, `ResyncThrottle` says `aside` and why; once
/// the installer's lease goes, it takes its own again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resync_throttle_stands_aside_for_the_installer() {
    let Some(bus) = Bus::start() else { return };
    let svc = Service::sim(&bus, &[("MDPILOT_SIM_TICK_MS", "100")]).await;
    let root = svc.sim_path("");
    let p = |rel: &str| root.join(rel);
    write(&root, "proc/pressure/io", &pressure(30.0, 1_000_000));
    // Busy throughout: the throttle stays at its floor.
    let busy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let kernel = play_kernel(root.clone(), busy);
    write(&root, "etc/mdpilot/config.d/50-r.toml", RESYNC_OPT_IN);
    svc.reload();
    let c = bus.connect().await;
    let md1 = sim_array_path("md1");
    let resync = |c: &zbus::Connection| {
        let (c, md1) = (c.clone(), md1.clone());
        async move {
            let v = get(&c, &md1, ARRAY_IFACE, "ResyncThrottle").await;
            let d: HashMap<String, OwnedValue> = v.try_into().unwrap();
            d
        }
    };
    within(30, "the throttle at the floor", || async {
        num(&resync(&c).await, "limit") == 2000
    })
    .await;
    // The installer boosts every resync (`policy apply`, through the service).
    let root_s = root.to_str().unwrap();
    let o = support::policy_cli(
        &bus.address,
        root_s,
        &["apply", "--min", "50000", "--max", "300000"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", support::describe(&o));
    within(30, "the throttle aside", || async {
        text(&resync(&c).await, "decision") == "aside"
    })
    .await;
    let d = resync(&c).await;
    assert_eq!(num(&d, "limit"), 0);
    assert!(
        text(&d, "why").contains("the lease installer (installer)"),
        "{}",
        text(&d, "why")
    );
    within(10, "only the installer's lease", || async {
        lease_holders(&p("")) == ["installer"]
    })
    .await;
    // md runs at the installer's limits, not the throttle's floor: md1's own limit is back to
    // `system` (the simulator may print it as `system` until it looks again), which follows
    // the installer's 300000.
    assert!(read_trim(p("proc/sys/dev/raid/speed_limit_max")).starts_with("300000"));
    within(10, "md1 at the installer's limit", || async {
        let max = read_trim(p("sys/block/md1/md/sync_speed_max"));
        max.starts_with("300000") || max == "system"
    })
    .await;
    // The installer is done: the throttle takes its lease again.
    let o = support::policy_cli(&bus.address, root_s, &["release", "--holder", "installer"]);
    assert_eq!(o.status.code(), Some(0), "{}", support::describe(&o));
    within(30, "the throttle back", || async {
        num(&resync(&c).await, "limit") == 2000
    })
    .await;
    within(10, "its lease again", || async {
        lease_holders(&p("")) == ["resync-md1"]
    })
    .await;
    within(10, "md1 at the floor again", || async {
        read_trim(p("sys/block/md1/md/sync_speed_max")).starts_with("2000")
    })
    .await;
    kernel.abort();
}

/// SIGTERM releases the throttle's lease (it has no owner to die with): md's original
/// `sync_speed_max` is written back and the notes go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_releases_the_resync_throttle() {
    let Some(bus) = Bus::start() else { return };
    // A static tree the test owns (the simulator's own goes with it at the stop): md1 resyncs.
    let sim = Sim::create().unwrap();
    let root = sim.path().to_path_buf();
    let p = |rel: &str| root.join(rel);
    let original = read_trim(p("sys/block/md1/md/sync_speed_max"));
    write(&root, "proc/pressure/io", &pressure(30.0, 1_000_000));
    // Busy throughout: the throttle stays at its floor.
    let busy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let kernel = play_kernel(root.clone(), busy);
    write(&root, "etc/mdpilot/config.d/50-r.toml", RESYNC_OPT_IN);
    let mut svc = Service::on_root(&bus, &root, &[]).await;
    within(30, "the throttle's lease", || async {
        lease_holders(&p("")) == ["resync-md1"]
    })
    .await;
    // Busy: at the floor once the interval's pressure is read (the first look's avg10 may
    // be the played kernel's 3 %, which starts at the ceiling).
    within(30, "the floor", || async {
        read_trim(p("sys/block/md1/md/sync_speed_max")) == "2000"
    })
    .await;
    assert!(p("run/mdpilot/resync-throttle.json").exists());
    assert!(svc.term().success());
    assert!(
        lease_holders(&p("")).is_empty(),
        "{:?}",
        lease_holders(&p(""))
    );
    let now = read_trim(p("sys/block/md1/md/sync_speed_max"));
    assert!(restored(&original, &now), "{original} -> {now}");
    assert!(!p("run/mdpilot/resync-throttle.json").exists());
    kernel.abort();
}
