//! Guards before maintenance: whether a check may start on an array now, and whether a running
//! one must pause. Pure: the caller derives [`Facts`] from the model ([`Facts::of`]) and the
//! member disks, and reads the power source (`crate::sysfs::pressure::on_battery`).
//!
//! The rules (what mdadm's `checkarray`, Debian's cron job and admins expect):
//! - no check starts on an array that is degraded, or whose `sync_action` is `resync`,
//!   `recover` or `reshape` (md would refuse the write anyway, or the check would add reads to a
//!   rebuild that restores redundancy);
//! - nor on one that shares a whole disk with such an array: the other array's rebuild needs
//!   that disk (the multi-tenant deadlock of a check on a degraded array's disks);
//! - a scheduled check does not start on battery (no AC online and a system battery present);
//! - a running check pauses when its array degrades (its position is kept), and resumes when
//!   the array is redundant again ([`may_resume`]).
//!
//! An admin can start one by hand anyway with `force` (CLI `--force`, D-Bus option `force`);
//! the reason it overrides is then logged and returned.

use crate::model::{Array, SyncAction};
use std::fmt;

/// What the guards know of one array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// Kernel name (`md0`).
    pub name: String,
    /// Whole disks under its members (`sda`, `nvme0n1`).
    pub disks: Vec<String>,
    /// Missing members ([`Array::degraded`]); 0 when unknown.
    pub missing: u32,
    /// The sync that keeps a check away: `resync`, `recover` or `reshape` (`sync_action`,
    /// running or queued); `None` otherwise.
    pub rebuilding: Option<String>,
}

impl Facts {
    /// The facts of `a` from the model ([`Array::degraded`], [`Array::sync_action`]), with the
    /// whole disks under its members as the caller found them.
    pub fn of(a: &Array, disks: Vec<String>) -> Facts {
        let rebuilding = match a.sync_action() {
            w @ (SyncAction::Resync | SyncAction::Recover | SyncAction::Reshape) => {
                Some(w.as_str().to_string())
            }
            _ => None,
        };
        Facts {
            name: a.name.clone(),
            disks,
            missing: a.degraded().unwrap_or(0),
            rebuilding,
        }
    }

    /// Why this array itself keeps a check away, if it does.
    fn own_hold(&self) -> Option<Hold> {
        if self.missing > 0 {
            return Some(Hold::Degraded {
                array: self.name.clone(),
                missing: self.missing,
            });
        }
        self.rebuilding.as_ref().map(|action| Hold::Rebuilding {
            array: self.name.clone(),
            action: action.clone(),
        })
    }
}

/// Why a check does not start (or pauses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// The array misses members.
    Degraded {
        /// Kernel name.
        array: String,
        /// Missing members.
        missing: u32,
    },
    /// The array runs (or waits for) a resync, recovery or reshape.
    Rebuilding {
        /// Kernel name.
        array: String,
        /// `resync`, `recover` or `reshape`.
        action: String,
    },
    /// The array shares a disk with another that is held.
    SharesDisk {
        /// The shared whole disk (`sda`).
        disk: String,
        /// Why the other array is held.
        other: Box<Hold>,
    },
    /// The machine runs on battery (scheduled checks only).
    OnBattery,
}

impl Hold {
    /// The short word for logs, metrics and D-Bus: `degraded`, `rebuilding`, `shares-disk`,
    /// `on-battery`.
    pub fn code(&self) -> &'static str {
        match self {
            Hold::Degraded { .. } => "degraded",
            Hold::Rebuilding { .. } => "rebuilding",
            Hold::SharesDisk { .. } => "shares-disk",
            Hold::OnBattery => "on-battery",
        }
    }
}

impl fmt::Display for Hold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Hold::Degraded { array, missing } => {
                write!(f, "{array} is degraded ({missing} member(s) missing)")
            }
            Hold::Rebuilding { array, action } => write!(f, "{array} runs {action}"),
            Hold::SharesDisk { disk, other } => write!(f, "it shares disk {disk}: {other}"),
            Hold::OnBattery => write!(f, "the machine runs on battery"),
        }
    }
}

