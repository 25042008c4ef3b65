//! The check (scrub) schedule: calendar expressions, windows and which arrays to check now.
//! Pure: the caller passes the time, the arrays and a seed; nothing here reads a clock or a file.
//!
//! **Who schedules: the service.** `mdpilot serve` evaluates [`Schedule::plan`] on a timer and
//! starts, pauses and resumes checks itself, rather than shipping systemd timer units that call
//! `mdpilot check` (mdadm's `mdcheck_start.timer`/`mdcheck_continue.timer`). The service already
//! holds what a check needs across a window: the throttle lease on `sync_speed_max`, the saved
//! position per array UUID, the array list with member disks (for the shared-disk rule) and the
//! events; a timer would only add a second, racing owner of the same kernel files. The
//! schedule's next start is shown on D-Bus so nothing is hidden from `systemctl list-timers`
//! users.
//!
//! **Calendar**: the subset of systemd.time(7) `OnCalendar` that scrubs use:
//! `[WEEKDAYS] YEAR-MONTH-DAY HOUR:MINUTE[:SECOND]` where each field is `*`, a number, a range
//! `A..B`, a repetition `A/STEP` or `*/STEP`, or a comma list of those; weekdays are
//! `Mon..Sun` names (`Sat,Sun`, `Mon..Fri`). `daily`, `weekly` (Mon 00:00), `monthly` (day 1)
//! are accepted. The date part may be left out (`01:00` = every day). Times are wall-clock at a
//! fixed UTC offset given by the caller (the offset in force; a DST change moves a window by
//! the change, systemd does the same only for timers not yet elapsed).
//! Example, mdcheck's: start `Sun *-*-1..7 01:00` (first Sunday), continue `*-*-* 01:00`.
//!
//! **Windows**: each occurrence of `start` opens a cycle; that occurrence and every later
//! occurrence of `continue` (until the next `start`) open a window of `window_s` (default 6 h),
//! all shifted by one randomized delay in `0..random_delay_s`, fixed per machine (from the seed,
//! e.g. `/etc/machine-id`: a fleet spreads, each machine stays predictable, like systemd's
//! `FixedRandomDelay=`). An array is checked once per cycle: a check not finished at a window's
//! end is paused and resumed in the next window.
//!
//! **Selection** ([`Schedule::plan`]): include list (names or UUIDs; empty = all), minus the skip
//! list; arrays younger than `min_age_days` (default 14, as Debian's checkarray) are skipped
//! (unknown creation time: not skipped); at most `max_concurrent` checks at once (default 1);
//! never two arrays sharing a disk at once (md would only queue one as `resync=DELAYED`).
//! Arrays with a saved position go first, then by name.

use std::collections::BTreeSet;

/// Errors parsing a calendar expression or a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The calendar expression is not in the supported subset.
    #[error("calendar {expr:?}: {reason}")]
    Calendar {
        /// The text.
        expr: String,
        /// What is wrong.
        reason: String,
    },
    /// The duration is not `N[s|m|min|h|d]...`.
    #[error("duration {0:?}: expected e.g. 90s, 30min, 6h, 1d, 1h30m")]
    Duration(String),
    /// The duration is longer than [`crate::units::MAX_DURATION_S`].
    #[error("duration {text:?}: {source}")]
    TooLong {
        /// The text.
        text: String,
        /// The bound it exceeds.
        source: crate::units::DurationTooLong,
    },
}

/// Parses a duration as systemd.time(7) spans in short form: `90s`, `30min`/`30m`, `6h`, `1d`,
/// `2w`, combinations `1h30m`, a bare number = seconds. Returns seconds, at most
/// [`crate::units::MAX_DURATION_S`].
///
/// Errors: [`ScheduleError::Duration`] for anything else, including an empty text;
/// [`ScheduleError::TooLong`] above the bound.
pub fn parse_duration(text: &str) -> Result<u64, ScheduleError> {
    let secs = parse_span(text)?;
    crate::units::bounded_duration(secs).map_err(|source| ScheduleError::TooLong {
        text: text.to_string(),
        source,
    })
}

