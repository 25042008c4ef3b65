//! `cargo bench --bench dbus_load`: a D-Bus load run against the real `mdpilot serve` on a
//! private `dbus-daemon` (bad input and load). Figures are printed; the end-state
//! checks make it exit non-zero.
//!
//! The service runs with `--root TMP` ([`support::tree::job_root`]: private `/proc` with the
//! kernel default speed limits 1000/200000 KiB/s and the state file; `/sys` and `/dev` are the
//! host's so loop devices can be wiped). 50 clients, each a tokio task with its own zbus
//! connection, run for `MDPILOT_LOAD_SECS` (default 60) after a warm-up of
//! `MDPILOT_LOAD_WARMUP_SECS` (default 10; calls in the warm-up are not counted):
//!
//! - 4 wipe clients (root only; otherwise "skipped:"): each owns one 2 GiB loop device over a
//!   sparse file, and loops `Manager.StartWipe` (method random, verified), a 0-30 ms pause,
//!   `Job.Cancel`, then waits for the job's `Completed`.
//! - 6 abrupt clients: connect, `AcquirePriority` (a bus-name lease), drop the connection
//!   without releasing; the service must release the lease when the name leaves the bus.
//! - 40 lease clients: `AcquirePriority` with a rotating option set (min/max, install policy,
//!   installer/admin kinds, named `holder`, `pid`, `duration`), then `ReleasePriority`; every
//!   tenth round a bad dictionary (min above max, unknown key) that must fail InvalidArgument.
//!
//! Afterwards: `mdpilot policy show --json --root TMP` parses and lists no lease,
//! `Manager.Leases` is empty, `speed_limit_min/max` are the originals, and the service's VmRSS
//! (`/proc/<pid>/status`) grew at most 2 MiB from the end of the warm-up to the end. Printed:
//! calls/s and p50/p99/max latency per method, error counts, RSS.
//!
//! A second scenario, [`metrics_flood`]: `mdpilot serve --sim --metrics` under the unit's
//! `LimitNOFILE=1024`, 8 lease clients for `MDPILOT_FLOOD_SECS` (default 20); from the 2nd
//! second a metrics connection flood of 2000 connections at the same time, held 10 s, then
//! closed. Printed: lease-call p50/p99/max and failures during the run; it fails when a lease
//! call fails or no scrape answers 200 after the flood. `MDPILOT_LOAD_SCENARIO=metrics_flood`
//! runs it alone.
//!
//! A third scenario, [`auth_disconnects`]: 50 clients on `serve --sim` with a polkit
//! stand-in that decides for 2 s; 10 of them (run as nobody) disconnect mid-authorization over
//! and over, 40 take and release leases. The 40 first run alone for `MDPILOT_AUTH_SECS`
//! (default 20), then as long again beside the 10. It fails when a call of the 40 fails or a
//! lease is left; printed side by side: the 40's lease-call p50/p99/max alone and with the
//! leavers, the ratio of the two p99s, and the abandoned authorizations. 40 closed-loop
//! clients keep the service saturated, so their latency is their queue (Little's law: 40
//! calls in flight / calls per second); the ratio is what shows the leavers' cost. `MDPILOT_LOAD_SCENARIO=auth_disconnects` runs it alone (`load` runs the
//! first alone).
//!
//! A fourth scenario, [`wipe_probes`] (root only: loop devices): `mdpilot serve --root TMP`,
//! 4 lease clients for `MDPILOT_PROBE_SECS` (default 10) alone, then as long again while 8
//! clients each loop `StartWipe` (zero) on its own loop device, `Job.Cancel` at once, and wait
//! for `Completed`: every StartWipe probes and plans its device (stat, ioctls, sysfs, mountinfo,
//! every `/dev/disk/by-id` link). Printed side by side: lease-call p50/p99 alone and during the
//! probes, and the StartWipe latencies; the goal is a lease-call p99 under 50 ms during the
//! probes. It fails when a lease call fails. `MDPILOT_LOAD_SCENARIO=wipe_probes` runs it alone.
//!
//! Under `cargo test --all-targets` (no `--bench` argument) it does nothing.

// A bench uses a part of the integration tests' helpers.
#[allow(dead_code, unused_imports, unused_macros)]
#[path = "../tests/it/support/mod.rs"]
mod support;

use futures_util::StreamExt;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::bus::{acquire, call, call_manager, error_name, job_iface, jobs_path, leases, opts};
use support::{Bus, LoopDev, Service, MIB};
use zbus::zvariant::{OwnedObjectPath, Value};

