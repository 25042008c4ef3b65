//! mdadm-style events from successive snapshots of the arrays: pure, no I/O.
//!
//! The service (and `mdpilot monitor --events`) feed [`Classifier::observe`] one [`ArrayView`]
//! per array each time the watcher says something changed; it answers with the [`Event`]s that
//! the difference means, named as mdadm's `Monitor.c` names them (`mdadm --monitor`, man mdadm
//! section MONITOR MODE), so scripts written for `mdadm --monitor --program` keep working:
//!
//! | event | when (here) | mdadm's rule |
//! |---|---|---|
//! | `NewArray` | an active array appears after the first snapshot | same (arrays found later) |
//! | `DeviceDisappeared` | a known array stops, becomes inactive, or goes away | same |
//! | `Fail` | an in-sync member turns faulty or vanishes | active/sync bit lost |
//! | `FailSpare` | a spare (or a member being rebuilt) turns faulty | spare got Faulty |
//! | `SpareActive` | a member not in sync becomes in sync (a rebuild ended) | sync bit gained |
//! | `DegradedArray` | missing members appear (at first sight or later), except an initial build | first sight only |
//! | `SparesMissing` | fewer spares than configured (first sight, or on dropping below) | first sight only |
//! | `RebuildStarted`, `Rebuild20..80`, `RebuildFinished` | a resync, recovery or reshape | any sync |
//! | `InitialBuildStarted`, `InitialBuild20..80`, `InitialBuildFinished` | the first resync/recovery of a fresh array | (none: mdadm says Rebuild/DegradedArray) |
//! | `CheckStarted`, `Check20..80`, `CheckPaused`, `CheckFinished` | a `check` or `repair` | (none: mdadm says Rebuild) |
//!
//! Progress steps are 20 % (mdadm's default `--increment`); the name carries the step crossed
//! (`Rebuild40`), where mdadm prints the percent read at that moment (`Rebuild41`). A jump over
//! several steps gives one event, for the highest. Like mdadm, a sync already running at the
//! first snapshot gives no `*Started`, but its progress and end are reported.
//!
//! "Fresh": an array that appears after the first snapshot, or whose creation time (from the
//! superblock, when the caller knows it) is less than [`FRESH_WINDOW_S`] old. Its first resync or
//! recovery is the initial build (md builds a new raid5 by recovering onto its last member, so
//! `[UU_]` then is no failure). Degradation "covered" by a listed member waiting for or under
//! recovery (members not faulty and not spare ≥ `raid_disks`) is no `DegradedArray` for a fresh
//! array; an array created with `missing` members is degraded and says so.
//!
//! Paused or finished: when a check ends, the kernel (drivers/md/md.c `md_do_sync`) resets
//! `md/sync_min` to 0 when it ran to the end and leaves it at the reached position when it was
//! interrupted (`idle`, `frozen`). So `sync_min > 0` or `sync_action = frozen` means paused.
//! Where `sync_min` is unknown, a check last seen below 99 % counts as paused.

pub mod view;

pub use view::{
    view_from_array, views_from_model, ArrayView, MemberRole, MemberView, SyncGroup, SyncView,
};

use crate::model::SyncKind;
use serde::Serialize;
use std::collections::BTreeMap;

/// Seconds after creation during which an array counts as fresh (its first sync is the initial
/// build), and after its first sighting when no sync ever started.
pub const FRESH_WINDOW_S: u64 = 600;

/// The progress step of `RebuildNN`, `InitialBuildNN`, `CheckNN`, in percent (mdadm's default
/// `--increment 20`).
pub const PERCENT_STEP: u8 = 20;

