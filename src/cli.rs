//! Shared pieces of the command-line front end: the global context and error reporting.

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
    eprintln!("mdpilot: {}", error_chain(err));
    ExitCode::from(code)
}

/// `error: cause: cause...` on one line: the whole `source()` chain of `err`.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut msg = err.to_string();
    let mut src = err.source();
    while let Some(e) = src {
        msg.push_str(": ");
        msg.push_str(&e.to_string());
        src = e.source();
    }
    msg
}
