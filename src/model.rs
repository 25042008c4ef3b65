//! The md array model: owned domain types shared by the mdstat parser, the sysfs reader,
//! `mdpilot status`, the D-Bus objects and the wipe planner.
//!
//! Field names and units follow `../shared/contracts/status-json.md` (version 1): sizes and
//! progress in KiB (the "blocks" of `/proc/mdstat`), speeds in KiB/s, sysfs sectors are 512 bytes.
//! Source of truth for the printed forms: drivers/md/md.c `md_seq_show`, `status_resync`; for sysfs:
//! the kernel's Documentation/admin-guide/md.rst.

use serde::{Deserialize, Serialize};

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

/// `active`, `inactive` or `broken` (Linux 6.12+), from the header line `mdN : <state> ...`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ArrayState {
    /// Running.
    Active,
    /// Assembled but not started (members listed, no personality running).
    Inactive,
    /// A member went missing under a raid0/linear array (Linux 6.12+).
    Broken,
}

/// `(read-only)` or `(auto-read-only)` after the state word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadOnly {
    /// `(read-only)`: set by the admin (`mdadm --readonly`).
    ReadOnly,
    /// `(auto-read-only)`: switches to read-write on the first write.
    AutoReadOnly,
}

/// One md array.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Array {
    /// Kernel name as printed (`md0`, `md127`, `md_d0`).
    pub name: String,
    /// Header state word.
    pub state: ArrayState,
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

/// Member flags as printed after `name[slot]`, in the kernel's order `(W)(J)(F|S)(R)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemberFlag {
    /// `(W)` write-mostly.
    WriteMostly,
    /// `(J)` raid5 journal device.
    Journal,
    /// `(F)` faulty.
    Faulty,
    /// `(S)` spare.
    Spare,
    /// `(R)` replacement.
    Replacement,
}

/// Whether the sync runs or waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncState {
    /// A progress line with numbers.
    Running,
    /// `resync=DELAYED`: waits for another array sharing a disk.
    Delayed,
    /// `resync=PENDING`: array is auto-read-only; starts on the first write.
    Pending,
    /// `resync=REMOTE`: md-cluster, another node syncs.
    Remote,
}

/// A sync (resync, recovery, reshape, check, repair) as printed in mdstat, maybe refined by sysfs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyncStatus {
    /// The printed word (`resync`, `recovery`, `reshape`, `check`); sysfs `sync_action` overrides
    /// it where readable (so a repair reads `repair`).
    pub action: String,
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

/// A per-array speed limit as `/sys/block/mdN/md/sync_speed_{min,max}` prints it: `N (local)`
/// or `N (system)`, in KiB/s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpeedLimit {
    /// KiB/s in force.
    pub kib_s: u64,
    /// True for `(system)`: the array follows the global `/proc/sys/dev/raid/speed_limit_*`.
    pub system: bool,
}

/// Progress from `md/sync_completed`: `none`, `delayed`, or `A / B` in 512-byte sectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncCompleted {
    /// No sync running.
    None,
    /// A sync is queued.
    Delayed,
    /// `done / total` sectors of 512 bytes.
    Sectors {
        /// Sectors done.
        done: u64,
        /// Sectors in total.
        total: u64,
    },
}

/// State of one member from `/sys/block/mdN/md/dev-<name>/`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberSysfs {
    /// Kernel device name (`dev-sda1` → `sda1`).
    pub name: String,
    /// Words of `state` (`in_sync`, `faulty`, `write_mostly`, `spare`, `replacement`...).
    pub state: Vec<String>,
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
    pub array_state: Option<String>,
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
    pub sync_action: Option<String>,
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
    /// `md/uuid` (where the kernel exposes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
    /// `md/consistency_policy` (`none`, `resync`, `bitmap`, `journal`, `ppl`); not in the
    /// status JSON.
    #[serde(skip)]
    pub consistency_policy: Option<String>,
    /// `md/bitmap/location` as the kernel prints it (`none`, `file`, `+8` sectors from the
    /// superblock); not in the status JSON.
    #[serde(skip)]
    pub bitmap_location: Option<String>,
    /// The metadata name (`host:root`), from udev's `MD_NAME` ([`crate::names::metadata_name`]);
    /// not in the status JSON.
    #[serde(skip)]
    pub metadata_name: Option<String>,
    /// The UUID in mdadm's colon form ([`crate::names::array_uuid`]); not in the status JSON.
    #[serde(skip)]
    pub mdadm_uuid: Option<String>,
    /// The `/dev/md/NAME` link ([`crate::names::named_device`]); not in the status JSON.
    #[serde(skip)]
    pub named_device: Option<String>,
}
