//! md's vocabulary as types: the level with its rules, member states, flags and roles, the
//! array and header states, `sync_action` and the sync kinds, the consistency policy and bitmap
//! type, the array health verdict, the array UUID. Pure, no I/O. A kernel word is matched here and nowhere else: every other
//! module matches these enums (the simulator's fixtures and tests excepted).
//!
//! Sources: the kernel's Documentation/admin-guide/md.rst (`md/level`, `md/dev-*/state`),
//! drivers/md/md.c (`state_show`, `md_seq_show`), man mdadm (`--detail --test`).

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
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$var => $word,)*
                }
            }

            /// The value `word` names; `None` for any other word.
            pub fn from_word(word: &str) -> Option<Self> {
                match word {
                    $($word => Some($name::$var),)*
                    _ => None,
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
pub(crate) use closed_words;

word_enum! {
    /// `md/level`, or the personality on mdstat's header line (md.rst: `level`).
    pub enum Level {
        /// Concatenation, no redundancy.
        Linear => "linear",
        /// Striping, no redundancy.
        Raid0 => "raid0",
        /// Mirroring: every member holds all the data.
        Raid1 => "raid1",
        /// Striping with a dedicated parity member.
        Raid4 => "raid4",
        /// Striping with distributed parity.
        Raid5 => "raid5",
        /// Striping with two distributed syndromes (P and Q).
        Raid6 => "raid6",
        /// Striped mirrors (md's own layout; `near=2` by default).
        Raid10 => "raid10",
        /// Multipath (deprecated, removed in Linux 6.8): several paths to one disk.
        Multipath => "multipath",
        /// The `faulty` test personality (injects errors).
        Faulty => "faulty",
    }
}

impl Level {
    /// Keeps copies or parity of the data that md resyncs, checks and repairs: raid1, raid4,
    /// raid5, raid6, raid10. Not multipath (paths, not copies: md never resyncs it).
    pub fn is_redundant(&self) -> bool {
        matches!(
            self,
            Level::Raid1 | Level::Raid4 | Level::Raid5 | Level::Raid6 | Level::Raid10
        )
    }

    /// Computes parity (raid4, raid5, raid6): after a check, a mismatch means the parity does
    /// not match the data (on mirrors, swap and in-flight writes make harmless mismatches).
    pub fn has_parity(&self) -> bool {
        matches!(self, Level::Raid4 | Level::Raid5 | Level::Raid6)
    }

    /// How the level keeps its data redundant: by parity (raid4/5/6), by mirrors (raid1,
    /// raid10), or not at all (the others).
    pub fn redundancy(&self) -> Redundancy {
        match self {
            Level::Raid4 | Level::Raid5 | Level::Raid6 => Redundancy::Parity,
            Level::Raid1 | Level::Raid10 => Redundancy::Mirror,
            _ => Redundancy::None,
        }
    }

    /// The personality's mdstat status prints `[T/A] [U_]` (md.c each personality's `status`
    /// hook): the redundant levels and multipath.
    pub fn prints_member_counts(&self) -> bool {
        self.is_redundant() || *self == Level::Multipath
    }

    /// Whether the array still serves all its data with the slots in `down` missing (`down[i]`
    /// for slot i, mdstat's `[UU_U]` read as `_` = down), out of `down.len()` slots: raid1 while
    /// one member is left, raid4/5 one missing, raid6 two, raid0/linear none, raid10 unless
    /// both copies of a block are gone (the default `near=2` layout assumed: slots 2i and 2i+1
    /// for an even count, neighbouring slots otherwise). Multipath, faulty and unknown
    /// personalities: while one member is left. `missing` is the kernel's count
    /// (`md/degraded`), which wins over the pattern's; `down` may be empty where no pattern was
    /// printed (raid10 then judges by count: half gone loses data for sure).
    pub fn survives(&self, missing: u32, total: u32, down: &[bool]) -> bool {
        if missing == 0 {
            return true;
        }
        match self {
            Level::Raid4 | Level::Raid5 => missing < 2,
            Level::Raid6 => missing < 3,
            Level::Raid10 => !raid10_pair_lost(down, total),
            Level::Raid0 | Level::Linear => false,
            Level::Raid1 | Level::Multipath | Level::Faulty | Level::Other(_) => missing < total,
        }
    }

    /// The array's capacity in KiB for `members` members of `member_kib` KiB each: raid0 and
    /// linear the sum, raid1 one member, raid4/5 all but one, raid6 all but two, raid10 half
    /// (`near=2`); `None` for other levels or too few members for the level.
    pub fn capacity_kib(&self, member_kib: u64, members: u32) -> Option<u64> {
        let n = u64::from(members);
        let data = match self {
            Level::Raid0 | Level::Linear => n,
            Level::Raid1 => n.min(1),
            Level::Raid4 | Level::Raid5 => n.checked_sub(1)?,
            Level::Raid6 => n.checked_sub(2)?,
            Level::Raid10 => return (n >= 2).then(|| member_kib.saturating_mul(n) / 2),
            _ => return None,
        };
        (data > 0).then(|| member_kib.saturating_mul(data))
    }
}

/// How a level keeps its data redundant, from [`Level::redundancy`]; the D-Bus `Redundancy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Redundancy {
    /// No copies and no parity (raid0, linear, multipath, unknown levels).
    None,
    /// Copies of every block (raid1, raid10): a repair copies one over the others.
    Mirror,
    /// Parity computed from the data (raid4/5/6): a repair recomputes the parity.
    Parity,
}

closed_words!(Redundancy {
    None => "none",
    Mirror => "mirror",
    Parity => "parity",
});

/// Both copies of some block gone, assuming `near=2`.
fn raid10_pair_lost(down: &[bool], total: u32) -> bool {
    if down.len() != total as usize || down.is_empty() {
        // Pattern not printed or inconsistent: judge by count (half gone loses data for sure).
        return down.iter().filter(|d| **d).count() * 2 > down.len().max(1);
    }
    let n = down.len();
    if n % 2 == 0 {
        (0..n / 2).any(|i| down[2 * i] && down[2 * i + 1])
    } else {
        (0..n).any(|i| down[i] && down[(i + 1) % n])
    }
}

word_enum! {
    /// One word of `md/dev-*/state` (md.rst; md.c `state_show`), comma separated there.
    pub enum MemberState {
        /// The device failed; md no longer reads or writes it.
        Faulty => "faulty",
        /// Fully in sync with the array.
        InSync => "in_sync",
        /// Reads avoid it (`mdadm --write-mostly`).
        WriteMostly => "write_mostly",
        /// Writes wait for user space to acknowledge a failure.
        Blocked => "blocked",
        /// Not in sync: a spare, or being recovered into its slot.
        Spare => "spare",
        /// A write error was seen.
        WriteError => "write_error",
        /// The admin asked for a replacement.
        WantReplacement => "want_replacement",
        /// The replacement of another member, being recovered.
        Replacement => "replacement",
        /// The raid4/5/6 journal device.
        Journal => "journal",
        /// Bad blocks are kept by user space.
        ExternalBbl => "external_bbl",
        /// Fail fast on errors (`mdadm --failfast`).
        Failfast => "failfast",
    }
}

/// What a member does in its array: the one role every view shows, derived from
/// `md/dev-*/state` and `md/dev-*/slot` ([`MemberRole::from_sysfs`]) where read, else from the
/// mdstat flags and the array's running sync ([`crate::model::Array::members_with_roles`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemberRole {
    /// `in_sync`: holds current data in its slot (mdstat: no flag while no recovery runs).
    InSync,
    /// Not in sync but given a slot: being recovered into it (or waiting for the recovery).
    Rebuilding,
    /// No slot (mdstat `(S)`): a spare.
    Spare,
    /// `faulty` (mdstat `(F)`).
    Faulty,
    /// The raid4/5/6 journal device (mdstat `(J)`).
    Journal,
}

