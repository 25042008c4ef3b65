//! The service's check schedule, a step of the service loop: every [`TICK`], if the config has
//! a `[check] schedule`, the loop hands [`tick`] its model (the arrays it has read already:
//! no collection of its own) and [`tick`] evaluates [`crate::schedule::Schedule::plan`] on
//! those arrays and the check record, then starts or resumes (the executor of `mdpilot check
//! start|resume`, [`crate::check::run::execute_on`]) the arrays the plan names and pauses the
//! schedule's own checks outside any window. The loop is the record's one writer in the
//! service: its upkeep and this step, one after the other.
//!
//! Inputs it reads: `/etc/machine-id` under the root (the seed of the fixed start delay; none:
//! delay 0), the local UTC offset now (`localtime_r`'s `tm_gmtoff`), member disks from
//! `/sys/class/block/<member>/..` (a partition's parent; the member itself otherwise).
//! Creation times are not read yet (every array passes the minimum-age rule).

use crate::check::guard::{hold, Facts, Hold};
use crate::check::run::{execute_on, member_disks, record_key, Op};
use crate::check::store::CheckStore;
use crate::check::{CheckAction, CheckState, Origin};
use crate::config::Config;
use crate::host::Root;
use crate::model::{MdStat, SyncAction};
use crate::schedule::{fixed_delay_s, Candidate, SkipReason};
use std::time::Duration;

/// How often the plan is evaluated: the lateness bound of a window's start and end.
pub const TICK: Duration = Duration::from_secs(30);

/// The arrays of `model` the plan may consider, with the record `st`, and the guard that
/// holds each held one ([`crate::check::guard::hold`], with the battery rule): a held array
/// counts as busy, so the plan starts another in its place.
fn candidates(
    root: &Root,
    model: &MdStat,
    st: &CheckState,
) -> (Vec<Candidate>, Vec<(String, Hold)>) {
    let battery =
        crate::sysfs::pressure::on_battery(&crate::sysfs::pressure::read_power_supplies(root));
    let facts: Vec<Facts> = model
        .arrays
        .iter()
        .map(|a| Facts::of(a, member_disks(root, a)))
        .collect();
    let mut held = Vec::new();
    let list = model
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
                    .map(|m| crate::sysfs::block::whole_disk(root, &m.name))
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
    /// Arrays a window would check that a guard holds, with the reason (the loop logs it
    /// when it changes).
    pub held: Vec<(String, String)>,
}

/// One evaluation at `now` (Unix seconds, wall clock at `utc_offset_s`) on `model`, the
/// loop's arrays: what was started, paused and held. Reads no `/proc/mdstat` and collects no
/// arrays; the executor reads the sysfs of the arrays it writes again under the record's lock.
pub fn tick(root: &Root, config: &Config, model: &MdStat, now: i64, utc_offset_s: i64) -> Ticked {
    let Some(s) = &config.check.schedule else {
        return Ticked::default();
    };
    // Record what the kernel did since the last tick first (a finished check is done for this
    // cycle, an interrupted one keeps its position), so the plan never restarts a finished one.
    let (model, st) = match execute_on(root, config, model, &Op::Status, &[], Origin::Admin) {
        Ok(o) => (o.stat, o.state),
        Err(e) => {
            tracing::warn!("check record: {}", crate::error::error_chain(&e));
            let st = CheckStore::new(root, config).load_or_empty("no scheduled checks");
            (model.clone(), st)
        }
    };
    let seed = std::fs::read_to_string(root.path("/etc/machine-id")).unwrap_or_default();
    let delay = fixed_delay_s(&seed, s.random_delay_s);
    let (arrays, holds) = candidates(root, &model, &st);
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
    let started = plan
        .start
        .iter()
        .filter(|name| {
            let resume = arrays.iter().any(|a| &a.name == *name && a.has_position);
            start(root, config, &model, name, resume)
        })
        .cloned()
        .collect();
    if !plan.pause.is_empty() {
        pause(root, config, &model, &plan.pause);
    }
    Ticked {
        started,
        paused: plan.pause,
        held,
    }
}

