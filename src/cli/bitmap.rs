//! `mdpilot bitmap add [--wait | --queue] ARRAY...`: gives redundant arrays an internal
//! write-intent bitmap through `mdadm --grow --bitmap=internal` ([`crate::bitmap`]). Works in
//! the installer's build (no service needed).
//!
//! While a sync runs (or the array is frozen) md refuses a bitmap: `--wait` waits for
//! `md/sync_action` to read `idle` (re-read every second) and then adds it; `--queue` appends the
//! array's UUID to `/var/lib/mdpilot/bitmap-wanted`, which the service consumes when the sync
//! ends; with neither the command fails for that array and says so.
//!
//! Exit codes: 0 every array has a bitmap now (or is queued with `--queue`), 1 any error (each
//! array's on stderr; the others are still done).

use crate::bitmap::{add_now, plan, read_array, wanted, BitmapError, Plan};
use crate::cli::Context;
use crate::host::Root;
use std::process::ExitCode;
use std::time::Duration;

/// The long help of `mdpilot bitmap` (`--help`, `mdpilot-bitmap(8)`).
pub const BITMAP_LONG_ABOUT: &str = "\
Write-intent bitmaps. Without one, md resyncs a whole redundant array after a crash or a power \
loss; with one, only the regions written just before. `mdpilot status` names the arrays without \
one and estimates that full resync.

add: runs `mdadm --grow --bitmap=internal /dev/mdX` (mdadm does the superblock work). md \
refuses while a sync runs or the array is frozen: --wait waits for md/sync_action to read idle, \
then adds it; --queue leaves it to the service (the array's UUID goes to \
/var/lib/mdpilot/bitmap-wanted; the service adds the bitmap when the sync ends). The lockless \
bitmap (llbitmap) is never added: the kernel marks it experimental. MDPILOT_MDADM names another \
mdadm program.

Exit status: 0 success, 1 any error (each array's error on stderr; the others are still done).";

/// `mdpilot bitmap ...`.
#[derive(Debug, clap::Subcommand)]
pub enum BitmapCommand {
    /// Add an internal write-intent bitmap (mdadm --grow --bitmap=internal).
    Add {
        /// While a sync runs, wait for it to end, then add the bitmap.
        #[arg(long, conflicts_with = "queue")]
        wait: bool,
        /// While a sync runs, leave the bitmap to the service (bitmap-wanted) and return.
        #[arg(long)]
        queue: bool,
        /// Arrays: md0, /dev/md0, /dev/md/NAME, md/NAME or the metadata name.
        #[arg(required = true)]
        arrays: Vec<String>,
    },
}

/// How often `--wait` re-reads `md/sync_action`.
const WAIT_STEP: Duration = Duration::from_secs(1);

/// Runs `mdpilot bitmap ...`.
pub fn run(ctx: &Context, cmd: BitmapCommand) -> ExitCode {
    let BitmapCommand::Add {
        wait,
        queue,
        arrays,
    } = cmd;
    let known = crate::sysfs::read_mdstat(&ctx.root)
        .map(|m| m.arrays.into_iter().map(|a| a.name).collect::<Vec<_>>())
        .unwrap_or_default();
    let mut failed = false;
    for word in &arrays {
        let name = match crate::array_names::resolve_array(&ctx.root, word, &known) {
            Ok(n) => n,
            Err(e) => {
                eprintln!("mdpilot: {e}");
                failed = true;
                continue;
            }
        };
        match add_one(&ctx.root, &name, wait, queue) {
            Ok(msg) => println!("{msg}"),
            Err(e) => {
                eprintln!("mdpilot: {}", crate::error::error_chain(&e));
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Why one array got no bitmap from the CLI.
#[derive(Debug, thiserror::Error)]
pub enum AddError {
    /// The core refused or mdadm failed.
    #[error(transparent)]
    Bitmap(#[from] BitmapError),
    /// A sync runs and neither `--wait` nor `--queue` was given.
    #[error(
        "{0} runs {1}: md adds no bitmap until it ends (--wait waits for it; --queue leaves it to \
         the service)"
    )]
    Syncing(String, String),
}

/// Adds the bitmap of `name` (kernel name), waiting or queueing as asked; the line to print.
fn add_one(root: &Root, name: &str, wait: bool, queue: bool) -> Result<String, AddError> {
    let mut told = false;
    loop {
        let a = read_array(root, name)?;
        match plan(&a)? {
            Plan::AlreadyHas(b) => {
                return Ok(format!("{name}: has a write-intent bitmap already ({b})"))
            }
            Plan::AddNow => {
                if let Plan::WaitForSync(_) = add_now(root, name)? {
                    continue; // A sync started in between: plan again.
                }
                tracing::info!(array = %name, "added an internal write-intent bitmap");
                return Ok(format!("{name}: added an internal write-intent bitmap"));
            }
            Plan::WaitForSync(action) if queue => {
                crate::bitmap::queue(root, &a)?;
                return Ok(format!(
                    "{name}: runs {action}; queued in {} for the service",
                    wanted::WANTED_PATH
                ));
            }
            Plan::WaitForSync(action) if !wait => {
                return Err(AddError::Syncing(name.to_string(), action.to_string()))
            }
            Plan::WaitForSync(action) => {
                if !told {
                    eprintln!("mdpilot: {name} runs {action}; waiting for it to end");
                    told = true;
                }
                std::thread::sleep(WAIT_STEP);
            }
        }
    }
}
