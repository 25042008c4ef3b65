//! PropertiesChanged machinery shared by the Manager, Array and Job objects, and the Manager's
//! published property snapshot ([`ManagerProps`]).
//!
//! Every object keeps a plain snapshot struct of its properties; after a re-read the new snapshot
//! is diffed with the published one (`changed_props!`) and [`emit_changed`] sends one
//! `org.freedesktop.DBus.Properties.PropertiesChanged` with only the values that differ.

use crate::model::MdStat;
use crate::policy::{Bound, LeaseKind, LeaseView, Limits, Owner, PolicyView};
use std::collections::{BTreeMap, HashMap};
use zbus::object_server::SignalEmitter;
use zbus::zvariant::{OwnedValue, Value};

/// `changed_props!(old, new; field => "DBusName", ...)`: a `HashMap<&'static str, OwnedValue>`
/// of the properties whose values differ between two property snapshots (PropertiesChanged
/// carries only those). Used by the Manager, Array and Job objects.
macro_rules! changed_props {
    ($old:expr, $new:expr; $($field:ident => $name:literal),* $(,)?) => {{
        let mut out = std::collections::HashMap::new();
        $(
            if $old.$field != $new.$field {
                if let Ok(v) = zbus::zvariant::OwnedValue::try_from(
                    zbus::zvariant::Value::from($new.$field.clone()),
                ) {
                    out.insert($name, v);
                }
            }
        )*
        out
    }};
}
pub(crate) use changed_props;

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

/// One lease as the Manager's `Leases` publishes it: `a{sv}` with only the keys that are set
/// (see [`LeaseEntry::to_dict`]).
pub type LeaseDict = HashMap<String, OwnedValue>;

/// One live lease, typed; published as a [`LeaseDict`]. Limits in KiB/s; `None` = not set by
/// this lease (0 is a value: min 0 is the install policy).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseEntry {
    /// The lease id (what `ReleasePriority` takes).
    pub id: String,
    /// `client`, `installer`, `admin`, `wipe-job` (the words `AcquirePriority`'s `kind` takes).
    pub kind: String,
    /// What keeps it alive: `bus-name` (released when that client leaves the bus), `pid`
    /// (released when that process exits), `holder` (lives until released by id).
    pub owner_kind: String,
    /// The unique bus name, the pid in decimal, or the holder id.
    pub owner: String,
    /// Global `speed_limit_min`.
    pub min: Option<u64>,
    /// Global `speed_limit_max`.
    pub max: Option<u64>,
    /// Global `sync_io_depth` (requests in flight; Linux 6.16+).
    pub io_depth: Option<u64>,
    /// Per-array `sync_speed_min`, `sync_speed_max` and `sync_io_depth` by kernel name.
    pub arrays: BTreeMap<String, Limits>,
    /// µs since the epoch when a timed lease (`AcquirePriority`'s `duration`, `policy apply
    /// --for`) ends by itself (the policy's `expires_unix_s` × 10⁶); `None` (key absent) for
    /// leases without an end.
    pub expires: Option<u64>,
    /// µs since the epoch when the lease was first taken (the policy's `taken_unix_s` × 10⁶;
    /// replacing a lease keeps it); `None` (key absent) for leases recorded before the policy
    /// kept the time.
    pub taken: Option<u64>,
}

/// `LeaseKind` as the bus spells it (`DbusClient` is `client`, the word `kind` takes).
pub fn kind_word(kind: LeaseKind) -> &'static str {
    match kind {
        LeaseKind::DbusClient => "client",
        k => k.as_str(),
    }
}

fn put(d: &mut LeaseDict, k: &str, v: Value<'_>) {
    if let Ok(v) = OwnedValue::try_from(v) {
        d.insert(k.to_string(), v);
    }
}

