//! The pressure-driven throttle of checks: a pure controller from the kernel's io pressure
//! (`/proc/pressure/io`, read by [`crate::sysfs::pressure`]) to the check's `md/sync_speed_max`,
//! KiB/s, and, at the floor, its `md/sync_io_depth`. No I/O here; `check/throttle.rs` reads the
//! inputs and writes the limits through the `check-<array>` lease.
//!
//! The input ([`sample`]) is the pressure over the interval since the throttle's previous look:
//! the growth of the band's line's `total` stall counter (microseconds) over the wall time
//! between the two reads, percent. It reacts within one look (about a second while a sync
//! runs), where the kernel's `avg10` is a 10-second average that peaks as a burst of I/O ends.
//! With no usable previous reading (the first look, a counter that went backwards, a clock
//! step, a long gap) the input is the line's `avg10`, and the decision says so.
//!
//! The rule ([`decide`]; AIMD-like, as TCP and the kernel's writeback throttle step):
//! - pressure above the target band: the limit drops at this very look, to the floor above
//!   twice the band's top, else to half, never below the floor;
//! - below the band for [`QUIET_LOOKS`] looks in a row: it doubles at each look (at least
//!   [`MIN_STEP_KIB_S`] more), never above the ceiling. Climbing is slower than falling: it
//!   waits for a quiet look first, and needs 9 looks from md's floor to its ceiling
//!   (1000 → 200000 KiB/s), where falling takes one;
//! - inside the band: it holds.
//!
//! At the floor the throttle also asks for [`FLOOR_IO_DEPTH`] requests in flight
//! (`md/sync_io_depth`, Linux 6.16+; [`io_depth_for`]) and gives md's depth back as it climbs
//! off. Without a pressure file the limit is fixed (the config's `check_max`, as before) and
//! the decision says why. md only honours `sync_speed_max` while the sync runs above
//! `sync_speed_min` (drivers/md/md.c `md_do_sync`), so [`confirm`] reads the knob and
//! `sync_speed` back and says when the limit did not take effect.
//!
//! Callers (the check throttle, and any other sync that yields to the machine) hold a
//! [`State`] between looks and call `decide(&tuning, &state, sample, fixed)`; the next state is
//! [`Decision::state`].

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Looks in a row below the band before the limit climbs (the first quiet look holds).
pub const QUIET_LOOKS: u32 = 2;
/// The shortest interval between two readings that is a sample, ms: a look sooner than this
/// after the last (the service looks at events too) decides nothing ([`Reading::TooSoon`]).
pub const MIN_INTERVAL_MS: u64 = 500;
/// The longest interval that is a sample, ms: after a longer gap (the service stopped, a clock
/// step forward) the interval's pressure says little about now, and `avg10` is used.
pub const MAX_INTERVAL_MS: u64 = 60_000;
/// How long after a change md's `sync_speed` (averaged over md's last marks, up to ~30 s) is
/// compared with the limit, seconds.
pub const SETTLE_S: u64 = 30;
/// The least step up, KiB/s, so that a limit near a tiny floor climbs at all.
pub const MIN_STEP_KIB_S: u64 = 256;
/// `md/sync_io_depth` asked for while the limit is at the floor: one request in flight.
pub const FLOOR_IO_DEPTH: u64 = 1;
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

/// A reading of the stall counters at a wall time: the base of the next look's interval,
/// kept in the [`Note`] between looks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mark {
    /// `some total` of `/proc/pressure/io`, microseconds.
    pub some_total_us: u64,
    /// `full total`, microseconds.
    pub full_total_us: u64,
    /// When it was read, Unix milliseconds (wall time: the crate has no monotonic clock that
    /// survives a restart of the service; a step of the clock falls back to `avg10`).
    pub at_ms: u64,
}

impl Mark {
    fn total_us(&self, stall: Stall) -> u64 {
        match stall {
            Stall::Some => self.some_total_us,
            Stall::Full => self.full_total_us,
        }
    }
}

/// Why a decision used `avg10` instead of the interval's pressure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fallback {
    /// No previous reading: the check's first look (or the first since the service started).
    FirstLook,
    /// The stall counter read less than last time (another boot's note, a kernel reset).
    CounterBack,
    /// The wall clock read earlier than last time (a clock step).
    ClockBack,
    /// More than [`MAX_INTERVAL_MS`] since the last reading.
    LongGap,
}

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Fallback::FirstLook => "first look",
            Fallback::CounterBack => "the stall counter went back",
            Fallback::ClockBack => "the clock went back",
            Fallback::LongGap => "long since the last look",
        })
    }
}

