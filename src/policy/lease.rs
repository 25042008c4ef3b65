//! The pure policy core: leases, the effective value of each knob, and the transition from one
//! lease set to the next (no I/O; the adapter in [`super::adapter`] reads and writes the files).
//!
//! Source of truth for the knobs: kernel `Documentation/admin-guide/md.rst`
//! (`/proc/sys/dev/raid/speed_limit_{min,max}`, `/sys/block/mdN/md/sync_speed_{min,max}`).
//!
//! A knob is *managed* while some lease targets it: its original reading is kept in
//! [`PolicyState::knobs`] together with the value we last wrote. Every transition is split into a
//! `mid` state (saved durably before the first kernel write; it recognises both the old and the
//! new value as ours) and an `end` state (saved after the writes), so a crash at any point leaves a
//! state file from which `restore` can put the originals back.

use super::journal::Change;
use super::request::{Bound, CoreError, KnobId, LeaseRequest};
use super::warning::PolicyWarning;
use crate::model::SpeedLimit;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// How many warnings the state file keeps (oldest dropped first).
pub const MAX_WARNINGS: usize = 20;

/// What gets written to a knob: a number of KiB/s, or `system` (per-array knobs only: revert to
/// the global value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Setting {
    /// Write this number.
    Kibs(u64),
    /// Write `system`.
    System,
}

impl From<SpeedLimit> for Setting {
    /// What to write to get this reading back: `system` for a `(system)` reading, else the
    /// number.
    fn from(reading: SpeedLimit) -> Self {
        if reading.system {
            Setting::System
        } else {
            Setting::Kibs(reading.kib_s)
        }
    }
}

impl Setting {
    /// True when `reading` is what this setting reads back as.
    pub fn matches(&self, reading: &SpeedLimit) -> bool {
        match self {
            Setting::Kibs(v) => reading.kib_s == *v && !reading.system,
            Setting::System => reading.system,
        }
    }

    /// The text written to the file (without newline).
    pub fn to_text(&self) -> String {
        match self {
            Setting::Kibs(v) => v.to_string(),
            Setting::System => crate::vocab::LimitOrigin::System.as_str().to_string(),
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_text())
    }
}

/// A knob under our control: what it was before the first lease, and what we wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Managed {
    /// The reading before we first wrote it (or the value an admin set behind our back, which
    /// is then what restore leaves). Serialized in the policy's `{kibs, system}` form.
    #[serde(with = "super::kibs_form")]
    pub original: SpeedLimit,
    /// The value we last wrote and saw succeed (`None` before the first write completed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written: Option<u64>,
    /// A write in progress: set in the `mid` state saved before the kernel write, so that after
    /// a crash both the old and the new value are recognised as ours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<Setting>,
    /// For a per-array knob: the array's `md/uuid` when it became managed, so that another
    /// array that later has the same kernel name is never written (`None`: not known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
}

impl Managed {
    /// True when `reading` is a value we wrote (or were about to write).
    pub fn is_ours(&self, reading: &SpeedLimit) -> bool {
        self.written
            .is_some_and(|w| Setting::Kibs(w).matches(reading))
            || self.pending.is_some_and(|p| p.matches(reading))
    }

    /// True when `reading` is neither ours nor the original: someone else wrote the knob.
    pub fn drifted(&self, reading: &SpeedLimit) -> bool {
        !self.is_ours(reading) && !Setting::from(self.original).matches(reading)
    }
}

/// The whole durable state: live leases and managed knobs (see [`super::state`] for the file).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyState {
    /// Live leases by holder.
    pub leases: BTreeMap<String, LeaseRequest>,
    /// Knobs we changed, with their originals.
    pub knobs: BTreeMap<KnobId, Managed>,
    /// Warnings kept for `policy show` (drift noticed, arrays gone...), oldest first.
    pub warnings: Vec<PolicyWarning>,
    /// Set when a corrupt state file was moved aside (the path it was moved to): the originals
    /// are unknown. While set, leases are applied but no original is captured (the kernel may
    /// hold our own earlier value), and knobs no lease wants any more are left as they are.
    /// Only `restore --defaults` clears it.
    pub originals_unknown: Option<String>,
    /// Other kernel changes held by one owner each (freezes, check windows), by id: the
    /// journal of [`super::journal`]. Lease transitions carry them over unchanged.
    pub changes: BTreeMap<String, Change>,
    /// Timed leases: holder → when the lease ends, Unix seconds (`policy apply --for`, the
    /// D-Bus `duration` option). Only holders with a lease; the adapter releases them at that
    /// time ([`super::Policy::expire`]), as any release.
    pub expires: BTreeMap<String, u64>,
    /// When each holder's lease was first taken, Unix seconds (replacing a lease keeps it; a
    /// holder that loses its lease loses it). Set by the adapter, carried by transitions; for
    /// "how long has the install policy applied" (metrics, `policy show`).
    pub taken: BTreeMap<String, u64>,
}

/// One kernel write of a transition, with the reading before it (for rollback).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// Which knob.
    pub knob: KnobId,
    /// What to write.
    pub setting: Setting,
    /// Its reading before the write (rollback writes `Setting::from(before)`).
    pub before: SpeedLimit,
}

/// The result of [`transition`]: save `mid`, do `writes` in order, save `end`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// State to save before the first write (recognises old and new values as ours).
    pub mid: PolicyState,
    /// Kernel writes, in order.
    pub writes: Vec<Write>,
    /// State to save after all writes succeeded.
    pub end: PolicyState,
    /// New warnings raised by this transition (also appended to `end.warnings`).
    pub warnings: Vec<PolicyWarning>,
}

