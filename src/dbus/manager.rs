//! `org.mdpilot.MdPilot1.Manager` at `/org/mdpilot/MdPilot1/Manager`: global speed limits, resync priority
//! leases, per-array limits, restore, wipe jobs. Thin: every change goes through the policy
//! ([`crate::policy::Policy`]) and every mutating method first authorizes the caller
//! ([`super::auth::Authority::guarded`]: every argument validated before polkit is asked).
//!
//! Leases taken with `AcquirePriority` are tied to the caller's unique bus name: the service
//! watches `NameOwnerChanged` and calls [`Shared::release_owner`] when the name leaves the bus
//! (from the policy's state, so a lease being taken is not missed). A caller that leaves while
//! polkit decides gets nothing ([`super::auth::Authority::check_caller`]); one that leaves
//! between the answer and the lease is caught by `NameHasOwner` after the lease is recorded
//! (`drop_if_caller_left`): either check sees the leave, whatever the order.
//!
//! Every argument is validated before the caller is authorized: bounded words, known arrays
//! only (at most one `arrays` key per array of the machine), known options; the polkit details
//! hold only the canonical (resolved) values.

use super::auth::{check_own_pid, name_has_owner, Request};
use super::errors::{Error, Result};
use super::options::{
    check_array_count, check_limits, check_word, no_options, parse_acquire, parse_restore,
    AcquireOptions, Options,
};
use super::shared::Shared;
use crate::policy::journal::Change;
use crate::policy::{LeaseKind, LeaseRequest, Limits, Owner, PolicyError};
use std::collections::BTreeMap;
use std::sync::Arc;
use zbus::interface;
use zbus::message::Header;
use zbus::object_server::SignalEmitter;

pub use super::props::{LeaseDict, LeaseEntry, ManagerProps};

/// The manager object.
pub struct Manager {
    /// Shared state.
    pub shared: std::sync::Arc<Shared>,
}

/// mdpilot: md RAID arrays for installers and admin tools, at /org/mdpilot/MdPilot1/Manager
/// (the ObjectManager is /org/mdpilot/MdPilot1). Speed limits in KiB/s. Reads are open to
/// everyone; every method needs uid 0 or polkit (org.mdpilot.MdPilot1.manage-priority;
/// StartWipe org.mdpilot.MdPilot1.wipe); options take auth.no_user_interaction (b).
#[interface(name = "org.mdpilot.MdPilot1.Manager")]
impl Manager {
    /// Version of this D-Bus API: "1.6" (major changes break clients; minor ones add).
    #[zbus(property(emits_changed_signal = "const"))]
    fn version(&self) -> String {
        super::API_VERSION.to_string()
    }
    /// Version of the mdpilot service program (its package version).
    #[zbus(property(emits_changed_signal = "const"))]
    fn service_version(&self) -> String {
        env!("CARGO_PKG_VERSION").to_string()
    }
    /// /proc/sys/dev/raid/speed_limit_min now, KiB/s.
    #[zbus(property)]
    fn speed_limit_min(&self) -> u64 {
        self.shared.props().speed_limit_min
    }
    /// /proc/sys/dev/raid/speed_limit_max now, KiB/s.
    #[zbus(property)]
    fn speed_limit_max(&self) -> u64 {
        self.shared.props().speed_limit_max
    }
    /// speed_limit_min saved before the first lease: (saved, KiB/s); (false, 0) when nothing is
    /// saved. The saved value is written back when the last lease goes.
    #[zbus(property)]
    fn original_speed_limit_min(&self) -> (bool, u64) {
        self.shared.props().original_speed_limit_min
    }
    /// speed_limit_max saved before the first lease: (saved, KiB/s); (false, 0) when nothing is
    /// saved.
    #[zbus(property)]
    fn original_speed_limit_max(&self) -> (bool, u64) {
        self.shared.props().original_speed_limit_max
    }
    /// /proc/sys/dev/raid/sync_io_depth as the policy last read it: resync requests in flight
    /// while an array is busy (Linux 6.16+); 0 where the kernel lacks it. Since 1.3.
    #[zbus(property)]
    fn sync_io_depth(&self) -> u64 {
        self.shared.props().sync_io_depth
    }
    /// sync_io_depth saved before the first lease on it: (saved, requests); (false, 0) when
    /// nothing is saved. Since 1.3.
    #[zbus(property)]
    fn original_sync_io_depth(&self) -> (bool, u64) {
        self.shared.props().original_sync_io_depth
    }
    /// Live leases, one a{sv} each with only the keys that are set: id (s), kind (s: client,
    /// installer, admin, wipe-job), owner-kind (s: bus-name = released when that client leaves
    /// the bus, pid = released when that process exits, holder = lives until released), owner
    /// (s: the unique bus name, the pid, or the holder id), min and max (t, KiB/s, global
    /// speed_limit_min/max; present only when the lease sets them, 0 included), io_depth (t,
    /// global sync_io_depth, only when set; since 1.3), arrays
    /// (a{sa{sv}}: kernel name -> {min t, max t, io_depth t}, each only when set), expires (t, µs since the
    /// epoch: when a timed lease, AcquirePriority's duration, ends by itself), taken (t, µs since
    /// the epoch: when the lease was first taken, kept when it is replaced; absent for leases
    /// recorded before the service kept it).
    #[zbus(property)]
    fn leases(&self) -> Vec<LeaseDict> {
        self.shared.props().lease_dicts()
    }

