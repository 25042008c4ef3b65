//! Client side of the service for other subcommands (`mdpilot policy ...` goes through the
//! service when it runs): a typed proxy of `org.mdpilot.MdPilot1.Manager` and a probe.
//!
//! ```no_run
//! # async fn f() -> zbus::Result<()> {
//! use mdpilot::dbus::client::ManagerProxy;
//! let conn = zbus::Connection::system().await?;
//! let m = ManagerProxy::new(&conn).await?;
//! let opts = std::collections::HashMap::from([("min", zbus::zvariant::Value::U64(50_000))]);
//! let lease = m.acquire_priority(opts).await?;
//! m.release_priority(&lease).await?;
//! # Ok(()) }
//! ```

// zbus's proxy/interface macros generate items (signal emitters and streams, argument
// structs) that carry no docs; the hand-written items here are all documented.
#![allow(missing_docs)]

use super::props::LeaseDict;
use std::collections::HashMap;
use zbus::zvariant::Value;

/// `org.mdpilot.MdPilot1.Manager` (see `dbus/org.mdpilot.MdPilot1.Manager.xml`).
#[zbus::proxy(
    interface = "org.mdpilot.MdPilot1.Manager",
    default_service = "org.mdpilot.MdPilot1",
    default_path = "/org/mdpilot/MdPilot1/Manager",
    gen_blocking = false
)]
pub trait Manager {
    /// Takes a resync priority lease tied to this connection; returns its id.
    fn acquire_priority(&self, options: HashMap<&str, Value<'_>>) -> zbus::Result<String>;
    /// Ends a lease.
    fn release_priority(&self, lease_id: &str) -> zbus::Result<()>;
    /// Per-array limits in KiB/s (0 = follow the system); `array` as users type it.
    fn set_array_speed_limits(
        &self,
        array: &str,
        min: u64,
        max: u64,
        options: HashMap<&str, Value<'_>>,
    ) -> zbus::Result<()>;
    /// Drops every lease and restores the saved limits.
    fn restore_limits(&self, options: HashMap<&str, Value<'_>>) -> zbus::Result<()>;
    /// Starts wiping `device`; options `method` (s), `verify` (b), `keep-resync` (b). Returns
    /// the job object (see [`JobProxy`]).
    fn start_wipe(
        &self,
        device: &str,
        options: HashMap<&str, Value<'_>>,
    ) -> zbus::Result<zbus::zvariant::OwnedObjectPath>;
    /// API version ("1.3").
    #[zbus(property)]
    fn version(&self) -> zbus::Result<String>;
    /// The service program's version.
    #[zbus(property)]
    fn service_version(&self) -> zbus::Result<String>;
    /// Current `speed_limit_min`, KiB/s.
    #[zbus(property)]
    fn speed_limit_min(&self) -> zbus::Result<u64>;
    /// Current `speed_limit_max`, KiB/s.
    #[zbus(property)]
    fn speed_limit_max(&self) -> zbus::Result<u64>;
    /// Saved `speed_limit_min`: (saved?, KiB/s).
    #[zbus(property)]
    fn original_speed_limit_min(&self) -> zbus::Result<(bool, u64)>;
    /// Saved `speed_limit_max`: (saved?, KiB/s).
    #[zbus(property)]
    fn original_speed_limit_max(&self) -> zbus::Result<(bool, u64)>;
    /// Live leases, one `a{sv}` each (read with
    /// [`LeaseEntry::from_dict`](super::props::LeaseEntry::from_dict)).
    #[zbus(property)]
    fn leases(&self) -> zbus::Result<Vec<LeaseDict>>;
}

/// `org.mdpilot.MdPilot1.Array` at `/org/mdpilot/MdPilot1/arrays/<uuid>` (see
/// `dbus/org.mdpilot.MdPilot1.Array.xml`); build it with `ArrayProxy::builder(&conn).path(p)`.
#[zbus::proxy(
    interface = "org.mdpilot.MdPilot1.Array",
    default_service = "org.mdpilot.MdPilot1",
    gen_blocking = false
)]
pub trait Array {
    /// Writes `check`, `repair` or `idle` to md/sync_action.
    fn request_sync_action(
        &self,
        sync_action: &str,
        options: HashMap<&str, Value<'_>>,
    ) -> zbus::Result<()>;
    /// Kernel name (`md127`).
    #[zbus(property)]
    fn kernel_name(&self) -> zbus::Result<String>;
    /// Metadata name (`host:root`).
    #[zbus(property)]
    fn name(&self) -> zbus::Result<String>;
    /// UUID, mdadm's colon form.
    #[zbus(property, name = "UUID")]
    fn uuid(&self) -> zbus::Result<String>;
    /// md/sync_action.
    #[zbus(property)]
    fn sync_action(&self) -> zbus::Result<String>;
}

