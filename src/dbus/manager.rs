//! `org.mdpilot.MdPilot1.Manager` at `/org/mdpilot/MdPilot1`: global speed limits, resync priority
//! leases, per-array limits, restore, wipe jobs. Thin: every change goes through the policy
//! ([`crate::policy::Policy`]) and every mutating method first authorizes the caller
//! ([`super::auth::authorize`]).
//!
//! Leases taken with `AcquirePriority` are tied to the caller's unique bus name: the service
//! watches `NameOwnerChanged` and calls [`Shared::release_owner`] when the name leaves the bus.

use super::auth::authorize;
use super::errors::{Error, Result};
use super::{BusChoice, MANAGER_IFACE};
use crate::host::Root;
use crate::model::MdStat;
use crate::policy::{LeaseKind, LeaseRequest, Limits, Owner, Policy, PolicyView};
use crate::watch::Event;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use tokio::sync::mpsc::UnboundedSender;
use zbus::interface;
use zbus::message::Header;
use zbus::object_server::SignalEmitter;
use zbus::zvariant::{OwnedValue, Value};

/// `a{sv}` options of a method.
pub type Options = HashMap<String, OwnedValue>;

/// One entry of `Leases`: `(lease id, kind, owner, (global min, global max),
/// {array: (min, max)})`, limits in KiB/s, 0 = not set by this lease.
pub type LeaseInfo = (
    String,
    String,
    String,
    (u64, u64),
    HashMap<String, (u64, u64)>,
);

/// The manager's published properties (KiB/s; 0 where unknown or, for the originals, when no
/// lease is live and nothing is saved).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ManagerProps {
    /// `/proc/sys/dev/raid/speed_limit_min` now.
    pub speed_limit_min: u64,
    /// `/proc/sys/dev/raid/speed_limit_max` now.
    pub speed_limit_max: u64,
    /// Saved original `speed_limit_min` while leases live.
    pub original_speed_limit_min: u64,
    /// Saved original `speed_limit_max` while leases live.
    pub original_speed_limit_max: u64,
    /// Live leases.
    pub leases: Vec<LeaseInfo>,
}

fn kind_word(k: &LeaseKind) -> &'static str {
    match k {
        LeaseKind::Installer => "installer",
        LeaseKind::WipeJob => "wipe-job",
        LeaseKind::Admin => "admin",
        LeaseKind::DbusClient => "dbus-client",
    }
}

impl ManagerProps {
    /// Maps the policy's view (and the model's limits where the view has none) to properties.
    /// The one place that knows `PolicyView`'s fields.
    pub fn from_view(view: &PolicyView, model: &MdStat) -> ManagerProps {
        ManagerProps {
            speed_limit_min: view.speed_limit_min.or(model.speed_limit_min).unwrap_or(0),
            speed_limit_max: view.speed_limit_max.or(model.speed_limit_max).unwrap_or(0),
            original_speed_limit_min: view.originals.speed_limit_min.unwrap_or(0),
            original_speed_limit_max: view.originals.speed_limit_max.unwrap_or(0),
            leases: view
                .leases
                .iter()
                .map(|l| {
                    let owner = match &l.owner {
                        Owner::Pid(p) => format!("pid:{p}"),
                        Owner::BusName(n) => format!("bus:{n}"),
                        Owner::None => String::new(),
                    };
                    let lim = |l: &Limits| (l.min.unwrap_or(0), l.max.unwrap_or(0));
                    (
                        l.holder.clone(),
                        kind_word(&l.kind).to_string(),
                        owner,
                        lim(&l.global),
                        l.arrays.iter().map(|(k, v)| (k.clone(), lim(v))).collect(),
                    )
                })
                .collect(),
        }
    }

    /// Properties whose values differ, by D-Bus name.
    pub fn changed(old: &ManagerProps, new: &ManagerProps) -> HashMap<&'static str, OwnedValue> {
        super::changed_props!(old, new;
            speed_limit_min => "SpeedLimitMin", speed_limit_max => "SpeedLimitMax",
            original_speed_limit_min => "OriginalSpeedLimitMin",
            original_speed_limit_max => "OriginalSpeedLimitMax", leases => "Leases",
        )
    }
}