    /// Takes a lease on the resync speed limits. Leases combine in the policy: the most
    /// yielding request wins (lowest min, lowest max, lowest io_depth); the saved originals come
    /// back when the last lease goes. Options: min, max (t, KiB/s, global; present = that
    /// value, 0 included: min 0 lets resync yield to all I/O, max 0 pauses it; absent = unset);
    /// io_depth (t, global sync_io_depth: resync requests in flight while the array is busy,
    /// Linux 6.16+; 0 is written as 1; not written, and no error, on kernels without it);
    /// arrays (a{sa{sv}}: array -> {min t, max t, io_depth t}, per-array sync_speed_min/max and
    /// sync_io_depth, each key optional, present = that
    /// value; md rejects 0 there, so a per-array 0 is written as 1 KiB/s; arrays are named as
    /// users type them: md0, /dev/md0, /dev/md/root, md/root or the metadata name);
    /// kind (s: client, installer, admin, wipe-job); holder (s: a named lease that outlives
    /// this connection, id = holder); pid (u: the lease lives while that process does: the
    /// caller's own process or one of its descendants);
    /// duration (t, seconds: the service releases the lease by itself that long after it was
    /// taken, also across a restart; its end is the lease's expires in Leases). No min, max,
    /// io_depth nor arrays: the install policy (global min = the config's install_min, default 0).
    /// Without holder and pid the lease is tied to the caller's bus name and released when it
    /// leaves the bus. Returns the lease id. Errors: NotAuthorized; InvalidArgument (unknown
    /// option, wrong type, min above max, pid 0 or not the caller's own or a descendant, holder
    /// empty or in a reserved scheme, duration 0 or above 3650 days);
    /// NoSuchArray; Busy
    /// (md refused a write with EBUSY); Failed (state file, kernel write).
    #[zbus(out_args("lease_id"))]
    async fn acquire_priority(
        &self,
        options: Options,
        #[zbus(header)] header: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
    ) -> Result<String> {
        let hdr = &header;
        let (caller, o) = self
            .shared
            .auth
            .guarded_async(
                conn,
                hdr,
                "AcquirePriority",
                options,
                |options| async move {
                    let o = self.acquire_options(&options)?;
                    if let Some(p) = o.pid {
                        check_own_pid(conn, hdr, p).await?;
                    }
                    let arrays: Vec<String> = o.arrays.keys().cloned().collect();
                    Ok((o, Request::acquire_priority(&arrays)))
                },
            )
            .await?;
        let sender = caller.sender;
        // Without holder and pid the policy records the caller's unique name as the owner; the
        // service drops the lease when that name leaves the bus (Shared::release_owner). A pid
        // is recorded with its start time, so a reused pid does not keep the lease.
        let process = |p| crate::policy::process_owner(p);
        let (id, owner) = match (&o.holder, o.pid) {
            (Some(h), pid) => (h.clone(), pid.map_or(Owner::None, process)),
            (None, Some(p)) => (self.shared.core.mint_lease_id(&sender), process(p)),
            (None, None) => (
                self.shared.core.mint_lease_id(&sender),
                Owner::BusName(sender.clone()),
            ),
        };
        let bus_owned = matches!(owner, Owner::BusName(_));
        let req = LeaseRequest {
            holder: id.clone(),
            kind: o.kind,
            owner,
            global: o.global,
            arrays: o.arrays,
        };
        let duration_s = o.duration_s;
        let view = off_thread(&self.shared, "AcquirePriority", move |s| {
            s.core.reap_dead_pids();
            s.core.policy.acquire_for(req, duration_s)
        })
        .await?;
        if bus_owned {
            drop_if_caller_left(&self.shared, conn, &emitter, &sender, &id).await?;
        }
        self.shared.publish(&emitter, Some(view)).await;
        Ok(id)
    }

