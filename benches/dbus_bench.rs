//! `cargo bench --bench dbus_bench`: figures for `mdpilot serve` (printed, not asserted).
//!
//! 1. Latency from a simulator change to a client receiving PropertiesChanged: the simulator
//!    (`MDPILOT_SIM_TRACE`) logs CLOCK_MONOTONIC when it writes each step; the client logs
//!    CLOCK_MONOTONIC when the signal carrying that step's SyncCompletedSectors arrives. Median
//!    and p99 over 100 changes (simulator step 20 ms).
//! 2. Idle wake-ups: voluntary context switches of all the service's threads over 10 s, with no
//!    sync running (no progress timer), from /proc/PID/task/*/status.
//! 3. Idle RSS (VmRSS).
//!
//! Under `cargo test --all-targets` (no `--bench` argument) it does nothing.

// A bench uses a part of the integration tests' helpers.
#[allow(dead_code, unused_imports, unused_macros)]
#[path = "../tests/it/support/mod.rs"]
mod support;

use futures_util::StreamExt;
use std::collections::HashMap;
use std::time::Duration;
use support::{Bus, Service};
use zbus::zvariant::OwnedValue;

/// Per thread id: (voluntary, nonvoluntary) context switches.
fn task_switches(pid: u32) -> HashMap<String, (u64, u64)> {
    let mut out = HashMap::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let s = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        let (mut vol, mut nonvol) = (0, 0);
        for l in s.lines() {
            let n = |l: &str| l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap();
            if l.starts_with("voluntary_ctxt_switches") {
                vol = n(l);
            } else if l.starts_with("nonvoluntary_ctxt_switches") {
                nonvol = n(l);
            }
        }
        out.insert(t.file_name().to_string_lossy().into_owned(), (vol, nonvol));
    }
    out
}

type Switches = HashMap<String, (u64, u64)>;

/// Switches between two samples; threads that appeared count in full; threads that ended are
/// reported (their switches after the first sample are lost).
fn switches_between(a: &Switches, b: &Switches) -> (u64, u64, usize) {
    let mut v = 0;
    let mut n = 0;
    for (tid, (bv, bn)) in b {
        let (av, an) = a.get(tid).copied().unwrap_or((0, 0));
        v += bv - av;
        n += bn - an;
    }
    let ended = a.keys().filter(|t| !b.contains_key(*t)).count();
    (v, n, ended)
}

fn status_field(pid: u32, key: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find(|l| l.starts_with(key))
        .map(|l| l[key.len()..].trim().to_string())
        .unwrap_or_default()
}

async fn latency() {
    let bus = Bus::start().expect("dbus-daemon");
    let trace = tempfile::NamedTempFile::new().unwrap();
    let tp = trace.path().to_str().unwrap().to_string();
    let _svc = Service::start(
        &bus,
        &["--sim"],
        &[("MDPILOT_SIM_TICK_MS", "20"), ("MDPILOT_SIM_TRACE", &tp)],
    )
    .await;
    let conn = bus.connect().await;
    let rule = zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .member("PropertiesChanged")
        .unwrap()
        .path(support::bus::sim_array_path("md1"))
        .unwrap()
        .build();
    let mut stream = zbus::MessageStream::for_match_rule(rule, &conn, None)
        .await
        .unwrap();
    let mut got: Vec<(u64, u64)> = Vec::new();
    while got.len() < 110 {
        let msg = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("signal")
            .unwrap()
            .unwrap();
        let now = mdpilot::sim::monotonic_ns();
        let (_, changed, _): (String, HashMap<String, OwnedValue>, Vec<String>) =
            msg.body().deserialize().unwrap();
        if let Some(v) = changed.get("SyncCompletedSectors") {
            got.push((u64::try_from(v.try_clone().unwrap()).unwrap(), now));
        }
    }
    let text = std::fs::read_to_string(trace.path()).unwrap();
    let written: HashMap<u64, u64> = text
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let ns = w.next()?.parse().ok()?;
            (w.next()? == "md1").then_some(())?;
            Some((w.next()?.parse().ok()?, ns))
        })
        .collect();
    // Skip the first 10 (start-up), keep 100.
    let mut lat_us: Vec<f64> = got[10..]
        .iter()
        .filter_map(|(sectors, recv)| written.get(sectors).map(|w| (recv - w) as f64 / 1000.0))
        .collect();
    lat_us.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = lat_us.len();
    println!(
        "latency sim change -> PropertiesChanged: n={n} median={:.0} us p99={:.0} us max={:.0} us",
        lat_us[n / 2],
        lat_us[(n * 99 / 100).min(n - 1)],
        lat_us[n - 1]
    );
}

async fn idle() {
    let bus = Bus::start().expect("dbus-daemon");
    let mut sim = mdpilot::sim::Sim::create().unwrap();
    // Finish the resync first: an idle system has no sync and so no progress timer.
    sim.step(Duration::from_secs(1_000_000)).unwrap();
    let root = sim.path().to_str().unwrap().to_string();
    let svc = Service::start(&bus, &["--root", &root], &[]).await;
    let pid = svc.pid();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let s0 = task_switches(pid);
    tokio::time::sleep(Duration::from_secs(10)).await;
    let s1 = task_switches(pid);
    let (v, n, ended) = switches_between(&s0, &s1);
    println!(
        "idle over 10 s: voluntary context switches={v} ({:.2}/s), nonvoluntary={n}, threads={} (ended during the window: {ended})",
        v as f64 / 10.0,
        s1.len()
    );
    println!(
        "idle RSS: VmRSS={} VmHWM={}",
        status_field(pid, "VmRSS:"),
        status_field(pid, "VmHWM:")
    );
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        latency().await;
        idle().await;
    });
}