/// State shared by the D-Bus objects and the service loop.
pub struct Shared {
    /// Where the kernel trees are.
    pub root: Root,
    /// The speed-limit policy.
    pub policy: Policy,
    /// The bus we serve on (decides the polkit subject).
    pub bus: BusChoice,
    /// Last good model.
    pub model: Mutex<MdStat>,
    /// Published manager properties.
    pub props: Mutex<ManagerProps>,
    /// Lease id → unique bus name of the client that took it.
    pub bus_leases: Mutex<HashMap<String, String>>,
    /// Asks the service loop to re-read (after a limit change).
    pub refresh: UnboundedSender<Event>,
    counter: AtomicU64,
    /// Wipe jobs still running, by job number (see [`super::job`]).
    pub jobs: Mutex<BTreeMap<u64, super::job::RunningJob>>,
    /// Next job number.
    pub job_counter: AtomicU64,
    /// How often job progress is published (`progress_interval_ms`).
    pub progress_interval: std::time::Duration,
}

impl Shared {
    /// Creates the shared state.
    pub fn new(
        root: Root,
        policy: Policy,
        bus: BusChoice,
        model: MdStat,
        refresh: UnboundedSender<Event>,
        progress_interval: std::time::Duration,
    ) -> Shared {
        let props = policy
            .show()
            .map(|v| ManagerProps::from_view(&v, &model))
            .unwrap_or_default();
        Shared {
            root,
            policy,
            bus,
            model: Mutex::new(model),
            props: Mutex::new(props),
            bus_leases: Mutex::new(HashMap::new()),
            refresh,
            counter: AtomicU64::new(1),
            jobs: Mutex::new(BTreeMap::new()),
            job_counter: AtomicU64::new(1),
            progress_interval,
        }
    }

    /// Recomputes the manager's properties from `view` (or `policy.show()`) and emits one
    /// PropertiesChanged with the differences, if any.
    pub async fn publish(&self, emitter: &SignalEmitter<'_>, view: Option<PolicyView>) {
        let view = match view {
            Some(v) => v,
            None => match self.policy.show() {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!("cannot read the policy: {e}");
                    return;
                }
            },
        };
        let changed = {
            let model = self.model.lock().unwrap_or_else(|e| e.into_inner());
            let new = ManagerProps::from_view(&view, &model);
            let mut cur = self.props.lock().unwrap_or_else(|e| e.into_inner());
            let changed = ManagerProps::changed(&cur, &new);
            *cur = new;
            changed
        };
        emit_changed(emitter, MANAGER_IFACE, changed).await;
        // Limits in `(system)` arrays follow the global ones: re-read the arrays too.
        let _ = self.refresh.send(Event::Mdstat);
    }

    /// Releases every lease taken by the bus client `name` (it left the bus). Returns how many.
    pub async fn release_owner(&self, emitter: &SignalEmitter<'_>, name: &str) -> usize {
        let ids: Vec<String> = {
            let mut l = self.bus_leases.lock().unwrap_or_else(|e| e.into_inner());
            let ids: Vec<String> = l
                .iter()
                .filter(|(_, owner)| owner.as_str() == name)
                .map(|(id, _)| id.clone())
                .collect();
            for id in &ids {
                l.remove(id);
            }
            ids
        };
        let mut last = None;
        for id in &ids {
            match self.policy.release(id) {
                Ok(v) => last = Some(v),
                Err(e) => tracing::warn!("cannot release lease {id} of {name}: {e}"),
            }
            tracing::info!("released lease {id}: {name} left the bus");
        }
        if !ids.is_empty() {
            self.publish(emitter, last).await;
        }
        ids.len()
    }

    /// Drops leases whose `pid` owner has exited (the service has no per-pid watch; this runs
    /// before each AcquirePriority, like the CLI's reap). Failures are logged.
    pub fn reap_dead_pids(&self) {
        if let Err(e) = self.policy.reap(&|o: &Owner| match o {
            Owner::Pid(p) => crate::policy::pid_alive(*p),
            Owner::BusName(_) | Owner::None => true,
        }) {
            tracing::warn!("cannot reap leases of exited processes: {e}");
        }
    }

    fn has_array(&self, name: &str) -> bool {
        let model = self.model.lock().unwrap_or_else(|e| e.into_inner());
        model.arrays.iter().any(|a| a.name == name)
    }
}

