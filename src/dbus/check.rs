//! Checks (scrubs) on the Array object: `StartCheck`, `PauseCheck`, `ResumeCheck`,
//! `CancelCheck` and the properties `CheckPosition`, `LastCheckResult`, `LastCheckCompleted`,
//! `NextCheckStart`. Thin: every step is the core's [`crate::check::run::execute`], the one
//! `mdpilot check` and the service loop's schedule run, on the same record ([`CheckStore`], default
//! `/var/lib/mdpilot/checks.toml`) and the same throttle lease (`check-<array>`).
//!
//! [`CheckView::read`] is what the service loop reads before it publishes the arrays (after
//! its own step of check upkeep, [`crate::check::run::upkeep_all`]: a finished check's result,
//! a window end, the running position every [`crate::check::SAVE_INTERVAL_S`]): publishing
//! never writes the kernel. The loop re-reads while any sync runs, so a running check is seen at
//! the progress interval; an idle service does not wake up for checks.

use super::auth::{Request, PRIORITY_ACTION, REPAIR_ACTION};
use super::errors::{Error, Result};
use super::options::Options;
use super::shared::Shared;
use crate::check::run::{record_key, CheckError, Op};
use crate::check::store::CheckStore;
use crate::check::throttle::{Note, Notes};
use crate::check::{CheckResult, CheckState};
use crate::config::Config;
use crate::host::Root;
use crate::model::{Array, MdStat};
use crate::schedule::{Candidate, Schedule};
use std::collections::BTreeMap;
use std::collections::HashMap;
use zbus::message::Header;
use zbus::object_server::SignalEmitter;
use zbus::zvariant::{OwnedValue, Value};

/// `LastCheckResult` as published (`a{sv}`): `action` (s: `check` | `repair`),
/// `mismatch_cnt` (t: `md/mismatch_cnt` when it ended, 512-byte sectors), `completed` (t:
/// Unix seconds), `level` (s: `raid1`...), `severity` (s: `warning` for mismatches on
/// raid4/5/6, else `info`: mismatches on raid1/raid10 come from swap and in-flight writes).
/// Empty when no check has completed.
pub fn result_dict(r: Option<&CheckResult>) -> HashMap<String, OwnedValue> {
    let mut d = HashMap::new();
    let Some(r) = r else {
        return d;
    };
    let mut put = |k: &str, v: Value<'_>| {
        if let Ok(v) = OwnedValue::try_from(v) {
            d.insert(k.to_string(), v);
        }
    };
    put("action", Value::from(r.action.as_str()));
    put("mismatch_cnt", Value::U64(r.mismatch_cnt));
    put("completed", Value::U64(r.completed_s));
    put("level", Value::from(r.level.as_str()));
    put("severity", Value::from(r.severity()));
    d
}

/// An Array object's check properties (published as part of its
/// [`super::array::ArrayProps`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CheckProps {
    /// `CheckPosition`: the saved position of a paused (or running) check, 512-byte sectors;
    /// 0 = none.
    pub position: u64,
    /// `LastCheckResult` (as [`result_dict`]): the last completed check.
    pub last: Option<CheckResult>,
    /// `LastCheckCompleted`: when it completed, Unix seconds; 0 = never.
    pub last_completed: u64,
    /// `NextCheckStart`: the schedule's next window start for the array, Unix seconds; 0 =
    /// none.
    pub next_start: u64,
    /// `CheckThrottle` (as [`throttle_dict`]): the pressure throttle's last decision.
    pub throttle: Option<Note>,
    /// `ResyncThrottle` (as [`throttle_dict`]): the resync throttle's last decision
    /// ([`crate::resync_throttle`]).
    pub resync_throttle: Option<Note>,
    /// `CheckHeld`: why a check is held or was paused by the service; empty = nothing.
    pub held: String,
}

