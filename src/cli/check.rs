//! `mdpilot check start|pause|resume|cancel|status [ARRAY...]`: resumable, throttled checks
//! (scrubs) on the kernel files, with the record of [`crate::check`] in the config's
//! `[check] state_path` (under the state file's lock, `<path>.lock`). The steps are the core's
//! ([`crate::check::run`]), the same the D-Bus Array methods and the service loop's schedule run.
//!
//! - `start [--repair] [--max KIBS]`: `sync_min` 0, then `sync_action` = check/repair; a saved
//!   position is dropped (use `resume` to keep it).
//! - `pause`: saves the position (the point md has reached: mdstat's count where it is ahead of
//!   `sync_completed`'s checkpoint, rounded down to 4 KiB and the chunk) *before* writing
//!   `idle`, then releases the throttle.
//! - `resume [--max KIBS]`: `sync_min` = saved position, then `sync_action` = the saved action
//!   (without `--max`, the throttle it was started with).
//! - `cancel`: `idle`, `sync_min` 0, position dropped, throttle released.
//! - `status [--json]`: per array the running sync, the saved position and the last result; it
//!   also records what the kernel did meanwhile (a finished check's `mismatch_cnt`, the
//!   position of a check someone else interrupted).
//!
//! Throttle: `--max` (or the config's `check_max`) becomes a lease `check-<array>` on the
//! array's `sync_speed_max` (kind admin), visible in `mdpilot policy show`, released on pause,
//! cancel and when `status` sees the check finished.
//!
//! Arrays: kernel names, `/dev/mdN`, `/dev/md/NAME`, `md/NAME` or the metadata name; none = every array with redundancy (raid1/4/5/6/10).
//! Exit codes: 0 success, 1 any error (each array's error on stderr; the others still done).

use crate::check::run::{observe, Op};
use crate::check::CheckState;
use crate::cli::{fail, Context};
use crate::config::Config;
use crate::host::Root;
use crate::model::MdStat;
use std::process::ExitCode;

/// The long help of `mdpilot check` (`--help`, `mdpilot-check(8)`); docs/checks.md has the rest.
pub const CHECK_LONG_ABOUT: &str = "\
Checks (scrubs): md reads the whole array and counts inconsistent 512-byte sectors in \
md/mismatch_cnt; a repair (--repair) also rewrites them. mdpilot makes checks resumable and \
throttled.

