//! The state the service loop ([`crate::service`]) and the D-Bus objects ([`crate::dbus`])
//! share, free of the bus: the model, the policy (also the record of lease owners), the wipe
//! jobs still running and the loop's refresh requests. The bus side (polkit, the published
//! Manager properties, signal emission) wraps it in [`crate::dbus::shared::Shared`].
//!
//! - The model: the loop's last good read of `/proc/mdstat` and sysfs, copied here after each
//!   batch for the objects' synchronous lookups ([`State::has_array`], [`State::resolve_array`]).
//! - Lease owners: the policy is the one record. A lease taken by a bus client carries
//!   [`Owner::BusName`] with the client's unique name; when that name leaves the bus,
//!   [`State::release_owner`] drops the leases the policy's state holds for it. Lease ids of
//!   such leases are minted here ([`State::mint_lease_id`]).
//! - Wipe jobs still running ([`RunningJob`], one per device), their numbers, and the leases
//!   they take through the service's policy ([`ServiceLeases`]).

use crate::config::Config;
use crate::host::Root;
use crate::lock::lock;
use crate::model::MdStat;
use crate::policy::{LeaseRequest, Owner, Policy, PolicyView};
use crate::sync_history::SyncHistory;
use crate::wipe::leases::{LeaseError, LeaseProvider};
use crate::wipe::{JobHandle, WipeError};
use crate::workers::Pool;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// Threads probing and planning wipe starts at once ([`State::wipe_worker`]).
pub const WIPE_START_THREADS: usize = 4;

/// A request to the service loop to re-read the kernel's state (on its own channel, beside
/// the kernel notifications of [`crate::watch`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refresh {
    /// Everything: `/proc/mdstat`, every array's sysfs and the global speed limits (after a
    /// lease change: limits of `(system)` arrays follow the global ones).
    All,
    /// One array's sysfs (kernel name, `md0`), after mdpilot wrote its `md/sync_action`.
    Array(String),
}

/// A running wipe job as the service tracks it (one per device at a time).
pub struct RunningJob {
    /// The device as resolved by the probe.
    pub device: PathBuf,
    /// The engine's handle (progress, cancel).
    pub handle: Arc<JobHandle>,
}

/// State shared by the D-Bus objects and the service loop.
pub struct State {
    /// Where the kernel trees are.
    pub root: Root,
    /// The configuration in effect: loaded once at start, replaced whole by the loop on SIGHUP
    /// ([`State::config`] hands out the current one).
    config: Mutex<Arc<Config>>,
    /// The speed-limit policy (also the record of who owns each lease).
    pub policy: Policy,
    /// The loop's model (the last good read of `/proc/mdstat` and sysfs; the same one the
    /// loop holds, replaced whole after each of its steps).
    pub model: Mutex<Arc<MdStat>>,
    /// Asks the service loop to re-read ([`State::refresh_all`], [`State::refresh_array`]).
    refresh: UnboundedSender<Refresh>,
    lease_counter: AtomicU64,
    /// Wipe jobs still running, by job number.
    pub jobs: Mutex<BTreeMap<u64, RunningJob>>,
    /// Devices a wipe is being started on (probed and planned, not yet in `jobs`): see
    /// [`State::reserve`]. Locked after `jobs` when both are.
    starting: Mutex<BTreeSet<PathBuf>>,
    job_counter: AtomicU64,
    /// How often job progress is published (`progress_interval_ms`).
    pub progress_interval: Duration,
    /// Notified on every lease change through the service (the bus objects' publication, the
    /// wipe jobs' leases): wakes the timed-lease task ([`crate::service::expiry`]) to re-read
    /// the next end.
    pub lease_changed: tokio::sync::Notify,
    /// Where the policy's operations run (its `flock`, the speed-limit writes): one thread,
    /// as the policy serializes them anyway.
    pub policy_worker: Pool,
    /// Where check operations run (the check record, `md/sync_min` and `md/sync_action`
    /// writes, the schedule's tick): one thread.
    pub check_worker: Pool,
    /// Where wipe starts probe and plan their device ([`WIPE_START_THREADS`] threads): a
    /// device whose open never returns holds one.
    pub wipe_worker: Pool,
    /// Where write-intent bitmaps are added (`mdadm --grow --bitmap=internal`, from
    /// `AddBitmap` and the bitmap upkeep): one thread, as mdadm takes one array at a time.
    pub bitmap_worker: Pool,
    /// The last hour of each array's sync ([`crate::sync_history`]): the loop samples it
    /// after each read, `Array.GetSyncHistory` reads it.
    pub sync_history: Mutex<SyncHistory>,
}

