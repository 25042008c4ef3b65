//! PropertiesChanged machinery shared by the Manager, Array and Job objects, and the Manager's
//! published property snapshot ([`ManagerProps`]).
//!
//! Every object keeps a plain snapshot struct of its properties; after a re-read the new snapshot
//! is diffed with the published one ([`changed_props!`]) and [`emit_changed`] sends one
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
