//! The one executor of check steps on the kernel files: `mdpilot check` (`cli/check.rs`), the
//! Array object's `StartCheck`/`PauseCheck`/`ResumeCheck`/`CancelCheck` (`dbus/check.rs`) and
//! the service loop's check upkeep and schedule (`service/scheduler.rs`) all go through
//! [`execute`] (the loop through [`execute_on`], on its own model); the decisions
//! are the pure ones of [`super`]. The record is read and saved through its owner,
//! [`super::store::CheckStore`], and changed only under its lock.
//!
//! Kernel writes (Documentation/admin-guide/md.rst): `md/sync_min` (512-byte sectors, a chunk
//! multiple) and `md/sync_action` (`check`, `repair`, `idle`). Nothing here writes `frozen` or
//! `md/sync_max`, so no check step can leave an array frozen or with `sync_max` below its end
//! on any exit path (the policy's change journal, `policy/journal.rs`, covers the writes that
//! can); a check left running by a crash keeps running in the kernel and is recorded by the
//! next step ([`super::reconcile`]).
//!
//! - `Start`: `sync_min` 0, then `sync_action` = check/repair; a saved position is dropped.
//! - `Pause`: saves the position (the point md has reached, read again just before:
//!   [`crate::model::Array::sync_reached_sectors`], rounded down by [`resume_point`]) *before*
//!   writing `idle`, then releases the throttle. No-op when no check runs.
//! - `Resume`: `sync_min` = saved position, then `sync_action` = the saved action.
//! - `Cancel`: `idle` (when a check runs), `sync_min` 0, position dropped, throttle released.
//! - `Status`: nothing but the record of what the kernel did meanwhile (a finished check's
//!   `mismatch_cnt`, the position of a check someone else interrupted, a running one's
//!   position).
//!
//! Throttle: a `max` (or the config's `check_max`) becomes a lease `check-<array>` (kind
//! admin, no owner) on the array's `sync_speed_max`, released on pause, cancel and when a step
//! sees the check finished; `Resume` without a `max` reuses the one the check was started with.

use super::guard::{hold, may_resume, must_pause, Facts};
pub use super::record_key;
use super::store::{CheckStore, Locked, StoreError};
pub use super::throttle::holder;
use super::throttle::{rethrottle, start_max, throttle, unthrottle};
use super::{
    reconcile, resume_point, upkeep, ArrayRecord, CheckAction, CheckState, Observed, Origin,
    Position, Upkeep,
};
use crate::config::Config;
use crate::host::Root;
use crate::model::{Array, MdStat, SyncAction, SyncCompleted};
use crate::policy::Policy;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One step, for the arrays [`execute`] is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Start a check (or repair) from sector 0.
    Start {
        /// `repair` instead of `check`.
        repair: bool,
        /// Throttle: the array's `sync_speed_max` during the check, KiB/s (`None`: the
        /// config's `check_max`, else none).
        max: Option<u64>,
        /// Window end, Unix seconds: the service pauses the check then (`None`: no end).
        until_s: Option<u64>,
        /// Start even when a guard holds it ([`crate::check::guard::hold`]: degraded,
        /// rebuilding, a shared disk); the reason overridden is logged and returned in
        /// [`Outcome::overridden`].
        force: bool,
    },
    /// Stop a running check, keeping its position.
    Pause,
    /// Continue a paused check from its saved position.
    Resume {
        /// Throttle as for `Start` (`None`: the one it was started with, else `check_max`).
        max: Option<u64>,
        /// As for `Start`.
        force: bool,
    },
    /// Stop a check and forget its position.
    Cancel,
    /// Only record what the kernel did meanwhile.
    Status,
}