impl State {
    /// Creates the shared state.
    pub fn new(
        root: Root,
        config: Arc<Config>,
        policy: Policy,
        model: Arc<MdStat>,
        refresh: UnboundedSender<Refresh>,
        progress_interval: Duration,
    ) -> State {
        State {
            root,
            config: Mutex::new(config),
            policy,
            model: Mutex::new(model),
            refresh,
            lease_counter: AtomicU64::new(1),
            jobs: Mutex::new(BTreeMap::new()),
            starting: Mutex::new(BTreeSet::new()),
            job_counter: AtomicU64::new(1),
            progress_interval,
            lease_changed: tokio::sync::Notify::new(),
            policy_worker: Pool::new("policy", 1),
            check_worker: Pool::new("check", 1),
            wipe_worker: Pool::new("wipe-start", WIPE_START_THREADS),
            bitmap_worker: Pool::new("bitmap", 1),
            sync_history: Mutex::new(SyncHistory::default()),
        }
    }

    /// The configuration in effect (the loop's; every reader of one request or one tick uses
    /// one configuration throughout).
    pub fn config(&self) -> Arc<Config> {
        lock(&self.config).clone()
    }

    /// Puts `config` in effect (the loop, after a successful reload).
    pub fn set_config(&self, config: Arc<Config>) {
        *lock(&self.config) = config;
    }

    /// After a lease change: wakes the timed-lease task and asks the loop to re-read the
    /// arrays (limits in `(system)` arrays follow the global ones).
    pub fn lease_change(&self) {
        // A stored permit when the task is busy: the change is never missed.
        self.lease_changed.notify_one();
        self.refresh_all();
    }

    /// Asks the loop to re-read everything (a closed loop, at shutdown, is ignored).
    pub fn refresh_all(&self) {
        let _ = self.refresh.send(Refresh::All);
    }

    /// Asks the loop to re-read the array `array` (kernel name), after a write to its
    /// `md/sync_action`.
    pub fn refresh_array(&self, array: &str) {
        let _ = self.refresh.send(Refresh::Array(array.to_string()));
    }

    /// A new lease id for a lease of the bus client `sender` (`dbus-<unique name without
    /// ':'>-<n>`, unique within this run of the service).
    pub fn mint_lease_id(&self, sender: &str) -> String {
        let n = self.lease_counter.fetch_add(1, Ordering::Relaxed);
        crate::policy::Holder::bus_client(sender, n).to_string()
    }

    /// Releases every lease owned by the bus client `name` ([`Owner::BusName`]; it left the
    /// bus), as the policy's state file records them. Returns how many, and the policy view
    /// after the last release (`None` when none succeeded). Failures are logged.
    pub fn release_owner(&self, name: &str) -> (usize, Option<PolicyView>) {
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
                return (0, None);
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
        (ids.len(), last)
    }

    /// Drops leases (and journaled changes) whose `pid` owner has exited. Runs before each
    /// AcquirePriority, like the CLI's reap; exits are normally seen sooner, through the loop's
    /// pidfd watch ([`crate::service::pidwatch`]). Failures are logged.
    pub fn reap_dead_pids(&self) {
        // pid and start time (a reused pid is dead); bus names are released on leaving.
        if let Err(e) = self.policy.reap(&crate::policy::cli_alive) {
            tracing::warn!("cannot reap leases of exited processes: {e}");
        }
    }

