//! `mdpilot wipe DEVICE`: probe, plan (printing the plan's reasons), confirm, then drive the
//! job and turn its durable progress into a progress bar ([`crate::cli::progress`]) or JSON
//! lines (`--progress json`: events `plan`, `progress`, `completed`, or `error` before a job).
//!
//! SIGINT, SIGTERM and SIGHUP cancel the job between blocks (the resync is unfrozen, leases
//! released) and the command exits nonzero. The installer's drop-in is
//! [`crate::cli::blockdev_wipe`]; it shares `drive`, `cancel_flag` and `policy_leases`.

use crate::cli::progress::{progress_event, Bar};
use crate::cli::{fail, Context};
use crate::units::{bytes_exact, human_rate};
use crate::wipe::leases::LeaseProvider;
use crate::wipe::plan::{Method, Options, Plan};
use crate::wipe::{Hooks, JobHandle, Outcome, Progress, Request, WipeError};
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// Exit statuses of `mdpilot wipe`, shown by `--help` (also in docs/wipe.md).
pub const WIPE_EXIT_CODES: &str = "\
Exit status:
  0    success (and --dry-run)
  1    failure: the device cannot be probed or opened, I/O error, verify mismatch,
       lease or resync control failure
  2    refused (mounted, swap, held, backs /), bad usage, or not confirmed; nothing written
  130  cancelled by SIGINT, SIGTERM or SIGHUP (the resync is unfrozen, leases released)";

/// The long help of `mdpilot wipe` (`--help`, `mdpilot-wipe(8)`); docs/wipe.md has the rest.
pub const WIPE_LONG_ABOUT: &str = "\
Wipe a block device (an array, a member of a stopped array, a disk or a partition) as fast as \
it allows, with progress that counts only durable bytes.

Refused, with nothing written: a device that is mounted (or a partition of it), active swap, \
held by dm/LVM or an active md array, or backing /. The device is opened with O_EXCL. \
--dry-run prints the plan with its reasons: blocks of at least 4 MiB and whole raid5/6 \
stripes, 4 requests in flight; zero by BLKZEROOUT where the device offloads it or is an md \
array (else O_DIRECT writes); random a seekable ChaCha8 stream keyed from getrandom (so \
--verify regenerates it); signatures zeroes the first and last MiB and every md superblock \
location; discard leaves device-defined contents.

Resync: an array resyncing and wiped whole (zero, random, zeroout) has its resync frozen, and \
skipped (resync_start none) only after the last block is durable; on cancel or failure it is \
only unfrozen (idle). --keep-resync opts out. An array recovering, reshaping or checking gets a \
policy lease lowering its sync_speed_min.

Resume: a durable checkpoint in /var/lib/mdpilot/wipe/<id>.json (device identity, method, \
random key, the offset below which every byte is durable) is saved at most once a second \
unless 1 GiB more is durable. --resume continues it; a fresh wipe of a device with a \
checkpoint is refused until --resume or --restart. A completed or cancelled job removes it.

--progress json: one JSON object per line on stdout (plan, progress about twice a second, \
completed; an error before the start is one error event).";

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
    /// Continue the interrupted wipe of DEVICE from its checkpoint (its method, random key and
    /// verify choice; `--method` is ignored). Refused when the checkpoint is another device's
    /// or the size changed.
    #[arg(long, conflicts_with = "restart")]
    pub resume: bool,
    /// Start again at 0 even though DEVICE has a checkpoint of an interrupted wipe (it is
    /// replaced).
    #[arg(long)]
    pub restart: bool,
    /// Where checkpoints live (default /var/lib/mdpilot/wipe under --root; tests).
    #[arg(long, hide = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Benchmarks: `zero` by O_DIRECT writes even where BLKZEROOUT would be used.
    #[arg(long, hide = true)]
    pub force_writes: bool,
    /// Benchmarks: requests in flight (default 4).
    #[arg(long, hide = true, value_name = "N")]
    pub queue_depth: Option<usize>,
}