/// Emits one `org.freedesktop.DBus.Properties.PropertiesChanged` carrying `changed`; nothing when
/// empty. Failures are logged (a signal that cannot be sent must not stop the service).
pub async fn emit_changed(
    emitter: &SignalEmitter<'_>,
    iface: &str,
    changed: HashMap<&'static str, OwnedValue>,
) {
    if changed.is_empty() {
        return;
    }
    let Ok(name) = zbus::names::InterfaceName::try_from(iface) else {
        return;
    };
    let values: HashMap<&str, Value<'_>> = changed
        .iter()
        .filter_map(|(k, v)| v.try_clone().ok().map(|v| (*k, Value::from(v))))
        .collect();
    if let Err(e) =
        zbus::fdo::Properties::properties_changed(emitter, name, values, (&[] as &[&str]).into())
            .await
    {
        tracing::warn!("cannot emit PropertiesChanged on {}: {e}", emitter.path());
    }
}

fn opt_u64(opts: &Options, key: &str) -> Result<Option<u64>> {
    let Some(v) = opts.get(key) else {
        return Ok(None);
    };
    let n = match &**v {
        Value::U64(n) => Some(*n),
        Value::U32(n) => Some(u64::from(*n)),
        Value::U16(n) => Some(u64::from(*n)),
        Value::I64(n) => u64::try_from(*n).ok(),
        Value::I32(n) => u64::try_from(*n).ok(),
        _ => None,
    };
    n.map(Some).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "option {key:?} must be a non-negative integer (KiB/s), got {}",
            v.value_signature()
        ))
    })
}

fn nonzero(v: u64) -> Option<u64> {
    (v != 0).then_some(v)
}

/// Validates a per-array min/max pair in KiB/s (0 = unset).
fn check_limits(what: &str, min: u64, max: u64) -> Result<Limits> {
    check_present(
        what,
        Limits {
            min: nonzero(min),
            max: nonzero(max),
        },
    )
}

/// Rejects a min above a max (both present).
fn check_present(what: &str, l: Limits) -> Result<Limits> {
    if let (Some(min), Some(max)) = (l.min, l.max) {
        if min > max {
            return Err(Error::InvalidArgument(format!(
                "{what}: min {min} KiB/s is above max {max} KiB/s"
            )));
        }
    }
    Ok(l)
}

/// `AcquirePriority`'s options, parsed (see [`parse_acquire`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcquireOptions {
    /// Who holds it (`kind`).
    pub kind: LeaseKind,
    /// Global limits: a `min`/`max` present in the dict is that value, 0 included.
    pub global: Limits,
    /// Per-array limits (0 = unset in the dict).
    pub arrays: BTreeMap<String, Limits>,
    /// `holder`: a named lease, not tied to the caller's connection.
    pub holder: Option<String>,
    /// `pid`: the lease lives while that process does.
    pub pid: Option<u32>,
}

fn opt_str(opts: &Options, key: &str) -> Result<Option<String>> {
    match opts.get(key).map(|v| &**v) {
        None => Ok(None),
        Some(Value::Str(s)) => Ok(Some(s.to_string())),
        Some(v) => Err(Error::InvalidArgument(format!(
            "AcquirePriority: {key} must be a string, got {}",
            v.value_signature()
        ))),
    }
}

