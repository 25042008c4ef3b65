//! The pressure-driven throttle of checks: a pure controller from the kernel's io pressure
//! (`/proc/pressure/io`, read by [`crate::sysfs::pressure`]) to the check's `md/sync_speed_max`,
//! KiB/s. No I/O here; `check/throttle.rs` reads the inputs and writes the limit through the
//! `check-<array>` lease.
//!
//! The rule (AIMD, as TCP and the kernel's writeback throttle step):
//! - pressure above the target band: the limit drops at once, to half (a quarter above twice
//!   the band's top), at most every [`DOWN_INTERVAL_S`], never below the floor;
//! - below the band: it climbs by a quarter (at least [`MIN_STEP_KIB_S`]), at most every
//!   [`UP_INTERVAL_S`] (the pressure's own 10-second average must show the last step first),
//!   never above the ceiling;
//! - inside the band: it holds.
//!
//! Without a pressure file the limit is fixed (the config's `check_max`, as before) and the
//! decision says why. md only honours `sync_speed_max` while the sync runs above
//! `sync_speed_min` (drivers/md/md.c `md_do_sync`), so [`confirm`] reads the knob and
//! `sync_speed` back and says when the limit did not take effect.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Least time between two steps down, seconds.
pub const DOWN_INTERVAL_S: u64 = 5;
/// Least time between two steps up, seconds: the 10-second pressure average reflects a step.
pub const UP_INTERVAL_S: u64 = 10;
/// How long after a change md's `sync_speed` (averaged over md's last marks, up to ~30 s) is
/// compared with the limit, seconds.
pub const SETTLE_S: u64 = 30;
/// The least step up, KiB/s, so that a limit near the floor climbs at all.
pub const MIN_STEP_KIB_S: u64 = 256;
/// Default floor, KiB/s: md's own default `speed_limit_min`.
pub const DEFAULT_FLOOR_KIB_S: u64 = 1_000;
/// Default ceiling, KiB/s: md's own default `speed_limit_max`.
pub const DEFAULT_CEILING_KIB_S: u64 = 200_000;

/// Which line of `/proc/pressure/io` the band applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stall {
    /// `some`: at least one task waited on io.
    Some,
    /// `full`: every non-idle task waited on io at once.
    Full,
}

/// The target band, `[check] pressure_target = "full 5%..10%"`: per-mille of wall time
/// (`50..100`), so the config stays comparable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// The line (`full` is the default and the recommended input).
    pub stall: Stall,
    /// Below this the check climbs, per mille.
    pub low_permille: u32,
    /// Above this the check steps down, per mille.
    pub high_permille: u32,
}

impl std::str::FromStr for Target {
    type Err = String;

    /// `"[full|some] LOW%..HIGH%"` with `0 <= LOW <= HIGH <= 100`, decimals allowed
    /// (`"full 2.5%..5%"`). Errors: a message naming the expected form.
    fn from_str(s: &str) -> Result<Target, String> {
        let bad = || format!("{s:?}: expected \"full LOW%..HIGH%\", like \"full 5%..10%\"");
        let mut words = s.split_whitespace();
        let (stall, band) = match (words.next(), words.next(), words.next()) {
            (Some("full"), Some(b), None) => (Stall::Full, b),
            (Some("some"), Some(b), None) => (Stall::Some, b),
            (Some(b), None, None) => (Stall::Full, b),
            _ => return Err(bad()),
        };
        let (lo, hi) = band.split_once("..").ok_or_else(bad)?;
        let pm = |t: &str| -> Option<u32> {
            let v: f64 = t.strip_suffix('%')?.parse().ok()?;
            (v.is_finite() && (0.0..=100.0).contains(&v)).then(|| (v * 10.0).round() as u32)
        };
        let (low, high) = (pm(lo).ok_or_else(bad)?, pm(hi).ok_or_else(bad)?);
        if low > high {
            return Err(format!("{s:?}: the low end is above the high end"));
        }
        Ok(Target {
            stall,
            low_permille: low,
            high_permille: high,
        })
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = match self.stall {
            Stall::Some => "some",
            Stall::Full => "full",
        };
        let p = |v: u32| v as f64 / 10.0;
        write!(
            f,
            "{w} {}%..{}%",
            p(self.low_permille),
            p(self.high_permille)
        )
    }
}