/// `CheckThrottle` as published (`a{sv}`): `limit` (t, KiB/s), `decision` (s), `why` (s),
/// `full_avg10`/`some_avg10` (d, percent, where read), `changed` (t, Unix seconds),
/// `not_applied` (s, where the limit did not take effect); since API 1.6 `pressure` (d,
/// percent: the input of the last decision), `source` (s: `interval` or `avg10`),
/// `interval_ms` (t, for `interval`) and `io_depth` (t, `md/sync_io_depth` asked for at the
/// floor). Empty without a note.
pub fn throttle_dict(n: Option<&Note>) -> HashMap<String, OwnedValue> {
    let mut d = HashMap::new();
    let Some(n) = n else {
        return d;
    };
    let mut put = |k: &str, v: Value<'_>| {
        if let Ok(v) = OwnedValue::try_from(v) {
            d.insert(k.to_string(), v);
        }
    };
    put("limit", Value::U64(n.limit_kib_s));
    put("decision", Value::from(n.decision.as_str()));
    put("why", Value::from(n.why.as_str()));
    put("changed", Value::U64(n.changed_s));
    if let Some(v) = n.full_avg10 {
        put("full_avg10", Value::F64(v));
    }
    if let Some(v) = n.some_avg10 {
        put("some_avg10", Value::F64(v));
    }
    if let Some(v) = &n.not_applied {
        put("not_applied", Value::from(v.as_str()));
    }
    if let Some(v) = n.pressure_pct {
        put("pressure", Value::F64(v));
    }
    if let Some(v) = &n.source {
        put("source", Value::from(v.as_str()));
    }
    if let Some(v) = n.interval_ms {
        put("interval_ms", Value::U64(v));
    }
    if let Some(v) = n.io_depth {
        put("io_depth", Value::U64(v));
    }
    d
}

impl CheckProps {
    /// The properties whose values differ, by D-Bus name.
    pub fn changed(old: &CheckProps, new: &CheckProps) -> HashMap<&'static str, OwnedValue> {
        let mut out = super::props::changed_props!(old, new;
            position => "CheckPosition", last_completed => "LastCheckCompleted",
            next_start => "NextCheckStart", held => "CheckHeld",
        );
        if old.throttle != new.throttle {
            if let Ok(v) = OwnedValue::try_from(Value::from(throttle_dict(new.throttle.as_ref()))) {
                out.insert("CheckThrottle", v);
            }
        }
        if old.resync_throttle != new.resync_throttle {
            let d = throttle_dict(new.resync_throttle.as_ref());
            if let Ok(v) = OwnedValue::try_from(Value::from(d)) {
                out.insert("ResyncThrottle", v);
            }
        }
        if old.last != new.last {
            if let Ok(v) = OwnedValue::try_from(Value::from(result_dict(new.last.as_ref()))) {
                out.insert("LastCheckResult", v);
            }
        }
        out
    }
}

/// What the Array objects show of checks, read once per publication.
#[derive(Debug, Clone, Default)]
pub struct CheckView {
    state: CheckState,
    /// The schedule and its next window start (Unix seconds), where a schedule is configured.
    next: Option<(Schedule, i64)>,
    /// The throttle's notes by kernel name.
    notes: Notes,
    /// The resync throttle's notes by kernel name.
    resync_notes: Notes,
    /// Why a check would be held, by kernel name ([`crate::check::guard::hold`]).
    holds: BTreeMap<String, String>,
}

impl CheckView {
    /// The record, the schedule's next window start after `now` (Unix seconds), the
    /// throttle's notes and the guards' holds on `model`'s arrays, without upkeep. An
    /// unreadable record reads as empty.
    pub fn read(root: &Root, config: &Config, model: &MdStat, now: i64) -> CheckView {
        // Quietly: this runs at every publication; the upkeep before it logs a bad record.
        let state = CheckStore::new(root, config).load().unwrap_or_default();
        let next = config.check.schedule.as_ref().and_then(|s| {
            let seed = std::fs::read_to_string(root.path("/etc/machine-id")).unwrap_or_default();
            let delay = crate::schedule::fixed_delay_s(&seed, s.random_delay_s);
            let offset = crate::host::utc_offset_s(now);
            s.next_window_start(now, delay, offset)
                .map(|t| (s.clone(), t))
        });
        CheckView {
            state,
            next,
            notes: crate::check::throttle::NOTES.load(root, config),
            resync_notes: crate::resync_throttle::NOTES.load(root, config),
            holds: crate::check::run::holds(root, model),
        }
    }

    /// The check properties of array `a`: `CheckPosition` (the saved position, sectors; 0 =
    /// none), `LastCheckResult`, `LastCheckCompleted` (Unix s; 0 = never), `NextCheckStart`
    /// (Unix s; 0 = no schedule, or the schedule skips the array).
    pub fn props(&self, a: &Array) -> CheckProps {
        let rec = self.state.array.get(&record_key(a));
        let last = rec.and_then(|r| r.last.clone());
        CheckProps {
            position: rec
                .and_then(|r| r.position.as_ref())
                .map_or(0, |p| p.sectors),
            last_completed: last.as_ref().map_or(0, |l| l.completed_s),
            last,
            next_start: match &self.next {
                Some((s, t)) if s.selected(&candidate(a)) => u64::try_from(*t).unwrap_or(0),
                _ => 0,
            },
            throttle: self.notes.get(&a.name).cloned(),
            resync_throttle: self.resync_notes.get(&a.name).cloned(),
            held: match rec.and_then(|r| r.paused_for.as_deref()) {
                Some(p) => format!("paused: {p}"),
                None => self.holds.get(&a.name).cloned().unwrap_or_default(),
            },
        }
    }
}

