//! No kind of call can stall the service or starve another: a device whose open never
//! completes (storage that stopped answering: a failing disk, NFS, NBD, iSCSI) holds up only
//! the call that waits for it, a flood of unauthenticated `WipeCandidates` calls does not
//! delay root's `AcquirePriority`, and hostile `StartWipe` and `Job.Cancel` arguments are
//! refused before polkit is asked.
//!
//! The open that never completes is the failpoint `MDPILOT_FAILPOINT_OPEN_WAITS` of
//! `mdpilot::wipe::probe::open_read` (build with `--features failpoints`): an open of the test's
//! loop device appends a line to a mark file (the signal that the open has begun), then waits
//! on a FIFO until the test opens its other end. The `loop_fuse_` tests do the same with a real
//! disk that stopped answering: a loop device over a FUSE file whose reads wait, which makes the
//! kernel hold every open of the device ([`support::stall`]).

use crate::support;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};
use support::bus::{
    acquire, call, call_manager, error_name, get, helper_connection, job_iface, opts,
    run_helper_as_nobody, MANAGER_IFACE, MANAGER_PATH,
};
use support::stall::StalledDisk;
use support::tree::job_root;
use support::{Bus, FakePolkit, LoopDev, Service, MIB};
use zbus::zvariant::{OwnedObjectPath, Value};

/// The bound on every read a stuck open must not hold up.
const ANSWERED_WITHIN: Duration = Duration::from_millis(100);
/// The bound on methods that do I/O of their own (generous: a debug build on a shared
/// machine); a service that waits for the stuck open never answers them.
const MUTATION_WITHIN: Duration = Duration::from_secs(5);

/// An open that never completes: the failpoint's mark file and FIFO, and the env value that
/// arms it for `node`. Dropping it releases every waiting open.
struct StuckOpen {
    dir: tempfile::TempDir,
    env: String,
    release: Option<std::fs::File>,
}

impl StuckOpen {
    fn new(node: &Path) -> StuckOpen {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string; mkfifo has no other precondition.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let mark = dir.path().join("mark");
        let env = format!("{}:{}:{}", node.display(), mark.display(), fifo.display());
        StuckOpen {
            dir,
            env,
            release: None,
        }
    }

    /// How many opens of the node have begun.
    fn begun(&self) -> usize {
        std::fs::read_to_string(self.dir.path().join("mark")).map_or(0, |s| s.lines().count())
    }

