//! The hook through which `mdpilot policy apply|release|restore` goes through the D-Bus service
//! when it runs, so that the service stays the single writer of the limits while it runs.
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

use super::policy::{ApplyArgs, PolicyCommand};
use crate::cli::{fail, Context};
use crate::config::Config;
use crate::dbus::client::{service_running, ManagerProxy};
use crate::dbus::BusChoice;
use crate::policy::{Policy, PolicyView};
use std::collections::HashMap;
use std::process::ExitCode;
use std::time::Duration;
use zbus::zvariant::Value;

/// How long connecting to the bus and finding the service may take before the CLI falls back to
/// the files.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// The bus to look for the service on: `MDPILOT_BUS`, else the system bus when the root is `/`;
/// `None` when the CLI must not look (a `--root` tree without `MDPILOT_BUS`).
pub fn bus_for(ctx: &Context, env: Option<&str>) -> Option<BusChoice> {
    match env {
        Some(s) if !s.is_empty() => s.parse().ok(),
        _ if ctx.root.is_system() => Some(BusChoice::System),
        _ => None,
    }
}

/// Runs `cmd` through the running service and returns its exit code; `None` when no service
/// answers within [`PROBE_TIMEOUT`] (or for `show`), in which case the caller works on the files.
pub fn try_service(ctx: &Context, cmd: &PolicyCommand) -> Option<ExitCode> {
    if matches!(cmd, PolicyCommand::Show { .. }) {
        return None;
    }
    let env = std::env::var("MDPILOT_BUS").ok();
    let bus = bus_for(ctx, env.as_deref())?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    rt.block_on(async {
        let conn = connect(&bus).await?;
        Some(run(ctx, cmd, &conn).await)
    })
}

/// A connection to `bus` on which the service runs, or `None` (logged) within the timeout.
async fn connect(bus: &BusChoice) -> Option<zbus::Connection> {
    let probe = async {
        let conn = bus.builder().ok()?.build().await.ok()?;
        service_running(&conn).await.then_some(conn)
    };
    match tokio::time::timeout(PROBE_TIMEOUT, probe).await {
        Ok(Some(c)) => Some(c),
        _ => {
            tracing::debug!("no mdpilot service on {bus:?}: working on the files");
            None
        }
    }
}

/// The `AcquirePriority` options for `a`; `install` fills per-array limits given without
/// `--min`/`--max` (global ones are left to the service's install policy).
///
/// Errors: a per-array `--max 0`, which D-Bus cannot express (0 = unset there).
pub fn acquire_options(
    a: &ApplyArgs,
    install: (u64, Option<u64>),
) -> Result<HashMap<&'static str, Value<'static>>, String> {
    let mut o: HashMap<&'static str, Value<'static>> = HashMap::new();
    o.insert("holder", Value::from(a.holder.clone()));
    o.insert("kind", Value::from(a.kind.as_str()));
    if let Some(p) = a.pid {
        o.insert("pid", Value::U32(p));
    }
    match &a.array {
        None => {
            if let Some(m) = a.min {
                o.insert("min", Value::U64(m));
            }
            if let Some(m) = a.max {
                o.insert("max", Value::U64(m));
            }
        }
        Some(arr) => {
            let (min, max) = if a.min.is_none() && a.max.is_none() {
                (Some(install.0), install.1)
            } else {
                (a.min, a.max)
            };
            if max == Some(0) {
                return Err(format!(
                    "{arr}: a per-array max of 0 cannot be sent to the service (0 means unset \
                     there); use a global --max 0"
                ));
            }
            // Per array 0 = unset on the bus; the policy writes a min as at least 1 anyway.
            let min = min.map(|m| m.max(1)).unwrap_or(0);
            let m: HashMap<String, (u64, u64)> =
                HashMap::from([(arr.clone(), (min, max.unwrap_or(0)))]);
            o.insert("arrays", Value::from(m));
        }
    }
    Ok(o)
}

fn dbus_fail(what: &str, e: zbus::Error) -> ExitCode {
    match e {
        zbus::Error::MethodError(name, msg, _) => eprintln!(
            "mdpilot: policy {what} (through the service): {name}: {}",
            msg.unwrap_or_default()
        ),
        e => eprintln!("mdpilot: policy {what} (through the service): {e}"),
    }
    ExitCode::from(1)
}