/// The effective value of every knob some lease targets: the most yielding request, i.e. the
/// lowest min, the lowest max and the lowest I/O depth among the leases, already raised to what
/// the kernel accepts (see [`KnobId::writable`]).
pub fn targets(leases: &BTreeMap<String, LeaseRequest>) -> BTreeMap<KnobId, u64> {
    let mut out: BTreeMap<KnobId, u64> = BTreeMap::new();
    let mut put = |knob: KnobId, v: Option<u64>| {
        if let Some(v) = v {
            let v = knob.writable(v);
            out.entry(knob)
                .and_modify(|e| *e = (*e).min(v))
                .or_insert(v);
        }
    };
    for lease in leases.values() {
        for bound in Bound::ALL {
            put(KnobId::Global(bound), lease.global.get(bound));
            for (array, l) in &lease.arrays {
                let knob = KnobId::Array {
                    array: array.clone(),
                    bound,
                };
                put(knob, l.get(bound));
            }
        }
    }
    out
}

/// The knobs the adapter must read before calling [`transition`] from `old` to `leases`:
/// every managed knob and every knob a lease targets.
pub fn knobs_to_read(
    old: &PolicyState,
    leases: &BTreeMap<String, LeaseRequest>,
) -> BTreeSet<KnobId> {
    let mut set: BTreeSet<KnobId> = old.knobs.keys().cloned().collect();
    set.extend(targets(leases).into_keys());
    set
}

/// Warnings for knobs changed behind our back, as `policy show` reports them (no state change).
pub fn drift_warnings(
    state: &PolicyState,
    readings: &BTreeMap<KnobId, SpeedLimit>,
) -> Vec<PolicyWarning> {
    let mut out = Vec::new();
    for (knob, m) in &state.knobs {
        if let Some(r) = readings.get(knob) {
            if m.drifted(r) {
                out.push(PolicyWarning::Drifted {
                    knob: knob.clone(),
                    written: m.written,
                    now: *r,
                });
            }
        }
    }
    out
}

/// Records `uuids` (kernel name -> `md/uuid`) on the managed per-array knobs of `state` that
/// have none yet (called on a transition's `mid` and `end` before they are saved).
pub fn stamp_uuids(state: &mut PolicyState, uuids: &BTreeMap<String, String>) {
    for (knob, m) in &mut state.knobs {
        if let (KnobId::Array { array, .. }, None) = (knob, &m.uuid) {
            m.uuid = uuids.get(array).cloned();
        }
    }
}

/// Moves from `old` to the lease set `leases`, given the current `readings` of the knobs in
/// [`knobs_to_read`] (a managed per-array knob missing from `readings` means the array is gone;
/// an [optional](KnobId::optional) knob missing from `readings` is not on this kernel: never
/// written, never managed, no error).
///
/// Rules, per knob:
/// - targeted and not managed: the reading becomes the original (never our own value, since a
///   knob we wrote is always managed); write the target if it differs;
/// - targeted and managed: if the reading is neither ours nor the original, someone changed it
///   behind our back: warn and take their value as the one to restore; write the target if it
///   differs;
/// - managed and no longer targeted: if the reading is ours, write the original back; if it is
///   already the original, nothing; otherwise leave the other writer's value and warn.
///
/// While [`PolicyState::originals_unknown`] is set, targeted knobs are written but never become
/// managed (no original is captured), and knobs that lose their last lease are left as they are
/// with the originals-unknown warning.
///
/// When the cycle ends (no lease and no managed knob left), [`PolicyWarning::Adopted`] warnings
/// no longer hold and are dropped.
///
/// Errors: [`CoreError::MissingReading`] when a targeted knob has no reading.
pub fn transition(
    old: &PolicyState,
    leases: BTreeMap<String, LeaseRequest>,
    readings: &BTreeMap<KnobId, SpeedLimit>,
) -> Result<Transition, CoreError> {
    let targets = targets(&leases);
    let mid = next_state(old, &leases);
    let mut t = Transition {
        end: mid.clone(),
        mid,
        writes: Vec::new(),
        warnings: Vec::new(),
    };
    if let Some(moved_to) = &old.originals_unknown {
        write_unmanaged(&mut t, old, &targets, readings, moved_to)?;
        return Ok(t.capped());
    }
    for knob in knobs_to_read(old, &leases) {
        let reading = readings.get(&knob).copied();
        match (targets.get(&knob).copied(), old.knobs.get(&knob)) {
            (Some(_), managed) if reading.is_none() && knob.optional() => {
                // Not on this kernel (or gone with its array): nothing to write or restore.
                if managed.is_some() {
                    t.warnings.push(PolicyWarning::Gone { knob });
                }
            }
            (Some(target), managed) => {
                let r = reading.ok_or_else(|| CoreError::MissingReading(knob.clone()))?;
                let m = managed_for(&mut t.warnings, &knob, r, managed);
                write_target(&mut t, knob, target, r, m);
            }
            (None, Some(m)) => release_knob(&mut t, knob, m, reading),
            (None, None) => {}
        }
    }
    if t.end.leases.is_empty() && t.end.knobs.is_empty() && t.end.changes.is_empty() {
        // The cycle is over: "restore will write back" was true while leased, not any more.
        t.end.warnings.retain(|w| !w.is_write_back(None));
    }
    Ok(t.capped())
}