/// Starts (or, with `resume`, resumes) the schedule's check of `name`; true when it did.
/// Failures are logged.
fn start(root: &Root, config: &Config, model: &MdStat, name: &String, resume: bool) -> bool {
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
    let names = std::slice::from_ref(name);
    match execute_on(root, config, model, &op, names, Origin::Schedule) {
        Ok(o) if o.failures.is_empty() => {
            tracing::info!(array = %name, resume, "scheduled check started");
            true
        }
        Ok(o) => {
            tracing::warn!("scheduled check of {name}: {}", join(&o.failures));
            false
        }
        Err(e) => {
            let e = crate::error::error_chain(&e);
            tracing::warn!("scheduled check of {name}: {e}");
            false
        }
    }
}

/// Pauses the schedule's checks of `names` (their window ended). Failures are logged.
fn pause(root: &Root, config: &Config, model: &MdStat, names: &[String]) {
    match execute_on(root, config, model, &Op::Pause, names, Origin::Schedule) {
        Ok(o) => {
            for e in o.failures {
                tracing::warn!("pausing a scheduled check: {e}");
            }
            tracing::info!(arrays = ?names, "window ended: scheduled checks paused");
        }
        Err(e) => tracing::warn!(
            "pausing scheduled checks: {}",
            crate::error::error_chain(&e)
        ),
    }
}

/// One array's failures as one log line (`md0: ...; md1: ...`).
fn join(failures: &[crate::check::run::Failure]) -> String {
    let all: Vec<String> = failures.iter().map(ToString::to_string).collect();
    all.join("; ")
}