closed_words!(MemberRole {
    InSync => "in_sync",
    Rebuilding => "rebuilding",
    Spare => "spare",
    Faulty => "faulty",
    Journal => "journal",
});

impl MemberRole {
    /// The role `md/dev-*/state` and `md/dev-*/slot` say: faulty, else journal, else in sync,
    /// else rebuilding when it has a slot, else spare.
    pub fn from_sysfs(states: &[MemberState], slot: Option<u32>) -> MemberRole {
        if states.contains(&MemberState::Faulty) {
            MemberRole::Faulty
        } else if states.contains(&MemberState::Journal) {
            MemberRole::Journal
        } else if states.contains(&MemberState::InSync) {
            MemberRole::InSync
        } else if slot.is_some() {
            MemberRole::Rebuilding
        } else {
            MemberRole::Spare
        }
    }

    /// Holds data in a slot or is about to: in sync or rebuilding.
    pub fn is_slotted(self) -> bool {
        matches!(self, MemberRole::InSync | MemberRole::Rebuilding)
    }
}

/// The `mdadm --detail --test` verdict for one array, worst last (so `max` combines); from
/// [`crate::model::Array::health`], published as the D-Bus `Health` word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    /// Every member present.
    Ok,
    /// At least one member missing, data still served.
    Degraded,
    /// Not started (`md/array_state` `clear` or `inactive`): serves no data.
    Inactive,
    /// Started but not serving data: broken, or too few members for its level.
    Unusable,
}