/// The throttle's settings: the band, floor and ceiling, KiB/s (`floor <= ceiling`, both ≥ 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuning {
    /// The target band.
    pub target: Target,
    /// The least limit, KiB/s (`pressure_floor`, default md's 1000).
    pub floor_kib_s: u64,
    /// The greatest limit, KiB/s (`pressure_ceiling`, default `check_max`, else md's 200000).
    pub ceiling_kib_s: u64,
}

/// Why the limit is what it is: the decision, shown by `check status`, D-Bus and the journal.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "code", rename_all = "kebab-case")]
pub enum Why {
    /// No pressure to read: the fixed limit, and the reason (`no /proc/pressure/io ...`).
    Fixed {
        /// Why there is no pressure.
        reason: String,
    },
    /// First decision of a check.
    Start {
        /// Pressure, percent.
        pct: f64,
    },
    /// Above the band: stepped down.
    Down {
        /// Pressure, percent.
        pct: f64,
    },
    /// Below the band: climbed.
    Up {
        /// Pressure, percent.
        pct: f64,
    },
    /// Inside the band (or waiting for the last step to show): held.
    Hold {
        /// Pressure, percent.
        pct: f64,
    },
    /// Above the band, already at the floor.
    Floor {
        /// Pressure, percent.
        pct: f64,
    },
    /// Below the band, already at the ceiling.
    Ceiling {
        /// Pressure, percent.
        pct: f64,
    },
}

impl Why {
    /// The short word (`down`, `up`, `hold`, `floor`, `ceiling`, `start`, `fixed`), the
    /// metrics' `decision` label.
    pub fn code(&self) -> &'static str {
        match self {
            Why::Fixed { .. } => "fixed",
            Why::Start { .. } => "start",
            Why::Down { .. } => "down",
            Why::Up { .. } => "up",
            Why::Hold { .. } => "hold",
            Why::Floor { .. } => "floor",
            Why::Ceiling { .. } => "ceiling",
        }
    }
}

/// One decision: the limit to hold now, KiB/s, and why ([`Decision::explain`] in words).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    /// `md/sync_speed_max` to hold, KiB/s.
    pub limit_kib_s: u64,
    /// Why.
    pub why: Why,
}

impl Decision {
    /// One line for people: `io pressure full 12.5% above 5%..10%: down to 50000 KiB/s`.
    pub fn explain(&self, t: &Target) -> String {
        let l = self.limit_kib_s;
        match &self.why {
            Why::Fixed { reason } => format!("fixed at {l} KiB/s: {reason}"),
            Why::Start { pct } => format!("io pressure {pct:.1}%, target {t}: starts at {l} KiB/s"),
            Why::Down { pct } => format!("io pressure {pct:.1}% above {t}: down to {l} KiB/s"),
            Why::Up { pct } => format!("io pressure {pct:.1}% below {t}: up to {l} KiB/s"),
            Why::Hold { pct } => format!("io pressure {pct:.1}%, target {t}: holds {l} KiB/s"),
            Why::Floor { pct } => {
                format!("io pressure {pct:.1}% above {t}: at the floor, {l} KiB/s")
            }
            Why::Ceiling { pct } => {
                format!("io pressure {pct:.1}% below {t}: at the ceiling, {l} KiB/s")
            }
        }
    }
}