const CLIENTS: usize = 50;
const WIPE_CLIENTS: usize = 4;
const ABRUPT_CLIENTS: usize = 6;
const RSS_LIMIT_KIB: i64 = 2048;

/// Per method: latencies (µs) of the counted calls and error name -> count.
#[derive(Default)]
struct Stats {
    lat: BTreeMap<&'static str, Vec<u64>>,
    errors: BTreeMap<(&'static str, String), u64>,
    /// Errors the scenario does not expect (they fail the run).
    unexpected: Vec<String>,
}

impl Stats {
    fn merge(&mut self, o: Stats) {
        for (k, v) in o.lat {
            self.lat.entry(k).or_default().extend(v);
        }
        for (k, v) in o.errors {
            *self.errors.entry(k).or_default() += v;
        }
        self.unexpected.extend(o.unexpected);
    }
}

/// The shared clock of one run: calls before `counted_from` are warm-up.
#[derive(Clone, Copy)]
struct Clock {
    counted_from: Instant,
    until: Instant,
}

/// Times `f`; records the latency (after the warm-up) and the error name; `expected` lists
/// the error names that are part of the scenario.
async fn timed<T>(
    st: &mut Stats,
    clock: Clock,
    method: &'static str,
    expected: &[&str],
    f: impl std::future::Future<Output = zbus::Result<T>>,
) -> Option<T> {
    let t0 = Instant::now();
    let r = f.await;
    let us = t0.elapsed().as_micros() as u64;
    let counted = t0 >= clock.counted_from;
    if counted {
        st.lat.entry(method).or_default().push(us);
    }
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            let name = error_name::<()>(Err(e));
            if !expected.iter().any(|x| name.ends_with(x)) {
                st.unexpected.push(format!("{method}: {name}"));
            }
            if counted {
                *st.errors.entry((method, name)).or_default() += 1;
            }
            None
        }
    }
}

/// The option set of round `i` of lease client `c`.
fn lease_options(c: usize, i: u64) -> Vec<(&'static str, Value<'static>)> {
    match i % 7 {
        0 => vec![
            ("min", Value::U64(10_000 + c as u64)),
            ("max", Value::U64(150_000)),
        ],
        1 => vec![],
        2 => vec![("kind", Value::from("installer")), ("min", Value::U64(0))],
        3 => vec![
            ("kind", Value::from("admin")),
            ("max", Value::U64(50_000 + i % 1000)),
        ],
        4 => vec![
            ("holder", Value::from(format!("load-{c}"))),
            ("kind", Value::from("installer")),
        ],
        5 => vec![
            ("pid", Value::U32(std::process::id())),
            ("min", Value::U64(500)),
        ],
        _ => vec![("duration", Value::U64(3600)), ("max", Value::U64(0))],
    }
}

async fn lease_client(addr: String, c: usize, clock: Clock) -> Stats {
    let mut st = Stats::default();
    let conn = support::bus::connect_to(&addr).await;
    let mut i = c as u64;
    while Instant::now() < clock.until {
        i += 1;
        if i % 10 == 0 {
            let bad = if i % 20 == 0 {
                vec![("min", Value::U64(9)), ("max", Value::U64(1))]
            } else {
                vec![("speed", Value::U64(1))]
            };
            if timed(
                &mut st,
                clock,
                "AcquirePriority(bad)",
                &["InvalidArgument"],
                acquire(&conn, &bad),
            )
            .await
            .is_some()
            {
                st.unexpected.push("AcquirePriority(bad): accepted".into());
            }
            continue;
        }
        let o = lease_options(c, i);
        let Some(id) = timed(&mut st, clock, "AcquirePriority", &[], acquire(&conn, &o)).await
        else {
            continue;
        };
        let body = (id.as_str(),);
        let f = call_manager(&conn, "ReleasePriority", &body);
        timed(&mut st, clock, "ReleasePriority", &[], f).await;
    }
    st
}