/// `org.mdpilot.MdPilot1.Job` at `/org/mdpilot/MdPilot1/jobs/<n>` (see
/// `dbus/org.mdpilot.MdPilot1.Job.xml`); build it with `JobProxy::builder(&conn).path(job)`.
#[zbus::proxy(
    interface = "org.mdpilot.MdPilot1.Job",
    default_service = "org.mdpilot.MdPilot1",
    gen_blocking = false
)]
pub trait Job {
    /// Stops the job between two blocks.
    fn cancel(&self, options: HashMap<&str, Value<'_>>) -> zbus::Result<()>;
    /// The job ended: success and a message.
    #[zbus(signal)]
    fn completed(&self, success: bool, message: String) -> zbus::Result<()>;
    /// `wipe-<method>`.
    #[zbus(property)]
    fn operation(&self) -> zbus::Result<String>;
    /// The device as resolved.
    #[zbus(property)]
    fn device(&self) -> zbus::Result<String>;
    /// Durable fraction, 0..1.
    #[zbus(property)]
    fn progress(&self) -> zbus::Result<f64>;
    /// Whether `Progress` means something (the job knows how many bytes it processes).
    #[zbus(property)]
    fn progress_valid(&self) -> zbus::Result<bool>;
    /// The array objects the job works on (`/org/mdpilot/MdPilot1/arrays/<uuid>`); empty for a
    /// device that is no array.
    #[zbus(property)]
    fn objects(&self) -> zbus::Result<Vec<zbus::zvariant::OwnedObjectPath>>;
    /// The plan as `a{sv}` (method, operation, block-bytes, queue-depth, resync-action, leases
    /// ...; see `dbus/org.mdpilot.MdPilot1.Job.xml`).
    #[zbus(property)]
    fn plan_data(&self) -> zbus::Result<HashMap<String, zbus::zvariant::OwnedValue>>;
    /// Total bytes.
    #[zbus(property)]
    fn bytes(&self) -> zbus::Result<u64>;
    /// Durable bytes.
    #[zbus(property)]
    fn bytes_done(&self) -> zbus::Result<u64>;
    /// Bytes/s.
    #[zbus(property)]
    fn rate(&self) -> zbus::Result<u64>;
    /// µs since the epoch.
    #[zbus(property)]
    fn start_time(&self) -> zbus::Result<u64>;
    /// µs since the epoch; 0 while unknown.
    #[zbus(property)]
    fn expected_end_time(&self) -> zbus::Result<u64>;
    /// The plan with its reasons.
    #[zbus(property)]
    fn plan(&self) -> zbus::Result<String>;
    /// True while the job runs.
    #[zbus(property)]
    fn cancelable(&self) -> zbus::Result<bool>;
    /// Uid of the caller that started it.
    #[zbus(property, name = "StartedByUID")]
    fn started_by_uid(&self) -> zbus::Result<u32>;
}

/// True when some process owns `org.mdpilot.MdPilot1` on `conn`'s bus (the service runs).
pub async fn service_running(conn: &zbus::Connection) -> bool {
    let Ok(dbus) = zbus::fdo::DBusProxy::new(conn).await else {
        return false;
    };
    let Ok(name) = zbus::names::BusName::try_from(super::BUS_NAME) else {
        return false;
    };
    dbus.name_has_owner(name).await.unwrap_or(false)
}

/// A connection to `bus` on which the service runs, or `None` (logged at debug) when connecting
/// or finding an owner of `org.mdpilot.MdPilot1` fails or takes longer than `timeout` (no bus,
/// no service: the caller then works without it).
pub async fn connect_if_running(
    bus: &super::BusChoice,
    timeout: std::time::Duration,
) -> Option<zbus::Connection> {
    let probe = async {
        let conn = bus.builder().ok()?.build().await.ok()?;
        service_running(&conn).await.then_some(conn)
    };
    match tokio::time::timeout(timeout, probe).await {
        Ok(Some(c)) => Some(c),
        _ => {
            tracing::debug!("no mdpilot service on {bus:?}: working on the files");
            None
        }
    }
}