    /// Ends a lease: one taken with AcquirePriority (the caller's own bus or pid lease, or a
    /// holder lease), a named lease of the policy (e.g. one the CLI took with `policy apply`
    /// and a holder name) or an admin-<array> lease. Refused: another client's dbus- lease (it
    /// ends when that client releases it or leaves the bus), a wipe job's wipe: or freeze:
    /// (cancel the job) and a check's check- throttle (pause or cancel the check). Errors:
    /// NotAuthorized; InvalidArgument (an id that holds no lease, a refused id); Failed.
    async fn release_priority(
        &self,
        lease_id: String,
        #[zbus(header)] header: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
    ) -> Result<()> {
        self.release(lease_id, Options::new(), &header, conn, &emitter)
            .await
    }

    /// ReleasePriority with options (since 1.2): auth.no_user_interaction (b: true = no polkit
    /// prompt, NotAuthorized at once instead); no other option. Otherwise as ReleasePriority.
    async fn release_priority_with_options(
        &self,
        lease_id: String,
        options: Options,
        #[zbus(header)] header: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
    ) -> Result<()> {
        self.release(lease_id, options, &header, conn, &emitter)
            .await
    }

    /// Sets md/sync_speed_min and md/sync_speed_max of one array (KiB/s; 0 = follow the system),
    /// as the lease admin-<kernel name>; 0 and 0 drop that lease. The array is named as users
    /// type it (md0, /dev/md0, /dev/md/root, md/root, the metadata name). Kept until
    /// RestoreLimits. No options yet. Errors: NotAuthorized; InvalidArgument (min above max, an
    /// option); NoSuchArray; Busy; Failed.
    #[allow(clippy::too_many_arguments)] // D-Bus arguments plus the zbus-injected context.
    async fn set_array_speed_limits(
        &self,
        array: String,
        min: u64,
        max: u64,
        options: Options,
        #[zbus(header)] header: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
    ) -> Result<()> {
        let (_, (array, limits)) = self
            .shared
            .auth
            .guarded(conn, &header, "SetArraySpeedLimits", options, |options| {
                no_options("SetArraySpeedLimits", &options)?;
                check_word("SetArraySpeedLimits", "array", &array)?;
                let limits = check_limits(&format!("SetArraySpeedLimits {array}"), min, max)?;
                let array = self
                    .shared
                    .core
                    .resolve_array(&array)
                    .map_err(|e| Error::NoSuchArray(format!("SetArraySpeedLimits: {e}")))?;
                let req = Request::set_array_speed_limits(&array);
                Ok(((array, limits), req))
            })
            .await?;
        let holder = crate::policy::Holder::array_admin(&array).to_string();
        let what = format!("SetArraySpeedLimits {array}");
        let view = off_thread(&self.shared, &what, move |s| {
            if limits.min.is_none() && limits.max.is_none() {
                return s
                    .core
                    .policy
                    .release(&holder)
                    .or_else(|_| s.core.policy.show());
            }
            s.core.policy.acquire(LeaseRequest {
                holder,
                kind: LeaseKind::Admin,
                owner: Owner::None,
                global: Limits::default(),
                arrays: BTreeMap::from([(array, limits)]),
            })
        })
        .await?;
        self.shared.publish(&emitter, Some(view)).await;
        Ok(())
    }