async fn abrupt_client(addr: String, clock: Clock) -> Stats {
    let mut st = Stats::default();
    let mut n = 0u64;
    while Instant::now() < clock.until {
        let conn = support::bus::connect_to(&addr).await;
        let o = [("min", Value::U64(100 + n % 100))];
        timed(
            &mut st,
            clock,
            "AcquirePriority(abrupt)",
            &[],
            acquire(&conn, &o),
        )
        .await;
        // Gone with the lease held: the service sees NameOwnerChanged and drops it.
        drop(conn);
        n += 1;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    st
}

async fn wipe_client(addr: String, dev: PathBuf, c: usize, clock: Clock) -> Stats {
    let mut st = Stats::default();
    let conn = support::bus::connect_to(&addr).await;
    let rule = zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .member("Completed")
        .unwrap()
        .path_namespace(jobs_path())
        .unwrap()
        .build();
    let mut sig = zbus::MessageStream::for_match_rule(rule, &conn, Some(1024))
        .await
        .unwrap();
    let mut i = c as u64;
    while Instant::now() < clock.until {
        i += 1;
        // Random data, verified (a zero wipe of a loop device is a hole punch that beats any
        // Cancel): 2 GiB takes long enough that the Cancel, queued behind the lease clients'
        // calls, lands while the job runs.
        let o = opts(&[
            ("method", Value::from("random")),
            ("verify", Value::from(true)),
        ]);
        let f = async {
            call_manager(&conn, "StartWipe", &(dev.to_str().unwrap(), o))
                .await?
                .body()
                .deserialize::<OwnedObjectPath>()
        };
        // Busy: the previous job on this device is still releasing it.
        let Some(job) = timed(&mut st, clock, "StartWipe", &["Busy"], f).await else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        tokio::time::sleep(Duration::from_millis(i * 7 % 31)).await;
        let body = (opts(&[]),);
        let f = call(&conn, job.as_str(), job_iface(), "Cancel", &body);
        // Failed: the job had already finished (a wipe can still beat the call).
        timed(&mut st, clock, "Job.Cancel", &["Failed", "Cancelled"], f).await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            match tokio::time::timeout_at(deadline, sig.next()).await {
                Ok(Some(Ok(m))) if m.header().path().map(|p| p.as_str()) == Some(job.as_str()) => {
                    break
                }
                Ok(Some(_)) => {}
                _ => {
                    st.unexpected.push(format!("no Completed from {job}"));
                    break;
                }
            }
        }
    }
    st
}

fn rss_kib(pid: u32) -> i64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

fn limits(root: &Path) -> (String, String) {
    let r = |f: &str| {
        std::fs::read_to_string(root.join("proc/sys/dev/raid").join(f))
            .unwrap()
            .trim()
            .to_string()
    };
    (r("speed_limit_min"), r("speed_limit_max"))
}

fn secs(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn pct(sorted: &[u64], p: usize) -> u64 {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}
/// Prints the latencies per method, the totals and the errors of `st` over `dur`.
fn report(st: &mut Stats, wipe: usize, dur: Duration, warm: Duration, drain: Duration) {
    println!(
        "dbus_load: {CLIENTS} clients ({} wipe, {ABRUPT_CLIENTS} abrupt, {} lease) for {} s after {} s warm-up",
        wipe,
        CLIENTS - wipe - ABRUPT_CLIENTS,
        dur.as_secs(),
        warm.as_secs()
    );
    let mut total = 0;
    for (m, v) in &mut st.lat {
        v.sort_unstable();
        total += v.len();
        println!(
            "  {m:<24} calls={:>7} {:>8.1}/s p50={:>6} us p99={:>7} us max={:>8} us",
            v.len(),
            v.len() as f64 / dur.as_secs_f64(),
            pct(v, 50),
            pct(v, 99),
            v[v.len() - 1]
        );
    }
    println!(
        "  all                      calls={total:>7} {:>8.1}/s (last calls done {:.2} s after the end)",
        total as f64 / dur.as_secs_f64(),
        drain.as_secs_f64()
    );
    for ((m, e), n) in &st.errors {
        println!("  error {m}: {e} x{n}");
    }
}

/// Waits (at most 15 s) for every lease to go (abrupt owners are released on
/// NameOwnerChanged); a failure when some are left.
async fn leases_gone(conn: &zbus::Connection, failed: &mut Vec<String>) {
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut left = leases(conn).await;
    while !left.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        left = leases(conn).await;
    }
    if !left.is_empty() {
        failed.push(format!("{} leases left: {left:?}", left.len()));
    }
}