start: md/sync_min 0, then md/sync_action check or repair (a saved position is dropped). \
pause: saves the position (the point md has reached, /proc/mdstat's count or md/sync_completed, \
rounded down to 4 KiB and the chunk) per array UUID in the \
check record (default /var/lib/mdpilot/checks.toml) before writing idle. resume: writes the \
saved position to md/sync_min, then the saved action. cancel: idle, sync_min 0, position \
dropped. status: the running sync, the saved position and the last result (mismatch_cnt and \
its time: non-zero is a warning on raid4/5/6, informational on raid1/raid10).

Throttle: --max KIBS (or the config's [check] check_max, and check_max_working inside \
working_hours) becomes a lease check-<array> on the array's md/sync_speed_max, shown by \
`mdpilot policy show` and released on pause, cancel and when the check ends; resume without \
--max reuses the start's. The service also runs scheduled checks ([check] schedule, window, \
continue, random_delay, max_concurrent): see mdpilot.toml(5).

ARRAY: md0, /dev/md0, /dev/md/NAME, md/NAME or the metadata name; none: every array with \
redundancy (resume: every array with a saved position).

Exit status: 0 success, 1 any error (each array's error on stderr; the others are still done).";

/// `mdpilot check ...`.
#[derive(Debug, clap::Subcommand)]
pub enum CheckCommand {
    /// Start a check (or repair) from the beginning.
    Start {
        /// Rewrite mismatches (`repair`) instead of only counting them.
        #[arg(long)]
        repair: bool,
        /// Throttle: the array's sync_speed_max during the check, KiB/s (default: config
        /// `check_max`).
        #[arg(long, value_name = "KIBS")]
        max: Option<u64>,
        /// Start even on an array that is degraded, rebuilding (resync, recovery, reshape) or
        /// shares a disk with such an array; the reason overridden is printed.
        #[arg(long)]
        force: bool,
        /// Arrays (`md0`, `/dev/md0`); none: every redundant array.
        arrays: Vec<String>,
    },
    /// Stop a running check, keeping its position for `resume`.
    Pause {
        /// Arrays; none: every redundant array.
        arrays: Vec<String>,
    },
    /// Continue a paused check from its saved position.
    Resume {
        /// Throttle as for `start`.
        #[arg(long, value_name = "KIBS")]
        max: Option<u64>,
        /// As for `start`.
        #[arg(long)]
        force: bool,
        /// Arrays; none: every array with a saved position.
        arrays: Vec<String>,
    },
    /// Stop a check and forget its position.
    Cancel {
        /// Arrays; none: every redundant array.
        arrays: Vec<String>,
    },
    /// Show running checks, saved positions and last results.
    Status {
        /// One JSON object: `{"arrays": [{"name", "uuid", "sync_action", "percent",
        /// "position", "last", "mismatch_warning", "throttle", "held", "paused_for"}]}`.
        #[arg(long)]
        json: bool,
        /// Arrays; none: every redundant array.
        arrays: Vec<String>,
    },
}

/// Why a step failed: the core's error ([`crate::check::run::CheckError`]).
pub use crate::check::run::CheckError;

/// The record key of `a`: its UUID in mdadm's spelling, else `name:<mdN>`
/// ([`crate::check::run::record_key`]).
pub use crate::check::run::record_key;

impl CheckCommand {
    /// The core step and the arrays it names.
    pub fn op(&self) -> (Op, &[String]) {
        match self {
            CheckCommand::Start {
                repair,
                max,
                force,
                arrays,
            } => (
                Op::Start {
                    repair: *repair,
                    max: *max,
                    until_s: None,
                    force: *force,
                },
                arrays,
            ),
            CheckCommand::Pause { arrays } => (Op::Pause, arrays),
            CheckCommand::Resume { max, force, arrays } => (
                Op::Resume {
                    max: *max,
                    force: *force,
                },
                arrays,
            ),
            CheckCommand::Cancel { arrays } => (Op::Cancel, arrays),
            CheckCommand::Status { arrays, .. } => (Op::Status, arrays),
        }
    }
}

/// Runs a `mdpilot check` subcommand.
pub fn run(ctx: &Context, cmd: CheckCommand) -> ExitCode {
    let config = match Config::load(&ctx.root) {
        Ok(c) => c,
        Err(e) => return fail(&e, 1),
    };
    match execute(&ctx.root, &config, &cmd) {
        Ok(out) => {
            for (array, reason) in &out.overridden {
                eprintln!("mdpilot: {array}: started by --force although {reason}");
            }
            for e in &out.errors {
                eprintln!("mdpilot: {e}");
            }
            if let CheckCommand::Status { json, .. } = cmd {
                print_status(&ctx.root, &config, &out, json);
            }
            if out.errors.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => fail(&e, 1),
    }
}

/// What [`execute`] did.
#[derive(Debug)]
pub struct Outcome {
    /// The arrays as read before the step.
    pub stat: MdStat,
    /// The names the command applied to.
    pub targets: Vec<String>,
    /// The record after the step (saved).
    pub state: CheckState,
    /// One message per array that failed (`md0: ...`); the others were done.
    pub errors: Vec<String>,
    /// The arrays started with `--force` although a guard held them, and the reason.
    pub overridden: Vec<(String, String)>,
}

/// Runs `cmd` through the core executor [`crate::check::run::execute`] as an administrator's
/// step ([`crate::check::Origin::Admin`]: a check started here is never paused by the
/// schedule).
///
/// Errors: as the core's (record file, arrays unreadable, an unknown ARRAY); errors of single
/// arrays are in [`Outcome::errors`].
pub fn execute(root: &Root, config: &Config, cmd: &CheckCommand) -> Result<Outcome, CheckError> {
    let (op, arrays) = cmd.op();
    let origin = crate::check::Origin::Admin;
    let o = crate::check::run::execute(root, config, &op, arrays, origin)?;
    Ok(Outcome {
        stat: o.stat,
        targets: o.targets,
        state: o.state,
        errors: o.failures.iter().map(ToString::to_string).collect(),
        overridden: o.overridden,
    })
}

/// The throttle, the hold and the service's own pause, appended to a status line.
fn status_extras(
    line: &mut String,
    note: Option<&crate::check::throttle::Note>,
    hold: Option<&String>,
    paused_for: Option<&str>,
) {
    if let Some(n) = note {
        line.push_str(&format!("; throttle {} KiB/s: {}", n.limit_kib_s, n.why));
        if let Some(na) = &n.not_applied {
            line.push_str(&format!(" (not in effect: {na})"));
        }
    }
    if let Some(p) = paused_for {
        line.push_str(&format!("; paused by the service ({p})"));
    }
    if let Some(h) = hold {
        line.push_str(&format!("; a check would be held: {h}"));
    }
}

/// `secs` (Unix seconds) as `YYYY-MM-DD HH:MM:SS UTC`.
fn utc_text(secs: u64) -> String {
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let (y, m, d) = crate::schedule::civil_from_days(days);
    let r = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        r / 3600,
        r / 60 % 60,
        r % 60
    )
}

/// The status lines (or JSON) of `out`'s targets: the sync, the saved position, the last
/// result, the throttle's limit and why ([`crate::check::throttle::Note`]), and why a check
/// is held or was paused by the service.
fn print_status(root: &Root, config: &Config, outcome: &Outcome, json: bool) {
    let (stat, names, st) = (&outcome.stat, &outcome.targets, &outcome.state);
    let notes = crate::check::throttle::NOTES.load(root, config);
    let held = crate::check::run::holds(root, stat);
    let mut out = Vec::new();
    for a in stat.arrays.iter().filter(|a| names.contains(&a.name)) {
        let o = observe(root, a);
        let rec = st.array.get(&record_key(a));
        let note = notes.get(&a.name);
        let hold = held.get(&a.name);
        let paused_for = rec.and_then(|r| r.paused_for.clone());
        let percent = o
            .completed
            .filter(|(_, t)| *t > 0)
            .map(|(d, t)| (d as f64 * 1000.0 / t as f64).round() / 10.0);
        let last = rec.and_then(|r| r.last.clone());
        let warning = last
            .as_ref()
            .is_some_and(|l| crate::check::mismatch_is_warning(&l.level, l.mismatch_cnt));
        out.push(serde_json::json!({
            "name": a.name,
            "uuid": a.uuid().map(|u| u.to_string()),
            "sync_action": o.sync_action,
            "percent": percent,
            "position": rec.and_then(|r| r.position.clone()),
            "last": last,
            "mismatch_warning": warning,
            "throttle": note,
            "held": hold,
            "paused_for": paused_for,
        }));
        if !json {
            let mut line = format!("{}: {}", a.name, o.sync_action);
            if let Some(p) = percent {
                line.push_str(&format!(" {p}%"));
            }
            if let Some(p) = rec.and_then(|r| r.position.as_ref()) {
                // While it runs, the position is the last save (the service saves every 60 s).
                let what = if o.sync_action == p.action.as_str() {
                    "position saved"
                } else {
                    "paused"
                };
                line.push_str(&format!(
                    ", {what} {} at sector {} of {}",
                    p.action.as_str(),
                    p.sectors,
                    p.total_sectors
                ));
            }
            match &last {
                Some(l) => line.push_str(&format!(
                    ", last {} completed {} with mismatch_cnt {}{}",
                    l.action.as_str(),
                    utc_text(l.completed_s),
                    l.mismatch_cnt,
                    if warning {
                        " (warning: parity mismatches)"
                    } else if l.mismatch_cnt > 0 {
                        " (informational on a mirror)"
                    } else {
                        ""
                    }
                )),
                None => line.push_str(", never checked by mdpilot"),
            }
            status_extras(&mut line, note, hold, paused_for.as_deref());
            println!("{line}");
        }
    }
    if json {
        println!("{}", serde_json::json!({ "arrays": out }));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_text_is_calendar_time() {
        assert_eq!(super::utc_text(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(super::utc_text(1_796_132_985), "2026-12-01 13:49:45 UTC");
    }
}