/// The event names (mdadm's, plus InitialBuild* and Check*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum EventKind {
    /// An active array appeared.
    NewArray,
    /// A known array stopped or went away.
    DeviceDisappeared,
    /// An in-sync member failed or vanished.
    Fail,
    /// A spare or rebuilding member failed.
    FailSpare,
    /// A member became in sync.
    SpareActive,
    /// The array lacks members.
    DegradedArray,
    /// Fewer spares than configured.
    SparesMissing,
    /// A resync, recovery or reshape started.
    RebuildStarted,
    /// A rebuild crossed the step (20, 40, 60, 80).
    Rebuild(u8),
    /// A rebuild ended.
    RebuildFinished,
    /// The first sync of a fresh array started.
    InitialBuildStarted,
    /// The initial build crossed the step.
    InitialBuild(u8),
    /// The initial build ended.
    InitialBuildFinished,
    /// A check or repair started (or resumed).
    CheckStarted,
    /// A check crossed the step.
    Check(u8),
    /// A check stopped before its end (`idle`/`frozen`; position kept in `sync_min`).
    CheckPaused,
    /// A check ran to the end; `mismatch_cnt` is its result.
    CheckFinished,
}

impl EventKind {
    /// The event word as mdadm prints it and passes to `--program` (`Rebuild40`).
    pub fn name(self) -> String {
        match self {
            EventKind::Rebuild(n) => format!("Rebuild{n:02}"),
            EventKind::InitialBuild(n) => format!("InitialBuild{n:02}"),
            EventKind::Check(n) => format!("Check{n:02}"),
            other => format!("{other:?}"),
        }
    }

    /// A fixed journald `MESSAGE_ID` (128 bits, 32 hex digits) per event type; the progress
    /// steps share one id per family (the step is in the message and `PERCENT=`).
    pub fn message_id(self) -> &'static str {
        match self {
            EventKind::NewArray => "6f1c0b4e2a8d4e7f9b3c5d1a0e2f4a01",
            EventKind::DeviceDisappeared => "6f1c0b4e2a8d4e7f9b3c5d1a0e2f4a02",
            EventKind::Fail => "6f1c0b4e2a8d4e7f9b3c5d1a0e2f4a03",
            EventKind::FailSpare => "6f1c0b4e2a8d4e7f9b3c5d1a0e2f4a04",
            EventKind::SpareActive => "6f1c0b4e2a8d4e7f9b3c5d1a0e2f4a05",
            EventKind::DegradedArray => "6f1c0b4e2a8d4e7f9b3c5d1a0e2f4a06",
            EventKind::SparesMissing => "6f1c0b4e2a8d4e7f9b3c5d1a0e2f4a07",
            EventKind::RebuildStarted => "6f1c0b4e2a8d4e7f9b3c5d1a0e2f4a08",
            EventKind::Rebuild(_) => "6f1c0b4e2a8d4e7f9b3c5d1a0e2f4a09",
            EventKind::RebuildFinished => "6f1c0b4e2a8d4e7f9b3c5d1a0e2f4a0a",
            EventKind::InitialBuildStarted => "6f1c0b4e2a8d4e7f9b3c5d1a0e2f4a0b",
            EventKind::InitialBuild(_) => "6f1c0b4e2a8d4e7f9b3c5d1a0e2f4a0c",
            EventKind::InitialBuildFinished => "6f1c0b4e2a8d4e7f9b3c5d1a0e2f4a0d",
            EventKind::CheckStarted => "6f1c0b4e2a8d4e7f9b3c5d1a0e2f4a0e",
            EventKind::Check(_) => "6f1c0b4e2a8d4e7f9b3c5d1a0e2f4a0f",
            EventKind::CheckPaused => "6f1c0b4e2a8d4e7f9b3c5d1a0e2f4a10",
            EventKind::CheckFinished => "6f1c0b4e2a8d4e7f9b3c5d1a0e2f4a11",
        }
    }
}

/// How loud an event is (mdadm logs Fail*, Degrade*, DeviceDisappeared at LOG_CRIT).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Routine (progress, starts, ends, a clean check).
    Info,
    /// Needs a look: spares missing, mismatches on a parity level (raid4/5/6).
    Warning,
    /// Data at risk: a failure, degradation, an array gone.
    Critical,
}

/// One event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// What happened.
    #[serde(serialize_with = "ser_kind", rename = "event")]
    pub kind: EventKind,
    /// Kernel array name (`md0`).
    pub array: String,
    /// The array's UUID, where known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// The member concerned (Fail, FailSpare, SpareActive).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// The level (`raid5`), where known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    /// The sync word for sync events (`recovery`, `check`, `repair`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// `md/mismatch_cnt` (512-byte sectors) for CheckFinished/CheckPaused/RebuildFinished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mismatch_cnt: Option<u64>,
    /// How loud.
    pub severity: Severity,
}

