//! The md array model: owned domain types shared by the mdstat parser, the sysfs reader,
//! `mdpilot status`, the D-Bus objects and the wipe planner.
//!
//! Field names and units follow `docs/status-json.md` (version 1): sizes and
//! progress in KiB (the "blocks" of `/proc/mdstat`), speeds in KiB/s, sysfs sectors are 512 bytes.
//! Source of truth for the printed forms: drivers/md/md.c `md_seq_show`, `status_resync`; for sysfs:
//! the kernel's Documentation/admin-guide/md.rst.

pub use crate::vocab::parse_plain_u64;
pub use crate::vocab::{
    ArrayState, ArrayUuid, BitmapType, ConsistencyPolicy, HeaderState, Health, Level, LimitOrigin,
    MemberFlag, MemberRole, MemberState, ReadOnly, SyncAction, SyncCompleted, SyncKind, SyncState,
    WriteIntentBitmap,
};
use serde::{Deserialize, Serialize};
use std::fmt;

use crate::vocab::{closed_words, BITMAP_IN_FILE, EXTERNAL_METADATA, NONE};

/// Everything `/proc/mdstat` (plus sysfs enrichment) says: the `status --json` document.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MdStat {
    /// `/proc/sys/dev/raid/speed_limit_min` in KiB/s; `None` where absent (never from mdstat).
    pub speed_limit_min: Option<u64>,
    /// `/proc/sys/dev/raid/speed_limit_max` in KiB/s; `None` where absent.
    pub speed_limit_max: Option<u64>,
    /// The bracketed words of the `Personalities :` line, in order; empty where missing.
    pub personalities: Vec<String>,
    /// Arrays in printed order. Arrays whose stanza could not be parsed are left out (see `errors`).
    pub arrays: Vec<Array>,
    /// One entry per part of the text that could not be parsed.
    pub errors: Vec<ParseIssue>,
}

/// A part of `/proc/mdstat` that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParseIssue {
    /// 1-based line number where the broken part starts.
    pub line: usize,
    /// The offending line, as printed.
    pub text: String,
    /// What was wrong, for humans.
    pub message: String,
}

/// One md array.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Array {
    /// Kernel name as printed (`md0`, `md127`, `md_d0`).
    pub name: String,
    /// Header state word.
    pub state: HeaderState,
    /// Read-only marker, `None` for read-write.
    pub read_only: Option<ReadOnly>,
    /// Personality on the header line (`raid1`, `raid10`, `linear`...); `None` where none printed.
    pub level: Option<String>,
    /// Number before `blocks` (KiB); `None` where no blocks line.
    pub size_kib: Option<u64>,
    /// Text after `super ` (`1.2`, `external:imsm`); `None` where absent (0.90).
    pub metadata: Option<String>,
    /// `T` of `[T/A]`; `None` where not printed.
    pub raid_disks: Option<u32>,
    /// `A` of `[T/A]`; `None` where not printed.
    pub active_disks: Option<u32>,
    /// `[UU_]` without brackets; `None` where not printed.
    pub member_status: Option<String>,
    /// Members in printed order.
    pub members: Vec<Member>,
    /// The sync line, if any.
    pub sync: Option<SyncStatus>,
    /// The bitmap line, if any.
    pub bitmap: Option<Bitmap>,
    /// Values read from `/sys/block/<name>/md/*`; `None` where sysfs was not read or absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sysfs: Option<ArraySysfs>,
}

/// A member device of an array: `name[slot]` plus flags.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Kernel device name (`sda1`, `nvme0n1p5`, `dm-0`, `cciss/c0d0p1`).
    pub name: String,
    /// The number in brackets (the descriptor slot; may exceed `raid_disks`).
    pub slot: u32,
    /// Flags in printed order.
    pub flags: Vec<MemberFlag>,
}

/// md's default `speed_limit_min` in KiB/s (drivers/md/md.c `sysctl_speed_limit_min`), the floor
/// an estimate assumes where neither the array's nor the global limit was read.
pub const MD_DEFAULT_SPEED_LIMIT_MIN: u64 = 1000;

/// Which speed a [`FullResyncEstimate`] divides by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EstimateBasis {
    /// The speed of the sync md runs now (`md/sync_speed`, else mdstat's `speed=`).
    Observed,
    /// The floor md keeps under other I/O: the array's effective `md/sync_speed_min` (which
    /// shows the global `speed_limit_min` when it follows it), else the global one.
    SpeedLimitMin,
}

closed_words!(EstimateBasis {
    Observed => "observed",
    SpeedLimitMin => "speed_limit_min",
});

/// How long a full resync of an array would take now, from [`Array::full_resync_estimate`].
///
/// md counts a resync per member (`md/sync_completed`'s total is `md/component_size` × 2
/// sectors, and the speed limits apply to that count), so the length is the component size
/// (the array size for raid1) over the speed. At the floor it is what a busy machine sees after
/// a crash; an idle one may go up to `speed_limit_max`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FullResyncEstimate {
    /// What md resyncs, KiB per member.
    pub kib: u64,
    /// The speed assumed, KiB/s (never 0).
    pub speed_kib_s: u64,
    /// Where the speed comes from.
    pub basis: EstimateBasis,
    /// `kib / speed_kib_s`, seconds.
    pub seconds: f64,
}

/// The estimate of `kib` KiB resynced at `observed_kib_s` when a sync runs and is moving
/// (non-zero), else at `floor_kib_s`; `None` when neither is above 0 (a floor of 0 promises
/// nothing) or there is nothing to resync. Pure.
pub fn full_resync_estimate(
    kib: u64,
    observed_kib_s: Option<u64>,
    floor_kib_s: u64,
) -> Option<FullResyncEstimate> {
    let (speed_kib_s, basis) = match observed_kib_s.filter(|&v| v > 0) {
        Some(v) => (v, EstimateBasis::Observed),
        None => (floor_kib_s, EstimateBasis::SpeedLimitMin),
    };
    (speed_kib_s > 0 && kib > 0).then(|| FullResyncEstimate {
        kib,
        speed_kib_s,
        basis,
        seconds: kib as f64 / speed_kib_s as f64,
    })
}

/// Something an admin should know about one array, from [`Array::warnings`]; `Display` is the
/// one line every view shows (`status`, the D-Bus `Warnings`, the journal).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ArrayWarning {
    /// A redundant array without a write-intent bitmap ([`Array::bitmap_advised`]).
    NoBitmap {
        /// Kernel name.
        array: String,
        /// The full resync a crash would cost, where it can be estimated.
        estimate: Option<FullResyncEstimate>,
    },
    /// The superblock records a logical block size ([`Array::recorded_logical_block_size`]):
    /// Linux 6.18 and older refuse to assemble the array (Debian bug #1130781).
    LogicalBlockSize {
        /// Kernel name.
        array: String,
        /// `md/logical_block_size`, bytes.
        bytes: u64,
    },
}

impl fmt::Display for ArrayWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArrayWarning::NoBitmap { array, estimate } => {
                write!(
                    f,
                    "{array} has no write-intent bitmap: a crash or power loss means a full resync"
                )?;
                if let Some(e) = estimate {
                    write!(
                        f,
                        " ({} KiB, about {} at {} {} KiB/s)",
                        e.kib,
                        crate::units::minutes(e.seconds / 60.0),
                        e.basis,
                        e.speed_kib_s
                    )?;
                }
                write!(f, "; `mdpilot bitmap add {array}` adds one")
            }
            ArrayWarning::LogicalBlockSize { array, bytes } => write!(
                f,
                "{array}: its superblock records a logical block size ({bytes} bytes, written by \
                 Linux 6.19 and later); Linux 6.18 and older cannot assemble it (Debian bug #1130781)"
            ),
        }
    }
}

