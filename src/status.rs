//! `mdpilot status`: arrays from /proc/mdstat enriched with sysfs (issue 2 fills this in).

use crate::cli::Context;
use std::process::ExitCode;

/// Arguments of `mdpilot status [--json] [ARRAY...]`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Print JSON following the status-json contract.
    #[arg(long)]
    pub json: bool,
    /// Arrays to show (`md0`, `/dev/md0`); all when none is given.
    pub arrays: Vec<String>,
}

/// Runs `mdpilot status`.
pub fn run(_ctx: &Context, _args: StatusArgs) -> ExitCode {
    eprintln!("mdpilot: status: not implemented yet");
    ExitCode::from(1)
}