/// The schedule's view of `a`, for its include/skip lists only.
fn candidate(a: &Array) -> Candidate {
    Candidate {
        name: a.name.clone(),
        uuid: a.uuid().map(|u| u.to_string()),
        created_unix_s: None,
        disks: Vec::new(),
        last_completed_s: None,
        has_position: false,
        checking: false,
        busy: false,
    }
}

/// `StartCheck`'s options: `repair` (b, default false), `duration` (t, seconds; 0 = no window
/// end; at most [`crate::units::MAX_DURATION_S`], 3650 days), `max` (t, KiB/s; 0 = the
/// config's `check_max`). Returns `Op::Start` with the window end `now_s + duration`
/// ([`crate::units::end_after`]).
///
/// Errors: `InvalidArgument` for an unknown option, a wrong type or a duration above the
/// bound.
pub fn parse_start(opts: &Options, now_s: u64) -> Result<Op> {
    let (mut repair, mut duration, mut max, mut force) = (false, 0u64, 0u64, false);
    for (k, v) in opts {
        match (k.as_str(), &**v) {
            ("repair", Value::Bool(b)) => repair = *b,
            ("force", Value::Bool(b)) => force = *b,
            ("duration", Value::U64(n)) => duration = *n,
            ("max", Value::U64(n)) => max = *n,
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "StartCheck: unknown option {k:?} or wrong type {} (known: repair b, \
                     duration t, max t, force b, auth.no_user_interaction b)",
                    v.value_signature()
                )))
            }
        }
    }
    let until_s = match duration {
        0 => None,
        d => Some(
            crate::units::end_after(now_s, d)
                .map_err(|e| Error::InvalidArgument(format!("StartCheck: {e}")))?,
        ),
    };
    Ok(Op::Start {
        repair,
        max: (max != 0).then_some(max),
        until_s,
        force,
    })
}

/// A core error on the bus: no array `NoSuchArray`; another sync running, or md refusing a
/// write with EBUSY/EROFS, `Busy`; md refusing with EINVAL `InvalidArgument`; the throttle
/// lease as [`crate::policy::PolicyError`] maps; nothing to resume, the record file and the
/// rest `Failed`. The message is the whole error chain.
pub fn bus_error(e: CheckError) -> Error {
    let msg = crate::error::error_chain(&e);
    match e {
        CheckError::NoArray(_) => Error::NoSuchArray(msg),
        CheckError::Busy { .. } | CheckError::Held { .. } => Error::Busy(msg),
        CheckError::Write { source, .. } => match source.raw_os_error() {
            Some(libc::EBUSY | libc::EROFS) => Error::Busy(msg),
            Some(libc::EINVAL) => Error::InvalidArgument(msg),
            _ if source.kind() == std::io::ErrorKind::NotFound => Error::NoSuchArray(msg),
            _ => Error::Failed(msg),
        },
        CheckError::Policy(p) => Error::from(p).context("check throttle"),
        CheckError::NothingToResume(_) | CheckError::State { .. } | CheckError::Collect(_) => {
            Error::Failed(msg)
        }
    }
}

/// The polkit question of a check method on `array`: [`PRIORITY_ACTION`] (a check is a sync
/// action, as `RequestSyncAction`'s), details `method` and `device`.
/// A repair ([`request_for`]) asks for [`REPAIR_ACTION`] instead.
pub fn request(method: &'static str, array: &str) -> Request {
    let message = match method {
        "StartCheck" => "Authentication is required to start a check of $(device)",
        "PauseCheck" => "Authentication is required to pause the check of $(device)",
        "ResumeCheck" => "Authentication is required to resume the check of $(device)",
        _ => "Authentication is required to cancel the check of $(device)",
    };
    Request {
        action: PRIORITY_ACTION,
        method,
        device: Some(format!("/dev/{array}")),
        message,
        extra: Vec::new(),
        exempt_uid: None,
    }
}