/// A sync (resync, recovery, reshape, check, repair) as printed in mdstat, maybe refined by sysfs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyncStatus {
    /// The printed word (`resync`, `recovery`, `reshape`, `check`); sysfs `sync_action` overrides
    /// it where readable (so a repair reads `repair`).
    pub action: SyncKind,
    /// Running or queued.
    pub state: SyncState,
    /// Percent done as printed (`11.2`); `None` unless running.
    pub percent: Option<f64>,
    /// KiB done; `None` unless running.
    pub done_kib: Option<u64>,
    /// KiB total of the sync (per member for raid1/4/5/6); `None` unless running.
    pub total_kib: Option<u64>,
    /// Estimated minutes left as printed; `None` unless running.
    pub finish_min: Option<f64>,
    /// Current speed in KiB/s as printed; `None` unless running.
    pub speed_kib_s: Option<u64>,
}

/// The bitmap line: `bitmap: U/T pages [MKB], CKB chunk[, file: PATH]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bitmap {
    /// Pages in use.
    pub pages_used: u64,
    /// Pages in total.
    pub pages_total: u64,
    /// In-memory size in KiB.
    pub memory_kib: u64,
    /// Bitmap chunk in bytes (`65536KB chunk` = 67108864).
    pub chunk_bytes: u64,
    /// External bitmap file, `None` for an internal bitmap.
    pub file: Option<String>,
}

/// A resync speed limit as read, in KiB/s: a per-array `/sys/block/mdN/md/sync_speed_{min,max}`
/// prints `N (local)` or `N (system)`; a global `/proc/sys/dev/raid/speed_limit_{min,max}` prints
/// `N` (always `system == false`). Source: md.rst, md.c `sync_min_show`.
///
/// Serialized as `{"kib_s": N, "system": bool}` (the status JSON); `kibs`, the policy state
/// file's name for the number, is accepted when reading (the policy writes that form through
/// its own adapter). `Display` is `N` or `N (system)`, which [`SpeedLimit::parse`] reads back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpeedLimit {
    /// KiB/s in force.
    #[serde(alias = "kibs")]
    pub kib_s: u64,
    /// True for `(system)`: the array follows the global `/proc/sys/dev/raid/speed_limit_*`.
    #[serde(default)]
    pub system: bool,
}

impl SpeedLimit {
    /// A local (or global-knob) value of `kib_s` KiB/s.
    pub fn local(kib_s: u64) -> Self {
        SpeedLimit {
            kib_s,
            system: false,
        }
    }

    /// Parses a per-array file's text: `N (local)`, `N (system)` or a bare `N` (local);
    /// surrounding whitespace is ignored. `None` for anything else (signs, other words).
    pub fn parse(text: &str) -> Option<Self> {
        let mut toks = text.split_whitespace();
        let kib_s = parse_plain_u64(toks.next()?)?;
        let system = match toks.next() {
            None | Some("(local)") => false,
            Some("(system)") => true,
            Some(_) => return None,
        };
        if toks.next().is_some() {
            return None;
        }
        Some(SpeedLimit { kib_s, system })
    }

    /// Whether the array follows the global limit (`system`) or has its own (`local`).
    pub fn origin(&self) -> LimitOrigin {
        if self.system {
            LimitOrigin::System
        } else {
            LimitOrigin::Local
        }
    }

    /// Parses a global file's text: a bare decimal `N` (surrounding whitespace ignored).
    pub fn parse_global(text: &str) -> Option<Self> {
        parse_plain_u64(text.trim()).map(SpeedLimit::local)
    }
}

impl fmt::Display for SpeedLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.system {
            write!(f, "{} (system)", self.kib_s)
        } else {
            write!(f, "{}", self.kib_s)
        }
    }
}

/// State of one member from `/sys/block/mdN/md/dev-<name>/`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberSysfs {
    /// Kernel device name (`dev-sda1` → `sda1`).
    pub name: String,
    /// Words of `state` (`in_sync`, `faulty`, `write_mostly`, `spare`, `replacement`...), each
    /// serialized as printed.
    pub state: Vec<MemberState>,
    /// `slot`: the role number, `None` when `none` (spare) or missing.
    pub slot: Option<u32>,
    /// `errors`: read errors corrected or not, as counted by md.
    pub errors: Option<u64>,
}

/// What `/sys/block/mdN/md/*` and `/sys/block/mdN/queue/*` say; every field is `None` where the
/// file is missing (older kernels, test roots) — absence is never an error, and absent fields are
/// left out of the JSON rather than printed as `null`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ArraySysfs {
    /// `md/array_state` (`clean`, `active`, `readonly`, `inactive`, `read-auto`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_state: Option<ArrayState>,
    /// `md/level` (`raid1`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    /// `md/raid_disks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raid_disks: Option<u32>,
    /// `md/degraded`: number of missing devices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded: Option<u32>,
    /// `md/sync_action`: `idle`, `resync`, `recover`, `check`, `repair`, `reshape`, `frozen`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_action: Option<SyncAction>,
    /// `md/sync_completed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_completed: Option<SyncCompleted>,
    /// `md/sync_speed`: recent speed in KiB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_speed_kib_s: Option<u64>,
    /// `md/sync_speed_min`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_speed_min: Option<SpeedLimit>,
    /// `md/sync_speed_max`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_speed_max: Option<SpeedLimit>,
    /// `md/metadata_version` (`1.2`, `external:imsm`, `none`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_version: Option<String>,
    /// `md/chunk_size` in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_size_bytes: Option<u64>,
    /// `md/component_size` in KiB (per member).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component_size_kib: Option<u64>,
    /// `md/uuid` as the kernel prints it (`8-4-4-4-12`), where it exposes it; in the JSON as
    /// `md_uuid`, the documented extra field (the array's UUID is `uuid`, [`Array::uuid`]).
    #[serde(default, rename = "md_uuid", skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// `md/mismatch_cnt` in sectors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mismatch_cnt: Option<u64>,
    /// `queue/logical_block_size` in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logical_block_size: Option<u64>,
    /// `queue/physical_block_size` in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical_block_size: Option<u64>,
    /// `queue/optimal_io_size` in bytes (a full stripe for raid5/6; 0 = none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimal_io_size: Option<u64>,
    /// `md/dev-*` directories.
    pub members: Vec<MemberSysfs>,
    /// `md/consistency_policy` (`none`, `resync`, `bitmap`, `journal`, `ppl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consistency_policy: Option<ConsistencyPolicy>,
    /// `md/bitmap/location` as the kernel prints it (`none`, `file`, `+8` sectors from the
    /// superblock); `None` where the file is missing (Linux 6.19+ has no `bitmap/` directory
    /// without a bitmap until a change event) or busy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitmap_location: Option<String>,
    /// The selected word of `md/bitmap_type` (Linux 6.19+: `[none] bitmap llbitmap` reads
    /// `none`); `None` on older kernels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitmap_type: Option<BitmapType>,
    /// `md/logical_block_size` in bytes (Linux 6.19+; not `queue/logical_block_size`): the
    /// logical block size md records in a 1.x superblock; `None` on older kernels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub md_logical_block_size: Option<u64>,
    /// `md/sync_min`, 512-byte sectors: where the next requested sync (check, repair) starts;
    /// md leaves it at the point reached when one is stopped, so it tells a paused check from a
    /// finished one. Not in the status JSON.
    #[serde(skip)]
    pub sync_min_sectors: Option<u64>,
    /// `md/last_sync_action`: the action of the last sync md started since the array was
    /// assembled (md_do_sync sets it as the sync starts and leaves it after the sync ends or is
    /// interrupted). An array assembled since, by a reboot or a stop and assemble, reads `idle`
    /// (Linux 6.11 and later) or `none` (earlier; [`SyncAction::Other`]) until its next sync, so
    /// it tells a check that finished from one the kernel forgot. Not in the status JSON.
    #[serde(skip)]
    pub last_sync_action: Option<SyncAction>,
    /// The metadata name (`host:root`), from udev's `MD_NAME` ([`crate::array_names::metadata_name`]);
    /// not in the status JSON.
    #[serde(skip)]
    pub metadata_name: Option<String>,
    /// The UUID in mdadm's colon form: udev's `MD_UUID`, else `md/uuid` regrouped
    /// ([`crate::array_names::array_uuid`]); in the JSON as `uuid`. Read it as [`Array::uuid`].
    #[serde(default, rename = "uuid", skip_serializing_if = "Option::is_none")]
    pub mdadm_uuid: Option<String>,
    /// The `/dev/md/NAME` link ([`crate::array_names::named_device`]); not in the status JSON.
    #[serde(skip)]
    pub named_device: Option<String>,
}