/// Parses `AcquirePriority`'s options.
///
/// - `min`, `max` (t, KiB/s): global `speed_limit_{min,max}`. PRESENT means that value, 0
///   included (`min` 0: resync yields to all other I/O; `max` 0 pauses resync); absent = not
///   set by this lease.
/// - `arrays` (a{s(tt)}): per-array `sync_speed_{min,max}`, 0 = unset (the kernel rejects 0 for
///   `sync_speed_min`; the policy writes a per-array min as at least 1).
/// - `kind` (s): `client` (default; also `dbus-client`), `installer`, `admin`, `wipe-job`.
/// - `holder` (s): a named lease that outlives the caller's connection (the CLI's form).
/// - `pid` (u): tie the lease to that process instead.
///
/// No `min`, `max` nor `arrays` at all = the install policy: global min `install.0`
/// (the config's `install_min`, default 0) and max `install.1` (`install_max`).
///
/// Errors: `InvalidArgument` for unknown options, wrong types, min above max, pid 0.
pub fn parse_acquire(opts: &Options, install: (u64, Option<u64>)) -> Result<AcquireOptions> {
    const KNOWN: &str = "min, max, arrays, kind, holder, pid";
    for k in opts.keys() {
        if !matches!(
            k.as_str(),
            "min" | "max" | "arrays" | "kind" | "holder" | "pid"
        ) {
            return Err(Error::InvalidArgument(format!(
                "AcquirePriority: unknown option {k:?} (known: {KNOWN})"
            )));
        }
    }
    let mut global = check_present(
        "AcquirePriority",
        Limits {
            min: opt_u64(opts, "min")?,
            max: opt_u64(opts, "max")?,
        },
    )?;
    let kind = match opt_str(opts, "kind")?.as_deref() {
        None | Some("client") | Some("dbus-client") => LeaseKind::DbusClient,
        Some("installer") => LeaseKind::Installer,
        Some("admin") => LeaseKind::Admin,
        Some("wipe-job") => LeaseKind::WipeJob,
        Some(other) => {
            return Err(Error::InvalidArgument(format!(
                "AcquirePriority: kind {other:?} is not client, installer, admin or wipe-job"
            )))
        }
    };
    let mut arrays = BTreeMap::new();
    if let Some(v) = opts.get("arrays") {
        let m: HashMap<String, (u64, u64)> = v
            .try_clone()
            .ok()
            .and_then(|v| HashMap::try_from(v).ok())
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "AcquirePriority: arrays must be a{{s(tt)}}, got {}",
                    v.value_signature()
                ))
            })?;
        for (a, (mn, mx)) in m {
            let l = check_limits(&format!("AcquirePriority {a}"), mn, mx)?;
            if l.is_empty() {
                return Err(Error::InvalidArgument(format!(
                    "AcquirePriority: array {a}: give a min or a max (0 = unset)"
                )));
            }
            arrays.insert(a, l);
        }
    }
    if global.is_empty() && arrays.is_empty() {
        global = Limits {
            min: Some(install.0),
            max: install.1,
        };
    }
    let holder = opt_str(opts, "holder")?;
    if holder.as_deref() == Some("") {
        return Err(Error::InvalidArgument(
            "AcquirePriority: holder is empty".into(),
        ));
    }
    let pid = match opts.get("pid").map(|v| &**v) {
        None => None,
        Some(Value::U32(0)) => {
            return Err(Error::InvalidArgument(
                "AcquirePriority: pid 0 is no process".into(),
            ))
        }
        Some(Value::U32(p)) => Some(*p),
        Some(v) => {
            return Err(Error::InvalidArgument(format!(
                "AcquirePriority: pid must be u, got {}",
                v.value_signature()
            )))
        }
    };
    Ok(AcquireOptions {
        kind,
        global,
        arrays,
        holder,
        pid,
    })
}

fn policy_err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Failed(format!("{what}: {e}"))
}

/// The manager object.
pub struct Manager {
    /// Shared state.
    pub shared: std::sync::Arc<Shared>,
}

