//! Crash loop: 100 runs that SIGKILL a real `mdpilot policy apply` at a random point (and, when
//! built with `--features failpoints`, abort it at failpoints between the state write and the
//! kernel writes), each followed by `mdpilot policy restore`. The originals must be back every
//! time, without a spurious "changed behind our back" warning. Prints the tally of where the
//! kills landed.
//!
//! A quarter of the runs also SIGKILL the first `restore` part-way before the final one.
//!
//! Run with failpoints too: `cargo test --features failpoints --test policy_crash -- --nocapture`.
//! `MDPILOT_CRASH_SEED=N` replays a run; `MDPILOT_CRASH_RUNS=N` changes the count.

mod support;

use rand_chacha::rand_core::{RngCore, SeedableRng};
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::FakeTree;

fn mdpilot(t: &FakeTree) -> Command {
    t.policy_cmd()
}

/// `mdpilot policy ARGS` with stdout discarded, waited for.
fn run_quiet(t: &FakeTree, args: &[&str]) -> std::process::ExitStatus {
    mdpilot(t)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .unwrap()
}

const SCENARIOS: [&[&str]; 3] = [
    &["apply"],
    &["apply", "--min", "0", "--max", "5000", "--holder", "admin"],
    &[
        "apply", "--array", "md0", "--min", "0", "--max", "10", "--holder", "wipe",
    ],
];

#[cfg(feature = "failpoints")]
const FAILPOINTS: [&str; 4] = [
    "policy-after-mid-save",
    "policy-after-first-write",
    "policy-before-end-save",
    "policy-after-end-save",
];

fn state_phase(t: &FakeTree) -> &'static str {
    match std::fs::read_to_string(t.state_path()) {
        Err(_) => "no state",
        Ok(s) if s.contains("pending") => "mid state",
        Ok(s) if s.contains("[[knob]]") => "end state",
        Ok(_) => "empty state",
    }
}

#[test]
fn crash_loop_restores_originals_every_time() {
    let runs: usize = std::env::var("MDPILOT_CRASH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let seed: u64 = std::env::var("MDPILOT_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("crash loop: {runs} runs, MDPILOT_CRASH_SEED={seed}");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let t = FakeTree::new();
    let started = Instant::now();

    // How long a complete apply takes (the fastest of a few, as the machine may be busy): kills
    // are spread over that window, so most land while the process is at work.
    let mut window = Duration::MAX;
    for _ in 0..4 {
        let s = Instant::now();
        assert!(run_quiet(&t, &["apply"]).success());
        window = window.min(s.elapsed());
        assert!(run_quiet(&t, &["restore"]).success());
        t.settle();
    }
    let window_us = (window.as_micros() as u64).max(1);
    eprintln!("crash loop: a full apply takes about {window:?}; killing within {window_us} us");

    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    for run in 0..runs {
        // A third of the runs start with another lease already live, so the killed apply works
        // on managed knobs.
        let pre = rng.next_u32() % 3 == 0;
        if pre {
            let st = run_quiet(
                &t,
                &["apply", "--array", "md0", "--max", "50", "--holder", "pre"],
            );
            assert!(st.success(), "run {run}: pre-lease failed");
        }
        let args = SCENARIOS[(rng.next_u32() as usize) % SCENARIOS.len()];
        let mut cmd = mdpilot(&t);
        cmd.args(args).stdout(Stdio::null()).stderr(Stdio::null());
        #[allow(unused_mut)]
        let mut failpoint: Option<&str> = None;
        #[cfg(feature = "failpoints")]
        if rng.next_u32() % 2 == 0 {
            let fp = FAILPOINTS[(rng.next_u32() as usize) % FAILPOINTS.len()];
            cmd.env("MDPILOT_FAILPOINT", fp);
            failpoint = Some(fp);
        }
        let mut child = cmd.spawn().unwrap();
        if failpoint.is_none() {
            std::thread::sleep(Duration::from_micros(rng.next_u64() % window_us));
            let _ = child.kill(); // SIGKILL; fails only when it already exited
        }
        let status = child.wait().unwrap();
        let outcome = match (status.code(), failpoint) {
            (Some(0), _) => "completed".to_string(),
            (Some(c), _) => panic!("run {run}: apply {args:?} failed with exit code {c}"),
            (None, Some(fp)) => format!("aborted at {fp}"),
            (None, None) => "killed".to_string(),
        };
        let key = format!(
            "{outcome}, {}{}",
            state_phase(&t),
            if pre { ", 2nd lease" } else { "" }
        );
        *tally.entry(key).or_default() += 1;

        // A quarter of the runs also kill the first restore part-way; the next one must finish.
        if rng.next_u32() % 4 == 0 {
            let mut child = mdpilot(&t)
                .arg("restore")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            std::thread::sleep(Duration::from_micros(rng.next_u64() % window_us));
            let _ = child.kill();
            let st = child.wait().unwrap();
            t.settle(); // the kernel shows a `system` write as `N (system)` at once
            let what = if st.success() { "completed" } else { "killed" };
            *tally
                .entry(format!("(then a restore {what}, {})", state_phase(&t)))
                .or_default() += 1;
        }

        let out = mdpilot(&t).args(["restore", "--json"]).output().unwrap();
        assert!(
            out.status.success(),
            "run {run} (seed {seed}): restore failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            v["leases"],
            serde_json::json!([]),
            "run {run} (seed {seed})"
        );
        assert_eq!(
            v["warnings"],
            serde_json::json!([]),
            "run {run} (seed {seed}): {outcome}"
        );
        t.settle();
        assert_eq!(
            (t.gmin(), t.gmax(), t.amin(), t.amax()),
            (
                "1000".to_string(),
                "200000".to_string(),
                "1000 (system)".to_string(),
                "200000 (system)".to_string()
            ),
            "run {run} (seed {seed}): {outcome} after {args:?}: originals not back"
        );
    }
    let leftovers: Vec<_> = t
        .state_dir_names()
        .into_iter()
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "stale temporary files: {leftovers:?}");
    let total: usize = tally
        .iter()
        .filter(|(k, _)| !k.starts_with('('))
        .map(|(_, n)| n)
        .sum();
    eprintln!(
        "crash loop tally ({total} runs, {:?}, originals back every time):",
        started.elapsed()
    );
    for (k, n) in &tally {
        eprintln!("  {n:4}  {k}");
    }
    assert_eq!(total, runs);
}