/// One member and its role, from [`Array::members_with_roles`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArrayMember {
    /// Kernel device name (`sda1`).
    pub name: String,
    /// The role slot: `md/dev-*/slot`; from mdstat the bracket number; `None` for a spare.
    pub slot: Option<u32>,
    /// What it does now.
    pub role: MemberRole,
    /// `md/dev-*/state` where read, else the mdstat flags as sysfs words (`in_sync` for a
    /// member in sync).
    pub states: Vec<MemberState>,
    /// `md/dev-*/errors` where read.
    pub errors: Option<u64>,
}

/// Where a derived fact came from: sysfs wins where it is read (see [`Array`]'s facts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A file under `/sys/block/mdN/md/`.
    Sysfs,
    /// `/proc/mdstat` (no sysfs file read for this fact).
    Mdstat,
}

/// How far the running sync is, from [`Array::sync_progress`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SyncProgress {
    /// Done, in 512-byte sectors (of each member for raid1/4/5/6, as md counts).
    pub done_sectors: u64,
    /// In total, in 512-byte sectors; never 0.
    pub total_sectors: u64,
    /// Done in percent, 0.0 ..= 100.0: `done / total` from sysfs; from mdstat the percent as
    /// printed (md.c `status_resync` computes it from the same counters, truncated to 0.1 %).
    pub percent: f64,
    /// `md/sync_completed` or the mdstat progress line.
    pub source: Source,
}

impl SyncProgress {
    /// `done / total`, clamped to 0.0 ..= 1.0 (the kernel's counters may pass the total by a
    /// few sectors at the end).
    pub fn fraction(&self) -> f64 {
        (self.done_sectors as f64 / self.total_sectors as f64).clamp(0.0, 1.0)
    }

    /// Sectors left, in 512-byte sectors.
    pub fn remaining_sectors(&self) -> u64 {
        self.total_sectors.saturating_sub(self.done_sectors)
    }
}

/// A sync md runs now (not one queued, frozen or idle), from [`Array::running_sync`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunningSync {
    /// In mdstat's vocabulary (`recovery`, not sysfs `recover`; [`SyncAction::running_kind`]).
    pub kind: SyncKind,
    /// How far it is; `None` where neither `md/sync_completed` nor mdstat gives numbers.
    pub progress: Option<SyncProgress>,
}

/// The facts every view (D-Bus, alerts, metrics, health, `status`) shows, each derived here
/// once. The rule is sysfs over mdstat: a value read from `/sys/block/mdN/md/*` wins, and
/// `/proc/mdstat` stands in only where that file was not read (no sysfs, an older kernel, a
/// test root). Per fact:
///
/// | fact | sysfs (wins) | mdstat (else) |
/// |---|---|---|
/// | [`array_state`](Array::array_state), [`is_stopped`](Array::is_stopped), [`is_broken`](Array::is_broken), [`is_read_only`](Array::is_read_only) | `md/array_state` | header word and `(read-only)` |
/// | [`level`](Array::level) | `md/level` | the personality |
/// | [`raid_disks`](Array::raid_disks) | `md/raid_disks` | `T` of `[T/A]` |
/// | [`degraded`](Array::degraded) | `md/degraded` | `T − A` of `[T/A]` |
/// | [`sync_action`](Array::sync_action) | `md/sync_action` | the sync line's word (`recovery` → `recover`), else `idle` |
/// | [`is_syncing`](Array::is_syncing) | `md/sync_action` names a sync, or progress (below) | the sync line |
/// | [`running_sync`](Array::running_sync) | `md/sync_action` names a sync and `md/sync_completed` reads `A / B` | a sync line with `= N%` |
/// | [`sync_progress`](Array::sync_progress) | `md/sync_completed` `A / B` | `(done/total)` of the sync line |
/// | [`sync_reached_sectors`](Array::sync_reached_sectors) | the further of `md/sync_completed`'s `A` and the sync line's done (same total, below it: at it md is cleaning up) | `(done/total)` of the sync line |
/// | [`sync_speed_kib_s`](Array::sync_speed_kib_s) | `md/sync_speed` | `speed=` |
/// | [`sync_remaining_s`](Array::sync_remaining_s) | from `sync_completed` and `sync_speed` | `finish=` (wins: the kernel's own estimate) |
/// | [`write_intent_bitmap`](Array::write_intent_bitmap) | `md/bitmap_type`, `md/bitmap/location`, `md/consistency_policy` | the bitmap line |
/// | [`bitmap_location`](Array::bitmap_location) | `md/bitmap/location` | the bitmap line: `none` without one, `file` with `file:` |
/// | [`external_metadata`](Array::external_metadata) | `md/metadata_version` `external:…` | `super external:…` |
/// | [`bitmap_advised`](Array::bitmap_advised), [`full_resync_estimate`](Array::full_resync_estimate) | the above, `md/level`, `md/component_size`, `md/sync_speed_min` | the level, the size, `speed=` |
/// | [`recorded_logical_block_size`](Array::recorded_logical_block_size) | `md/logical_block_size` and `md/metadata_version` | — |
/// | [`uuid`](Array::uuid) | udev's `MD_UUID`, else `md/uuid` | — |
/// | [`members_with_roles`](Array::members_with_roles) | `md/dev-*/state`, `md/dev-*/slot` | the flags, `[UU_]` during a recovery |
/// | [`health`](Array::health) | the facts above and [`Level::survives`] | the same, `[UU_]` for raid10 |
/// | [`initial_build`](Array::initial_build) | [`running_sync`](Array::running_sync), the member roles, `raid_disks` | the same |
impl Array {
    /// `md/array_state`, else the nearest state of the mdstat header: `inactive`, `broken`,
    /// `readonly` for `(read-only)`, `read-auto` for `(auto-read-only)`, else `active`.
    pub fn array_state(&self) -> ArrayState {
        if let Some(s) = self.sysfs.as_ref().and_then(|s| s.array_state.clone()) {
            return s;
        }
        match (self.state, self.read_only) {
            (HeaderState::Inactive, _) => ArrayState::Inactive,
            (HeaderState::Broken, _) => ArrayState::Broken,
            (HeaderState::Active, Some(ReadOnly::ReadOnly)) => ArrayState::Readonly,
            (HeaderState::Active, Some(ReadOnly::AutoReadOnly)) => ArrayState::ReadAuto,
            (HeaderState::Active, None) => ArrayState::Active,
        }
    }

    /// Not started: [`Array::array_state`] is `clear` or `inactive` (no personality runs; the
    /// members, if any, are only assembled). A broken array is started, see [`Array::is_broken`].
    pub fn is_stopped(&self) -> bool {
        self.array_state().is_stopped()
    }

    /// A raid0/linear array lost a member (Linux 6.12+): [`Array::array_state`] is `broken`.
    pub fn is_broken(&self) -> bool {
        self.array_state() == ArrayState::Broken
    }

    /// Serves data: neither stopped nor broken.
    pub fn is_serving(&self) -> bool {
        !self.is_stopped() && !self.is_broken()
    }