/// The polkit question of `op` on `array` by `method`: [`request`], with [`REPAIR_ACTION`]
/// for a `StartCheck` with `repair` and a `ResumeCheck` whose paused check is a repair
/// (`resumes_repair`).
pub fn request_for(method: &'static str, array: &str, op: &Op, resumes_repair: bool) -> Request {
    let mut r = request(method, array);
    let repair = match op {
        Op::Start { repair, .. } => *repair,
        Op::Resume { .. } => resumes_repair,
        _ => false,
    };
    if repair {
        r.action = REPAIR_ACTION;
        r.message = match method {
            "StartCheck" => "Authentication is required to start a repair of $(device)",
            _ => "Authentication is required to resume the repair of $(device)",
        };
    }
    r
}

/// Whether the check paused on `array` (kernel name) is a repair, from the record.
fn paused_repair(root: &Root, config: &Config, model: &MdStat, array: &str) -> bool {
    let Some(a) = model.arrays.iter().find(|a| a.name == array) else {
        return false;
    };
    CheckStore::new(root, config)
        .load()
        .ok()
        .and_then(|st| st.array.get(&record_key(a)).cloned())
        .and_then(|r| r.position)
        .is_some_and(|p| p.action == crate::check::CheckAction::Repair)
}

/// `StartCheck(options)` on `array` ([`call`] with [`parse_start`]).
pub async fn start(
    shared: &std::sync::Arc<Shared>,
    conn: &zbus::Connection,
    header: &Header<'_>,
    array: &str,
    options: Options,
) -> Result<()> {
    call(
        shared,
        conn,
        header,
        "StartCheck",
        array,
        Some(options),
        parse_start,
    )
    .await
}

/// `PauseCheck`, `ResumeCheck` (with the throttle it was started with) or `CancelCheck` (by
/// `method`) on `array` ([`call`]).
pub async fn step(
    shared: &std::sync::Arc<Shared>,
    conn: &zbus::Connection,
    header: &Header<'_>,
    array: &str,
    method: &'static str,
) -> Result<()> {
    step_with(shared, conn, header, array, method, None).await
}

/// [`step`] with the `a{sv}` options of `PauseCheckWithOptions`, `ResumeCheckWithOptions` and
/// `CancelCheckWithOptions` (since 1.2): `auth.no_user_interaction` (b) only.
///
/// Errors: as [`step`]; `InvalidArgument` for any other option, and for a `method` that is
/// not one of the three ([`step_op`]), before polkit is asked.
pub async fn step_with(
    shared: &std::sync::Arc<Shared>,
    conn: &zbus::Connection,
    header: &Header<'_>,
    array: &str,
    method: &'static str,
    options: Option<Options>,
) -> Result<()> {
    let op = step_op(method)?;
    let check = move |o: &Options, _| super::options::no_options(method, o).map(|()| op);
    call(shared, conn, header, method, array, options, check).await
}

/// The step of `PauseCheck`, `ResumeCheck` (with the throttle the check was started with) or
/// `CancelCheck`.
///
/// Errors: `InvalidArgument` naming `method` for any other name: an unknown step is never
/// taken for another (a cancel would drop the saved position).
pub fn step_op(method: &str) -> Result<Op> {
    match method {
        "PauseCheck" => Ok(Op::Pause),
        "ResumeCheck" => Ok(Op::Resume {
            max: None,
            force: false,
        }),
        "CancelCheck" => Ok(Op::Cancel),
        _ => Err(Error::InvalidArgument(format!(
            "{method}: not a check step (PauseCheck, ResumeCheck or CancelCheck)"
        ))),
    }
}