/// Why a step failed (for one array, or for all).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// Not an array of /proc/mdstat.
    #[error("no array {0}")]
    NoArray(String),
    /// Another sync runs (or the array is frozen).
    #[error("{array}: {action} is running; a check can start only when idle")]
    Busy {
        /// Array.
        array: String,
        /// `sync_action`.
        action: String,
    },
    /// A guard holds the check ([`crate::check::guard::hold`]); `force` overrides it.
    #[error("{array}: check not started: {reason} (force overrides)")]
    Held {
        /// Array.
        array: String,
        /// Why ([`crate::check::guard::Hold`]'s text).
        reason: String,
    },
    /// `Resume` without a saved position.
    #[error("{0}: no paused check to resume (start one instead)")]
    NothingToResume(String),
    /// A kernel file could not be written.
    #[error("cannot write {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The record file could not be locked, read, parsed or saved.
    #[error(transparent)]
    State(#[from] StoreError),
    /// The throttle lease failed.
    #[error("throttle lease")]
    Policy(#[from] crate::policy::PolicyError),
    /// The arrays could not be read.
    #[error("reading the arrays")]
    Collect(#[from] crate::sysfs::CollectError),
}

/// One array's failed step.
#[derive(Debug)]
pub struct Failure {
    /// Kernel name.
    pub array: String,
    /// Why.
    pub error: CheckError,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let msg = crate::error::error_chain(&self.error);
        // Errors that name their array already (Busy, NothingToResume) are not prefixed twice.
        if msg.starts_with(&format!("{}: ", self.array)) {
            write!(f, "{msg}")
        } else {
            write!(f, "{}: {msg}", self.array)
        }
    }
}

/// What [`execute`] did.
#[derive(Debug)]
pub struct Outcome {
    /// The arrays as read before the step.
    pub stat: MdStat,
    /// The kernel names the step applied to.
    pub targets: Vec<String>,
    /// The record after the step (saved).
    pub state: CheckState,
    /// The arrays that failed; the others were done.
    pub failures: Vec<Failure>,
    /// The arrays started with `force` although a guard held them, with the reason overridden.
    pub overridden: Vec<(String, String)>,
}

/// Levels a check means something on ([`Array::is_redundant`]: raid1/4/5/6/10): the default
/// set of arrays.
pub fn redundant(a: &Array) -> bool {
    a.is_redundant()
}

/// What the kernel shows of `a` now (the model's facts, [`Array::sync_action`],
/// [`Array::sync_reached_sectors`] and [`Array::level`], its sysfs values with
/// `md/last_sync_action`, plus `md/sync_min`, read here).
pub fn observe(root: &Root, a: &Array) -> Observed {
    let sys = a.sysfs.clone().unwrap_or_default();
    let sync_min = crate::sysfs::read_sync_min(root, &a.name).unwrap_or(0);
    Observed {
        sync_action: a.sync_action(),
        completed: match sys.sync_completed {
            Some(SyncCompleted::Sectors { done, total }) => Some((done, total)),
            _ => None,
        },
        reached: a.sync_reached_sectors(),
        sync_min,
        mismatch_cnt: sys.mismatch_cnt,
        last_sync_action: sys.last_sync_action,
        level: a.level().map(|l| l.to_string()).unwrap_or_default(),
    }
}

/// `md/sync_action` through [`write_attr`].
fn write_sync_action(root: &Root, array: &str, action: &SyncAction) -> Result<(), CheckError> {
    write_attr(root, array, "sync_action", action.as_str())
}

/// Through the one writer ([`crate::sysfs::write_array_attr`]): an array that has just gone is
/// `CheckError::Write` with `NotFound`, never a file created under `/sys/block/<array>/md/`.
fn write_attr(root: &Root, array: &str, attr: &str, value: &str) -> Result<(), CheckError> {
    tracing::info!(array, attr, value, "write");
    crate::sysfs::write_array_attr(root, array, attr, &format!("{value}\n")).map_err(|e| {
        CheckError::Write {
            path: e.path().to_path_buf(),
            source: e.into(),
        }
    })
}

/// Runs `op` on `arrays` (kernel names, `/dev/mdN`, `/dev/md/NAME`, `md/NAME` or metadata
/// names; none = every redundant array, for `Resume` every one with a saved position) on the
/// kernel files under `root`, with the arrays read under the record's lock. First it records
/// what the kernel did since the last step, for every array with a record. The checks it
/// starts or resumes for [`Origin::Schedule`] are the schedule's (only those are paused by
/// the schedule at a window's end).
///
/// Errors: the record file or the arrays cannot be read, an ARRAY is unknown
/// ([`CheckError::NoArray`]); errors of single arrays are in [`Outcome::failures`].
pub fn execute(
    root: &Root,
    config: &Config,
    op: &Op,
    arrays: &[String],
    origin: Origin,
) -> Result<Outcome, CheckError> {
    let store = CheckStore::new(root, config);
    let lock = store.lock()?;
    let stat = crate::sysfs::collect(root)?;
    execute_locked(
        &Step::new(root, config, &store, &lock),
        stat,
        op,
        arrays,
        origin,
    )
}

/// [`execute`] on the arrays of `model` (the service loop's, already read: no second
/// collection of `/proc/mdstat` and every array). Under the lock, the sysfs of the arrays the
/// step decides on is read again (a D-Bus or CLI step may have written since `model` was
/// read): those with a running check in the record, and the targets of a step that writes
/// (those named; every one when none is named). A [`Op::Status`] with no check running reads
/// no array.
///
/// Errors: as [`execute`] (never [`CheckError::Collect`]).
pub fn execute_on(
    root: &Root,
    config: &Config,
    model: &MdStat,
    op: &Op,
    arrays: &[String],
    origin: Origin,
) -> Result<Outcome, CheckError> {
    let store = CheckStore::new(root, config);
    let lock = store.lock()?;
    let st = lock.load()?;
    let writes = *op != Op::Status;
    let mut stat = model.clone();
    for a in &mut stat.arrays {
        let target = writes && (arrays.is_empty() || arrays.contains(&a.name));
        let running = st
            .array
            .get(&record_key(a))
            .is_some_and(|r| r.running.is_some());
        if target || running {
            a.sysfs = Some(crate::sysfs::read_array(root, &a.name));
        }
    }
    execute_locked(
        &Step::new(root, config, &store, &lock),
        stat,
        op,
        arrays,
        origin,
    )
}

/// What every step of one [`execute`] shares: the root, the configuration, the throttle's
/// policy and the record under its lock.
struct Step<'a> {
    root: &'a Root,
    config: &'a Config,
    policy: Policy,
    store: &'a CheckStore,
    lock: &'a Locked<'a>,
}

impl<'a> Step<'a> {
    fn new(
        root: &'a Root,
        config: &'a Config,
        store: &'a CheckStore,
        lock: &'a Locked<'a>,
    ) -> Step<'a> {
        let policy = Policy::new(root.clone(), config.policy_settings(root));
        Step {
            root,
            config,
            policy,
            store,
            lock,
        }
    }
}

/// [`execute`] under the record's lock on `stat`.
fn execute_locked(
    cx: &Step<'_>,
    stat: MdStat,
    op: &Op,
    arrays: &[String],
    origin: Origin,
) -> Result<Outcome, CheckError> {
    let root = cx.root;
    let mut st = cx.lock.load()?;
    let now = crate::host::unix_now_s();
    let mut failures = record_meanwhile(cx, &stat, &mut st, now);
    let targets: Vec<Array> = select(root, &stat, arrays, op, &st)?
        .into_iter()
        .cloned()
        .collect();
    let facts = guard_facts(root, &stat, op);
    let mut overridden = Vec::new();
    for a in &targets {
        let r = guarded(op, a, &facts, &mut overridden);
        let r = r.and_then(|()| step(cx, op, a, &mut st, now));
        let r = r.map(|()| {
            if let Some(rec) = st.array.get_mut(&record_key(a)) {
                if !matches!(op, Op::Pause | Op::Status) {
                    rec.paused_for = None;
                }
                if origin == Origin::Schedule {
                    rec.scheduled = rec.running.is_some();
                }
            }
        });
        // Saved after every array: a later failure never loses an earlier pause.
        if let Err(error) = r.and_then(|()| Ok(cx.lock.save(&st)?)) {
            failures.push(Failure {
                array: a.name.clone(),
                error,
            });
        }
    }
    cx.lock.save(&st)?;
    Ok(Outcome {
        targets: targets.iter().map(|a| a.name.clone()).collect(),
        stat,
        state: st,
        failures,
        overridden,
    })
}