    /// [`Array::array_state`] is `readonly` or `read-auto`.
    pub fn is_read_only(&self) -> bool {
        matches!(
            self.array_state(),
            ArrayState::Readonly | ArrayState::ReadAuto
        )
    }

    /// `md/level` where read and not empty, else the mdstat personality (`raid1`, `linear`);
    /// `None` for an inactive array or a container.
    pub fn level(&self) -> Option<Level> {
        self.sysfs
            .as_ref()
            .and_then(|s| s.level.as_deref())
            .filter(|l| !l.is_empty())
            .or(self.level.as_deref())
            .map(Level::from)
    }

    /// Member slots: `md/raid_disks`, else `T` of mdstat's `[T/A]`; `None` where neither
    /// (raid0, linear, containers print no counts).
    pub fn raid_disks(&self) -> Option<u32> {
        self.sysfs
            .as_ref()
            .and_then(|s| s.raid_disks)
            .or(self.raid_disks)
    }

    /// Missing members: `md/degraded`, else `T − A` of mdstat's `[T/A]`; `None` where neither
    /// is known (raid0, linear, containers and inactive arrays print no counts).
    pub fn degraded(&self) -> Option<u32> {
        self.sysfs.as_ref().and_then(|s| s.degraded).or_else(|| {
            self.raid_disks
                .zip(self.active_disks)
                .map(|(t, a)| t.saturating_sub(a))
        })
    }

    /// What the sync thread does, in sysfs vocabulary: `md/sync_action`, else the mdstat sync
    /// line's word, queued or running (`recovery` and md-cluster's `recover` → `recover`), else
    /// `idle`.
    pub fn sync_action(&self) -> SyncAction {
        if let Some(s) = self.sysfs.as_ref().and_then(|s| s.sync_action.clone()) {
            return s;
        }
        match self.sync.as_ref().map(|s| &s.action) {
            None => SyncAction::Idle,
            Some(SyncKind::Resync) => SyncAction::Resync,
            Some(SyncKind::Recovery | SyncKind::Recover) => SyncAction::Recover,
            Some(SyncKind::Reshape) => SyncAction::Reshape,
            Some(SyncKind::Check) => SyncAction::Check,
            Some(SyncKind::Repair) => SyncAction::Repair,
            Some(SyncKind::Other(w)) => SyncAction::from(w.as_str()),
        }
    }

    /// A sync runs or waits: [`Array::sync_action`] names one (not `idle`, not `frozen`), or
    /// md reports progress ([`Array::sync_progress`]). While any array syncs, the service
    /// re-reads progress on its timer.
    pub fn is_syncing(&self) -> bool {
        let waiting = match self.sync_action() {
            SyncAction::Idle | SyncAction::Frozen => false,
            SyncAction::Other(w) => !w.is_empty(),
            _ => true,
        };
        waiting || self.sync_progress().is_some()
    }

    /// The sync md runs now, `None` when idle, frozen, or only queued (`DELAYED`, `PENDING`,
    /// `REMOTE`). Where `md/sync_action` is read it must name a sync ([`SyncAction::running_kind`]
    /// gives the kind); where `md/sync_completed` is read it must read `A / B` (`none` and
    /// `delayed` are no running sync). Otherwise the mdstat sync line decides: running when it
    /// prints `= N%`, its word the kind.
    pub fn running_sync(&self) -> Option<RunningSync> {
        let sys = self.sysfs.as_ref();
        let printed = self.sync.as_ref().filter(|s| s.state == SyncState::Running);
        let kind = match sys.and_then(|s| s.sync_action.as_ref()) {
            Some(a) => a.running_kind()?,
            None => self.sync.as_ref()?.action.clone(),
        };
        let progress = match sys.and_then(|s| s.sync_completed) {
            Some(SyncCompleted::Sectors { done, total }) => (total > 0).then(|| SyncProgress {
                done_sectors: done,
                total_sectors: total,
                percent: (done as f64 * 100.0 / total as f64).clamp(0.0, 100.0),
                source: Source::Sysfs,
            }),
            Some(SyncCompleted::None | SyncCompleted::Delayed) => return None,
            None => {
                let s = printed?;
                match (s.done_kib, s.total_kib) {
                    (Some(d), Some(t)) if t > 0 => Some(SyncProgress {
                        done_sectors: d.saturating_mul(2),
                        total_sectors: t.saturating_mul(2),
                        percent: s.percent.unwrap_or(0.0).clamp(0.0, 100.0),
                        source: Source::Mdstat,
                    }),
                    _ => None,
                }
            }
        };
        Some(RunningSync { kind, progress })
    }

    /// How far the running sync is ([`Array::running_sync`]): `md/sync_completed`'s `A / B`,
    /// else the mdstat line's `(done/total)` KiB × 2; `None` while none runs or the total is 0.
    pub fn sync_progress(&self) -> Option<SyncProgress> {
        self.running_sync()?.progress
    }

    /// How far md has really got in the running sync, 512-byte sectors (of each member for
    /// raid1/4/5/6, in the units of `md/sync_min`): the further of `md/sync_completed`'s `A`
    /// (md's checkpoint `curr_resync_completed`, which md moves only every 1/16 of the sync or
    /// every 5 minutes, md.c `md_do_sync`) and the mdstat line's `(done/total)` done × 2 (md.c
    /// `status_resync`: `curr_resync` minus the sectors still in flight, i.e. completed; 1 KiB
    /// blocks, so it never overstates). mdstat's figure counts only when its total is
    /// `sync_completed`'s `B` (to the KiB): the same sync; and only below that total: md
    /// prints the total as done while it cleans up after a sync it stopped (`status_resync`,
    /// "Still cleaning up": `MD_RECOVERY_DONE` set, `curr_resync` reset, the action still
    /// named until md reaps the thread), where `sync_completed` still holds the real point.
    /// `None` while no sync runs ([`Array::running_sync`]) or neither gives a number. Where a
    /// paused check resumes ([`crate::check::run`]): up to 1/16 of the array less to check
    /// twice than from the checkpoint.
    pub fn sync_reached_sectors(&self) -> Option<u64> {
        let run = self.running_sync()?;
        let checkpoint = run.progress.filter(|p| p.source == Source::Sysfs);
        let printed = self.printed_sync().and_then(|s| {
            let (done, total) = (
                s.done_kib?.saturating_mul(2),
                s.total_kib?.saturating_mul(2),
            );
            let same = checkpoint.map_or(total > 0, |p| {
                total <= p.total_sectors && p.total_sectors - total <= 1
            });
            (same && done < total).then_some(done)
        });
        checkpoint.map(|p| p.done_sectors).max(printed)
    }

    /// The running sync's recent speed in KiB/s: `md/sync_speed`, else mdstat's `speed=`;
    /// `None` while no sync runs ([`Array::running_sync`]).
    pub fn sync_speed_kib_s(&self) -> Option<u64> {
        self.running_sync()?;
        self.sysfs
            .as_ref()
            .and_then(|s| s.sync_speed_kib_s)
            .or_else(|| self.printed_sync().and_then(|s| s.speed_kib_s))
    }

    /// Estimated seconds left of the running sync: mdstat's `finish=` (the kernel's own
    /// estimate, minutes × 60) where printed, else the sectors left of
    /// [`Array::sync_progress`] at [`Array::sync_speed_kib_s`]; `None` while no sync runs or
    /// neither is known (a speed of 0).
    pub fn sync_remaining_s(&self) -> Option<f64> {
        let run = self.running_sync()?;
        if let Some(m) = self.printed_sync().and_then(|s| s.finish_min) {
            return Some(m * 60.0);
        }
        let left_kib = run.progress?.remaining_sectors() as f64 / 2.0;
        let v = self.sync_speed_kib_s().filter(|&v| v > 0)?;
        Some(left_kib / v as f64)
    }

