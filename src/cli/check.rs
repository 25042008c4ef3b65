//! `mdpilot check start|pause|resume|cancel|status [ARRAY...]`: resumable, throttled checks
//! (scrubs) on the kernel files, with the record of [`crate::check`] in the config's
//! `[check] state_path` (under the state file's lock, `<path>.lock`).
//!
//! - `start [--repair] [--max KIBS]`: `sync_min` 0, then `sync_action` = check/repair; a saved
//!   position is dropped (use `resume` to keep it).
//! - `pause`: saves the position (`sync_completed`'s done, rounded down to the chunk) *before*
//!   writing `idle`, then releases the throttle.
//! - `resume [--max KIBS]`: `sync_min` = saved position, then `sync_action` = the saved action.
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

use crate::check::{reconcile, ArrayRecord, CheckAction, CheckState, Observed, Position};
use crate::cli::{fail, Context};
use crate::config::Config;
use crate::host::Root;
use crate::model::{Array, MdStat, SyncCompleted};
use crate::policy::{LeaseKind, LeaseRequest, Limits, Owner, Policy};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

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
        /// "position", "last", "mismatch_warning"}]}`.
        #[arg(long)]
        json: bool,
        /// Arrays; none: every redundant array.
        arrays: Vec<String>,
    },
}