impl Transition {
    /// Appends the new warnings to `end`'s, keeping the newest [`MAX_WARNINGS`].
    fn capped(mut self) -> Transition {
        self.end.warnings.extend(self.warnings.iter().cloned());
        let excess = self.end.warnings.len().saturating_sub(MAX_WARNINGS);
        self.end.warnings.drain(..excess);
        self
    }
}

/// The state after `old` with the lease set `leases`, before any knob is looked at: no managed
/// knob yet, the warnings kept (dropped when a new cycle starts), expiries and taken times of
/// holders that keep a lease (the adapter sets new ones).
fn next_state(old: &PolicyState, leases: &BTreeMap<String, LeaseRequest>) -> PolicyState {
    let fresh_cycle = old.leases.is_empty() && old.knobs.is_empty() && !leases.is_empty();
    let kept = |m: &BTreeMap<String, u64>| -> BTreeMap<String, u64> {
        m.iter()
            .filter(|(h, _)| leases.contains_key(*h))
            .map(|(h, t)| (h.clone(), *t))
            .collect()
    };
    PolicyState {
        leases: leases.clone(),
        knobs: BTreeMap::new(),
        warnings: if fresh_cycle {
            Vec::new()
        } else {
            old.warnings.clone()
        },
        originals_unknown: old.originals_unknown.clone(),
        changes: old.changes.clone(),
        expires: kept(&old.expires),
        taken: kept(&old.taken),
    }
}

/// The rule while the originals are unknown (`moved_to`: where the corrupt state went):
/// targets are written, nothing becomes managed, a knob that loses its last lease is left
/// with the originals-unknown warning.
fn write_unmanaged(
    t: &mut Transition,
    old: &PolicyState,
    targets: &BTreeMap<KnobId, u64>,
    readings: &BTreeMap<KnobId, SpeedLimit>,
    moved_to: &str,
) -> Result<(), CoreError> {
    for (knob, target) in targets {
        let r = match readings.get(knob) {
            Some(r) => *r,
            None if knob.optional() => continue,
            None => return Err(CoreError::MissingReading(knob.clone())),
        };
        let setting = Setting::Kibs(*target);
        if !setting.matches(&r) {
            t.writes.push(Write {
                knob: knob.clone(),
                setting,
                before: r,
            });
        }
    }
    if self::targets(&old.leases)
        .keys()
        .any(|k| !targets.contains_key(k))
    {
        t.warnings.push(PolicyWarning::OriginalsUnknown {
            moved_to: moved_to.to_string(),
        });
    }
    Ok(())
}

/// The rule for a targeted knob's record, given its reading `r`: not managed yet, the reading
/// becomes the original; managed and changed behind our back (neither ours nor the original),
/// warn and take the other writer's value as the one to restore; managed and ours, keep the
/// kernel's value recognisable while the next write is in flight.
fn managed_for(
    warnings: &mut Vec<PolicyWarning>,
    knob: &KnobId,
    r: SpeedLimit,
    managed: Option<&Managed>,
) -> Managed {
    let Some(old_m) = managed else {
        return Managed {
            original: r,
            written: None,
            pending: None,
            uuid: None,
        };
    };
    let mut m = Managed {
        pending: None,
        ..old_m.clone()
    };
    if old_m.drifted(&r) {
        warnings.push(PolicyWarning::Adopted {
            knob: knob.clone(),
            found: r,
        });
        m.original = r;
    } else if old_m.is_ours(&r) && !r.system {
        // The kernel holds a value of ours (perhaps only `pending` after a crash).
        m.written = Some(r.kib_s);
    }
    m
}

/// The rule for a targeted knob: write `target` if the reading `r` differs (the `mid` record
/// knows it as pending), and record it as ours in `end`.
fn write_target(t: &mut Transition, knob: KnobId, target: u64, r: SpeedLimit, mut m: Managed) {
    let setting = Setting::Kibs(target);
    if setting.matches(&r) {
        m.written = Some(target);
        t.mid.knobs.insert(knob.clone(), m.clone());
        t.end.knobs.insert(knob, m);
        return;
    }
    let mut m_mid = m.clone();
    m_mid.pending = Some(setting);
    t.mid.knobs.insert(knob.clone(), m_mid);
    m.written = Some(target);
    t.end.knobs.insert(knob.clone(), m);
    t.writes.push(Write {
        knob,
        setting,
        before: r,
    });
}

