//! The hook through which `mdpilot policy` goes through the D-Bus service when it runs.
//!
//! Without the service (the Debian installer has no D-Bus) the CLI works on the files directly
//! under the state-file lock. Once the service exists, [`try_service`] forwards the command to it
//! so that the service stays the single writer while it runs.

use super::cli::PolicyCommand;
use crate::cli::Context;
use std::process::ExitCode;

/// Runs `cmd` through the running service and returns its exit code; `None` when no service
/// answers (today: always), in which case the caller works on the files itself.
pub fn try_service(_ctx: &Context, _cmd: &PolicyCommand) -> Option<ExitCode> {
    None
}