impl LeaseEntry {
    /// The entry for a lease of the policy's view.
    pub fn from_view(l: &LeaseView) -> LeaseEntry {
        let (owner_kind, owner) = match &l.owner {
            Owner::BusName(n) => ("bus-name", n.clone()),
            Owner::Process { pid, .. } | Owner::Pid(pid) => ("pid", pid.to_string()),
            Owner::None => ("holder", l.holder.clone()),
        };
        LeaseEntry {
            id: l.holder.clone(),
            kind: kind_word(l.kind).to_string(),
            owner_kind: owner_kind.to_string(),
            owner,
            min: l.global.min,
            max: l.global.max,
            io_depth: l.global.io_depth,
            arrays: l.arrays.clone(),
            expires: l.expires_unix_s.map(|s| s.saturating_mul(1_000_000)),
            taken: l.taken_unix_s.map(|s| s.saturating_mul(1_000_000)),
        }
    }

    /// The `a{sv}` form: `id` s, `kind` s, `owner-kind` s, `owner` s always; `min` t, `max` t
    /// and `io_depth` t only when set; `arrays` a{sa{sv}} (per array `min`/`max`/`io_depth` t
    /// only when set) only when the
    /// lease has per-array limits; `expires` t only for a lease with an expiry; `taken` t only
    /// when the policy knows when the lease was taken.
    pub fn to_dict(&self) -> LeaseDict {
        let mut d = LeaseDict::new();
        put(&mut d, "id", Value::from(self.id.as_str()));
        put(&mut d, "kind", Value::from(self.kind.as_str()));
        put(&mut d, "owner-kind", Value::from(self.owner_kind.as_str()));
        put(&mut d, "owner", Value::from(self.owner.as_str()));
        if let Some(v) = self.min {
            put(&mut d, "min", Value::U64(v));
        }
        if let Some(v) = self.max {
            put(&mut d, "max", Value::U64(v));
        }
        if let Some(v) = self.io_depth {
            put(&mut d, "io_depth", Value::U64(v));
        }
        if !self.arrays.is_empty() {
            let arrays: HashMap<String, HashMap<String, Value<'_>>> = self
                .arrays
                .iter()
                .map(|(a, lim)| {
                    let l = Bound::ALL
                        .into_iter()
                        .filter_map(|b| Some((b.as_str().to_string(), Value::U64(lim.get(b)?))))
                        .collect();
                    (a.clone(), l)
                })
                .collect();
            put(&mut d, "arrays", Value::from(arrays));
        }
        if let Some(v) = self.expires {
            put(&mut d, "expires", Value::U64(v));
        }
        if let Some(v) = self.taken {
            put(&mut d, "taken", Value::U64(v));
        }
        d
    }

    /// Reads a [`LeaseDict`] back (the client side: `mdpilot policy`, tests). Unknown keys are
    /// ignored; missing `id`/`kind`/`owner-kind`/`owner` read as "".
    pub fn from_dict(d: &LeaseDict) -> LeaseEntry {
        let s = |k: &str| {
            d.get(k)
                .and_then(|v| String::try_from(v.try_clone().ok()?).ok())
                .unwrap_or_default()
        };
        let t = |k: &str| d.get(k).and_then(|v| u64::try_from(&**v).ok());
        let arrays = d
            .get("arrays")
            .and_then(|v| v.try_clone().ok())
            .and_then(|v| HashMap::<String, HashMap<String, OwnedValue>>::try_from(v).ok())
            .unwrap_or_default()
            .into_iter()
            .map(|(a, l)| {
                let t = |k: &str| l.get(k).and_then(|v| u64::try_from(&**v).ok());
                let limits = Limits {
                    min: t("min"),
                    max: t("max"),
                    io_depth: t("io_depth"),
                };
                (a, limits)
            })
            .collect();
        LeaseEntry {
            id: s("id"),
            kind: s("kind"),
            owner_kind: s("owner-kind"),
            owner: s("owner"),
            min: t("min"),
            max: t("max"),
            io_depth: t("io_depth"),
            arrays,
            expires: t("expires"),
            taken: t("taken"),
        }
    }
}

/// `(saved?, KiB/s)`: a saved original limit; `(false, 0)` when nothing is saved (0 is a valid
/// saved value, hence the flag).
pub fn saved(v: Option<u64>) -> (bool, u64) {
    (v.is_some(), v.unwrap_or(0))
}