/// The next limit. `current`: the limit held now (the lease's), `None` for a check without
/// one yet; `since_change_s`: seconds since it was last changed (`None`: unknown, counts as
/// long ago); `pressure_pct`: the band's line's `avg10`, percent, or why there is none;
/// `fixed`: the limit without pressure (the config's `check_max`, else the ceiling).
/// The result is always within `floor..=ceiling` unless fixed.
pub fn decide(
    t: &Tuning,
    current: Option<u64>,
    since_change_s: Option<u64>,
    pressure_pct: Result<f64, String>,
    fixed: u64,
) -> Decision {
    let pct = match pressure_pct {
        Ok(p) => p,
        Err(reason) => {
            return Decision {
                limit_kib_s: fixed.max(1),
                why: Why::Fixed { reason },
            }
        }
    };
    let (floor, ceiling) = (
        t.floor_kib_s.max(1),
        t.ceiling_kib_s.max(t.floor_kib_s).max(1),
    );
    let pm = pct * 10.0;
    let (low, high) = (
        f64::from(t.target.low_permille),
        f64::from(t.target.high_permille),
    );
    let Some(cur) = current else {
        let limit = if pm > high {
            floor
        } else if pm < low {
            ceiling
        } else {
            (ceiling / 4).clamp(floor, ceiling)
        };
        return Decision {
            limit_kib_s: limit,
            why: Why::Start { pct },
        };
    };
    let cur = cur.clamp(floor, ceiling);
    let waited = since_change_s.unwrap_or(u64::MAX);
    let (limit, why) = if pm > high {
        if cur == floor {
            (cur, Why::Floor { pct })
        } else if waited < DOWN_INTERVAL_S {
            (cur, Why::Hold { pct })
        } else {
            let div = if pm > 2.0 * high { 4 } else { 2 };
            ((cur / div).max(floor), Why::Down { pct })
        }
    } else if pm < low {
        if cur == ceiling {
            (cur, Why::Ceiling { pct })
        } else if waited < UP_INTERVAL_S {
            (cur, Why::Hold { pct })
        } else {
            let step = (cur / 4).max(MIN_STEP_KIB_S);
            (cur.saturating_add(step).min(ceiling), Why::Up { pct })
        }
    } else {
        (cur, Why::Hold { pct })
    };
    Decision {
        limit_kib_s: limit,
        why,
    }
}

/// What the throttle decided last for one array's running check: kept in the runtime file
/// `check-throttle.json` (one owner: `check/throttle.rs`), read by `check status`, the D-Bus
/// Array and the metrics. Gone with the check and at reboot (the controller starts afresh).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Note {
    /// The limit held, KiB/s (`md/sync_speed_max` through the `check-<array>` lease).
    pub limit_kib_s: u64,
    /// The last decision's code ([`Why::code`]).
    pub decision: String,
    /// Why, in words ([`Decision::explain`]).
    pub why: String,
    /// `full avg10` when read, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_avg10: Option<f64>,
    /// `some avg10` when read, percent (information only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub some_avg10: Option<f64>,
    /// When the limit last changed, Unix seconds.
    pub changed_s: u64,
    /// Why the limit did not take effect, when it did not ([`confirm`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_applied: Option<String>,
    /// Decisions that changed the limit, by code (`down`, `up`, `start`, `fixed`).
    #[serde(default)]
    pub decisions: BTreeMap<String, u64>,
}

/// Why a limit did not take effect ([`confirm`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "code", rename_all = "kebab-case")]
pub enum NotApplied {
    /// `md/sync_speed_max` reads another value (another lease sets it lower, or the write
    /// failed).
    Knob {
        /// What the knob reads, KiB/s.
        reads_kib_s: u64,
    },
    /// `md/sync_speed` stays well above the limit: md lets a sync run up to `sync_speed_min`
    /// whatever the max.
    Speed {
        /// `md/sync_speed`, KiB/s.
        speed_kib_s: u64,
        /// `md/sync_speed_min` where known, KiB/s.
        min_kib_s: Option<u64>,
    },
}

