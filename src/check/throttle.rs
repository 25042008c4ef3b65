//! The throttle of a check: a lease `check-<array>` (kind admin, no owner) on the array's
//! `md/sync_speed_max`, from an explicit `max` or the config's `check_max` (and
//! `check_max_working` inside working hours), taken at start and resume, released on pause,
//! cancel and when the check is seen finished, and rewritten by the service's upkeep when the
//! working-hours band changes, or, with `[check] pressure_target`, by the pressure controller
//! ([`crate::pressure`]): its first decision before the check starts (`start_max`), then one
//! at each look of the service while the check runs: the limit, and at the controller's floor
//! a low `md/sync_io_depth` (Linux 6.16+) in the same lease.

use super::CheckState;
use crate::config::Config;
use crate::host::Root;
use crate::model::{Array, MdStat};
use crate::policy::{LeaseKind, LeaseRequest, Limits, Owner, Policy, PolicyError};
use crate::pressure::{confirm, decide, sample, Mark, Reading, Stall, Tuning};
use crate::sysfs::pressure::{IoPressure, PsiUnavailable};
use std::collections::BTreeMap;

/// The throttle lease's holder id for `array`: `check-<array>`
/// ([`crate::policy::Holder::check_throttle`]).
pub fn holder(array: &str) -> String {
    crate::policy::Holder::check_throttle(array).to_string()
}

pub use crate::pressure::Note;

/// The notes of every array with a throttled check, by kernel name.
pub type Notes = crate::throttle_notes::Notes;

/// The check throttle's runtime file of [`Note`]s ([`crate::throttle_notes`]):
/// `check-throttle.json` beside the policy's state file (default
/// `/run/mdpilot/check-throttle.json`); a missing or unparsable file loads as no notes.
pub const NOTES: crate::throttle_notes::NotesFile =
    crate::throttle_notes::NotesFile("check-throttle.json");

/// Rewrites the `check-<array>` lease of each running check that follows the config's throttle
/// (its record has no explicit `max`): with `[check] pressure_target`, to the pressure
/// controller's decision ([`decide`] on the pressure since the last look, from
/// `/proc/pressure/io` under `root` and the wall clock), read back ([`confirm`]) and noted
/// ([`Note`]); otherwise to [`configured_max`] at `now_s` when it differs from the lease
/// (working hours began or ended). `key` is the record key of an array.
/// Failures are logged; the next look tries again.
pub(super) fn rethrottle(
    root: &Root,
    config: &Config,
    model: &MdStat,
    st: &CheckState,
    key: &dyn Fn(&Array) -> String,
    now_s: u64,
) {
    let t = i64::try_from(now_s).unwrap_or(i64::MAX);
    let tuning = config
        .check
        .pressure_tuning(t, crate::host::utc_offset_s(t));
    let policy = Policy::new(root.clone(), config.policy_settings(root));
    let Ok(view) = policy.show() else {
        return;
    };
    let look = tuning.map(|_| Look {
        pressure: crate::sysfs::pressure::read_io_pressure(root),
        // Read right after the counters: the interval's end.
        now_ms: crate::host::unix_now_us() / 1000,
        now_s,
    });
    let old = if tuning.is_some() {
        NOTES.load(root, config)
    } else {
        Notes::new()
    };
    let mut notes = Notes::new();
    for a in &model.arrays {
        let Some(rec) = st.array.get(&key(a)) else {
            continue;
        };
        let Some(action) = rec.running else {
            continue;
        };
        let now_action = a.sysfs.as_ref().and_then(|s| s.sync_action.as_ref());
        if rec.max.is_some() || now_action.map(|w| w.as_str()) != Some(action.as_str()) {
            continue;
        }
        let have = held(&view, &a.name);
        // The kernel has sync_io_depth (Linux 6.16+, global and per array), else none is asked.
        let depth_knob = view.sync_io_depth.is_some();
        let want = match (&tuning, &look) {
            (Some(tu), Some(look)) => {
                let step = Step {
                    have,
                    old: old.get(&a.name),
                    depth_knob,
                };
                let note = pressure_step(config, tu, look, a, &step);
                let want = (Some(note.limit_kib_s), note.io_depth);
                notes.insert(a.name.clone(), note);
                want
            }
            _ => (configured_max(config, now_s), None),
        };
        if have.unwrap_or_default() == want {
            continue;
        }
        if tuning.is_none() {
            tracing::info!(array = %a.name, from = ?have.and_then(|h| h.0), to = ?want.0, "check throttle follows working hours");
        }
        let r = match want {
            (Some(max), depth) => lease(&policy, &a.name, max, depth),
            (None, _) => unthrottle(&policy, &a.name),
        };
        if let Err(e) = r {
            tracing::warn!(
                "{}: check throttle: {}",
                a.name,
                crate::error::error_chain(&e)
            );
        }
    }
    if tuning.is_some() && notes != old {
        NOTES.save(root, config, &notes);
    }
}