/// [`parse_duration`] without the bound.
fn parse_span(text: &str) -> Result<u64, ScheduleError> {
    let bad = || ScheduleError::Duration(text.to_string());
    let t = text.trim();
    if t.is_empty() {
        return Err(bad());
    }
    if let Ok(n) = t.parse::<u64>() {
        return Ok(n);
    }
    let mut total: u64 = 0;
    let mut rest = t;
    while !rest.is_empty() {
        rest = rest.trim_start();
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest.chars().take_while(char::is_ascii_alphabetic).count();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let mult = match unit {
            "s" | "sec" => 1,
            "m" | "min" => 60,
            "h" | "hr" => 3600,
            "d" | "day" | "days" => 86_400,
            "w" | "week" | "weeks" => 7 * 86_400,
            _ => return Err(bad()),
        };
        total = n
            .checked_mul(mult)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(bad)?;
    }
    Ok(total)
}

/// One field of a calendar expression: the set of values it allows.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Field(Option<BTreeSet<u32>>);

impl Field {
    fn any() -> Self {
        Field(None)
    }

    fn allows(&self, v: u32) -> bool {
        self.0.as_ref().map_or(true, |s| s.contains(&v))
    }

    /// `*`, `N`, `A..B`, `A/S`, `*/S`, lists; values within `lo..=hi`.
    fn parse(text: &str, lo: u32, hi: u32) -> Result<Field, String> {
        if text == "*" {
            return Ok(Field::any());
        }
        let mut set = BTreeSet::new();
        for part in text.split(',') {
            let (base, step) = match part.split_once('/') {
                Some((b, s)) => (
                    b,
                    Some(
                        s.parse::<u32>()
                            .map_err(|_| format!("bad step in {part:?}"))?,
                    ),
                ),
                None => (part, None),
            };
            let num = |s: &str| -> Result<u32, String> {
                let v: u32 = s.parse().map_err(|_| format!("not a number: {s:?}"))?;
                if v < lo || v > hi {
                    return Err(format!("{v} is outside {lo}..{hi}"));
                }
                Ok(v)
            };
            let (a, b) = if base == "*" {
                (lo, hi)
            } else if let Some((a, b)) = base.split_once("..") {
                (num(a)?, num(b)?)
            } else {
                let a = num(base)?;
                (a, if step.is_some() { hi } else { a })
            };
            if a > b {
                return Err(format!("empty range {part:?}"));
            }
            let step = step.unwrap_or(1);
            if step == 0 {
                return Err("step 0".into());
            }
            set.extend((a..=b).step_by(step as usize));
        }
        Ok(Field(Some(set)))
    }
}

const WEEKDAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

/// A parsed calendar expression (see the module doc for the syntax).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Calendar {
    text: String,
    /// 0 = Monday .. 6 = Sunday.
    weekday: Field,
    year: Field,
    month: Field,
    day: Field,
    hour: Field,
    minute: Field,
    second: Field,
}

fn parse_weekdays(text: &str) -> Result<Field, String> {
    let idx = |name: &str| {
        WEEKDAYS
            .iter()
            .position(|w| {
                w.eq_ignore_ascii_case(name) || name.len() > 3 && w.eq_ignore_ascii_case(&name[..3])
            })
            .map(|i| i as u32)
            .ok_or_else(|| format!("unknown weekday {name:?}"))
    };
    let mut set = BTreeSet::new();
    for part in text.split(',') {
        match part.split_once("..") {
            Some((a, b)) => {
                let (a, b) = (idx(a)?, idx(b)?);
                if a > b {
                    return Err(format!("empty weekday range {part:?}"));
                }
                set.extend(a..=b);
            }
            None => {
                set.insert(idx(part)?);
            }
        }
    }
    Ok(Field(Some(set)))
}

