//! The service's check scheduler: every [`TICK`], if the config has a `[check] schedule`,
//! evaluates [`crate::schedule::Schedule::plan`] on the current arrays and the check record,
//! then starts or resumes (`mdpilot check start|resume`, the same code path) the arrays the
//! plan names and pauses the schedule's own checks outside any window.
//!
//! Inputs it reads: `/etc/machine-id` under the root (the seed of the fixed start delay; none:
//! delay 0), the local UTC offset now (`localtime_r`'s `tm_gmtoff`), member disks from
//! `/sys/class/block/<member>/..` (a partition's parent; the member itself otherwise).
//! Creation times are not read yet (every array passes the minimum-age rule).

use crate::check::guard::{hold, Facts, Hold};
use crate::check::run::{execute, member_disks, record_key, Op};
use crate::check::{CheckAction, CheckState};
use crate::config::Config;
use crate::host::Root;
use crate::model::SyncAction;
use crate::schedule::{fixed_delay_s, Candidate, SkipReason};
use crate::shared::State;
use std::sync::Arc;
use std::time::Duration;

/// How often the plan is evaluated: the lateness bound of a window's start and end.
pub const TICK: Duration = Duration::from_secs(30);

/// The local wall-clock offset east of UTC, seconds, at `t` ([`crate::host::utc_offset_s`]).
pub fn utc_offset_s(t: i64) -> i64 {
    crate::host::utc_offset_s(t)
}

/// The whole disk under a member (`sda1` → `sda`, `nvme0n1p2` → `nvme0n1`), from sysfs: a
/// partition's `/sys/class/block/<name>` has a `partition` file and its parent is the disk.
fn whole_disk(root: &Root, member: &str) -> String {
    crate::sysfs::block::whole_disk(root, member)
}

/// The arrays the plan may consider, and the guard that holds each held one
/// ([`crate::check::guard::hold`], with the battery rule): a held array counts as busy, so the
/// plan starts another in its place.
fn candidates(root: &Root, config: &Config) -> (Vec<Candidate>, Vec<(String, Hold)>) {
    let Ok(stat) = crate::sysfs::collect(root) else {
        return (Vec::new(), Vec::new());
    };
    let battery =
        crate::sysfs::pressure::on_battery(&crate::sysfs::pressure::read_power_supplies(root));
    let facts: Vec<Facts> = stat
        .arrays
        .iter()
        .map(|a| Facts::of(a, member_disks(root, a)))
        .collect();
    let mut held = Vec::new();
    let st = std::fs::read_to_string(root.path(&config.check.state_path))
        .ok()
        .and_then(|t| CheckState::parse(&t).ok())
        .unwrap_or_default();
    let list = stat
        .arrays
        .iter()
        .filter(|a| a.is_redundant())
        .map(|a| {
            let rec = st.array.get(&record_key(a));
            // The model's fact: `md/sync_action`, else the mdstat sync line's word.
            let action = a.sync_action();
            let ours = rec.is_some_and(|r| r.scheduled && r.running.is_some());
            let running = CheckAction::running(&action).is_some();
            let hold = (!running).then(|| hold(&a.name, &facts, battery)).flatten();
            if let Some(h) = &hold {
                held.push((a.name.clone(), h.clone()));
            }
            Candidate {
                name: a.name.clone(),
                uuid: a.uuid().map(|u| u.to_string()),
                created_unix_s: crate::sysfs::array_created(root, &a.name),
                disks: a
                    .members
                    .iter()
                    .map(|m| whole_disk(root, &m.name))
                    .collect(),
                last_completed_s: rec
                    .and_then(|r| r.last.as_ref())
                    .map(|l| l.completed_s as i64),
                has_position: rec.is_some_and(|r| r.position.is_some()),
                // Only the schedule's own checks count (and are paused): hand-started ones
                // are the admin's.
                checking: ours && running,
                busy: (action != SyncAction::Idle && !(ours && running)) || hold.is_some(),
            }
        })
        .collect();
    (list, held)
}

/// What one [`tick`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ticked {
    /// Arrays started or resumed.
    pub started: Vec<String>,
    /// Arrays paused (their window ended).
    pub paused: Vec<String>,
    /// Arrays a window would check that a guard holds, with the reason (logged when it
    /// changes, see [`run`]).
    pub held: Vec<(String, String)>,
}

