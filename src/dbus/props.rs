//! PropertiesChanged machinery shared by the Manager, Array and Job objects, and the Manager's
//! published property snapshot ([`ManagerProps`]).
//!
//! Every object keeps a plain snapshot struct of its properties; after a re-read the new snapshot
//! is diffed with the published one (`changed_props!`) and [`emit_changed`] sends one
//! `org.freedesktop.DBus.Properties.PropertiesChanged` with only the values that differ.

use crate::model::MdStat;
use crate::policy::{Limits, Owner, PolicyView};
use std::collections::HashMap;
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

/// One entry of the Manager's `Leases`: `(lease id, kind, owner, (global min, global max),
/// {array: (min, max)})`, limits in KiB/s, 0 = not set by this lease. `kind` is
/// [`crate::policy::LeaseKind::as_str`]; `owner` is [`owner_word`].
pub type LeaseInfo = (
    String,
    String,
    String,
    (u64, u64),
    HashMap<String, (u64, u64)>,
);

/// The `owner` field of a [`LeaseInfo`]: `pid:<pid>`, `bus:<unique name>`, or "" for a lease
/// that lives until released.
pub fn owner_word(owner: &Owner) -> String {
    match owner {
        Owner::Pid(p) => format!("pid:{p}"),
        Owner::BusName(n) => format!("bus:{n}"),
        Owner::None => String::new(),
    }
}

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
                    let lim = |l: &Limits| (l.min.unwrap_or(0), l.max.unwrap_or(0));
                    (
                        l.holder.clone(),
                        l.kind.as_str().to_string(),
                        owner_word(&l.owner),
                        lim(&l.global),
                        l.arrays.iter().map(|(k, v)| (k.clone(), lim(v))).collect(),
                    )
                })
                .collect(),
        }
    }

    /// Ids of the published leases owned by the bus client with unique name `name`
    /// ([`Owner::BusName`] in the policy).
    pub fn leases_of_bus_name(&self, name: &str) -> Vec<String> {
        let owner = owner_word(&Owner::BusName(name.to_string()));
        self.leases
            .iter()
            .filter(|l| l.2 == owner)
            .map(|l| l.0.clone())
            .collect()
    }

    /// Properties whose values differ, by D-Bus name.
    pub fn changed(old: &ManagerProps, new: &ManagerProps) -> HashMap<&'static str, OwnedValue> {
        changed_props!(old, new;
            speed_limit_min => "SpeedLimitMin", speed_limit_max => "SpeedLimitMax",
            original_speed_limit_min => "OriginalSpeedLimitMin",
            original_speed_limit_max => "OriginalSpeedLimitMax", leases => "Leases",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{GlobalOriginals, LeaseKind, LeaseView};
    use std::collections::BTreeMap;

    fn lease(holder: &str, kind: LeaseKind, owner: Owner) -> LeaseView {
        LeaseView {
            holder: holder.into(),
            kind,
            owner,
            global: Limits {
                min: Some(0),
                max: None,
            },
            arrays: BTreeMap::from([(
                "md1".to_string(),
                Limits {
                    min: None,
                    max: Some(500),
                },
            )]),
            dead: false,
            expires_unix_s: None,
        }
    }

    fn view(leases: Vec<LeaseView>) -> PolicyView {
        PolicyView {
            state_path: "/run/mdpilot/policy.toml".into(),
            speed_limit_min: Some(0),
            speed_limit_max: None,
            originals: GlobalOriginals {
                speed_limit_min: Some(1000),
                speed_limit_max: None,
            },
            leases,
            arrays: BTreeMap::new(),
            warnings: vec![],
            originals_unknown: None,
        }
    }

    #[test]
    fn leases_map_to_dbus_tuples() {
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
            (1000, 0)
        );
        let words: Vec<(&str, &str)> = p
            .leases
            .iter()
            .map(|l| (l.1.as_str(), l.2.as_str()))
            .collect();
        assert_eq!(
            words,
            [
                ("installer", ""),
                ("wipe-job", "pid:7"),
                ("dbus-client", "bus::1.5")
            ]
        );
        assert_eq!(p.leases[0].3, (0, 0));
        assert_eq!(p.leases[0].4["md1"], (0, 500));
        assert_eq!(p.leases_of_bus_name(":1.5"), ["dbus-1.5-1"]);
        assert!(p.leases_of_bus_name(":1.6").is_empty());
    }

    #[test]
    fn changed_lists_only_differences() {
        let old = ManagerProps::default();
        let mut new = old.clone();
        assert!(ManagerProps::changed(&old, &new).is_empty());
        new.speed_limit_max = 5;
        let keys: Vec<_> = ManagerProps::changed(&old, &new).into_keys().collect();
        assert_eq!(keys, ["SpeedLimitMax"]);
    }
}