/// Why one array's step failed.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// Not an array of /proc/mdstat.
    #[error("no array {0}")]
    NoArray(String),
    /// Another sync runs (or the array is frozen).
    #[error("{array}: {action} is running; a check can start only when idle")]
    Busy {
        /// Array.
        array: String,
        /// `sync_action`.
        action: String,
    },
    /// `resume` without a saved position.
    #[error("{0}: no paused check to resume (use `mdpilot check start`)")]
    NothingToResume(String),
    /// A kernel file could not be written.
    #[error("cannot write {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The record file could not be read, parsed or saved.
    #[error("check state {path}: {reason}")]
    State {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The throttle lease failed.
    #[error("throttle lease")]
    Policy(#[from] crate::policy::PolicyError),
    /// The arrays could not be read.
    #[error("reading the arrays")]
    Collect(#[from] crate::sysfs::CollectError),
}

fn now_s() -> u64 {
    crate::policy::unix_now_s()
}

/// The record key: the UUID (`md/uuid`), else `name:<mdN>` where the kernel shows none.
fn key(a: &Array) -> String {
    a.sysfs
        .as_ref()
        .and_then(|s| s.uuid.clone())
        .unwrap_or_else(|| format!("name:{}", a.name))
}

fn redundant(a: &Array) -> bool {
    matches!(
        a.level.as_deref(),
        Some("raid1" | "raid4" | "raid5" | "raid6" | "raid10")
    )
}

fn observe(root: &Root, a: &Array) -> Observed {
    let sys = a.sysfs.clone().unwrap_or_default();
    let sync_min = std::fs::read_to_string(md_path(root, &a.name, "sync_min"))
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0);
    Observed {
        sync_action: sys
            .sync_action
            .as_ref()
            .map_or("idle".to_string(), |w| w.as_str().to_string()),
        completed: match sys.sync_completed {
            Some(SyncCompleted::Sectors { done, total }) => Some((done, total)),
            _ => None,
        },
        sync_min,
        mismatch_cnt: sys.mismatch_cnt,
        level: a.level.clone().unwrap_or_default(),
    }
}

fn md_path(root: &Root, array: &str, attr: &str) -> PathBuf {
    root.sys(format!("block/{array}/md/{attr}"))
}

fn write_attr(root: &Root, array: &str, attr: &str, value: &str) -> Result<(), CheckError> {
    let path = md_path(root, array, attr);
    tracing::info!(array, attr, value, "write");
    std::fs::write(&path, format!("{value}\n")).map_err(|source| CheckError::Write { path, source })
}

fn load(path: &Path) -> Result<CheckState, CheckError> {
    let bad = |reason: String| CheckError::State {
        path: path.to_path_buf(),
        reason,
    };
    match std::fs::read_to_string(path) {
        Ok(t) => CheckState::parse(&t).map_err(bad),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(CheckState::default()),
        Err(e) => Err(bad(e.to_string())),
    }
}

/// Atomic save: temporary file in the same directory, fsync, rename.
fn save(path: &Path, st: &CheckState) -> Result<(), CheckError> {
    let bad = |e: std::io::Error| CheckError::State {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let dir = path.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(dir).map_err(bad)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(bad)?;
    std::io::Write::write_all(&mut tmp, st.to_toml().as_bytes()).map_err(bad)?;
    tmp.as_file().sync_all().map_err(bad)?;
    tmp.persist(path).map_err(|e| bad(e.error))?;
    Ok(())
}

fn holder(array: &str) -> String {
    format!("check-{array}")
}

fn throttle(policy: &Policy, array: &str, max: Option<u64>) -> Result<(), CheckError> {
    let Some(max) = max else {
        return Ok(());
    };
    policy.acquire(LeaseRequest {
        holder: holder(array),
        kind: LeaseKind::Admin,
        owner: Owner::None,
        global: Limits::default(),
        arrays: BTreeMap::from([(
            array.to_string(),
            Limits {
                min: None,
                max: Some(max),
            },
        )]),
    })?;
    Ok(())
}

fn unthrottle(policy: &Policy, array: &str) -> Result<(), CheckError> {
    let h = holder(array);
    if policy.show()?.leases.iter().any(|l| l.holder == h) {
        policy.release(&h)?;
    }
    Ok(())
}

/// Runs a `mdpilot check` subcommand.
pub fn run(ctx: &Context, cmd: CheckCommand) -> ExitCode {
    let config = match Config::load(&ctx.root) {
        Ok(c) => c,
        Err(e) => return fail(&e, 1),
    };
    match execute(&ctx.root, &config, &cmd, false) {
        Ok(out) => {
            for e in &out.errors {
                eprintln!("mdpilot: {e}");
            }
            if let CheckCommand::Status { json, .. } = cmd {
                print_status(&ctx.root, &out.stat, &out.targets, &out.state, json);
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
}

/// Runs `cmd` on the kernel files under `root` (the CLI and the service's scheduler both go
/// through here). `scheduled` marks the checks it starts or resumes as the schedule's (only
/// those are paused at a window's end).
///
/// Errors: the config's record file or the arrays cannot be read, an ARRAY is unknown; errors
/// of single arrays are in [`Outcome::errors`].
pub fn execute(
    root: &Root,
    config: &Config,
    cmd: &CheckCommand,
    scheduled: bool,
) -> Result<Outcome, CheckError> {
    let state_path = root.path(&config.check.state_path);
    let policy = Policy::new(root.clone(), config.policy_settings(root));
    let _lock = crate::policy::state::lock(&state_path).map_err(|e| CheckError::State {
        path: state_path.clone(),
        reason: crate::error::error_chain(&e),
    })?;
    let stat = crate::sysfs::collect(root)?;
    let mut st = load(&state_path)?;
    let now = now_s();
    let mut errors = Vec::new();
    // First record what happened since the last command (finished or interrupted checks).
    for a in &stat.arrays {
        if let Some(rec) = st.array.get_mut(&key(a)) {
            let chunk = a.sysfs.as_ref().and_then(|s| s.chunk_size_bytes);
            let was_running = rec.running.is_some();
            reconcile(rec, &observe(root, a), chunk, now);
            if was_running && rec.running.is_none() {
                rec.scheduled = false;
                if let Err(e) = unthrottle(&policy, &a.name) {
                    errors.push(format!("{}: {}", a.name, crate::error::error_chain(&e)));
                }
            }
        }
    }
    let names = match cmd {
        CheckCommand::Start { arrays, .. }
        | CheckCommand::Pause { arrays }
        | CheckCommand::Cancel { arrays }
        | CheckCommand::Resume { arrays, .. }
        | CheckCommand::Status { arrays, .. } => arrays,
    };
    let targets: Vec<Array> = select(root, &stat, names, cmd, &st)?
        .into_iter()
        .cloned()
        .collect();
    for a in &targets {
        let r = step(root, &policy, config, cmd, a, &mut st, now).map(|()| {
            if scheduled {
                if let Some(rec) = st.array.get_mut(&key(a)) {
                    rec.scheduled = rec.running.is_some();
                }
            }
        });
        // Saved after every array: a later failure never loses an earlier pause.
        if let Err(e) = r.and_then(|()| save(&state_path, &st)) {
            errors.push(format!("{}: {}", a.name, crate::error::error_chain(&e)));
        }
    }
    save(&state_path, &st)?;
    Ok(Outcome {
        targets: targets.iter().map(|a| a.name.clone()).collect(),
        stat,
        state: st,
        errors,
    })
}

/// The record key of `a`: its UUID (`md/uuid`), else `name:<mdN>`.
pub fn record_key(a: &Array) -> String {
    key(a)
}

fn select<'a>(
    root: &Root,
    stat: &'a MdStat,
    names: &[String],
    cmd: &CheckCommand,
    st: &CheckState,
) -> Result<Vec<&'a Array>, CheckError> {
    if names.is_empty() {
        return Ok(stat
            .arrays
            .iter()
            .filter(|a| redundant(a))
            .filter(|a| match cmd {
                CheckCommand::Resume { .. } => {
                    st.array.get(&key(a)).is_some_and(|r| r.position.is_some())
                }
                _ => true,
            })
            .collect());
    }
    let known: Vec<String> = stat.arrays.iter().map(|a| a.name.clone()).collect();
    names
        .iter()
        .map(|n| {
            // `/dev/md/NAME`, `md/NAME` and metadata names as `status` takes them.
            let n = crate::names::resolve_array(root, n, &known)
                .unwrap_or_else(|_| n.strip_prefix("/dev/").unwrap_or(n).to_string());
            let n = n.as_str();
            stat.arrays
                .iter()
                .find(|a| a.name == n)
                .ok_or_else(|| CheckError::NoArray(n.to_string()))
        })
        .collect()
}

fn step(
    root: &Root,
    policy: &Policy,
    config: &Config,
    cmd: &CheckCommand,
    a: &Array,
    st: &mut CheckState,
    now: u64,
) -> Result<(), CheckError> {
    let o = observe(root, a);
    let chunk = a.sysfs.as_ref().and_then(|s| s.chunk_size_bytes);
    let rec: &mut ArrayRecord = st.array.entry(key(a)).or_default();
    rec.name = a.name.clone();
    let idle = o.sync_action == "idle";
    let busy = || CheckError::Busy {
        array: a.name.clone(),
        action: o.sync_action.clone(),
    };
    match cmd {
        CheckCommand::Start { repair, max, .. } => {
            if !idle {
                return Err(busy());
            }
            let action = if *repair {
                CheckAction::Repair
            } else {
                CheckAction::Check
            };
            throttle(policy, &a.name, max.or(config.check.check_max))?;
            write_attr(root, &a.name, "sync_min", "0")?;
            rec.position = None;
            rec.running = Some(action);
            write_attr(root, &a.name, "sync_action", action.as_str())?;
        }
        CheckCommand::Resume { max, .. } => {
            if !idle {
                return Err(busy());
            }
            let Some(p) = rec.position.clone() else {
                return Err(CheckError::NothingToResume(a.name.clone()));
            };
            throttle(policy, &a.name, max.or(config.check.check_max))?;
            write_attr(root, &a.name, "sync_min", &p.sectors.to_string())?;
            rec.running = Some(p.action);
            write_attr(root, &a.name, "sync_action", p.action.as_str())?;
        }
        CheckCommand::Pause { .. } => {
            let seen = match o.sync_action.as_str() {
                "check" => Some(CheckAction::Check),
                "repair" => Some(CheckAction::Repair),
                _ => None,
            };
            let Some(action) = rec.running.or(seen) else {
                return Ok(());
            };
            if o.sync_action == action.as_str() {
                let (done, total) = o.completed.unwrap_or((o.sync_min, 0));
                rec.position = Some(Position {
                    action,
                    sectors: crate::check::resume_point(done, chunk),
                    total_sectors: total,
                    saved_s: now,
                });
            }
            rec.running = None;
            // The caller saves the record before anything else is written.
            let snapshot = st.clone();
            save_now(root, config, &snapshot)?;
            write_attr(root, &a.name, "sync_action", "idle")?;
            unthrottle(policy, &a.name)?;
        }
        CheckCommand::Cancel { .. } => {
            if matches!(o.sync_action.as_str(), "check" | "repair") {
                write_attr(root, &a.name, "sync_action", "idle")?;
            }
            write_attr(root, &a.name, "sync_min", "0")?;
            rec.position = None;
            rec.running = None;
            unthrottle(policy, &a.name)?;
        }
        CheckCommand::Status { .. } => {}
    }
    Ok(())
}

fn save_now(root: &Root, config: &Config, st: &CheckState) -> Result<(), CheckError> {
    save(&root.path(&config.check.state_path), st)
}

fn print_status(root: &Root, stat: &MdStat, names: &[String], st: &CheckState, json: bool) {
    let mut out = Vec::new();
    for a in stat.arrays.iter().filter(|a| names.contains(&a.name)) {
        let o = observe(root, a);
        let rec = st.array.get(&key(a));
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
            "uuid": a.sysfs.as_ref().and_then(|s| s.uuid.clone()),
            "sync_action": o.sync_action,
            "percent": percent,
            "position": rec.and_then(|r| r.position.clone()),
            "last": last,
            "mismatch_warning": warning,
        }));
        if !json {
            let mut line = format!("{}: {}", a.name, o.sync_action);
            if let Some(p) = percent {
                line.push_str(&format!(" {p}%"));
            }
            if let Some(p) = rec.and_then(|r| r.position.as_ref()) {
                line.push_str(&format!(
                    ", paused {} at sector {} of {}",
                    p.action.as_str(),
                    p.sectors,
                    p.total_sectors
                ));
            }
            match &last {
                Some(l) => line.push_str(&format!(
                    ", last {} completed at {} with mismatch_cnt {}{}",
                    l.action.as_str(),
                    l.completed_s,
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
            println!("{line}");
        }
    }
    if json {
        println!("{}", serde_json::json!({ "arrays": out }));
    }
}
