//! The `mdpilot` command: subcommands only dispatch into the library.

use clap::{Parser, Subcommand};
use mdpilot::cli::Context;
use mdpilot::host::Root;
use std::path::PathBuf;
use std::process::ExitCode;

/// mdpilot: make md RAID arrays cooperate with installers and admins.
#[derive(Debug, Parser)]
#[command(name = "mdpilot", version, about)]
struct Cli {
    /// Prefix for /proc, /sys, /dev and /run (tests and the simulator use a temporary tree).
    #[arg(
        long,
        global = true,
        default_value = "/",
        env = "MDPILOT_ROOT",
        value_name = "DIR"
    )]
    root: PathBuf,

    /// More log output (-v info, -vv debug, -vvv trace). RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show md arrays, members and any resync (like `mdadm --detail`'s summary).
    Status(mdpilot::cli::status::StatusArgs),
    /// Resync priority: leases on /proc/sys/dev/raid/speed_limit_{min,max} and per-array limits.
    #[command(subcommand)]
    Policy(mdpilot::cli::policy::PolicyCommand),
    /// Wipe a block device (array or member) as fast as the device allows, with honest progress.
    Wipe(mdpilot::cli::wipe::WipeArgs),
    /// Drop-in for the Debian installer's blockdev-wipe: 1000 lines of `*` as progress.
    BlockdevWipe(mdpilot::cli::blockdev_wipe::BlockdevWipeArgs),
    /// Run the service: watch arrays and publish them on D-Bus.
    Serve(mdpilot::service::ServeArgs),
    /// Checks (scrubs): start, pause, resume, cancel, status; resumable and throttled.
    #[command(subcommand)]
    Check(mdpilot::cli::check::CheckCommand),
    /// Follow the service's D-Bus signals, one line per change.
    Monitor(mdpilot::cli::monitor::MonitorArgs),
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // d-i hooks send stderr to syslog: colour codes only for a terminal.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// Called as `blockdev-wipe` (a symlink, as the installer expects): behave as that subcommand.
fn args() -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let invoked_as = args.first().and_then(|a| {
        std::path::Path::new(a)
            .file_name()
            .map(|f| f.to_os_string())
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
    init_logging(cli.verbose);
    let ctx = Context {
        root: Root::new(cli.root),
    };
    match cli.command {
        Command::Status(a) => mdpilot::cli::status::run(&ctx, a),
        Command::Policy(c) => mdpilot::cli::policy::run(&ctx, c),
        Command::Wipe(a) => mdpilot::cli::wipe::run_wipe(&ctx, a),
        Command::BlockdevWipe(a) => mdpilot::cli::blockdev_wipe::run_blockdev_wipe(&ctx, a),
        Command::Serve(a) => mdpilot::service::run(&ctx, a),
        Command::Check(c) => mdpilot::cli::check::run(&ctx, c),
        Command::Monitor(a) => mdpilot::cli::monitor::run(&ctx, a),
    }
}
