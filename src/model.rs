//! The md array model: owned domain types shared by the mdstat parser, the sysfs reader,
//! `mdpilot status`, the D-Bus objects and the wipe planner.
//!
//! Field names and units follow `docs/status-json.md` (version 1): sizes and
//! progress in KiB (the "blocks" of `/proc/mdstat`), speeds in KiB/s, sysfs sectors are 512 bytes.
//! Source of truth for the printed forms: drivers/md/md.c `md_seq_show`, `status_resync`; for sysfs:
//! the kernel's Documentation/admin-guide/md.rst.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Defines an enum of kernel words with an `Other(String)` variant that keeps an unknown word as
/// printed, plus its one `as_str`, `Display`, `From<&str>`, comparison with text, and serde as
/// the same text (so JSON and saved files read exactly as the kernel's word).
macro_rules! word_enum {
    ($(#[$m:meta])* pub enum $name:ident {
        $($(#[$vm:meta])* $var:ident => $word:literal,)*
    }) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vm])* $var,)*
            /// A word this code does not know, kept as printed.
            Other(String),
        }

        impl $name {
            /// The kernel's word, as printed and as serialized.
            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$var => $word,)*
                    $name::Other(s) => s,
                }
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                match s {
                    $($word => $name::$var,)*
                    _ => $name::Other(s.to_string()),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                String::deserialize(d).map(|s| $name::from(s.as_str()))
            }
        }
    };
}

/// `as_str` and `Display` for a closed enum whose serde spelling is the same word.
macro_rules! closed_words {
    ($name:ident { $($var:ident => $word:literal,)* }) => {
        impl $name {
            /// The word as printed and serialized.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$var => $word,)*
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

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

/// `active`, `inactive` or `broken` (Linux 6.12+), from the header line `mdN : <state> ...` of
/// `/proc/mdstat` (not to be confused with sysfs `md/array_state`, [`ArrayState`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HeaderState {
    /// Running.
    Active,
    /// Assembled but not started (members listed, no personality running).
    Inactive,
    /// A member went missing under a raid0/linear array (Linux 6.12+).
    Broken,
}

closed_words!(HeaderState {
    Active => "active",
    Inactive => "inactive",
    Broken => "broken",
});

/// `(read-only)` or `(auto-read-only)` after the state word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadOnly {
    /// `(read-only)`: set by the admin (`mdadm --readonly`).
    ReadOnly,
    /// `(auto-read-only)`: switches to read-write on the first write.
    AutoReadOnly,
}

closed_words!(ReadOnly {
    ReadOnly => "read-only",
    AutoReadOnly => "auto-read-only",
});

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

// The serde word is also the word of sysfs `dev-*/state` and of the D-Bus `ActiveDevices`
// states; `mdpilot status` prints it with `-` for `_`.
closed_words!(MemberFlag {
    WriteMostly => "write_mostly",
    Journal => "journal",
    Faulty => "faulty",
    Spare => "spare",
    Replacement => "replacement",
});

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

closed_words!(SyncState {
    Running => "running",
    Delayed => "delayed",
    Pending => "pending",
    Remote => "remote",
});

word_enum! {
    /// The kind of sync a `/proc/mdstat` sync line names: the word before ` = N%` or before
    /// `=DELAYED|PENDING|REMOTE` (drivers/md/md.c `status_resync`), refined by sysfs
    /// `md/sync_action` where that is readable (see [`SyncAction::running_kind`]).
    pub enum SyncKind {
        /// `resync`: making a new or unclean array consistent (a repair also prints so).
        Resync => "resync",
        /// `recovery`: rebuilding a member (a spare or a re-added disk).
        Recovery => "recovery",
        /// `recover`: how md-cluster names a recovery another node runs (`recover=REMOTE`).
        Recover => "recover",
        /// `reshape`: changing level, layout, chunk size or member count.
        Reshape => "reshape",
        /// `check`: reading and comparing, counting mismatches (`md/mismatch_cnt`).
        Check => "check",
        /// `repair`: like check, rewriting mismatches (only sysfs says so).
        Repair => "repair",
    }
}

word_enum! {
    /// `/sys/block/mdN/md/sync_action` (md.rst): what the sync thread does or may do. The
    /// default is `idle`.
    #[derive(Default)]
    pub enum SyncAction {
        /// No sync running.
        #[default]
        Idle => "idle",
        /// Resync running.
        Resync => "resync",
        /// Recovery (rebuild) running.
        Recover => "recover",
        /// Check running.
        Check => "check",
        /// Repair running.
        Repair => "repair",
        /// Reshape running.
        Reshape => "reshape",
        /// Syncing is frozen (no new sync starts).
        Frozen => "frozen",
    }
}

impl SyncAction {
    /// The mdstat word of a running action, so consumers see one vocabulary: sysfs `recover` is
    /// mdstat's `recovery`; `None` for `idle`, `frozen` or an unknown word.
    pub fn running_kind(&self) -> Option<SyncKind> {
        match self {
            SyncAction::Resync => Some(SyncKind::Resync),
            SyncAction::Recover => Some(SyncKind::Recovery),
            SyncAction::Other(w) if w == "recovery" => Some(SyncKind::Recovery),
            SyncAction::Check => Some(SyncKind::Check),
            SyncAction::Repair => Some(SyncKind::Repair),
            SyncAction::Reshape => Some(SyncKind::Reshape),
            SyncAction::Idle | SyncAction::Frozen | SyncAction::Other(_) => None,
        }
    }
}

word_enum! {
    /// `/sys/block/mdN/md/array_state` (md.rst), not the mdstat header word ([`HeaderState`]).
    pub enum ArrayState {
        /// No devices, no size, no level: the array is stopped.
        Clear => "clear",
        /// Not active, but some state is kept (members assembled).
        Inactive => "inactive",
        /// All I/O is blocked.
        Suspended => "suspended",
        /// No resync and no writes.
        Readonly => "readonly",
        /// Like readonly, but switches to active on the first write.
        ReadAuto => "read-auto",
        /// No pending writes; the superblock says clean.
        Clean => "clean",
        /// Fully active: I/O and resync may run.
        Active => "active",
        /// Writes are blocked until the superblock is updated.
        WritePending => "write-pending",
        /// Active, no writes seen recently (the superblock may be marked clean).
        ActiveIdle => "active-idle",
        /// A raid0/linear member is missing.
        Broken => "broken",
    }
}

impl ArrayState {
    /// True for `clear` and `inactive`: the array holds no data in use.
    pub fn is_stopped(&self) -> bool {
        matches!(self, ArrayState::Clear | ArrayState::Inactive)
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

/// A decimal number as sysfs and `/proc/sys` print it: ASCII digits only (no sign, no space).
pub fn parse_plain_u64(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
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