/// One evaluation at `now` (Unix seconds, wall clock at `utc_offset_s`): what was started,
/// paused and held.
pub fn tick(root: &Root, config: &Config, now: i64, utc_offset_s: i64) -> Ticked {
    let Some(s) = &config.check.schedule else {
        return Ticked::default();
    };
    // Record what the kernel did since the last tick first (a finished check is done for this
    // cycle, an interrupted one keeps its position), so the plan never restarts a finished one.
    if let Err(e) = execute(root, config, &Op::Status, &[], false) {
        tracing::warn!("check record: {}", crate::error::error_chain(&e));
    }
    let seed = std::fs::read_to_string(root.path("/etc/machine-id")).unwrap_or_default();
    let delay = fixed_delay_s(&seed, s.random_delay_s);
    let (arrays, holds) = candidates(root, config);
    let plan = s.plan(now, delay, utc_offset_s, &arrays);
    // Only what the window would otherwise check: selected, due, and in a window.
    let held = holds
        .into_iter()
        .filter(|(n, _)| {
            plan.window.is_some()
                && plan
                    .skipped
                    .iter()
                    .any(|(m, r)| m == n && *r == SkipReason::Busy)
        })
        .map(|(n, h)| (n, h.to_string()))
        .collect();
    let mut started = Vec::new();
    for name in &plan.start {
        let resume = arrays.iter().any(|a| &a.name == name && a.has_position);
        let op = if resume {
            Op::Resume {
                max: None,
                force: false,
            }
        } else {
            Op::Start {
                repair: false,
                max: None,
                until_s: None,
                force: false,
            }
        };
        match execute(root, config, &op, std::slice::from_ref(name), true) {
            Ok(o) if o.failures.is_empty() => {
                tracing::info!(array = %name, resume, "scheduled check started");
                started.push(name.clone());
            }
            Ok(o) => tracing::warn!("scheduled check of {name}: {}", join(&o.failures)),
            Err(e) => tracing::warn!(
                "scheduled check of {name}: {}",
                crate::error::error_chain(&e)
            ),
        }
    }
    if !plan.pause.is_empty() {
        match execute(root, config, &Op::Pause, &plan.pause, true) {
            Ok(o) => {
                for e in o.failures {
                    tracing::warn!("pausing a scheduled check: {e}");
                }
                tracing::info!(arrays = ?plan.pause, "window ended: scheduled checks paused");
            }
            Err(e) => tracing::warn!(
                "pausing scheduled checks: {}",
                crate::error::error_chain(&e)
            ),
        }
    }
    Ticked {
        started,
        paused: plan.pause,
        held,
    }
}

/// One array's failures as one log line (`md0: ...; md1: ...`).
fn join(failures: &[crate::check::run::Failure]) -> String {
    let all: Vec<String> = failures.iter().map(ToString::to_string).collect();
    all.join("; ")
}