/// Records in `st` what happened since the last step (finished or interrupted checks, their
/// throttle released). Returns the arrays whose throttle could not be released.
fn record_meanwhile(cx: &Step<'_>, stat: &MdStat, st: &mut CheckState, now: u64) -> Vec<Failure> {
    let mut failures = Vec::new();
    for a in &stat.arrays {
        // Only a check we started has anything to record ([`reconcile`]).
        if let Some(rec) = st
            .array
            .get_mut(&record_key(a))
            .filter(|r| r.running.is_some())
        {
            let chunk = a.sysfs.as_ref().and_then(|s| s.chunk_size_bytes);
            reconcile(rec, &observe(cx.root, a), chunk, now);
            if rec.running.is_none() {
                rec.scheduled = false;
                if let Err(error) = unthrottle(&cx.policy, &a.name) {
                    failures.push(Failure {
                        array: a.name.clone(),
                        error: CheckError::Policy(error),
                    });
                }
            }
        }
    }
    failures
}

/// The guards' facts of every array, for `Start` and `Resume` only (none otherwise).
fn guard_facts(root: &Root, stat: &MdStat, op: &Op) -> Vec<Facts> {
    if !matches!(op, Op::Start { .. } | Op::Resume { .. }) {
        return Vec::new();
    }
    stat.arrays
        .iter()
        .map(|a| Facts::of(a, member_disks(root, a)))
        .collect()
}

/// The whole disks under `a`'s members ([`crate::sysfs::block::whole_disk`]).
pub fn member_disks(root: &Root, a: &Array) -> Vec<String> {
    a.members
        .iter()
        .map(|m| crate::sysfs::block::whole_disk(root, &m.name))
        .collect()
}

/// The guards of a `Start` or `Resume` on `a` ([`hold`], never the battery: a step by hand or
/// by the schedule after its own battery rule): [`CheckError::Held`] without `force`; with it,
/// the reason is logged and pushed to `overridden`.
fn guarded(
    op: &Op,
    a: &Array,
    facts: &[Facts],
    overridden: &mut Vec<(String, String)>,
) -> Result<(), CheckError> {
    let force = match op {
        Op::Start { force, .. } | Op::Resume { force, .. } => *force,
        _ => return Ok(()),
    };
    let Some(h) = hold(&a.name, facts, false) else {
        return Ok(());
    };
    if !force {
        tracing::info!(array = %a.name, reason = h.code(), "check not started: {h}");
        return Err(CheckError::Held {
            array: a.name.clone(),
            reason: h.to_string(),
        });
    }
    tracing::warn!(array = %a.name, reason = h.code(), "check started by force although {h}");
    overridden.push((a.name.clone(), h.to_string()));
    Ok(())
}

/// The service's upkeep at `now_s` (Unix seconds) on the arrays of `model`, from the record
/// alone, without the lock: a check whose window has ended ([`Upkeep::WindowEnd`]) is paused
/// ([`Op::Pause`]); one that ended or was interrupted, or runs with a position older than
/// [`super::SAVE_INTERVAL_S`], gets [`Op::Status`]. Returns the kernel names paused (their
/// `sync_action` was written) and whether the record changed; `(vec![], false)` when nothing
/// was due (the common case: one small file read). The window end is in the record, so a
/// service stopped across it pauses the check at its first look after the restart.
/// With working hours in the config ([`crate::config::CheckConfig::working`]), a running check
/// throttled by the config (not by an explicit `max`) gets its `check-<array>` lease rewritten
/// when the band changes (at the service's next look: within a progress interval).
///
/// Errors: as [`execute`].
pub fn upkeep_all(
    root: &Root,
    config: &Config,
    model: &MdStat,
    now_s: u64,
) -> Result<(Vec<String>, bool), CheckError> {
    let st = CheckStore::new(root, config).load()?;
    let (held, resumed) = guard_upkeep(root, config, model, &st)?;
    if !held.is_empty() || resumed {
        return Ok((held, true));
    }
    if config.check.working.is_some() || config.check.pressure_target.is_some() {
        rethrottle(root, config, model, &st, &record_key, now_s);
    }
    let mut pause = Vec::new();
    let mut status = false;
    for a in &model.arrays {
        let Some(rec) = st.array.get(&record_key(a)) else {
            continue;
        };
        match upkeep(rec, &a.sync_action(), now_s) {
            Some(Upkeep::WindowEnd) => pause.push(a.name.clone()),
            Some(Upkeep::Record | Upkeep::Save) => status = true,
            None => {}
        }
    }
    if !pause.is_empty() {
        let o = execute_on(root, config, model, &Op::Pause, &pause, Origin::Admin)?;
        for f in &o.failures {
            tracing::warn!("check window end: {f}");
        }
        tracing::info!(arrays = ?pause, "check window ended: paused");
        return Ok((pause, true));
    }
    if status {
        let o = execute_on(root, config, model, &Op::Status, &[], Origin::Admin)?;
        for f in &o.failures {
            tracing::warn!("check record: {f}");
        }
        return Ok((Vec::new(), true));
    }
    Ok((Vec::new(), false))
}

