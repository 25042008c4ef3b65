//! `mdpilot monitor [--json] [--bus BUS]`: follows the service's D-Bus signals live, one line per
//! change. `mdpilot monitor --events [--json] [--oneshot]`: mdadm-style events instead (see
//! [`crate::alerts`]), read from the kernel directly like `mdadm --monitor` (no service needed).
//!
//! At start it prints the current objects (from `GetManagedObjects`) as `added` lines, then one
//! line per `PropertiesChanged`, `InterfacesAdded` and `InterfacesRemoved` from
//! `org.mdpilot.MdPilot1`, plus `service started` / `service stopped` when the name changes owner.
//!
//! Text: `md1 changed SyncCompleted=0.25 SyncRate=204800000` (properties sorted by name).
//! JSON (`--json`): `{"event":"changed","object":"md1","path":"/org/...","interface":"...",
//! "properties":{"SyncCompleted":0.25,...}}`; `object` is `manager` for the manager object and
//! an array's `KernelName` for an array object (its path holds the UUID), learnt from the
//! `added` lines.

use crate::alerts::Classifier;
use crate::cli::Context;
use crate::dbus::{BusChoice, BUS_NAME, MANAGER_PATH, ROOT_PATH};
use crate::model::MdStat;
use futures_util::StreamExt;
use serde_json::{json, Map, Value as Json};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::process::ExitCode;
use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};

/// Arguments of `mdpilot monitor [--json]`.
#[derive(Debug, clap::Args)]
pub struct MonitorArgs {
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// Bus to follow: `system`, `session`, or a D-Bus address.
    #[arg(long, default_value = "system", value_name = "BUS")]
    pub bus: BusChoice,
    /// Print mdadm-style events (Fail, DegradedArray, RebuildStarted, Rebuild20, CheckFinished,
    /// InitialBuildStarted...), one per line (`Fail md0 sdb1`), read from /proc/mdstat and sysfs
    /// directly instead of following the service.
    #[arg(long)]
    pub events: bool,
    /// With --events: re-read every MS milliseconds while a sync runs (progress words) or when
    /// the kernel's notifications are not available; otherwise the notifications alone wake it.
    #[arg(long, default_value_t = 1000, value_name = "MS", requires = "events")]
    pub interval_ms: u64,
    /// With --events: report the current state once (DegradedArray, SparesMissing) and exit.
    #[arg(long, requires = "events")]
    pub oneshot: bool,
}