/// Where a sample's pressure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "source", rename_all = "kebab-case")]
pub enum Signal {
    /// The interval since the previous look: the `total` counter's growth over `ms`
    /// milliseconds of wall time.
    Interval {
        /// The interval, ms.
        ms: u64,
    },
    /// The line's `avg10` (the kernel's 10-second average), and why not the interval.
    Avg10 {
        /// Why.
        fallback: Fallback,
    },
}

impl Signal {
    /// `interval` or `avg10`: the [`Note`]'s `source`.
    pub fn source(&self) -> &'static str {
        match self {
            Signal::Interval { .. } => "interval",
            Signal::Avg10 { .. } => "avg10",
        }
    }

    /// The interval, ms, for an interval's sample.
    pub fn interval_ms(&self) -> Option<u64> {
        match self {
            Signal::Interval { ms } => Some(*ms),
            Signal::Avg10 { .. } => None,
        }
    }
}

impl fmt::Display for Signal {
    /// `over 1.0 s` or `avg10, first look`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Signal::Interval { ms } => write!(f, "over {:.1} s", *ms as f64 / 1000.0),
            Signal::Avg10 { fallback } => write!(f, "avg10, {fallback}"),
        }
    }
}

/// The controller's input: the band's line's pressure, percent of wall time (0–100), and
/// where it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Sample {
    /// Pressure, percent.
    pub pct: f64,
    /// Its source.
    pub signal: Signal,
}

/// What one look at the pressure gives ([`sample`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reading {
    /// A sample to decide on.
    Sample(Sample),
    /// Less than [`MIN_INTERVAL_MS`] since the last reading: no decision; the last mark stays
    /// the base of the next interval.
    TooSoon,
}

/// The pressure of `stall`'s line between the reading `prev` (the previous look's, `None` at
/// the first) and `now`: the `total` counter's growth, microseconds, over the wall time
/// between them, percent, clamped to 0–100. Falls back to `avg10_pct` (the line's `avg10`
/// read with `now`) without a previous reading, when the counter or the clock went back, or
/// after more than [`MAX_INTERVAL_MS`]. Never panics (saturating arithmetic).
pub fn sample(stall: Stall, prev: Option<&Mark>, now: &Mark, avg10_pct: f64) -> Reading {
    let fallback = |fallback| {
        Reading::Sample(Sample {
            pct: if avg10_pct.is_finite() {
                avg10_pct.clamp(0.0, 100.0)
            } else {
                0.0
            },
            signal: Signal::Avg10 { fallback },
        })
    };
    let Some(prev) = prev else {
        return fallback(Fallback::FirstLook);
    };
    let (p, n) = (prev.total_us(stall), now.total_us(stall));
    if now.at_ms < prev.at_ms {
        return fallback(Fallback::ClockBack);
    }
    if n < p {
        return fallback(Fallback::CounterBack);
    }
    let ms = now.at_ms - prev.at_ms;
    if ms < MIN_INTERVAL_MS {
        return Reading::TooSoon;
    }
    if ms > MAX_INTERVAL_MS {
        return fallback(Fallback::LongGap);
    }
    // µs stalled per ms of wall time / 10 = percent.
    let pct = ((n - p) as f64 / ms as f64 / 10.0).clamp(0.0, 100.0);
    Reading::Sample(Sample {
        pct,
        signal: Signal::Interval { ms },
    })
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
    /// Below the band for [`QUIET_LOOKS`] looks: climbed.
    Up {
        /// Pressure, percent.
        pct: f64,
    },
    /// Inside the band (or below it for fewer than [`QUIET_LOOKS`] looks): held.
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
    /// The pressure the decision was made on, percent; `None` for a fixed limit.
    pub fn pct(&self) -> Option<f64> {
        match self {
            Why::Fixed { .. } => None,
            Why::Start { pct }
            | Why::Down { pct }
            | Why::Up { pct }
            | Why::Hold { pct }
            | Why::Floor { pct }
            | Why::Ceiling { pct } => Some(*pct),
        }
    }

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

/// What the controller keeps between two looks at one sync (for a check: in its [`Note`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct State {
    /// The limit held now, KiB/s (the lease's); `None` before the first decision.
    pub limit_kib_s: Option<u64>,
    /// Looks in a row with the pressure below the band, up to and including the last.
    pub quiet_looks: u32,
}