/// What the `check-<array>` lease holds for `array` in `view`: (`max` KiB/s, `io_depth`);
/// `None` without the lease.
fn held(view: &crate::policy::PolicyView, array: &str) -> Option<(Option<u64>, Option<u64>)> {
    let h = holder(array);
    view.leases
        .iter()
        .find(|l| l.holder == h)
        .and_then(|l| l.arrays.get(array))
        .map(|l| (l.max, l.io_depth))
}

/// One look's inputs to the pressure throttle: `/proc/pressure/io` (or why it is missing),
/// read at `now_ms` (Unix ms) during the look at `now_s` (Unix s).
struct Look {
    pressure: Result<IoPressure, PsiUnavailable>,
    now_ms: u64,
    now_s: u64,
}

/// What one array's throttle had before this look: the lease's limit and io depth (`None`:
/// no lease), the last note, and whether md has `sync_io_depth` for the array.
struct Step<'a> {
    have: Option<(Option<u64>, Option<u64>)>,
    old: Option<&'a Note>,
    depth_knob: bool,
}

/// One pressure decision for `a`'s running check: the new note, logged when the limit changes
/// or stops taking effect. The io depth is asked for only where md has the knob. A look
/// sooner than [`crate::pressure::MIN_INTERVAL_MS`] after the last keeps the last note.
fn pressure_step(config: &Config, tu: &Tuning, look: &Look, a: &Array, step: &Step<'_>) -> Note {
    let (have, old) = (step.have, step.old);
    let now_s = look.now_s;
    let have_max = have.and_then(|h| h.0);
    let mark = look.pressure.as_ref().ok().map(|p| Mark {
        some_total_us: p.some_total_us,
        full_total_us: p.full_total_us,
        at_ms: look.now_ms,
    });
    let s = match (&look.pressure, &mark) {
        (Ok(p), Some(m)) => {
            let avg10 = match tu.target.stall {
                Stall::Full => p.full_avg10,
                Stall::Some => p.some_avg10,
            };
            match (
                sample(tu.target.stall, old.and_then(|n| n.mark.as_ref()), m, avg10),
                old,
            ) {
                (Reading::Sample(s), _) => Ok(s),
                (Reading::TooSoon, Some(n)) => return n.clone(),
                (Reading::TooSoon, None) => match sample(tu.target.stall, None, m, avg10) {
                    Reading::Sample(s) => Ok(s),
                    Reading::TooSoon => Err("no sample".to_string()),
                },
            }
        }
        (Err(e), _) => Err(e.to_string()),
        (Ok(_), None) => Err("no sample".to_string()),
    };
    let since = old.map(|n| now_s.saturating_sub(n.changed_s));
    let fixed = configured_max(config, now_s).unwrap_or(tu.ceiling_kib_s);
    // The first look of a check decides afresh ([`start_max`]'s lease is that same decision).
    let prev = crate::pressure::State {
        limit_kib_s: have_max.filter(|_| old.is_some()),
        quiet_looks: old.map_or(0, |n| n.quiet_looks),
    };
    let mut d = decide(tu, &prev, s, fixed);
    if !step.depth_knob {
        d.io_depth = None;
    }
    let sys = a.sysfs.as_ref();
    let not_applied = have_max
        .filter(|&h| h == d.limit_kib_s)
        .and_then(|h| {
            confirm(
                h,
                sys.and_then(|s| s.sync_speed_max).map(|l| l.kib_s),
                a.sync_speed_kib_s(),
                sys.and_then(|s| s.sync_speed_min).map(|l| l.kib_s),
                since.unwrap_or(0),
            )
        })
        .map(|n| n.to_string());
    let p = look.pressure.as_ref().ok();
    let mut note = Note {
        limit_kib_s: d.limit_kib_s,
        decision: d.why.code().to_string(),
        why: d.explain(&tu.target),
        pressure_pct: d.why.pct(),
        source: d.signal.map(|s| s.source().to_string()),
        interval_ms: d.signal.and_then(|s| s.interval_ms()),
        full_avg10: p.map(|p| p.full_avg10),
        some_avg10: p.map(|p| p.some_avg10),
        io_depth: d.io_depth,
        changed_s: old.map_or(now_s, |n| n.changed_s),
        not_applied,
        decisions: old.map(|n| n.decisions.clone()).unwrap_or_default(),
        mark,
        quiet_looks: d.quiet_looks,
    };
    log_change(a, have, old, &mut note, now_s);
    note
}

