//! The service's shared state: what the D-Bus objects ([`crate::dbus::manager`],
//! [`crate::dbus::job`]) and the event loop ([`super`]) both read and change.
//!
//! - The model (last good read of `/proc/mdstat` and sysfs) and the Manager's published
//!   properties ([`ManagerProps`], derived from the policy's [`PolicyView`]).
//! - Lease owners: the policy is the one record. A lease taken by a bus client carries
//!   [`Owner::BusName`] with the client's unique name; when that name leaves the bus,
//!   [`Shared::release_owner`] drops the leases the policy's state holds for it (not the
//!   published view, which lags behind a lease being taken). Lease ids of
//!   such leases are minted here ([`Shared::mint_lease_id`]).
//! - Wipe jobs still running ([`RunningJob`], one per device), their numbers, and the leases
//!   they take through the service's policy ([`ServiceLeases`]).

use crate::dbus::auth::Authority;
use crate::dbus::props::{emit_changed, ManagerProps};
use crate::dbus::{BusChoice, MANAGER_IFACE};
use crate::host::Root;
use crate::model::MdStat;
use crate::policy::{LeaseRequest, Owner, Policy, PolicyView};
use crate::watch::Event;
use crate::wipe::leases::{LeaseError, LeaseProvider};
use crate::wipe::{JobHandle, WipeError};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;
use zbus::object_server::SignalEmitter;

/// A running wipe job as the service tracks it (one per device at a time).
pub struct RunningJob {
    /// The device as resolved by the probe.
    pub device: PathBuf,
    /// The engine's handle (progress, cancel).
    pub handle: Arc<JobHandle>,
}

/// State shared by the D-Bus objects and the service loop.
pub struct Shared {
    /// Where the kernel trees are.
    pub root: Root,
    /// The speed-limit policy (also the record of who owns each lease).
    pub policy: Policy,
    /// The bus we serve on (decides the polkit subject).
    pub bus: BusChoice,
    /// Who may change things (polkit, with its one system-bus connection).
    pub auth: Arc<Authority>,
    /// Last good model.
    pub model: Mutex<MdStat>,
    /// Published manager properties.
    pub props: Mutex<ManagerProps>,
    /// Asks the service loop to re-read (after a limit change).
    pub refresh: UnboundedSender<Event>,
    lease_counter: AtomicU64,
    /// Wipe jobs still running, by job number.
    pub jobs: Mutex<BTreeMap<u64, RunningJob>>,
    job_counter: AtomicU64,
    /// How often job progress is published (`progress_interval_ms`).
    pub progress_interval: Duration,
    /// Notified on every lease change through the service ([`Shared::publish`], the wipe
    /// jobs' leases): wakes the timed-lease task ([`super::expiry`]) to re-read the next end.
    pub lease_changed: tokio::sync::Notify,
}

impl Shared {
    /// Creates the shared state.
    pub fn new(
        root: Root,
        policy: Policy,
        bus: BusChoice,
        model: MdStat,
        refresh: UnboundedSender<Event>,
        progress_interval: Duration,
    ) -> Shared {
        let props = policy
            .show()
            .map(|v| ManagerProps::from_view(&v, &model))
            .unwrap_or_default();
        Shared {
            root,
            policy,
            auth: Arc::new(Authority::new(bus.clone())),
            bus,
            model: Mutex::new(model),
            props: Mutex::new(props),
            refresh,
            lease_counter: AtomicU64::new(1),
            jobs: Mutex::new(BTreeMap::new()),
            job_counter: AtomicU64::new(1),
            progress_interval,
            lease_changed: tokio::sync::Notify::new(),
        }
    }