/// One decision: the limit to hold now, KiB/s, the io depth to ask for, and why
/// ([`Decision::explain`] in words).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    /// `md/sync_speed_max` to hold, KiB/s.
    pub limit_kib_s: u64,
    /// `md/sync_io_depth` to ask for (requests in flight), `None`: md's own ([`io_depth_for`]).
    pub io_depth: Option<u64>,
    /// Why.
    pub why: Why,
    /// Where the pressure came from; `None` for a fixed limit.
    pub signal: Option<Signal>,
    /// Looks in a row below the band, this one included (the next [`State`]'s).
    pub quiet_looks: u32,
}

impl Decision {
    /// The state to pass to the next [`decide`].
    pub fn state(&self) -> State {
        State {
            limit_kib_s: Some(self.limit_kib_s),
            quiet_looks: self.quiet_looks,
        }
    }

    /// One line for people: `io pressure 12.5% over 1.0 s above full 5%..10%: down to 50000
    /// KiB/s`, with `, io depth 1` when the depth is asked for.
    pub fn explain(&self, t: &Target) -> String {
        let l = self.limit_kib_s;
        let src = match &self.signal {
            Some(s @ Signal::Interval { .. }) => format!(" {s}"),
            Some(s) => format!(" ({s})"),
            None => String::new(),
        };
        let mut line = match &self.why {
            Why::Fixed { reason } => format!("fixed at {l} KiB/s: {reason}"),
            Why::Start { pct } => {
                format!("io pressure {pct:.1}%{src}, target {t}: starts at {l} KiB/s")
            }
            Why::Down { pct } => format!("io pressure {pct:.1}%{src} above {t}: down to {l} KiB/s"),
            Why::Up { pct } => format!("io pressure {pct:.1}%{src} below {t}: up to {l} KiB/s"),
            Why::Hold { pct } => format!("io pressure {pct:.1}%{src}, target {t}: holds {l} KiB/s"),
            Why::Floor { pct } => {
                format!("io pressure {pct:.1}%{src} above {t}: at the floor, {l} KiB/s")
            }
            Why::Ceiling { pct } => {
                format!("io pressure {pct:.1}%{src} below {t}: at the ceiling, {l} KiB/s")
            }
        };
        if let Some(d) = self.io_depth {
            line.push_str(&format!(", io depth {d}"));
        }
        line
    }
}

/// The next decision for one sync under the throttle, from the settings `t`, the state after
/// the previous look `prev` ([`State::default`] at the first) and this look's `sample` (or
/// why there is no pressure to read). `fixed`: the limit without pressure (the config's
/// `check_max`, else the ceiling). The limit is always within `floor..=ceiling` unless fixed;
/// pure, never panics. See the module's rule; the next state is [`Decision::state`].
pub fn decide(t: &Tuning, prev: &State, sample: Result<Sample, String>, fixed: u64) -> Decision {
    let s = match sample {
        Ok(s) => s,
        Err(reason) => {
            return Decision {
                limit_kib_s: fixed.max(1),
                io_depth: None,
                why: Why::Fixed { reason },
                signal: None,
                quiet_looks: 0,
            }
        }
    };
    let (floor, ceiling) = (
        t.floor_kib_s.max(1),
        t.ceiling_kib_s.max(t.floor_kib_s).max(1),
    );
    let pct = s.pct;
    let pm = pct * 10.0;
    let (low, high) = (
        f64::from(t.target.low_permille),
        f64::from(t.target.high_permille),
    );
    let quiet = if pm < low {
        prev.quiet_looks.saturating_add(1)
    } else {
        0
    };
    let (limit, why) = match prev.limit_kib_s.map(|c| c.clamp(floor, ceiling)) {
        None if pm > high => (floor, Why::Start { pct }),
        None if pm < low => (ceiling, Why::Start { pct }),
        None => ((ceiling / 4).clamp(floor, ceiling), Why::Start { pct }),
        Some(cur) if pm > high && cur == floor => (cur, Why::Floor { pct }),
        Some(_) if pm > 2.0 * high => (floor, Why::Down { pct }),
        Some(cur) if pm > high => ((cur / 2).max(floor), Why::Down { pct }),
        Some(cur) if pm < low && cur == ceiling => (cur, Why::Ceiling { pct }),
        Some(cur) if pm < low && quiet >= QUIET_LOOKS => {
            let up = cur
                .saturating_mul(2)
                .max(cur.saturating_add(MIN_STEP_KIB_S));
            (up.min(ceiling), Why::Up { pct })
        }
        Some(cur) => (cur, Why::Hold { pct }),
    };
    Decision {
        limit_kib_s: limit,
        io_depth: io_depth_for(limit, t),
        why,
        signal: Some(s.signal),
        quiet_looks: quiet,
    }
}

