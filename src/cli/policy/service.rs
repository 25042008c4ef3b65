//! `mdpilot policy apply|release|restore` through the running service (the `service` feature):
//! the bus to look on, the probe, and the mapping to `AcquirePriority`, `ReleasePriority` and
//! `RestoreLimits` described in the parent module's doc.

use super::{print_view, ApplyArgs, PolicyCommand};
use crate::cli::{fail, Context};
use crate::config::Config;
use crate::dbus::client::{connect_if_running, ManagerProxy};
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
        let conn = connect_if_running(&bus, PROBE_TIMEOUT).await?;
        // Non-root: a polkit text agent for the service's prompt (stopped on drop).
        let _agent = crate::cli::polkit_agent::start();
        Some(run_via_service(ctx, cmd, &conn).await)
    })
}

/// The `AcquirePriority` options for `a`; `install` fills per-array limits given without
/// `--min`/`--max` (global ones are left to the service's install policy). Per-array limits go
/// as `arrays` `{ARRAY: {min: t, max: t, io_depth: t}}` with only the given keys, so a per-array `--max 0`
/// is sent as such (the policy writes it as 1 KiB/s, the slowest md allows).
pub fn acquire_options(
    a: &ApplyArgs,
    install: (u64, Option<u64>),
) -> HashMap<&'static str, Value<'static>> {
    let mut o: HashMap<&'static str, Value<'static>> = HashMap::new();
    o.insert("holder", Value::from(a.holder_name()));
    o.insert("kind", Value::from(a.lease_kind().as_str()));
    if let Some(d) = a.for_s {
        o.insert("duration", Value::U64(d));
    }
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
            if let Some(d) = a.io_depth {
                o.insert("io_depth", Value::U64(d));
            }
        }
        Some(arr) => {
            let (min, max) = if a.asks_nothing() {
                (Some(install.0), install.1)
            } else {
                (a.min, a.max)
            };
            let mut l: HashMap<String, Value<'static>> = HashMap::new();
            if let Some(m) = min {
                l.insert("min".into(), Value::U64(m));
            }
            if let Some(m) = max {
                l.insert("max".into(), Value::U64(m));
            }
            if let Some(d) = a.io_depth {
                l.insert("io_depth".into(), Value::U64(d));
            }
            let m: HashMap<String, HashMap<String, Value<'static>>> =
                HashMap::from([(arr.clone(), l)]);
            o.insert("arrays", Value::from(m));
        }
    }
    o
}

fn dbus_fail(what: &str, e: zbus::Error) -> ExitCode {
    match e {
        zbus::Error::MethodError(name, msg, _) => {
            eprintln!(
                "mdpilot: policy {what} (through the service): {name}: {}",
                msg.unwrap_or_default()
            );
            if name.as_str().ends_with(".NotAuthorized") {
                if let Some(h) = crate::cli::polkit_agent::hint() {
                    eprintln!("mdpilot: hint: {h}");
                }
            }
        }
        e => eprintln!("mdpilot: policy {what} (through the service): {e}"),
    }
    ExitCode::from(1)
}

/// `cmd` through the service on `conn` (see the module doc for the mapping); prints the view
/// read back from the files.
async fn run_via_service(ctx: &Context, cmd: &PolicyCommand, conn: &zbus::Connection) -> ExitCode {
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
            let o = acquire_options(a, install);
            if let Err(e) = m.acquire_priority(o).await {
                return dbus_fail("apply", e);
            }
            a.json
        }
        PolicyCommand::Release { holder, json } => {
            // Held by the state file, the source of truth (a proxy's cached Leases property
            // can lag behind a lease applied a moment ago); unreadable: the service decides.
            let held = policy
                .show()
                .map_or(true, |v| v.leases.iter().any(|l| &l.holder == holder));
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
    print_view(&view, json)
}
