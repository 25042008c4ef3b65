//! `mdpilot monitor`: follows the service's D-Bus signals (issue 4 fills this in).

use crate::cli::Context;
use std::process::ExitCode;

/// Arguments of `mdpilot monitor [--json]`.
#[derive(Debug, clap::Args)]
pub struct MonitorArgs {
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
}

/// Runs `mdpilot monitor` until interrupted.
pub fn run(_ctx: &Context, _args: MonitorArgs) -> ExitCode {
    eprintln!("mdpilot: monitor: not implemented yet");
    ExitCode::from(1)
}