    /// Drops every lease and writes back the saved limits (option defaults (b): the kernel
    /// defaults 1000/200000 KiB/s instead, also when the state file is corrupt or unreadable:
    /// it is set aside as policy.toml.corrupt-TIME). Errors: NotAuthorized; InvalidArgument;
    /// Busy (a wipe job holds a freeze); Failed.
    async fn restore_limits(
        &self,
        options: Options,
        #[zbus(header)] header: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
    ) -> Result<()> {
        let (_, defaults) = self
            .shared
            .auth
            .guarded(conn, &header, "RestoreLimits", options, |options| {
                Ok((parse_restore(&options)?, Request::restore_limits()))
            })
            .await?;
        // Decided under the state's lock, with the restore: no freeze can be taken between.
        let view = off_thread(&self.shared, "RestoreLimits", move |s| {
            s.core
                .policy
                .restore_unless(defaults, &|changes| restore_refusal(s, changes))
        })
        .await?;
        self.shared.publish(&emitter, Some(view)).await;
        Ok(())
    }

    /// Block devices a wipe would accept or refuse, probed without writing: one (device s:
    /// /dev/<kernel name>, accepted b, reason s) per disk and partition under /sys/block that
    /// has a /dev node and a size above 0, sorted by name (optical and floppy drives are left
    /// out: opening them can move a tray). reason is what StartWipe would answer (mounted,
    /// swap, held by an array or a mapping, backing /, a job already on it, not a block
    /// device), or that the device is not answering (its probe took longer than 2 s: storage
    /// that stopped answering); "" when accepted. Each device is planned as a zero wipe: a
    /// method the device cannot do (discard) may still be NotSupported at StartWipe. Reads
    /// only, like the properties: open to every caller, and changes nothing. Bounded: one call
    /// per caller at a time, and answers up to 3 s old come from memory. Options:
    /// auth.no_user_interaction (b), ignored; nothing else yet. Errors: InvalidArgument (an
    /// option); Busy (a call of this caller is already running); Failed.
    #[zbus(out_args("candidates"))]
    async fn wipe_candidates(
        &self,
        mut options: Options,
        #[zbus(header)] header: Header<'_>,
    ) -> Result<Vec<(String, bool, String)>> {
        options.remove("auth.no_user_interaction");
        no_options("WipeCandidates", &options)?;
        let caller = header.sender().map(|s| s.to_string()).unwrap_or_default();
        let list = self
            .shared
            .candidates
            .list(&self.shared.core.root, &caller)
            .await?;
        Ok(mark_busy(&self.shared, list))
    }

    /// Starts wiping a block device; returns the job object
    /// /org/mdpilot/MdPilot1/jobs/<n> (interface org.mdpilot.MdPilot1.Job). Options: method (s:
    /// zero (default), random, discard, zeroout, signatures), verify (b), keep-resync (b),
    /// resume (b: continue the device's interrupted wipe from its checkpoint in
    /// /var/lib/mdpilot/wipe, with the checkpoint's method, random key and verify; without it
    /// a checkpoint of the device is replaced). Refused devices (mounted, swap, holders, backing /, a job already on it) are Busy; bad
    /// options or devices InvalidArgument.
    #[zbus(out_args("job"))]
    async fn start_wipe(
        &self,
        device: String,
        options: Options,
        #[zbus(header)] header: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> Result<zbus::zvariant::OwnedObjectPath> {
        super::job::start_wipe(&self.shared, conn, &header, device, options).await
    }
}