/// `mdpilot policy show --json` on `root` parses and lists no lease, and the state file (when
/// the policy left one) parses as TOML; failures go to `failed`.
fn policy_show_clean(root: &Path, failed: &mut Vec<String>) {
    let out = std::process::Command::new(support::BIN)
        .args(["policy", "show", "--json", "--root"])
        .arg(root)
        .output()
        .unwrap();
    match serde_json::from_slice::<serde_json::Value>(&out.stdout) {
        Ok(v) if out.status.success() => {
            let n = v["leases"].as_array().map_or(0, |a| a.len());
            println!("  policy show --json: parses, {n} leases");
            // The state file itself (TOML) parses too, when the policy left one.
            let state = PathBuf::from(v["state_path"].as_str().unwrap_or_default());
            match std::fs::read_to_string(&state) {
                Ok(text) => match text.parse::<toml::Table>() {
                    Ok(_) => println!("  state file {}: parses", state.display()),
                    Err(e) => failed.push(format!("state file {}: {e}", state.display())),
                },
                Err(e) => println!("  state file {}: {e} (no state kept)", state.display()),
            }
            if n != 0 {
                failed.push(format!("policy show lists {n} leases: {v}"));
            }
        }
        r => failed.push(format!(
            "policy show --json: {} {r:?} {}",
            out.status,
            support::stderr(&out)
        )),
    }
}

async fn run() -> Vec<String> {
    let mut failed = Vec::new();
    let Some(bus) = Bus::start() else {
        return failed;
    };
    let root = support::tree::job_root();
    let original = limits(root.path());
    // Finished job objects leave the bus after 2 s (not 30 s), so the run reaches a steady state.
    let svc = Service::on_root(&bus, root.path(), &[("MDPILOT_JOB_LINGER_MS", "2000")]).await;
    let pid = svc.pid();
    let loops: Vec<LoopDev> = if support::is_root() {
        (0..WIPE_CLIENTS)
            .map(|_| LoopDev::new(2048 * MIB))
            .collect()
    } else {
        support::skipped("wipe clients need root for loop devices; lease clients only");
        Vec::new()
    };
    let warm = Duration::from_secs(secs("MDPILOT_LOAD_WARMUP_SECS", 10));
    let dur = Duration::from_secs(secs("MDPILOT_LOAD_SECS", 60));
    let start = Instant::now();
    let clock = Clock {
        counted_from: start + warm,
        until: start + warm + dur,
    };
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let addr = bus.address.clone();
        let t = if c < loops.len() {
            tokio::spawn(wipe_client(addr, loops[c].path.clone(), c, clock))
        } else if c < WIPE_CLIENTS + ABRUPT_CLIENTS {
            tokio::spawn(abrupt_client(addr, clock))
        } else {
            tokio::spawn(lease_client(addr, c, clock))
        };
        tasks.push(t);
    }
    tokio::time::sleep_until(clock.counted_from.into()).await;
    let rss_warm = rss_kib(pid);
    let mut st = Stats::default();
    for t in tasks {
        st.merge(t.await.unwrap());
    }
    let drain = clock.until.elapsed();
    report(&mut st, loops.len(), dur, warm, drain);
    if !st.unexpected.is_empty() {
        let mut u = st.unexpected.clone();
        u.sort();
        u.dedup();
        failed.push(format!("{} unexpected results: {u:?}", st.unexpected.len()));
    }

    // End state: every lease gone (abrupt owners are released on NameOwnerChanged), finished jobs
    // removed after their linger.
    let conn = bus.connect().await;
    leases_gone(&conn, &mut failed).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss_end = rss_kib(pid);
    let grew = rss_end - rss_warm;
    println!("  RSS: after warm-up {rss_warm} KiB, at the end {rss_end} KiB, grew {grew} KiB (limit {RSS_LIMIT_KIB})");
    if grew > RSS_LIMIT_KIB {
        failed.push(format!("RSS grew {grew} KiB > {RSS_LIMIT_KIB} KiB"));
    }
    let now = limits(root.path());
    println!("  limits: original {original:?}, at the end {now:?}");
    if now != original {
        failed.push(format!("limits {now:?} are not the originals {original:?}"));
    }
    policy_show_clean(root.path(), &mut failed);
    drop(conn);
    drop(svc);
    drop(loops);
    failed
}

/// Sets this process's soft `RLIMIT_NOFILE` (capped by the hard one); returns the hard one.
fn set_nofile(soft: u64) -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit on a local struct.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) };
    r.rlim_cur = soft.min(r.rlim_max);
    // SAFETY: as above.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) };
    r.rlim_max
}

