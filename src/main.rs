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
    Status(mdpilot::status::StatusArgs),
    /// Resync priority: leases on /proc/sys/dev/raid/speed_limit_{min,max} and per-array limits.
    #[command(subcommand)]
    Policy(mdpilot::policy::cli::PolicyCommand),
    /// Wipe a block device (array or member) as fast as the device allows, with honest progress.
    Wipe(mdpilot::wipe::cli::WipeArgs),
    /// Drop-in for the Debian installer's blockdev-wipe: 1000 lines of `*` as progress.
    BlockdevWipe(mdpilot::wipe::cli::BlockdevWipeArgs),
    /// Run the service: watch arrays and publish them on D-Bus.
    Serve(mdpilot::service::ServeArgs),
    /// Follow the service's D-Bus signals, one line per change.
    Monitor(mdpilot::monitor::MonitorArgs),
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

fn main() -> ExitCode {
    let cli = Cli::parse_from(args());
    init_logging(cli.verbose);
    let ctx = Context {
        root: Root::new(cli.root),
    };
    match cli.command {
        Command::Status(a) => mdpilot::status::run(&ctx, a),
        Command::Policy(c) => mdpilot::policy::cli::run(&ctx, c),
        Command::Wipe(a) => mdpilot::wipe::cli::run_wipe(&ctx, a),
        Command::BlockdevWipe(a) => mdpilot::wipe::cli::run_blockdev_wipe(&ctx, a),
        Command::Serve(a) => mdpilot::service::run(&ctx, a),
        Command::Monitor(a) => mdpilot::monitor::run(&ctx, a),
    }
}