pub use super::{PAUSED_DEGRADED, PAUSED_SHUTDOWN};

/// The guards' upkeep ([`crate::check::guard`]): a running check of ours on an array that
/// degraded is paused (position kept, [`PAUSED_DEGRADED`]) and resumes once its array is
/// redundant and idle and no guard holds it. Returns the arrays paused and whether any
/// resumed. A resume that a guard still holds is tried again at the next look.
///
/// Errors: as [`execute`].
fn guard_upkeep(
    root: &Root,
    config: &Config,
    model: &MdStat,
    st: &CheckState,
) -> Result<(Vec<String>, bool), CheckError> {
    let mut pause = Vec::new();
    let mut resume = Vec::new();
    for a in &model.arrays {
        let Some(rec) = st.array.get(&record_key(a)) else {
            continue;
        };
        let f = Facts::of(a, Vec::new());
        let idle = a.sync_action() == crate::model::SyncAction::Idle;
        if rec.running.is_some() {
            if let Some(h) = must_pause(&f) {
                tracing::warn!(array = %a.name, reason = h.code(), "check paused: {h}; it resumes when the array is redundant again");
                pause.push(a.name.clone());
            }
        } else if rec.position.is_some()
            && idle
            && may_resume(&f)
            && rec.paused_for.as_deref() == Some(PAUSED_DEGRADED)
        {
            resume.push((a.name.clone(), rec.scheduled));
        }
    }
    if !pause.is_empty() {
        let o = execute_on(root, config, model, &Op::Pause, &pause, Origin::Admin)?;
        for f in &o.failures {
            tracing::warn!("pausing a check on a degraded array: {f}");
        }
        mark_paused(root, config, model, &pause, PAUSED_DEGRADED)?;
    }
    let mut resumed = false;
    for (name, scheduled) in resume {
        let op = Op::Resume {
            max: None,
            force: false,
        };
        // The schedule's own check stays the schedule's.
        let origin = if scheduled {
            Origin::Schedule
        } else {
            Origin::Admin
        };
        let o = execute_on(
            root,
            config,
            model,
            &op,
            std::slice::from_ref(&name),
            origin,
        )?;
        match o.failures.first() {
            None => {
                tracing::info!(array = %name, "check resumed: the array is redundant again");
                resumed = true;
            }
            Some(f) => tracing::debug!("check not resumed yet: {f}"),
        }
    }
    Ok((pause, resumed))
}

/// Sets [`ArrayRecord::paused_for`] to `why` for the arrays `names` (kernel names, of
/// `model`) that have a saved position and no running check, under the record's lock.
///
/// Errors: the record cannot be locked, read or saved ([`CheckError::State`]).
pub fn mark_paused(
    root: &Root,
    config: &Config,
    model: &MdStat,
    names: &[String],
    why: &str,
) -> Result<(), CheckError> {
    let store = CheckStore::new(root, config);
    let lock = store.lock()?;
    let mut st = lock.load()?;
    for a in model.arrays.iter().filter(|a| names.contains(&a.name)) {
        if let Some(rec) = st.array.get_mut(&record_key(a)) {
            if rec.running.is_none() && rec.position.is_some() {
                rec.paused_for = Some(why.to_string());
            }
        }
    }
    Ok(lock.save(&st)?)
}

/// The service's stop (SIGTERM, or logind's `PrepareForShutdown`): every check this tool
/// runs is paused (position saved before `idle`, throttle released) and marked
/// [`PAUSED_SHUTDOWN`], so that it resumes after the restart: by the schedule for a scheduled
/// check, at the service's first look otherwise. Returns the arrays paused. Two small file
/// writes per array: never waits for the check.
///
/// Errors: as [`execute`].
pub fn pause_for_shutdown(root: &Root, config: &Config) -> Result<Vec<String>, CheckError> {
    let st = CheckStore::new(root, config).load()?;
    let stat = crate::sysfs::collect(root)?;
    let running: Vec<String> = stat
        .arrays
        .iter()
        .filter(|a| {
            st.array
                .get(&record_key(a))
                .is_some_and(|r| r.running.is_some())
        })
        .map(|a| a.name.clone())
        .collect();
    if running.is_empty() {
        return Ok(running);
    }
    let o = execute_on(root, config, &stat, &Op::Pause, &running, Origin::Admin)?;
    for f in &o.failures {
        tracing::warn!("pausing a check at shutdown: {f}");
    }
    mark_paused(root, config, &stat, &running, PAUSED_SHUTDOWN)?;
    tracing::info!(arrays = ?running, "checks paused for the shutdown; they resume after it");
    Ok(running)
}

/// At the service's start: each check it paused for its own stop, or that the machine went down
/// under ([`PAUSED_SHUTDOWN`]), and that
/// the schedule does not own resumes from its position; the schedule resumes its own in its
/// next window. One a guard holds now is handed to the guard's upkeep ([`PAUSED_DEGRADED`]:
/// resumed once its array is redundant). Returns the arrays resumed.
///
/// Errors: as [`execute`].
pub fn resume_after_shutdown(root: &Root, config: &Config) -> Result<Vec<String>, CheckError> {
    let stat = crate::sysfs::collect(root)?;
    // First what md did while the service was away: a check the machine went down under (a
    // crash, a power loss) is recorded as cut off ([`super::reconcile`]), and resumes below.
    let st = execute_on(root, config, &stat, &Op::Status, &[], Origin::Admin)?.state;
    let mut resumed = Vec::new();
    for a in &stat.arrays {
        let due = st.array.get(&record_key(a)).is_some_and(|r| {
            r.paused_for.as_deref() == Some(PAUSED_SHUTDOWN) && !r.scheduled && r.position.is_some()
        });
        if !due {
            continue;
        }
        let op = Op::Resume {
            max: None,
            force: false,
        };
        let name = a.name.clone();
        let o = execute_on(
            root,
            config,
            &stat,
            &op,
            std::slice::from_ref(&name),
            Origin::Admin,
        )?;
        match o.failures.first() {
            None => {
                tracing::info!(array = %name, "check resumed after the service's stop");
                resumed.push(name);
            }
            Some(f) => {
                tracing::warn!("check not resumed after the service's stop: {f}");
                if matches!(f.error, CheckError::Held { .. }) {
                    mark_paused(root, config, &stat, &[name], PAUSED_DEGRADED)?;
                }
            }
        }
    }
    Ok(resumed)
}