/// One `GET /metrics` with `Connection: close`: true on a 200.
fn scrape_ok(addr: std::net::SocketAddr) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let req = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let mut raw = Vec::new();
    s.write_all(req.as_bytes()).is_ok()
        && s.read_to_end(&mut raw).is_ok()
        && raw.starts_with(b"HTTP/1.1 200")
}

/// Opens `n` connections at the same time to the metrics listener at `addr` (3 s each to
/// connect), holds them 10 s and closes them; returns how many completed the handshake.
async fn flood(addr: std::net::SocketAddr, n: usize) -> usize {
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..n {
        set.spawn(async move {
            tokio::time::timeout(Duration::from_secs(3), tokio::net::TcpStream::connect(addr))
                .await
                .ok()
                .and_then(Result::ok)
        });
    }
    let mut open = Vec::new();
    while let Some(r) = set.join_next().await {
        open.extend(r.ok().flatten());
    }
    let connected = open.len();
    tokio::time::sleep(Duration::from_secs(10)).await;
    drop(open);
    connected
}

/// Whether a scrape of `addr` answers 200 within 30 s (tried every 200 ms).
async fn scrape_within_30s(addr: std::net::SocketAddr) -> bool {
    tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if scrape_ok(addr) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        false
    })
    .await
    .unwrap()
}

/// The metrics connection flood scenario (see the module docs): lease calls keep working
/// while 2000 connections at the same time are open on the metrics listener.
async fn metrics_flood() -> Vec<String> {
    const FLOOD: usize = 2000;
    const LEASE_CLIENTS: usize = 8;
    let mut failed = Vec::new();
    let Some(bus) = Bus::start() else {
        return failed;
    };
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap();
    let hard = set_nofile(1024);
    let svc = Service::start(&bus, &["--sim", "--metrics", &addr.to_string()], &[]).await;
    set_nofile(hard.min(8192));
    let dur = Duration::from_secs(secs("MDPILOT_FLOOD_SECS", 20));
    let start = Instant::now();
    let clock = Clock {
        counted_from: start,
        until: start + dur,
    };
    let tasks: Vec<_> = (0..LEASE_CLIENTS)
        .map(|c| tokio::spawn(lease_client(bus.address.clone(), c, clock)))
        .collect();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let connected = flood(addr, FLOOD).await;
    let mut st = Stats::default();
    for t in tasks {
        st.merge(t.await.unwrap());
    }
    let scraped = scrape_within_30s(addr).await;
    println!(
        "metrics_flood: {LEASE_CLIENTS} lease clients for {} s, {FLOOD} metrics connections at once ({connected} completed the handshake), held 10 s",
        dur.as_secs()
    );
    for (m, v) in &mut st.lat {
        v.sort_unstable();
        println!(
            "  {m:<24} calls={:>7} p50={:>6} us p99={:>7} us max={:>8} us",
            v.len(),
            pct(v, 50),
            pct(v, 99),
            v[v.len() - 1]
        );
    }
    let errors: u64 = st.errors.values().sum();
    println!("  lease-call failures: {}", st.unexpected.len());
    println!(
        "  scrape after the flood: {}",
        if scraped { "200" } else { "none" }
    );
    if !st.unexpected.is_empty() {
        failed.push(format!(
            "metrics flood: {} lease calls failed ({errors} errors): {:?}",
            st.unexpected.len(),
            &st.unexpected[..st.unexpected.len().min(5)]
        ));
    }
    if !scraped {
        failed.push("metrics flood: no scrape answered after the flood".into());
    }
    drop(svc);
    failed
}

/// How long the fake polkit of [`auth_disconnects`] decides (an admin typing a password).
const AUTH_DELAY: Duration = Duration::from_secs(2);

/// A child of [`auth_disconnects`], run as nobody with `MDPILOT_LOAD_AUTH_CHILD=<bus address>`:
/// until `MDPILOT_LOAD_AUTH_UNTIL_MS` (ms from its start), connects, sends `AcquirePriority`
/// (polkit is asked: nobody is not root), and drops the connection while polkit decides.
/// Prints how many it left mid-authorization.
fn auth_child(addr: &str) {
    let ms: u64 = std::env::var("MDPILOT_LOAD_AUTH_UNTIL_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let left = rt.block_on(async {
        let until = Instant::now() + Duration::from_millis(ms);
        let mut left = 0u64;
        while Instant::now() < until {
            let conn = support::bus::connect_to(addr).await;
            let call = acquire(&conn, &[("max", Value::U64(0))]);
            // Gone well before polkit answers.
            let _ = tokio::time::timeout(AUTH_DELAY / 4, call).await;
            drop(conn);
            left += 1;
        }
        left
    });
    println!("LEFT {left}");
}

