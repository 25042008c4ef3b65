//! The `mdpilot` command: subcommands only dispatch into the library.

use clap::Parser;
use mdpilot::cli::args::{Cli, Command};
use mdpilot::cli::Context;
use mdpilot::host::Root;
use std::process::ExitCode;

/// The level by `-v` count; `base` is the level without `-v`.
fn verbose_level(verbose: u8, base: &str) -> &str {
    match verbose {
        0 => base,
        1 => "info",
        2 => "debug",
        _ => "trace",
    }
}

/// The log filter: `RUST_LOG` (EnvFilter directives), else by `-v` count.
#[cfg(feature = "service")]
fn log_filter(verbose: u8, base: &str) -> tracing_subscriber::EnvFilter {
    tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(verbose_level(verbose, base)))
}

/// The installer build's filter: `RUST_LOG` when it is a plain level (`debug`, `info`...), else
/// by `-v` count (no EnvFilter: its regex engine would double the binary).
#[cfg(not(feature = "service"))]
fn log_filter(verbose: u8, base: &str) -> tracing_subscriber::filter::LevelFilter {
    let level = |s: &str| {
        s.trim()
            .parse::<tracing_subscriber::filter::LevelFilter>()
            .ok()
    };
    std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| level(&v))
        .or_else(|| level(verbose_level(verbose, base)))
        .unwrap_or(tracing_subscriber::filter::LevelFilter::WARN)
}

/// Whether stderr is the journal: systemd sets `JOURNAL_STREAM=DEV:INODE` to the stream it
/// connected stdout/stderr to (systemd.exec(5)); compared with stderr's own device and inode so
/// that a child with stderr redirected elsewhere does not count.
#[cfg(feature = "service")]
fn stderr_is_journal() -> bool {
    let Some(v) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = v.to_str().and_then(|v| v.split_once(':')) else {
        return false;
    };
    match nix::sys::stat::fstat(libc::STDERR_FILENO) {
        Ok(st) => dev.parse() == Ok(st.st_dev) && ino.parse() == Ok(st.st_ino),
        Err(_) => false,
    }
}

/// `serve` under systemd logs to the journal natively (priorities, and the events' fields as
/// journal fields: ARRAY=, DEVICE=, UID=, JOB=, ...), at info unless told otherwise. Returns
/// false when it did not (not `serve`, not the journal, or the journal socket cannot be opened).
#[cfg(feature = "service")]
fn init_journald(verbose: u8, serve: bool) -> bool {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    if !serve || !stderr_is_journal() {
        return false;
    }
    let layer = match tracing_journald::layer() {
        Ok(l) => l
            .with_field_prefix(None)
            .with_syslog_identifier("mdpilot".into()),
        Err(e) => {
            eprintln!("mdpilot: journald socket unavailable, logging to stderr: {e}");
            return false;
        }
    };
    tracing_subscriber::registry()
        .with(log_filter(verbose, "info"))
        .with(layer)
        .try_init()
        .is_ok()
}

#[cfg(not(feature = "service"))]
fn init_journald(_verbose: u8, _serve: bool) -> bool {
    false
}

/// Logging on stderr, or the journal for `serve` under systemd ([`init_journald`]).
fn init_logging(verbose: u8, serve: bool) {
    if init_journald(verbose, serve) {
        return;
    }
    let b = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // d-i hooks send stderr to syslog: colour codes only for a terminal.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    #[cfg(feature = "service")]
    let _ = b.with_env_filter(log_filter(verbose, "warn")).try_init();
    #[cfg(not(feature = "service"))]
    let _ = b.with_max_level(log_filter(verbose, "warn")).try_init();
}

/// Called as `blockdev-wipe` (a symlink, as the installer expects): behave as that subcommand.
fn args() -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let invoked_as = args.first().and_then(|a| {
        std::path::Path::new(a)
            .file_name()
            .map(std::ffi::OsStr::to_os_string)
    });
    if invoked_as.as_deref() == Some(std::ffi::OsStr::new("blockdev-wipe")) {
        args.insert(1, "blockdev-wipe".into());
    }
    args
}

/// Whether the command line asks for the `blockdev-wipe` subcommand (directly or by argv[0]):
/// the first word that is not an option or the value of `--root`.
fn is_blockdev_wipe(argv: &[std::ffi::OsString]) -> bool {
    let mut it = argv.iter().skip(1);
    while let Some(a) = it.next() {
        if a == "--root" {
            it.next();
        } else if !a.to_string_lossy().starts_with('-') {
            return a == "blockdev-wipe";
        }
    }
    false
}

fn main() -> ExitCode {
    let argv = args();
    let cli = match Cli::try_parse_from(&argv) {
        Ok(c) => c,
        Err(e) => {
            // The installer's callers of blockdev-wipe treat any exit but 0 and 1 as a crash:
            // its usage errors exit 1 (clap's default is 2). --help/--version still exit 0.
            if e.use_stderr() && is_blockdev_wipe(&argv) {
                let _ = e.print();
                return ExitCode::from(1);
            }
            e.exit();
        }
    };
    #[cfg(feature = "service")]
    let serve = matches!(cli.command, Command::Serve(_));
    #[cfg(not(feature = "service"))]
    let serve = false;
    init_logging(cli.verbose, serve);
    let ctx = Context {
        root: Root::new(cli.root),
    };
    match cli.command {
        Command::Status(a) => mdpilot::cli::status::run(&ctx, a),
        Command::Policy(c) => mdpilot::cli::policy::run(&ctx, c),
        Command::Wipe(a) => mdpilot::cli::wipe::run_wipe(&ctx, a),
        Command::BlockdevWipe(a) => mdpilot::cli::blockdev_wipe::run_blockdev_wipe(&ctx, a),
        #[cfg(feature = "service")]
        Command::Serve(a) => mdpilot::service::run(&ctx.root, a),
        Command::Check(c) => mdpilot::cli::check::run(&ctx, c),
        Command::Bitmap(c) => mdpilot::cli::bitmap::run(&ctx, c),
        #[cfg(feature = "service")]
        Command::Monitor(a) => mdpilot::cli::monitor::run(&ctx, a),
    }
}