/// What the throttle decided last for one array's running check: kept in the runtime file
/// `check-throttle.json` (one owner: `check/throttle.rs`, replaced atomically), read by `check
/// status`, the D-Bus Array and the metrics. Gone with the check and at reboot (the controller
/// starts afresh). Fields added later carry `#[serde(default)]`, so older notes still load.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Note {
    /// The limit held, KiB/s (`md/sync_speed_max` through the `check-<array>` lease).
    pub limit_kib_s: u64,
    /// The last decision's code ([`Why::code`]).
    pub decision: String,
    /// Why, in words ([`Decision::explain`]).
    pub why: String,
    /// The pressure the last decision used, percent (the interval's, or `avg10` where
    /// `source` says so); absent for a fixed limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pressure_pct: Option<f64>,
    /// Where it came from: `interval` (the `total` counter over the last look's interval) or
    /// `avg10` (first look, counter or clock went back, long gap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The interval the pressure was measured over, ms (`source` `interval`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_ms: Option<u64>,
    /// `full avg10` when read, percent (information).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_avg10: Option<f64>,
    /// `some avg10` when read, percent (information).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub some_avg10: Option<f64>,
    /// `md/sync_io_depth` asked for through the lease (at the floor); absent: md's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_depth: Option<u64>,
    /// When the limit last changed, Unix seconds.
    pub changed_s: u64,
    /// Why the limit did not take effect, when it did not ([`confirm`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_applied: Option<String>,
    /// Decisions that changed the limit, by code (`down`, `up`, `start`, `fixed`).
    #[serde(default)]
    pub decisions: BTreeMap<String, u64>,
    /// The stall counters at the last look: the base of the next interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark: Option<Mark>,
    /// Looks in a row below the band ([`State::quiet_looks`]).
    #[serde(default)]
    pub quiet_looks: u32,
}