/// mdpilot: md RAID arrays for installers and admin tools. Speed limits in KiB/s. Reads are open
/// to everyone; every method needs uid 0 or polkit action org.mdpilot.MdPilot1.manage.
#[interface(name = "org.mdpilot.MdPilot1.Manager")]
impl Manager {
    /// Service version.
    #[zbus(property(emits_changed_signal = "const"))]
    fn version(&self) -> String {
        env!("CARGO_PKG_VERSION").to_string()
    }
    /// /proc/sys/dev/raid/speed_limit_min now, KiB/s.
    #[zbus(property)]
    fn speed_limit_min(&self) -> u64 {
        self.props().speed_limit_min
    }
    /// /proc/sys/dev/raid/speed_limit_max now, KiB/s.
    #[zbus(property)]
    fn speed_limit_max(&self) -> u64 {
        self.props().speed_limit_max
    }
    /// speed_limit_min saved before the first lease, KiB/s; 0 when nothing is saved.
    #[zbus(property)]
    fn original_speed_limit_min(&self) -> u64 {
        self.props().original_speed_limit_min
    }
    /// speed_limit_max saved before the first lease, KiB/s; 0 when nothing is saved.
    #[zbus(property)]
    fn original_speed_limit_max(&self) -> u64 {
        self.props().original_speed_limit_max
    }
    /// Live leases: (id, kind, owner, (min, max), {array: (min, max)}), KiB/s, 0 = unset.
    #[zbus(property)]
    fn leases(&self) -> Vec<LeaseInfo> {
        self.props().leases
    }