/// Starts `n` copies of this bench as nobody, each a leaving client on the bus at `address`
/// for `dur` (killed on drop).
fn spawn_leavers(address: &str, dur: Duration, n: usize) -> Vec<tokio::process::Child> {
    (0..n)
        .map(|_| {
            let mut cmd = support::as_nobody(std::env::current_exe().unwrap());
            cmd.env("MDPILOT_LOAD_AUTH_CHILD", address)
                .env("MDPILOT_LOAD_AUTH_UNTIL_MS", dur.as_millis().to_string())
                .stdout(std::process::Stdio::piped());
            tokio::process::Command::from(cmd)
                .kill_on_drop(true)
                .spawn()
                .expect("setpriv")
        })
        .collect()
}

/// The leaving-callers scenario: 50 clients on `mdpilot serve --sim` with a polkit stand-in
/// that decides for [`AUTH_DELAY`]; 10 of them (children run as nobody, so polkit is asked)
/// connect, call `AcquirePriority` and disconnect while polkit decides, over and over, for
/// `MDPILOT_AUTH_SECS` (default 20); the other 40 (root: no polkit) take and release leases.
/// Fails when a call of the 40 fails or a lease is left afterwards. Printed: the 40's lease
/// calls p50/p99/max (goal: p99 under 50 ms), how many authorizations were abandoned and how
/// many questions the service withdrew. Needs root (otherwise "skipped:").
/// `MDPILOT_LOAD_SCENARIO=auth_disconnects` runs it alone.
async fn auth_disconnects() -> Vec<String> {
    const LEAVERS: usize = 10;
    let mut failed = Vec::new();
    if !support::is_root() {
        println!("skipped: auth_disconnects needs root to run the leaving clients as nobody");
        return failed;
    }
    let Some(bus) = Bus::start() else {
        return failed;
    };
    let polkit = support::FakePolkit::serve_with(
        &bus,
        support::Behaviour {
            allow: true,
            delay: AUTH_DELAY,
            on_ask: None,
        },
    )
    .await;
    let svc = Service::start(
        &bus,
        &["--sim"],
        &[("DBUS_SYSTEM_BUS_ADDRESS", bus.address.as_str())],
    )
    .await;
    let dur = Duration::from_secs(secs("MDPILOT_AUTH_SECS", 20));
    // The 40 alone first, as long again: the baseline the leavers are compared with.
    let mut alone = lease_round(&bus.address, dur).await;
    let leavers = spawn_leavers(&bus.address, dur, LEAVERS);
    let mut st = lease_round(&bus.address, dur).await;
    let mut abandoned = 0u64;
    for l in leavers {
        let out = l.wait_with_output().await.unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        abandoned += text
            .lines()
            .filter_map(|l| l.strip_prefix("LEFT ")?.parse::<u64>().ok())
            .sum::<u64>();
    }
    // Every pending question has been answered (late) or withdrawn by now.
    tokio::time::sleep(AUTH_DELAY + Duration::from_secs(1)).await;
    let watcher = bus.connect().await;
    let left = leases(&watcher).await;
    auth_report(
        &mut alone,
        &mut st,
        abandoned,
        polkit.asked().len(),
        polkit.cancelled().len(),
    );
    st.unexpected.append(&mut alone.unexpected);
    if !st.unexpected.is_empty() {
        failed.push(format!(
            "auth_disconnects: {} calls of the 40 failed: {:?}",
            st.unexpected.len(),
            &st.unexpected[..st.unexpected.len().min(5)]
        ));
    }
    if !left.is_empty() {
        failed.push(format!("auth_disconnects: leases left: {left:?}"));
    }
    drop(svc);
    failed
}

/// The 40 lease clients of [`auth_disconnects`] for `dur` (the first second not counted).
async fn lease_round(addr: &str, dur: Duration) -> Stats {
    let start = Instant::now();
    let clock = Clock {
        counted_from: start + Duration::from_secs(1),
        until: start + dur,
    };
    let tasks: Vec<_> = (0..CLIENTS - 10)
        .map(|c| tokio::spawn(lease_client(addr.to_string(), c, clock)))
        .collect();
    let mut st = Stats::default();
    for t in tasks {
        st.merge(t.await.unwrap());
    }
    st
}

