//! `mdpilot wipe` and the installer's drop-in `mdpilot blockdev-wipe`.
//!
//! Both probe the device, plan (printing the plan's reasons), then drive an [`engine::Job`] and
//! turn its durable progress into a progress bar, JSON lines, or `blockdev-wipe`'s 1000 stars.
//! SIGINT, SIGTERM and SIGHUP cancel the job between blocks (the resync is unfrozen, leases
//! released) and the command exits nonzero.

use crate::cli::{fail, Context};
use crate::wipe::engine::{self, Job, JobHandle, Phase, Progress};
use crate::wipe::error::WipeError;
use crate::wipe::leases::{LeaseProvider, Owner};
use crate::wipe::planner::{self, Data, Method, Options, Plan};
use crate::wipe::probe;
use crate::wipe::stream::Seed;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How `mdpilot wipe` reports progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ProgressMode {
    /// A progress bar on a terminal, nothing otherwise.
    #[default]
    Auto,
    /// One JSON object per line on stdout (`event`: `plan`, `progress`, `completed`).
    Json,
    /// No progress output.
    None,
}

/// Exit statuses of `mdpilot wipe`, shown by `--help` (also in the README's "Wipe jobs").
pub const WIPE_EXIT_CODES: &str = "\
Exit status:
  0    success (and --dry-run)
  1    failure: the device cannot be probed or opened, I/O error, verify mismatch,
       lease or resync control failure
  2    refused (mounted, swap, held, backs /), bad usage, or not confirmed; nothing written
  130  cancelled by SIGINT, SIGTERM or SIGHUP (the resync is unfrozen, leases released)";

/// Exit statuses of `mdpilot blockdev-wipe`, shown by `--help`.
pub const BLOCKDEV_WIPE_EXIT_CODES: &str = "\
Exit status (as the installer's callers expect):
  0    success: exactly 1000 lines of `*` were printed
  1    any error, including bad usage and cancel by a signal";

/// Arguments of `mdpilot wipe DEVICE ...`.
#[derive(Debug, clap::Args)]
#[command(after_help = WIPE_EXIT_CODES)]
pub struct WipeArgs {
    /// Block device to wipe (an array, a member of a stopped array, a disk or a partition).
    pub device: PathBuf,
    /// What to write.
    #[arg(long, value_enum, default_value_t = Method::Zero)]
    pub method: Method,
    /// Read everything back (O_DIRECT) and compare; reports the first mismatching offset.
    #[arg(long)]
    pub verify: bool,
    /// Print the plan and its reasons; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Progress output.
    #[arg(long, value_enum, default_value_t = ProgressMode::Auto)]
    pub progress: ProgressMode,
    /// Never freeze or skip a resync of the target array.
    #[arg(long)]
    pub keep_resync: bool,
    /// Benchmarks: `zero` by O_DIRECT writes even where BLKZEROOUT would be used.
    #[arg(long, hide = true)]
    pub force_writes: bool,
    /// Benchmarks: requests in flight (default 4).
    #[arg(long, hide = true, value_name = "N")]
    pub queue_depth: Option<usize>,
}

/// Arguments of `mdpilot blockdev-wipe [-f FILE] [-s NUM] DEVICE`.
#[derive(Debug, clap::Args)]
#[command(after_help = BLOCKDEV_WIPE_EXIT_CODES)]
pub struct BlockdevWipeArgs {
    /// Data source: a regular file's content (any size) is repeated over the device; anything
    /// else (`/dev/urandom`, a pipe) is read as a stream in device order and must not end
    /// before the device does. Default: zeroes.
    #[arg(short = 'f', value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Block size in bytes the caller asks for; accepted, but the planner may use a larger
    /// aligned size (at least 4 MiB, full stripes) — the result on disk is the same.
    #[arg(short = 's', value_name = "NUM")]
    pub size: Option<u64>,
    /// Block device to wipe.
    pub device: PathBuf,
}

/// Largest regular file `-f` loads into memory to repeat; larger ones are repeated by `pread`
/// from the file (a small file read by `pread` would cost many calls per block).
const MAX_PATTERN: u64 = 1 << 20;

