//! The D-Bus face of the service (zbus): thin objects that delegate to the model and the policy.
//!
//! Object layout (API version 1.0):
//! - `/org/mdpilot/MdPilot1`: `org.freedesktop.DBus.ObjectManager` only ([`objects`]); its
//!   `GetManagedObjects` returns every object below with its properties, and no empty node.
//! - [`manager`]: `/org/mdpilot/MdPilot1/Manager`, interface `org.mdpilot.MdPilot1.Manager`.
//! - [`array`](mod@array): `/org/mdpilot/MdPilot1/arrays/<uuid as 32 hex digits>` (or
//!   `.../arrays/name_<kernel name>` without a UUID), interface `org.mdpilot.MdPilot1.Array`.
//! - [`job`]: wipe jobs, `/org/mdpilot/MdPilot1/jobs/<n>`, interface `org.mdpilot.MdPilot1.Job`.
//! - [`check`]: the Array object's check (scrub) methods and properties, on the core's
//!   [`crate::check::run`].
//! - [`auth`]: who may call mutating methods.
//! - [`errors`]: the typed `org.mdpilot.MdPilot1.Error.*` errors and the mapping of the core's
//!   errors onto them.
//! - [`options`]: parsing of the methods' `a{sv}` options.
//! - [`plan`]: a wipe job's plan as structured data (`Job.PlanData`).
//! - [`props`]: property snapshots, their diffs and `PropertiesChanged`.
//! - [`publish`]: the Array objects built from the model, compared and put on the bus, in one
//!   place; their paths are the one map the ObjectManager and the jobs read.
//! - [`client`]: typed proxies for the front ends (`mdpilot policy`, tests).
//!
//! The state the objects share with the service loop is [`shared::Shared`] (the core's
//! [`crate::shared::State`] plus polkit and the Manager's properties).
//!
//! The introspection of every interface is committed under `dbus/` and checked by tests
//! (`tests/it/dbus_service.rs`, `tests/it/dbus_jobs.rs`).

pub mod array;
pub mod auth;
pub mod candidates;
pub mod check;
pub mod client;
pub mod errors;
pub mod job;
pub mod manager;
pub mod objects;
pub mod options;
pub mod plan;
pub mod props;
pub mod publish;
pub mod shared;

/// The well-known bus name the service owns.
pub const BUS_NAME: &str = "org.mdpilot.MdPilot1";
/// Path of the ObjectManager (the root of the service's objects).
pub const ROOT_PATH: &str = "/org/mdpilot/MdPilot1";
/// Path of the Manager object.
pub const MANAGER_PATH: &str = "/org/mdpilot/MdPilot1/Manager";
/// Manager interface name.
pub const MANAGER_IFACE: &str = "org.mdpilot.MdPilot1.Manager";
/// Array interface name.
pub const ARRAY_IFACE: &str = "org.mdpilot.MdPilot1.Array";
/// The API version the Manager's `Version` property reports.
pub const API_VERSION: &str = "1.6";

/// Object path of an array, stable across reboots and renumbering:
/// `/org/mdpilot/MdPilot1/arrays/<uuid>` with the UUID's 32 hex digits in lower case (any
/// spelling of `uuid`: mdadm's colon form, `md/uuid`'s dashes); without a UUID (inactive arrays,
/// containers) `/org/mdpilot/MdPilot1/arrays/name_<kernel name>`, with every character outside
/// `[A-Za-z0-9_]` as `_`.
pub fn array_path(uuid: &str, kernel_name: &str) -> String {
    let hex: String = uuid
        .chars()
        .filter(char::is_ascii_hexdigit)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    if hex.len() == 32 && hex.chars().any(|c| c != '0') {
        return format!("{ROOT_PATH}/arrays/{hex}");
    }
    let elem: String = kernel_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{ROOT_PATH}/arrays/name_{elem}")
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
    fn array_paths_are_keyed_by_uuid() {
        let p = "/org/mdpilot/MdPilot1/arrays/3b6c2a6e0d0e4b7a9d5e8a7b1c2d3e4f";
        assert_eq!(
            array_path("3b6c2a6e:0d0e4b7a:9d5e8a7b:1c2d3e4f", "md127"),
            p
        );
        assert_eq!(array_path("3B6C2A6E-0D0E-4B7A-9D5E-8A7B1C2D3E4F", "md0"), p);
        assert_eq!(
            array_path("", "md_d0"),
            "/org/mdpilot/MdPilot1/arrays/name_md_d0"
        );
        assert_eq!(
            array_path("00000000:00000000:00000000:00000000", "md/x-y"),
            "/org/mdpilot/MdPilot1/arrays/name_md_x_y"
        );
        for p in [array_path("", "md-1"), array_path("ab:cd", "md0")] {
            zbus::zvariant::ObjectPath::try_from(p.as_str()).unwrap();
        }
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