/// Prints [`auth_disconnects`]'s figures: the 40 alone, then beside the 10 leaving clients.
fn auth_report(alone: &mut Stats, st: &mut Stats, abandoned: u64, asked: usize, withdrawn: usize) {
    println!(
        "auth_disconnects: {} lease clients alone, then with 10 leaving mid-authorization (polkit decides {} ms)",
        CLIENTS - 10,
        AUTH_DELAY.as_millis()
    );
    for (phase, st) in [("alone", &mut *alone), ("10 leaving", &mut *st)] {
        for (m, v) in &mut st.lat {
            v.sort_unstable();
            println!(
                "  {:<36} calls={:>7} p50={:>6} us p99={:>7} us max={:>8} us",
                format!("{m}, {phase}"),
                v.len(),
                pct(v, 50),
                pct(v, 99),
                v[v.len() - 1]
            );
        }
    }
    let p99 = |st: &mut Stats| {
        let mut all: Vec<u64> = st
            .lat
            .iter()
            .filter(|(m, _)| !m.contains("bad"))
            .flat_map(|(_, v)| v.iter().copied())
            .collect();
        all.sort_unstable();
        pct(&all, 99)
    };
    let (a, b) = (p99(alone), p99(st));
    println!(
        "  lease-call p99 with the leavers / alone: {:.2}x ({b} us / {a} us)",
        b as f64 / a.max(1) as f64
    );
    println!("  calls of the 40 failed: {}", st.unexpected.len());
    println!(
        "  authorizations abandoned: {abandoned}; polkit asked {asked}, questions withdrawn {withdrawn}"
    );
}

const PROBE_LEASE_CLIENTS: usize = 4;
const PROBE_CLIENTS: usize = 8;
const PROBE_GOAL_P99_US: u64 = 50_000;

/// One StartWipe client of [`wipe_probes`]: `StartWipe` (zero) on `dev`, `Job.Cancel` at once,
/// then its `Completed`, until `clock.until`.
async fn probe_client(addr: String, dev: PathBuf, clock: Clock) -> Stats {
    let mut st = Stats::default();
    let conn = support::bus::connect_to(&addr).await;
    let rule = zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .member("Completed")
        .unwrap()
        .path_namespace(jobs_path())
        .unwrap()
        .build();
    let mut sig = zbus::MessageStream::for_match_rule(rule, &conn, Some(1024))
        .await
        .unwrap();
    while Instant::now() < clock.until {
        let o = opts(&[("method", Value::from("zero"))]);
        let f = async {
            call_manager(&conn, "StartWipe", &(dev.to_str().unwrap(), o))
                .await?
                .body()
                .deserialize::<OwnedObjectPath>()
        };
        // Busy: the previous job on this device is still releasing it.
        let Some(job) = timed(&mut st, clock, "StartWipe", &["Busy"], f).await else {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        let body = (opts(&[]),);
        let f = call(&conn, job.as_str(), job_iface(), "Cancel", &body);
        timed(&mut st, clock, "Job.Cancel", &["Failed", "Cancelled"], f).await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            match tokio::time::timeout_at(deadline, sig.next()).await {
                Ok(Some(Ok(m))) if m.header().path().map(|p| p.as_str()) == Some(job.as_str()) => {
                    break
                }
                Ok(Some(_)) => {}
                _ => {
                    st.unexpected.push(format!("no Completed from {job}"));
                    break;
                }
            }
        }
    }
    st
}

/// One phase of [`wipe_probes`]: the lease clients (and, with `devices`, one probe client per
/// device) for `dur` after a 1 s warm-up. Returns the lease clients' and the probe clients'
/// stats.
async fn probe_phase(addr: &str, devices: &[PathBuf], dur: Duration) -> (Stats, Stats) {
    let start = Instant::now();
    let clock = Clock {
        counted_from: start + Duration::from_secs(1),
        until: start + Duration::from_secs(1) + dur,
    };
    let leases: Vec<_> = (0..PROBE_LEASE_CLIENTS)
        .map(|c| tokio::spawn(lease_client(addr.to_string(), c, clock)))
        .collect();
    let probes: Vec<_> = devices
        .iter()
        .map(|d| tokio::spawn(probe_client(addr.to_string(), d.clone(), clock)))
        .collect();
    let (mut l, mut p) = (Stats::default(), Stats::default());
    for t in leases {
        l.merge(t.await.unwrap());
    }
    for t in probes {
        p.merge(t.await.unwrap());
    }
    (l, p)
}