impl Manager {
    /// ReleasePriority(WithOptions): validates the id and the options, authorizes the
    /// caller, releases the lease and publishes.
    ///
    /// Errors: `InvalidArgument` (a bad id, an option, no such lease); `NotAuthorized`; the
    /// policy's.
    async fn release(
        &self,
        lease_id: String,
        options: Options,
        header: &Header<'_>,
        conn: &zbus::Connection,
        emitter: &SignalEmitter<'_>,
    ) -> Result<()> {
        self.shared
            .auth
            .guarded(conn, header, "ReleasePriority", options, |options| {
                no_options("ReleasePriority", &options)?;
                check_word("ReleasePriority", "lease id", &lease_id)?;
                // A wipe job's or a check's lease ends with its job or check, a client's with
                // that client: refused by name, before polkit is asked.
                crate::policy::Holder::parse(&lease_id)
                    .may_release(header.sender().map(|s| s.as_str()))
                    .map_err(|e| Error::InvalidArgument(format!("ReleasePriority: {e}")))?;
                Ok(((), Request::release_priority()))
            })
            .await?;
        let id = lease_id.clone();
        let view = off_thread(&self.shared, "ReleasePriority", move |s| {
            let view = s.core.policy.show()?;
            if !view.leases.iter().any(|l| l.holder == id) {
                return Ok(None);
            }
            s.core.policy.release(&id).map(Some)
        })
        .await?
        .ok_or_else(|| Error::InvalidArgument(format!("ReleasePriority: no lease {lease_id:?}")))?;
        self.shared.publish(emitter, Some(view)).await;
        Ok(())
    }

    /// AcquirePriority's options validated before anything is asked: at most as many `arrays`
    /// keys as the machine has arrays, bounded words, known options (`parse_acquire`), and
    /// each array resolved to its kernel name.
    ///
    /// Errors: `InvalidArgument`; `NoSuchArray` for an array the machine does not have.
    fn acquire_options(&self, options: &Options) -> Result<AcquireOptions> {
        let known = crate::lock::lock(&self.shared.core.model).arrays.len();
        check_array_count("AcquirePriority", options, known)?;
        let install = {
            let s = self.shared.core.policy.settings();
            (s.install_min, s.install_max)
        };
        let mut o = parse_acquire(options, install)?;
        let mut arrays = BTreeMap::new();
        for (word, l) in std::mem::take(&mut o.arrays) {
            let k = self
                .shared
                .core
                .resolve_array(&word)
                .map_err(|e| Error::NoSuchArray(format!("AcquirePriority: {e}")))?;
            arrays.insert(k, l);
        }
        o.arrays = arrays;
        Ok(o)
    }
}

/// Runs the policy operation `f` on the policy's own worker ([`crate::shared::State::policy_worker`]),
/// never on the service's one thread nor on tokio's shared blocking pool: the policy lock
/// (`flock`, which a `mdpilot policy` command or a stalled kernel write may hold) and the knob
/// writes block, and every other D-Bus call (a property `Get`, `Version`, a wipe or a check)
/// must still be answered meanwhile. The error names `what` (the method).
///
/// Errors: the policy's ([`Error::from`] a [`PolicyError`]); `Failed` when the worker is gone.
async fn off_thread<T: Send + 'static>(
    shared: &Arc<Shared>,
    what: &str,
    f: impl FnOnce(&Shared) -> std::result::Result<T, PolicyError> + Send + 'static,
) -> Result<T> {
    let s = shared.clone();
    shared
        .core
        .policy_worker
        .run(move || f(&s))
        .await
        .map_err(|e| Error::Failed(format!("{what}: {e}")))?
        .map_err(|e| Error::from(e).context(what))
}

