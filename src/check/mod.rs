//! Resumable checks (scrubs): the durable record per array UUID and the pure decisions around
//! it. No I/O here: [`store::CheckStore`] owns the record file (path, load, save, lock), and
//! [`run`] is the one executor (reads sysfs, writes `md/sync_min` / `md/sync_action`, saves
//! through the store) that `mdpilot check`, the D-Bus Array methods and the service loop (its
//! check upkeep and its schedule step) share.
//!
//! Kernel facts (Documentation/admin-guide/md.rst, drivers/md/md.c `md_do_sync`):
//! - `sync_action`: writing `check` or `repair` starts one at `sync_min`; writing `idle` stops
//!   it. After an interrupted requested sync the kernel leaves `sync_min` at the reached point
//!   (`resync_min = curr_resync_completed`); after a complete one it resets `sync_min` to 0.
//! - `sync_min` (512-byte sectors) must be a multiple of the chunk size where the array has
//!   one (`min_sync_store` rejects others with EINVAL); `sync_completed` is `done / total`.
//!
//! The file (TOML, default `/var/lib/mdpilot/checks.toml`: it must survive reboots, unlike the
//! policy state in /run): one `[array."<uuid>"]` table per array with the saved position of a
//! paused check and the last result. The position is saved on pause and at a window's end,
//! before `idle` is written, so a crash loses nothing saved; a running check killed with the
//! machine loses the progress since the last save (pause, window end, `check status`, or the
//! running service, which saves a running check's position every [`SAVE_INTERVAL_S`] and the
//! schedule step's every 30 s: that is the bound).

pub mod guard;
pub mod run;
pub mod store;
pub mod throttle;

use crate::model::SyncAction;
pub use crate::vocab::CheckAction;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How often the service saves the position of a running check, seconds: what a crash or a
/// power cut can lose at most while `mdpilot serve` runs.
pub const SAVE_INTERVAL_S: u64 = 60;

/// Who asks for a check step ([`run::execute`]): the checks the schedule starts or resumes
/// are its own ([`ArrayRecord::scheduled`]), and only those are paused at a window's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// An administrator: `mdpilot check`, the D-Bus Array methods, and the service's own
    /// upkeep (window ends, saves, the guards' pauses and resumes, which keep the record's
    /// owner as it was).
    Admin,
    /// The service's schedule ([`crate::schedule::Schedule`]).
    Schedule,
}

/// A check that was paused (or cut by a window's end) and will resume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Position {
    /// `check` or `repair`.
    pub action: CheckAction,
    /// Where to resume, 512-byte sectors (already a multiple of 4 KiB and of the chunk:
    /// [`resume_point`]).
    pub sectors: u64,
    /// The sync's total then (`sync_completed`'s B), sectors.
    pub total_sectors: u64,
    /// When it was saved, Unix seconds.
    pub saved_s: u64,
    /// The mismatches md counted between the check's start and `sectors`, 512-byte sectors,
    /// summed over the check's runs so far (md starts `md/mismatch_cnt` at 0 with each run, so a
    /// resumed check's own count covers only its last run). 0 when absent.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mismatch_cnt: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The outcome of a completed check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckResult {
    /// `check` or `repair`.
    pub action: CheckAction,
    /// When it was seen complete, Unix seconds.
    pub completed_s: u64,
    /// The mismatches of the whole check, 512-byte sectors: `md/mismatch_cnt` at its end plus
    /// what its earlier runs counted ([`Position::mismatch_cnt`]).
    pub mismatch_cnt: u64,
    /// The level then (`raid1`, `raid5`), for [`mismatch_is_warning`].
    pub level: String,
}