/// The lease calls' latencies (µs, sorted) of `st`: AcquirePriority and ReleasePriority.
fn lease_latencies(st: &Stats) -> Vec<u64> {
    let mut v: Vec<u64> = ["AcquirePriority", "ReleasePriority"]
        .iter()
        .filter_map(|m| st.lat.get(m))
        .flatten()
        .copied()
        .collect();
    v.sort_unstable();
    v
}

/// Lease calls alone, then while 8 StartWipe calls probe at once: p50/p99 side by side.
async fn wipe_probes() -> Vec<String> {
    let mut failed = Vec::new();
    if !support::is_root() {
        support::skipped("wipe_probes needs root for loop devices");
        return failed;
    }
    let Some(bus) = Bus::start() else {
        return failed;
    };
    let root = support::tree::job_root();
    let svc = Service::on_root(&bus, root.path(), &[("MDPILOT_JOB_LINGER_MS", "200")]).await;
    let loops: Vec<LoopDev> = (0..PROBE_CLIENTS).map(|_| LoopDev::new(64 * MIB)).collect();
    let devices: Vec<PathBuf> = loops.iter().map(|l| l.path.clone()).collect();
    let dur = Duration::from_secs(secs("MDPILOT_PROBE_SECS", 10));
    let (alone, _) = probe_phase(&bus.address, &[], dur).await;
    let (busy, probes) = probe_phase(&bus.address, &devices, dur).await;
    let (a, b) = (lease_latencies(&alone), lease_latencies(&busy));
    println!(
        "wipe_probes: {PROBE_LEASE_CLIENTS} lease clients, {} s alone then {} s with {PROBE_CLIENTS} StartWipe clients probing",
        dur.as_secs(),
        dur.as_secs()
    );
    for (what, v) in [("lease calls alone", &a), ("lease calls, 8 probing", &b)] {
        if v.is_empty() {
            failed.push(format!("wipe_probes: no {what}"));
            continue;
        }
        println!(
            "  {what:<24} calls={:>7} p50={:>6} us p99={:>7} us max={:>8} us",
            v.len(),
            pct(v, 50),
            pct(v, 99),
            v[v.len() - 1]
        );
    }
    for (m, v) in &probes.lat {
        let mut v = v.clone();
        v.sort_unstable();
        println!(
            "  {m:<24} calls={:>7} p50={:>6} us p99={:>7} us max={:>8} us",
            v.len(),
            pct(&v, 50),
            pct(&v, 99),
            v[v.len() - 1]
        );
    }
    if !b.is_empty() {
        let (pa, pb) = (pct(&a, 99).max(1), pct(&b, 99));
        println!(
            "  lease-call p99 during the probes / alone: {:.1}x; goal p99 < {} ms: {}",
            pb as f64 / pa as f64,
            PROBE_GOAL_P99_US / 1000,
            if pb < PROBE_GOAL_P99_US {
                "met"
            } else {
                "MISSED"
            }
        );
    }
    for st in [&alone, &busy, &probes] {
        if !st.unexpected.is_empty() {
            failed.push(format!(
                "wipe_probes: {} unexpected errors: {:?}",
                st.unexpected.len(),
                &st.unexpected[..st.unexpected.len().min(5)]
            ));
        }
    }
    drop(svc);
    drop(loops);
    failed
}

fn main() {
    if let Ok(addr) = std::env::var("MDPILOT_LOAD_AUTH_CHILD") {
        return auth_child(&addr);
    }
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // MDPILOT_LOAD_SCENARIO=metrics_flood (or auth_disconnects, wipe_probes) runs that scenario alone.
    let only = std::env::var("MDPILOT_LOAD_SCENARIO").ok();
    let wanted = |name: &str| only.as_deref().map_or(true, |o| o == name);
    let mut failed = Vec::new();
    if wanted("load") {
        failed.extend(rt.block_on(run()));
    }
    if wanted("metrics_flood") {
        failed.extend(rt.block_on(metrics_flood()));
    }
    if wanted("auth_disconnects") {
        failed.extend(rt.block_on(auth_disconnects()));
    }
    // Root and loop devices: only when named.
    if only.as_deref() == Some("wipe_probes") {
        failed.extend(rt.block_on(wipe_probes()));
    }
    for f in &failed {
        println!("FAILED: {f}");
    }
    if !failed.is_empty() {
        std::process::exit(1);
    }
    println!("dbus_load: all checks passed");
}