async fn run(ctx: &Context, cmd: &PolicyCommand, conn: &zbus::Connection) -> ExitCode {
    let config = match Config::load(&ctx.root) {
        Ok(c) => c,
        Err(e) => return fail(&e, 1),
    };
    let settings = config.policy_settings(&ctx.root);
    let install = (settings.install_min, settings.install_max);
    let policy = Policy::new(ctx.root.clone(), settings);
    let m = match ManagerProxy::new(conn).await {
        Ok(m) => m,
        Err(e) => return dbus_fail("proxy", e),
    };
    let mut warning = None;
    let json = match cmd {
        PolicyCommand::Show { .. } => unreachable!("show reads the files"),
        PolicyCommand::Apply(a) => {
            let o = match acquire_options(a, install) {
                Ok(o) => o,
                Err(msg) => {
                    eprintln!("mdpilot: policy apply: {msg}");
                    return ExitCode::from(1);
                }
            };
            if let Err(e) = m.acquire_priority(o).await {
                return dbus_fail("apply", e);
            }
            a.json
        }
        PolicyCommand::Release { holder, json } => {
            let held = match m.leases().await {
                Ok(l) => l.iter().any(|l| &l.0 == holder),
                Err(e) => return dbus_fail("release", e),
            };
            if held {
                if let Err(e) = m.release_priority(holder).await {
                    return dbus_fail("release", e);
                }
            } else {
                // Idempotent like the file path: installer scripts release unconditionally.
                warning = Some(format!("{holder:?} held no lease"));
            }
            *json
        }
        PolicyCommand::Restore { defaults, json } => {
            let o = HashMap::from([("defaults", Value::Bool(*defaults))]);
            if let Err(e) = m.restore_limits(o).await {
                return dbus_fail("restore", e);
            }
            *json
        }
    };
    let view: PolicyView = match policy.show() {
        Ok(mut v) => {
            v.warnings.extend(warning);
            v
        }
        Err(e) => return fail(&e, 1),
    };
    super::policy::print_view(&view, json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Root;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct T {
        #[command(subcommand)]
        c: PolicyCommand,
    }

    fn apply(args: &[&str]) -> ApplyArgs {
        let mut v = vec!["t", "apply"];
        v.extend_from_slice(args);
        match T::parse_from(v).c {
            PolicyCommand::Apply(a) => a,
            _ => unreachable!(),
        }
    }

    #[test]
    fn bus_choice_follows_env_and_root() {
        let sys = Context {
            root: Root::system(),
        };
        let tmp = Context {
            root: Root::new("/tmp/x"),
        };
        assert_eq!(bus_for(&sys, None), Some(BusChoice::System));
        assert_eq!(bus_for(&tmp, None), None);
        assert_eq!(bus_for(&tmp, Some("")), None);
        assert_eq!(bus_for(&tmp, Some("session")), Some(BusChoice::Session));
        assert_eq!(
            bus_for(&tmp, Some("unix:path=/b")),
            Some(BusChoice::Address("unix:path=/b".into()))
        );
    }

    #[test]
    fn apply_maps_to_acquire_options() {
        let o = acquire_options(&apply(&[]), (0, None)).unwrap();
        let mut keys: Vec<_> = o.keys().copied().collect();
        keys.sort();
        // No limits: the service's install policy.
        assert_eq!(keys, ["holder", "kind"]);
        assert_eq!(o["holder"], Value::from("installer"));
        assert_eq!(o["kind"], Value::from("installer"));
        let o = acquire_options(&apply(&["--min", "0", "--pid", "7"]), (0, None)).unwrap();
        assert_eq!(o["min"], Value::U64(0));
        assert_eq!(o["pid"], Value::U32(7));
        assert!(!o.contains_key("max"));
        let o = acquire_options(&apply(&["--array", "md1"]), (0, Some(500))).unwrap();
        let m: HashMap<String, (u64, u64)> = o["arrays"].try_clone().unwrap().try_into().unwrap();
        assert_eq!(m["md1"], (1, 500));
        assert!(acquire_options(&apply(&["--array", "md1", "--max", "0"]), (0, None)).is_err());
    }
}