fn cancel_flag() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        if let Err(e) = signal_hook::flag::register(sig, flag.clone()) {
            tracing::warn!("cannot install handler for signal {sig}: {e}");
        }
    }
    flag
}

fn exit_for(e: &WipeError) -> u8 {
    match e {
        WipeError::Refused { .. } | WipeError::Usage(_) => 2,
        WipeError::Cancelled { .. } => 130,
        _ => 1,
    }
}

/// What the terminal progress bar shows for one progress snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct BarFields {
    /// The phase: `starting`, `wipe`, `flush`, `verify`.
    pub message: &'static str,
    /// Bytes durably written (read back, in `verify`).
    pub position: u64,
    /// `123.4 MiB/s ETA 5s` from the engine's rate; empty until the first bytes are durable
    /// (never a made-up `ETA 0s`), without ETA where it is unknown (`flush`).
    pub tail: String,
}

impl BarFields {
    /// The bar's fields for `pr`; `None` for [`Phase::Done`]: the caller draws the final bar
    /// itself (full on success), so no intermediate `done` frame shows a stale position.
    pub fn of(pr: &Progress) -> Option<BarFields> {
        let (message, position) = match pr.phase {
            Phase::Starting => ("starting", 0),
            Phase::Wipe => ("wipe", pr.done_bytes),
            Phase::Flush => ("flush", pr.done_bytes),
            Phase::Verify => ("verify", pr.verified_bytes),
            Phase::Done => return None,
        };
        let mut tail = String::new();
        if pr.rate_bytes_per_s > 0.0 && (position > 0 || pr.phase == Phase::Flush) {
            tail = format!("{}/s", planner::human_bytes(pr.rate_bytes_per_s as u64));
            if let Some(eta) = pr.eta_s() {
                tail.push_str(&format!(" ETA {}", eta_text(eta)));
            }
        }
        Some(BarFields {
            message,
            position,
            tail,
        })
    }
}

/// `1h02m`, `3m05s`, `12s` (rounded up: never `0s` while bytes are left).
fn eta_text(s: f64) -> String {
    let s = s.max(0.0).ceil() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

/// Polls `h` every `tick` until it finishes, cancelling it when `flag` is raised.
fn drive(
    h: JobHandle,
    flag: &AtomicBool,
    tick: Duration,
    mut each: impl FnMut(&Progress),
) -> Result<engine::Outcome, WipeError> {
    loop {
        if flag.load(Ordering::SeqCst) {
            h.cancel();
        }
        each(&h.progress());
        if h.wait_for(tick) {
            break;
        }
    }
    each(&h.progress());
    h.wait()
}

fn confirm(args: &WipeArgs, plan: &Plan) -> bool {
    eprint!(
        "This destroys all data on {} ({} bytes). Type the device name or \"yes\" to continue: ",
        plan.device.display(),
        plan.size_bytes
    );
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return false;
    }
    let a = line.trim();
    !a.is_empty()
        && (a == "yes"
            || Path::new(a) == args.device
            || Path::new(a) == plan.device
            || a == plan.name)
}

/// The `plan` event of `--progress json`: what the text plan shows, as data (enums in
/// lowercase kebab case, sizes in bytes).
pub fn plan_json(plan: &Plan, dry_run: bool) -> serde_json::Value {
    serde_json::json!({
        "event": "plan",
        "device": plan.device,
        "name": plan.name,
        "size_bytes": plan.size_bytes,
        "method": plan.method,
        "operation": plan.op.describe(),
        "open": plan.open,
        "open_flags": plan.open.describe(),
        "block_bytes": plan.block_bytes,
        "request_bytes": plan.request_bytes(),
        "queue_depth": plan.queue_depth,
        "ranges": plan.ranges,
        "total_bytes": plan.total_bytes(),
        "resync": plan.resync,
        "leases": plan.leases,
        "verify": plan.verify,
        "reasons": plan.reasons,
        "dry_run": dry_run,
    })
}