impl Note {
    /// The controller's state after this note's decision.
    pub fn state(&self) -> State {
        State {
            limit_kib_s: Some(self.limit_kib_s),
            quiet_looks: self.quiet_looks,
        }
    }
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

/// `md/sync_io_depth` to ask for with `limit_kib_s` (Linux 6.16+; requests md keeps in flight
/// while the array has other I/O, kernel default 32): [`FLOOR_IO_DEPTH`] at the floor of `t`,
/// where the pressure is still above the band at the least speed, else `None` (md's own depth,
/// the lease holds none). On a kernel without the knob the lease writes nothing.
pub fn io_depth_for(limit_kib_s: u64, t: &Tuning) -> Option<u64> {
    (limit_kib_s <= t.floor_kib_s.max(1)).then_some(FLOOR_IO_DEPTH)
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

    fn iv(pct: f64) -> Result<Sample, String> {
        Ok(Sample {
            pct,
            signal: Signal::Interval { ms: 1_000 },
        })
    }

    fn at(limit: u64, quiet_looks: u32) -> State {
        State {
            limit_kib_s: Some(limit),
            quiet_looks,
        }
    }

    #[test]
    fn steps_down_fast_and_climbs_slowly() {
        let t = tuning();
        // Busy machine, above twice the band: to the floor at once.
        let d = decide(&t, &at(200_000, 0), iv(25.0), 0);
        assert_eq!((d.limit_kib_s, d.why.code()), (1_000, "down"));
        assert_eq!(
            d.io_depth,
            Some(FLOOR_IO_DEPTH),
            "the floor asks for io depth 1"
        );
        // Just above the band: half, at every look (no spacing).
        let d = decide(&t, &at(50_000, 0), iv(12.0), 0);
        assert_eq!((d.limit_kib_s, d.io_depth), (25_000, None));
        let d = decide(&t, &d.state(), iv(12.0), 0);
        assert_eq!(d.limit_kib_s, 12_500);
        // Quiet: the first quiet look holds, the second doubles, and so on at each look.
        let d = decide(&t, &at(40_000, 0), iv(0.0), 0);
        assert_eq!(
            (d.limit_kib_s, d.why.code(), d.quiet_looks),
            (40_000, "hold", 1)
        );
        let d = decide(&t, &d.state(), iv(0.0), 0);
        assert_eq!(
            (d.limit_kib_s, d.why.code(), d.quiet_looks),
            (80_000, "up", 2)
        );
        let d = decide(&t, &d.state(), iv(0.0), 0);
        assert_eq!((d.limit_kib_s, d.why.code()), (160_000, "up"));
        // A look inside the band resets the quiet count: hold.
        let d = decide(&t, &d.state(), iv(7.0), 0);
        assert_eq!(
            (d.limit_kib_s, d.why.code(), d.quiet_looks),
            (160_000, "hold", 0)
        );
        assert_eq!(decide(&t, &d.state(), iv(0.0), 0).why.code(), "hold");
        // Bounds.
        assert_eq!(decide(&t, &at(1_000, 0), iv(50.0), 0).why.code(), "floor");
        assert_eq!(
            decide(&t, &at(200_000, 5), iv(0.0), 0).why.code(),
            "ceiling"
        );
        // From a tiny floor the step is at least MIN_STEP_KIB_S.
        let tiny = Tuning {
            floor_kib_s: 10,
            ..t
        };
        assert_eq!(decide(&tiny, &at(10, 1), iv(0.0), 0).limit_kib_s, 266);
    }

    #[test]
    fn a_burst_drops_to_the_floor_within_one_look() {
        let t = tuning();
        for cur in [1_001, 5_000, 50_000, 200_000] {
            let mut st = at(cur, 7);
            for look in 0..10 {
                let d = decide(&t, &st, iv(30.0), 0);
                assert_eq!(d.limit_kib_s, 1_000, "from {cur}, look {look}");
                assert_eq!(d.io_depth, Some(1));
                assert_eq!(d.why.code(), if look == 0 { "down" } else { "floor" });
                st = d.state();
            }
        }
        // Above the band but below twice its top: halves at each look, the floor in 8.
        let (mut st, mut looks) = (at(200_000, 0), 0);
        while st.limit_kib_s != Some(1_000) {
            st = decide(&t, &st, iv(15.0), 0).state();
            looks += 1;
        }
        assert_eq!(looks, 8);
    }

    #[test]
    fn after_a_burst_the_limit_reaches_the_ceiling_within_nine_looks() {
        // Looks are a second apart while a sync runs: the ceiling 9 s after the burst, well
        // inside a 25-second gap; the fall took one look.
        let t = tuning();
        let mut st = decide(&t, &at(200_000, 0), iv(30.0), 0).state();
        assert_eq!(st.limit_kib_s, Some(1_000));
        let mut limits = Vec::new();
        while st.limit_kib_s != Some(200_000) {
            let d = decide(&t, &st, iv(0.0), 0);
            assert!(d.limit_kib_s > 1_000 || d.io_depth == Some(1));
            limits.push(d.limit_kib_s);
            st = d.state();
        }
        assert_eq!(
            limits,
            [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000, 200_000]
        );
        let d = decide(&t, &at(1_000, 1), iv(0.0), 0);
        assert_eq!(d.io_depth, None, "off the floor: md's depth back");
    }

    #[test]
    fn the_interval_sample_and_its_fallbacks() {
        let m = |full: u64, at_ms: u64| Mark {
            some_total_us: full.saturating_mul(2),
            full_total_us: full,
            at_ms,
        };
        let pct = |r: Reading| match r {
            Reading::Sample(s) => (s.pct, s.signal),
            Reading::TooSoon => panic!("too soon"),
        };
        let iv = |ms| Signal::Interval { ms };
        let back = |fallback| Signal::Avg10 { fallback };
        // 50 ms stalled in 1 s: 5 %; the some line's own counter: 10 %.
        let (p0, p1) = (m(1_000_000, 10_000), m(1_050_000, 11_000));
        assert_eq!(
            pct(sample(Stall::Full, Some(&p0), &p1, 3.0)),
            (5.0, iv(1_000))
        );
        assert_eq!(
            pct(sample(Stall::Some, Some(&p0), &p1, 3.0)),
            (10.0, iv(1_000))
        );
        // More than the wall time (rounding of the two clocks): 100 %.
        let p2 = m(3_000_000, 11_000);
        assert_eq!(pct(sample(Stall::Full, Some(&p0), &p2, 3.0)).0, 100.0);
        // A counter reset (another boot's mark): avg10, and the decision says so.
        let reset = m(10, 11_000);
        let (p, sig) = pct(sample(Stall::Full, Some(&p0), &reset, 3.0));
        assert_eq!((p, sig), (3.0, back(Fallback::CounterBack)));
        let d = decide(
            &tuning(),
            &at(50_000, 0),
            Ok(Sample {
                pct: p,
                signal: sig,
            }),
            0,
        );
        assert_eq!(
            d.explain(&tuning().target),
            "io pressure 3.0% (avg10, the stall counter went back), target full 5%..10%: holds 50000 KiB/s"
        );
        assert_eq!(
            pct(sample(Stall::Full, None, &p1, 3.0)).1,
            back(Fallback::FirstLook)
        );
        assert_eq!(
            pct(sample(Stall::Full, Some(&p1), &m(1_050_000, 10_000), 3.0)).1,
            back(Fallback::ClockBack)
        );
        assert_eq!(
            pct(sample(
                Stall::Full,
                Some(&p0),
                &m(1_050_000, 10_000 + MAX_INTERVAL_MS + 1),
                3.0
            ))
            .1,
            back(Fallback::LongGap)
        );
        assert_eq!(
            sample(Stall::Full, Some(&p0), &m(1_000_001, 10_400), 3.0),
            Reading::TooSoon
        );
        // Extremes never panic and stay in 0..=100.
        let (p, _) = pct(sample(
            Stall::Full,
            Some(&m(0, 0)),
            &m(u64::MAX, 500),
            f64::NAN,
        ));
        assert_eq!(p, 100.0);
        assert_eq!(pct(sample(Stall::Full, None, &m(0, 0), f64::NAN)).0, 0.0);
    }

    #[test]
    fn start_and_fixed() {
        let t = tuning();
        let first = State::default();
        assert_eq!(decide(&t, &first, iv(0.0), 0).limit_kib_s, 200_000);
        assert_eq!(decide(&t, &first, iv(20.0), 0).limit_kib_s, 1_000);
        assert_eq!(decide(&t, &first, iv(7.0), 0).limit_kib_s, 50_000);
        let d = decide(&t, &at(5, 3), Err("no /proc/pressure/io".into()), 30_000);
        assert_eq!(
            (d.limit_kib_s, d.io_depth, d.quiet_looks),
            (30_000, None, 0)
        );
        assert_eq!(
            d.explain(&t.target),
            "fixed at 30000 KiB/s: no /proc/pressure/io"
        );
        assert_eq!(
            decide(&t, &at(200_000, 0), iv(15.0), 0).explain(&t.target),
            "io pressure 15.0% over 1.0 s above full 5%..10%: down to 100000 KiB/s"
        );
        let first_look = Ok(Sample {
            pct: 30.0,
            signal: Signal::Avg10 {
                fallback: Fallback::FirstLook,
            },
        });
        assert_eq!(
            decide(&t, &first, first_look, 0).explain(&t.target),
            "io pressure 30.0% (avg10, first look), target full 5%..10%: starts at 1000 KiB/s, io depth 1"
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
            quiet in 0u32..5,
            pct in 0.0f64..100.0,
            lo in 0u32..1000,
            width in 0u32..1000,
        ) {
            let t = Tuning {
                target: Target { stall: Stall::Full, low_permille: lo, high_permille: (lo + width).min(1000) },
                floor_kib_s: floor,
                ceiling_kib_s: floor + span,
            };
            let prev = State { limit_kib_s: cur, quiet_looks: quiet };
            let d = decide(&t, &prev, iv(pct), 0);
            prop_assert!(d.limit_kib_s >= floor && d.limit_kib_s <= floor + span);
            prop_assert_eq!(d.io_depth.is_some(), d.limit_kib_s == floor);
            if let Some(c) = cur.map(|c| c.clamp(floor, floor + span)) {
                let pm = pct * 10.0;
                if pm > f64::from(t.target.high_permille) {
                    // Down at this look: to half or below (the floor), or already there.
                    prop_assert!(d.limit_kib_s == floor || d.limit_kib_s <= (c / 2).max(floor));
                    prop_assert_eq!(d.quiet_looks, 0);
                }
                if pm < f64::from(t.target.low_permille) {
                    // Up, but never more than doubling, and only after a quiet look.
                    prop_assert!(d.limit_kib_s >= c);
                    prop_assert!(d.limit_kib_s <= c.saturating_mul(2).max(c + MIN_STEP_KIB_S));
                    prop_assert!(quiet + 1 >= QUIET_LOOKS || d.limit_kib_s == c);
                }
                if pm >= f64::from(t.target.low_permille) && pm <= f64::from(t.target.high_permille) {
                    prop_assert_eq!(d.limit_kib_s, c);
                }
            }
        }
    }
}