/// Why a check may not start on `target` now, given every array's facts `all` (`target`
/// among them) and, for a scheduled check, whether the machine runs on battery (pass `false`
/// for a check started by hand). `None`: it may start. The array's own state comes first,
/// then the shared disks (in `all`'s order), then the battery.
pub fn hold(target: &str, all: &[Facts], on_battery: bool) -> Option<Hold> {
    let me = all.iter().find(|f| f.name == target)?;
    if let Some(h) = me.own_hold() {
        return Some(h);
    }
    for other in all.iter().filter(|f| f.name != target) {
        let Some(h) = other.own_hold() else {
            continue;
        };
        if let Some(disk) = me.disks.iter().find(|d| other.disks.contains(d)) {
            return Some(Hold::SharesDisk {
                disk: disk.clone(),
                other: Box::new(h),
            });
        }
    }
    on_battery.then_some(Hold::OnBattery)
}

/// Whether a running check on `f` must pause: its array degraded.
pub fn must_pause(f: &Facts) -> Option<Hold> {
    (f.missing > 0).then(|| Hold::Degraded {
        array: f.name.clone(),
        missing: f.missing,
    })
}

/// Whether a check paused by [`must_pause`] may resume: the array is whole and no resync,
/// recovery or reshape runs on it.
pub fn may_resume(f: &Facts) -> bool {
    f.own_hold().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn f(name: &str, disks: &[&str], missing: u32, rebuilding: Option<&str>) -> Facts {
        Facts {
            name: name.into(),
            disks: disks.iter().map(|d| (*d).to_string()).collect(),
            missing,
            rebuilding: rebuilding.map(Into::into),
        }
    }

    #[test]
    fn degraded_rebuilding_shared_and_battery() {
        let all = [
            f("md0", &["sda", "sdb"], 0, None),
            f("md1", &["sda", "sdc"], 1, None),
            f("md2", &["sdd", "sde"], 0, Some("reshape")),
            f("md3", &["sdf", "sdg"], 0, None),
        ];
        assert_eq!(
            hold("md1", &all, false).unwrap().to_string(),
            "md1 is degraded (1 member(s) missing)"
        );
        assert_eq!(
            hold("md0", &all, false).unwrap().to_string(),
            "it shares disk sda: md1 is degraded (1 member(s) missing)"
        );
        assert_eq!(hold("md2", &all, false).unwrap().code(), "rebuilding");
        assert_eq!(hold("md3", &all, false), None);
        assert_eq!(hold("md3", &all, true), Some(Hold::OnBattery));
        assert_eq!(
            hold("md9", &all, false),
            None,
            "unknown: the caller says so"
        );
        assert!(must_pause(&all[1]).is_some() && must_pause(&all[0]).is_none());
        assert!(!may_resume(&all[1]) && !may_resume(&all[2]) && may_resume(&all[3]));
    }

    proptest! {
        /// A whole, idle array sharing no disk with a held one is never held off mains, and a
        /// degraded one is always held.
        #[test]
        fn holds_follow_the_facts(
            arrays in proptest::collection::vec(
                (0u32..2, proptest::option::of(0usize..3), proptest::collection::vec(0u8..6, 1..4)),
                1..6,
            ),
            battery: bool,
        ) {
            let words = ["resync", "recover", "reshape"];
            let all: Vec<Facts> = arrays.iter().enumerate().map(|(i, (m, r, d))| Facts {
                name: format!("md{i}"),
                disks: d.iter().map(|x| format!("sd{x}")).collect(),
                missing: *m,
                rebuilding: r.map(|k| words[k].to_string()),
            }).collect();
            for me in &all {
                let h = hold(&me.name, &all, battery);
                let shares_held = all.iter().any(|o| o.name != me.name
                    && (o.missing > 0 || o.rebuilding.is_some())
                    && o.disks.iter().any(|d| me.disks.contains(d)));
                let own = me.missing > 0 || me.rebuilding.is_some();
                prop_assert_eq!(h.is_none(), !own && !shares_held && !battery);
                if me.missing > 0 {
                    prop_assert_eq!(h.map(|h| h.code()), Some("degraded"));
                }
            }
        }
    }
}