    /// `md/consistency_policy` where read; `None` where not (older kernels, no sysfs).
    pub fn consistency_policy(&self) -> Option<&ConsistencyPolicy> {
        self.sysfs.as_ref()?.consistency_policy.as_ref()
    }

    /// The selected word of `md/bitmap_type` (Linux 6.19+); `None` where not read.
    pub fn bitmap_type(&self) -> Option<&BitmapType> {
        self.sysfs.as_ref()?.bitmap_type.as_ref()
    }

    /// Keeps copies or parity of its data: [`Array::level`] is redundant
    /// ([`Level::is_redundant`]: raid1, raid4, raid5, raid6 or raid10).
    pub fn is_redundant(&self) -> bool {
        self.level().is_some_and(|l| l.is_redundant())
    }

    /// The array's write-intent bitmap. In order: `md/bitmap_type` `llbitmap`;
    /// `md/bitmap/location` (`none`, `file`, `+N`/`-N` internal); mdstat's bitmap line (with
    /// `file:` a file, else internal); `md/consistency_policy` `bitmap` (internal) ; else none
    /// (md prints a bitmap line for every bitmap).
    pub fn write_intent_bitmap(&self) -> WriteIntentBitmap {
        if self.bitmap_type() == Some(&BitmapType::Llbitmap) {
            return WriteIntentBitmap::Llbitmap;
        }
        let location = self
            .sysfs
            .as_ref()
            .and_then(|s| s.bitmap_location.as_deref());
        match location {
            Some(NONE) => return WriteIntentBitmap::None,
            Some(BITMAP_IN_FILE) => return WriteIntentBitmap::File,
            Some(l) if l.starts_with(['+', '-']) => return WriteIntentBitmap::Internal,
            _ => {}
        }
        match (&self.bitmap, self.consistency_policy()) {
            (Some(b), _) if b.file.is_some() => WriteIntentBitmap::File,
            (Some(_), _) | (None, Some(ConsistencyPolicy::Bitmap)) => WriteIntentBitmap::Internal,
            (None, _) => WriteIntentBitmap::None,
        }
    }

    /// `md/bitmap/location` as the kernel prints it (`none`, `file`, `+8`); without sysfs,
    /// mdstat's bitmap line tells `none` and `file` apart but not an internal bitmap's offset
    /// (then `None`: unknown).
    pub fn bitmap_location(&self) -> Option<String> {
        if let Some(l) = self.sysfs.as_ref().and_then(|s| s.bitmap_location.clone()) {
            return Some(l);
        }
        match &self.bitmap {
            None => Some(NONE.to_string()),
            Some(b) if b.file.is_some() => Some(BITMAP_IN_FILE.to_string()),
            Some(_) => None,
        }
    }

    /// The metadata version when a user-space manager keeps the metadata (`external:imsm`,
    /// `external:ddf`, a container member's `external:/md127/0`): [`Array::metadata_version`]
    /// starting with `external`. `None` for native md metadata or where unknown.
    pub fn external_metadata(&self) -> Option<&str> {
        self.metadata_version()
            .filter(|m| m.starts_with(EXTERNAL_METADATA))
    }

    /// The bitmap advisor: true for a redundant array that serves data, with native metadata
    /// (not `external:`), no write-intent bitmap ([`Array::write_intent_bitmap`]) and no other
    /// consistency mechanism (`journal`, `ppl`): after a crash md resyncs all of it.
    pub fn bitmap_advised(&self) -> bool {
        self.is_redundant()
            && self.is_serving()
            && self.external_metadata().is_none()
            && self.write_intent_bitmap() == WriteIntentBitmap::None
            && !matches!(
                self.consistency_policy(),
                Some(ConsistencyPolicy::Journal | ConsistencyPolicy::Ppl)
            )
    }

    /// `md/metadata_version`, else mdstat's `super` text; `None` where neither (0.90).
    pub fn metadata_version(&self) -> Option<&str> {
        self.sysfs
            .as_ref()
            .and_then(|s| s.metadata_version.as_deref())
            .or(self.metadata.as_deref())
    }

    /// How long a full resync of this array would take now ([`full_resync_estimate`]): KiB
    /// from `md/component_size`, else the array size; speed: the running sync's
    /// ([`Array::sync_speed_kib_s`]), else the floor: `md/sync_speed_min`, else
    /// `global_min_kib_s` (`speed_limit_min`), else [`MD_DEFAULT_SPEED_LIMIT_MIN`].
    pub fn full_resync_estimate(
        &self,
        global_min_kib_s: Option<u64>,
    ) -> Option<FullResyncEstimate> {
        let sys = self.sysfs.as_ref();
        let kib = sys.and_then(|s| s.component_size_kib).or(self.size_kib)?;
        let floor = sys
            .and_then(|s| s.sync_speed_min)
            .map(|l| l.kib_s)
            .or(global_min_kib_s)
            .unwrap_or(MD_DEFAULT_SPEED_LIMIT_MIN);
        full_resync_estimate(kib, self.sync_speed_kib_s(), floor)
    }

    /// The logical block size the superblock records: `md/logical_block_size` (bytes, non-zero)
    /// of an array with 1.x metadata. Linux 6.19 added the file and writes the size into 1.x
    /// superblocks; 6.18 and older refuse such a superblock. `None` otherwise.
    pub fn recorded_logical_block_size(&self) -> Option<u64> {
        let lbs = self
            .sysfs
            .as_ref()?
            .md_logical_block_size
            .filter(|&b| b > 0)?;
        self.metadata_version()
            .is_some_and(|m| m.starts_with("1."))
            .then_some(lbs)
    }

    /// What an admin should know about this array, in order: no write-intent bitmap
    /// ([`Array::bitmap_advised`], with [`Array::full_resync_estimate`]), a recorded logical
    /// block size ([`Array::recorded_logical_block_size`]).
    pub fn warnings(&self, global_min_kib_s: Option<u64>) -> Vec<ArrayWarning> {
        let mut out = Vec::new();
        if self.bitmap_advised() {
            out.push(ArrayWarning::NoBitmap {
                array: self.name.clone(),
                estimate: self.full_resync_estimate(global_min_kib_s),
            });
        }
        if let Some(bytes) = self.recorded_logical_block_size() {
            out.push(ArrayWarning::LogicalBlockSize {
                array: self.name.clone(),
                bytes,
            });
        }
        out
    }

    /// The array's UUID ([`ArrayUuid`], shown in mdadm's spelling): udev's `MD_UUID` where
    /// read, else `md/uuid`; `None` where neither (inactive arrays, containers, no sysfs).
    pub fn uuid(&self) -> Option<ArrayUuid> {
        let sys = self.sysfs.as_ref()?;
        sys.mdadm_uuid
            .as_deref()
            .and_then(ArrayUuid::parse)
            .or_else(|| sys.uuid.as_deref().and_then(ArrayUuid::parse))
    }