/// The rule for a managed knob no longer targeted: reading ours, write the original back;
/// already the original, nothing; another writer's value, leave it and warn; no reading
/// (the array is gone), warn.
fn release_knob(t: &mut Transition, knob: KnobId, m: &Managed, reading: Option<SpeedLimit>) {
    // No lease wants this knob any more: "restore will write back" no longer holds.
    for st in [&mut t.mid, &mut t.end] {
        st.warnings.retain(|w| !w.is_write_back(Some(&knob)));
    }
    let Some(r) = reading else {
        t.warnings.push(PolicyWarning::Gone { knob });
        return;
    };
    if m.is_ours(&r) {
        let setting = Setting::from(m.original);
        if !setting.matches(&r) {
            let mut m_mid = m.clone();
            // The current value is ours: it must stay recognisable if we crash before the
            // original lands.
            if !r.system {
                m_mid.written = Some(r.kib_s);
            }
            m_mid.pending = Some(setting);
            t.mid.knobs.insert(knob.clone(), m_mid);
            t.writes.push(Write {
                knob,
                setting,
                before: r,
            });
        }
    } else if !Setting::from(m.original).matches(&r) {
        // (Already the original: e.g. we crashed before our write landed.)
        t.warnings.push(PolicyWarning::LeftAt { knob, value: r });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::request::*;
    use pretty_assertions::assert_eq;

    fn gmin() -> KnobId {
        KnobId::Global(Bound::Min)
    }
    fn gmax() -> KnobId {
        KnobId::Global(Bound::Max)
    }
    fn amin(a: &str) -> KnobId {
        KnobId::Array {
            array: a.into(),
            bound: Bound::Min,
        }
    }

    fn gdepth() -> KnobId {
        KnobId::Global(Bound::IoDepth)
    }
    fn adepth(a: &str) -> KnobId {
        KnobId::Array {
            array: a.into(),
            bound: Bound::IoDepth,
        }
    }
    fn depth(holder: &str, global: Option<u64>, md0: Option<u64>) -> LeaseRequest {
        let mut l = lease(holder, None, None);
        l.global.io_depth = global;
        if md0.is_some() {
            l.arrays.insert(
                "md0".into(),
                Limits {
                    io_depth: md0,
                    ..Limits::default()
                },
            );
        }
        l
    }

    fn lease(holder: &str, min: Option<u64>, max: Option<u64>) -> LeaseRequest {
        LeaseRequest {
            holder: holder.into(),
            kind: LeaseKind::Installer,
            owner: Owner::None,
            global: Limits {
                min,
                max,
                io_depth: None,
            },
            arrays: BTreeMap::new(),
        }
    }

    fn leases(ls: &[LeaseRequest]) -> BTreeMap<String, LeaseRequest> {
        ls.iter().map(|l| (l.holder.clone(), l.clone())).collect()
    }

    fn readings(rs: &[(KnobId, SpeedLimit)]) -> BTreeMap<KnobId, SpeedLimit> {
        rs.iter().cloned().collect()
    }

    /// Applies the writes of `t` to `kernel` and returns `t.end`.
    fn run(
        old: &PolicyState,
        ls: BTreeMap<String, LeaseRequest>,
        kernel: &mut BTreeMap<KnobId, SpeedLimit>,
    ) -> (PolicyState, Transition) {
        let t = transition(old, ls, kernel).unwrap();
        for w in &t.writes {
            let r = match w.setting {
                Setting::Kibs(v) => SpeedLimit::local(v),
                Setting::System => SpeedLimit {
                    kib_s: 1000,
                    system: true,
                },
            };
            kernel.insert(w.knob.clone(), r);
        }
        (t.end.clone(), t)
    }

    #[test]
    fn first_lease_saves_original_and_writes() {
        let mut k = readings(&[(gmin(), SpeedLimit::local(1000))]);
        let (s, t) = run(
            &PolicyState::default(),
            leases(&[lease("i", Some(0), None)]),
            &mut k,
        );
        assert_eq!(t.writes.len(), 1);
        assert_eq!(t.writes[0].setting, Setting::Kibs(0));
        assert_eq!(s.knobs[&gmin()].original, SpeedLimit::local(1000));
        assert_eq!(s.knobs[&gmin()].written, Some(0));
        // mid recognises both old and new as ours, and already holds the original
        assert_eq!(t.mid.knobs[&gmin()].pending, Some(Setting::Kibs(0)));
        assert_eq!(t.mid.knobs[&gmin()].original, SpeedLimit::local(1000));
        assert_eq!(k[&gmin()], SpeedLimit::local(0));
    }

    #[test]
    fn io_depth_is_saved_leased_lowest_wins_and_restored() {
        let system32 = SpeedLimit {
            kib_s: 32,
            system: true,
        };
        let mut k = readings(&[(gdepth(), SpeedLimit::local(32)), (adepth("md0"), system32)]);
        // A boost raises both.
        let boost = depth("boost", Some(128), Some(128));
        let (s, t) = run(
            &PolicyState::default(),
            leases(std::slice::from_ref(&boost)),
            &mut k,
        );
        assert_eq!(t.writes.len(), 2);
        assert_eq!(s.knobs[&gdepth()].original, SpeedLimit::local(32));
        assert_eq!(s.knobs[&adepth("md0")].original, system32);
        assert_eq!(t.mid.knobs[&gdepth()].pending, Some(Setting::Kibs(128)));
        assert_eq!(k[&adepth("md0")], SpeedLimit::local(128));
        // A quiet lease lowers them while it lives: the most yielding request wins.
        let quiet = depth("quiet", Some(1), Some(0));
        let (s, _) = run(&s, leases(&[boost.clone(), quiet]), &mut k);
        assert_eq!(k[&gdepth()], SpeedLimit::local(1));
        assert_eq!(k[&adepth("md0")], SpeedLimit::local(1), "0 is written as 1");
        let (s, _) = run(&s, leases(&[boost]), &mut k);
        assert_eq!(k[&gdepth()], SpeedLimit::local(128));
        // The last lease goes: the global number and the array's `system` come back.
        let (s, t) = run(&s, BTreeMap::new(), &mut k);
        assert!(t.warnings.is_empty(), "{:?}", t.warnings);
        assert!(s.knobs.is_empty());
        assert_eq!(k[&gdepth()], SpeedLimit::local(32));
        assert!(t.writes.iter().any(|w| w.setting == Setting::System));
        assert_eq!(targets(&leases(&[depth("z", Some(0), None)]))[&gdepth()], 1);
    }

    #[test]
    fn io_depth_absent_from_the_kernel_is_never_written_nor_an_error() {
        // A kernel before 6.16: no sync_io_depth at all.
        let mut l = lease("boost", Some(50_000), None);
        l.global.io_depth = Some(128);
        let mut k = readings(&[(gmin(), SpeedLimit::local(1000))]);
        let (s, t) = run(&PolicyState::default(), leases(&[l.clone()]), &mut k);
        assert_eq!(t.writes.len(), 1, "{:?}", t.writes);
        assert_eq!(t.writes[0].knob, gmin());
        assert!(t.warnings.is_empty());
        assert!(!s.knobs.contains_key(&gdepth()));
        assert!(!k.contains_key(&gdepth()), "never created");
        let (s, t) = run(&s, BTreeMap::new(), &mut k);
        assert!(t.warnings.is_empty() && s.knobs.is_empty());
        // While the originals are unknown, too.
        let unknown = PolicyState {
            originals_unknown: Some("/x.corrupt".into()),
            ..Default::default()
        };
        let t = transition(&unknown, leases(&[l]), &k).unwrap();
        assert_eq!(t.writes.len(), 1);
        // A managed io depth whose array went away (or lost its redundancy group): dropped
        // with the gone warning, not an error.
        let mut k = readings(&[(adepth("md0"), SpeedLimit::local(32))]);
        let (s, _) = run(
            &PolicyState::default(),
            leases(&[depth("b", None, Some(64))]),
            &mut k,
        );
        let t = transition(&s, leases(&[depth("b", None, Some(64))]), &BTreeMap::new()).unwrap();
        assert!(t.writes.is_empty() && t.end.knobs.is_empty());
        assert!(
            t.warnings[0].to_string().contains("is gone"),
            "{:?}",
            t.warnings
        );
    }

    #[test]
    fn applying_twice_never_saves_our_value_as_original() {
        let mut k = readings(&[(gmin(), SpeedLimit::local(1000))]);
        let l = leases(&[lease("i", Some(0), None)]);
        let (s1, _) = run(&PolicyState::default(), l.clone(), &mut k);
        let (s2, t2) = run(&s1, l.clone(), &mut k);
        assert!(t2.writes.is_empty());
        assert_eq!(s2.knobs[&gmin()].original, SpeedLimit::local(1000));
        let (s3, t3) = run(&s2, BTreeMap::new(), &mut k);
        assert_eq!(t3.writes[0].setting, Setting::Kibs(1000));
        assert!(s3.knobs.is_empty() && s3.leases.is_empty());
        assert_eq!(k[&gmin()], SpeedLimit::local(1000));
    }

    #[test]
    fn most_yielding_request_wins() {
        let l = leases(&[
            lease("a", Some(500), Some(100_000)),
            lease("b", Some(0), Some(300_000)),
            lease("c", None, Some(50_000)),
        ]);
        let t = targets(&l);
        assert_eq!(t[&gmin()], 0);
        assert_eq!(t[&gmax()], 50_000);
    }

    #[test]
    fn two_leases_released_in_either_order() {
        for order in [["a", "b"], ["b", "a"]] {
            let mut k = readings(&[
                (gmin(), SpeedLimit::local(1000)),
                (gmax(), SpeedLimit::local(200_000)),
            ]);
            let a = lease("a", Some(0), None);
            let b = lease("b", Some(100), Some(5000));
            let (s, _) = run(
                &PolicyState::default(),
                leases(std::slice::from_ref(&a)),
                &mut k,
            );
            let (s, _) = run(&s, leases(&[a.clone(), b.clone()]), &mut k);
            assert_eq!(k[&gmin()], SpeedLimit::local(0));
            assert_eq!(k[&gmax()], SpeedLimit::local(5000));
            let mut ls = leases(&[a, b]);
            ls.remove(order[0]);
            let (s, _) = run(&s, ls, &mut k);
            if order[0] == "a" {
                assert_eq!(k[&gmin()], SpeedLimit::local(100));
                assert_eq!(k[&gmax()], SpeedLimit::local(5000));
            } else {
                assert_eq!(k[&gmin()], SpeedLimit::local(0));
                // b was the only one asking for max: restored at once
                assert_eq!(k[&gmax()], SpeedLimit::local(200_000));
                assert!(!s.knobs.contains_key(&gmax()));
            }
            let (s, _) = run(&s, BTreeMap::new(), &mut k);
            assert!(s.knobs.is_empty());
            assert_eq!(k[&gmin()], SpeedLimit::local(1000));
            assert_eq!(k[&gmax()], SpeedLimit::local(200_000));
        }
    }

    #[test]
    fn array_min_zero_is_written_as_one_and_system_restored() {
        let mut l = lease("w", None, None);
        l.arrays.insert(
            "md0".into(),
            Limits {
                min: Some(0),
                max: None,
                io_depth: None,
            },
        );
        let mut k = readings(&[(
            amin("md0"),
            SpeedLimit {
                kib_s: 1000,
                system: true,
            },
        )]);
        let (s, t) = run(&PolicyState::default(), leases(&[l]), &mut k);
        assert_eq!(t.writes[0].setting, Setting::Kibs(1));
        assert!(s.knobs[&amin("md0")].original.system);
        let (_, t) = run(&s, BTreeMap::new(), &mut k);
        assert_eq!(t.writes[0].setting, Setting::System);
    }

    #[test]
    fn array_max_zero_is_written_as_one() {
        let mut l = lease("w", None, None);
        l.arrays.insert(
            "md0".into(),
            Limits {
                min: None,
                max: Some(0),
                io_depth: None,
            },
        );
        let amax = KnobId::Array {
            array: "md0".into(),
            bound: Bound::Max,
        };
        assert_eq!(targets(&leases(&[l]))[&amax], 1);
        // The global max accepts 0 (pause).
        assert_eq!(targets(&leases(&[lease("g", None, Some(0))]))[&gmax()], 0);
    }

    #[test]
    fn min_above_max_in_one_request_is_rejected() {
        let e = validate(&lease("a", Some(10), Some(5))).unwrap_err();
        assert!(matches!(
            e,
            CoreError::MinAboveMax {
                min: 10,
                max: 5,
                ..
            }
        ));
        assert!(e.to_string().starts_with("invalid argument"), "{e}");
        let mut l = lease("a", None, None);
        l.arrays.insert(
            "md0".into(),
            Limits {
                min: Some(7),
                max: Some(6),
                io_depth: None,
            },
        );
        assert!(matches!(validate(&l), Err(CoreError::MinAboveMax { .. })));
        assert!(validate(&lease("a", Some(5), Some(5))).is_ok());
    }

    #[test]
    fn write_back_warning_is_dropped_when_the_cycle_ends() {
        let mut k = readings(&[(gmin(), SpeedLimit::local(1000))]);
        let (s, _) = run(
            &PolicyState::default(),
            leases(&[lease("i", Some(0), None)]),
            &mut k,
        );
        k.insert(gmin(), SpeedLimit::local(5000));
        // Re-applied while leased: the admin's value becomes the one to write back.
        let (s, t) = run(&s, leases(&[lease("i", Some(0), None)]), &mut k);
        assert!(t.warnings[0]
            .to_string()
            .ends_with("it is the value restore will write back"));
        let (s, _) = run(&s, BTreeMap::new(), &mut k);
        assert_eq!(k[&gmin()], SpeedLimit::local(5000));
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
        // Also when only that knob's lease goes and another lease lives on.
        let mut k = readings(&[
            (gmin(), SpeedLimit::local(1000)),
            (gmax(), SpeedLimit::local(200_000)),
        ]);
        let both = leases(&[lease("i", Some(0), None), lease("j", None, Some(10))]);
        let (s, _) = run(&PolicyState::default(), both.clone(), &mut k);
        k.insert(gmin(), SpeedLimit::local(5000));
        let (s, t) = run(&s, both, &mut k);
        assert_eq!(t.warnings.len(), 1);
        let (s, _) = run(&s, leases(&[lease("j", None, Some(10))]), &mut k);
        assert_eq!(k[&gmin()], SpeedLimit::local(5000));
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    }

    #[test]
    fn originals_unknown_applies_without_capturing_and_leaves_values() {
        let unknown = PolicyState {
            originals_unknown: Some("/run/mdpilot/policy.toml.corrupt-1".into()),
            ..Default::default()
        };
        // The kernel holds our own earlier 0: it must never become "the original".
        let mut k = readings(&[
            (gmin(), SpeedLimit::local(0)),
            (gmax(), SpeedLimit::local(9)),
        ]);
        let (s, t) = run(
            &unknown,
            leases(&[lease("i", Some(0), None), lease("j", Some(50), Some(100))]),
            &mut k,
        );
        assert!(s.knobs.is_empty(), "{:?}", s.knobs);
        assert_eq!(t.writes.len(), 1, "max 9 -> 100");
        assert_eq!(k[&gmax()], SpeedLimit::local(100));
        let mut only_j = leases(&[lease("j", Some(50), Some(100))]);
        let (s, t) = run(&s, only_j.clone(), &mut k);
        assert_eq!(
            k[&gmin()],
            SpeedLimit::local(50),
            "remaining lease still applies"
        );
        assert!(t.warnings.is_empty(), "{:?}", t.warnings);
        only_j.clear();
        let (s, t) = run(&s, only_j, &mut k);
        assert!(t.writes.is_empty());
        assert_eq!(
            (k[&gmin()], k[&gmax()]),
            (SpeedLimit::local(50), SpeedLimit::local(100))
        );
        assert_eq!(
            t.warnings,
            vec![PolicyWarning::OriginalsUnknown {
                moved_to: "/run/mdpilot/policy.toml.corrupt-1".into()
            }]
        );
        assert!(t.warnings[0].to_string().contains("restore --defaults"));
        assert_eq!(
            s.originals_unknown, unknown.originals_unknown,
            "still unknown"
        );
    }

    #[test]
    fn admin_change_during_lease_is_left_on_restore() {
        let mut k = readings(&[(gmin(), SpeedLimit::local(1000))]);
        let (s, _) = run(
            &PolicyState::default(),
            leases(&[lease("i", Some(0), None)]),
            &mut k,
        );
        k.insert(gmin(), SpeedLimit::local(5000));
        assert_eq!(drift_warnings(&s, &k).len(), 1);
        let (s, t) = run(&s, BTreeMap::new(), &mut k);
        assert!(t.writes.is_empty());
        assert_eq!(k[&gmin()], SpeedLimit::local(5000));
        assert_eq!(
            t.warnings,
            vec!["speed_limit_min changed behind our back: left at 5000"]
        );
        assert_eq!(s.warnings, t.warnings);
    }

    #[test]
    fn admin_change_seen_by_next_acquire_becomes_the_value_to_restore() {
        let mut k = readings(&[(gmin(), SpeedLimit::local(1000))]);
        let (s, _) = run(
            &PolicyState::default(),
            leases(&[lease("i", Some(0), None)]),
            &mut k,
        );
        k.insert(gmin(), SpeedLimit::local(5000));
        let (s, t) = run(
            &s,
            leases(&[lease("i", Some(0), None), lease("j", Some(10), None)]),
            &mut k,
        );
        assert_eq!(t.warnings.len(), 1);
        assert_eq!(s.knobs[&gmin()].original, SpeedLimit::local(5000));
        assert_eq!(k[&gmin()], SpeedLimit::local(0));
        run(&s, BTreeMap::new(), &mut k);
        assert_eq!(k[&gmin()], SpeedLimit::local(5000));
    }

    #[test]
    fn crash_after_mid_save_restores_cleanly() {
        // The mid state was saved, the write never happened: the kernel still has the original.
        let k = readings(&[(gmin(), SpeedLimit::local(1000))]);
        let t = transition(
            &PolicyState::default(),
            leases(&[lease("i", Some(0), None)]),
            &k,
        )
        .unwrap();
        let mut k2 = k.clone();
        let (s, t2) = run(&t.mid, BTreeMap::new(), &mut k2);
        assert!(t2.writes.is_empty());
        assert!(t2.warnings.is_empty());
        assert!(s.knobs.is_empty());
        // And when the write did land before the crash:
        let mut k3 = readings(&[(gmin(), SpeedLimit::local(0))]);
        let (_, t3) = run(&t.mid, BTreeMap::new(), &mut k3);
        assert_eq!(t3.writes[0].setting, Setting::Kibs(1000));
        assert!(t3.warnings.is_empty());
    }

    #[test]
    fn crash_mid_restore_is_resumed() {
        let mut k = readings(&[(gmin(), SpeedLimit::local(1000))]);
        let (s, _) = run(
            &PolicyState::default(),
            leases(&[lease("i", Some(0), None)]),
            &mut k,
        );
        let t = transition(&s, BTreeMap::new(), &k).unwrap();
        // Crash after mid save, before or after the write: the next restore finishes the job.
        for kernel_value in [0, 1000] {
            let mut k2 = readings(&[(gmin(), SpeedLimit::local(kernel_value))]);
            let (s2, t2) = run(&t.mid, BTreeMap::new(), &mut k2);
            assert!(t2.warnings.is_empty(), "{:?}", t2.warnings);
            assert!(s2.knobs.is_empty());
            assert_eq!(k2[&gmin()], SpeedLimit::local(1000));
        }
    }

    #[test]
    fn crash_during_restore_after_crash_during_apply_still_restores() {
        // Apply crashed after its write landed but before the end state was saved.
        let k = readings(&[(gmin(), SpeedLimit::local(1000))]);
        let apply = transition(
            &PolicyState::default(),
            leases(&[lease("i", Some(0), None)]),
            &k,
        )
        .unwrap();
        let k0 = readings(&[(gmin(), SpeedLimit::local(0))]);
        // Restore crashed after its mid state was saved, before its write landed.
        let restore = transition(&apply.mid, BTreeMap::new(), &k0).unwrap();
        let mut k2 = k0.clone();
        let (s, t) = run(&restore.mid, BTreeMap::new(), &mut k2);
        assert!(t.warnings.is_empty(), "{:?}", t.warnings);
        assert!(s.knobs.is_empty());
        assert_eq!(k2[&gmin()], SpeedLimit::local(1000));
        // Same with a re-apply (another value) crashing in between.
        let reapply = transition(&apply.mid, leases(&[lease("i", Some(5), None)]), &k0).unwrap();
        let mut k3 = k0.clone();
        let (_, t) = run(&reapply.mid, BTreeMap::new(), &mut k3);
        assert!(t.warnings.is_empty(), "{:?}", t.warnings);
        assert_eq!(k3[&gmin()], SpeedLimit::local(1000));
    }

    #[test]
    fn missing_reading_for_target_is_an_error() {
        let e = transition(
            &PolicyState::default(),
            leases(&[lease("i", Some(0), None)]),
            &BTreeMap::new(),
        )
        .unwrap_err();
        assert_eq!(e, CoreError::MissingReading(gmin()));
    }

    #[test]
    fn gone_array_is_dropped_with_warning() {
        let mut l = lease("w", None, None);
        l.arrays.insert(
            "md5".into(),
            Limits {
                min: Some(10),
                max: None,
                io_depth: None,
            },
        );
        let mut k = readings(&[(amin("md5"), SpeedLimit::local(1000))]);
        let (s, _) = run(&PolicyState::default(), leases(&[l]), &mut k);
        let t = transition(&s, BTreeMap::new(), &BTreeMap::new()).unwrap();
        assert!(t.writes.is_empty());
        assert!(t.end.knobs.is_empty());
        assert!(t.warnings[0].to_string().contains("is gone"));
    }

    #[test]
    fn warnings_cleared_on_fresh_cycle_and_capped() {
        let old = PolicyState {
            warnings: (0..MAX_WARNINGS)
                .map(|i| PolicyWarning::Other(i.to_string()))
                .collect(),
            ..Default::default()
        };
        let k = readings(&[(gmin(), SpeedLimit::local(1000))]);
        let t = transition(&old, leases(&[lease("i", Some(0), None)]), &k).unwrap();
        assert!(t.end.warnings.is_empty());
        // Not fresh: kept and capped.
        let mut old2 = t.end.clone();
        old2.warnings = (0..MAX_WARNINGS)
            .map(|i| PolicyWarning::Other(i.to_string()))
            .collect();
        let k2 = readings(&[(gmin(), SpeedLimit::local(7))]);
        let t2 = transition(&old2, BTreeMap::new(), &k2).unwrap();
        assert_eq!(t2.end.warnings.len(), MAX_WARNINGS);
        assert!(t2
            .end
            .warnings
            .last()
            .unwrap()
            .to_string()
            .contains("left at 7"));
    }

    #[test]
    fn validate_rejects_bad_requests() {
        assert!(matches!(
            validate(&lease("", Some(0), None)),
            Err(CoreError::InvalidHolder(_))
        ));
        assert!(matches!(
            validate(&lease("a\n", Some(0), None)),
            Err(CoreError::InvalidHolder(_))
        ));
        assert!(matches!(
            validate(&lease("a", None, None)),
            Err(CoreError::EmptyLease(_))
        ));
        assert!(matches!(
            validate(&lease("a", Some(1 << 40), None)),
            Err(CoreError::LimitTooLarge { .. })
        ));
        let mut l = lease("a", None, None);
        l.arrays.insert(
            "../sda".into(),
            Limits {
                min: Some(1),
                max: None,
                io_depth: None,
            },
        );
        assert!(matches!(validate(&l), Err(CoreError::InvalidArray(_))));
        assert!(validate(&lease("a", Some(0), Some(0))).is_ok());
    }

    #[test]
    fn knob_names_round_trip() {
        for k in [gmin(), gmax(), amin("md127"), gdepth(), adepth("md_d0")] {
            assert_eq!(k.to_string().parse::<KnobId>().unwrap(), k);
        }
        assert_eq!(gdepth().to_string(), "sync_io_depth");
        assert_eq!(adepth("md0").to_string(), "md0/sync_io_depth");
        assert_eq!(gdepth().kernel_path(), "/proc/sys/dev/raid/sync_io_depth");
        assert_eq!(
            adepth("md0").kernel_path(),
            "/sys/block/md0/md/sync_io_depth"
        );
        for bad in [
            "sync_speed_min",
            "md0/speed_limit_min",
            "io_depth",
            "md0/io_depth",
        ] {
            assert!(bad.parse::<KnobId>().is_err(), "{bad}");
        }
        assert!("md0/../x/sync_speed_min".parse::<KnobId>().is_err());
        assert!("../x/sync_speed_min".parse::<KnobId>().is_err());
        assert_eq!(
            amin("md0").kernel_path(),
            "/sys/block/md0/md/sync_speed_min"
        );
        assert!(valid_array_name("md_d0"));
        assert!(!valid_array_name("md"));
        assert!(!valid_array_name("sda"));
    }

    mod model {
        use super::*;
        use proptest::prelude::*;

        fn pool() -> Vec<LeaseRequest> {
            let mut w = lease("w", None, Some(50));
            w.arrays.insert(
                "md0".into(),
                Limits {
                    min: Some(0),
                    max: None,
                    io_depth: None,
                },
            );
            let mut boost = depth("boost", Some(128), Some(256));
            boost.global.min = Some(50_000);
            vec![
                lease("i", Some(0), None),
                lease("a", Some(300), Some(9000)),
                lease("i", Some(7), Some(100)),
                w,
                boost,
                depth("quiet", Some(1), Some(1)),
            ]
        }

        fn originals() -> BTreeMap<KnobId, SpeedLimit> {
            readings(&[
                (gmin(), SpeedLimit::local(1000)),
                (gmax(), SpeedLimit::local(200_000)),
                (
                    amin("md0"),
                    SpeedLimit {
                        kib_s: 1000,
                        system: true,
                    },
                ),
                (gdepth(), SpeedLimit::local(32)),
                (
                    adepth("md0"),
                    SpeedLimit {
                        kib_s: 32,
                        system: true,
                    },
                ),
            ])
        }

        fn write(kernel: &mut BTreeMap<KnobId, SpeedLimit>, w: &Write) {
            let r = match w.setting {
                Setting::Kibs(v) => SpeedLimit::local(v),
                // The kernel shows the live global value; only the flag matters here.
                Setting::System => SpeedLimit {
                    kib_s: if w.knob.bound() == Bound::IoDepth {
                        32
                    } else {
                        1000
                    },
                    system: true,
                },
            };
            kernel.insert(w.knob.clone(), r);
        }

        proptest! {
            /// Any sequence of lease sets, each transition possibly crashing after its mid
            /// state was saved with any prefix of its writes done, then a clean restore: the
            /// originals are back and no drift was ever reported (nobody else wrote).
            #[test]
            fn crashes_anywhere_never_lose_the_originals(
                ops in proptest::collection::vec(
                    (proptest::collection::vec(0usize..6, 0..4), proptest::option::of(0usize..6)),
                    1..8,
                )
            ) {
                let pool = pool();
                let mut kernel = originals();
                let mut disk = PolicyState::default();
                for (picks, crash) in ops {
                    let ls = leases(&picks.iter().map(|&i| pool[i].clone()).collect::<Vec<_>>());
                    let t = transition(&disk, ls, &kernel).unwrap();
                    prop_assert!(t.warnings.is_empty(), "{:?}", t.warnings);
                    match crash {
                        Some(j) if !t.writes.is_empty() => {
                            for w in t.writes.iter().take(j) {
                                write(&mut kernel, w);
                            }
                            disk = t.mid;
                        }
                        _ => {
                            for w in &t.writes {
                                write(&mut kernel, w);
                            }
                            disk = t.end;
                        }
                    }
                }
                let t = transition(&disk, BTreeMap::new(), &kernel).unwrap();
                prop_assert!(t.warnings.is_empty(), "{:?}", t.warnings);
                for w in &t.writes {
                    write(&mut kernel, w);
                }
                prop_assert!(t.end.knobs.is_empty());
                prop_assert_eq!(kernel, originals());
            }
        }
    }
}
