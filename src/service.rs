//! `mdpilot serve`: the one event loop (issue 4 fills this in).

use crate::cli::Context;
use std::process::ExitCode;

/// Arguments of `mdpilot serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Run against a simulated kernel tree.
    #[arg(long)]
    pub sim: bool,
}

/// Runs the service until SIGTERM/SIGINT.
pub fn run(_ctx: &Context, _args: ServeArgs) -> ExitCode {
    eprintln!("mdpilot: serve: not implemented yet");
    ExitCode::from(1)
}
