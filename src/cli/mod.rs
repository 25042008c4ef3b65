//! The command-line front ends: one file per subcommand, the clap definitions (`args`), the global
//! context and exit helper.

pub mod args;
pub mod bitmap;
pub mod blockdev_wipe;
pub mod check;
#[cfg(feature = "service")]
pub mod monitor;
pub mod policy;
#[cfg(feature = "service")]
pub mod polkit_agent;
pub mod progress;
pub mod prometheus;
pub mod status;
pub mod wipe;

use crate::host::Root;
use std::process::ExitCode;

/// What every subcommand gets from the global options.
#[derive(Debug, Clone)]
pub struct Context {
    /// `--root DIR`: prefixes `/proc`, `/sys`, `/dev` and `/run` (default `/`).
    pub root: Root,
}

/// Prints `mdpilot: <error>: <cause>: <cause>...` on stderr (the whole chain, once) and returns
/// `ExitCode::from(code)`.
pub fn fail(err: &dyn std::error::Error, code: u8) -> ExitCode {
    eprintln!("mdpilot: {}", crate::error::error_chain(err));
    ExitCode::from(code)
}