/// After a bus-name lease `id` of `sender` is recorded: when `NameHasOwner(sender)` says the
/// caller has left (it left after polkit answered, and its `NameOwnerChanged` may have been
/// handled before the lease existed), releases the lease, publishes, and fails the call.
///
/// Errors: `Failed` (the caller left; or the bus could not be asked: the lease is released
/// then too, since nobody could drop it later).
async fn drop_if_caller_left(
    shared: &Arc<Shared>,
    conn: &zbus::Connection,
    emitter: &SignalEmitter<'_>,
    sender: &str,
    id: &str,
) -> Result<()> {
    let why = match name_has_owner(conn, sender).await {
        Ok(true) => return Ok(()),
        Ok(false) => format!("the caller {sender} left the bus"),
        Err(e) => format!("cannot ask the bus whether {sender} is still there: {e}"),
    };
    tracing::info!(holder = %id, owner = %sender, "AcquirePriority: {why}; lease {id} released");
    let holder = id.to_string();
    let view = off_thread(shared, "AcquirePriority", move |s| {
        s.core.policy.release(&holder)
    })
    .await
    .ok();
    shared.publish(emitter, view).await;
    Err(Error::Failed(format!(
        "AcquirePriority: {why}; lease {id} released"
    )))
}

/// Why RestoreLimits must not run now, given the journaled changes of the state file as
/// read under its lock (`None`: the file cannot be read): [`refuse_while_frozen`], or
/// [`refuse_while_jobs_run`] when the file cannot be read (the kernel defaults need nothing
/// from it, and the policy sets it aside; its journal is lost with it, so the jobs of this
/// service are what may still hold a freeze). `None`: go on.
fn restore_refusal(shared: &Shared, changes: Option<&[Change]>) -> Option<String> {
    match changes {
        Some(changes) => refuse_while_frozen(shared, changes),
        None => refuse_while_jobs_run(shared),
    }
}

/// RestoreLimits would undo the freezes running wipe jobs hold (journaled changes): the
/// refusal while there is one, naming the arrays and the jobs (answered as `Busy`).
fn refuse_while_frozen(shared: &Shared, changes: &[Change]) -> Option<String> {
    if changes.is_empty() {
        return None;
    }
    let arrays: Vec<String> = changes
        .iter()
        .map(|c| format!("{} ({} by {})", c.array.name, c.attr, c.owner))
        .collect();
    let jobs: Vec<String> = crate::lock::lock(&shared.core.jobs)
        .iter()
        .map(|(n, j)| format!("job {n} on {}", j.device.display()))
        .collect();
    Some(format!(
        "a wipe holds {} (running: {}); cancel the job first",
        arrays.join(", "),
        if jobs.is_empty() {
            "no job of this service".to_string()
        } else {
            jobs.join(", ")
        }
    ))
}

/// `RestoreLimits {defaults}` over a state file that cannot be read: the refusal while a wipe
/// job of this service runs (it may hold a freeze the lost journal recorded), naming the jobs.
fn refuse_while_jobs_run(shared: &Shared) -> Option<String> {
    let jobs: Vec<String> = crate::lock::lock(&shared.core.jobs)
        .iter()
        .filter(|(_, j)| !j.handle.is_finished())
        .map(|(n, j)| format!("job {n} on {}", j.device.display()))
        .collect();
    if jobs.is_empty() {
        return None;
    }
    Some(format!(
        "the policy state is unreadable and a wipe may hold a freeze (running: {}); cancel the job first",
        jobs.join(", ")
    ))
}

/// `list` ([`super::candidates::Candidates::list`]) with the devices a job of this service is
/// wiping refused as `StartWipe` would: `(device, accepted, reason)`. Path work only (links
/// resolved, no device opened).
fn mark_busy(
    shared: &Shared,
    list: Vec<crate::wipe::candidates::Candidate>,
) -> Vec<(String, bool, String)> {
    let busy: Vec<std::path::PathBuf> = crate::lock::lock(&shared.core.jobs)
        .values()
        .filter(|j| !j.handle.is_finished())
        .map(|j| j.device.clone())
        .collect();
    list.into_iter()
        .map(|c| {
            let name = c.device.trim_start_matches("/dev/");
            let real = std::fs::canonicalize(shared.core.root.dev(name)).ok();
            match real.filter(|r| busy.contains(r)) {
                Some(r) => (
                    c.device,
                    false,
                    format!("WipeCandidates: a job is already wiping {}", r.display()),
                ),
                None => (c.device, c.accepted, c.reason),
            }
        })
        .collect()
}
