//! The bus side of the shared state: the core's [`State`] (model, policy, wipe jobs, refresh
//! requests; zbus-free) plus what only the D-Bus objects need: the bus we serve on, polkit
//! ([`Authority`]), the Manager's published properties, with their PropertiesChanged, and the
//! object paths of the Array objects as published ([`ArrayPaths`]). The objects name the core's fields through
//! [`Shared::core`] (`shared.core.policy`, `shared.core.root`).

use super::auth::Authority;
use super::candidates::Candidates;
use super::props::{emit_changed, ManagerProps};
use super::{BusChoice, MANAGER_IFACE};
use crate::lock::lock;
use crate::policy::PolicyView;
use crate::shared::State;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use zbus::object_server::SignalEmitter;
use zbus::zvariant::OwnedObjectPath;

/// State shared by the D-Bus objects and the service loop.
pub struct Shared {
    /// The zbus-free part, also what the wipe jobs' leases ([`crate::shared::ServiceLeases`])
    /// hold.
    pub core: Arc<State>,
    /// The bus we serve on (decides the polkit subject).
    pub bus: BusChoice,
    /// Who may change things (polkit, with its one system-bus connection).
    pub auth: Arc<Authority>,
    /// Published manager properties.
    pub props: Mutex<ManagerProps>,
    /// `WipeCandidates`, bounded (one call per caller, a cache, a probe pool of its own).
    pub candidates: Candidates,
    /// The object paths of the Array objects served now: the one map of their paths
    /// (`GetManagedObjects`, the jobs' `Objects`); only [`super::publish::publish`] changes it.
    pub arrays: Mutex<ArrayPaths>,
}

impl Shared {
    /// Wraps `core` for serving on `bus`; the manager's properties start from the policy's
    /// view now (empty when it cannot be read).
    pub fn new(core: Arc<State>, bus: BusChoice) -> Shared {
        let props = core
            .policy
            .show()
            .map(|v| ManagerProps::from_view(&v, &lock(&core.model)))
            .unwrap_or_default();
        Shared {
            core,
            auth: Arc::new(Authority::new(bus.clone())),
            bus,
            props: Mutex::new(props),
            candidates: Candidates::new(),
            arrays: Mutex::new(ArrayPaths::default()),
        }
    }

    /// A snapshot of the published manager properties.
    pub fn props(&self) -> ManagerProps {
        lock(&self.props).clone()
    }

    /// Recomputes the manager's properties from `view` and the model, and emits one
    /// PropertiesChanged with the differences, if any.
    pub async fn emit_props(&self, emitter: &SignalEmitter<'_>, view: &PolicyView) {
        let changed = {
            let new = ManagerProps::from_view(view, &lock(&self.core.model));
            let mut cur = lock(&self.props);
            let changed = ManagerProps::changed(&cur, &new);
            *cur = new;
            changed
        };
        emit_changed(emitter, MANAGER_IFACE, changed).await;
    }

    /// After a limit change: publishes the manager's properties from `view` (or
    /// `policy.show()`) and asks the loop to re-read the arrays.
    pub async fn publish(&self, emitter: &SignalEmitter<'_>, view: Option<PolicyView>) {
        self.core.lease_changed.notify_one();
        let view = match view {
            Some(v) => v,
            None => match self.core.policy.show() {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!("cannot read the policy: {e}");
                    return;
                }
            },
        };
        self.emit_props(emitter, &view).await;
        // Limits in `(system)` arrays follow the global ones: re-read the arrays too.
        self.core.refresh_all();
    }

    /// Releases every lease owned by the bus client `name` ([`State::release_owner`]) and
    /// publishes if there were any. Returns how many.
    pub async fn release_owner(&self, emitter: &SignalEmitter<'_>, name: &str) -> usize {
        let (n, last) = self.core.release_owner(name);
        if n > 0 {
            self.publish(emitter, last).await;
        }
        n
    }
}

/// The object path of each Array object served, by the array's kernel name, as
/// [`super::publish::publish`] last put them on the bus.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArrayPaths(BTreeMap<String, String>);

impl ArrayPaths {
    /// The paths of `by_name` (kernel name → object path).
    pub fn new(by_name: BTreeMap<String, String>) -> ArrayPaths {
        ArrayPaths(by_name)
    }

    /// Every path, sorted.
    pub fn paths(&self) -> Vec<String> {
        let set: BTreeSet<&String> = self.0.values().collect();
        set.into_iter().cloned().collect()
    }

    /// The paths of the arrays whose kernel name is among `names`, sorted and without repeats;
    /// names of no served array (a loop device, a vanished array) give nothing.
    pub fn paths_of<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Vec<OwnedObjectPath> {
        let set: BTreeSet<&String> = names.into_iter().filter_map(|n| self.0.get(n)).collect();
        set.into_iter()
            .filter_map(|p| OwnedObjectPath::try_from(p.clone()).ok())
            .collect()
    }
}