/// The arrays held now that were not held (or held for another reason) at the last tick:
/// a held scheduled check is logged (journal) when its reason appears or changes, not at
/// every tick.
pub fn newly_held<'a>(
    now: &'a [(String, String)],
    before: &[(String, String)],
) -> Vec<&'a (String, String)> {
    now.iter().filter(|h| !before.contains(h)).collect()
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

    /// The arrays as the loop reads them.
    fn model(root: &Root) -> MdStat {
        crate::sysfs::collect(root).unwrap()
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
        let t = tick(&root, &config, &model(&root), in_window, 0);
        assert_eq!(t.started, Vec::<String>::new());
        assert_eq!(
            t.held,
            [("md0".to_string(), "the machine runs on battery".to_string())]
        );
        assert_eq!(md(r, "sync_action"), "idle");
        // Mains again, but a member missing.
        put(r, "sys/class/power_supply/AC/online", "1\n");
        tree(r, "[2/1] [U_]");
        let t = tick(&root, &config, &model(&root), in_window, 0);
        assert_eq!(t.held[0].1, "md0 is degraded (1 member(s) missing)");
        // Whole again: it starts.
        tree(r, "[2/2] [UU]");
        let t = tick(&root, &config, &model(&root), in_window, 0);
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
        assert_eq!(
            tick(&root, &config, &model(&root), day + 3600 - 60, 0),
            Ticked::default()
        );
        let started = tick(&root, &config, &model(&root), day + 2 * 3600, 0).started;
        assert_eq!(started, ["md0"]);
        assert_eq!(md(r, "sync_action"), "check");
        // The kernel runs it; the window ends at 07:00.
        put(r, "sys/block/md0/md/sync_completed", "1000000 / 2093056\n");
        let paused = tick(&root, &config, &model(&root), day + 8 * 3600, 0).paused;
        assert_eq!(paused, ["md0"]);
        assert_eq!(md(r, "sync_action"), "idle");
        // Monday 01:00: the continuation window resumes it where it stopped.
        put(r, "sys/block/md0/md/sync_completed", "none\n");
        put(r, "sys/block/md0/md/sync_min", "1000000\n");
        let started = tick(&root, &config, &model(&root), day + 86_400 + 3600 + 30, 0).started;
        assert_eq!(started, ["md0"]);
        assert_eq!(md(r, "sync_min"), "1000000");
        assert_eq!(md(r, "sync_action"), "check");
        // Finished meanwhile: nothing to pause.
        put(r, "sys/block/md0/md/sync_action", "idle\n");
        put(r, "sys/block/md0/md/sync_min", "0\n");
        assert!(
            tick(&root, &config, &model(&root), day + 86_400 + 10 * 3600, 0)
                .paused
                .is_empty()
        );
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
        let (c, _) = candidates(&root, &model(&root), &CheckState::default());
        assert_eq!(c.len(), 1);
        assert!(c[0].busy && !c[0].checking, "{c:?}");
        let day = days_from_civil(2026, 12, 6) * 86_400;
        assert_eq!(
            tick(&root, &config, &model(&root), day + 2 * 3600, 0).started,
            Vec::<String>::new()
        );
    }

    /// The schedule is a step of the service loop on the loop's model: at the scheduled time a
    /// check starts on the simulator without a second collection of the arrays (the loop read
    /// them once; the tick reads only what it writes, under the record's lock), and the
    /// record says it is the schedule's.
    #[test]
    fn a_scheduled_check_starts_from_the_loops_model_without_collecting_again() {
        let mut sim = crate::sim::Sim::create().unwrap();
        let root = sim.root().clone();
        put(
            sim.path(),
            "etc/mdpilot/config.d/50-check.toml",
            "[check]\nschedule = \"Sun *-*-1..7 01:00\"\nrandom_delay = \"0\"\n",
        );
        let config = Config::load(&root).unwrap();
        let loops_model = model(&root);
        let day = days_from_civil(2026, 12, 6) * 86_400; // first Sunday
        let collections = || crate::sysfs::COLLECTIONS.with(std::cell::Cell::get);
        let before = collections();
        assert_eq!(
            tick(&root, &config, &loops_model, day + 3600 - 60, 0),
            Ticked::default()
        );
        // md1 resyncs: only md0 is started.
        let t = tick(&root, &config, &loops_model, day + 3600, 0);
        assert_eq!(t.started, ["md0"]);
        assert_eq!(
            collections(),
            before,
            "the tick collected the arrays itself"
        );
        sim.absorb_writes().unwrap();
        let text = std::fs::read_to_string(root.sys("block/md0/md/sync_action")).unwrap();
        assert_eq!(text, "check\n");
        let st = CheckStore::new(&root, &config).load().unwrap();
        let rec = &st.array[&record_key(&loops_model.arrays[0])];
        assert!(
            rec.scheduled && rec.running == Some(CheckAction::Check),
            "{rec:?}"
        );
    }

    /// The loop's model may be older than a step by hand (a D-Bus StartCheck whose re-read
    /// the loop has not done yet): the tick reads the arrays with a running check again under
    /// the record's lock, so it neither takes the admin's check for finished nor starts its
    /// own over it.
    #[test]
    fn a_check_started_by_hand_after_the_loops_read_is_not_the_schedules() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        tree(r, "[2/2] [UU]");
        let root = Root::new(r);
        let config = Config::load(&root).unwrap();
        let stale = model(&root);
        let start = Op::Start {
            repair: false,
            max: None,
            until_s: None,
            force: false,
        };
        let o = crate::check::run::execute(&root, &config, &start, &["md0".into()], Origin::Admin)
            .unwrap();
        assert!(o.failures.is_empty(), "{:?}", o.failures);
        put(r, "sys/block/md0/md/sync_completed", "1000 / 2093056\n");
        let in_window = days_from_civil(2026, 12, 6) * 86_400 + 2 * 3600;
        let t = tick(&root, &config, &stale, in_window, 0);
        assert_eq!(t.started, Vec::<String>::new());
        let st = CheckStore::new(&root, &config).load().unwrap();
        let rec = &st.array[&record_key(&stale.arrays[0])];
        assert_eq!(rec.running, Some(CheckAction::Check), "{rec:?}");
        assert!(rec.last.is_none() && !rec.scheduled, "{rec:?}");
        assert_eq!(md(r, "sync_action"), "check");
    }
}
