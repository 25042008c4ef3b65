//! Warnings of the policy: what `policy show` reports and the state file keeps (`warnings = [..]`).
//!
//! Each kind is a variant, so the core decides on variants (which warning stops being true when
//! a lease cycle ends) instead of matching text. The state file and the `--json` view hold the
//! text ([`PolicyWarning`]'s `Display`); reading a state file parses the text back
//! ([`PolicyWarning::parse`]), and text of no known form (an older or hand-edited file, an
//! error message) is kept as [`PolicyWarning::Other`], so every file still loads and saves back
//! byte for byte.

use super::request::KnobId;
use crate::model::SpeedLimit;
use serde::{Deserialize, Serialize};
use std::fmt;

/// End of the [`PolicyWarning::Adopted`] text.
const WRITE_BACK: &str = "it is the value restore will write back";
/// Middle of the drift texts.
const BEHIND: &str = " changed behind our back";

/// One policy warning. Knob values are KiB/s readings (`N` or `N (system)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyWarning {
    /// A managed knob a lease still wants changed behind our back; the other writer's value
    /// becomes the one restore writes back. Dropped when no lease wants the knob any more.
    /// Text: `<knob> changed behind our back (found <value>); it is the value restore will write
    /// back`.
    Adopted {
        /// The knob.
        knob: KnobId,
        /// What it read.
        found: SpeedLimit,
    },
    /// A knob no lease wants any more held another writer's value: left so.
    /// Text: `<knob> changed behind our back: left at <value>`.
    LeftAt {
        /// The knob.
        knob: KnobId,
        /// The value left.
        value: SpeedLimit,
    },
    /// Seen by `policy show` (no state change): a managed knob holds neither our value nor the
    /// original. Text: `<knob> changed behind our back: we wrote <N|nothing yet>, it is now
    /// <value>; restore will leave it`.
    Drifted {
        /// The knob.
        knob: KnobId,
        /// What we last wrote, KiB/s; `None` before the first write completed.
        written: Option<u64>,
        /// What it reads now.
        now: SpeedLimit,
    },
    /// A managed per-array knob whose file is gone (array stopped): nothing to restore.
    /// Text: `<knob>: <kernel path> is gone (array stopped?); nothing to restore`.
    Gone {
        /// The knob.
        knob: KnobId,
    },
    /// The state file was corrupt and moved aside: the originals are unknown until
    /// `restore --defaults`. Text: `originals unknown (state file was corrupt, moved to
    /// <path>): run `mdpilot policy restore --defaults``.
    OriginalsUnknown {
        /// Where the corrupt file was moved to.
        moved_to: String,
    },
    /// `release` of a holder without a lease (not an error, so scripts stay idempotent).
    /// Text: `"<holder>" held no lease` (the holder in Rust debug quoting).
    NoLease {
        /// The holder asked for.
        holder: String,
    },
    /// Any other text: an error message kept as a warning (an unreadable knob, a corrupt state
    /// file moved aside by `restore --defaults`), or text of no known form read from a file.
    Other(String),
}

impl PolicyWarning {
    /// True for [`PolicyWarning::Adopted`], of `knob` when given: the warnings that stop being
    /// true once no lease wants that knob (or any knob) any more.
    pub fn is_write_back(&self, knob: Option<&KnobId>) -> bool {
        match (self, knob) {
            (PolicyWarning::Adopted { .. }, None) => true,
            (PolicyWarning::Adopted { knob: k, .. }, Some(want)) => k == want,
            _ => false,
        }
    }

    /// Reads a warning's text back: the variant whose text it is, else [`PolicyWarning::Other`]
    /// (never fails; `parse(w.to_string()) == w` for every `w` but `NoLease`, which is shown,
    /// never saved, and reads back as `Other` with the same text).
    pub fn parse(text: &str) -> PolicyWarning {
        let structured = Self::parse_known(text).filter(|w| w == &text);
        structured.unwrap_or_else(|| PolicyWarning::Other(text.to_string()))
    }

    fn parse_known(text: &str) -> Option<PolicyWarning> {
        if let Some(rest) =
            text.strip_prefix("originals unknown (state file was corrupt, moved to ")
        {
            let moved_to = rest.strip_suffix("): run `mdpilot policy restore --defaults`")?;
            return Some(PolicyWarning::OriginalsUnknown {
                moved_to: moved_to.to_string(),
            });
        }
        if let Some((knob, rest)) = text.split_once(BEHIND) {
            let knob: KnobId = knob.parse().ok()?;
            if let Some(found) = rest.strip_prefix(" (found ") {
                let found = found.strip_suffix(&format!("); {WRITE_BACK}"))?;
                let found = SpeedLimit::parse(found)?;
                return Some(PolicyWarning::Adopted { knob, found });
            }
            if let Some(value) = rest.strip_prefix(": left at ") {
                let value = SpeedLimit::parse(value)?;
                return Some(PolicyWarning::LeftAt { knob, value });
            }
            let rest = rest.strip_prefix(": we wrote ")?;
            let rest = rest.strip_suffix("; restore will leave it")?;
            let (written, now) = rest.split_once(", it is now ")?;
            let written = match written {
                "nothing yet" => None,
                n => Some(crate::model::parse_plain_u64(n)?),
            };
            let now = SpeedLimit::parse(now)?;
            return Some(PolicyWarning::Drifted { knob, written, now });
        }
        let (knob, rest) = text.split_once(": ")?;
        let knob: KnobId = knob.parse().ok()?;
        rest.ends_with(" is gone (array stopped?); nothing to restore")
            .then_some(PolicyWarning::Gone { knob })
    }
}