/// `mdpilot monitor --events`: exit 0 when stdout closes (or after --oneshot), 1 when
/// `/proc/mdstat` cannot be read at start. Later read failures are logged and retried.
fn run_events(ctx: &Context, args: &MonitorArgs) -> ExitCode {
    let root = ctx.root.clone();
    let first = match crate::sysfs::collect(&root) {
        Ok(s) => s,
        Err(e) => return crate::cli::fail(&e, 1),
    };
    let mut classifier = Classifier::new();
    let mut out = std::io::stdout();
    let mut emit = |stat: &MdStat, c: &mut Classifier| -> bool {
        for e in c.observe(
            &crate::alerts::views_from_model(stat),
            crate::host::unix_now_s(),
        ) {
            let line = if args.json {
                serde_json::to_string(&e).unwrap_or_default()
            } else {
                e.line()
            };
            if writeln!(out, "{line}").and_then(|_| out.flush()).is_err() {
                return false;
            }
        }
        true
    };
    if !emit(&first, &mut classifier) || args.oneshot {
        return ExitCode::SUCCESS;
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return crate::cli::fail(&e, 1),
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    // Kept so that `recv` waits (for the timeout) even when the watcher could not start.
    let _tx = tx.clone();
    let watcher = crate::watch::Watcher::start(root.clone(), tx)
        .map_err(|e| tracing::info!("no kernel notifications, polling only: {e}"))
        .ok();
    let notified = watcher.is_some() && root.is_system();
    let interval = std::time::Duration::from_millis(args.interval_ms.max(10));
    let mut syncing = first.arrays.iter().any(crate::model::Array::is_syncing);
    rt.block_on(async {
        loop {
            match events_wait(notified, syncing, interval) {
                Some(t) => drop(tokio::time::timeout(t, rx.recv()).await),
                None => drop(rx.recv().await),
            }
            while rx.try_recv().is_ok() {}
            match crate::sysfs::collect(&root) {
                Ok(stat) => {
                    syncing = stat.arrays.iter().any(crate::model::Array::is_syncing);
                    if !emit(&stat, &mut classifier) {
                        return ExitCode::SUCCESS;
                    }
                }
                Err(e) => tracing::warn!("cannot read the arrays: {e}"),
            }
        }
    })
}

/// How long `monitor --events` waits for a kernel notification before it re-reads the arrays
/// anyway: `None` (no timer: an idle system costs no wake-ups, as in the service) when the
/// kernel's notifications reach it (`notified`: the watcher runs on the real `/proc` and `/sys`)
/// and no array syncs; `interval` otherwise. md notifies `md/sync_completed` only about every
/// 1/16 of a sync, so the progress words (`Rebuild20`..`80`) need the re-reads, and a test root's
/// regular files never notify (crate::watch).
fn events_wait(
    notified: bool,
    syncing: bool,
    interval: std::time::Duration,
) -> Option<std::time::Duration> {
    (!notified || syncing).then_some(interval)
}

/// A non-empty array of bytes (`ay`, udisks2's byte string: a path or a word, NUL-terminated or
/// not) holding UTF-8 text, as a JSON string without the trailing NULs; `None` otherwise.
fn byte_string(items: &[Value<'_>]) -> Option<Json> {
    let bytes: Vec<u8> = items
        .iter()
        .map(|v| match v {
            Value::U8(b) => Some(*b),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let text = std::str::from_utf8(&bytes).ok()?.trim_end_matches('\0');
    (!bytes.is_empty()).then(|| json!(text))
}

/// Converts a D-Bus value to JSON: structures become arrays, dicts objects (keys as text), a
/// byte string (`ay` of UTF-8 text) a string.
pub fn value_to_json(v: &Value<'_>) -> Json {
    match v {
        Value::U8(n) => json!(n),
        Value::Bool(b) => json!(b),
        Value::I16(n) => json!(n),
        Value::U16(n) => json!(n),
        Value::I32(n) => json!(n),
        Value::U32(n) => json!(n),
        Value::I64(n) => json!(n),
        Value::U64(n) => json!(n),
        Value::F64(n) => json!(n),
        Value::Str(s) => json!(s.as_str()),
        Value::Signature(s) => json!(s.to_string()),
        Value::ObjectPath(p) => json!(p.as_str()),
        Value::Value(b) => value_to_json(b),
        Value::Array(a) => byte_string(a.inner())
            .unwrap_or_else(|| Json::Array(a.inner().iter().map(value_to_json).collect())),
        Value::Dict(d) => {
            let mut m = Map::new();
            for (k, v) in d.iter() {
                let key = match k {
                    Value::Str(s) => s.to_string(),
                    other => value_to_json(other).to_string(),
                };
                m.insert(key, value_to_json(v));
            }
            Json::Object(m)
        }
        Value::Structure(s) => Json::Array(s.fields().iter().map(value_to_json).collect()),
        #[allow(unreachable_patterns)]
        _ => Json::Null,
    }
}

/// Kernel names of the array objects seen so far, by object path.
pub type Names = HashMap<String, String>;

/// `manager` for the manager path, the array's kernel name when `names` knows the path, else
/// the last path element (`jobs/3` → `3`).
pub fn object_name(path: &str, names: &Names) -> String {
    if path == MANAGER_PATH {
        return "manager".into();
    }
    if let Some(n) = names.get(path) {
        return n.clone();
    }
    path.rsplit('/').next().unwrap_or(path).to_string()
}

/// One output line for an event on `path`/`iface` with `props` (may be empty); the object is
/// named by [`object_name`].
pub fn format_line(
    event: &str,
    path: &str,
    iface: &str,
    props: &BTreeMap<String, Json>,
    json_out: bool,
    names: &Names,
) -> String {
    let object = object_name(path, names);
    if json_out {
        let mut o = Map::new();
        o.insert("event".into(), json!(event));
        o.insert("object".into(), json!(object));
        o.insert("path".into(), json!(path));
        o.insert("interface".into(), json!(iface));
        o.insert(
            "properties".into(),
            Json::Object(props.clone().into_iter().collect()),
        );
        Json::Object(o).to_string()
    } else {
        let mut s = format!("{object} {event}");
        for (k, v) in props {
            match v {
                Json::String(t) => s.push_str(&format!(" {k}={t}")),
                other => s.push_str(&format!(" {k}={other}")),
            }
        }
        s
    }
}

/// Remembers the kernel name of an array object from its properties.
fn learn(names: &mut Names, path: &str, props: &HashMap<String, OwnedValue>) {
    if let Some(n) = props
        .get("KernelName")
        .and_then(|v| String::try_from(v.try_clone().ok()?).ok())
    {
        names.insert(path.to_string(), n);
    }
}

fn props_json(m: &HashMap<String, OwnedValue>) -> BTreeMap<String, Json> {
    m.iter()
        .map(|(k, v)| (k.clone(), value_to_json(v)))
        .collect()
}

/// Runs `mdpilot monitor` until interrupted (or stdout closes). Exit 1 if the bus is unreachable.
pub fn run(ctx: &Context, args: MonitorArgs) -> ExitCode {
    if args.events {
        return run_events(ctx, &args);
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return crate::cli::fail(&e, 1),
    };
    match rt.block_on(monitor(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => crate::cli::fail(&e, 1),
    }
}

type Managed = HashMap<OwnedObjectPath, HashMap<String, HashMap<String, OwnedValue>>>;

async fn monitor(args: MonitorArgs) -> zbus::Result<()> {
    let conn = args.bus.builder()?.build().await?;
    let rule = zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .sender(BUS_NAME)?
        .path_namespace(ROOT_PATH)?
        .build();
    let mut stream = zbus::MessageStream::for_match_rule(rule, &conn, None).await?;
    let dbus = zbus::fdo::DBusProxy::new(&conn).await?;
    let mut owners = dbus
        .receive_name_owner_changed_with_args(&[(0, BUS_NAME)])
        .await?;
    let mut out = std::io::stdout();
    let mut emit =
        |line: String| -> bool { writeln!(out, "{line}").and_then(|_| out.flush()).is_ok() };
    let mut names = Names::new();
    // GetManagedObjects returns the Manager too (it is an object below the ObjectManager).
    let reply = conn
        .call_method(
            Some(BUS_NAME),
            ROOT_PATH,
            Some("org.freedesktop.DBus.ObjectManager"),
            "GetManagedObjects",
            &(),
        )
        .await;
    match reply {
        Ok(r) => {
            let objs: Managed = r.body().deserialize()?;
            let mut paths: Vec<_> = objs.keys().cloned().collect();
            // The manager first, then the arrays and jobs by path.
            paths.sort_by_key(|p| (p.as_str() != MANAGER_PATH, p.as_str().to_string()));
            for p in paths {
                for (iface, props) in &objs[&p] {
                    learn(&mut names, p.as_str(), props);
                    if !emit(format_line(
                        "added",
                        p.as_str(),
                        iface,
                        &props_json(props),
                        args.json,
                        &names,
                    )) {
                        return Ok(());
                    }
                }
            }
        }
        Err(e) => tracing::info!("service not running yet: {e}"),
    }
    loop {
        tokio::select! {
            msg = stream.next() => {
                let Some(Ok(msg)) = msg else { return Ok(()) };
                let Some(lines) = signal_lines(&msg, args.json, &mut names) else { continue };
                for l in lines {
                    if !emit(l) { return Ok(()); }
                }
            }
            sig = owners.next() => {
                let Some(sig) = sig else { return Ok(()) };
                let Ok(a) = sig.args() else { continue };
                let ev = if a.new_owner().is_some() { "started" } else { "stopped" };
                let line = if args.json {
                    json!({"event": format!("service-{ev}"), "object": "service"}).to_string()
                } else {
                    format!("service {ev}")
                };
                if !emit(line) { return Ok(()); }
            }
        }
    }
}

/// The output lines for one of the service's signals (`PropertiesChanged`,
/// `InterfacesAdded`, `InterfacesRemoved`), learning array names from added objects;
/// `None` for another signal or a body that does not parse.
fn signal_lines(msg: &zbus::Message, json: bool, names: &mut Names) -> Option<Vec<String>> {
    let h = msg.header();
    let path = h
        .path()
        .map(std::string::ToString::to_string)
        .unwrap_or_default();
    let member = h
        .member()
        .map(std::string::ToString::to_string)
        .unwrap_or_default();
    let lines: Vec<String> = match member.as_str() {
        "PropertiesChanged" => {
            let Ok((iface, changed, _inv)) =
                msg.body()
                    .deserialize::<(String, HashMap<String, OwnedValue>, Vec<String>)>()
            else {
                return None;
            };
            vec![format_line(
                "changed",
                &path,
                &iface,
                &props_json(&changed),
                json,
                names,
            )]
        }
        "InterfacesAdded" => {
            let Ok((obj, ifaces)) = msg.body().deserialize::<(
                OwnedObjectPath,
                HashMap<String, HashMap<String, OwnedValue>>,
            )>() else {
                return None;
            };
            for p in ifaces.values() {
                learn(names, obj.as_str(), p);
            }
            ifaces
                .iter()
                .map(|(i, p)| format_line("added", obj.as_str(), i, &props_json(p), json, names))
                .collect()
        }
        "InterfacesRemoved" => {
            let Ok((obj, ifaces)) = msg.body().deserialize::<(OwnedObjectPath, Vec<String>)>()
            else {
                return None;
            };
            ifaces
                .iter()
                .map(|i| format_line("removed", obj.as_str(), i, &BTreeMap::new(), json, names))
                .collect()
        }
        _ => return None,
    };
    Some(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_reread_on_a_timer_only_while_a_sync_runs_or_without_notifications() {
        let i = std::time::Duration::from_millis(1000);
        // Idle under the kernel's notifications: no timer (the idle cost `benches/peers` measured).
        assert_eq!(events_wait(true, false, i), None);
        assert_eq!(events_wait(true, true, i), Some(i));
        assert_eq!(events_wait(false, false, i), Some(i));
        assert_eq!(events_wait(false, true, i), Some(i));
    }

    #[test]
    fn a_byte_string_is_shown_as_its_text() {
        let v = Value::from(b"none\0".to_vec());
        assert_eq!(value_to_json(&v), json!("none"));
        // Other arrays stay arrays, and bytes that are no UTF-8 stay numbers.
        assert_eq!(value_to_json(&Value::from(vec![1u32, 2])), json!([1, 2]));
        assert_eq!(value_to_json(&Value::from(vec![0xffu8])), json!([255]));
    }

    #[test]
    fn text_and_json_lines() {
        let mut p = BTreeMap::new();
        p.insert("SyncCompleted".to_string(), json!(0.25));
        p.insert("SyncAction".to_string(), json!("resync"));
        let path = "/org/mdpilot/MdPilot1/arrays/9f1e2d3c4b5a69788a9b0c1d2e3f4a5b";
        let mut names = Names::new();
        let props = HashMap::from([(
            "KernelName".to_string(),
            OwnedValue::try_from(Value::from("md1")).unwrap(),
        )]);
        learn(&mut names, path, &props);
        assert_eq!(
            format_line(
                "changed",
                path,
                "org.mdpilot.MdPilot1.Array",
                &p,
                false,
                &names
            ),
            "md1 changed SyncAction=resync SyncCompleted=0.25"
        );
        let j: Json =
            serde_json::from_str(&format_line("changed", path, "x", &p, true, &names)).unwrap();
        assert_eq!(j["object"], "md1");
        assert_eq!(j["properties"]["SyncCompleted"], 0.25);
        assert_eq!(object_name(MANAGER_PATH, &names), "manager");
        assert_eq!(object_name("/org/mdpilot/MdPilot1/jobs/3", &names), "3");
    }

    #[test]
    fn structures_and_dicts_convert() {
        let v = Value::from(vec![(
            String::from("sda1"),
            0i32,
            vec![String::from("in_sync")],
            0u64,
        )]);
        assert_eq!(value_to_json(&v), json!([["sda1", 0, ["in_sync"], 0]]));
        let d: HashMap<String, (u64, u64)> = HashMap::from([("md0".into(), (1, 2))]);
        assert_eq!(value_to_json(&Value::from(d)), json!({"md0": [1, 2]}));
    }
}