    /// Takes a lease on the resync speed limits. Leases combine in the policy: the most
    /// yielding request wins (lowest min, lowest max); the saved originals come back when the
    /// last lease goes. Options: min, max (t, KiB/s, global; present = that value, 0 included:
    /// min 0 lets resync yield to all I/O; absent = unset); arrays (a{s(tt)}, per-array
    /// min/max, 0 = unset; a per-array min is written as at least 1, the kernel rejects 0);
    /// kind (s: client, installer, admin, wipe-job); holder (s: a named lease that outlives
    /// this connection, id = holder); pid (u: the lease lives while that process does). No
    /// min, max nor arrays: the install policy (global min = the config's install_min, default
    /// 0). Without holder and pid the lease is tied to the caller's bus name and released when
    /// it leaves the bus. Returns the lease id.
    #[zbus(out_args("lease_id"))]
    async fn acquire_priority(
        &self,
        options: Options,
        #[zbus(header)] header: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
    ) -> Result<String> {
        authorize(conn, &header, &self.shared.bus).await?;
        let install = {
            let s = self.shared.policy.settings();
            (s.install_min, s.install_max)
        };
        let o = parse_acquire(&options, install)?;
        for a in o.arrays.keys() {
            if !self.shared.has_array(a) {
                return Err(Error::NoSuchArray(format!("AcquirePriority: no array {a}")));
            }
        }
        let sender = header
            .sender()
            .map(|s| s.to_string())
            .ok_or_else(|| Error::InvalidArgument("no sender".into()))?;
        self.shared.reap_dead_pids();
        let (id, owner, bus_owner) = match (&o.holder, o.pid) {
            (Some(h), pid) => (h.clone(), pid.map_or(Owner::None, Owner::Pid), None),
            (None, pid) => {
                let n = self.shared.counter.fetch_add(1, Ordering::Relaxed);
                let id = format!("dbus-{}-{n}", sender.trim_start_matches(':'));
                match pid {
                    Some(p) => (id, Owner::Pid(p), None),
                    None => (id, Owner::BusName(sender.clone()), Some(sender.clone())),
                }
            }
        };
        let req = LeaseRequest {
            holder: id.clone(),
            kind: o.kind,
            owner,
            global: o.global,
            arrays: o.arrays,
        };
        {
            // Record a bus owner first so a disconnect racing with this call still finds the
            // lease; a named lease replacing a bus lease of the same id is no longer tied to it.
            let mut l = self
                .shared
                .bus_leases
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            match &bus_owner {
                Some(s) => l.insert(id.clone(), s.clone()),
                None => l.remove(&id),
            };
        }
        match self.shared.policy.acquire(req) {
            Ok(view) => {
                self.shared.publish(&emitter, Some(view)).await;
                Ok(id)
            }
            Err(e) => {
                if bus_owner.is_some() {
                    self.shared
                        .bus_leases
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&id);
                }
                Err(policy_err("AcquirePriority", e))
            }
        }
    }

    /// Ends a lease: one taken with AcquirePriority (bus, holder or pid lease) or any named
    /// lease of the policy (e.g. one the CLI took with `policy apply --holder`). An id that
    /// holds no lease is InvalidArgument.
    async fn release_priority(
        &self,
        lease_id: String,
        #[zbus(header)] header: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
    ) -> Result<()> {
        authorize(conn, &header, &self.shared.bus).await?;
        let bus_lease = self
            .shared
            .bus_leases
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&lease_id)
            .is_some();
        if !bus_lease {
            let view = self
                .shared
                .policy
                .show()
                .map_err(|e| policy_err("ReleasePriority", e))?;
            if !view.leases.iter().any(|l| l.holder == lease_id) {
                return Err(Error::InvalidArgument(format!(
                    "ReleasePriority: no lease {lease_id:?}"
                )));
            }
        }
        let view = self
            .shared
            .policy
            .release(&lease_id)
            .map_err(|e| policy_err("ReleasePriority", e))?;
        self.shared.publish(&emitter, Some(view)).await;
        Ok(())
    }

    /// Sets md/sync_speed_min and md/sync_speed_max of one array (KiB/s; 0 = follow the system).
    /// Kept until RestoreLimits. No options yet.
    #[allow(clippy::too_many_arguments)] // D-Bus arguments plus the zbus-injected context.
    async fn set_array_speed_limits(
        &self,
        array: String,
        min: u64,
        max: u64,
        options: Options,
        #[zbus(header)] header: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
    ) -> Result<()> {
        authorize(conn, &header, &self.shared.bus).await?;
        if let Some(k) = options.keys().next() {
            return Err(Error::InvalidArgument(format!(
                "SetArraySpeedLimits: unknown option {k:?}"
            )));
        }
        let limits = check_limits(&format!("SetArraySpeedLimits {array}"), min, max)?;
        if !self.shared.has_array(&array) {
            return Err(Error::NoSuchArray(format!(
                "SetArraySpeedLimits: no array {array}"
            )));
        }
        let holder = format!("admin-{array}");
        let view = if limits.min.is_none() && limits.max.is_none() {
            match self.shared.policy.release(&holder) {
                Ok(v) => v,
                Err(_) => self
                    .shared
                    .policy
                    .show()
                    .map_err(|e| policy_err("SetArraySpeedLimits", e))?,
            }
        } else {
            let req = LeaseRequest {
                holder,
                kind: LeaseKind::Admin,
                owner: Owner::None,
                global: Limits::default(),
                arrays: BTreeMap::from([(array.clone(), limits)]),
            };
            self.shared
                .policy
                .acquire(req)
                .map_err(|e| policy_err(&format!("SetArraySpeedLimits {array}"), e))?
        };
        self.shared.publish(&emitter, Some(view)).await;
        Ok(())
    }

    /// Drops every lease and writes back the saved limits (option defaults (b): the kernel
    /// defaults 1000/200000 KiB/s instead).
    async fn restore_limits(
        &self,
        options: Options,
        #[zbus(header)] header: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
    ) -> Result<()> {
        authorize(conn, &header, &self.shared.bus).await?;
        let mut defaults = false;
        for (k, v) in &options {
            match (k.as_str(), &**v) {
                ("defaults", Value::Bool(b)) => defaults = *b,
                _ => {
                    return Err(Error::InvalidArgument(format!(
                        "RestoreLimits: unknown option {k:?} or wrong type {}",
                        v.value_signature()
                    )))
                }
            }
        }
        let view = self
            .shared
            .policy
            .restore(defaults)
            .map_err(|e| policy_err("RestoreLimits", e))?;
        self.shared
            .bus_leases
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.shared.publish(&emitter, Some(view)).await;
        Ok(())
    }

    /// Starts wiping a block device; returns the job object
    /// /org/mdpilot/MdPilot1/jobs/<n> (interface org.mdpilot.MdPilot1.Job). Options: method (s:
    /// zero (default), random, discard, zeroout, signatures), verify (b), keep-resync (b).
    /// Refused devices (mounted, swap, holders, backing /, a job already on it) are Busy; bad
    /// options or devices InvalidArgument.
    #[zbus(out_args("job"))]
    async fn start_wipe(
        &self,
        device: String,
        options: Options,
        #[zbus(header)] header: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> Result<zbus::zvariant::OwnedObjectPath> {
        super::job::start_wipe(&self.shared, conn, &header, device, options).await
    }
}