impl fmt::Display for NotApplied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotApplied::Knob { reads_kib_s } => write!(
                f,
                "md/sync_speed_max reads {reads_kib_s} KiB/s (another lease, or the write failed)"
            ),
            NotApplied::Speed {
                speed_kib_s,
                min_kib_s,
            } => {
                write!(f, "md/sync_speed is {speed_kib_s} KiB/s, above the limit")?;
                match min_kib_s {
                    Some(m) => write!(f, " (md/sync_speed_min is {m} KiB/s)"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// Reads back a limit set `since_change_s` ago: the knob must read `limit`, and once
/// [`SETTLE_S`] have passed, `sync_speed` must not exceed the limit by half (and 1024 KiB/s).
/// `None`: it took effect (or cannot be judged yet).
pub fn confirm(
    limit_kib_s: u64,
    knob_kib_s: Option<u64>,
    speed_kib_s: Option<u64>,
    min_kib_s: Option<u64>,
    since_change_s: u64,
) -> Option<NotApplied> {
    if let Some(k) = knob_kib_s.filter(|&k| k != limit_kib_s) {
        return Some(NotApplied::Knob { reads_kib_s: k });
    }
    let speed = speed_kib_s?;
    let slack = (limit_kib_s / 2).max(1024);
    (since_change_s >= SETTLE_S && speed > limit_kib_s.saturating_add(slack)).then_some(
        NotApplied::Speed {
            speed_kib_s: speed,
            min_kib_s,
        },
    )
}

/// The hook for `md/sync_io_depth` (kernels that have it): the depth to write with `limit`, or
/// `None` to leave the knob alone. Not driven yet: md's default depth stays.
pub fn io_depth_for(_limit_kib_s: u64, _t: &Tuning) -> Option<u32> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tuning() -> Tuning {
        Tuning {
            target: "full 5%..10%".parse().unwrap(),
            floor_kib_s: 1_000,
            ceiling_kib_s: 200_000,
        }
    }

    #[test]
    fn target_forms() {
        let t: Target = "full 5%..10%".parse().unwrap();
        assert_eq!(
            (t.stall, t.low_permille, t.high_permille),
            (Stall::Full, 50, 100)
        );
        assert_eq!(t.to_string(), "full 5%..10%");
        let t: Target = "some 2.5%..5%".parse().unwrap();
        assert_eq!((t.stall, t.low_permille), (Stall::Some, 25));
        assert_eq!("3%..4%".parse::<Target>().unwrap().stall, Stall::Full);
        for bad in [
            "",
            "full",
            "full 5..10",
            "full 10%..5%",
            "full 5%..101%",
            "cpu 1%..2%",
            "full -1%..2%",
        ] {
            assert!(bad.parse::<Target>().is_err(), "{bad}");
        }
    }

    #[test]
    fn steps_down_fast_and_climbs_slowly() {
        let t = tuning();
        // Busy machine: 200000 → 50000 (above twice the band) at once.
        let d = decide(&t, Some(200_000), None, Ok(25.0), 0);
        assert_eq!((d.limit_kib_s, d.why.code()), (50_000, "down"));
        // Just above the band: half.
        let d = decide(&t, Some(50_000), Some(5), Ok(12.0), 0);
        assert_eq!(d.limit_kib_s, 25_000);
        // Too soon after the last step: hold.
        let d = decide(&t, Some(50_000), Some(2), Ok(12.0), 0);
        assert_eq!((d.limit_kib_s, d.why.code()), (50_000, "hold"));
        // Quiet: a quarter up, after 10 s only.
        assert_eq!(
            decide(&t, Some(40_000), Some(9), Ok(0.0), 0).why.code(),
            "hold"
        );
        let d = decide(&t, Some(40_000), Some(10), Ok(0.0), 0);
        assert_eq!((d.limit_kib_s, d.why.code()), (50_000, "up"));
        // Inside the band: hold.
        assert_eq!(
            decide(&t, Some(40_000), None, Ok(7.0), 0).why.code(),
            "hold"
        );
        // Bounds.
        assert_eq!(
            decide(&t, Some(1_000), None, Ok(50.0), 0).why.code(),
            "floor"
        );
        assert_eq!(
            decide(&t, Some(200_000), None, Ok(0.0), 0).why.code(),
            "ceiling"
        );
        // From the floor the step is at least MIN_STEP_KIB_S.
        assert_eq!(decide(&t, Some(1_000), None, Ok(0.0), 0).limit_kib_s, 1_256);
        // How long from the floor to the ceiling in quiet, and back down under load.
        let (mut l, mut ups) = (1_000, 0);
        while l < 200_000 {
            l = decide(&t, Some(l), None, Ok(0.0), 0).limit_kib_s;
            ups += 1;
        }
        let (mut downs, mut l2) = (0, 200_000);
        while l2 > 1_000 {
            l2 = decide(&t, Some(l2), None, Ok(30.0), 0).limit_kib_s;
            downs += 1;
        }
        assert_eq!(
            (ups, downs),
            (24, 4),
            "up {ups} steps of 10 s, down {downs} of 5 s"
        );
    }

    #[test]
    fn start_and_fixed() {
        let t = tuning();
        assert_eq!(decide(&t, None, None, Ok(0.0), 0).limit_kib_s, 200_000);
        assert_eq!(decide(&t, None, None, Ok(20.0), 0).limit_kib_s, 1_000);
        assert_eq!(decide(&t, None, None, Ok(7.0), 0).limit_kib_s, 50_000);
        let d = decide(
            &t,
            Some(5),
            None,
            Err("no /proc/pressure/io".into()),
            30_000,
        );
        assert_eq!(d.limit_kib_s, 30_000);
        assert_eq!(
            d.explain(&t.target),
            "fixed at 30000 KiB/s: no /proc/pressure/io"
        );
        assert_eq!(
            decide(&t, Some(200_000), None, Ok(25.0), 0).explain(&t.target),
            "io pressure 25.0% above full 5%..10%: down to 50000 KiB/s"
        );
    }

    #[test]
    fn readback_names_what_did_not_take() {
        assert_eq!(confirm(5_000, Some(5_000), Some(5_200), None, 40), None);
        assert_eq!(
            confirm(5_000, Some(9_000), None, None, 0),
            Some(NotApplied::Knob { reads_kib_s: 9_000 })
        );
        // md runs at sync_speed_min whatever the max.
        let n = confirm(5_000, Some(5_000), Some(50_000), Some(50_000), 40).unwrap();
        assert_eq!(
            n.to_string(),
            "md/sync_speed is 50000 KiB/s, above the limit (md/sync_speed_min is 50000 KiB/s)"
        );
        assert_eq!(
            confirm(5_000, Some(5_000), Some(50_000), None, 10),
            None,
            "not settled"
        );
    }

    proptest! {
        #[test]
        fn limits_stay_in_bounds_and_move_the_right_way(
            floor in 1u64..100_000,
            span in 0u64..10_000_000,
            cur in proptest::option::of(0u64..u64::MAX),
            since in proptest::option::of(0u64..100),
            pct in 0.0f64..100.0,
            lo in 0u32..1000,
            width in 0u32..1000,
        ) {
            let t = Tuning {
                target: Target { stall: Stall::Full, low_permille: lo, high_permille: (lo + width).min(1000) },
                floor_kib_s: floor,
                ceiling_kib_s: floor + span,
            };
            let d = decide(&t, cur, since, Ok(pct), 0);
            prop_assert!(d.limit_kib_s >= floor && d.limit_kib_s <= floor + span);
            if let Some(c) = cur.map(|c| c.clamp(floor, floor + span)) {
                let pm = pct * 10.0;
                if pm > f64::from(t.target.high_permille) {
                    prop_assert!(d.limit_kib_s <= c);
                    prop_assert!(d.limit_kib_s == c || d.limit_kib_s <= (c / 2).max(floor));
                }
                if pm < f64::from(t.target.low_permille) {
                    prop_assert!(d.limit_kib_s >= c);
                    prop_assert!(d.limit_kib_s <= c + (c / 4).max(MIN_STEP_KIB_S));
                }
            }
        }
    }
}