/// Everything kept for one array.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArrayRecord {
    /// Kernel name when last seen (names change across boots; the key is the UUID).
    #[serde(default)]
    pub name: String,
    /// A paused check to resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<Position>,
    /// A check this tool started and has not seen end yet (`check` or `repair`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<CheckAction>,
    /// While a resumed check runs: the mismatches its earlier runs counted (the resumed
    /// position's [`Position::mismatch_cnt`]), 512-byte sectors, added to md's count of this
    /// run ([`ArrayRecord::found`]). 0 when absent.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub found_before: u64,
    /// The last completed check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<CheckResult>,
    /// The running (or paused) check was started by the service's schedule: it pauses it at
    /// the window's end (a check started by hand is left alone).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub scheduled: bool,
    /// The running check's window end, Unix seconds (D-Bus `StartCheck` option `duration`):
    /// the service pauses it then, keeping the position. `None`: no end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_s: Option<u64>,
    /// The throttle the check was started (or resumed) with, KiB/s (`sync_speed_max`); a
    /// resume without its own reuses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u64>,
    /// Why the service paused the check itself, so that it resumes it: `degraded` (resumed
    /// when the array is redundant again, [`guard::may_resume`]) or `shutdown` (resumed when
    /// the service starts again, or by the schedule for a scheduled check). Cleared by every
    /// start, resume and cancel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_for: Option<String>,
}

impl ArrayRecord {
    /// The mismatches of the running check so far, 512-byte sectors: its earlier runs'
    /// ([`ArrayRecord::found_before`]) plus md's count of this run (`md/mismatch_cnt`, `mismatch_cnt`
    /// here; 0 when unread).
    pub fn found(&self, mismatch_cnt: Option<u64>) -> u64 {
        self.found_before.saturating_add(mismatch_cnt.unwrap_or(0))
    }
}

/// Why the service paused a check itself ([`ArrayRecord::paused_for`]): its array degraded.
pub const PAUSED_DEGRADED: &str = "degraded";
/// Why the service paused a check itself ([`ArrayRecord::paused_for`]): the service stopped
/// (SIGTERM, or the machine shuts down), or the machine went down under the running check (a
/// crash or power loss, found by [`reconcile`]).
pub const PAUSED_SHUTDOWN: &str = "shutdown";

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckState {
    /// Per array UUID.
    #[serde(default)]
    pub array: BTreeMap<String, ArrayRecord>,
}

impl CheckState {
    /// Parses the file's text. Errors: TOML syntax, unknown keys, wrong types (message).
    ///
    /// A key that is a UUID in any spelling (`md/uuid`'s dashed one, as saved before) is read
    /// in mdadm's ([`crate::model::ArrayUuid`]); where both spellings name one array, the
    /// mdadm one wins.
    pub fn parse(text: &str) -> Result<CheckState, String> {
        let st: CheckState = toml::from_str(text).map_err(|e| e.message().to_string())?;
        let mut array = BTreeMap::new();
        let mut dashed = Vec::new();
        for (k, r) in st.array {
            match crate::model::ArrayUuid::parse(&k).map(|u| u.to_string()) {
                Some(u) if u != k => dashed.push((u, r)),
                _ => {
                    array.insert(k, r);
                }
            }
        }
        for (u, r) in dashed {
            array.entry(u).or_insert(r);
        }
        Ok(CheckState { array })
    }

    /// The file's text.
    ///
    /// Errors: the serializer's message when a value cannot be written as TOML (an integer
    /// above `i64::MAX`): the caller saves nothing then, never an empty file.
    pub fn to_toml(&self) -> Result<String, String> {
        toml::to_string(self).map_err(|e| e.to_string().replace('\n', " "))
    }
}

/// What md keeps of a `md/sync_min` write, 512-byte sectors: it rounds the value down to 4 KiB
/// (md.c `min_sync_store`: `round_down(min, 8)`), and kernels before that refused a value that
/// was not a multiple of the chunk (EINVAL).
pub const SYNC_MIN_ALIGN_SECTORS: u64 = 8;