closed_words!(Health {
    Ok => "ok",
    Degraded => "degraded",
    Inactive => "inactive",
    Unusable => "unusable",
});

impl Health {
    /// The exit status of `mdadm --detail --test`: 0, 1, 2 (an inactive array is unusable).
    pub fn exit_code(self) -> u8 {
        match self {
            Health::Ok => 0,
            Health::Degraded => 1,
            Health::Inactive | Health::Unusable => 2,
        }
    }
}

/// An array's UUID, parsed once from any spelling md and mdadm print (32 hex digits, `-` or
/// `:` between groups, any case). Shown in one public spelling: mdadm's
/// `xxxxxxxx:xxxxxxxx:xxxxxxxx:xxxxxxxx` (`mdadm --detail`, udev's `MD_UUID`, udisks2's `UUID`),
/// which `Display`, serde and every view (D-Bus, metrics, JSON, the journal, the check record)
/// use. [`ArrayUuid::md_form`] is the kernel's `md/uuid` spelling, for the documented extra
/// field only.
///
/// Source of the bytes: udev's `MD_UUID` (written by mdadm) where known, else `md/uuid`
/// ([`crate::model::Array::uuid`]). For 1.x metadata the two are the same bytes; for 0.90 only
/// udev's is mdadm's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ArrayUuid([u8; 16]);

impl ArrayUuid {
    /// Parses 32 hex digits with any `-` or `:` between them (surrounding whitespace ignored);
    /// `None` for anything else.
    pub fn parse(text: &str) -> Option<ArrayUuid> {
        let hex: Vec<u8> = text
            .trim()
            .bytes()
            .filter(|b| *b != b'-' && *b != b':')
            .collect();
        if hex.len() != 32 {
            return None;
        }
        let mut out = [0u8; 16];
        for (i, pair) in hex.chunks(2).enumerate() {
            let s = std::str::from_utf8(pair).ok()?;
            if !s.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            out[i] = u8::from_str_radix(s, 16).ok()?;
        }
        Some(ArrayUuid(out))
    }

