//! md's vocabulary as types: the level with its rules, member states and roles, the array
//! health verdict, the array UUID. Pure, no I/O. A kernel word is matched here and nowhere else: every other
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
pub(crate) use word_enum;

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

#[cfg(test)]
mod tests {
    use super::*;

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
