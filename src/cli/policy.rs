//! `mdpilot policy show|apply|release|restore`: the policy from the command line.
//!
//! Exit codes: 0 success, 1 any error (message on stderr naming the file and the reason).
//! Mutating commands first drop leases whose `--pid` owner has died (bus-name owners are kept:
//! only the service can see the bus, and it reaps them).
//!
//! Through the service: `apply|release|restore` go through the D-Bus service when it runs, so
//! that the service stays the single writer of the limits while it runs (`service::try_service`,
//! with the `service` feature; the installer's build always works on the files).
//!
//! Which bus: env `MDPILOT_BUS` (`system`, `session` or a D-Bus address); when unset, the system
//! bus, and only when the root is `/` (a `--root` tree is never the running system's service).
//! The connection and the check that `org.mdpilot.MdPilot1` has an owner must succeed within
//! [`PROBE_TIMEOUT`]; otherwise (no bus, no service — the Debian installer has no D-Bus) the CLI
//! works on the files directly under the state-file lock.
//!
//! Mapping: `apply` → `AcquirePriority` with `holder`, `kind`, `pid`, `min`/`max` or `arrays`
//! (no limits: the service's install policy) — a holder lease, which outlives the CLI's
//! connection; `release` → `ReleasePriority(holder)` (a holder without a lease is a warning, as
//! on the file path); `restore` → `RestoreLimits({defaults})`. A D-Bus error (`NotAuthorized`,
//! `InvalidArgument`, ...) is printed and the exit code is 1 — no fall-back to the files then.
//! After success the output is the file path's: the view read with [`Policy::show`] from the same
//! state file. `show` always reads the files directly (reading needs no single writer).

use crate::cli::{fail, Context};
use crate::config::Config;
use crate::policy::{
    cli_alive, Holder, LeaseKind, LeaseRequest, Limits, Owner, Policy, PolicyView,
};
use std::collections::BTreeMap;
use std::process::ExitCode;

#[cfg(feature = "service")]
pub mod service;
#[cfg(feature = "service")]
pub use service::{acquire_options, bus_for, try_service, PROBE_TIMEOUT};

/// The long help of `mdpilot policy` (`--help`, `mdpilot-policy(8)`); docs/policy.md has the rest.
pub const POLICY_LONG_ABOUT: &str = "\
Resync priority: leases on the md resync speed limits, in KiB/s: the global \
/proc/sys/dev/raid/speed_limit_{min,max} and each array's md/sync_speed_{min,max}.

A lease is a holder name, a kind (installer, wipe-job, admin, dbus-client), an owner (a pid, a \
D-Bus name or none) and optional global and per-array min/max. The value in force for each \
limit is the most yielding request among live leases: the lowest min and the lowest max. Taking \
a lease again under the same holder replaces it. The first lease on a limit saves its original \
(per array: the value and whether it was `system`) in the state file before the first write; \
when no lease wants the limit any more, the original is written back. A value someone else \
wrote meanwhile is left in place, with a warning in `policy show`.

--io-depth N leases sync_io_depth (Linux 6.16+; /proc/sys/dev/raid/sync_io_depth and \
md/sync_io_depth): how many resync requests md keeps in flight while the array is busy, lowest \
wins as for the limits; a kernel without it never sees it written, and that is no error.

A per-array min or max of 0 is written as 1 (md rejects 0 there); the global limits accept 0 \
(min 0: resync always yields; max 0: paused). --array takes md0, /dev/md0, /dev/md/NAME, \
md/NAME or the metadata name. --pid leases are dropped once the process has exited; a lease \
without owner lives until `release` or `restore`. --for DURATION makes a timed lease, \
--profile NAME takes the limits of the config's [profiles.NAME].

While the service runs, apply, release and restore go through it (AcquirePriority, \
ReleasePriority, RestoreLimits on the bus given by MDPILOT_BUS, or the system bus when --root \
is /), so it stays the only writer; without it (the Debian installer) they work on the state \
file /run/mdpilot/policy.toml under its lock. A D-Bus error is printed and exits 1, without \
falling back to the files. `show` only reads. A corrupt state file is moved aside \
(policy.toml.corrupt-<time>) and the originals are then unknown until `restore --defaults`.

Exit status: 0 success, 1 any error (the message names the file and the reason).";