/// Why a check would be held on each array of `model` now, for the views (`check status`,
/// D-Bus `CheckHeld`) ([`crate::check::guard::hold`], with
/// the battery rule of scheduled checks), by kernel name.
pub fn holds(root: &Root, model: &MdStat) -> BTreeMap<String, String> {
    let facts: Vec<Facts> = model
        .arrays
        .iter()
        .map(|a| Facts::of(a, member_disks(root, a)))
        .collect();
    let battery =
        crate::sysfs::pressure::on_battery(&crate::sysfs::pressure::read_power_supplies(root));
    model
        .arrays
        .iter()
        .filter_map(|a| Some((a.name.clone(), hold(&a.name, &facts, battery)?.to_string())))
        .collect()
}

fn select<'a>(
    root: &Root,
    stat: &'a MdStat,
    names: &[String],
    op: &Op,
    st: &CheckState,
) -> Result<Vec<&'a Array>, CheckError> {
    if names.is_empty() {
        return Ok(stat
            .arrays
            .iter()
            .filter(|a| redundant(a))
            .filter(|a| match op {
                Op::Resume { .. } => st
                    .array
                    .get(&record_key(a))
                    .is_some_and(|r| r.position.is_some()),
                _ => true,
            })
            .collect());
    }
    let known: Vec<String> = stat.arrays.iter().map(|a| a.name.clone()).collect();
    names
        .iter()
        .map(|n| {
            // `/dev/md/NAME`, `md/NAME` and metadata names as `status` takes them.
            let n = crate::array_names::resolve_array(root, n, &known)
                .unwrap_or_else(|_| n.strip_prefix("/dev/").unwrap_or(n).to_string());
            let n = n.as_str();
            stat.arrays
                .iter()
                .find(|a| a.name == n)
                .ok_or_else(|| CheckError::NoArray(n.to_string()))
        })
        .collect()
}

fn step(
    cx: &Step<'_>,
    op: &Op,
    a: &Array,
    st: &mut CheckState,
    now: u64,
) -> Result<(), CheckError> {
    let (root, policy, config) = (cx.root, &cx.policy, cx.config);
    let rec: &mut ArrayRecord = st.array.entry(record_key(a)).or_default();
    rec.name = a.name.clone();
    if *op == Op::Status {
        // Nothing but the record, done before the steps.
        return Ok(());
    }
    let o = observe(root, a);
    let idle = o.sync_action == SyncAction::Idle;
    let busy = || CheckError::Busy {
        array: a.name.clone(),
        action: o.sync_action.to_string(),
    };
    match op {
        Op::Start {
            repair,
            max,
            until_s,
            ..
        } => {
            if !idle {
                return Err(busy());
            }
            let action = if *repair {
                CheckAction::Repair
            } else {
                CheckAction::Check
            };
            let next = ArrayRecord {
                position: None,
                running: Some(action),
                found_before: 0,
                until_s: *until_s,
                max: *max,
                ..rec.clone()
            };
            cx.store.saveable(&next)?;
            throttle(
                policy,
                &a.name,
                max.or_else(|| start_max(root, config, now)),
            )?;
            write_attr(root, &a.name, "sync_min", "0")?;
            *rec = next;
            write_sync_action(root, &a.name, &action.sync_action())?;
        }
        Op::Resume { max, .. } => {
            if !idle {
                return Err(busy());
            }
            let Some(p) = rec.position.clone() else {
                return Err(CheckError::NothingToResume(a.name.clone()));
            };
            let max = max.or(rec.max);
            throttle(
                policy,
                &a.name,
                max.or_else(|| start_max(root, config, now)),
            )?;
            write_attr(root, &a.name, "sync_min", &p.sectors.to_string())?;
            rec.running = Some(p.action);
            rec.found_before = p.mismatch_cnt;
            rec.until_s = None;
            rec.max = max;
            write_sync_action(root, &a.name, &p.action.sync_action())?;
        }
        Op::Pause => pause(cx, a, st, now)?,
        Op::Cancel => cancel(root, policy, a, &o, rec)?,
        Op::Status => {}
    }
    Ok(())
}