/// A flag raised by SIGINT, SIGTERM or SIGHUP (a handler that cannot be installed is logged):
/// [`drive`] cancels the job when it is up.
pub(crate) fn cancel_flag() -> Arc<AtomicBool> {
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

/// The exit status of `mdpilot wipe` for `e` ([`WIPE_EXIT_CODES`]): 2 for a refusal or bad
/// usage (nothing written), 130 for a cancel, 1 for every other failure (including
/// [`WipeError::Internal`]).
pub fn exit_code(e: &WipeError) -> u8 {
    match e {
        WipeError::Refused { .. } | WipeError::Usage(_) => 2,
        WipeError::Cancelled { .. } => 130,
        _ => 1,
    }
}

/// Polls `h` every `tick` until it finishes, cancelling it when `flag` is raised; `each` sees
/// every sample (and a last one after the end). Returns the job's result.
pub(crate) fn drive(
    h: JobHandle,
    flag: &AtomicBool,
    tick: Duration,
    mut each: impl FnMut(&Progress),
) -> Result<Outcome, WipeError> {
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

/// Asks on stderr; true when the answer is `yes`, the device as given or resolved, or its
/// kernel name.
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

/// One JSON event on stdout, flushed.
fn json_line(v: serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

/// The wipe `args` ask for. The lease owner is this process.
fn request(args: &WipeArgs) -> Request {
    Request {
        device: args.device.clone(),
        method: args.method,
        options: Options {
            verify: args.verify,
            keep_resync: args.keep_resync,
            owner: Some(crate::policy::process_owner(std::process::id())),
            prefer_writes: args.force_writes,
            queue_depth: args.queue_depth,
            resume: args.resume,
            checkpoint_guard: !args.restart,
            checkpoint_dir: args.state_dir.clone(),
            ..Options::default()
        },
    }
}

/// An error before the job started: the stderr message, and with `--progress json` one
/// `error` event on stdout too, so a JSON reader learns why nothing happened.
fn early(args: &WipeArgs, e: &WipeError) -> ExitCode {
    let code = exit_code(e);
    if args.progress == ProgressMode::Json {
        json_line(serde_json::json!({
            "event": "error",
            "device": args.device,
            "message": crate::error::error_chain(e),
            "exit_code": code,
        }));
    }
    fail(e, code)
}

/// `--dry-run`: the plan (text on stdout, or the JSON `plan` event), nothing written.
fn dry_run(ctx: &Context, args: &WipeArgs) -> ExitCode {
    match crate::wipe::plan_for(&ctx.root, &request(args)) {
        Ok(plan) if args.progress == ProgressMode::Json => json_line(plan_json(&plan, true)),
        Ok(plan) => print!("{}", plan.describe()),
        Err(e) => return early(args, &e),
    }
    ExitCode::SUCCESS
}

/// Shows the plan (JSON event, or the text on stderr) and asks for confirmation unless `--yes`.
///
/// Errors: [`WipeError::Usage`] when not confirmed.
fn approve(args: &WipeArgs, plan: &Plan) -> Result<(), WipeError> {
    if args.progress == ProgressMode::Json {
        json_line(plan_json(plan, false));
    } else {
        eprint!("{}", plan.describe());
    }
    if !args.yes && !confirm(args, plan) {
        return Err(WipeError::Usage(format!(
            "{}: not confirmed; nothing written",
            plan.device.display()
        )));
    }
    Ok(())
}

/// Drives the job to its end, showing its progress as `args.progress` asks: the bar on a
/// terminal (`auto`), a `progress` event at most every 500 ms (`json`), or nothing.
fn follow(
    args: &WipeArgs,
    handle: JobHandle,
    flag: &AtomicBool,
    total: u64,
) -> Result<Outcome, WipeError> {
    let json = args.progress == ProgressMode::Json;
    let bar = (args.progress == ProgressMode::Auto && std::io::stderr().is_terminal())
        .then(|| Bar::new(total));
    let mut last_json = Instant::now() - Duration::from_secs(1);
    let result = drive(handle, flag, Duration::from_millis(100), |pr| {
        if let Some(b) = &bar {
            b.update(pr);
        }
        if json && last_json.elapsed() >= Duration::from_millis(500) {
            last_json = Instant::now();
            json_line(progress_event(pr));
        }
    });
    if let Some(b) = &bar {
        b.finish(result.is_ok());
    }
    result
}

/// The end of a job: the `completed` event (JSON) or the summary / error on stderr, and the
/// exit status.
fn report(args: &WipeArgs, plan: &Plan, result: Result<Outcome, WipeError>) -> ExitCode {
    let json = args.progress == ProgressMode::Json;
    match result {
        Ok(o) => {
            if json {
                json_line(serde_json::json!({
                    "event": "completed", "success": true, "message": "done", "outcome": o,
                }));
            } else {
                eprintln!(
                    "mdpilot: {}: wiped {} in {:.1} s ({}){}{}",
                    plan.device.display(),
                    bytes_exact(o.bytes),
                    o.wipe_s,
                    human_rate(o.rate_bytes_per_s),
                    if o.verified { ", verified" } else { "" },
                    if o.resync_skipped {
                        ", initial resync skipped"
                    } else {
                        ""
                    }
                );
                if o.offloaded {
                    eprintln!("mdpilot: the members zeroed their data regions themselves");
                }
                if o.resumed_bytes > 0 {
                    eprintln!(
                        "mdpilot: resumed: {} were durable from the interrupted run",
                        bytes_exact(o.resumed_bytes)
                    );
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            if json {
                json_line(serde_json::json!({
                    "event": "completed", "success": false, "message": e.to_string(),
                }));
            }
            fail(&e, exit_code(&e))
        }
    }
}

/// Runs `mdpilot wipe`. Exit status ([`WIPE_EXIT_CODES`]): 0 success (and for `--dry-run`),
/// 1 failure, 2 refused, bad usage or confirmation declined, 130 cancelled by a signal.
pub fn run_wipe(ctx: &Context, args: WipeArgs) -> ExitCode {
    if args.dry_run {
        return dry_run(ctx, &args);
    }
    let mut flag = None;
    let started = crate::wipe::start(&ctx.root, &request(&args), |plan| {
        approve(&args, plan)?;
        // Only now: a signal during the prompt still ends the command at once.
        flag = Some(cancel_flag());
        Ok::<_, WipeError>(Hooks::new(policy_leases(ctx)))
    });
    let (handle, plan) = match started {
        Ok(s) => s,
        Err(e) => return early(&args, &e),
    };
    let flag = flag.unwrap_or_default();
    let result = follow(&args, handle, &flag, plan.total_bytes());
    report(&args, &plan, result)
}

/// The job's leases go through the real policy (same state file and lock as `mdpilot policy`).
/// A broken configuration is logged and the defaults are used: the wipe must not fail for it.
pub(crate) fn policy_leases(ctx: &Context) -> Arc<dyn LeaseProvider> {
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