impl Manager {
    fn props(&self) -> ManagerProps {
        self.shared
            .props
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(kv: &[(&str, Value<'static>)]) -> Options {
        kv.iter()
            .map(|(k, v)| (k.to_string(), OwnedValue::try_from(v.clone()).unwrap()))
            .collect()
    }

    const INSTALL: (u64, Option<u64>) = (0, None);

    #[test]
    fn acquire_options_parse() {
        let o = parse_acquire(
            &opts(&[
                ("min", Value::U64(50_000)),
                ("kind", Value::from("installer")),
            ]),
            INSTALL,
        )
        .unwrap();
        assert_eq!(o.kind, LeaseKind::Installer);
        assert_eq!(o.global.min, Some(50_000));
        assert_eq!(o.global.max, None);
        assert!(o.arrays.is_empty());
        assert_eq!((o.holder, o.pid), (None, None));
    }

    #[test]
    fn present_zero_means_zero_and_absent_means_unset() {
        let o = parse_acquire(&opts(&[("min", Value::U64(0))]), INSTALL).unwrap();
        assert_eq!(
            o.global,
            Limits {
                min: Some(0),
                max: None
            }
        );
        let o = parse_acquire(&opts(&[("max", Value::U64(0))]), INSTALL).unwrap();
        assert_eq!(
            o.global,
            Limits {
                min: None,
                max: Some(0)
            }
        );
        // min 0 below max 0 is fine; min above max is not.
        parse_acquire(
            &opts(&[("min", Value::U64(0)), ("max", Value::U64(0))]),
            INSTALL,
        )
        .unwrap();
    }

    #[test]
    fn empty_options_are_the_install_policy() {
        let o = parse_acquire(&opts(&[]), (0, None)).unwrap();
        assert_eq!(
            o.global,
            Limits {
                min: Some(0),
                max: None
            }
        );
        assert_eq!(o.kind, LeaseKind::DbusClient);
        let o = parse_acquire(
            &opts(&[
                ("holder", Value::from("installer")),
                ("pid", Value::U32(42)),
            ]),
            (7, Some(900)),
        )
        .unwrap();
        assert_eq!(
            o.global,
            Limits {
                min: Some(7),
                max: Some(900)
            }
        );
        assert_eq!(o.holder.as_deref(), Some("installer"));
        assert_eq!(o.pid, Some(42));
    }

    #[test]
    fn acquire_rejects_bad_options() {
        for o in [
            opts(&[("bogus", Value::U64(1))]),
            opts(&[("min", Value::from("fast"))]),
            opts(&[("min", Value::U64(9)), ("max", Value::U64(3))]),
            opts(&[("min", Value::I32(-1))]),
            opts(&[("min", Value::U64(1)), ("kind", Value::from("root"))]),
            opts(&[("holder", Value::U64(1))]),
            opts(&[("holder", Value::from(""))]),
            opts(&[("pid", Value::U32(0))]),
            opts(&[("pid", Value::from("1"))]),
        ] {
            assert!(
                matches!(parse_acquire(&o, INSTALL), Err(Error::InvalidArgument(_))),
                "{o:?}"
            );
        }
    }

    #[test]
    fn acquire_arrays_option() {
        let m: HashMap<String, (u64, u64)> = HashMap::from([("md1".into(), (10, 20))]);
        let o = parse_acquire(&opts(&[("arrays", Value::from(m))]), INSTALL).unwrap();
        assert_eq!(
            o.arrays["md1"],
            Limits {
                min: Some(10),
                max: Some(20)
            }
        );
        // Per-array 0 = unset; the global limits stay unset (no install policy then).
        let m: HashMap<String, (u64, u64)> = HashMap::from([("md1".into(), (0, 20))]);
        let o = parse_acquire(&opts(&[("arrays", Value::from(m))]), INSTALL).unwrap();
        assert_eq!(o.arrays["md1"].min, None);
        assert!(o.global.is_empty());
        let m: HashMap<String, (u64, u64)> = HashMap::from([("md1".into(), (0, 0))]);
        assert!(parse_acquire(&opts(&[("arrays", Value::from(m))]), INSTALL).is_err());
    }
}