impl std::str::FromStr for Calendar {
    type Err = ScheduleError;

    fn from_str(text: &str) -> Result<Calendar, ScheduleError> {
        let err = |reason: String| ScheduleError::Calendar {
            expr: text.to_string(),
            reason,
        };
        let t = text.trim();
        let expanded = match t {
            "daily" => "*-*-* 00:00:00",
            "weekly" => "Mon *-*-* 00:00:00",
            "monthly" => "*-*-01 00:00:00",
            other => other,
        };
        let words: Vec<&str> = expanded.split_whitespace().collect();
        let (wd, date, time) = match words.as_slice() {
            [time] => (None, None, *time),
            [a, time] if a.contains('-') => (None, Some(*a), *time),
            [a, time] => (Some(*a), None, *time),
            [a, d, time] => (Some(*a), Some(*d), *time),
            _ => return Err(err("expected [WEEKDAYS] [Y-M-D] H:M[:S]".into())),
        };
        let weekday = match wd {
            Some(w) => parse_weekdays(w).map_err(err)?,
            None => Field::any(),
        };
        let (year, month, day) = match date {
            None => (Field::any(), Field::any(), Field::any()),
            Some(d) => {
                let p: Vec<&str> = d.split('-').collect();
                let (y, m, dd) = match p.as_slice() {
                    [y, m, dd] => (*y, *m, *dd),
                    [m, dd] => ("*", *m, *dd),
                    _ => return Err(err(format!("bad date {d:?}"))),
                };
                (
                    Field::parse(y, 1970, 9999).map_err(err)?,
                    Field::parse(m, 1, 12).map_err(err)?,
                    Field::parse(dd, 1, 31).map_err(err)?,
                )
            }
        };
        let tp: Vec<&str> = time.split(':').collect();
        let (h, m, s) = match tp.as_slice() {
            [h, m] => (*h, *m, "0"),
            [h, m, s] => (*h, *m, *s),
            _ => return Err(err(format!("bad time {time:?}"))),
        };
        Ok(Calendar {
            text: t.to_string(),
            weekday,
            year,
            month,
            day,
            hour: Field::parse(h, 0, 23).map_err(err)?,
            minute: Field::parse(m, 0, 59).map_err(err)?,
            second: Field::parse(s, 0, 59).map_err(err)?,
        })
    }
}

/// Days since 1970-01-01 → (year, month 1..=12, day 1..=31) (H. Hinnant's `civil_from_days`).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// (year, month, day) → days since 1970-01-01 (H. Hinnant's `days_from_civil`).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// How far [`Calendar::next_after`] looks ahead, in days.
pub const LOOKAHEAD_DAYS: i64 = 4 * 366;

impl Calendar {
    /// The expression as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The first matching instant strictly after `t` (Unix seconds), with wall-clock time at
    /// `utc_offset_s` east of UTC. `None` when nothing matches within [`LOOKAHEAD_DAYS`].
    pub fn next_after(&self, t: i64, utc_offset_s: i64) -> Option<i64> {
        let local = t + utc_offset_s;
        let day0 = local.div_euclid(86_400);
        for day in day0..day0 + LOOKAHEAD_DAYS {
            let (y, m, d) = civil_from_days(day);
            // 1970-01-01 was a Thursday (3 with Monday = 0).
            let wd = (day + 3).rem_euclid(7) as u32;
            if !(self.year.allows(y as u32)
                && self.month.allows(m)
                && self.day.allows(d)
                && self.weekday.allows(wd))
            {
                continue;
            }
            let floor = if day == day0 {
                local.rem_euclid(86_400) + 1
            } else {
                0
            };
            for h in 0..24u32 {
                if !self.hour.allows(h) || i64::from(h) * 3600 + 3599 < floor {
                    continue;
                }
                for mi in 0..60u32 {
                    if !self.minute.allows(mi) {
                        continue;
                    }
                    for s in 0..60u32 {
                        let sec = i64::from(h) * 3600 + i64::from(mi) * 60 + i64::from(s);
                        if sec >= floor && self.second.allows(s) {
                            return Some(day * 86_400 + sec - utc_offset_s);
                        }
                    }
                }
            }
        }
        None
    }