    /// The kernel's `md/uuid` spelling, `8-4-4-4-12` lowercase hex.
    pub fn md_form(&self) -> String {
        let h: String = self.0.iter().map(|b| format!("{b:02x}")).collect();
        format!(
            "{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        )
    }
}

impl fmt::Display for ArrayUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if i > 0 && i % 4 == 0 {
                f.write_str(":")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for ArrayUuid {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ArrayUuid::parse(s).ok_or_else(|| format!("{s:?} is not an array UUID (32 hex digits)"))
    }
}

impl Serialize for ArrayUuid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ArrayUuid {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
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

word_enum! {
    /// `/sys/block/mdN/md/consistency_policy` (md.rst): how md makes the members agree again
    /// after an unclean stop (a crash, a power loss).
    pub enum ConsistencyPolicy {
        /// No redundancy to keep consistent (raid0, linear).
        None => "none",
        /// A full resync of the whole array.
        Resync => "resync",
        /// A write-intent bitmap: only the regions marked dirty are resynced.
        Bitmap => "bitmap",
        /// A raid4/5/6 journal device replays the writes.
        Journal => "journal",
        /// Partial parity log (raid5): the parity of the interrupted stripes is rebuilt.
        Ppl => "ppl",
    }
}

word_enum! {
    /// The selected (bracketed) word of `/sys/block/mdN/md/bitmap_type` (Linux 6.19+, e.g.
    /// `[none] bitmap llbitmap`): which bitmap implementation the array uses.
    pub enum BitmapType {
        /// No bitmap.
        None => "none",
        /// The classic write-intent bitmap (`mdadm --bitmap=internal`).
        Bitmap => "bitmap",
        /// The lockless bitmap (marked experimental by the kernel; never offered as a default).
        Llbitmap => "llbitmap",
    }
}

/// What keeps an array's resync after a crash short, from [`crate::model::Array::write_intent_bitmap`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteIntentBitmap {
    /// No bitmap: md resyncs the whole array after an unclean stop.
    None,
    /// An internal bitmap beside the superblock (`md/bitmap/location` `+8`...).
    Internal,
    /// A bitmap in a file (`md/bitmap/location` `file`).
    File,
    /// The lockless bitmap (`md/bitmap_type` `llbitmap`).
    Llbitmap,
}

closed_words!(WriteIntentBitmap {
    None => "none",
    Internal => "internal",
    File => "file",
    Llbitmap => "llbitmap",
});

/// md's word for "nothing here" in sysfs: `md/sync_completed` and `md/sync_speed` with no
/// sync running, `dev-*/slot` of a spare, `md/resync_start` of an array in sync,
/// `md/bitmap/location` without a bitmap, `md/reshape_position` with no reshape.
pub const NONE: &str = "none";

/// Where an array's resync speed limit comes from: `md/sync_speed_{min,max}` print `N (local)`
/// or `N (system)`; writing `system` makes the array follow the global
/// `/proc/sys/dev/raid/speed_limit_*` again (md.rst, md.c `sync_min_show`, `sync_min_store`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitOrigin {
    /// Set for this array.
    Local,
    /// Follows the global limit.
    System,
}

closed_words!(LimitOrigin {
    Local => "local",
    System => "system",
});

/// The `md/bitmap/location` word of a bitmap kept in a file (`mdadm --bitmap=FILE`); an
/// internal bitmap prints its offset from the superblock (`+8`), none prints [`NONE`].
pub const BITMAP_IN_FILE: &str = "file";

/// The prefix of `md/metadata_version` for metadata a user-space manager keeps
/// (`external:imsm`, `external:ddf`, `external:/md127/0` for a member of a container).
pub const EXTERNAL_METADATA: &str = "external";

/// mdadm's word for a member in service (`mdadm --detail`'s `active sync`): a
/// [`MemberRole::InSync`] or journal member of a running array, as `mdpilot status` and the
/// `mdpilot_array_members` metric name it.
pub const MEMBER_ACTIVE: &str = "active";

/// Which scrub (a check of the array, [`crate::check`]): the two `md/sync_action` words that
/// read every member and compare, spelled as md spells them (also the check record's spelling).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckAction {
    /// `check`: read and compare, count mismatches.
    Check,
    /// `repair`: like check, rewriting mismatches.
    Repair,
}