impl fmt::Display for PolicyWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyWarning::Adopted { knob, found } => {
                write!(f, "{knob}{BEHIND} (found {found}); {WRITE_BACK}")
            }
            PolicyWarning::LeftAt { knob, value } => write!(f, "{knob}{BEHIND}: left at {value}"),
            PolicyWarning::Drifted { knob, written, now } => {
                let ours = written.map_or_else(|| "nothing yet".into(), |w| w.to_string());
                write!(
                    f,
                    "{knob}{BEHIND}: we wrote {ours}, it is now {now}; restore will leave it"
                )
            }
            PolicyWarning::Gone { knob } => write!(
                f,
                "{knob}: {} is gone (array stopped?); nothing to restore",
                knob.kernel_path()
            ),
            PolicyWarning::OriginalsUnknown { moved_to } => write!(
                f,
                "originals unknown (state file was corrupt, moved to {moved_to}): run \
                 `mdpilot policy restore --defaults`"
            ),
            PolicyWarning::NoLease { holder } => write!(f, "{holder:?} held no lease"),
            PolicyWarning::Other(text) => f.write_str(text),
        }
    }
}

/// True when the warning's text is `other` (compared as it is written, without allocating).
impl PartialEq<&str> for PolicyWarning {
    fn eq(&self, other: &&str) -> bool {
        struct Rest<'a>(&'a str);
        impl fmt::Write for Rest<'_> {
            fn write_str(&mut self, s: &str) -> fmt::Result {
                self.0 = self.0.strip_prefix(s).ok_or(fmt::Error)?;
                Ok(())
            }
        }
        let mut rest = Rest(other);
        fmt::write(&mut rest, format_args!("{self}")).is_ok() && rest.0.is_empty()
    }
}

impl Serialize for PolicyWarning {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PolicyWarning {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(|t| PolicyWarning::parse(&t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::request::Bound;

    #[test]
    fn every_saved_form_reads_back_as_itself() {
        let g = KnobId::Global(Bound::Min);
        let a = KnobId::Array {
            array: "md0".into(),
            bound: Bound::Max,
        };
        let sys = SpeedLimit {
            kib_s: 1000,
            system: true,
        };
        for w in [
            PolicyWarning::Adopted {
                knob: g.clone(),
                found: SpeedLimit::local(5000),
            },
            PolicyWarning::Adopted {
                knob: a.clone(),
                found: sys,
            },
            PolicyWarning::LeftAt {
                knob: g.clone(),
                value: SpeedLimit::local(7),
            },
            PolicyWarning::Drifted {
                knob: a.clone(),
                written: Some(1),
                now: sys,
            },
            PolicyWarning::Drifted {
                knob: g.clone(),
                written: None,
                now: SpeedLimit::local(3),
            },
            PolicyWarning::Gone { knob: a.clone() },
            PolicyWarning::OriginalsUnknown {
                moved_to: "/run/mdpilot/policy.toml.corrupt-1".into(),
            },
            PolicyWarning::Other("cannot read /proc/sys/dev/raid/speed_limit_min".into()),
        ] {
            assert_eq!(PolicyWarning::parse(&w.to_string()), w, "{w}");
        }
        assert_eq!(
            PolicyWarning::LeftAt {
                knob: g,
                value: SpeedLimit::local(5000)
            },
            "speed_limit_min changed behind our back: left at 5000"
        );
        // Text that only looks like a known form stays text, unchanged.
        for t in [
            "speed_limit_min changed behind our back (found 5 (local)); it is the value restore will write back",
            "md0/../x/sync_speed_min changed behind our back: left at 5",
            "0",
        ] {
            assert_eq!(PolicyWarning::parse(t), PolicyWarning::Other(t.into()));
        }
        let n = PolicyWarning::NoLease { holder: "i".into() };
        assert_eq!(n.to_string(), "\"i\" held no lease");
        assert_eq!(
            PolicyWarning::parse(&n.to_string()).to_string(),
            n.to_string()
        );
    }
}