/// `Pause`: the position saved to the record file before `idle` is written, then the throttle
/// released. Nothing when no check or repair runs or was ours. The position is the point md
/// has reached as read just before ([`reread`], [`Array::sync_reached_sectors`]: mdstat's
/// completed count where it is ahead of md's 1/16 checkpoint), rounded down for `md/sync_min`
/// ([`resume_point`]).
fn pause(cx: &Step<'_>, a: &Array, st: &mut CheckState, now: u64) -> Result<(), CheckError> {
    let a = &reread(cx.root, a);
    let o = observe(cx.root, a);
    let chunk = a.sysfs.as_ref().and_then(|s| s.chunk_size_bytes);
    let rec: &mut ArrayRecord = st.array.entry(record_key(a)).or_default();
    let seen = CheckAction::running(&o.sync_action);
    let Some(action) = rec.running.or(seen) else {
        return Ok(());
    };
    let ours = o.sync_action == action.sync_action();
    let found = rec.found(o.mismatch_cnt);
    if ours {
        let done = o.reached.unwrap_or(o.sync_min);
        rec.position = Some(Position {
            action,
            sectors: resume_point(done, chunk),
            total_sectors: o.completed.map_or(0, |c| c.1),
            saved_s: now,
            mismatch_cnt: found,
        });
    } else if o.sync_action == SyncAction::Idle && o.sync_min > 0 && rec.running.is_some() {
        // md stopped it itself (a member failed): it kept the point reached in sync_min.
        let total = rec.position.as_ref().map_or(0, |p| p.total_sectors);
        rec.position = Some(Position {
            action,
            sectors: resume_point(o.sync_min, chunk),
            total_sectors: total,
            saved_s: now,
            mismatch_cnt: found,
        });
    }
    rec.running = None;
    rec.found_before = 0;
    rec.until_s = None;
    // The position is on disk before anything else is written.
    cx.lock.save(st)?;
    // Only our own check is stopped: `idle` would also interrupt a recovery md started since.
    if ours {
        write_sync_action(cx.root, &a.name, &SyncAction::Idle)?;
    }
    Ok(unthrottle(&cx.policy, &a.name)?)
}

/// `a` as md shows it now: `/proc/mdstat` and its sysfs read again, for the position a pause
/// saves (a step's model may be seconds old, and mdstat's progress older than the check now
/// running). `a` itself where mdstat cannot be read or no longer lists it; sysfs only where `a`
/// had it read.
fn reread(root: &Root, a: &Array) -> Array {
    let now = crate::sysfs::read_mdstat(root)
        .ok()
        .and_then(|s| s.arrays.into_iter().find(|x| x.name == a.name));
    let mut now = now.unwrap_or_else(|| a.clone());
    now.sysfs = a
        .sysfs
        .as_ref()
        .map(|_| crate::sysfs::read_array(root, &a.name));
    now
}

/// `Cancel`: a running check or repair stopped, `sync_min` back to 0, the record's position
/// dropped and the throttle released.
fn cancel(
    root: &Root,
    policy: &Policy,
    a: &Array,
    o: &Observed,
    rec: &mut ArrayRecord,
) -> Result<(), CheckError> {
    let checking = CheckAction::running(&o.sync_action).is_some();
    if checking {
        write_sync_action(root, &a.name, &SyncAction::Idle)?;
    }
    // md refuses `sync_min` (EBUSY) while another sync runs; that one is not ours,
    // and `Start` writes 0 again before the next check.
    if checking || o.sync_action == SyncAction::Idle {
        write_attr(root, &a.name, "sync_min", "0")?;
    }
    rec.position = None;
    rec.running = None;
    rec.found_before = 0;
    rec.until_s = None;
    rec.max = None;
    Ok(unthrottle(policy, &a.name)?)
}

#[cfg(all(test, feature = "service"))]
mod tests {
    use super::*;
    use std::time::Duration;