impl CheckAction {
    /// The `md/sync_action` that runs this scrub.
    pub fn sync_action(self) -> SyncAction {
        match self {
            CheckAction::Check => SyncAction::Check,
            CheckAction::Repair => SyncAction::Repair,
        }
    }

    /// The scrub `md/sync_action` runs: `None` for anything but check and repair.
    pub fn running(action: &SyncAction) -> Option<CheckAction> {
        match action {
            SyncAction::Check => Some(CheckAction::Check),
            SyncAction::Repair => Some(CheckAction::Repair),
            _ => None,
        }
    }
}

// `Display` and `as_str` give the `md/sync_action` word.
closed_words!(CheckAction {
    Check => "check",
    Repair => "repair",
});

/// `md/resync_start`: where a resync restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResyncStart {
    /// `none`: the array is in sync.
    InSync,
    /// The sector (512 bytes) the resync restarts from.
    Sector(u64),
}

impl ResyncStart {
    /// Parses `none` or a sector number; `None` for anything else.
    pub fn parse(s: &str) -> Option<ResyncStart> {
        match s.trim() {
            NONE => Some(ResyncStart::InSync),
            t => parse_plain_u64(t).map(ResyncStart::Sector),
        }
    }
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

impl SyncCompleted {
    /// Parses `md/sync_completed`: `none`, `delayed`, or `done / total` in 512-byte sectors;
    /// `None` for anything else.
    pub fn parse(s: &str) -> Option<SyncCompleted> {
        match s {
            NONE => Some(SyncCompleted::None),
            "delayed" => Some(SyncCompleted::Delayed),
            _ => {
                let (d, t) = s.split_once('/')?;
                Some(SyncCompleted::Sectors {
                    done: parse_plain_u64(d.trim())?,
                    total: parse_plain_u64(t.trim())?,
                })
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_forms_parse_to_their_words() {
        assert_eq!(SyncCompleted::parse("none"), Some(SyncCompleted::None));
        assert_eq!(
            SyncCompleted::parse("delayed"),
            Some(SyncCompleted::Delayed)
        );
        assert_eq!(
            SyncCompleted::parse("8 / 16"),
            Some(SyncCompleted::Sectors { done: 8, total: 16 })
        );
        assert_eq!(SyncCompleted::parse("-1 / 16"), None);
        assert_eq!(ResyncStart::parse("none\n"), Some(ResyncStart::InSync));
        assert_eq!(ResyncStart::parse("4096"), Some(ResyncStart::Sector(4096)));
        assert_eq!(ResyncStart::parse("soon"), None);
        assert_eq!(LimitOrigin::from_word("system"), Some(LimitOrigin::System));
        assert_eq!(LimitOrigin::Local.to_string(), "local");
        for a in [CheckAction::Check, CheckAction::Repair] {
            assert_eq!(CheckAction::from_word(a.as_str()), Some(a));
            assert_eq!(CheckAction::running(&a.sync_action()), Some(a));
            assert_eq!(a.sync_action(), a.as_str());
        }
        assert_eq!(CheckAction::running(&SyncAction::Resync), None);
        assert_eq!(MemberFlag::WriteMostly.as_str(), "write_mostly");
        assert_eq!(HeaderState::from_word("broken"), Some(HeaderState::Broken));
    }

    #[test]
    fn level_rules() {
        let redundant = ["raid1", "raid4", "raid5", "raid6", "raid10"];
        for w in [
            "linear",
            "raid0",
            "raid1",
            "raid4",
            "raid5",
            "raid6",
            "raid10",
            "multipath",
            "faulty",
            "container",
        ] {
            let l = Level::from(w);
            assert_eq!(l.as_str(), w);
            assert_eq!(l.is_redundant(), redundant.contains(&w), "{w}");
            assert_eq!(l.has_parity(), l.redundancy() == Redundancy::Parity);
            assert_eq!(
                l.has_parity(),
                ["raid4", "raid5", "raid6"].contains(&w),
                "{w}"
            );
        }
        assert!(Level::Multipath.prints_member_counts() && !Level::Raid0.prints_member_counts());
        let none = [false; 4];
        assert!(Level::Raid0.survives(0, 4, &none));
        assert!(!Level::Raid0.survives(1, 4, &[]));
        assert!(Level::Raid5.survives(1, 4, &[]) && !Level::Raid5.survives(2, 4, &[]));
        assert!(Level::Raid6.survives(2, 4, &[]) && !Level::Raid6.survives(3, 5, &[]));
        assert!(Level::Raid1.survives(2, 3, &[]) && !Level::Raid1.survives(3, 3, &[]));
        assert!(Level::Raid10.survives(2, 4, &[false, true, false, true]));
        assert!(!Level::Raid10.survives(2, 4, &[true, true, false, false]));
        assert_eq!(Level::Raid5.capacity_kib(100, 4), Some(300));
        assert_eq!(Level::Raid6.capacity_kib(100, 4), Some(200));
        assert_eq!(Level::Raid10.capacity_kib(100, 4), Some(200));
        assert_eq!(Level::Raid1.capacity_kib(100, 3), Some(100));
        assert_eq!(Level::Raid0.capacity_kib(100, 3), Some(300));
        assert_eq!(Level::Raid6.capacity_kib(100, 2), None);
        assert_eq!(Level::from("container").capacity_kib(100, 2), None);
    }

    #[test]
    fn one_uuid_two_spellings() {
        let md = "3b6c2a6e-0d0e-4b7a-9d5e-8a7b1c2d3e4f";
        let mdadm = "3b6c2a6e:0d0e4b7a:9d5e8a7b:1c2d3e4f";
        let a = ArrayUuid::parse(md).unwrap();
        assert_eq!(ArrayUuid::parse(mdadm), Some(a));
        assert_eq!(ArrayUuid::parse(&mdadm.to_uppercase()), Some(a));
        assert_eq!(ArrayUuid::parse(&format!(" {md}\n")), Some(a));
        assert_eq!(a.to_string(), mdadm);
        assert_eq!(a.md_form(), md);
        assert_eq!(serde_json::to_value(a).unwrap(), mdadm);
        assert_eq!(serde_json::from_value::<ArrayUuid>(md.into()).unwrap(), a);
        for bad in [
            "",
            "00000000-0000",
            "zz6c2a6e-0d0e-4b7a-9d5e-8a7b1c2d3e4f",
            "é",
        ] {
            assert_eq!(ArrayUuid::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn member_roles_from_sysfs() {
        let s = |w: &[&str]| w.iter().map(|w| MemberState::from(*w)).collect::<Vec<_>>();
        assert_eq!(
            MemberRole::from_sysfs(&s(&["in_sync", "write_mostly"]), Some(0)),
            MemberRole::InSync
        );
        assert_eq!(
            MemberRole::from_sysfs(&s(&["spare"]), Some(2)),
            MemberRole::Rebuilding
        );
        assert_eq!(
            MemberRole::from_sysfs(&s(&["spare"]), None),
            MemberRole::Spare
        );
        assert_eq!(
            MemberRole::from_sysfs(&s(&["faulty", "in_sync"]), Some(1)),
            MemberRole::Faulty
        );
        assert_eq!(
            MemberRole::from_sysfs(&s(&["journal", "in_sync"]), None),
            MemberRole::Journal
        );
        assert_eq!(MemberState::from("rectify"), "rectify");
        assert_eq!(Health::Inactive.exit_code(), 2);
        assert!(Health::Unusable > Health::Inactive && Health::Inactive > Health::Degraded);
        assert_eq!(Health::from_word("unusable"), Some(Health::Unusable));
    }
}