    /// Every member with its role: in sysfs order (by name) where `md/dev-*` was read, else in
    /// mdstat's order. Where
    /// `md/dev-*` was read: [`MemberRole::from_sysfs`] of its `state` and `slot`. Else the
    /// mdstat flags: `(F)` faulty, `(J)` journal, `(S)` spare; a member without those is in
    /// sync, except while a recovery runs, when an unflagged member at a `_` of `[UU_]` (its
    /// bracket number read as the slot) or a `(R)` replacement is rebuilding.
    pub fn members_with_roles(&self) -> Vec<ArrayMember> {
        let sys = self
            .sysfs
            .as_ref()
            .map(|s| &s.members)
            .filter(|m| !m.is_empty());
        if let Some(ms) = sys {
            return ms
                .iter()
                .map(|m| ArrayMember {
                    name: m.name.clone(),
                    slot: m.slot,
                    role: MemberRole::from_sysfs(&m.state, m.slot),
                    states: m.state.clone(),
                    errors: m.errors,
                })
                .collect();
        }
        let recovering = self
            .running_sync()
            .is_some_and(|r| r.kind == SyncKind::Recovery);
        let pattern = self.member_status.as_deref().unwrap_or("").as_bytes();
        self.members
            .iter()
            .map(|m| {
                let has = |f| m.flags.contains(&f);
                let down = pattern.get(m.slot as usize).is_some_and(|&c| c != b'U');
                let role = if has(MemberFlag::Faulty) {
                    MemberRole::Faulty
                } else if has(MemberFlag::Journal) {
                    MemberRole::Journal
                } else if has(MemberFlag::Spare) {
                    MemberRole::Spare
                } else if recovering && (down || has(MemberFlag::Replacement)) {
                    MemberRole::Rebuilding
                } else {
                    MemberRole::InSync
                };
                let mut states: Vec<MemberState> = m
                    .flags
                    .iter()
                    .map(|f| MemberState::from(f.as_str()))
                    .collect();
                // In sysfs words: md prints `in_sync` for a member in sync and `spare` for one
                // not yet in sync, slot or not.
                match role {
                    MemberRole::InSync => states.insert(0, MemberState::InSync),
                    MemberRole::Rebuilding => states.push(MemberState::Spare),
                    _ => {}
                }
                ArrayMember {
                    name: m.name.clone(),
                    slot: (role != MemberRole::Spare).then_some(m.slot),
                    role,
                    states,
                    errors: None,
                }
            })
            .collect()
    }

    /// The running sync builds the array's redundancy for the first time, as far as the
    /// kernel's state tells: a resync (md's first pass over a new array, also after an
    /// unclean stop without a bitmap), or a recovery while no member is faulty and every slot
    /// has a member in sync or rebuilding (how md builds a new raid5: by recovering onto its
    /// last member). A rebuild onto a replacement added after the failed member was removed
    /// looks the same here; the alerts tell those apart by the array's creation time.
    pub fn initial_build(&self) -> bool {
        let Some(kind) = self.running_sync().map(|r| r.kind) else {
            return false;
        };
        match kind {
            SyncKind::Resync => true,
            SyncKind::Recovery => {
                let roles = self.members_with_roles();
                let slotted = roles.iter().filter(|m| m.role.is_slotted()).count() as u32;
                !roles.iter().any(|m| m.role == MemberRole::Faulty)
                    && self.raid_disks().is_some_and(|t| slotted >= t)
            }
            _ => false,
        }
    }

    /// The `mdadm --detail --test` verdict (man mdadm `--test`; `status --test`, the D-Bus
    /// `Health`): inactive when stopped ([`Array::is_stopped`]); unusable when broken
    /// ([`Array::is_broken`]) or more members missing ([`Array::degraded`] of
    /// [`Array::raid_disks`]) than the level survives ([`Level::survives`], raid10 read from
    /// `[UU_U]`); degraded when members are missing (also where the slot count is unknown);
    /// else ok (raid0, linear, containers print no counts: running means whole).
    pub fn health(&self) -> Health {
        if self.is_stopped() {
            return Health::Inactive;
        }
        if self.is_broken() {
            return Health::Unusable;
        }
        let missing = self.degraded().unwrap_or(0);
        if missing == 0 {
            return Health::Ok;
        }
        let Some(total) = self.raid_disks() else {
            return Health::Degraded;
        };
        let down: Vec<bool> = self
            .member_status
            .as_deref()
            .unwrap_or("")
            .chars()
            .map(|c| c != 'U')
            .collect();
        let level = self.level().unwrap_or_else(|| Level::Other(String::new()));
        if level.survives(missing, total, &down) {
            Health::Degraded
        } else {
            Health::Unusable
        }
    }