    /// The last matching instant at or before `t`, looking back at most `lookback_s`.
    pub fn last_at_or_before(&self, t: i64, utc_offset_s: i64, lookback_s: i64) -> Option<i64> {
        let mut cur = self.next_after(t - lookback_s - 1, utc_offset_s)?;
        if cur > t {
            return None;
        }
        while let Some(n) = self.next_after(cur, utc_offset_s) {
            if n > t {
                break;
            }
            cur = n;
        }
        Some(cur)
    }
}

/// A recurring band of time: it begins at each instant of `start` and lasts `length_s`
/// (working hours: `Mon..Fri *-*-* 08:00:00` for 10 h). Pure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Band {
    /// When a band begins (wall clock at the offset given to [`Band::contains`]).
    pub start: Calendar,
    /// How long it lasts, seconds (> 0).
    pub length_s: u64,
}

impl Band {
    /// True when `t` (Unix seconds) lies in a band: some start `s <= t` with `t < s + length`.
    pub fn contains(&self, t: i64, utc_offset_s: i64) -> bool {
        let len = i64::try_from(self.length_s).unwrap_or(i64::MAX / 2);
        self.start
            .last_at_or_before(t, utc_offset_s, len)
            .is_some_and(|s| t < s + len)
    }
}

/// The delay in `0..max_s` for a machine, from its seed (e.g. `/etc/machine-id`): FNV-1a 64,
/// stable across versions and builds.
pub fn fixed_delay_s(seed: &str, max_s: u64) -> u64 {
    if max_s == 0 {
        return 0;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in seed.trim().bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h % max_s
}

/// The check schedule, as the config gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// Cycle starts (`Sun *-*-1..7 01:00`).
    pub start: Calendar,
    /// Continuation windows within a cycle (`*-*-* 01:00`); `None`: only the start window.
    pub cont: Option<Calendar>,
    /// Window length in seconds (default 6 h).
    pub window_s: u64,
    /// Upper bound of the randomized start delay in seconds (default 0).
    pub random_delay_s: u64,
    /// Arrays to check (kernel names or UUIDs); empty = all.
    pub include: Vec<String>,
    /// Arrays never to check (names or UUIDs).
    pub skip: Vec<String>,
    /// Skip arrays created less than this many days ago (default 14).
    pub min_age_days: u64,
    /// At most this many checks at once (default 1).
    pub max_concurrent: usize,
}

/// Default window length: 6 hours (mdcheck's).
pub const DEFAULT_WINDOW_S: u64 = 6 * 3600;
/// Default minimum array age in days (Debian's checkarray).
pub const DEFAULT_MIN_AGE_DAYS: u64 = 14;

/// A window in which checks may run, Unix seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// When the cycle this window belongs to started (delay included).
    pub cycle_start: i64,
    /// Window start (delay included).
    pub start: i64,
    /// Window end (exclusive).
    pub end: i64,
}

/// What the scheduler knows of one array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Kernel name (`md0`).
    pub name: String,
    /// Array UUID in mdadm's spelling ([`crate::model::Array::uuid`]), where known.
    pub uuid: Option<String>,
    /// Creation time (Unix seconds), where known.
    pub created_unix_s: Option<i64>,
    /// Whole disks under its members (`sda`, `nvme0n1`): the shared-disk rule compares these.
    pub disks: Vec<String>,
    /// When its last check ran to the end (Unix seconds), where known.
    pub last_completed_s: Option<i64>,
    /// A paused check's saved position exists (it resumes first).
    pub has_position: bool,
    /// A check (scheduled or not) runs on it now.
    pub checking: bool,
    /// Another sync (resync, recovery, reshape) runs on it now: no check can start.
    pub busy: bool,
}