fn ser_kind<S: serde::Serializer>(k: &EventKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&k.name())
}

impl Event {
    /// One text line: `Fail md0 sdb1`, `CheckFinished md0 mismatch_cnt=0`,
    /// `DegradedArray md0` (mdadm's `event dev disc` order).
    pub fn line(&self) -> String {
        let mut s = format!("{} {}", self.kind.name(), self.array);
        if let Some(d) = &self.device {
            s.push(' ');
            s.push_str(d);
        }
        if let Some(a) = &self.action {
            s.push_str(&format!(" action={a}"));
        }
        if let Some(m) = self.mismatch_cnt {
            s.push_str(&format!(" mismatch_cnt={m}"));
        }
        if self.severity != Severity::Info {
            s.push_str(&format!(" severity={}", severity_word(self.severity)));
        }
        s
    }
}

fn severity_word(s: Severity) -> &'static str {
    match s {
        Severity::Info => "info",
        Severity::Warning => "warning",
        Severity::Critical => "critical",
    }
}

/// mdadm's LOG_CRIT set; mismatches after a check warn where the level has parity
/// ([`crate::model::Level::has_parity`]: raid4/5/6) and inform on raid1/raid10
/// (swap and in-flight writes make them there, as Fedora's raid-check notes).
fn severity(kind: EventKind, level: Option<&str>, mismatches: Option<u64>) -> Severity {
    match kind {
        EventKind::Fail
        | EventKind::FailSpare
        | EventKind::DegradedArray
        | EventKind::DeviceDisappeared => Severity::Critical,
        EventKind::SparesMissing => Severity::Warning,
        EventKind::CheckFinished | EventKind::CheckPaused | EventKind::RebuildFinished
            if mismatches.unwrap_or(0) > 0 =>
        {
            if level.is_some_and(|l| crate::model::Level::from(l).has_parity()) {
                Severity::Warning
            } else {
                Severity::Info
            }
        }
        _ => Severity::Info,
    }
}

/// What the classifier remembers of an array between snapshots.
#[derive(Debug, Clone)]
struct Known {
    view: ArrayView,
    /// Its first sync will be the initial build.
    fresh: bool,
    /// The running sync is the initial build.
    initial: bool,
    /// Seen at (for the fresh window), seconds.
    seen_s: u64,
    /// Missing members already reported (or accepted at start-up); 0 once whole again.
    degraded_known: u32,
    spares_missing_reported: bool,
}

/// Turns successive snapshots into events. Keeps one entry per array name.
#[derive(Debug, Default)]
pub struct Classifier {
    known: BTreeMap<String, Known>,
    started: bool,
    /// Spares each array should have, by name or UUID (mdadm.conf `spares=`).
    expected_spares: BTreeMap<String, u32>,
}

impl Classifier {
    /// A classifier with no expected spares.
    pub fn new() -> Self {
        Self::default()
    }

    /// Expect `n` spares on the array named `key` (kernel name or UUID): SparesMissing when fewer.
    pub fn expect_spares(&mut self, key: &str, n: u32) {
        self.expected_spares.insert(key.to_string(), n);
    }

    fn expected(&self, v: &ArrayView) -> Option<u32> {
        self.expected_spares.get(&v.name).copied().or_else(|| {
            v.uuid
                .as_ref()
                .and_then(|u| self.expected_spares.get(u).copied())
        })
    }

    /// Feeds one snapshot (every array, at `now_s` seconds since the epoch); returns the events
    /// since the previous one, in array-name order, each array's in the order they happened.
    /// The first call sets the baseline: it reports only DegradedArray and SparesMissing.
    pub fn observe(&mut self, arrays: &[ArrayView], now_s: u64) -> Vec<Event> {
        let mut out = Vec::new();
        let baseline = !self.started;
        self.started = true;
        let now: BTreeMap<&str, &ArrayView> = arrays
            .iter()
            .filter(|a| a.active)
            .map(|a| (a.name.as_str(), a))
            .collect();
        let gone: Vec<String> = self
            .known
            .keys()
            .filter(|n| match now.get(n.as_str()) {
                None => true,
                Some(v) => {
                    v.uuid.is_some()
                        && self.known[*n].view.uuid.is_some()
                        && v.uuid != self.known[*n].view.uuid
                }
            })
            .cloned()
            .collect();
        for name in gone {
            let k = self.known.remove(&name).expect("listed");
            out.push(self.event(EventKind::DeviceDisappeared, &k.view, None));
        }
        for (name, v) in now {
            match self.known.remove(name) {
                None => {
                    let known = self.first_sight(v, baseline, now_s, &mut out);
                    self.known.insert(name.to_string(), known);
                }
                Some(k) => {
                    let known = self.step(k, v, now_s, &mut out);
                    self.known.insert(name.to_string(), known);
                }
            }
        }
        out
    }

