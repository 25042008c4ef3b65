//! The command line's clap definitions: the global options and one variant per subcommand.
//!
//! `main.rs` parses with [`Cli`]; `xtask` renders the man pages and shell completions from
//! [`command`], so `--help`, `mdpilot(8)` and tab completion come from the same source.

use clap::{CommandFactory, Parser, Subcommand};
use std::path::PathBuf;

/// mdpilot: make md RAID arrays cooperate with installers and admins.
#[derive(Debug, Parser)]
#[command(name = "mdpilot", version, about)]
pub struct Cli {
    /// Prefix for every system path: /proc, /sys, /dev, /run, the configuration in /etc and
    /// /usr/lib, and the state in /var/lib (tests and the simulator use a temporary tree).
    #[arg(
        long,
        global = true,
        default_value = "/",
        env = "MDPILOT_ROOT",
        value_name = "DIR"
    )]
    pub root: PathBuf,

    /// More log output (-v info, -vv debug, -vvv trace). RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// The subcommand and its own arguments.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands; each variant's arguments live beside its front end in `cli/` (`serve`'s in
/// `service`). `serve` and `monitor` exist only with the `service` feature.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show md arrays, members and any resync (like `mdadm --detail`'s summary).
    Status(crate::cli::status::StatusArgs),
    /// Resync priority: leases on /proc/sys/dev/raid/speed_limit_{min,max} and per-array limits.
    #[command(subcommand, long_about = crate::cli::policy::POLICY_LONG_ABOUT)]
    Policy(crate::cli::policy::PolicyCommand),
    /// Wipe a block device (array or member) as fast as the device allows, with honest progress.
    #[command(long_about = crate::cli::wipe::WIPE_LONG_ABOUT)]
    Wipe(crate::cli::wipe::WipeArgs),
    /// Drop-in for the Debian installer's blockdev-wipe: 1000 lines of `*` as progress.
    BlockdevWipe(crate::cli::blockdev_wipe::BlockdevWipeArgs),
    /// Write-intent bitmaps: add one to a redundant array (mdadm --grow --bitmap=internal).
    #[command(subcommand, long_about = crate::cli::bitmap::BITMAP_LONG_ABOUT)]
    Bitmap(crate::cli::bitmap::BitmapCommand),
    /// Run the service: watch arrays and publish them on D-Bus.
    #[cfg(feature = "service")]
    Serve(crate::service::ServeArgs),
    /// Checks (scrubs): start, pause, resume, cancel, status; resumable and throttled.
    #[command(subcommand, long_about = crate::cli::check::CHECK_LONG_ABOUT)]
    Check(crate::cli::check::CheckCommand),
    /// Follow the service's D-Bus signals, one line per change (or, with --events, mdadm-style
    /// events read from the kernel directly, no service needed).
    #[cfg(feature = "service")]
    Monitor(crate::cli::monitor::MonitorArgs),
}

/// The whole command tree (`mdpilot` and its subcommands) as clap builds it from [`Cli`]: what
/// `--help` prints and what the man pages and completions are rendered from.
pub fn command() -> clap::Command {
    Cli::command()
}