/// The resume point for a check stopped at `done_sectors` (512-byte sectors): rounded down to
/// a multiple of both the chunk (`chunk_bytes`; 0 or unknown: none) and
/// [`SYNC_MIN_ALIGN_SECTORS`], so that `md/sync_min` reads back exactly what the record
/// says and every kernel accepts it.
pub fn resume_point(done_sectors: u64, chunk_bytes: Option<u64>) -> u64 {
    let a = SYNC_MIN_ALIGN_SECTORS;
    let unit = match chunk_bytes.map(|b| b / 512).filter(|&c| c > 0) {
        // lcm(chunk, 8): a chunk is a power of two of at least 4 KiB, so the chunk itself.
        Some(chunk) => chunk / gcd(chunk, a) * a,
        None => a,
    };
    done_sectors - done_sectors % unit
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Whether a non-zero `mismatch_cnt` after a check is a warning: on raid4/5/6 parity must
/// match; on raid1/raid10 (and others) swap and in-flight writes make mismatches that are
/// harmless, so they are informational (Fedora's raid-check skips them the same way).
pub fn mismatch_is_warning(level: &str, mismatch_cnt: u64) -> bool {
    mismatch_cnt > 0 && crate::model::Level::from(level).has_parity()
}

impl CheckResult {
    /// `warning` when [`mismatch_is_warning`], else `info` (no mismatch, or mismatches on a
    /// mirror).
    pub fn severity(&self) -> &'static str {
        if mismatch_is_warning(&self.level, self.mismatch_cnt) {
            "warning"
        } else {
            "info"
        }
    }
}

/// What the service has to do for a record, given the array's `sync_action` now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upkeep {
    /// A check we started no longer runs (`idle`): record how it ended ([`reconcile`]).
    Record,
    /// The running check's window ([`ArrayRecord::until_s`]) has ended: pause it.
    WindowEnd,
    /// The running check's saved position is older than [`SAVE_INTERVAL_S`] (or absent, or 0).
    Save,
}

/// The upkeep `rec` needs at `now_s` (Unix seconds) when the array shows `sync_action`;
/// `None` for an array without a check of ours.
pub fn upkeep(rec: &ArrayRecord, sync_action: &SyncAction, now_s: u64) -> Option<Upkeep> {
    let action = rec.running?;
    if *sync_action == SyncAction::Idle {
        return Some(Upkeep::Record);
    }
    if *sync_action != action.sync_action() {
        // Frozen or another sync over ours: nothing to record until md says idle.
        return None;
    }
    if rec.until_s.is_some_and(|u| now_s >= u) {
        return Some(Upkeep::WindowEnd);
    }
    // A position of 0 (saved before md reported progress) keeps nothing: save again.
    let stale = !rec
        .position
        .as_ref()
        .is_some_and(|p| p.sectors > 0 && now_s < p.saved_s + SAVE_INTERVAL_S);
    stale.then_some(Upkeep::Save)
}

/// What the kernel shows of an array at one moment, as the check logic needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// `md/sync_action` ([`crate::model::Array::sync_action`]: the mdstat sync line's word where
    /// sysfs has none).
    pub sync_action: SyncAction,
    /// `md/sync_completed` done/total while a sync runs.
    pub completed: Option<(u64, u64)>,
    /// The point the running sync has reached, sectors ([`crate::model::Array::sync_reached_sectors`]:
    /// the further of `sync_completed`'s done and mdstat's), where a pause saves its position.
    pub reached: Option<u64>,
    /// `md/sync_min`, sectors.
    pub sync_min: u64,
    /// `md/mismatch_cnt`.
    pub mismatch_cnt: Option<u64>,
    /// `md/last_sync_action` ([`crate::model::ArraySysfs::last_sync_action`]); `None` where the
    /// kernel has none.
    pub last_sync_action: Option<SyncAction>,
    /// Level.
    pub level: String,
}