fn json_line(v: serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

/// Runs `mdpilot wipe`. Exit status ([`WIPE_EXIT_CODES`]): 0 success (and for `--dry-run`),
/// 1 failure, 2 refused, bad usage or confirmation declined, 130 cancelled by a signal.
pub fn run_wipe(ctx: &Context, args: WipeArgs) -> ExitCode {
    let json = args.progress == ProgressMode::Json;
    // Before the job starts: the stderr message, and with `--progress json` one error event on
    // stdout too, so a JSON reader learns why nothing happened.
    let early = |e: &dyn std::error::Error, code: u8| -> ExitCode {
        if json {
            json_line(serde_json::json!({
                "event": "error",
                "device": args.device,
                "message": crate::error::error_chain(e),
                "exit_code": code,
            }));
        }
        fail(e, code)
    };
    let seed = if args.method == Method::Random {
        match Seed::from_os() {
            Ok(s) => Some(s),
            Err(e) => return early(&e, 1),
        }
    } else {
        None
    };
    let p = match probe::probe(&ctx.root, &args.device) {
        Ok(p) => p,
        Err(e) => return early(&e, exit_for(&e)),
    };
    let opts = Options {
        verify: args.verify,
        keep_resync: args.keep_resync,
        seed,
        owner: Some(Owner::Pid(std::process::id())),
        prefer_writes: args.force_writes,
        queue_depth: args.queue_depth,
        ..Options::default()
    };
    let plan = match planner::plan(&p, args.method, &opts) {
        Ok(pl) => pl,
        Err(e) => return early(&e, exit_for(&e)),
    };
    if json {
        json_line(plan_json(&plan, args.dry_run));
    }
    if args.dry_run {
        if !json {
            print!("{}", plan.describe());
        }
        return ExitCode::SUCCESS;
    }
    if !json {
        eprint!("{}", plan.describe());
    }
    if !args.yes && !confirm(&args, &plan) {
        let e = WipeError::Usage(format!(
            "{}: not confirmed; nothing written",
            plan.device.display()
        ));
        return early(&e, 2);
    }
    let flag = cancel_flag();
    let total = plan.total_bytes();
    let handle = Job::new(plan.clone(), ctx.root.clone())
        .with_leases(policy_leases(ctx))
        .start();
    // The bar's text fields live in one shared cell read by the template's custom keys, and
    // the position is set last: every redraw (indicatif draws from each setter) then shows one
    // consistent snapshot, never a new phase with an old position or an old ETA.
    let fields = Arc::new(std::sync::Mutex::new(("starting", String::new())));
    let bar = (args.progress == ProgressMode::Auto && std::io::stderr().is_terminal()).then(|| {
        let b = indicatif::ProgressBar::new(total);
        let (f1, f2) = (fields.clone(), fields.clone());
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{phase} [{bar:40}] {bytes}/{total_bytes} {tail}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .with_key(
                "phase",
                move |_: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let g = f1.lock().unwrap_or_else(|e| e.into_inner());
                    let _ = write!(w, "{:8}", g.0);
                },
            )
            .with_key(
                "tail",
                move |_: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let g = f2.lock().unwrap_or_else(|e| e.into_inner());
                    let _ = w.write_str(&g.1);
                },
            )
            .progress_chars("=> "),
        );
        b
    });
    let set_fields = |message: &'static str, tail: String| {
        *fields.lock().unwrap_or_else(|e| e.into_inner()) = (message, tail);
    };
    let mut last_json = std::time::Instant::now() - Duration::from_secs(1);
    let result = drive(handle, &flag, Duration::from_millis(100), |pr| {
        if let (Some(b), Some(f)) = (&bar, BarFields::of(pr)) {
            set_fields(f.message, f.tail);
            b.set_position(f.position);
        }
        if json && last_json.elapsed() >= Duration::from_millis(500) {
            last_json = std::time::Instant::now();
            let mut v = serde_json::to_value(pr).unwrap_or_default();
            v["event"] = "progress".into();
            v["eta_s"] = pr.eta_s().into();
            json_line(v);
        }
    });
    if let Some(b) = &bar {
        match &result {
            Ok(_) => {
                set_fields("done", String::new());
                b.set_position(total);
                b.finish();
            }
            Err(_) => {
                set_fields("stopped", String::new());
                b.abandon();
            }
        }
    }
    match result {
        Ok(o) => {
            if json {
                json_line(serde_json::json!({
                    "event": "completed", "success": true, "message": "done", "outcome": o,
                }));
            } else {
                eprintln!(
                    "mdpilot: {}: wiped {} in {:.1} s ({}/s){}{}",
                    plan.device.display(),
                    planner::bytes_exact(o.bytes),
                    o.wipe_s,
                    planner::human_bytes(o.rate_bytes_per_s as u64),
                    if o.verified { ", verified" } else { "" },
                    if o.resync_skipped {
                        ", initial resync skipped"
                    } else {
                        ""
                    }
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            if json {
                json_line(serde_json::json!({
                    "event": "completed", "success": false, "message": e.to_string(),
                }));
            }
            fail(&e, exit_for(&e))
        }
    }
}

fn data_source(file: &Path) -> Result<Data, WipeError> {
    let meta = std::fs::metadata(file).map_err(|source| WipeError::Open {
        path: file.to_path_buf(),
        source,
    })?;
    if !meta.is_file() {
        return Ok(Data::Stream(file.to_path_buf()));
    }
    if meta.len() == 0 {
        return Err(WipeError::Usage(format!(
            "{}: data file is empty",
            file.display()
        )));
    }
    if meta.len() > MAX_PATTERN {
        // Read with pread at offset % len while writing: memory stays bounded by the blocks.
        return Ok(Data::RepeatFile {
            path: file.to_path_buf(),
            len: meta.len(),
        });
    }
    let content = std::fs::read(file).map_err(|source| WipeError::Open {
        path: file.to_path_buf(),
        source,
    })?;
    Ok(Data::Pattern(Arc::new(content)))
}

/// Stars owed for `done` of `total` bytes: `floor(done * 1000 / total)`.
pub fn stars_for(done: u64, total: u64) -> u64 {
    if total == 0 {
        return 1000;
    }
    ((u128::from(done) * 1000) / u128::from(total)).min(1000) as u64
}

/// Runs `mdpilot blockdev-wipe`: prints one `*` line per 1/1000 of the device made durable
/// (exactly 1000 lines on success), exits 0 on success and 1 on any error or cancel.
pub fn run_blockdev_wipe(ctx: &Context, args: BlockdevWipeArgs) -> ExitCode {
    let run = || -> Result<(), WipeError> {
        let data = args.file.as_deref().map(data_source).transpose()?;
        let p = probe::probe(&ctx.root, &args.device)?;
        let opts = Options {
            data,
            block_hint: args.size,
            owner: Some(Owner::Pid(std::process::id())),
            ..Options::default()
        };
        let plan = planner::plan(&p, Method::Zero, &opts)?;
        for r in &plan.reasons {
            tracing::info!("{}: {r}", plan.device.display());
        }
        let flag = cancel_flag();
        let total = plan.total_bytes();
        let handle = Job::new(plan, ctx.root.clone())
            .with_leases(policy_leases(ctx))
            .start();
        let mut printed = 0u64;
        let mut star = |upto: u64| {
            let mut out = std::io::stdout().lock();
            while printed < upto {
                // The reader (the installer's progress loop) may be gone: keep wiping.
                let _ = out.write_all(b"*\n");
                printed += 1;
            }
            let _ = out.flush();
        };
        drive(handle, &flag, Duration::from_millis(50), |pr| {
            star(stars_for(pr.done_bytes, total));
        })?;
        star(1000);
        Ok(())
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let mut msg = e.to_string();
            let mut src = std::error::Error::source(&e);
            while let Some(s) = src {
                msg.push_str(&format!(": {s}"));
                src = s.source();
            }
            eprintln!("blockdev-wipe: {msg}");
            ExitCode::from(1)
        }
    }
}

/// The job's leases go through the real policy (same state file and lock as `mdpilot policy`).
/// A broken configuration is logged and the defaults are used: the wipe must not fail for it.
fn policy_leases(ctx: &Context) -> Arc<dyn LeaseProvider> {
    let config = crate::config::Config::load(&ctx.root).unwrap_or_else(|e| {
        tracing::warn!(
            "{}; using the default configuration",
            crate::error::error_chain(&e)
        );
        crate::config::Config::default()
    });
    Arc::new(crate::policy::Policy::new(
        ctx.root.clone(),
        config.policy_settings(&ctx.root),
    ))
}
