//! The service's check scheduler: every [`TICK`], if the config has a `[check] schedule`,
//! evaluates [`crate::schedule::Schedule::plan`] on the current arrays and the check record,
//! then starts or resumes (`mdpilot check start|resume`, the same code path) the arrays the
//! plan names and pauses the schedule's own checks outside any window.
//!
//! Inputs it reads: `/etc/machine-id` under the root (the seed of the fixed start delay; none:
//! delay 0), the local UTC offset now (`localtime_r`'s `tm_gmtoff`), member disks from
//! `/sys/class/block/<member>/..` (a partition's parent; the member itself otherwise).
//! Creation times are not read yet (every array passes the minimum-age rule).

use crate::check::run::{execute, record_key, Op};
use crate::check::{CheckAction, CheckState};
use crate::config::Config;
use crate::host::Root;
use crate::model::SyncAction;
use crate::schedule::{fixed_delay_s, Candidate};
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

fn candidates(root: &Root, config: &Config) -> Vec<Candidate> {
    let Ok(stat) = crate::sysfs::collect(root) else {
        return Vec::new();
    };
    let st = std::fs::read_to_string(root.path(&config.check.state_path))
        .ok()
        .and_then(|t| CheckState::parse(&t).ok())
        .unwrap_or_default();
    stat.arrays
        .iter()
        .filter(|a| a.is_redundant())
        .map(|a| {
            let rec = st.array.get(&record_key(a));
            // The model's fact: `md/sync_action`, else the mdstat sync line's word.
            let action = a.sync_action();
            let ours = rec.is_some_and(|r| r.scheduled && r.running.is_some());
            let running = CheckAction::running(&action).is_some();
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
                busy: action != SyncAction::Idle && !(ours && running),
            }
        })
        .collect()
}

/// One evaluation at `now` (Unix seconds, wall clock at `utc_offset_s`): what was started
/// and what was paused.
pub fn tick(
    root: &Root,
    config: &Config,
    now: i64,
    utc_offset_s: i64,
) -> (Vec<String>, Vec<String>) {
    let Some(s) = &config.check.schedule else {
        return (Vec::new(), Vec::new());
    };
    // Record what the kernel did since the last tick first (a finished check is done for this
    // cycle, an interrupted one keeps its position), so the plan never restarts a finished one.
    if let Err(e) = execute(root, config, &Op::Status, &[], false) {
        tracing::warn!("check record: {}", crate::error::error_chain(&e));
    }
    let seed = std::fs::read_to_string(root.path("/etc/machine-id")).unwrap_or_default();
    let delay = fixed_delay_s(&seed, s.random_delay_s);
    let arrays = candidates(root, config);
    let plan = s.plan(now, delay, utc_offset_s, &arrays);
    let mut started = Vec::new();
    for name in &plan.start {
        let resume = arrays.iter().any(|a| &a.name == name && a.has_position);
        let op = if resume {
            Op::Resume { max: None }
        } else {
            Op::Start {
                repair: false,
                max: None,
                until_s: None,
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
    (started, plan.pause)
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
/// check record.
pub async fn run(state: Arc<State>) {
    let mut t = tokio::time::interval(TICK);
    loop {
        t.tick().await;
        let s = state.clone();
        let ticked = state.check_worker.run(move || {
            let now = crate::policy::unix_now_s() as i64;
            tick(&s.root, &s.config(), now, utc_offset_s(now));
        });
        let _ = ticked.await;
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
        assert_eq!(tick(&root, &config, day + 3600 - 60, 0), (vec![], vec![]));
        let (started, _) = tick(&root, &config, day + 2 * 3600, 0);
        assert_eq!(started, ["md0"]);
        assert_eq!(md(r, "sync_action"), "check");
        // The kernel runs it; the window ends at 07:00.
        put(r, "sys/block/md0/md/sync_completed", "1000000 / 2093056\n");
        let (_, paused) = tick(&root, &config, day + 8 * 3600, 0);
        assert_eq!(paused, ["md0"]);
        assert_eq!(md(r, "sync_action"), "idle");
        // Monday 01:00: the continuation window resumes it where it stopped.
        put(r, "sys/block/md0/md/sync_completed", "none\n");
        put(r, "sys/block/md0/md/sync_min", "1000000\n");
        let (started, _) = tick(&root, &config, day + 86_400 + 3600 + 30, 0);
        assert_eq!(started, ["md0"]);
        assert_eq!(md(r, "sync_min"), "1000000");
        assert_eq!(md(r, "sync_action"), "check");
        // Finished meanwhile: nothing to pause.
        put(r, "sys/block/md0/md/sync_action", "idle\n");
        put(r, "sys/block/md0/md/sync_min", "0\n");
        assert!(tick(&root, &config, day + 86_400 + 10 * 3600, 0)
            .1
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
        let c = candidates(&root, &config);
        assert_eq!(c.len(), 1);
        assert!(c[0].busy && !c[0].checking, "{c:?}");
        let day = days_from_civil(2026, 12, 6) * 86_400;
        assert_eq!(tick(&root, &config, day + 2 * 3600, 0), (vec![], vec![]));
    }
}