    /// Waits (at most `limit`) until an open of the node has begun.
    async fn wait_begun(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.begun() == 0 {
            assert!(Instant::now() < deadline, "no open of the device began");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Lets every waiting open (and every later one) go on: the FIFO gets a writer for good
    /// (`O_RDWR` on a FIFO never blocks on Linux).
    fn release(&mut self) {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(self.dir.path().join("fifo"))
            .unwrap();
        self.release = Some(f);
    }
}

impl Drop for StuckOpen {
    fn drop(&mut self) {
        if self.release.is_none() {
            self.release();
        }
    }
}

/// How long `f` takes, failing the test past `limit` (so a service that blocks fails the test
/// instead of hanging it).
async fn timed<T>(what: &str, limit: Duration, f: impl std::future::Future<Output = T>) -> T {
    let t = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(10), f)
        .await
        .unwrap_or_else(|_| panic!("{what} was not answered in 10 s"));
    let took = t.elapsed();
    assert!(took <= limit, "{what} took {took:?} (bound {limit:?})");
    r
}

/// A service on a root whose `/dev` and `/sys` are the host's, with `env` and the fake polkit
/// (allowing) on a private bus.
async fn service(bus: &Bus, root: &Path, env: &[(&str, &str)]) -> Service {
    let mut env = env.to_vec();
    env.push(("DBUS_SYSTEM_BUS_ADDRESS", bus.address.as_str()));
    Service::on_root(bus, root, &env).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_a_device_whose_open_never_completes_leaves_every_other_call_answered() {
    need_root!();
    let Some(bus) = Bus::start() else { return };
    let _polkit = FakePolkit::serve(&bus, true).await;
    let d = LoopDev::filled(16 * MIB, 0xaa);
    let mut stuck = StuckOpen::new(&d.path);
    let root = job_root();
    let mut svc = service(
        &bus,
        root.path(),
        &[("MDPILOT_FAILPOINT_OPEN_WAITS", &stuck.env)],
    )
    .await;
    let c = bus.connect().await;
    let dev = d.path.display().to_string();
    let wipe = tokio::spawn(async move {
        let o = opts(&[("method", Value::from("zero"))]);
        call_manager(&c, "StartWipe", &(dev, o)).await
    });
    stuck.wait_begun(Duration::from_secs(20)).await;
    let other = bus.connect().await;
    // Reads do no I/O of their own: each is answered within the bound.
    for prop in [
        "Version",
        "Leases",
        "SpeedLimitMax",
        "OriginalSpeedLimitMax",
    ] {
        timed(&format!("Get {prop}"), ANSWERED_WITHIN, async {
            get(&other, MANAGER_PATH, MANAGER_IFACE, prop).await
        })
        .await;
    }
    // Methods with I/O of their own (the state file's fsync, the kernel writes) are answered
    // while the open waits; their own cost on a loaded machine is not what is measured here.
    let id = timed("AcquirePriority", MUTATION_WITHIN, async {
        acquire(&other, &[("max", Value::U64(7000))]).await.unwrap()
    })
    .await;
    timed("ReleasePriority", MUTATION_WITHIN, async {
        call_manager(&other, "ReleasePriority", &(id,))
            .await
            .unwrap()
    })
    .await;
    timed("RestoreLimits", MUTATION_WITHIN, async {
        call_manager(&other, "RestoreLimits", &(opts(&[]),))
            .await
            .unwrap()
    })
    .await;
    let version = timed("Get Version", ANSWERED_WITHIN, async {
        get(&other, MANAGER_PATH, MANAGER_IFACE, "Version").await
    })
    .await;
    assert_eq!(
        String::try_from(version).unwrap(),
        mdpilot::dbus::API_VERSION
    );
    assert!(!wipe.is_finished(), "StartWipe went past the stuck open");
    // A stuck device delays nobody's shutdown: SIGTERM is obeyed while the open waits.
    let st = svc.term();
    assert!(st.success(), "{st}");
    stuck.release();
    assert!(d.read_all().iter().all(|&b| b == 0xaa), "nothing written");
}

/// Runs as nobody inside `loop_a_flood_of_wipe_candidates_does_not_delay_root`: 600
/// `WipeCandidates` calls over 6 connections, all sent before any answer is awaited; prints
/// `SENT` once the service has read them all (a `Version` read on each connection answered
/// behind them), then, once every call is answered, `RESULT <error name or success> <count>`
/// per outcome and `NOT_ANSWERING <count>` (successes that list the device as not answering).
#[tokio::test]
#[ignore = "helper: run by loop_a_flood_of_wipe_candidates_does_not_delay_root"]
async fn candidates_flood_helper() {
    let Some(first) =
        helper_connection("loop_a_flood_of_wipe_candidates_does_not_delay_root").await
    else {
        return;
    };
    let dev = std::env::var("MDPILOT_TEST_DEV").unwrap();
    let addr = std::env::var("MDPILOT_TEST_BUS").unwrap();
    let mut conns = vec![first];
    for _ in 1..6 {
        conns.push(support::bus::connect_to(&addr).await);
    }
    let mut calls = Vec::new();
    for c in &conns {
        for _ in 0..100 {
            let c = c.clone();
            calls.push(tokio::spawn(async move {
                let r = call_manager(&c, "WipeCandidates", &(opts(&[]),)).await;
                r.and_then(|m| m.body().deserialize::<Vec<(String, bool, String)>>())
            }));
        }
    }
    for c in &conns {
        get(c, MANAGER_PATH, MANAGER_IFACE, "Version").await;
    }
    println!("SENT");
    let mut results = BTreeMap::new();
    let mut not_answering = 0;
    for call in calls {
        let r = call.await.unwrap();
        if let Ok(list) = &r {
            let mine = list.iter().find(|(d, _, _)| *d == dev);
            if mine.is_some_and(|(_, ok, why)| !ok && why.contains("not answering")) {
                not_answering += 1;
            }
        }
        *results.entry(error_name(r)).or_insert(0) += 1;
    }
    for (name, n) in results {
        println!("RESULT {name} {n}");
    }
    println!("NOT_ANSWERING {not_answering}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_a_flood_of_wipe_candidates_does_not_delay_root() {
    need_root!("to switch to nobody");
    let Some(bus) = Bus::start() else { return };
    let _polkit = FakePolkit::serve(&bus, true).await;
    let d = LoopDev::filled(16 * MIB, 0xaa);
    let mut stuck = StuckOpen::new(&d.path);
    let root = job_root();
    let _svc = service(
        &bus,
        root.path(),
        &[("MDPILOT_FAILPOINT_OPEN_WAITS", &stuck.env)],
    )
    .await;
    let mut helper = spawn_helper(
        "dbus_calls::candidates_flood_helper",
        &[
            ("MDPILOT_TEST_BUS", &bus.address),
            ("MDPILOT_TEST_DEV", &d.path.display().to_string()),
        ],
    );
    let mut out = helper.lines();
    loop {
        let l = tokio::time::timeout(Duration::from_secs(60), out.next_line())
            .await
            .expect("the helper did not send its calls")
            .unwrap()
            .expect("the helper ended early");
        if l == "SENT" {
            break;
        }
    }
    stuck.wait_begun(Duration::from_secs(20)).await;
    let c = bus.connect().await;
    // Generous for a debug build on a shared machine; without a bound the call waits until
    // the stuck opens end.
    let id = timed("root's AcquirePriority", Duration::from_secs(2), async {
        acquire(&c, &[("max", Value::U64(7000))]).await.unwrap()
    })
    .await;
    assert!(id.starts_with("dbus-"), "{id}");
    // Every call is answered while the device still does not answer (the open is released
    // only after the helper has printed its results).
    let mut rest = String::new();
    while let Ok(Some(l)) = tokio::time::timeout(Duration::from_secs(60), out.next_line())
        .await
        .expect("the helper did not end")
    {
        rest.push_str(&l);
        rest.push('\n');
    }
    // One probe of the stuck device, whatever the number of calls.
    assert_eq!(stuck.begun(), 1, "opens of the stuck device");
    stuck.release();
    let count = |key: &str| -> u32 {
        rest.lines()
            .filter_map(|l| l.strip_prefix(key))
            .filter_map(|l| l.trim().parse::<u32>().ok())
            .sum()
    };
    let busy = count("RESULT org.mdpilot.MdPilot1.Error.Busy ");
    let ok = count("RESULT success ");
    assert_eq!(busy + ok, 600, "{rest}");
    assert!(ok >= 6, "each connection got an answer: {rest}");
    assert!(
        count("NOT_ANSWERING ") >= 1,
        "the stuck device is named: {rest}"
    );
    helper.wait().await;
}

/// The helper's stdout, line by line, and its process (killed on drop).
struct Helper {
    child: tokio::process::Child,
}

impl Helper {
    fn lines(&mut self) -> tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>> {
        use tokio::io::AsyncBufReadExt;
        tokio::io::BufReader::new(self.child.stdout.take().unwrap()).lines()
    }

    async fn wait(&mut self) {
        let st = tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .expect("the helper did not end")
            .unwrap();
        assert!(st.success(), "helper: {st}");
    }
}

/// Starts this test binary's `#[ignore]`d `helper` as nobody with `env`.
fn spawn_helper(helper: &str, env: &[(&str, &str)]) -> Helper {
    let mut cmd = support::as_nobody(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        helper,
        "--ignored",
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .stdout(std::process::Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = tokio::process::Command::from(cmd)
        .kill_on_drop(true)
        .spawn()
        .expect("setpriv");
    Helper { child }
}

/// Runs as nobody inside `loop_hostile_start_wipe_and_cancel_arguments_never_reach_polkit`:
/// StartWipe and Job.Cancel (of the job at `MDPILOT_TEST_JOB`, which root started) with hostile
/// arguments; prints `RESULT <case> <error name> <message length>`.
#[tokio::test]
#[ignore = "helper: run by loop_hostile_start_wipe_and_cancel_arguments_never_reach_polkit"]
async fn hostile_wipe_helper() {
    let Some(c) =
        helper_connection("loop_hostile_start_wipe_and_cancel_arguments_never_reach_polkit").await
    else {
        return;
    };
    let dev = std::env::var("MDPILOT_TEST_DEV").unwrap();
    let job = std::env::var("MDPILOT_TEST_JOB").unwrap();
    let huge_dict: HashMap<String, Value> = (0..30_000)
        .map(|i| (format!("opt{i}"), Value::U64(u64::MAX)))
        .collect();
    let zero = || opts(&[("method", Value::from("zero"))]);
    let cases: Vec<(&str, String, HashMap<String, Value>)> = vec![
        (
            "huge-device",
            format!("/dev/{}", "x\n".repeat(2 << 20)),
            zero(),
        ),
        ("long-device", format!("/dev/{}", "x".repeat(5000)), zero()),
        ("newline", format!("{dev}\nApproved by root"), zero()),
        ("escape", format!("{dev}\u{1b}[2K"), zero()),
        (
            "max-u64",
            dev.clone(),
            opts(&[("verify", Value::U64(u64::MAX))]),
        ),
        (
            "unknown-method",
            dev.clone(),
            opts(&[("method", Value::from("shred"))]),
        ),
        ("huge-dict", dev.clone(), huge_dict.clone()),
    ];
    for (what, device, o) in cases {
        let r = call_manager(&c, "StartWipe", &(device, o)).await;
        print_result(what, r);
    }
    let r = call(&c, &job, job_iface(), "Cancel", &(huge_dict,)).await;
    print_result("cancel-huge-dict", r);
    let bad = opts(&[("auth.no_user_interaction", Value::U64(u64::MAX))]);
    let r = call(&c, &job, job_iface(), "Cancel", &(bad,)).await;
    print_result("cancel-flag-type", r);
}

fn print_result(what: &str, r: zbus::Result<zbus::Message>) {
    let len = match &r {
        Err(zbus::Error::MethodError(_, Some(m), _)) => m.len(),
        _ => 0,
    };
    println!("RESULT {what} {} {len}", error_name(r));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_hostile_start_wipe_and_cancel_arguments_never_reach_polkit() {
    need_root!("to switch to nobody");
    let Some(bus) = Bus::start() else { return };
    let polkit = FakePolkit::serve(&bus, true).await;
    let d = LoopDev::filled(16 * MIB, 0xaa);
    let root = job_root();
    let _svc = service(&bus, root.path(), &[("MDPILOT_JOB_LINGER_MS", "600000")]).await;
    // A job root started (its object stays on the bus after it ends).
    let c = bus.connect().await;
    let o = opts(&[("method", Value::from("zero"))]);
    let job: OwnedObjectPath = call_manager(&c, "StartWipe", &(d.path.display().to_string(), o))
        .await
        .unwrap()
        .body()
        .deserialize()
        .unwrap();
    let out = run_helper_as_nobody(
        "dbus_calls::hostile_wipe_helper",
        &[
            ("MDPILOT_TEST_BUS", &bus.address),
            ("MDPILOT_TEST_DEV", &d.path.display().to_string()),
            ("MDPILOT_TEST_JOB", job.as_str()),
        ],
    )
    .await;
    let got: HashMap<&str, (&str, usize)> = out
        .lines()
        .filter_map(|l| {
            let mut w = l.strip_prefix("RESULT ")?.split(' ');
            Some((w.next()?, (w.next()?, w.next()?.parse().ok()?)))
        })
        .collect();
    for what in [
        "huge-device",
        "long-device",
        "newline",
        "escape",
        "max-u64",
        "unknown-method",
        "huge-dict",
        "cancel-huge-dict",
        "cancel-flag-type",
    ] {
        let (name, len) = got.get(what).copied().unwrap_or_default();
        assert_eq!(
            name, "org.mdpilot.MdPilot1.Error.InvalidArgument",
            "{what}: {out}"
        );
        assert!(len < 1000, "{what}: a message of {len} bytes");
    }
    assert!(polkit.asked().is_empty(), "{:?}", polkit.asked());
}

#[test]
fn loop_wipe_candidates_leave_a_corrupt_checkpoint_in_place() {
    need_root!();
    let d = LoopDev::filled(16 * MIB, 0xaa);
    let root = mdpilot::host::Root::new(job_root().keep());
    let req = mdpilot::wipe::Request {
        device: d.path.clone(),
        method: mdpilot::wipe::Method::Zero,
        options: mdpilot::wipe::Options::default(),
    };
    let plan = mdpilot::wipe::plan_for(&root, &req).unwrap();
    let path = plan.checkpoint.unwrap().path;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "{ torn").unwrap();
    let listed = mdpilot::wipe::candidates::list(&root);
    let mine = listed
        .iter()
        .find(|c| c.device == d.path.display().to_string());
    assert!(mine.is_some_and(|c| c.accepted), "{mine:?}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{ torn", "moved");
    let siblings = std::fs::read_dir(path.parent().unwrap()).unwrap().count();
    assert_eq!(siblings, 1, "nothing set aside beside it");
    let _ = std::fs::remove_dir_all(root.path("/"));
}

/// Held by each `loop_fuse_` test throughout: the WipeCandidates probes of one test's service
/// would open the other test's stalled disk too (every block device of the host is a
/// candidate), and the threads waiting in opens are what the tests count.
static ONE_STALLED_DISK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Waits (at most 60 s) until a thread of the service waits in an open the kernel holds up
/// ([`support::stall::threads_in_open`]): its probe of the stalled disk has begun.
async fn wait_service_in_open(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while support::stall::threads_in_open(pid) == 0 {
        assert!(
            Instant::now() < deadline,
            "no thread of the service opened the disk"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits (at most 20 s) until the main thread of `pid` has exited (its state is Z): the
/// service ran its whole shutdown, though a thread of it still waits in the kernel.
async fn wait_main_thread_exited(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat
            .rsplit_once(") ")
            .is_some_and(|(_, r)| r.starts_with('Z'))
        {
            return;
        }
        assert!(Instant::now() < deadline, "mdpilot serve ignored SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The same as `loop_a_device_whose_open_never_completes_leaves_every_other_call_answered`,
/// with a real disk that stopped answering instead of the failpoint: a loop device over a FUSE
/// file whose reads wait, so that the kernel holds every open of it in `bdev_open`
/// ([`support::stall`]). StartWipe's probe waits in that open (D state, which no signal ends);
/// every read is still answered within 100 ms, the changes within their own bound, and
/// WipeCandidates names the disk as not answering. SIGTERM runs the whole shutdown at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_fuse_a_disk_whose_open_blocks_leaves_every_other_call_answered() {
    need_root!();
    let _one = ONE_STALLED_DISK.lock().await;
    let Some(bus) = Bus::start() else { return };
    let _polkit = FakePolkit::serve(&bus, true).await;
    let root = job_root();
    let mut svc = service(&bus, root.path(), &[]).await;
    // After the service: dropped before it, so a failing test lets the stuck open go before
    // the service is killed and waited for.
    let Some(mut disk) = StalledDisk::new(16 * MIB, 0xaa) else {
        return;
    };
    disk.block_opens();
    let c = bus.connect().await;
    let dev = disk.path.display().to_string();
    let d = dev.clone();
    let wipe = tokio::spawn(async move {
        let o = opts(&[("method", Value::from("zero"))]);
        call_manager(&c, "StartWipe", &(d, o)).await
    });
    wait_service_in_open(svc.pid()).await;
    let other = bus.connect().await;
    for prop in [
        "Version",
        "Leases",
        "SpeedLimitMax",
        "OriginalSpeedLimitMax",
    ] {
        timed(&format!("Get {prop}"), ANSWERED_WITHIN, async {
            get(&other, MANAGER_PATH, MANAGER_IFACE, prop).await
        })
        .await;
    }
    let id = timed("AcquirePriority", MUTATION_WITHIN, async {
        acquire(&other, &[("max", Value::U64(7000))]).await.unwrap()
    })
    .await;
    timed("ReleasePriority", MUTATION_WITHIN, async {
        call_manager(&other, "ReleasePriority", &(id,))
            .await
            .unwrap()
    })
    .await;
    // Its probe of the disk waits too, up to the per-device deadline (2 s).
    let list = timed("WipeCandidates", MUTATION_WITHIN, async {
        call_manager(&other, "WipeCandidates", &(opts(&[]),))
            .await
            .unwrap()
    })
    .await;
    let list: Vec<(String, bool, String)> = list.body().deserialize().unwrap();
    let mine = list.iter().find(|(d, _, _)| *d == dev);
    assert!(
        mine.is_some_and(|(_, ok, why)| !ok && why.contains("not answering")),
        "{mine:?}"
    );
    timed("Get Version", ANSWERED_WITHIN, async {
        get(&other, MANAGER_PATH, MANAGER_IFACE, "Version").await
    })
    .await;
    assert!(!wipe.is_finished(), "StartWipe went past the stuck open");
    // SIGTERM: the shutdown runs at once; the process ends when the kernel lets its last
    // thread out of the open.
    // SAFETY: signalling our own child.
    unsafe { libc::kill(svc.pid() as i32, libc::SIGTERM) };
    wait_main_thread_exited(svc.pid()).await;
    disk.release();
    let st = svc.term();
    assert!(st.success(), "{st}");
    wipe.abort();
    support::loopdev::run("blockdev", &["--flushbufs", &dev]);
    let data = std::fs::read(&disk.path).unwrap();
    assert!(data.iter().all(|&b| b == 0xaa), "nothing written");
}

/// The same as `loop_a_flood_of_wipe_candidates_does_not_delay_root`, with the FUSE-backed
/// disk whose opens the kernel holds up: 600 WipeCandidates calls from nobody leave one
/// probe waiting in the open, and root's AcquirePriority is answered meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_fuse_a_flood_of_wipe_candidates_does_not_delay_root() {
    need_root!("to switch to nobody");
    let _one = ONE_STALLED_DISK.lock().await;
    let Some(bus) = Bus::start() else { return };
    let _polkit = FakePolkit::serve(&bus, true).await;
    let root = job_root();
    let svc = service(&bus, root.path(), &[]).await;
    let Some(mut disk) = StalledDisk::new(16 * MIB, 0xaa) else {
        return;
    };
    disk.block_opens();
    let mut helper = spawn_helper(
        "dbus_calls::candidates_flood_helper",
        &[
            ("MDPILOT_TEST_BUS", &bus.address),
            ("MDPILOT_TEST_DEV", &disk.path.display().to_string()),
        ],
    );
    let mut out = helper.lines();
    loop {
        let l = tokio::time::timeout(Duration::from_secs(60), out.next_line())
            .await
            .expect("the helper did not send its calls")
            .unwrap()
            .expect("the helper ended early");
        if l == "SENT" {
            break;
        }
    }
    wait_service_in_open(svc.pid()).await;
    let c = bus.connect().await;
    let id = timed("root's AcquirePriority", Duration::from_secs(2), async {
        acquire(&c, &[("max", Value::U64(7000))]).await.unwrap()
    })
    .await;
    assert!(id.starts_with("dbus-"), "{id}");
    let mut rest = String::new();
    while let Ok(Some(l)) = tokio::time::timeout(Duration::from_secs(60), out.next_line())
        .await
        .expect("the helper did not end")
    {
        rest.push_str(&l);
        rest.push('\n');
    }
    // One probe of the stuck disk, whatever the number of calls.
    assert_eq!(
        support::stall::threads_in_open(svc.pid()),
        1,
        "threads of the service waiting in an open"
    );
    disk.release();
    let count = |key: &str| -> u32 {
        rest.lines()
            .filter_map(|l| l.strip_prefix(key))
            .filter_map(|l| l.trim().parse::<u32>().ok())
            .sum()
    };
    let busy = count("RESULT org.mdpilot.MdPilot1.Error.Busy ");
    let ok = count("RESULT success ");
    assert_eq!(busy + ok, 600, "{rest}");
    assert!(ok >= 6, "each connection got an answer: {rest}");
    assert!(
        count("NOT_ANSWERING ") >= 1,
        "the stuck disk is named: {rest}"
    );
    helper.wait().await;
}
