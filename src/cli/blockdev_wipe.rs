//! `mdpilot blockdev-wipe [-f FILE] [-s NUM] DEVICE`: the Debian installer's drop-in.
//!
//! Same job as `mdpilot wipe --method zero` (or writing `-f FILE`'s data), but the installer's
//! contract: one `*` line per 1/1000 of the device made durable (exactly 1000 lines on success)
//! on stdout, and exit 0 or 1 only.

use crate::cli::wipe::{cancel_flag, drive, policy_leases};
use crate::cli::Context;
use crate::wipe::plan::{Data, Method, Options};
use crate::wipe::{Hooks, Request, WipeError};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Exit statuses of `mdpilot blockdev-wipe`, shown by `--help`.
pub const BLOCKDEV_WIPE_EXIT_CODES: &str = "\
Exit status (as the installer's callers expect):
  0    success: exactly 1000 lines of `*` were printed
  1    any error, including bad usage and cancel by a signal";

/// Arguments of `mdpilot blockdev-wipe [-f FILE] [-s NUM] DEVICE`.
#[derive(Debug, clap::Args)]
#[command(after_help = BLOCKDEV_WIPE_EXIT_CODES)]
pub struct BlockdevWipeArgs {
    /// Data source: a regular file's content (any size) is repeated over the device; anything
    /// else (`/dev/urandom`, a pipe) is read as a stream in device order and must not end
    /// before the device does. Default: zeroes.
    #[arg(short = 'f', value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Block size in bytes the caller asks for (512 B to 64 MiB, a multiple of 512;
    /// partman-crypto passes 512 KiB); accepted, but the planner may use a larger aligned size
    /// (at least 4 MiB, full stripes) — the result on disk is the same.
    #[arg(short = 's', value_name = "NUM", value_parser = parse_block_size)]
    pub size: Option<u64>,
    /// Block device to wipe.
    pub device: PathBuf,
}

/// The bounds of `-s`, bytes: [`MIN_BLOCK`] ..= [`MAX_BLOCK`], a multiple of [`MIN_BLOCK`].
pub const MIN_BLOCK: u64 = 512;
/// See [`MIN_BLOCK`] (64 MiB: the block buffers are `queue_depth` blocks of this size).
pub const MAX_BLOCK: u64 = 64 << 20;

/// Parses `-s NUM` (bytes) within [`MIN_BLOCK`] ..= [`MAX_BLOCK`], a multiple of 512.
///
/// Errors: the sentence clap prints as a usage error (exit status 1).
pub fn parse_block_size(s: &str) -> Result<u64, String> {
    let n: u64 = s
        .parse()
        .map_err(|e| format!("not a number of bytes: {e}"))?;
    if !(MIN_BLOCK..=MAX_BLOCK).contains(&n) || n % MIN_BLOCK != 0 {
        return Err(format!(
            "the block size must be a multiple of {MIN_BLOCK} bytes from {MIN_BLOCK} to {MAX_BLOCK} \
             (64 MiB); partman-crypto passes 524288"
        ));
    }
    Ok(n)
}

/// Largest regular file `-f` loads into memory to repeat; larger ones are repeated by `pread`
/// from the file (a small file read by `pread` would cost many calls per block).
const MAX_PATTERN: u64 = 1 << 20;

/// The data `-f FILE` stands for: a small regular file's content ([`Data::Pattern`]), a large
/// one by `pread` ([`Data::RepeatFile`]), anything else a stream ([`Data::Stream`]).
///
/// Errors: [`WipeError::Open`] (stat or read), [`WipeError::Usage`] (an empty regular file).
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

/// Prints `*` lines on stdout up to a count, remembering how many it printed.
struct Stars(u64);

impl Stars {
    fn upto(&mut self, n: u64) {
        let mut out = std::io::stdout().lock();
        while self.0 < n {
            // The reader (the installer's progress loop) may be gone: keep wiping.
            let _ = out.write_all(b"*\n");
            self.0 += 1;
        }
        let _ = out.flush();
    }
}

/// The job of `args`: its data, plan, leases and stars, to the end.
fn wipe(ctx: &Context, args: &BlockdevWipeArgs) -> Result<(), WipeError> {
    let data = args.file.as_deref().map(data_source).transpose()?;
    let req = Request {
        device: args.device.clone(),
        method: Method::Zero,
        options: Options {
            data,
            block_hint: args.size,
            owner: Some(crate::policy::process_owner(std::process::id())),
            ..Options::default()
        },
    };
    let mut flag = None;
    let (handle, plan) = crate::wipe::start(&ctx.root, &req, |plan| {
        for r in &plan.reasons {
            tracing::info!("{}: {r}", plan.device.display());
        }
        flag = Some(cancel_flag());
        Ok::<_, WipeError>(Hooks::new(policy_leases(ctx)))
    })?;
    let flag = flag.unwrap_or_default();
    let total = plan.total_bytes();
    let mut stars = Stars(0);
    drive(handle, &flag, Duration::from_millis(50), |pr| {
        stars.upto(stars_for(pr.done_bytes, total));
    })?;
    stars.upto(1000);
    Ok(())
}

/// Runs `mdpilot blockdev-wipe`: prints one `*` line per 1/1000 of the device made durable
/// (exactly 1000 lines on success), exits 0 on success and 1 on any error or cancel.
pub fn run_blockdev_wipe(ctx: &Context, args: BlockdevWipeArgs) -> ExitCode {
    match wipe(ctx, &args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("blockdev-wipe: {}", crate::error::error_chain(&e));
            ExitCode::from(1)
        }
    }
}
