//! The D-Bus face of the service (zbus): thin objects that delegate to the model and the policy.
//!
//! - [`manager`]: `/org/mdpilot/MdPilot1`, interface `org.mdpilot.MdPilot1.Manager` (plus
//!   `org.freedesktop.DBus.ObjectManager`).
//! - [`array`](mod@array): `/org/mdpilot/MdPilot1/arrays/<name>`, interface `org.mdpilot.MdPilot1.Array`.
//! - [`job`]: wipe jobs, `/org/mdpilot/MdPilot1/jobs/<n>`, interface `org.mdpilot.MdPilot1.Job`.
//! - [`auth`]: who may call mutating methods.
//! - [`errors`]: the typed `org.mdpilot.MdPilot1.Error.*` errors and the mapping of the core's
//!   errors onto them.
//! - [`options`]: parsing of the methods' `a{sv}` options.
//! - [`plan`]: a wipe job's plan as structured data (`Job.PlanData`).
//! - [`props`]: property snapshots, their diffs and `PropertiesChanged`.
//! - [`client`]: typed proxies for the front ends (`mdpilot policy`, tests).
//!
//! The state the objects share with the service loop is [`crate::service::state::Shared`].
//!
//! The introspection of every interface is committed under `dbus/` and checked by tests
//! (`tests/dbus_service.rs`, `tests/dbus_jobs.rs`).

pub mod array;
pub mod auth;
pub mod client;
pub mod errors;
pub mod job;
pub mod manager;
pub mod options;
pub mod plan;
pub mod props;

/// The well-known bus name the service owns.
pub const BUS_NAME: &str = "org.mdpilot.MdPilot1";
/// Path of the manager object (also the ObjectManager).
pub const MANAGER_PATH: &str = "/org/mdpilot/MdPilot1";
/// Manager interface name.
pub const MANAGER_IFACE: &str = "org.mdpilot.MdPilot1.Manager";
/// Array interface name.
pub const ARRAY_IFACE: &str = "org.mdpilot.MdPilot1.Array";

/// Object path of an array: `/org/mdpilot/MdPilot1/arrays/<name>`; characters not allowed in a
/// path element (anything but `[A-Za-z0-9_]`) become `_`.
pub fn array_path(name: &str) -> String {
    let elem: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{MANAGER_PATH}/arrays/{elem}")
}

/// Which bus to use: `system` (default), `session` or a D-Bus address (`unix:path=/tmp/bus`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BusChoice {
    /// The system bus.
    System,
    /// The session bus.
    Session,
    /// An explicit address (tests use a private `dbus-daemon`).
    Address(String),
}

impl std::str::FromStr for BusChoice {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "system" => BusChoice::System,
            "session" => BusChoice::Session,
            a => BusChoice::Address(a.to_string()),
        })
    }
}

impl BusChoice {
    /// A connection builder for this bus.
    pub fn builder(&self) -> zbus::Result<zbus::connection::Builder<'static>> {
        match self {
            BusChoice::System => zbus::connection::Builder::system(),
            BusChoice::Session => zbus::connection::Builder::session(),
            BusChoice::Address(a) => zbus::connection::Builder::address(a.as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_paths_are_valid() {
        assert_eq!(array_path("md0"), "/org/mdpilot/MdPilot1/arrays/md0");
        assert_eq!(array_path("md_d0"), "/org/mdpilot/MdPilot1/arrays/md_d0");
        assert_eq!(array_path("md/x-y"), "/org/mdpilot/MdPilot1/arrays/md_x_y");
    }

    #[test]
    fn bus_choice_parses() {
        assert_eq!("system".parse::<BusChoice>().unwrap(), BusChoice::System);
        assert_eq!(
            "unix:path=/x".parse::<BusChoice>().unwrap(),
            BusChoice::Address("unix:path=/x".into())
        );
    }
}