/// Brings `rec` up to date with what the kernel shows at `now_s`: a check we started that is
/// no longer running and was not paused by us is
/// - complete when the kernel reset `sync_min` to 0 and `last_sync_action` still names it
///   (then its result is recorded and the position dropped; a kernel without
///   `last_sync_action` is taken at `sync_min` alone);
/// - interrupted when the kernel kept `sync_min` (someone wrote `idle`): its position is what
///   the kernel kept;
/// - cut off when the array was assembled again since it ran (a reboot, a crash, a stop and
///   assemble: `sync_min` 0 and `last_sync_action` `idle`, `none` or another action): md forgot
///   the check and its `mismatch_cnt`, so nothing is recorded as a result; the position is the
///   last one saved, and the record is marked [`PAUSED_SHUTDOWN`] so that it resumes there
///   (`crate::check::run::resume_after_shutdown`, or the schedule for a scheduled check).
///
/// A running one saves its position. Returns true when `rec` changed.
pub fn reconcile(
    rec: &mut ArrayRecord,
    o: &Observed,
    chunk_bytes: Option<u64>,
    now_s: u64,
) -> bool {
    let before = rec.clone();
    let Some(action) = rec.running else {
        return false;
    };
    let found = rec.found(o.mismatch_cnt);
    if o.sync_action == action.sync_action() {
        if let Some((done, total)) = o.completed {
            rec.position = Some(Position {
                action,
                sectors: resume_point(done, chunk_bytes),
                total_sectors: total,
                saved_s: now_s,
                mismatch_cnt: found,
            });
        }
    } else if o.sync_action == SyncAction::Idle {
        rec.running = None;
        rec.until_s = None;
        rec.found_before = 0;
        // md assembled the array again since: it forgot the check (and its mismatch_cnt).
        let forgotten = o
            .last_sync_action
            .as_ref()
            .is_some_and(|l| *l != action.sync_action());
        if o.sync_min != 0 {
            let total = rec.position.as_ref().map_or(0, |p| p.total_sectors);
            rec.position = Some(Position {
                action,
                sectors: resume_point(o.sync_min, chunk_bytes),
                total_sectors: total,
                saved_s: now_s,
                mismatch_cnt: found,
            });
        } else if forgotten {
            // The saved position and the check's `max` stay: it resumes there, as after the
            // service's own stop.
            rec.paused_for = Some(PAUSED_SHUTDOWN.into());
        } else {
            rec.position = None;
            rec.max = None;
            rec.last = Some(CheckResult {
                action,
                completed_s: now_s,
                mismatch_cnt: found,
                level: o.level.clone(),
            });
        }
    }
    *rec != before
}