/// Counts and logs a change of the limit or io depth (against the lease's `have`), or the
/// check's first decision (no `old` note), and a limit that stopped taking effect.
fn log_change(
    a: &Array,
    have: Option<(Option<u64>, Option<u64>)>,
    old: Option<&Note>,
    note: &mut Note,
    now_s: u64,
) {
    let have_max = have.and_then(|h| h.0);
    if have_max != Some(note.limit_kib_s) || old.is_none() {
        note.changed_s = now_s;
        *note.decisions.entry(note.decision.clone()).or_default() += 1;
        tracing::info!(array = %a.name, from = ?have_max, to = note.limit_kib_s, decision = %note.decision, "check throttle: {}", note.why);
    } else if have.and_then(|h| h.1) != note.io_depth {
        tracing::info!(array = %a.name, io_depth = ?note.io_depth, "check throttle: {}", note.why);
    }
    if note.not_applied.is_some() && note.not_applied != old.and_then(|n| n.not_applied.clone()) {
        tracing::warn!(
            array = %a.name,
            "check throttle: the limit {} KiB/s did not take effect: {}",
            note.limit_kib_s,
            note.not_applied.as_deref().unwrap_or_default()
        );
    }
}

/// The config's throttle at `now` (Unix seconds, local time): [`crate::config::CheckConfig::check_max_at`].
pub(super) fn configured_max(config: &Config, now: u64) -> Option<u64> {
    let t = i64::try_from(now).unwrap_or(i64::MAX);
    config.check.check_max_at(t, crate::host::utc_offset_s(t))
}

/// The limit a check that follows the config's throttle starts (or resumes) under, KiB/s:
/// with `[check] pressure_target`, the pressure controller's first decision from `avg10` of
/// `/proc/pressure/io` under `root` (its first look: [`crate::resync_throttle::controller`];
/// the fixed limit without PSI), so the check never runs unthrottled until the service's next
/// look; otherwise [`configured_max`] at `now_s`. `None`: no throttle (md's own limits).
pub(super) fn start_max(root: &Root, config: &Config, now_s: u64) -> Option<u64> {
    let t = i64::try_from(now_s).unwrap_or(i64::MAX);
    let fixed = configured_max(config, now_s);
    let Some(tu) = config
        .check
        .pressure_tuning(t, crate::host::utc_offset_s(t))
    else {
        return fixed;
    };
    let fixed = fixed.unwrap_or(tu.ceiling_kib_s);
    let Ok(p) = crate::sysfs::pressure::read_io_pressure(root) else {
        return Some(fixed);
    };
    // The controller's first look (no lease, no note): never too soon, so always a decision.
    let now_ms = crate::host::unix_now_us() / 1000;
    Some(
        crate::resync_throttle::controller(&tu, &p, now_ms, None, None)
            .map_or(fixed, |(d, _)| d.limit_kib_s),
    )
}

pub(super) fn throttle(policy: &Policy, array: &str, max: Option<u64>) -> Result<(), PolicyError> {
    match max {
        Some(max) => lease(policy, array, max, None),
        None => Ok(()),
    }
}

/// Takes (or rewrites) the `check-<array>` lease: `md/sync_speed_max` = `max` KiB/s and, with
/// `io_depth`, `md/sync_io_depth` (never written on a kernel without it; `None` gives md's
/// depth back).
fn lease(policy: &Policy, array: &str, max: u64, io_depth: Option<u64>) -> Result<(), PolicyError> {
    policy.acquire(LeaseRequest {
        holder: holder(array),
        kind: LeaseKind::Admin,
        owner: Owner::None,
        global: Limits::default(),
        arrays: BTreeMap::from([(
            array.to_string(),
            Limits {
                min: None,
                max: Some(max),
                io_depth,
            },
        )]),
    })?;
    Ok(())
}

pub(super) fn unthrottle(policy: &Policy, array: &str) -> Result<(), PolicyError> {
    let h = holder(array);
    if policy.show()?.leases.iter().any(|l| l.holder == h) {
        policy.release(&h)?;
    }
    Ok(())
}