/// Runs [`tick`] every [`TICK`] until dropped, with the configuration in effect at each tick
/// ([`State::config`]: a SIGHUP that adds or changes `[check] schedule` applies from the next
/// tick; without a schedule a tick does nothing). On the check worker
/// ([`State::check_worker`]), never the loop's thread: a tick writes the kernel files and the
/// check record. A held scheduled check is logged (journal) when its reason appears or
/// changes, not at every tick.
pub async fn run(state: Arc<State>) {
    let mut t = tokio::time::interval(TICK);
    let mut held_before: Vec<(String, String)> = Vec::new();
    loop {
        t.tick().await;
        let s = state.clone();
        let ticked = state.check_worker.run(move || {
            let now = crate::policy::unix_now_s() as i64;
            tick(&s.root, &s.config(), now, utc_offset_s(now))
        });
        let Ok(ticked) = ticked.await else {
            continue;
        };
        for (array, reason) in ticked.held.iter().filter(|h| !held_before.contains(h)) {
            tracing::info!(%array, "scheduled check not started: {reason}");
        }
        held_before = ticked.held;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::days_from_civil;

    fn put(root: &std::path::Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn md(root: &std::path::Path, f: &str) -> String {
        std::fs::read_to_string(root.join("sys/block/md0/md").join(f))
            .unwrap()
            .trim()
            .to_string()
    }

    /// md0's tree (raid1 on sda1/sdb1, idle) and a schedule of the first Sunday 01:00.
    fn tree(r: &std::path::Path, mdstat_state: &str) {
        put(r, "proc/mdstat", &format!("Personalities : [raid1]\nmd0 : active raid1 sdb1[1] sda1[0]\n      1046528 blocks super 1.2 {mdstat_state}\n\nunused devices: <none>\n"));
        put(r, "proc/sys/dev/raid/speed_limit_min", "1000\n");
        put(r, "proc/sys/dev/raid/speed_limit_max", "200000\n");
        for (f, v) in [
            ("sync_action", "idle"),
            ("sync_min", "0"),
            ("sync_completed", "none"),
            ("uuid", "u-0"),
            ("level", "raid1"),
            ("mismatch_cnt", "0"),
        ] {
            put(r, &format!("sys/block/md0/md/{f}"), &format!("{v}\n"));
        }
        put(
            r,
            "etc/mdpilot/config.d/50-check.toml",
            "[check]\nschedule = \"Sun *-*-1..7 01:00\"\n",
        );
    }

    #[test]
    fn a_scheduled_check_is_held_on_battery_and_on_a_degraded_array() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        tree(r, "[2/2] [UU]");
        put(r, "sys/class/power_supply/AC/type", "Mains\n");
        put(r, "sys/class/power_supply/AC/online", "0\n");
        put(r, "sys/class/power_supply/BAT0/type", "Battery\n");
        let root = Root::new(r);
        let config = Config::load(&root).unwrap();
        let in_window = days_from_civil(2026, 12, 6) * 86_400 + 2 * 3600;
        let t = tick(&root, &config, in_window, 0);
        assert_eq!(t.started, Vec::<String>::new());
        assert_eq!(
            t.held,
            [("md0".to_string(), "the machine runs on battery".to_string())]
        );
        assert_eq!(md(r, "sync_action"), "idle");
        // Mains again, but a member missing.
        put(r, "sys/class/power_supply/AC/online", "1\n");
        tree(r, "[2/1] [U_]");
        let t = tick(&root, &config, in_window, 0);
        assert_eq!(t.held[0].1, "md0 is degraded (1 member(s) missing)");
        // Whole again: it starts.
        tree(r, "[2/2] [UU]");
        let t = tick(&root, &config, in_window, 0);
        assert_eq!(t.started, ["md0"]);
        assert!(t.held.is_empty());
    }

    #[test]
    fn window_starts_pauses_and_resumes_on_a_fake_clock() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        put(r, "proc/mdstat", "Personalities : [raid1]\nmd0 : active raid1 sdb1[1] sda1[0]\n      1046528 blocks super 1.2 [2/2] [UU]\n\nunused devices: <none>\n");
        put(r, "proc/sys/dev/raid/speed_limit_min", "1000\n");
        put(r, "proc/sys/dev/raid/speed_limit_max", "200000\n");
        for (f, v) in [
            ("sync_action", "idle"),
            ("sync_min", "0"),
            ("sync_completed", "none"),
            ("uuid", "u-0"),
            ("level", "raid1"),
            ("mismatch_cnt", "0"),
        ] {
            put(r, &format!("sys/block/md0/md/{f}"), &format!("{v}\n"));
        }
        put(
            r,
            "etc/mdpilot/config.d/50-check.toml",
            "[check]\nschedule = \"Sun *-*-1..7 01:00\"\ncontinue = \"*-*-* 01:00\"\n",
        );
        let root = Root::new(r);
        let config = Config::load(&root).unwrap();
        let day = days_from_civil(2026, 12, 6) * 86_400; // first Sunday
        assert_eq!(tick(&root, &config, day + 3600 - 60, 0), Ticked::default());
        let started = tick(&root, &config, day + 2 * 3600, 0).started;
        assert_eq!(started, ["md0"]);
        assert_eq!(md(r, "sync_action"), "check");
        // The kernel runs it; the window ends at 07:00.
        put(r, "sys/block/md0/md/sync_completed", "1000000 / 2093056\n");
        let paused = tick(&root, &config, day + 8 * 3600, 0).paused;
        assert_eq!(paused, ["md0"]);
        assert_eq!(md(r, "sync_action"), "idle");
        // Monday 01:00: the continuation window resumes it where it stopped.
        put(r, "sys/block/md0/md/sync_completed", "none\n");
        put(r, "sys/block/md0/md/sync_min", "1000000\n");
        let started = tick(&root, &config, day + 86_400 + 3600 + 30, 0).started;
        assert_eq!(started, ["md0"]);
        assert_eq!(md(r, "sync_min"), "1000000");
        assert_eq!(md(r, "sync_action"), "check");
        // Finished meanwhile: nothing to pause.
        put(r, "sys/block/md0/md/sync_action", "idle\n");
        put(r, "sys/block/md0/md/sync_min", "0\n");
        assert!(tick(&root, &config, day + 86_400 + 10 * 3600, 0)
            .paused
            .is_empty());
    }

    #[test]
    fn a_recovery_mdstat_shows_is_busy_without_a_sysfs_sync_action() {
        // No md/sync_action file (an older kernel, a test root): the model's word is mdstat's
        // `recovery` (`recover`), so the window starts no check over the rebuild.
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        put(r, "proc/mdstat", "Personalities : [raid1]\nmd0 : active raid1 sdb1[2] sda1[0]\n      1046528 blocks super 1.2 [2/1] [U_]\n      [=>...................]  recovery =  8.5% (89128/1046528) finish=1.5min speed=10000K/sec\n\nunused devices: <none>\n");
        for (f, v) in [("sync_min", "0"), ("uuid", "u-0"), ("level", "raid1")] {
            put(r, &format!("sys/block/md0/md/{f}"), &format!("{v}\n"));
        }
        put(
            r,
            "etc/mdpilot/config.d/50-check.toml",
            "[check]\nschedule = \"Sun *-*-1..7 01:00\"\n",
        );
        let root = Root::new(r);
        let config = Config::load(&root).unwrap();
        let (c, _) = candidates(&root, &config);
        assert_eq!(c.len(), 1);
        assert!(c[0].busy && !c[0].checking, "{c:?}");
        let day = days_from_civil(2026, 12, 6) * 86_400;
        assert_eq!(
            tick(&root, &config, day + 2 * 3600, 0).started,
            Vec::<String>::new()
        );
    }
}