/// The manager's published properties (KiB/s; 0 where unknown).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ManagerProps {
    /// `/proc/sys/dev/raid/speed_limit_min` now.
    pub speed_limit_min: u64,
    /// `/proc/sys/dev/raid/speed_limit_max` now.
    pub speed_limit_max: u64,
    /// Saved original `speed_limit_min` while leases live: `(saved?, KiB/s)`.
    pub original_speed_limit_min: (bool, u64),
    /// Saved original `speed_limit_max` while leases live: `(saved?, KiB/s)`.
    pub original_speed_limit_max: (bool, u64),
    /// `/proc/sys/dev/raid/sync_io_depth` as the policy last read it; 0 where the kernel lacks
    /// it (before 6.16).
    pub sync_io_depth: u64,
    /// Saved original `sync_io_depth` while a lease sets it: `(saved?, requests)`.
    pub original_sync_io_depth: (bool, u64),
    /// Live leases.
    pub leases: Vec<LeaseEntry>,
}

impl ManagerProps {
    /// Maps the policy's view (and the model's limits where the view has none) to properties.
    /// The one place that knows `PolicyView`'s fields.
    pub fn from_view(view: &PolicyView, model: &MdStat) -> ManagerProps {
        ManagerProps {
            speed_limit_min: view.speed_limit_min.or(model.speed_limit_min).unwrap_or(0),
            speed_limit_max: view.speed_limit_max.or(model.speed_limit_max).unwrap_or(0),
            original_speed_limit_min: saved(view.originals.speed_limit_min),
            original_speed_limit_max: saved(view.originals.speed_limit_max),
            sync_io_depth: view.sync_io_depth.unwrap_or(0),
            original_sync_io_depth: saved(view.originals.sync_io_depth),
            leases: view.leases.iter().map(LeaseEntry::from_view).collect(),
        }
    }

    /// `Leases` as published: one [`LeaseDict`] per lease.
    pub fn lease_dicts(&self) -> Vec<LeaseDict> {
        self.leases.iter().map(LeaseEntry::to_dict).collect()
    }

    /// Ids of the published leases owned by the bus client with unique name `name`
    /// ([`Owner::BusName`] in the policy).
    pub fn leases_of_bus_name(&self, name: &str) -> Vec<String> {
        self.leases
            .iter()
            .filter(|l| l.owner_kind == "bus-name" && l.owner == name)
            .map(|l| l.id.clone())
            .collect()
    }