    /// The mdstat sync line when it shows a running sync.
    fn printed_sync(&self) -> Option<&SyncStatus> {
        self.sync.as_ref().filter(|s| s.state == SyncState::Running)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speed_limit_forms() {
        let sys = SpeedLimit {
            kib_s: 1000,
            system: true,
        };
        assert_eq!(SpeedLimit::parse("1000 (system)"), Some(sys));
        assert_eq!(
            SpeedLimit::parse(" 5 (local)\n"),
            Some(SpeedLimit::local(5))
        );
        assert_eq!(SpeedLimit::parse("5"), Some(SpeedLimit::local(5)));
        for bad in ["", "fast", "-1", "+5", "5 (remote)", "5 (local) x"] {
            assert_eq!(SpeedLimit::parse(bad), None, "{bad:?}");
        }
        assert_eq!(
            SpeedLimit::parse_global("200000\n"),
            Some(SpeedLimit::local(200_000))
        );
        assert_eq!(SpeedLimit::parse_global("1 (local)"), None);
        for l in [sys, SpeedLimit::local(7)] {
            assert_eq!(SpeedLimit::parse(&l.to_string()), Some(l));
        }
        // The status JSON form, and the policy's `kibs` accepted when reading.
        assert_eq!(
            serde_json::to_string(&sys).unwrap(),
            r#"{"kib_s":1000,"system":true}"#
        );
        let old: SpeedLimit = serde_json::from_str(r#"{"kibs":3}"#).unwrap();
        assert_eq!(old, SpeedLimit::local(3));
    }

    #[test]
    fn sysfs_wins_over_mdstat_fact_by_fact() {
        let text = "md0 : active raid1 sdb1[1] sda1[0]\n      1048576 blocks super 1.2 [2/1] [U_]\n      [=>...................]  recovery =  8.5% (89128/1048576) finish=1.5min speed=10000K/sec\n\nunused devices: <none>\n";
        let mut a = crate::mdstat::parse(text).arrays.remove(0);
        // mdstat alone: its counts, its word in sysfs vocabulary, its printed percent.
        assert_eq!(a.degraded(), Some(1));
        assert_eq!(a.sync_action(), SyncAction::Recover);
        let p = a.sync_progress().unwrap();
        assert_eq!(
            (p.done_sectors, p.total_sectors, p.percent),
            (178_256, 2_097_152, 8.5)
        );
        assert_eq!(p.source, Source::Mdstat);
        assert_eq!(a.sync_remaining_s(), Some(90.0));
        assert!(!a.is_stopped() && a.is_serving());
        // sysfs read: each file wins where present.
        a.sysfs = Some(ArraySysfs {
            degraded: Some(0),
            sync_action: Some(SyncAction::Recover),
            sync_completed: Some(SyncCompleted::Sectors {
                done: 1_048_576,
                total: 2_097_152,
            }),
            ..Default::default()
        });
        assert_eq!(a.degraded(), Some(0));
        let r = a.running_sync().unwrap();
        assert_eq!(r.kind, SyncKind::Recovery);
        assert_eq!(r.progress.unwrap().percent, 50.0);
        assert_eq!(a.sync_speed_kib_s(), Some(10_000));
        // A queued or idle sync in sysfs is no running sync, whatever mdstat printed.
        let sys = a.sysfs.as_mut().unwrap();
        sys.sync_completed = Some(SyncCompleted::Delayed);
        assert_eq!(a.running_sync(), None);
        assert_eq!((a.sync_speed_kib_s(), a.sync_remaining_s()), (None, None));
        let sys = a.sysfs.as_mut().unwrap();
        sys.sync_completed = None;
        sys.sync_action = Some(SyncAction::Idle);
        assert_eq!(a.running_sync(), None);
        a.sysfs.as_mut().unwrap().array_state = Some(ArrayState::Inactive);
        assert!(a.is_stopped() && !a.is_serving());
        a.sysfs.as_mut().unwrap().array_state = Some(ArrayState::Broken);
        assert!(!a.is_stopped() && a.is_broken() && !a.is_serving());
    }

    /// The point a check has reached is the further of md's checkpoint (`sync_completed`,
    /// moved every 1/16) and mdstat's completed count; mdstat's only for the same sync (its
    /// total agrees with `sync_completed`'s to the KiB).
    #[test]
    fn the_reached_point_is_the_further_of_the_checkpoint_and_mdstat() {
        let text = "md0 : active raid1 sdb1[1] sda1[0]\n      1046528 blocks super 1.2 [2/2] [UU]\n      [=======>.............]  check = 37.1% (388608/1046528) finish=0.1min speed=100000K/sec\n\nunused devices: <none>\n";
        let mut a = crate::mdstat::parse(text).arrays.remove(0);
        // mdstat alone: its count, KiB × 2.
        assert_eq!(a.sync_reached_sectors(), Some(777_216));
        let sys = |done, total| ArraySysfs {
            sync_action: Some(SyncAction::Check),
            sync_completed: Some(SyncCompleted::Sectors { done, total }),
            ..Default::default()
        };
        // The checkpoint behind mdstat (md moved it at 1/16 of 2093056): mdstat's wins.
        a.sysfs = Some(sys(261_632, 2_093_056));
        assert_eq!(a.sync_progress().unwrap().done_sectors, 261_632);
        assert_eq!(a.sync_reached_sectors(), Some(777_216));
        // The checkpoint ahead (mdstat read a moment earlier): the checkpoint.
        a.sysfs = Some(sys(800_000, 2_093_056));
        assert_eq!(a.sync_reached_sectors(), Some(800_000));
        // A total one sector more (md prints max_sectors / 2): still the same sync.
        a.sysfs = Some(sys(261_632, 2_093_057));
        assert_eq!(a.sync_reached_sectors(), Some(777_216));
        // Another total: another sync than mdstat showed; the checkpoint alone.
        a.sysfs = Some(sys(4096, 4_000_000));
        assert_eq!(a.sync_reached_sectors(), Some(4096));
        // md stopped the check (a member failed) and cleans up: mdstat prints the total as
        // done while the action is still named; the checkpoint is where it got to.
        let cleanup = "md0 : active raid1 sdc[2](F) sdb[1] sda[0]\n      524288 blocks super 1.2 [3/2] [UU_]\n      [====================>]  check =100.0% (524288/524288) finish=0.0min speed=5000K/sec\n\nunused devices: <none>\n";
        let mut c = crate::mdstat::parse(cleanup).arrays.remove(0);
        assert_eq!(c.printed_sync().and_then(|s| s.done_kib), Some(524_288));
        c.sysfs = Some(sys(71_680, 1_048_576));
        assert_eq!(c.sync_reached_sectors(), Some(71_680));
        c.sysfs = None;
        assert_eq!(c.sync_reached_sectors(), None);
        // No sync runs: none.
        a.sysfs = Some(ArraySysfs {
            sync_action: Some(SyncAction::Idle),
            sync_completed: Some(SyncCompleted::None),
            ..Default::default()
        });
        assert_eq!(a.sync_reached_sectors(), None);
    }

    fn raid1(sys: Option<ArraySysfs>) -> Array {
        let text = "md0 : active raid1 sdb1[1] sda1[0]\n      1048576 blocks super 1.2 [2/2] [UU]\n\nunused devices: <none>\n";
        let mut a = crate::mdstat::parse(text).arrays.remove(0);
        a.sysfs = sys;
        a
    }

    #[test]
    fn syncing_is_a_named_sync_or_progress_never_idle_or_frozen() {
        let with = |action: &str, completed: Option<SyncCompleted>| {
            raid1(Some(ArraySysfs {
                sync_action: Some(SyncAction::from(action)),
                sync_completed: completed,
                ..ArraySysfs::default()
            }))
        };
        assert!(!raid1(None).is_syncing(), "mdstat without a sync line");
        assert!(!with("idle", Some(SyncCompleted::None)).is_syncing());
        assert!(!with("frozen", Some(SyncCompleted::None)).is_syncing());
        assert!(!with("", None).is_syncing(), "an empty read names nothing");
        assert!(
            with("resync", Some(SyncCompleted::Delayed)).is_syncing(),
            "queued"
        );
        let running = Some(SyncCompleted::Sectors { done: 8, total: 16 });
        assert!(with("check", running).is_syncing());
        assert!(with("future-word", None).is_syncing());
    }

    #[test]
    fn the_estimate_divides_what_md_counts_by_the_observed_speed_else_the_floor() {
        let e = full_resync_estimate(1_048_576, None, 1000).unwrap();
        assert_eq!(
            (e.basis, e.speed_kib_s, e.seconds),
            (EstimateBasis::SpeedLimitMin, 1000, 1048.576)
        );
        let e = full_resync_estimate(1_048_576, Some(200_000), 1000).unwrap();
        assert_eq!((e.basis, e.speed_kib_s), (EstimateBasis::Observed, 200_000));
        // A stalled sync (0 KiB/s) says nothing: the floor stands in.
        let e = full_resync_estimate(1_048_576, Some(0), 1000).unwrap();
        assert_eq!(e.basis, EstimateBasis::SpeedLimitMin);
        assert_eq!(
            full_resync_estimate(1_048_576, None, 0),
            None,
            "a floor of 0 promises nothing"
        );
        assert_eq!(full_resync_estimate(0, None, 1000), None);
        let e = full_resync_estimate(u64::MAX, Some(1), 1).unwrap();
        assert!(e.seconds.is_finite() && e.seconds > 1e18);
        // On an array: md/component_size over md/sync_speed_min, else the global floor, else
        // md's default.
        let a = raid1(None);
        assert_eq!(
            a.full_resync_estimate(None).unwrap().speed_kib_s,
            MD_DEFAULT_SPEED_LIMIT_MIN
        );
        assert_eq!(
            a.full_resync_estimate(Some(5000)).unwrap().speed_kib_s,
            5000
        );
        let a = raid1(Some(ArraySysfs {
            component_size_kib: Some(2_097_152),
            sync_speed_min: Some(SpeedLimit::local(50_000)),
            ..Default::default()
        }));
        let e = a.full_resync_estimate(Some(5000)).unwrap();
        assert_eq!((e.kib, e.speed_kib_s), (2_097_152, 50_000));
    }

    #[test]
    fn the_advisor_names_redundant_running_arrays_without_a_bitmap() {
        // mdstat alone, no bitmap line: none, advised.
        let a = raid1(None);
        assert_eq!(a.write_intent_bitmap(), WriteIntentBitmap::None);
        assert!(a.bitmap_advised());
        let w = a.warnings(None);
        assert!(matches!(w[..], [ArrayWarning::NoBitmap { .. }]), "{w:?}");
        assert!(
            w[0].to_string()
                .contains("full resync (1048576 KiB, about 17m 29s at speed_limit_min 1000 KiB/s)"),
            "{}",
            w[0]
        );
        let with = |f: &dyn Fn(&mut ArraySysfs)| {
            let mut s = ArraySysfs {
                consistency_policy: Some(ConsistencyPolicy::Resync),
                bitmap_location: Some("none".into()),
                ..Default::default()
            };
            f(&mut s);
            raid1(Some(s))
        };
        assert!(with(&|_| {}).bitmap_advised());
        let internal = with(&|s| s.bitmap_location = Some("+8".into()));
        assert_eq!(internal.write_intent_bitmap(), WriteIntentBitmap::Internal);
        assert!(!internal.bitmap_advised());
        let file = with(&|s| s.bitmap_location = Some("file".into()));
        assert_eq!(file.write_intent_bitmap(), WriteIntentBitmap::File);
        // 6.19+ without bitmap/ (it appears after a change event): the policy decides.
        let gone = with(&|s| {
            s.bitmap_location = None;
            s.consistency_policy = Some(ConsistencyPolicy::Bitmap);
        });
        assert_eq!(gone.write_intent_bitmap(), WriteIntentBitmap::Internal);
        // llbitmap is detected and shown, whatever bitmap/location says.
        let ll = with(&|s| s.bitmap_type = Some(BitmapType::Llbitmap));
        assert_eq!(ll.write_intent_bitmap(), WriteIntentBitmap::Llbitmap);
        assert!(!ll.bitmap_advised());
        for quiet in [
            with(&|s| s.consistency_policy = Some(ConsistencyPolicy::Ppl)),
            with(&|s| s.consistency_policy = Some(ConsistencyPolicy::Journal)),
            with(&|s| s.level = Some("raid0".into())),
            with(&|s| s.array_state = Some(ArrayState::Inactive)),
            with(&|s| s.metadata_version = Some("external:imsm".into())),
        ] {
            assert!(!quiet.bitmap_advised(), "{:?}", quiet.sysfs);
        }
    }

    #[test]
    fn a_recorded_logical_block_size_warns_of_the_kernels_that_cannot_assemble() {
        let sys = |lbs: Option<u64>, meta: &str| ArraySysfs {
            md_logical_block_size: lbs,
            metadata_version: Some(meta.into()),
            bitmap_location: Some("+8".into()),
            ..Default::default()
        };
        let a = raid1(Some(sys(Some(4096), "1.2")));
        assert_eq!(a.recorded_logical_block_size(), Some(4096));
        let w = a.warnings(None);
        assert_eq!(w.len(), 1);
        let t = w[0].to_string();
        assert!(
            t.contains("4096 bytes") && t.contains("Linux 6.18 and older cannot assemble it"),
            "{t}"
        );
        // Older kernels lack the file; 0.90 and external metadata record nothing.
        assert_eq!(
            raid1(Some(sys(None, "1.2"))).recorded_logical_block_size(),
            None
        );
        assert_eq!(
            raid1(Some(sys(Some(512), "0.90"))).recorded_logical_block_size(),
            None
        );
        assert_eq!(
            raid1(Some(sys(Some(0), "1.2"))).recorded_logical_block_size(),
            None
        );
    }

    #[test]
    fn member_roles_are_derived_once_sysfs_over_mdstat() {
        // A fresh raid5 building by recovery onto its last member (mdadm --create).
        let text = "md0 : active raid5 sdc[3] sdb[1] sda[0]\n      2093056 blocks super 1.2 level 5, 512k chunk, algorithm 2 [3/2] [UU_]\n      [=>...................]  recovery =  8.5% (89128/1046528) finish=1.5min speed=10000K/sec\n\nunused devices: <none>\n";
        let mut a = crate::mdstat::parse(text).arrays.remove(0);
        let roles = |a: &Array| -> Vec<(String, MemberRole)> {
            a.members_with_roles()
                .into_iter()
                .map(|m| (m.name, m.role))
                .collect()
        };
        // mdstat alone: sdc[3] is no slot of [UU_]; the `_` is slot 2, so sdc counts as in
        // sync by its bracket number (md prints the descriptor number there).
        assert_eq!(roles(&a)[0].1, MemberRole::InSync);
        // sysfs says what it is: a spare given slot 2, being recovered.
        let m = |name: &str, state: &[&str], slot: Option<u32>| MemberSysfs {
            name: name.into(),
            state: state.iter().map(|w| MemberState::from(*w)).collect(),
            slot,
            errors: Some(0),
        };
        a.sysfs = Some(ArraySysfs {
            members: vec![
                m("sda", &["in_sync"], Some(0)),
                m("sdb", &["in_sync"], Some(1)),
                m("sdc", &["spare"], Some(2)),
            ],
            ..Default::default()
        });
        assert_eq!(
            roles(&a),
            [
                ("sda".to_string(), MemberRole::InSync),
                ("sdb".to_string(), MemberRole::InSync),
                ("sdc".to_string(), MemberRole::Rebuilding)
            ]
        );
        assert!(a.initial_build());
        assert_eq!(a.health(), Health::Degraded);
        // A faulty member: a rebuild, not the first build.
        a.sysfs.as_mut().unwrap().members[0] = m("sda", &["faulty"], None);
        assert!(!a.initial_build());
        // mdstat alone, the slot numbers matching: the member at `_` is rebuilding.
        let text = "md1 : active raid1 sdb[1] sda[0]\n      1046528 blocks super 1.2 [2/1] [U_]\n      [=>...................]  recovery =  8.5% (89128/1046528) finish=1.5min speed=10000K/sec\n\nunused devices: <none>\n";
        let a = crate::mdstat::parse(text).arrays.remove(0);
        assert_eq!(roles(&a)[0], ("sdb".to_string(), MemberRole::Rebuilding));
        assert!(a.initial_build(), "every slot filled, none faulty");
        // A resync is the initial build; no sync, none.
        assert!(!raid1(None).initial_build());
        let mut r = raid1(Some(ArraySysfs {
            sync_action: Some(SyncAction::Resync),
            ..Default::default()
        }));
        r.sysfs.as_mut().unwrap().sync_completed =
            Some(SyncCompleted::Sectors { done: 1, total: 10 });
        assert!(r.initial_build());
    }

    #[test]
    fn the_uuid_is_read_once_in_mdadms_spelling() {
        let mut a = raid1(Some(ArraySysfs {
            uuid: Some("3b6c2a6e-0d0e-4b7a-9d5e-8a7b1c2d3e4f".into()),
            ..Default::default()
        }));
        assert_eq!(
            a.uuid().unwrap().to_string(),
            "3b6c2a6e:0d0e4b7a:9d5e8a7b:1c2d3e4f"
        );
        // udev's MD_UUID (mdadm's bytes, for 0.90 metadata not md/uuid's) wins.
        a.sysfs.as_mut().unwrap().mdadm_uuid = Some("00000000:11111111:22222222:33333333".into());
        assert_eq!(
            a.uuid().unwrap().to_string(),
            "00000000:11111111:22222222:33333333"
        );
        // The JSON: `uuid` is mdadm's, `md_uuid` the kernel's text.
        let j = serde_json::to_value(a.sysfs.as_ref().unwrap()).unwrap();
        assert_eq!(j["uuid"], "00000000:11111111:22222222:33333333");
        assert_eq!(j["md_uuid"], "3b6c2a6e-0d0e-4b7a-9d5e-8a7b1c2d3e4f");
        assert_eq!(raid1(None).uuid(), None);
    }

    #[test]
    fn words_round_trip_as_text() {
        for w in [
            "idle", "resync", "recover", "check", "repair", "reshape", "frozen", "new",
        ] {
            let a = SyncAction::from(w);
            assert_eq!(a.as_str(), w);
            assert_eq!(serde_json::to_value(&a).unwrap(), w);
            assert_eq!(serde_json::from_value::<SyncAction>(w.into()).unwrap(), a);
        }
        assert_eq!(SyncAction::from("frozen"), SyncAction::Frozen);
        assert_eq!(SyncAction::Recover.running_kind(), Some(SyncKind::Recovery));
        assert_eq!(SyncAction::Frozen.running_kind(), None);
        assert_eq!(SyncKind::from("recovery"), "recovery");
        assert_eq!(ArrayState::from("read-auto"), ArrayState::ReadAuto);
        assert!(ArrayState::from("clear").is_stopped());
        assert!(!ArrayState::from("clean").is_stopped());
        assert_eq!(
            serde_json::to_value(MemberFlag::WriteMostly).unwrap(),
            MemberFlag::WriteMostly.as_str()
        );
        assert_eq!(
            serde_json::to_value(HeaderState::Broken).unwrap(),
            HeaderState::Broken.as_str()
        );
        assert_eq!(
            serde_json::to_value(ReadOnly::AutoReadOnly).unwrap(),
            ReadOnly::AutoReadOnly.as_str()
        );
        assert_eq!(
            serde_json::to_value(SyncState::Pending).unwrap(),
            SyncState::Pending.as_str()
        );
    }
}