/// The record key of `a`: its UUID in mdadm's spelling ([`crate::model::Array::uuid`]), else
/// `name:<mdN>` where the kernel shows none. Records saved under `md/uuid`'s dashed spelling are
/// read under this key ([`CheckState::parse`]).
pub fn record_key(a: &crate::model::Array) -> String {
    a.uuid()
        .map_or_else(|| format!("name:{}", a.name), |u| u.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(action: SyncAction, completed: Option<(u64, u64)>, sync_min: u64) -> Observed {
        Observed {
            sync_action: action,
            completed,
            reached: completed.map(|c| c.0),
            sync_min,
            mismatch_cnt: Some(0),
            last_sync_action: None,
            level: "raid5".into(),
        }
    }

    #[test]
    fn records_under_md_uuid_keys_load_under_mdadms() {
        let text = "[array.\"3b6c2a6e-0d0e-4b7a-9d5e-8a7b1c2d3e4f\"]\nname = \"md0\"\n\n[array.\"name:md9\"]\nname = \"md9\"\n";
        let st = CheckState::parse(text).unwrap();
        let keys: Vec<&str> = st.array.keys().map(String::as_str).collect();
        assert_eq!(keys, ["3b6c2a6e:0d0e4b7a:9d5e8a7b:1c2d3e4f", "name:md9"]);
        assert_eq!(st.array["3b6c2a6e:0d0e4b7a:9d5e8a7b:1c2d3e4f"].name, "md0");
        // Both spellings of one array: mdadm's record wins; saving writes mdadm's only.
        let both =
            format!("{text}[array.\"3b6c2a6e:0d0e4b7a:9d5e8a7b:1c2d3e4f\"]\nname = \"new\"\n");
        let st = CheckState::parse(&both).unwrap();
        assert_eq!(st.array["3b6c2a6e:0d0e4b7a:9d5e8a7b:1c2d3e4f"].name, "new");
        assert_eq!(st.array.len(), 2);
        assert!(!st.to_toml().unwrap().contains("3b6c2a6e-"));
    }

    #[test]
    fn resume_points_are_chunk_multiples() {
        assert_eq!(resume_point(1_000_123, Some(512 * 1024)), 999_424);
        // No chunk (raid1): 4 KiB, what md keeps of a sync_min write.
        assert_eq!(resume_point(1_000_123, None), 1_000_120);
        assert_eq!(resume_point(1_000_123, Some(0)), 1_000_120);
        assert_eq!(resume_point(7, None), 0);
        assert_eq!(resume_point(1_552_128, None), 1_552_128);
        // A chunk below 4 KiB (never made by mdadm): both.
        assert_eq!(resume_point(1_000_123, Some(1024)), 1_000_120);
        assert_eq!(resume_point(1_000_123, Some(64 * 1024)), 1_000_064);
        assert!(mismatch_is_warning("raid6", 8));
        assert!(!mismatch_is_warning("raid1", 8));
        assert!(!mismatch_is_warning("raid5", 0));
    }

    #[test]
    fn running_saves_position_then_finishes_or_is_interrupted() {
        let mut rec = ArrayRecord {
            name: "md0".into(),
            running: Some(CheckAction::Check),
            ..Default::default()
        };
        assert!(reconcile(
            &mut rec,
            &obs(SyncAction::Check, Some((5000, 20_000)), 0),
            Some(1_048_576),
            10
        ));
        assert_eq!(rec.position.as_ref().unwrap().sectors, 4096);
        // Ended, kernel reset sync_min: complete.
        let mut done = rec.clone();
        let mut o = obs(SyncAction::Idle, None, 0);
        o.mismatch_cnt = Some(16);
        assert!(reconcile(&mut done, &o, Some(1_048_576), 20));
        assert_eq!(done.position, None);
        assert_eq!(done.running, None);
        assert_eq!(done.last.as_ref().unwrap().mismatch_cnt, 16);
        // Ended, kernel kept sync_min: interrupted (someone wrote idle): resumable.
        let mut cut = rec.clone();
        assert!(reconcile(
            &mut cut,
            &obs(SyncAction::Idle, None, 8192),
            Some(1_048_576),
            20
        ));
        assert_eq!(cut.position.as_ref().unwrap().sectors, 8192);
        assert_eq!(cut.position.as_ref().unwrap().total_sectors, 20_000);
        assert_eq!(cut.last, None);
        // Not ours: nothing.
        let mut idle = ArrayRecord::default();
        assert!(!reconcile(
            &mut idle,
            &obs(SyncAction::Idle, None, 0),
            None,
            1
        ));
    }

    #[test]
    fn a_check_md_forgot_keeps_its_saved_position_and_records_no_result() {
        let mut rec = ArrayRecord {
            name: "md0".into(),
            running: Some(CheckAction::Check),
            ..Default::default()
        };
        let mut o = obs(SyncAction::Check, Some((278_016, 524_288)), 0);
        o.last_sync_action = Some(SyncAction::Check);
        reconcile(&mut rec, &o, None, 10);
        // After a reboot: idle, sync_min 0, mismatch_cnt 0, and no sync since the assembly.
        for last in [
            SyncAction::Idle,
            SyncAction::Other("none".into()),
            SyncAction::Resync,
        ] {
            let mut cut = rec.clone();
            let mut o = obs(SyncAction::Idle, None, 0);
            o.last_sync_action = Some(last.clone());
            assert!(reconcile(&mut cut, &o, None, 20));
            assert_eq!(cut.last, None, "after {last}: a result recorded");
            assert_eq!(cut.running, None);
            assert_eq!(cut.position.as_ref().map(|p| p.sectors), Some(278_016));
            assert_eq!(cut.paused_for.as_deref(), Some(PAUSED_SHUTDOWN));
        }
        // md finished it: last_sync_action still names it.
        let mut done = rec.clone();
        let mut o = obs(SyncAction::Idle, None, 0);
        o.last_sync_action = Some(SyncAction::Check);
        o.mismatch_cnt = Some(128);
        assert!(reconcile(&mut done, &o, None, 30));
        assert_eq!(done.last.as_ref().map(|l| l.mismatch_cnt), Some(128));
        assert_eq!(done.position, None);
        assert_eq!(done.paused_for, None);
    }

    #[test]
    fn upkeep_records_ends_pauses_at_the_window_end_and_saves() {
        let mut rec = ArrayRecord {
            running: Some(CheckAction::Check),
            until_s: Some(100),
            ..Default::default()
        };
        assert_eq!(upkeep(&rec, &SyncAction::Idle, 10), Some(Upkeep::Record));
        assert_eq!(upkeep(&rec, &SyncAction::Frozen, 10), None);
        assert_eq!(
            upkeep(&rec, &SyncAction::Check, 100),
            Some(Upkeep::WindowEnd)
        );
        // No position saved yet: save one.
        assert_eq!(upkeep(&rec, &SyncAction::Check, 10), Some(Upkeep::Save));
        rec.position = Some(Position {
            action: CheckAction::Check,
            sectors: 8,
            total_sectors: 16,
            saved_s: 10,
            mismatch_cnt: 0,
        });
        assert_eq!(upkeep(&rec, &SyncAction::Check, 11), None);
        rec.position.as_mut().unwrap().sectors = 0;
        assert_eq!(upkeep(&rec, &SyncAction::Check, 11), Some(Upkeep::Save));
        rec.position.as_mut().unwrap().sectors = 8;
        assert_eq!(
            upkeep(&rec, &SyncAction::Check, 10 + SAVE_INTERVAL_S),
            Some(Upkeep::Save)
        );
        rec.running = None;
        assert_eq!(upkeep(&rec, &SyncAction::Idle, 1000), None);
        let r = |level: &str, n| CheckResult {
            action: CheckAction::Check,
            completed_s: 1,
            mismatch_cnt: n,
            level: level.into(),
        };
        assert_eq!(r("raid5", 8).severity(), "warning");
        assert_eq!(r("raid10", 8).severity(), "info");
        assert_eq!(r("raid6", 0).severity(), "info");
    }

    #[test]
    fn file_round_trips() {
        let mut s = CheckState::default();
        s.array.insert(
            "0a1b2c3d:00000000:00000000:00000001".into(),
            ArrayRecord {
                name: "md0".into(),
                position: Some(Position {
                    action: CheckAction::Repair,
                    sectors: 4096,
                    total_sectors: 8192,
                    saved_s: 7,
                    mismatch_cnt: 128,
                }),
                running: None,
                found_before: 0,
                last: None,
                scheduled: false,
                until_s: None,
                max: Some(5000),
                paused_for: Some("shutdown".into()),
            },
        );
        let text = s.to_toml().unwrap();
        assert_eq!(CheckState::parse(&text).unwrap(), s);
        s.array
            .values_mut()
            .for_each(|r| r.until_s = Some(u64::MAX));
        assert!(s.to_toml().is_err(), "an end TOML cannot hold is an error");
        assert!(CheckState::parse("[array.x]\nbogus = 1\n").is_err());
        assert_eq!(CheckState::parse("").unwrap(), CheckState::default());
    }
}