    fn event(&self, kind: EventKind, v: &ArrayView, device: Option<&str>) -> Event {
        let mismatch_cnt = match kind {
            EventKind::CheckFinished | EventKind::CheckPaused => v.mismatch_cnt,
            // As mdadm: a rebuild's count is news only when not zero.
            EventKind::RebuildFinished => v.mismatch_cnt.filter(|&n| n > 0),
            _ => None,
        };
        Event {
            kind,
            array: v.name.clone(),
            uuid: v.uuid.clone(),
            device: device.map(str::to_string),
            level: v.level.clone(),
            action: None,
            mismatch_cnt,
            severity: severity(kind, v.level.as_deref(), mismatch_cnt),
        }
    }

    fn sync_event(&self, kind: EventKind, v: &ArrayView, action: &SyncKind) -> Event {
        let mut e = self.event(kind, v, None);
        e.action = Some(action.as_str().to_string());
        e
    }

    fn first_sight(
        &self,
        v: &ArrayView,
        baseline: bool,
        now_s: u64,
        out: &mut Vec<Event>,
    ) -> Known {
        let young = v
            .created_unix_s
            .is_some_and(|c| now_s.saturating_sub(c) < FRESH_WINDOW_S);
        let fresh = young || !baseline;
        if !baseline {
            out.push(self.event(EventKind::NewArray, v, None));
        }
        let mut k = Known {
            view: v.clone(),
            fresh,
            initial: false,
            seen_s: now_s,
            degraded_known: 0,
            spares_missing_reported: false,
        };
        if let Some(s) = &v.sync {
            if k.fresh && s.group() == SyncGroup::Rebuild {
                k.initial = true;
                // A fresh array found mid-build at start-up: its start was not seen.
                if !baseline {
                    out.push(self.sync_event(EventKind::InitialBuildStarted, v, &s.action));
                }
            } else if !baseline {
                let kind = match s.group() {
                    SyncGroup::Check => EventKind::CheckStarted,
                    SyncGroup::Rebuild => EventKind::RebuildStarted,
                };
                out.push(self.sync_event(kind, v, &s.action));
            }
        }
        self.degraded_and_spares(&mut k, v, baseline, out);
        k
    }

    /// DegradedArray / SparesMissing when the condition begins (or at first sight).
    fn degraded_and_spares(
        &self,
        k: &mut Known,
        v: &ArrayView,
        baseline: bool,
        out: &mut Vec<Event>,
    ) {
        let covered = v.degradation_covered();
        // At start-up a covered degradation is already being repaired (or is a fresh raid5
        // whose creation time is unknown): no alarm, as nothing is left for the admin to do.
        let excused = covered && (k.fresh || (baseline && v.sync.is_some()));
        if v.degraded == 0 {
            k.degraded_known = 0;
        } else if v.degraded > k.degraded_known && !excused {
            out.push(self.event(EventKind::DegradedArray, v, None));
            k.degraded_known = v.degraded;
        } else if excused && !k.fresh {
            k.degraded_known = v.degraded;
        }
        let missing = self.expected(v).is_some_and(|n| v.spares() < n);
        if missing && !k.spares_missing_reported {
            out.push(self.event(EventKind::SparesMissing, v, None));
        }
        k.spares_missing_reported = missing;
    }