    /// True when the model has an array of kernel name `name` (`md0`).
    pub fn has_array(&self, name: &str) -> bool {
        lock(&self.model).arrays.iter().any(|a| a.name == name)
    }

    /// The kernel name of the array the caller named `word` (`md0`, `/dev/md0`, `/dev/md/root`,
    /// `md/root`, the metadata name; [`crate::array_names::resolve_array`] over the model's arrays).
    pub fn resolve_array(&self, word: &str) -> Result<String, crate::array_names::NameError> {
        let known: Vec<String> = lock(&self.model)
            .arrays
            .iter()
            .map(|a| a.name.clone())
            .collect();
        crate::array_names::resolve_array(&self.root, word, &known)
    }

    /// The number of the next wipe job (1, 2, ...).
    pub fn next_job_number(&self) -> u64 {
        self.job_counter.fetch_add(1, Ordering::Relaxed)
    }

    /// Reserves `device` for a wipe about to start: `Err` with the reason (a job still wiping
    /// it, or another start under way) when it is taken. The reservation holds until
    /// [`Reservation::register`] puts the job in [`State::jobs`] or it is dropped (the start
    /// failed), so the slow probe and plan run outside any lock and two starts on one device
    /// cannot both pass.
    pub fn reserve(self: &Arc<Self>, device: &Path) -> Result<Reservation, String> {
        let mut r = Reservation {
            state: self.clone(),
            devices: Vec::new(),
        };
        r.also(device)?;
        Ok(r)
    }

    /// Interrupts every running job ([`JobHandle::interrupt`]: its checkpoint stays, for the
    /// next start's [`crate::service::resume`]) and waits (at most `limit`) until each has
    /// ended, i.e. its resync is unfrozen and its leases released. Called on SIGTERM before
    /// restoring limits.
    pub async fn cancel_jobs(&self, limit: Duration) {
        let handles: Vec<Arc<JobHandle>> = lock(&self.jobs)
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

/// A device (or two: the path asked for and the node the probe resolved) reserved for a wipe
/// being started ([`State::reserve`]); released on drop.
pub struct Reservation {
    state: Arc<State>,
    devices: Vec<PathBuf>,
}

impl Reservation {
    /// Adds `device` (the probe's node, when it differs from the path reserved first). `Err`
    /// with the reason when a running job or another start has it.
    pub fn also(&mut self, device: &Path) -> Result<(), String> {
        if self.devices.iter().any(|d| d == device) {
            return Ok(());
        }
        let jobs = lock(&self.state.jobs);
        if let Some(j) = jobs
            .values()
            .find(|j| j.device == device && !j.handle.is_finished())
        {
            return Err(format!("a job is already wiping {}", j.device.display()));
        }
        if !lock(&self.state.starting).insert(device.to_path_buf()) {
            return Err(format!(
                "a wipe of {} is already starting",
                device.display()
            ));
        }
        self.devices.push(device.to_path_buf());
        Ok(())
    }

    /// Puts the started job in [`State::jobs`] as number `n`, then releases the reservation.
    pub fn register(self, n: u64, job: RunningJob) {
        lock(&self.state.jobs).insert(n, job);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut starting = lock(&self.state.starting);
        for d in &self.devices {
            starting.remove(d);
        }
    }
}

/// The wipe job's leases, through the service's policy; every change asks the service loop to
/// re-read (so `Leases` and the speed limits are republished).
pub struct ServiceLeases(pub Arc<State>);

impl LeaseProvider for ServiceLeases {
    fn acquire(&self, req: LeaseRequest) -> std::result::Result<(), LeaseError> {
        let r = LeaseProvider::acquire(&self.0.policy, req);
        self.0.lease_change();
        r
    }
    fn release(&self, holder: &str) -> std::result::Result<(), LeaseError> {
        let r = LeaseProvider::release(&self.0.policy, holder);
        self.0.lease_change();
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