    /// Properties whose values differ, by D-Bus name.
    pub fn changed(old: &ManagerProps, new: &ManagerProps) -> HashMap<&'static str, OwnedValue> {
        let mut out = changed_props!(old, new;
            speed_limit_min => "SpeedLimitMin", speed_limit_max => "SpeedLimitMax",
            original_speed_limit_min => "OriginalSpeedLimitMin",
            original_speed_limit_max => "OriginalSpeedLimitMax",
            sync_io_depth => "SyncIoDepth",
            original_sync_io_depth => "OriginalSyncIoDepth",
        );
        if old.leases != new.leases {
            if let Ok(v) = OwnedValue::try_from(Value::from(new.lease_dicts())) {
                out.insert("Leases", v);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::GlobalOriginals;

    fn lease(holder: &str, kind: LeaseKind, owner: Owner) -> LeaseView {
        LeaseView {
            holder: holder.into(),
            kind,
            owner,
            global: Limits {
                min: Some(0),
                max: None,
                io_depth: None,
            },
            arrays: BTreeMap::from([(
                "md1".to_string(),
                Limits {
                    min: None,
                    max: Some(500),
                    io_depth: None,
                },
            )]),
            dead: false,
            expires_unix_s: None,
            taken_unix_s: None,
        }
    }

    fn view(leases: Vec<LeaseView>) -> PolicyView {
        PolicyView {
            state_path: "/run/mdpilot/policy.toml".into(),
            speed_limit_min: Some(0),
            speed_limit_max: None,
            sync_io_depth: None,
            originals: GlobalOriginals {
                speed_limit_min: Some(1000),
                speed_limit_max: None,
                sync_io_depth: None,
            },
            leases,
            arrays: BTreeMap::new(),
            warnings: vec![],
            originals_unknown: None,
            changes: Vec::new(),
        }
    }

    #[test]
    fn leases_map_to_dicts_with_only_the_set_keys() {
        let model = MdStat {
            speed_limit_max: Some(200_000),
            ..MdStat::default()
        };
        let p = ManagerProps::from_view(
            &view(vec![
                lease("d-i", LeaseKind::Installer, Owner::None),
                lease("j", LeaseKind::WipeJob, Owner::Pid(7)),
                lease(
                    "dbus-1.5-1",
                    LeaseKind::DbusClient,
                    Owner::BusName(":1.5".into()),
                ),
            ]),
            &model,
        );
        assert_eq!((p.speed_limit_min, p.speed_limit_max), (0, 200_000));
        assert_eq!(
            (p.original_speed_limit_min, p.original_speed_limit_max),
            ((true, 1000), (false, 0))
        );
        let words: Vec<(&str, &str, &str)> = p
            .leases
            .iter()
            .map(|l| (l.kind.as_str(), l.owner_kind.as_str(), l.owner.as_str()))
            .collect();
        assert_eq!(
            words,
            [
                ("installer", "holder", "d-i"),
                ("wipe-job", "pid", "7"),
                ("client", "bus-name", ":1.5")
            ]
        );
        let d = &p.lease_dicts()[0];
        let mut keys: Vec<&str> = d.keys().map(String::as_str).collect();
        keys.sort();
        // min 0 is present; the unset max and the (reserved) expiry are absent.
        assert_eq!(keys, ["arrays", "id", "kind", "min", "owner", "owner-kind"]);
        assert_eq!(u64::try_from(&*d["min"]).unwrap(), 0);
        let arrays: HashMap<String, HashMap<String, OwnedValue>> =
            d["arrays"].try_clone().unwrap().try_into().unwrap();
        assert_eq!(arrays["md1"].len(), 1);
        assert_eq!(u64::try_from(&*arrays["md1"]["max"]).unwrap(), 500);
        assert_eq!(d["arrays"].value_signature().to_string(), "a{sa{sv}}");
        // The dict reads back to the same entry.
        for (e, d) in p.leases.iter().zip(p.lease_dicts()) {
            assert_eq!(&LeaseEntry::from_dict(&d), e);
        }
        assert_eq!(p.leases_of_bus_name(":1.5"), ["dbus-1.5-1"]);
        assert!(p.leases_of_bus_name(":1.6").is_empty());
        let v = Value::from(p.lease_dicts());
        assert_eq!(v.value_signature().to_string(), "aa{sv}");
    }

    #[test]
    fn a_lease_without_limits_has_no_limit_keys() {
        let mut l = lease("x", LeaseKind::Admin, Owner::None);
        l.global = Limits::default();
        l.arrays.clear();
        let d = LeaseEntry::from_view(&l).to_dict();
        let mut keys: Vec<&str> = d.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["id", "kind", "owner", "owner-kind"]);
    }

    #[test]
    fn changed_lists_only_differences() {
        let old = ManagerProps::default();
        let mut new = old.clone();
        assert!(ManagerProps::changed(&old, &new).is_empty());
        new.speed_limit_max = 5;
        let keys: Vec<_> = ManagerProps::changed(&old, &new).into_keys().collect();
        assert_eq!(keys, ["SpeedLimitMax"]);
        let mut newer = new.clone();
        newer.leases.push(LeaseEntry::default());
        newer.original_speed_limit_min = (true, 0);
        let mut keys: Vec<_> = ManagerProps::changed(&new, &newer).into_keys().collect();
        keys.sort();
        assert_eq!(keys, ["Leases", "OriginalSpeedLimitMin"]);
    }
}
