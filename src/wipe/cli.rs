//! `mdpilot wipe` and the installer's drop-in `mdpilot blockdev-wipe`.

use crate::cli::Context;
use std::process::ExitCode;

/// Arguments of `mdpilot wipe DEVICE ...`.
#[derive(Debug, clap::Args)]
pub struct WipeArgs {
    /// Block device to wipe.
    pub device: String,
}

/// Arguments of `mdpilot blockdev-wipe [-f FILE] [-s NUM] DEVICE`.
#[derive(Debug, clap::Args)]
pub struct BlockdevWipeArgs {
    /// Block device to wipe.
    pub device: String,
}

/// Runs `mdpilot wipe`.
pub fn run_wipe(_ctx: &Context, _args: WipeArgs) -> ExitCode {
    eprintln!("mdpilot: wipe: not implemented yet");
    ExitCode::from(1)
}

/// Runs `mdpilot blockdev-wipe`.
pub fn run_blockdev_wipe(_ctx: &Context, _args: BlockdevWipeArgs) -> ExitCode {
    eprintln!("mdpilot: blockdev-wipe: not implemented yet");
    ExitCode::from(1)
}