/// Why an array is not started now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// Not in the include list, or in the skip list.
    NotSelected,
    /// Created less than `min_age_days` ago.
    TooYoung,
    /// Its check for this cycle is done.
    DoneThisCycle,
    /// Another sync runs on it.
    Busy,
    /// `max_concurrent` checks run already.
    Concurrency,
    /// It shares the named disk with an array being checked.
    SharesDisk(String),
}

/// What to do now.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// The window in force, if any.
    pub window: Option<Window>,
    /// Arrays to start (or resume) now, in order.
    pub start: Vec<String>,
    /// Arrays checking now that must pause (no window in force).
    pub pause: Vec<String>,
    /// Arrays not started, with the reason.
    pub skipped: Vec<(String, SkipReason)>,
    /// When the next window opens (if none is in force, or after this one).
    pub next_window_start: Option<i64>,
}

impl Schedule {
    /// A schedule with the defaults and the given calendars.
    pub fn new(start: Calendar, cont: Option<Calendar>) -> Schedule {
        Schedule {
            start,
            cont,
            window_s: DEFAULT_WINDOW_S,
            random_delay_s: 0,
            include: Vec::new(),
            skip: Vec::new(),
            min_age_days: DEFAULT_MIN_AGE_DAYS,
            max_concurrent: 1,
        }
    }

    fn lookback(&self) -> i64 {
        // A cycle (first Sunday .. next first Sunday) is at most ~5 weeks, and a window opens at
        // most `window_s + delay` before now.
        (40 * 86_400 + self.window_s + self.random_delay_s) as i64
    }

    /// The window in force at `now` (Unix seconds), with the machine's delay `delay_s`
    /// ([`fixed_delay_s`]) and wall-clock offset.
    pub fn window_at(&self, now: i64, delay_s: u64, utc_offset_s: i64) -> Option<Window> {
        let d = delay_s as i64;
        let cycle = self
            .start
            .last_at_or_before(now - d, utc_offset_s, self.lookback())?
            + d;
        let mut open = cycle;
        if let Some(c) = &self.cont {
            if let Some(o) = c.last_at_or_before(now - d, utc_offset_s, self.lookback()) {
                if o + d > open {
                    open = o + d;
                }
            }
        }
        (now < open + self.window_s as i64).then_some(Window {
            cycle_start: cycle,
            start: open,
            end: open + self.window_s as i64,
        })
    }