/// Runs one check method for the caller of `header` on `array`: authorizes it
/// ([`request`]; `options` lose `auth.no_user_interaction`), builds the step with `op`
/// (given the remaining options), runs it off the loop's thread, then asks the loop to
/// re-read the array and publishes the Manager's leases (the throttle).
///
/// Errors: `NotAuthorized`; those of `op`; those of [`bus_error`] (a failure of the one
/// array is the method's error).
pub async fn call(
    shared: &std::sync::Arc<Shared>,
    conn: &zbus::Connection,
    header: &Header<'_>,
    method: &'static str,
    array: &str,
    options: Option<Options>,
    op: impl FnOnce(&Options, u64) -> Result<Op>,
) -> Result<()> {
    let what = format!("{method} {array}");
    // The options are checked before polkit is asked.
    let options = options.unwrap_or_default();
    let model = crate::lock::lock(&shared.core.model).clone();
    let (root, config) = (shared.core.root.clone(), shared.core.config());
    let (_, op) = shared
        .auth
        .guarded(conn, header, method, options, |options| {
            let op = op(&options, crate::host::unix_now_s()).map_err(|e| e.context(&what))?;
            // A paused repair resumes under the repair action (its record says which it was).
            let resumes_repair =
                matches!(op, Op::Resume { .. }) && paused_repair(&root, &config, &model, array);
            let req = request_for(method, array, &op, resumes_repair);
            Ok((op, req))
        })
        .await?;
    let name = array.to_string();
    let done = shared
        .core
        .check_worker
        .run(move || {
            let origin = crate::check::Origin::Admin;
            let o = crate::check::run::execute(&root, &config, &op, &[name], origin)
                .map_err(bus_error)?;
            for (array, reason) in &o.overridden {
                tracing::warn!(%array, "{method}: started with force although {reason}");
            }
            match o.failures.into_iter().next() {
                Some(f) => Err(bus_error(f.error)),
                None => Ok(()),
            }
        })
        .await
        .map_err(|e| Error::Failed(format!("{what}: {e}")))?;
    shared.core.refresh_array(array);
    if let Ok(emitter) = SignalEmitter::new(conn, super::MANAGER_PATH) {
        shared.publish(&emitter, None).await;
    }
    done.map_err(|e| e.context(&what))?;
    tracing::info!(array, "{what}: done");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::CheckAction;

    fn o(kv: &[(&str, Value<'static>)]) -> Options {
        kv.iter()
            .map(|(k, v)| ((*k).to_string(), OwnedValue::try_from(v.clone()).unwrap()))
            .collect()
    }

    #[test]
    fn start_options_give_the_window_end_and_throttle() {
        let op = parse_start(
            &o(&[
                ("repair", Value::Bool(true)),
                ("duration", Value::U64(3600)),
                ("max", Value::U64(5000)),
            ]),
            100,
        )
        .unwrap();
        assert_eq!(
            op,
            Op::Start {
                repair: true,
                max: Some(5000),
                until_s: Some(3700),
                force: false,
            }
        );
        let op = parse_start(&o(&[("duration", Value::U64(0))]), 100).unwrap();
        assert_eq!(
            op,
            Op::Start {
                repair: false,
                max: None,
                until_s: None,
                force: false,
            }
        );
        for bad in [
            o(&[("max", Value::U32(5))]),
            o(&[("bogus", Value::Bool(true))]),
        ] {
            assert!(matches!(
                parse_start(&bad, 0),
                Err(Error::InvalidArgument(_))
            ));
        }
    }

    #[test]
    fn results_are_dicts_with_a_severity_and_errors_keep_their_meaning() {
        assert!(result_dict(None).is_empty());
        let r = CheckResult {
            action: CheckAction::Check,
            completed_s: 7,
            mismatch_cnt: 128,
            level: "raid5".into(),
        };
        let d = result_dict(Some(&r));
        assert_eq!(
            String::try_from(d["severity"].try_clone().unwrap()).unwrap(),
            "warning"
        );
        assert_eq!(u64::try_from(&*d["completed"]).unwrap(), 7);
        assert_eq!(u64::try_from(&*d["mismatch_cnt"]).unwrap(), 128);
        let mirror = CheckResult {
            level: "raid1".into(),
            ..r
        };
        let d = result_dict(Some(&mirror));
        assert_eq!(
            String::try_from(d["severity"].try_clone().unwrap()).unwrap(),
            "info"
        );
        let busy = CheckError::Busy {
            array: "md1".into(),
            action: "resync".into(),
        };
        assert!(matches!(bus_error(busy), Error::Busy(_)));
        assert!(matches!(
            bus_error(CheckError::NoArray("md9".into())),
            Error::NoSuchArray(_)
        ));
        assert!(matches!(
            bus_error(CheckError::NothingToResume("md0".into())),
            Error::Failed(_)
        ));
        let ebusy = CheckError::Write {
            path: "/sys/block/md0/md/sync_min".into(),
            source: std::io::Error::from_raw_os_error(libc::EBUSY),
        };
        assert!(matches!(bus_error(ebusy), Error::Busy(_)));
        let req = request("StartCheck", "md0");
        assert_eq!(req.action, PRIORITY_ACTION);
        assert_eq!(req.device.as_deref(), Some("/dev/md0"));
    }

    #[test]
    fn an_unknown_check_step_is_an_invalid_argument_naming_it() {
        assert_eq!(step_op("PauseCheck").unwrap(), Op::Pause);
        assert_eq!(step_op("CancelCheck").unwrap(), Op::Cancel);
        assert!(matches!(
            step_op("ResumeCheck").unwrap(),
            Op::Resume {
                max: None,
                force: false
            }
        ));
        for bad in ["StopCheck", "", "cancelcheck"] {
            match step_op(bad) {
                Err(Error::InvalidArgument(m)) => {
                    assert!(m.starts_with(&format!("{bad}: ")), "{m}");
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }
}