    fn step(&self, mut k: Known, v: &ArrayView, now_s: u64, out: &mut Vec<Event>) -> Known {
        let old = k.view.clone();
        if self.member_changes(&k, &old, v, out) {
            // A failure during the initial build makes it a plain degraded array.
            k.fresh = false;
            k.initial = false;
        }
        self.sync_changes(&mut k, &old, v, now_s, out);
        if k.fresh && v.sync.is_none() && now_s.saturating_sub(k.seen_s) >= FRESH_WINDOW_S {
            // Built with --assume-clean (no sync came): later syncs are ordinary.
            k.fresh = false;
        }
        self.degraded_and_spares(&mut k, v, false, out);
        k.view = v.clone();
        k
    }

    /// Members: mdadm's three transitions, and members added straight in sync. True when an
    /// in-sync member failed.
    fn member_changes(
        &self,
        k: &Known,
        old: &ArrayView,
        v: &ArrayView,
        out: &mut Vec<Event>,
    ) -> bool {
        let mut failed_in_sync = false;
        for m in &old.members {
            let new = v.members.iter().find(|n| n.name == m.name).map(|n| n.role);
            match (m.role, new) {
                (MemberRole::InSync | MemberRole::Journal, None | Some(MemberRole::Faulty)) => {
                    failed_in_sync = true;
                    out.push(self.event(EventKind::Fail, v, Some(&m.name)));
                }
                (MemberRole::Spare | MemberRole::Rebuilding, Some(MemberRole::Faulty)) => {
                    out.push(self.event(EventKind::FailSpare, v, Some(&m.name)));
                }
                (MemberRole::Spare | MemberRole::Rebuilding, Some(MemberRole::InSync))
                    if !k.initial =>
                {
                    out.push(self.event(EventKind::SpareActive, v, Some(&m.name)));
                }
                _ => {}
            }
        }
        for m in &v.members {
            // A member added straight in sync (re-add with a clean bitmap).
            let was = old.members.iter().any(|o| o.name == m.name);
            if !was && m.role == MemberRole::InSync && v.sync.is_none() && v.degraded < old.degraded
            {
                out.push(self.event(EventKind::SpareActive, v, Some(&m.name)));
            }
        }
        failed_in_sync
    }

    /// Sync: end of the old one, start of a new one, progress steps.
    fn sync_changes(
        &self,
        k: &mut Known,
        old: &ArrayView,
        v: &ArrayView,
        now_s: u64,
        out: &mut Vec<Event>,
    ) {
        let same = match (&old.sync, &v.sync) {
            (Some(a), Some(b)) => a.action == b.action && b.percent + 0.001 >= a.percent,
            _ => false,
        };
        if let (Some(a), false) = (&old.sync, same) {
            let kind = match (a.group(), k.initial) {
                (SyncGroup::Check, _) => {
                    let paused = v.frozen
                        || match v.sync_min_sectors {
                            Some(m) => m > 0,
                            None => a.percent < 99.0,
                        };
                    if paused {
                        EventKind::CheckPaused
                    } else {
                        EventKind::CheckFinished
                    }
                }
                (SyncGroup::Rebuild, true) => EventKind::InitialBuildFinished,
                (SyncGroup::Rebuild, false) => EventKind::RebuildFinished,
            };
            out.push(self.sync_event(kind, v, &a.action));
            if a.group() == SyncGroup::Rebuild {
                k.initial = false;
                k.fresh = false;
            }
        }
        match (&old.sync, &v.sync, same) {
            (_, Some(b), false) => {
                let fresh_ok = k.fresh
                    && (v.created_unix_s.is_some()
                        || now_s.saturating_sub(k.seen_s) < FRESH_WINDOW_S);
                let kind = match b.group() {
                    SyncGroup::Check => EventKind::CheckStarted,
                    SyncGroup::Rebuild if fresh_ok => {
                        k.initial = true;
                        EventKind::InitialBuildStarted
                    }
                    SyncGroup::Rebuild => EventKind::RebuildStarted,
                };
                // Steps count from where it starts (a resumed check starts mid-way).
                out.push(self.sync_event(kind, v, &b.action));
            }
            (Some(a), Some(b), true) => self.steps(k, v, b, a.percent, out),
            _ => {}
        }
    }