    /// The next window start after `now`.
    pub fn next_window_start(&self, now: i64, delay_s: u64, utc_offset_s: i64) -> Option<i64> {
        let d = delay_s as i64;
        let s = self.start.next_after(now - d, utc_offset_s).map(|t| t + d);
        // Continuation windows only open inside a cycle (after some start).
        let c = self.cont.as_ref().and_then(|c| {
            let t = c.next_after(now - d, utc_offset_s)? + d;
            self.start
                .last_at_or_before(t - d, utc_offset_s, self.lookback())
                .map(|_| t)
        });
        match (s, c) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether the include and skip lists select `c` (by name or UUID, in either spelling:
    /// mdadm's or `md/uuid`'s).
    pub fn selected(&self, c: &Candidate) -> bool {
        let same_uuid = |k: &str| {
            let parsed = crate::model::ArrayUuid::parse;
            c.uuid.as_deref() == Some(k)
                || parsed(k).is_some_and(|k| c.uuid.as_deref().and_then(parsed) == Some(k))
        };
        let is = |k: &String| *k == c.name || same_uuid(k);
        (self.include.is_empty() || self.include.iter().any(is)) && !self.skip.iter().any(is)
    }

    /// What to start and pause at `now` given the arrays (see the module doc for the rules).
    pub fn plan(&self, now: i64, delay_s: u64, utc_offset_s: i64, arrays: &[Candidate]) -> Plan {
        let window = self.window_at(now, delay_s, utc_offset_s);
        let mut plan = Plan {
            window,
            next_window_start: self.next_window_start(now, delay_s, utc_offset_s),
            ..Plan::default()
        };
        let Some(w) = window else {
            plan.pause = arrays
                .iter()
                .filter(|a| a.checking && self.selected(a))
                .map(|a| a.name.clone())
                .collect();
            return plan;
        };
        let mut busy_disks: BTreeSet<String> = BTreeSet::new();
        let mut running = 0usize;
        for a in arrays.iter().filter(|a| a.checking) {
            running += 1;
            busy_disks.extend(a.disks.iter().cloned());
        }
        let mut order: Vec<&Candidate> = arrays.iter().filter(|a| !a.checking).collect();
        order.sort_by(|a, b| {
            b.has_position
                .cmp(&a.has_position)
                .then(a.name.cmp(&b.name))
        });
        let min_age = (self.min_age_days * 86_400) as i64;
        for a in order {
            let reason = if !self.selected(a) {
                Some(SkipReason::NotSelected)
            } else if a.created_unix_s.is_some_and(|c| now - c < min_age) {
                Some(SkipReason::TooYoung)
            } else if !a.has_position && a.last_completed_s.is_some_and(|t| t >= w.cycle_start) {
                Some(SkipReason::DoneThisCycle)
            } else if a.busy {
                Some(SkipReason::Busy)
            } else if running >= self.max_concurrent {
                Some(SkipReason::Concurrency)
            } else {
                a.disks
                    .iter()
                    .find(|d| busy_disks.contains(*d))
                    .map(|d| SkipReason::SharesDisk(d.clone()))
            };
            match reason {
                Some(r) => plan.skipped.push((a.name.clone(), r)),
                None => {
                    running += 1;
                    busy_disks.extend(a.disks.iter().cloned());
                    plan.start.push(a.name.clone());
                }
            }
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unix seconds of a UTC wall-clock time.
    fn at(y: i64, m: u32, d: u32, h: i64, mi: i64) -> i64 {
        days_from_civil(y, m, d) * 86_400 + h * 3600 + mi * 60
    }

    fn cal(s: &str) -> Calendar {
        s.parse().unwrap()
    }

    #[test]
    fn bands_begin_at_their_calendar_and_last_their_length() {
        let band = Band {
            start: "Mon..Fri *-*-* 08:00:00".parse().unwrap(),
            length_s: 10 * 3600,
        };
        // 2026-11-30 is a Monday; UTC+1.
        let day = days_from_civil(2026, 11, 30) * 86_400;
        let local = |d: i64, h: i64, m: i64| day + d * 86_400 + h * 3600 + m * 60 - 3600;
        assert!(!band.contains(local(0, 7, 59), 3600));
        assert!(band.contains(local(0, 8, 0), 3600));
        assert!(band.contains(local(0, 17, 59), 3600));
        assert!(!band.contains(local(0, 18, 0), 3600));
        assert!(band.contains(local(4, 12, 0), 3600), "Friday");
        assert!(!band.contains(local(5, 12, 0), 3600), "Saturday");
        // A band past midnight (22:00 for 8 h) covers the early hours of the next day.
        let night = Band {
            start: "*-*-* 22:00:00".parse().unwrap(),
            length_s: 8 * 3600,
        };
        assert!(night.contains(local(1, 3, 0), 3600));
        assert!(!night.contains(local(1, 6, 0), 3600));
    }

    #[test]
    fn civil_round_trip_and_weekday() {
        for day in [-1000, 0, 59, 365, 11_016, 20_000, 20_788] {
            let (y, m, d) = civil_from_days(day);
            assert_eq!(days_from_civil(y, m, d), day);
        }
        assert_eq!(civil_from_days(days_from_civil(2026, 12, 1)), (2026, 12, 1));
        // 2026-12-06 is a Sunday.
        let c = cal("Sun *-*-* 00:00");
        assert_eq!(
            c.next_after(at(2026, 12, 1, 9, 0), 0),
            Some(at(2026, 12, 6, 0, 0))
        );
    }

    #[test]
    fn first_sunday_and_daily_continuation() {
        let c = cal("Sun *-*-1..7 01:00");
        // From 2026-12-01 (Tue): first Sunday is Dec 6; after it, Jan 3 2027.
        let t = at(2026, 12, 1, 9, 0);
        assert_eq!(c.next_after(t, 0), Some(at(2026, 12, 6, 1, 0)));
        assert_eq!(
            c.next_after(at(2026, 12, 6, 1, 0), 0),
            Some(at(2027, 1, 3, 1, 0))
        );
        // A wall-clock offset of +1 h: 01:00 local is 00:00 UTC.
        assert_eq!(c.next_after(t, 3600), Some(at(2026, 12, 6, 0, 0)));
        let d = cal("*-*-* 01:00");
        assert_eq!(
            d.next_after(at(2026, 12, 6, 1, 0), 0),
            Some(at(2026, 12, 7, 1, 0))
        );
        assert_eq!(cal("daily").next_after(t, 0), Some(at(2026, 12, 2, 0, 0)));
        assert_eq!(cal("monthly").next_after(t, 0), Some(at(2027, 1, 1, 0, 0)));
        assert_eq!(
            cal("Sat,Sun 03:30").next_after(t, 0),
            Some(at(2026, 12, 5, 3, 30))
        );
        assert_eq!(
            cal("Mon..Fri *-*-* 0/6:00").next_after(t, 0),
            Some(at(2026, 12, 1, 12, 0))
        );
        for bad in [
            "",
            "Sun",
            "Funday 01:00",
            "*-13-* 01:00",
            "25:00",
            "*-*-7..1 01:00",
            "1:2:3:4",
        ] {
            assert!(bad.parse::<Calendar>().is_err(), "{bad}");
        }
        assert_eq!(cal("*-02-30 00:00").next_after(t, 0), None);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("6h"), Ok(21_600));
        assert_eq!(parse_duration("1h30m"), Ok(5_400));
        assert_eq!(parse_duration("30min"), Ok(1_800));
        assert_eq!(parse_duration("90"), Ok(90));
        assert_eq!(parse_duration("2d"), Ok(172_800));
        assert_eq!(parse_duration("3650d"), Ok(crate::units::MAX_DURATION_S));
        for long in ["3651d", "18446744073709551615", "522w"] {
            let e = parse_duration(long).unwrap_err();
            assert!(matches!(e, ScheduleError::TooLong { .. }), "{long}: {e}");
            assert!(e.to_string().contains("3650 days"), "{e}");
        }
        for bad in ["", "h", "6x", "-1h", "1.5h"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    fn mdcheck() -> Schedule {
        Schedule::new(cal("Sun *-*-1..7 01:00"), Some(cal("*-*-* 01:00")))
    }

    fn arr(name: &str, disks: &[&str]) -> Candidate {
        Candidate {
            name: name.into(),
            uuid: Some(format!("uuid-{name}")),
            created_unix_s: Some(0),
            disks: disks.iter().map(|d| (*d).to_string()).collect(),
            last_completed_s: None,
            has_position: false,
            checking: false,
            busy: false,
        }
    }

    #[test]
    fn windows_on_a_fake_clock() {
        let s = mdcheck();
        let sun = at(2026, 12, 6, 1, 0);
        assert_eq!(s.window_at(sun - 60, 0, 0), None);
        let w = s.window_at(sun + 3600, 0, 0).unwrap();
        assert_eq!((w.cycle_start, w.start, w.end), (sun, sun, sun + 6 * 3600));
        assert_eq!(s.window_at(sun + 6 * 3600, 0, 0), None);
        // Monday 01:00 continues the cycle.
        let w = s.window_at(sun + 86_400 + 10, 0, 0).unwrap();
        assert_eq!((w.cycle_start, w.start), (sun, sun + 86_400));
        assert_eq!(
            s.next_window_start(sun + 7 * 3600, 0, 0),
            Some(sun + 86_400)
        );
        // Before the first cycle of all (nothing started within the lookback) no continuation.
        let only_start = Schedule::new(cal("Sun *-*-1..7 01:00"), None);
        assert_eq!(only_start.window_at(sun + 86_400 + 10, 0, 0), None);
        assert_eq!(
            only_start.next_window_start(sun + 7 * 3600, 0, 0),
            Some(at(2027, 1, 3, 1, 0))
        );
    }

    #[test]
    fn random_delay_is_fixed_per_machine_and_shifts_windows() {
        let a = fixed_delay_s("3d1219c7aa", 86_400);
        assert_eq!(a, fixed_delay_s("3d1219c7aa\n", 86_400));
        assert_ne!(a, fixed_delay_s("0f00ba47", 86_400));
        assert!(a < 86_400);
        assert_eq!(fixed_delay_s("x", 0), 0);
        let mut s = mdcheck();
        s.random_delay_s = 86_400;
        let sun = at(2026, 12, 6, 1, 0);
        let delay = 5 * 3600;
        assert_eq!(s.window_at(sun + 3600, delay, 0), None);
        let w = s.window_at(sun + delay as i64 + 1, delay, 0).unwrap();
        assert_eq!(w.start, sun + delay as i64);
    }

    #[test]
    fn selection_concurrency_shared_disks_young_and_done() {
        let mut s = mdcheck();
        s.max_concurrent = 2;
        let now = at(2026, 12, 6, 2, 0);
        let mut young = arr("md3", &["sdd"]);
        young.created_unix_s = Some(now - 3 * 86_400);
        let mut done = arr("md4", &["sde"]);
        done.last_completed_s = Some(at(2026, 12, 6, 1, 30));
        let mut resumed = arr("md9", &["sdf"]);
        resumed.has_position = true;
        let arrays = [
            arr("md0", &["sda", "sdb"]),
            arr("md1", &["sda", "sdc"]),
            arr("md2", &["sdc"]),
            young,
            done,
            resumed,
        ];
        let p = s.plan(now, 0, 0, &arrays);
        assert_eq!(p.start, ["md9", "md0"]);
        assert_eq!(
            p.skipped,
            [
                ("md1".to_string(), SkipReason::Concurrency),
                ("md2".to_string(), SkipReason::Concurrency),
                ("md3".to_string(), SkipReason::TooYoung),
                ("md4".to_string(), SkipReason::DoneThisCycle),
            ]
        );
        // With room for more, the shared disk still keeps md1 out while md0 runs.
        s.max_concurrent = 5;
        let mut running = arrays.clone();
        running[0].checking = true;
        let p = s.plan(now, 0, 0, &running);
        assert_eq!(p.start, ["md9", "md2"]);
        assert!(p
            .skipped
            .contains(&("md1".to_string(), SkipReason::SharesDisk("sda".into()))));
        // Include/skip by name or UUID.
        s.include = vec!["uuid-md2".into(), "md0".into()];
        s.skip = vec!["md0".into()];
        let p = s.plan(now, 0, 0, &arrays);
        assert_eq!(p.start, ["md2"]);
        // Outside any window: running checks pause.
        let p = s.plan(at(2026, 12, 6, 8, 0), 0, 0, &running);
        assert_eq!(p.window, None);
        assert!(p.start.is_empty());
        assert_eq!(p.pause, Vec::<String>::new(), "md0 is not selected now");
        s.include.clear();
        s.skip.clear();
        let p = s.plan(at(2026, 12, 6, 8, 0), 0, 0, &running);
        assert_eq!(p.pause, ["md0"]);
        assert_eq!(p.next_window_start, Some(at(2026, 12, 7, 1, 0)));
    }
}