    fn put(root: &std::path::Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn md0(root: &std::path::Path, members: &str, action: &str, completed: &str, sync_min: &str) {
        put(root, "proc/mdstat", &format!("Personalities : [raid1]\nmd0 : active raid1 sdb1[1] sda1[0]\n      1046528 blocks super 1.2 {members}\n\nunused devices: <none>\n"));
        put(root, "proc/sys/dev/raid/speed_limit_min", "1000\n");
        put(root, "proc/sys/dev/raid/speed_limit_max", "200000\n");
        for (f, v) in [
            ("sync_action", action),
            ("sync_min", sync_min),
            ("sync_completed", completed),
            ("uuid", "u-0"),
            ("level", "raid1"),
            ("mismatch_cnt", "0"),
        ] {
            put(root, &format!("sys/block/md0/md/{f}"), &format!("{v}\n"));
        }
    }

    /// A tree with md0 idle: the directory (removed when dropped), its root and its config.
    fn idle_md0() -> (tempfile::TempDir, Root, Config) {
        let d = tempfile::tempdir().unwrap();
        md0(d.path(), "[2/2] [UU]", "idle", "none", "0");
        let root = Root::new(d.path());
        let config = Config::load(&root).unwrap();
        (d, root, config)
    }

    /// `check start` without options.
    fn start_op() -> Op {
        Op::Start {
            repair: false,
            max: None,
            until_s: None,
            force: false,
        }
    }

    fn read(root: &std::path::Path, f: &str) -> String {
        std::fs::read_to_string(root.join("sys/block/md0/md").join(f))
            .unwrap()
            .trim()
            .to_string()
    }

    /// md stops a check itself when a member fails (sync_min keeps the point reached): the
    /// service records it as paused for the degradation, starts nothing while the array is
    /// degraded, and resumes from that point once it is whole and idle again.
    #[test]
    fn a_check_paused_by_a_degradation_resumes_when_the_array_is_whole() {
        let (d, root, config) = idle_md0();
        let r = d.path();
        let start = start_op();
        let o = execute(&root, &config, &start, &["md0".into()], Origin::Admin).unwrap();
        assert!(o.failures.is_empty(), "{:?}", o.failures);
        assert_eq!(read(r, "sync_action"), "check");
        // A member fails; md stops the check at 4096 and says so in sync_min.
        md0(r, "[2/1] [U_]", "idle", "none", "4096");
        let model = crate::sysfs::collect(&root).unwrap();
        let (paused, changed) = upkeep_all(&root, &config, &model, 100).unwrap();
        assert_eq!((paused, changed), (vec!["md0".to_string()], true));
        let st = CheckStore::new(&root, &config).load().unwrap();
        let rec = st.array.values().next().unwrap();
        assert_eq!(rec.paused_for.as_deref(), Some(PAUSED_DEGRADED));
        assert_eq!(rec.position.as_ref().map(|p| p.sectors), Some(4096));
        // Still degraded: nothing resumes; a start by hand is refused with the reason.
        let model = crate::sysfs::collect(&root).unwrap();
        assert_eq!(
            upkeep_all(&root, &config, &model, 101).unwrap().0,
            Vec::<String>::new()
        );
        assert_eq!(read(r, "sync_action"), "idle");
        let o = execute(&root, &config, &start, &["md0".into()], Origin::Admin).unwrap();
        assert_eq!(
            o.failures[0].to_string(),
            "md0: check not started: md0 is degraded (1 member(s) missing) (force overrides)"
        );
        // Whole again: resumed from the position.
        md0(r, "[2/2] [UU]", "idle", "none", "4096");
        let model = crate::sysfs::collect(&root).unwrap();
        assert!(upkeep_all(&root, &config, &model, 102).unwrap().1);
        assert_eq!(read(r, "sync_action"), "check");
        assert_eq!(read(r, "sync_min"), "4096");
        let st = CheckStore::new(&root, &config).load().unwrap();
        assert_eq!(st.array.values().next().unwrap().paused_for, None);
    }

    /// A member fails and the service looks while md cleans up after the check it stopped:
    /// mdstat prints the check at its total and `sync_action` still says `check`, while
    /// `sync_completed` and `sync_min` hold where md got to. The pause keeps that point, not
    /// the array's end (a resume there would check nothing).
    #[test]
    fn a_degradation_seen_while_md_cleans_up_keeps_the_point_reached() {
        let (d, root, config) = idle_md0();
        let r = d.path();
        execute(&root, &config, &start_op(), &["md0".into()], Origin::Admin).unwrap();
        md0(r, "[2/1] [U_]", "check", "4096 / 2093056", "4096");
        put(r, "proc/mdstat", "Personalities : [raid1]\nmd0 : active raid1 sdb1[1](F) sda1[0]\n      1046528 blocks super 1.2 [2/1] [U_]\n      [====================>]  check =100.0% (1046528/1046528) finish=0.0min speed=5000K/sec\n\nunused devices: <none>\n");
        let model = crate::sysfs::collect(&root).unwrap();
        assert_eq!(upkeep_all(&root, &config, &model, 100).unwrap().0, ["md0"]);
        let st = CheckStore::new(&root, &config).load().unwrap();
        let rec = st.array.values().next().unwrap();
        assert_eq!(rec.paused_for.as_deref(), Some(PAUSED_DEGRADED));
        assert_eq!(rec.position.as_ref().map(|p| p.sectors), Some(4096));
    }

    /// A stop pauses the running check (the position before `idle`), never touching a sync md
    /// runs that is not ours; the next start resumes a check started by hand.
    #[test]
    fn the_stop_pauses_and_the_next_start_resumes() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        md0(r, "[2/2] [UU]", "idle", "none", "0");
        let root = Root::new(r);
        let config = Config::load(&root).unwrap();
        assert_eq!(
            pause_for_shutdown(&root, &config).unwrap(),
            Vec::<String>::new()
        );
        let start = Op::Start {
            repair: false,
            max: None,
            until_s: None,
            force: false,
        };
        execute(&root, &config, &start, &["md0".into()], Origin::Admin).unwrap();
        md0(r, "[2/2] [UU]", "check", "8192 / 2093056", "0");
        assert_eq!(pause_for_shutdown(&root, &config).unwrap(), ["md0"]);
        assert_eq!(read(r, "sync_action"), "idle");
        let st = CheckStore::new(&root, &config).load().unwrap();
        let rec = st.array.values().next().unwrap();
        assert_eq!(rec.paused_for.as_deref(), Some(PAUSED_SHUTDOWN));
        assert_eq!(rec.position.as_ref().map(|p| p.sectors), Some(8192));
        md0(r, "[2/2] [UU]", "idle", "none", "8192");
        assert_eq!(resume_after_shutdown(&root, &config).unwrap(), ["md0"]);
        assert_eq!(read(r, "sync_action"), "check");
        assert_eq!(read(r, "sync_min"), "8192");
        // A recovery md started meanwhile is not ours: the stop leaves it running.
        md0(r, "[2/2] [UU]", "recover", "100 / 2093056", "8192");
        pause_for_shutdown(&root, &config).unwrap();
        assert_eq!(read(r, "sync_action"), "recover");
    }