    fn steps(&self, k: &Known, v: &ArrayView, s: &SyncView, from: f64, out: &mut Vec<Event>) {
        let step = |p: f64| ((p.clamp(0.0, 100.0) as u32) / PERCENT_STEP as u32) as u8;
        let (a, b) = (step(from), step(s.percent));
        if b > a && (1..=4).contains(&b) {
            let n = b * PERCENT_STEP;
            let kind = match (s.group(), k.initial) {
                (SyncGroup::Check, _) => EventKind::Check(n),
                (SyncGroup::Rebuild, true) => EventKind::InitialBuild(n),
                (SyncGroup::Rebuild, false) => EventKind::Rebuild(n),
            };
            out.push(self.sync_event(kind, v, &s.action));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn views(text: &str) -> Vec<ArrayView> {
        let stat = crate::mdstat::parse(text);
        assert!(stat.errors.is_empty(), "{:?}", stat.errors);
        views_from_model(&stat)
    }

    /// Runs a recorded sequence of mdstat texts, one per second; returns the lines per step.
    fn run(seq: &[&str]) -> Vec<Vec<String>> {
        let mut c = Classifier::new();
        seq.iter()
            .enumerate()
            .map(|(i, t)| {
                c.observe(&views(t), 1_000 + i as u64)
                    .iter()
                    .map(Event::line)
                    .collect()
            })
            .collect()
    }

    const EMPTY: &str = "Personalities : [raid1] [raid6] [raid5] [raid4]\nunused devices: <none>\n";

    // A raid5 as `mdadm --create -l5 -n3` leaves it: recovery onto the last member.
    const R5_CREATED: &str = "Personalities : [raid6] [raid5] [raid4]
md0 : active raid5 loop2[3] loop1[1] loop0[0]
      2093056 blocks super 1.2 level 5, 512k chunk, algorithm 2 [3/2] [UU_]
      [>....................]  recovery =  3.1% (32768/1046528) finish=0.5min speed=32768K/sec

unused devices: <none>
";
    const R5_45: &str = "Personalities : [raid6] [raid5] [raid4]
md0 : active raid5 loop2[3] loop1[1] loop0[0]
      2093056 blocks super 1.2 level 5, 512k chunk, algorithm 2 [3/2] [UU_]
      [=========>...........]  recovery = 45.0% (470937/1046528) finish=0.2min speed=32768K/sec

unused devices: <none>
";
    const R5_DONE: &str = "Personalities : [raid6] [raid5] [raid4]
md0 : active raid5 loop2[3] loop1[1] loop0[0]
      2093056 blocks super 1.2 level 5, 512k chunk, algorithm 2 [3/3] [UUU]

unused devices: <none>
";

    #[test]
    fn fresh_raid5_is_an_initial_build_never_degraded() {
        let got = run(&[EMPTY, R5_CREATED, R5_45, R5_DONE]);
        assert_eq!(got[0], Vec::<String>::new());
        assert_eq!(
            got[1],
            ["NewArray md0", "InitialBuildStarted md0 action=recovery"]
        );
        assert_eq!(got[2], ["InitialBuild40 md0 action=recovery"]);
        assert_eq!(got[3], ["InitialBuildFinished md0 action=recovery"]);
        assert!(got.concat().iter().all(|l| !l.contains("Degraded")));
    }

    #[test]
    fn fresh_raid5_seen_before_its_recovery_starts_is_no_alarm() {
        let idle = R5_CREATED.replace(
            "      [>....................]  recovery =  3.1% (32768/1046528) finish=0.5min speed=32768K/sec\n",
            "",
        );
        let got = run(&[EMPTY, &idle, R5_CREATED, R5_DONE]);
        assert_eq!(got[1], ["NewArray md0"]);
        assert_eq!(got[2], ["InitialBuildStarted md0 action=recovery"]);
        assert_eq!(got[3], ["InitialBuildFinished md0 action=recovery"]);
    }

    #[test]
    fn raid5_rebuilding_at_start_up_gives_progress_and_end_only() {
        let got = run(&[R5_CREATED, R5_45, R5_DONE]);
        assert_eq!(got[0], Vec::<String>::new());
        assert_eq!(got[1], ["Rebuild40 md0 action=recovery"]);
        assert_eq!(got[2], ["RebuildFinished md0 action=recovery"]);
    }

    const R1_OK: &str = "Personalities : [raid1]
md1 : active raid1 loop4[1] loop3[0]
      1046528 blocks super 1.2 [2/2] [UU]

unused devices: <none>
";
    // After `mdadm /dev/md1 --fail /dev/loop4`.
    const R1_FAILED: &str = "Personalities : [raid1]
md1 : active raid1 loop4[1](F) loop3[0]
      1046528 blocks super 1.2 [2/1] [U_]

unused devices: <none>
";
    // After `--remove /dev/loop4 --add /dev/loop5`: recovery onto the new disk.
    const R1_RECOVERY: &str = "Personalities : [raid1]
md1 : active raid1 loop5[2] loop3[0]
      1046528 blocks super 1.2 [2/1] [U_]
      [====>................]  recovery = 21.5% (225280/1046528) finish=0.1min speed=225280K/sec

unused devices: <none>
";

    #[test]
    fn member_failed_with_mdadm_fail_then_replaced() {
        let got = run(&[
            R1_OK,
            R1_FAILED,
            R1_RECOVERY,
            R1_OK.replace("loop4[1]", "loop5[2]").as_str(),
        ]);
        assert_eq!(got[0], Vec::<String>::new());
        assert_eq!(
            got[1],
            [
                "Fail md1 loop4 severity=critical",
                "DegradedArray md1 severity=critical"
            ]
        );
        // mdstat shows a recovering member without a flag; sysfs would say `spare` (see below).
        assert_eq!(got[2], ["RebuildStarted md1 action=recovery",]);
        assert_eq!(got[3], ["RebuildFinished md1 action=recovery"]);
    }

    #[test]
    fn degraded_at_start_up_is_reported_once() {
        let got = run(&[R1_FAILED, R1_FAILED]);
        assert_eq!(got[0], ["DegradedArray md1 severity=critical"]);
        assert!(got[1].is_empty());
    }

    fn hand(members: &[(&str, MemberRole)], degraded: u32, sync: Option<(&str, f64)>) -> ArrayView {
        ArrayView {
            name: "md0".into(),
            uuid: Some("u-1".into()),
            level: Some("raid5".into()),
            active: true,
            raid_disks: Some(3),
            degraded,
            members: members
                .iter()
                .map(|(n, r)| MemberView {
                    name: (*n).to_string(),
                    role: *r,
                })
                .collect(),
            sync: sync.map(|(a, p)| SyncView {
                action: a.into(),
                percent: p,
            }),
            frozen: false,
            mismatch_cnt: Some(0),
            sync_min_sectors: Some(0),
            created_unix_s: None,
        }
    }

    use MemberRole::*;

    #[test]
    fn sysfs_roles_give_spare_active_at_the_end_and_fail_spare() {
        let mut c = Classifier::new();
        let m = |r| [("a", InSync), ("b", InSync), ("c", r)];
        c.observe(&[hand(&m(Faulty), 1, None)], 0);
        let e = c.observe(&[hand(&m(Rebuilding), 1, Some(("recovery", 5.0)))], 1);
        assert_eq!(
            e.iter().map(Event::line).collect::<Vec<_>>(),
            ["RebuildStarted md0 action=recovery"]
        );
        let e = c.observe(&[hand(&m(InSync), 0, None)], 2);
        assert_eq!(
            e.iter().map(Event::line).collect::<Vec<_>>(),
            ["SpareActive md0 c", "RebuildFinished md0 action=recovery"]
        );
        let mut spare = m(InSync).to_vec();
        spare.push(("d", Spare));
        c.observe(&[hand(&spare, 0, None)], 3);
        spare[3].1 = Faulty;
        let e = c.observe(&[hand(&spare, 0, None)], 4);
        assert_eq!(e[0].line(), "FailSpare md0 d severity=critical");
    }

    #[test]
    fn check_started_paused_resumed_finished_with_mismatches() {
        let mut c = Classifier::new();
        let m = [("a", InSync), ("b", InSync), ("c", InSync)];
        let lines = |e: Vec<Event>| e.iter().map(Event::line).collect::<Vec<_>>();
        c.observe(&[hand(&m, 0, None)], 0);
        assert_eq!(
            lines(c.observe(&[hand(&m, 0, Some(("check", 0.5)))], 1)),
            ["CheckStarted md0 action=check"]
        );
        assert_eq!(
            lines(c.observe(&[hand(&m, 0, Some(("check", 41.0)))], 2)),
            ["Check40 md0 action=check"]
        );
        let mut paused = hand(&m, 0, None);
        paused.sync_min_sectors = Some(860_160);
        assert_eq!(
            lines(c.observe(&[paused], 3)),
            ["CheckPaused md0 action=check mismatch_cnt=0"]
        );
        assert_eq!(
            lines(c.observe(&[hand(&m, 0, Some(("check", 42.0)))], 4)),
            ["CheckStarted md0 action=check"]
        );
        let mut done = hand(&m, 0, None);
        done.mismatch_cnt = Some(128);
        let e = c.observe(&[done], 5);
        assert_eq!(
            lines(e.clone()),
            ["CheckFinished md0 action=check mismatch_cnt=128 severity=warning"]
        );
        // The same count on a mirror is routine.
        assert_eq!(
            severity(EventKind::CheckFinished, Some("raid1"), Some(128)),
            Severity::Info
        );
        let j = serde_json::to_value(&e[0]).unwrap();
        assert_eq!(j["event"], "CheckFinished");
        assert_eq!(j["mismatch_cnt"], 128);
        assert_eq!(j["severity"], "warning");
    }

    #[test]
    fn frozen_check_is_paused_and_disappearing_array_reported() {
        let mut c = Classifier::new();
        let m = [("a", InSync), ("b", InSync), ("c", InSync)];
        c.observe(&[hand(&m, 0, Some(("check", 10.0)))], 0);
        let mut f = hand(&m, 0, None);
        f.frozen = true;
        f.sync_min_sectors = None;
        assert_eq!(c.observe(&[f], 1)[0].kind, EventKind::CheckPaused);
        let e = c.observe(&[], 2);
        assert_eq!(e[0].line(), "DeviceDisappeared md0 severity=critical");
    }

    #[test]
    fn spares_missing_and_ids_are_distinct() {
        let mut c = Classifier::new();
        c.expect_spares("u-1", 1);
        let e = c.observe(
            &[hand(
                &[("a", InSync), ("b", InSync), ("c", InSync)],
                0,
                None,
            )],
            0,
        );
        assert_eq!(e[0].line(), "SparesMissing md0 severity=warning");
        let kinds = [
            EventKind::NewArray,
            EventKind::DeviceDisappeared,
            EventKind::Fail,
            EventKind::FailSpare,
            EventKind::SpareActive,
            EventKind::DegradedArray,
            EventKind::SparesMissing,
            EventKind::RebuildStarted,
            EventKind::Rebuild(20),
            EventKind::RebuildFinished,
            EventKind::InitialBuildStarted,
            EventKind::InitialBuild(20),
            EventKind::InitialBuildFinished,
            EventKind::CheckStarted,
            EventKind::Check(20),
            EventKind::CheckPaused,
            EventKind::CheckFinished,
        ];
        let ids: std::collections::BTreeSet<_> = kinds.iter().map(|k| k.message_id()).collect();
        assert_eq!(ids.len(), kinds.len());
        assert!(ids
            .iter()
            .all(|i| i.len() == 32 && i.chars().all(|c| c.is_ascii_hexdigit())));
        assert_eq!(EventKind::Rebuild(40).name(), "Rebuild40");
    }

    #[test]
    fn fresh_array_failing_during_initial_build_is_degraded() {
        let mut c = Classifier::new();
        c.observe(&[], 0);
        let m = [("a", InSync), ("b", InSync), ("c", Rebuilding)];
        c.observe(&[hand(&m, 1, Some(("recovery", 1.0)))], 1);
        let f = [("a", InSync), ("b", Faulty), ("c", Rebuilding)];
        let e: Vec<_> = c
            .observe(&[hand(&f, 2, None)], 2)
            .iter()
            .map(Event::line)
            .collect();
        assert_eq!(
            e,
            [
                "Fail md0 b severity=critical",
                "RebuildFinished md0 action=recovery",
                "DegradedArray md0 severity=critical"
            ]
        );
    }
}