    /// A snapshot of the published manager properties.
    pub fn props(&self) -> ManagerProps {
        self.props
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Recomputes the manager's properties from `view` and the model, and emits one
    /// PropertiesChanged with the differences, if any.
    pub async fn emit_props(&self, emitter: &SignalEmitter<'_>, view: &PolicyView) {
        let changed = {
            let model = self
                .model
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let new = ManagerProps::from_view(view, &model);
            let mut cur = self
                .props
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let changed = ManagerProps::changed(&cur, &new);
            *cur = new;
            changed
        };
        emit_changed(emitter, MANAGER_IFACE, changed).await;
    }

    /// After a limit change: publishes the manager's properties from `view` (or
    /// `policy.show()`) and asks the loop to re-read the arrays.
    pub async fn publish(&self, emitter: &SignalEmitter<'_>, view: Option<PolicyView>) {
        // A stored permit when the task is busy: the change is never missed.
        self.lease_changed.notify_one();
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
        self.emit_props(emitter, &view).await;
        // Limits in `(system)` arrays follow the global ones: re-read the arrays too.
        let _ = self.refresh.send(Event::Mdstat);
    }

    /// A new lease id for a lease of the bus client `sender` (`dbus-<unique name without
    /// ':'>-<n>`, unique within this run of the service).
    pub fn mint_lease_id(&self, sender: &str) -> String {
        let n = self.lease_counter.fetch_add(1, Ordering::Relaxed);
        format!("dbus-{}-{n}", sender.trim_start_matches(':'))
    }

    /// Releases every lease owned by the bus client `name` ([`Owner::BusName`]; it left the
    /// bus), as the policy's state file records them. Returns how many.
    pub async fn release_owner(&self, emitter: &SignalEmitter<'_>, name: &str) -> usize {
        let owner = Owner::BusName(name.to_string());
        let ids: Vec<String> = match crate::policy::state::read(&self.policy.settings().state_path)
        {
            Ok(st) => st
                .leases
                .iter()
                .filter(|(_, l)| l.owner == owner)
                .map(|(id, _)| id.clone())
                .collect(),
            Err(e) => {
                tracing::warn!(owner = %name, "cannot read the policy state to release {name}'s leases: {e}");
                return 0;
            }
        };
        let mut last = None;
        for id in &ids {
            match self.policy.release(id) {
                Ok(v) => last = Some(v),
                Err(e) => {
                    tracing::warn!(holder = %id, owner = %name, "cannot release lease {id} of {name}: {e}");
                }
            }
            tracing::info!(holder = %id, owner = %name, "released lease {id}: {name} left the bus");
        }
        if !ids.is_empty() {
            self.publish(emitter, last).await;
        }
        ids.len()
    }

    /// Drops leases (and journaled changes) whose `pid` owner has exited. Runs before each
    /// AcquirePriority, like the CLI's reap; exits are normally seen sooner, through the loop's
    /// pidfd watch ([`super::pidwatch`]). Failures are logged.
    pub fn reap_dead_pids(&self) {
        // pid and start time (a reused pid is dead); bus names are released on leaving.
        if let Err(e) = self.policy.reap(&crate::policy::cli_alive) {
            tracing::warn!("cannot reap leases of exited processes: {e}");
        }
    }

    /// True when the model has an array of kernel name `name` (`md0`).
    pub fn has_array(&self, name: &str) -> bool {
        let model = self
            .model
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        model.arrays.iter().any(|a| a.name == name)
    }

    /// The kernel name of the array the caller named `word` (`md0`, `/dev/md0`, `/dev/md/root`,
    /// `md/root`, the metadata name; [`crate::names::resolve_array`] over the model's arrays).
    pub fn resolve_array(&self, word: &str) -> Result<String, crate::names::NameError> {
        let known: Vec<String> = {
            let model = self
                .model
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            model.arrays.iter().map(|a| a.name.clone()).collect()
        };
        crate::names::resolve_array(&self.root, word, &known)
    }

    /// The number of the next wipe job (1, 2, ...).
    pub fn next_job_number(&self) -> u64 {
        self.job_counter.fetch_add(1, Ordering::Relaxed)
    }

    /// Interrupts every running job ([`JobHandle::interrupt`]: its checkpoint stays, for the
    /// next start's [`super::resume`]) and waits (at most `limit`) until each has ended, i.e. its
    /// resync is unfrozen and its leases released. Called on SIGTERM before restoring limits.
    pub async fn cancel_jobs(&self, limit: Duration) {
        let handles: Vec<Arc<JobHandle>> = self
            .jobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .map(|j| j.handle.clone())
            .collect();
        if handles.is_empty() {
            return;
        }
        tracing::info!("interrupting {} wipe job(s)", handles.len());
        for h in &handles {
            // Their checkpoints stay: the next start continues them (wipe.auto_resume).
            h.interrupt();
        }
        let deadline = tokio::time::Instant::now() + limit;
        while handles.iter().any(|h| !h.is_finished()) {
            if tokio::time::Instant::now() >= deadline {
                tracing::error!("wipe jobs did not stop within {limit:?}");
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The wipe job's leases, through the service's policy; every change asks the service loop to
/// re-read (so `Leases` and the speed limits are republished).
pub struct ServiceLeases(pub Arc<Shared>);

impl LeaseProvider for ServiceLeases {
    fn acquire(&self, req: LeaseRequest) -> std::result::Result<(), LeaseError> {
        let r = LeaseProvider::acquire(&self.0.policy, req);
        self.0.lease_changed.notify_one();
        let _ = self.0.refresh.send(Event::Mdstat);
        r
    }
    fn release(&self, holder: &str) -> std::result::Result<(), LeaseError> {
        let r = LeaseProvider::release(&self.0.policy, holder);
        self.0.lease_changed.notify_one();
        let _ = self.0.refresh.send(Event::Mdstat);
        r
    }
    fn freeze(&self, root: &Root, array: &str) -> std::result::Result<bool, WipeError> {
        LeaseProvider::freeze(&self.0.policy, root, array)
    }
    fn unfreeze(
        &self,
        root: &Root,
        array: &str,
        in_sync: bool,
    ) -> std::result::Result<(), WipeError> {
        LeaseProvider::unfreeze(&self.0.policy, root, array, in_sync)
    }
}