    /// md counts `mismatch_cnt` from 0 at each run of a check: a check paused with 128
    /// mismatched sectors found and resumed to its end, where md's own count is 0, records 128;
    /// so does one whose run the machine went down under after the position (with its count)
    /// was saved.
    #[test]
    fn a_resumed_check_records_the_mismatches_of_all_its_runs() {
        let (d, root, config) = idle_md0();
        let r = d.path();
        let start = start_op();
        let resume = Op::Resume {
            max: None,
            force: false,
        };
        let one = ["md0".to_string()];
        execute(&root, &config, &start, &one, Origin::Admin).unwrap();
        md0(r, "[2/2] [UU]", "check", "8192 / 2093056", "0");
        put(r, "sys/block/md0/md/mismatch_cnt", "128\n");
        execute(&root, &config, &Op::Pause, &one, Origin::Admin).unwrap();
        let st = CheckStore::new(&root, &config).load().unwrap();
        let p = st.array.values().next().unwrap().position.clone().unwrap();
        assert_eq!((p.sectors, p.mismatch_cnt), (8192, 128));
        // Resumed: md's count starts again at 0; a save while it runs keeps the sum.
        md0(r, "[2/2] [UU]", "idle", "none", "8192");
        execute(&root, &config, &resume, &one, Origin::Admin).unwrap();
        md0(r, "[2/2] [UU]", "check", "16384 / 2093056", "8192");
        put(r, "sys/block/md0/md/last_sync_action", "check\n");
        let o = execute(&root, &config, &Op::Status, &[], Origin::Admin).unwrap();
        let p = o
            .state
            .array
            .values()
            .next()
            .unwrap()
            .position
            .clone()
            .unwrap();
        assert_eq!((p.sectors, p.mismatch_cnt), (16384, 128));
        // The machine goes down; after the boot the check resumes with the sum saved.
        md0(r, "[2/2] [UU]", "idle", "none", "0");
        put(r, "sys/block/md0/md/last_sync_action", "idle\n");
        assert_eq!(resume_after_shutdown(&root, &config).unwrap(), ["md0"]);
        assert_eq!(read(r, "sync_min"), "16384");
        // It ends; md's own count of this last run is 8.
        md0(r, "[2/2] [UU]", "idle", "none", "0");
        put(r, "sys/block/md0/md/mismatch_cnt", "8\n");
        put(r, "sys/block/md0/md/last_sync_action", "check\n");
        let o = execute(&root, &config, &Op::Status, &[], Origin::Admin).unwrap();
        let rec = o.state.array.values().next().unwrap();
        assert_eq!(rec.last.as_ref().map(|l| l.mismatch_cnt), Some(136));
        assert_eq!(rec.found_before, 0);
        // A new start counts from 0.
        execute(&root, &config, &start, &one, Origin::Admin).unwrap();
        md0(r, "[2/2] [UU]", "idle", "none", "0");
        put(r, "sys/block/md0/md/mismatch_cnt", "0\n");
        let o = execute(&root, &config, &Op::Status, &[], Origin::Admin).unwrap();
        let rec = o.state.array.values().next().unwrap();
        assert_eq!(rec.last.as_ref().map(|l| l.mismatch_cnt), Some(0));
    }

    /// The machine goes down under a running check (a crash, a power loss: no stop ran). After
    /// the boot md shows the array idle with `sync_min` 0 and `mismatch_cnt` 0, as after a
    /// complete check, but `last_sync_action` says no sync ran since the assembly: the next
    /// start records no result and resumes from the last saved position. A check md finished
    /// (`last_sync_action` `check`) is recorded as before, with its mismatch count.
    #[test]
    fn a_check_the_machine_went_down_under_resumes_and_records_no_result() {
        let (d, root, config) = idle_md0();
        let r = d.path();
        let start = start_op();
        execute(&root, &config, &start, &["md0".into()], Origin::Admin).unwrap();
        md0(r, "[2/2] [UU]", "check", "65536 / 2093056", "0");
        put(r, "sys/block/md0/md/last_sync_action", "check\n");
        execute(&root, &config, &Op::Status, &[], Origin::Admin).unwrap();
        // The boot: assembled again, md forgot the check (6.1 prints `none`, 6.11+ `idle`).
        for forgot in ["idle", "none"] {
            md0(r, "[2/2] [UU]", "idle", "none", "0");
            put(
                r,
                "sys/block/md0/md/last_sync_action",
                &format!("{forgot}\n"),
            );
            assert_eq!(resume_after_shutdown(&root, &config).unwrap(), ["md0"]);
            assert_eq!(read(r, "sync_action"), "check");
            assert_eq!(read(r, "sync_min"), "65536");
            let st = CheckStore::new(&root, &config).load().unwrap();
            let rec = st.array.values().next().unwrap();
            assert_eq!(rec.last, None, "a forgotten check recorded a result");
            assert_eq!(rec.running, Some(CheckAction::Check));
        }
        // The resumed check ends: md resets sync_min and still names the check.
        md0(r, "[2/2] [UU]", "idle", "none", "0");
        put(r, "sys/block/md0/md/mismatch_cnt", "128\n");
        put(r, "sys/block/md0/md/last_sync_action", "check\n");
        let o = execute(&root, &config, &Op::Status, &[], Origin::Admin).unwrap();
        let rec = o.state.array.values().next().unwrap();
        assert_eq!(rec.last.as_ref().map(|l| l.mismatch_cnt), Some(128));
        assert_eq!(rec.position, None);
    }

    #[test]
    fn upkeep_saves_the_running_position_and_pauses_at_the_window_end() {
        let mut sim = crate::sim::Sim::create().unwrap();
        let root = sim.root().clone();
        let config = Config::load(&root).unwrap();
        let end = crate::host::unix_now_s() + 3600;
        let start = Op::Start {
            repair: false,
            max: None,
            until_s: Some(end),
            force: false,
        };
        let o = execute(&root, &config, &start, &["md0".into()], Origin::Admin).unwrap();
        assert!(o.failures.is_empty(), "{:?}", o.failures);
        sim.absorb_writes().unwrap();
        sim.step(Duration::from_millis(100)).unwrap();
        let model = crate::sysfs::collect(&root).unwrap();
        assert_eq!(
            upkeep_all(&root, &config, &model, 10).unwrap(),
            (vec![], true)
        );
        let st = CheckStore::new(&root, &config).load().unwrap();
        let rec = &st.array[&record_key(&model.arrays[0])];
        assert_eq!(rec.position.as_ref().map(|p| p.sectors), Some(40_000));
        // Saved recently: nothing due before the window end.
        let now = rec.position.as_ref().unwrap().saved_s;
        assert_eq!(
            upkeep_all(&root, &config, &model, now).unwrap(),
            (vec![], false)
        );
        let (paused, _) = upkeep_all(&root, &config, &model, end).unwrap();
        assert_eq!(paused, ["md0"]);
        let t =
            std::fs::read_to_string(crate::sysfs::attr_path(&root, "md0", "sync_action")).unwrap();
        assert_eq!(t, "idle\n");
    }
}
