//! `org.freedesktop.DBus.ObjectManager` at `/org/mdpilot/MdPilot1`, as GDBus's
//! `GDBusObjectManagerClient` and Cockpit's `cockpit.dbus(...).watch()` expect it:
//! `GetManagedObjects` returns the Manager (`/org/mdpilot/MdPilot1/Manager`), every array and
//! every running job, each with all properties of its interface, and nothing else.
//!
//! zbus's own `fdo::ObjectManager` also returns the intermediate nodes of the tree
//! (`/org/mdpilot/MdPilot1/arrays`, `/org/mdpilot/MdPilot1/jobs`) as objects without
//! interfaces; this one lists only objects that carry one of our interfaces. It has the standard
//! interface name, so zbus still emits `InterfacesAdded` / `InterfacesRemoved` from here whenever
//! an object below is served or removed.

// zbus's proxy/interface macros generate items (signal emitters and streams, argument
// structs) that carry no docs; the hand-written items here are all documented.
#![allow(missing_docs)]

use super::array::ArrayObject;
use super::job::{job_path, JobObject};
use super::manager::Manager;
use super::shared::Shared;
use super::MANAGER_PATH;
use crate::lock::lock;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use zbus::fdo::ManagedObjects;
use zbus::names::{InterfaceName, OwnedInterfaceName};
use zbus::object_server::{Interface, ObjectServer, SignalEmitter};
use zbus::zvariant::{ObjectPath, OwnedObjectPath, Value};
use zbus::{fdo, interface};

/// The object manager.
pub struct ObjectManager {
    /// Shared state (the published arrays give the array paths, the job table the job paths).
    pub shared: Arc<Shared>,
}

/// Adds the object at `path` with interface `I` and all its properties to `out`; an object that
/// is not (or no longer) served is skipped.
async fn add<I: Interface>(
    out: &mut ManagedObjects,
    server: &ObjectServer,
    conn: &zbus::Connection,
    path: &str,
) -> fdo::Result<()> {
    let Ok(iface) = server.interface::<_, I>(path).await else {
        return Ok(());
    };
    let emitter = SignalEmitter::new(conn, path.to_string())?;
    let props = iface
        .get()
        .await
        .get_all(server, conn, None, &emitter)
        .await?;
    let path = OwnedObjectPath::try_from(path.to_string()).map_err(zbus::Error::from)?;
    let name = OwnedInterfaceName::from(I::name());
    out.insert(path, HashMap::from([(name, props)]));
    Ok(())
}

/// The standard object manager (see the module doc).
#[interface(name = "org.freedesktop.DBus.ObjectManager")]
impl ObjectManager {
    /// Every object of the service with its interfaces and their properties: the Manager, each
    /// array, each running wipe job. No node without an interface is listed.
    async fn get_managed_objects(
        &self,
        #[zbus(object_server)] server: &ObjectServer,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> fdo::Result<ManagedObjects> {
        let mut out = ManagedObjects::new();
        add::<Manager>(&mut out, server, conn, MANAGER_PATH).await?;
        let arrays = lock(&self.shared.arrays).paths();
        for p in arrays {
            add::<ArrayObject>(&mut out, server, conn, &p).await?;
        }
        let jobs: Vec<u64> = lock(&self.shared.core.jobs).keys().copied().collect();
        for n in jobs {
            add::<JobObject>(&mut out, server, conn, &job_path(n)).await?;
        }
        Ok(out)
    }

    /// An object appeared, or gained interfaces (with their properties).
    #[zbus(signal)]
    async fn interfaces_added(
        emitter: &SignalEmitter<'_>,
        object_path: ObjectPath<'_>,
        interfaces_and_properties: HashMap<InterfaceName<'_>, HashMap<&str, Value<'_>>>,
    ) -> zbus::Result<()>;

    /// An object went away, or lost interfaces.
    #[zbus(signal)]
    async fn interfaces_removed(
        emitter: &SignalEmitter<'_>,
        object_path: ObjectPath<'_>,
        interfaces: Cow<'_, [InterfaceName<'_>]>,
    ) -> zbus::Result<()>;
}