/// `mdpilot policy show|apply|release|restore`.
#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    /// Show saved originals, current limits, live leases and warnings.
    Show {
        /// Print JSON (the `PolicyView` shape).
        #[arg(long)]
        json: bool,
    },
    /// Take (or replace) a lease. Without --min/--max/--io-depth: the install policy (global min from the
    /// config's `install_min`, default 0).
    Apply(ApplyArgs),
    /// Drop a holder's lease; knobs no other lease wants get their originals back. A wipe
    /// job's (wipe:, freeze:), a check's (check-) or a bus client's (dbus-) lease is refused:
    /// it ends with its job, check or client.
    Release {
        /// The holder whose lease to drop.
        #[arg(long, value_name = "NAME")]
        holder: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Drop all leases and write the originals back (the installer's finish step).
    Restore {
        /// Ignore saved originals (or a corrupt state file) and write the kernel defaults:
        /// speed_limit_min 1000, speed_limit_max 200000, `system` per array.
        #[arg(long)]
        defaults: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Options of `mdpilot policy apply`.
#[derive(Debug, clap::Args)]
pub struct ApplyArgs {
    /// Wanted minimum resync speed, KiB/s (0: resync always yields to other I/O; per array, 0
    /// is written as 1, the lowest the kernel accepts).
    #[arg(long, value_name = "KIBS")]
    pub min: Option<u64>,
    /// Wanted maximum resync speed, KiB/s (0 pauses resync; per array, 0 is written as 1, the
    /// lowest the kernel accepts).
    #[arg(long, value_name = "KIBS")]
    pub max: Option<u64>,
    /// Wanted resync I/O depth: requests md keeps in flight while the array is busy
    /// (sync_io_depth, Linux 6.16+, kernel default 32; 0 is written as 1). Higher lets resync
    /// through faster, lower yields more. Not written on kernels without it.
    #[arg(long, value_name = "N")]
    pub io_depth: Option<u64>,
    /// Apply to this array's sync_speed_{min,max} and sync_io_depth (`md0`, `/dev/md0`, `/dev/md/NAME`, `md/NAME`
    /// or the metadata name) instead of the global
    /// limits.
    #[arg(long, value_name = "mdN")]
    pub array: Option<String>,
    /// Lease holder name; applying again with the same name replaces the lease. Default:
    /// `installer`; with `--profile NAME`, NAME; with `--for` alone, `timed` (so a timed or
    /// profile lease never replaces the installer's). Names starting with dbus-, admin-,
    /// check-, wipe: or freeze: are the service's own and refused.
    #[arg(long, value_name = "NAME")]
    pub holder: Option<String>,
    /// Tie the lease to this process: dropped once it has exited. Default: the lease lives
    /// until `release` or `restore`.
    #[arg(long, value_name = "PID")]
    pub pid: Option<u32>,
    /// Kind of holder: installer, wipe-job, admin, dbus-client (or `client`, its D-Bus name).
    /// Default: installer; admin for a `--profile` or `--for` lease without `--holder`.
    #[arg(long, value_name = "K", value_parser = parse_kind)]
    pub kind: Option<LeaseKind>,
    /// A timed lease: released by itself after DURATION (`90s`, `30min`, `2h`, `1d`), restoring
    /// as any release does. The end is saved in the state file, so it survives restarts; the
    /// service releases it on time, without the service the next `policy` command does.
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_for)]
    pub for_s: Option<u64>,
    /// Take the limits (and default duration) of the config's `[profiles.NAME]`.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["min", "max", "io_depth"])]
    pub profile: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_for(s: &str) -> Result<u64, String> {
    match crate::schedule::parse_duration(s) {
        Ok(0) => Err("a duration of 0 would end the lease at once".into()),
        Ok(v) => Ok(v),
        Err(e) => Err(e.to_string()),
    }
}

/// `--profile NAME` replaced by the profile's `min`/`max`/`io_depth` (and its duration when `--for` is not
/// given). Errors: no such profile in the config.
pub fn resolve_profile(a: &mut ApplyArgs, config: &Config) -> Result<(), String> {
    let Some(name) = a.profile.clone() else {
        return Ok(());
    };
    let p = config.profiles.get(&name).ok_or_else(|| {
        let known: Vec<&str> = config.profiles.keys().map(String::as_str).collect();
        format!(
            "no profile {name:?} in the configuration (known: {})",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        )
    })?;
    a.min = p.min;
    a.max = p.max;
    a.io_depth = p.io_depth;
    a.for_s = a.for_s.or(p.duration_s);
    Ok(())
}

fn parse_kind(s: &str) -> Result<LeaseKind, String> {
    match s {
        "installer" => Ok(LeaseKind::Installer),
        "wipe-job" => Ok(LeaseKind::WipeJob),
        "admin" => Ok(LeaseKind::Admin),
        "dbus-client" | "client" => Ok(LeaseKind::DbusClient),
        _ => Err("want installer, wipe-job, admin or dbus-client".into()),
    }
}

impl ApplyArgs {
    /// The holder: `--holder`, else the profile's name, else `timed` for `--for`, else
    /// `installer` (d-i's hooks rely on that default).
    pub fn holder_name(&self) -> String {
        if let Some(h) = &self.holder {
            return h.clone();
        }
        if let Some(p) = &self.profile {
            return p.clone();
        }
        if self.for_s.is_some() {
            return "timed".into();
        }
        "installer".into()
    }

    /// The kind: `--kind`, else admin for a profile or timed lease without `--holder`, else
    /// installer.
    pub fn lease_kind(&self) -> LeaseKind {
        match self.kind {
            Some(k) => k,
            None if self.holder.is_none() && (self.profile.is_some() || self.for_s.is_some()) => {
                LeaseKind::Admin
            }
            None => LeaseKind::Installer,
        }
    }

    /// True when neither `--min`, `--max` nor `--io-depth` is given (the install policy).
    pub fn asks_nothing(&self) -> bool {
        self.min.is_none() && self.max.is_none() && self.io_depth.is_none()
    }

    /// The lease this command asks for; `install_min`/`install_max` fill in when neither
    /// `--min`, `--max` nor `--io-depth` is given.
    pub fn request(&self, install_min: u64, install_max: Option<u64>) -> LeaseRequest {
        let limits = if self.asks_nothing() {
            Limits {
                min: Some(install_min),
                max: install_max,
                io_depth: None,
            }
        } else {
            Limits {
                min: self.min,
                max: self.max,
                io_depth: self.io_depth,
            }
        };
        let (global, arrays) = match &self.array {
            // `/dev/md0` names the same array as the kernel name `md0`.
            Some(a) => (
                Limits::default(),
                BTreeMap::from([(a.strip_prefix("/dev/").unwrap_or(a).to_string(), limits)]),
            ),
            None => (limits, BTreeMap::new()),
        };
        LeaseRequest {
            holder: self.holder_name(),
            kind: self.lease_kind(),
            owner: self.pid.map_or(Owner::None, Owner::Pid),
            global,
            arrays,
        }
    }
}

/// `--pid` named a process that does not exist.
#[derive(Debug, thiserror::Error)]
#[error("--pid {0}: no such process; lease not taken")]
pub struct NoSuchPid(pub u32);

/// Runs a `mdpilot policy` subcommand: through the service when it runs
/// ([`try_service`]), else on the files under `ctx.root`.
pub fn run(ctx: &Context, mut cmd: PolicyCommand) -> ExitCode {
    if let Err(code) = prepare(ctx, &mut cmd) {
        return code;
    }
    if let PolicyCommand::Apply(ApplyArgs {
        array: Some(word), ..
    }) = &mut cmd
    {
        // `--array` as users type it: /dev/md/root, md/root, the metadata name -> md127.
        match crate::array_names::resolve_array(
            &ctx.root,
            word,
            &crate::sysfs::list_arrays(&ctx.root),
        ) {
            Ok(k) => *word = k,
            // A plain word goes on as it is: the policy names the missing knob.
            Err(_) if !word.trim_start_matches("/dev/").contains('/') => {
                *word = word.trim_start_matches("/dev/").to_string();
            }
            Err(e) => return fail(&e, 1),
        }
    }
    if let PolicyCommand::Apply(ApplyArgs { pid: Some(pid), .. }) = &cmd {
        // A lease tied to a process that is already gone would be dropped by the next command:
        // surely a mistake (typo, wrong $$), so say so instead of applying.
        if !crate::host::pid_alive(*pid) {
            return fail(&NoSuchPid(*pid), 1);
        }
    }
    #[cfg(feature = "service")]
    if let Some(code) = try_service(ctx, &cmd) {
        return code;
    }
    let config = match Config::load(&ctx.root) {
        Ok(c) => c,
        Err(e) => return fail(&e, 1),
    };
    let settings = config.policy_settings(&ctx.root);
    let (install_min, install_max) = (settings.install_min, settings.install_max);
    let policy = Policy::new(ctx.root.clone(), settings);
    // Dead owners' leases and timed leases that have ended go first.
    let reap = || {
        policy
            .expire(crate::host::unix_now_s())
            .and_then(|_| policy.reap(&cli_alive))
    };
    let (result, json) = match cmd {
        PolicyCommand::Show { json } => (policy.show(), json),
        PolicyCommand::Apply(a) => (
            reap().and_then(|_| {
                let mut req = a.request(install_min, install_max);
                // Pinned by its start time: a reused pid does not keep the lease.
                if let Owner::Pid(p) = req.owner {
                    req.owner = crate::policy::process_owner(p);
                }
                policy.acquire_for(req, a.for_s)
            }),
            a.json,
        ),
        PolicyCommand::Release { holder, json } => {
            (reap().and_then(|_| policy.release(&holder)), json)
        }
        PolicyCommand::Restore { defaults, json } => (policy.restore(defaults), json),
    };
    match result {
        Ok(view) => print_view(&view, json),
        Err(e) => fail(&e, 1),
    }
}

/// What every `policy` command checks first, whether or not the service runs (it checks the
/// holder again): the holder rules ([`holder_allowed`]), then `--profile NAME` replaced by the
/// profile's limits. Errors: the exit code, the message printed.
fn prepare(ctx: &Context, cmd: &mut PolicyCommand) -> Result<(), ExitCode> {
    holder_allowed(cmd).map_err(|e| fail(&e, 1))?;
    if let PolicyCommand::Apply(a) = cmd {
        if a.profile.is_some() {
            let resolved = Config::load(&ctx.root)
                .map_err(|e| crate::error::error_chain(&e))
                .and_then(|c| resolve_profile(a, &c));
            if let Err(msg) = resolved {
                eprintln!("mdpilot: policy apply: {msg}");
                return Err(ExitCode::from(1));
            }
        }
    }
    Ok(())
}

/// The holder rules of the policy core for `cmd`: `apply` takes a chosen name
/// ([`Holder::chosen`]: none of the service's schemes), `release` ends only what may be ended
/// by name ([`Holder::may_release`]: not a wipe job's, a check's or a bus client's lease).
///
/// Errors: [`crate::policy::CoreError`] naming the holder and how such a lease ends.
fn holder_allowed(cmd: &PolicyCommand) -> Result<(), crate::policy::CoreError> {
    match cmd {
        PolicyCommand::Apply(a) => Holder::chosen(&a.holder_name()).map(drop),
        PolicyCommand::Release { holder, .. } => Holder::parse(holder).may_release(None),
        PolicyCommand::Show { .. } | PolicyCommand::Restore { .. } => Ok(()),
    }
}

/// Prints a view as JSON (`--json`) or as [`render`] text; exit 0, or 1 when JSON fails.
fn print_view(view: &PolicyView, json: bool) -> ExitCode {
    if json {
        match serde_json::to_string_pretty(view) {
            Ok(s) => println!("{s}"),
            Err(e) => return fail(&e, 1),
        }
    } else {
        print!("{}", render(view));
    }
    ExitCode::SUCCESS
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "?".into(), |v| v.to_string())
}

fn limits_text(l: &Limits) -> String {
    let mut parts = Vec::new();
    if let Some(m) = l.min {
        parts.push(format!("min {m}"));
    }
    if let Some(m) = l.max {
        parts.push(format!("max {m}"));
    }
    if let Some(d) = l.io_depth {
        parts.push(format!("io_depth {d}"));
    }
    parts.join(" ")
}

/// The knob lines of [`render`]: the global limits and `sync_io_depth` (where the kernel has
/// it) with their originals, then each array's.
fn render_knobs(s: &mut String, v: &PolicyView) {
    use std::fmt::Write as _;
    let orig = |o: Option<u64>| match (o, &v.originals_unknown) {
        (Some(o), _) => format!(" (original {o})"),
        (None, Some(_)) => " (original unknown)".into(),
        (None, None) => " (not managed)".into(),
    };
    let _ = writeln!(
        s,
        "speed_limit_min: {} KiB/s{}",
        opt(v.speed_limit_min),
        orig(v.originals.speed_limit_min)
    );
    let _ = writeln!(
        s,
        "speed_limit_max: {} KiB/s{}",
        opt(v.speed_limit_max),
        orig(v.originals.speed_limit_max)
    );
    if v.sync_io_depth.is_some() || v.originals.sync_io_depth.is_some() {
        let _ = writeln!(
            s,
            "sync_io_depth: {}{}",
            opt(v.sync_io_depth),
            orig(v.originals.sync_io_depth)
        );
    }
    for (name, a) in &v.arrays {
        let o = |r: Option<crate::policy::SpeedLimit>| {
            r.map(|r| format!(" (original {r})")).unwrap_or_default()
        };
        let _ = writeln!(
            s,
            "{name}: sync_speed_min {}{}, sync_speed_max {}{}",
            opt(a.sync_speed_min),
            o(a.original_min),
            opt(a.sync_speed_max),
            o(a.original_max)
        );
        if a.sync_io_depth.is_some() || a.original_io_depth.is_some() {
            let _ = writeln!(
                s,
                "{name}: sync_io_depth {}{}",
                opt(a.sync_io_depth),
                o(a.original_io_depth)
            );
        }
    }
}

/// The human form of a view: state file, current values with originals, leases, warnings.
pub fn render(v: &PolicyView) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "state: {}", v.state_path.display());
    render_knobs(&mut s, v);
    if v.leases.is_empty() {
        let _ = writeln!(s, "leases: none");
    } else {
        let _ = writeln!(s, "leases:");
        for l in &v.leases {
            let mut what = Vec::new();
            if !l.global.is_empty() {
                what.push(format!("global {}", limits_text(&l.global)));
            }
            for (a, lim) in &l.arrays {
                what.push(format!("{a} {}", limits_text(lim)));
            }
            let dead = if l.dead {
                " (dead: will be dropped)".to_string()
            } else if let Some(t) = l.expires_unix_s {
                let left = t.saturating_sub(crate::host::unix_now_s());
                format!(" (ends in {left} s, at {t})")
            } else {
                String::new()
            };
            let _ = writeln!(
                s,
                "  {}: kind {}, owner {}{dead}, {}",
                l.holder,
                l.kind,
                l.owner,
                what.join(", ")
            );
        }
    }
    if !v.changes.is_empty() {
        let _ = writeln!(s, "held changes (put back when their owner ends):");
        for c in &v.changes {
            let _ = writeln!(
                s,
                "  {}: {} {} -> {} (put back: {}), owner {}",
                c.id, c.array, c.attr, c.written, c.restore, c.owner
            );
        }
    }
    for w in &v.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct T {
        #[command(subcommand)]
        c: PolicyCommand,
    }

    #[test]
    fn apply_defaults_to_install_policy() {
        let T { c } = T::parse_from(["t", "apply"]);
        let PolicyCommand::Apply(a) = c else { panic!() };
        let r = a.request(0, None);
        assert_eq!(r.holder, "installer");
        assert_eq!(r.kind, LeaseKind::Installer);
        assert_eq!(r.owner, Owner::None);
        assert_eq!(
            r.global,
            Limits {
                min: Some(0),
                max: None,
                io_depth: None,
            }
        );
        let T { c } = T::parse_from([
            "t", "apply", "--max", "7", "--array", "md1", "--pid", "9", "--kind", "wipe-job",
        ]);
        let PolicyCommand::Apply(a) = c else { panic!() };
        let r = a.request(0, None);
        assert_eq!(r.owner, Owner::Pid(9));
        assert_eq!(r.kind, LeaseKind::WipeJob);
        assert!(r.global.is_empty());
        assert_eq!(
            r.arrays["md1"],
            Limits {
                min: None,
                max: Some(7),
                io_depth: None,
            }
        );
        assert!(T::try_parse_from(["t", "apply", "--kind", "boss"]).is_err());
    }

    #[test]
    fn apply_accepts_dev_path_for_array() {
        let T { c } = T::parse_from(["t", "apply", "--array", "/dev/md0", "--min", "5"]);
        let PolicyCommand::Apply(a) = c else { panic!() };
        let r = a.request(0, None);
        assert_eq!(r.arrays.keys().collect::<Vec<_>>(), vec!["md0"]);
    }
}
