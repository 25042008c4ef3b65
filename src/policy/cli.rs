//! `mdpilot policy ...` subcommands.

use crate::cli::Context;
use std::process::ExitCode;

/// `mdpilot policy show|apply|release|restore`.
#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    /// Show saved originals, live leases and current limits.
    Show {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs a `mdpilot policy` subcommand.
pub fn run(_ctx: &Context, _cmd: PolicyCommand) -> ExitCode {
    eprintln!("mdpilot: policy: not implemented yet");
    ExitCode::from(1)
}
