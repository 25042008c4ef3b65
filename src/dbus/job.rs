//! Wipe jobs on the bus: `Manager.StartWipe(s device, a{sv} options)` probes, plans and starts
//! the wipe through [`crate::wipe::start`] (the CLI's sequence: probe, plan, a
//! [`crate::wipe::Job`] on its own thread), and serves `/org/mdpilot/MdPilot1/jobs/<n>` with interface
//! `org.mdpilot.MdPilot1.Job` ([`JobObject`]).
//!
//! Progress: a per-job tokio task (it exists only while the job does: no timer without jobs)
//! samples [`crate::wipe::JobHandle::progress`] every `progress_interval_ms` and emits
//! PropertiesChanged for the values that changed; the engine's `on_complete` callback wakes it at
//! the end, it emits the last values and `Completed(b success, s message)`, and removes the
//! object [`JOB_LINGER`] later (InterfacesRemoved through the ObjectManager). On SIGTERM the
//! service interrupts every running job ([`crate::shared::State::cancel_jobs`]: stopped, checkpoint kept, so
//! the next start continues it, [`crate::service::resume`]) before restoring the limits; the
//! engine unfreezes the resync and releases the job's leases itself.
//!
//! Leases go through the service's [`crate::policy::Policy`] ([`ServiceLeases`]), owned by the
//! service's pid (a lease of a job that died with the service is reaped at the next start).
//!
//! The interface follows udisks2's `org.freedesktop.UDisks2.Job` where names overlap
//! (`Operation`, `Progress`, `ProgressValid`, `Bytes`, `Rate`, `StartTime`, `ExpectedEndTime`,
//! `Objects`, `StartedByUID`, `Cancelable`, `Cancel(a{sv})`, `Completed(b, s)`), plus `Device`,
//! `BytesDone`, the prose `Plan` and the structured `PlanData` ([`super::plan`]).
//!
//! Authorization ([`super::auth`]): StartWipe needs `org.mdpilot.MdPilot1.wipe` (auth_admin,
//! every time); Cancel of one's own job (same uid as `StartedByUID`) needs nothing more, of
//! another uid's job the wipe action again.

// zbus's proxy/interface macros generate items (signal emitters and streams, argument
// structs) that carry no docs; the hand-written items here are all documented.
#![allow(missing_docs)]

use super::auth::{Authority, Request};
use super::errors::{Error, Result};
use super::options::{check_device, no_options, parse_start_wipe, Options};
use super::plan::PlanData;
use super::props::{changed_props, emit_changed};
use super::shared::Shared;
use super::ROOT_PATH;
use crate::lock::lock;
use crate::shared::{RunningJob, ServiceLeases};
use crate::wipe::plan::StartedBy;
use crate::wipe::target::resolve_trusted;
use crate::wipe::{JobHandle, WipeError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use zbus::interface;
use zbus::message::Header;
use zbus::object_server::SignalEmitter;
use zbus::zvariant::{OwnedObjectPath, OwnedValue};

/// Job interface name.
pub const JOB_IFACE: &str = "org.mdpilot.MdPilot1.Job";
/// How long a finished job's object stays on the bus after `Completed` (clients that missed the
/// signal can still read the final properties). Env `MDPILOT_JOB_LINGER_MS` overrides it (tests).
pub const JOB_LINGER: Duration = Duration::from_secs(30);

fn linger() -> Duration {
    std::env::var("MDPILOT_JOB_LINGER_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(JOB_LINGER, Duration::from_millis)
}

/// Object path of job `n`: `/org/mdpilot/MdPilot1/jobs/<n>`.
pub fn job_path(n: u64) -> String {
    format!("{ROOT_PATH}/jobs/{n}")
}

/// The published properties of a job.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobProps {
    /// `wipe-<method>` (`wipe-zero`, `wipe-random`, `wipe-discard`, `wipe-zeroout`,
    /// `wipe-signatures`).
    pub operation: String,
    /// The device as resolved (`/dev/loop3`).
    pub device: String,
    /// Durable fraction done, 0..=1.
    pub progress: f64,
    /// Whether `progress` means something (the job knows its total: `bytes` > 0).
    pub progress_valid: bool,
    /// The array objects the job works on ([`super::shared::ArrayPaths::paths_of`]).
    pub objects: Vec<OwnedObjectPath>,
    /// The plan as structured data.
    pub plan_data: PlanData,
    /// Bytes the job writes in all.
    pub bytes: u64,
    /// Bytes durably written.
    pub bytes_done: u64,
    /// Current rate, bytes/s.
    pub rate: u64,
    /// Start, µs since the epoch.
    pub start_time: u64,
    /// Expected end at the current rate, µs since the epoch; 0 while unknown.
    pub expected_end_time: u64,
    /// The plan and its reasons (what `mdpilot wipe --dry-run` prints).
    pub plan: String,
    /// True while the job runs.
    pub cancelable: bool,
    /// Uid of the caller of StartWipe.
    pub started_by_uid: u32,
}

impl JobProps {
    /// Refreshes the progress fields from `p` (pure but for the clock).
    pub fn with_progress(&self, p: &crate::wipe::Progress) -> JobProps {
        let mut n = self.clone();
        n.bytes_done = p.done_bytes;
        n.progress = p.fraction().clamp(0.0, 1.0);
        n.rate = p.rate_bytes_per_s.max(0.0) as u64;
        n.expected_end_time = p.eta_s().map_or(0, |s| {
            crate::host::unix_now_us().saturating_add((s * 1e6) as u64)
        });
        n
    }

    /// Properties whose values differ, by D-Bus name (only the ones that change while a job
    /// runs).
    pub fn changed(old: &JobProps, new: &JobProps) -> HashMap<&'static str, OwnedValue> {
        changed_props!(old, new;
            progress => "Progress", bytes_done => "BytesDone", rate => "Rate",
            expected_end_time => "ExpectedEndTime", cancelable => "Cancelable",
        )
    }
}

/// The job object.
pub struct JobObject {
    /// Published values, shared with the job's follower task (which updates them without
    /// taking the object server's lock on the object, so a slow Cancel authorization never
    /// delays progress or Completed).
    pub props: Arc<Mutex<JobProps>>,
    /// The engine's handle; `None` for an object that drives nothing (introspection tests).
    pub handle: Option<Arc<JobHandle>>,
    /// Who may cancel (the service's authority).
    pub auth: Arc<Authority>,
    /// Set by the first successful Cancel.
    pub cancelled: AtomicBool,
}

/// A wipe job of mdpilot, like udisks2's Job. Reads are open to everyone; Cancel of one's own
/// job is allowed, of another uid's job it needs uid 0 or polkit action
/// org.mdpilot.MdPilot1.wipe. The object goes away some seconds after Completed.
#[interface(name = "org.mdpilot.MdPilot1.Job")]
impl JobObject {
    /// What the job does: wipe-zero, wipe-random, wipe-discard, wipe-zeroout, wipe-signatures.
    #[zbus(property(emits_changed_signal = "const"))]
    fn operation(&self) -> String {
        self.p().operation
    }
    /// The block device, as resolved.
    #[zbus(property(emits_changed_signal = "const"))]
    fn device(&self) -> String {
        self.p().device
    }
    /// Durably written fraction, 0..1 (meaningful when ProgressValid).
    #[zbus(property)]
    fn progress(&self) -> f64 {
        self.p().progress
    }
    /// Whether Progress means something (the job knows how many bytes it writes).
    #[zbus(property(emits_changed_signal = "const"))]
    fn progress_valid(&self) -> bool {
        self.p().progress_valid
    }
    /// The array objects the job works on: the array being wiped and the arrays whose limits
    /// its leases change (empty for a device that is no array, e.g. a loop device).
    #[zbus(property(emits_changed_signal = "const"))]
    fn objects(&self) -> Vec<OwnedObjectPath> {
        self.p().objects
    }
    /// The plan as a{sv}: method s, operation s (write, zeroout, discard), data s (with write),
    /// open-flags s, block-bytes t, step-bytes t, queue-depth u, ranges u, total-bytes t,
    /// resync-action s (leave, freeze-and-skip), resync-array s (with freeze-and-skip), verify
    /// b, leases aa{sv} (holder s, kind s, min t, max t, arrays a{sa{st}}; limits in KiB/s, only
    /// the set ones).
    #[zbus(property(emits_changed_signal = "const"))]
    fn plan_data(&self) -> HashMap<String, OwnedValue> {
        self.p().plan_data.to_dict()
    }
    /// Bytes the job writes in all.
    #[zbus(property(emits_changed_signal = "const"))]
    fn bytes(&self) -> u64 {
        self.p().bytes
    }
    /// Bytes durably written (O_DIRECT completion or BLKZEROOUT return, never merely queued).
    #[zbus(property)]
    fn bytes_done(&self) -> u64 {
        self.p().bytes_done
    }
    /// Current rate, bytes/s.
    #[zbus(property)]
    fn rate(&self) -> u64 {
        self.p().rate
    }
    /// Start time, µs since the epoch.
    #[zbus(property(emits_changed_signal = "const"))]
    fn start_time(&self) -> u64 {
        self.p().start_time
    }
    /// Expected end at the current rate, µs since the epoch; 0 while unknown.
    #[zbus(property)]
    fn expected_end_time(&self) -> u64 {
        self.p().expected_end_time
    }
    /// The plan: open flags, request size, queue depth, resync handling and the reasons.
    #[zbus(property(emits_changed_signal = "const"))]
    fn plan(&self) -> String {
        self.p().plan
    }
    /// True while the job runs.
    #[zbus(property)]
    fn cancelable(&self) -> bool {
        self.p().cancelable
    }
    /// Uid of the caller that started the job.
    #[zbus(property(emits_changed_signal = "const"), name = "StartedByUID")]
    fn started_by_uid(&self) -> u32 {
        self.p().started_by_uid
    }

    /// Stops the job between two blocks; Completed(false, ...) follows once in-flight requests
    /// are done, the resync unfrozen and the leases released. Options: auth.no_user_interaction
    /// (b). Cancelled when the job is already being cancelled or was; Failed when it has
    /// already finished otherwise.
    async fn cancel(
        &self,
        options: Options,
        #[zbus(header)] header: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> Result<()> {
        let p = self.p();
        self.auth
            .guarded(conn, &header, "Cancel", options, |options| {
                no_options("Cancel", &options)?;
                Ok(((), Request::cancel_job(&p.device, p.started_by_uid)))
            })
            .await?;
        let already = || {
            Error::Cancelled(format!(
                "Cancel: the job on {} is already cancelled",
                p.device
            ))
        };
        if self.cancelled.load(Ordering::SeqCst) {
            return Err(already());
        }
        match &self.handle {
            Some(h) if !h.is_finished() && p.cancelable => {
                // Of two racing Cancel calls exactly one succeeds.
                if self.cancelled.swap(true, Ordering::SeqCst) {
                    return Err(already());
                }
                h.cancel();
                Ok(())
            }
            _ => Err(Error::Failed(format!(
                "Cancel: the job on {} has already finished",
                p.device
            ))),
        }
    }

    /// The job ended: success, and a message (bytes, rate; or the error with the device, the
    /// offset and the errno; or "cancelled after N of M bytes").
    #[zbus(signal)]
    pub async fn completed(
        emitter: &SignalEmitter<'_>,
        success: bool,
        message: &str,
    ) -> zbus::Result<()>;
}

impl JobObject {
    /// An object that drives nothing (its introspection is the interface's).
    pub fn idle(auth: Arc<Authority>) -> JobObject {
        JobObject {
            props: Default::default(),
            handle: None,
            auth,
            cancelled: AtomicBool::new(false),
        }
    }

    /// A snapshot of the published values.
    fn p(&self) -> JobProps {
        lock(&self.props).clone()
    }
}

/// Why StartWipe could not start: the wipe core refused, or the service did (a job already on
/// the device).
enum StartErr {
    Wipe(WipeError),
    Bus(Error),
}

impl From<WipeError> for StartErr {
    fn from(e: WipeError) -> Self {
        StartErr::Wipe(e)
    }
}

/// `Manager.StartWipe`: the options and the device string are validated first
/// ([`parse_start_wipe`], [`check_device`]: at most `PATH_MAX`, no control characters); the
/// path is resolved once under the trust rules ([`crate::wipe::target::resolve_trusted`]: a
/// block device under `/dev`, reached only through directories no one but root can change and
/// everyone can search; path work only, the device is not opened); then the caller is
/// authorized (polkit action `org.mdpilot.MdPilot1.wipe`, details naming the resolved node);
/// then the node is probed and planned off the loop's thread (it must still be the resolved
/// device number and size), the job started and its object served. Returns the object path.
///
/// Errors, before polkit is asked: `InvalidArgument` (options, a device string that cannot be
/// a path, an untrusted path, an optical or floppy drive). After: `NotAuthorized`;
/// `InvalidArgument` (no such block device); `Failed` when the node changed since it was
/// resolved; `NotSupported` (the device cannot do the method, e.g. discard); `Busy` (refused:
/// mounted, swap, holders, backs `/`, or a job already runs on the device); `Failed` (anything
/// else), each naming the device and the reason.
pub async fn start_wipe(
    shared: &Arc<Shared>,
    conn: &zbus::Connection,
    header: &Header<'_>,
    device: String,
    options: Options,
) -> Result<OwnedObjectPath> {
    let (caller, (resolved, method, options)) = shared
        .auth
        .guarded(conn, header, "StartWipe", options, |options| {
            let (method, o) = parse_start_wipe(&options)?;
            check_device("StartWipe", &device)?;
            // The prompt names the node the links lead to (/dev/sdb, not /dev/disk/by-id/...),
            // and the job opens that node and checks it is still that device. A path that
            // names no block device is refused only after polkit (the details show it as
            // given: it leads nowhere, there is nothing to hide), so that callers who may not
            // wipe learn nothing about which nodes exist.
            let resolved = match resolve_trusted(&shared.core.root, device.as_ref()) {
                Err(e @ WipeError::Untrusted { .. }) => {
                    return Err(Error::from(e).context("StartWipe"))
                }
                r => r,
            };
            let shown = resolved
                .as_ref()
                .map_or_else(|_| device.clone(), |(n, _)| n.display().to_string());
            Ok(((resolved, method, o), Request::start_wipe(&shown)))
        })
        .await?;
    let (node, bound) = resolved.map_err(|e| Error::from(e).context("StartWipe"))?;
    let uid = caller.uid;
    let req = crate::wipe::Request {
        device: node,
        method,
        options: crate::wipe::Options {
            bound: Some(bound),
            owner: Some(crate::policy::process_owner(std::process::id())),
            started_by: StartedBy::Service { uid },
            ..options
        },
    };
    launch(shared, conn, &req, uid, "StartWipe")
        .await
        .map(|(path, _)| path)
}

/// Starts the wipe `req` for `uid` and serves its job object (what [`start_wipe`] does once the
/// caller is authorized, and what the service does for a job it continues at start-up); `what`
/// names the caller in errors (`StartWipe`). Returns the object path and the job's handle.
///
/// Errors: as [`start_wipe`] (but `NotAuthorized`).
pub async fn launch(
    shared: &Arc<Shared>,
    conn: &zbus::Connection,
    req: &crate::wipe::Request,
    uid: u32,
    what: &str,
) -> Result<(OwnedObjectPath, Arc<JobHandle>)> {
    let n = shared.core.next_job_number();
    let path = job_path(n);
    let (tx, rx) = tokio::sync::oneshot::channel::<(bool, String)>();
    let (handle, plan) = start_off_loop(shared, req, n, what, tx).await?;
    let dev_text = plan.device.display().to_string();
    let method = plan.method;
    let props = Arc::new(Mutex::new(job_props(shared, &plan, uid)));
    let obj = JobObject {
        props: props.clone(),
        handle: Some(handle.clone()),
        auth: shared.auth.clone(),
        cancelled: AtomicBool::new(false),
    };
    // ObjectServer::at emits InterfacesAdded through the ObjectManager.
    if let Err(e) = conn.object_server().at(path.as_str(), obj).await {
        handle.cancel();
        return Err(Error::Failed(format!(
            "{what} {dev_text}: cannot serve {path}: {e}"
        )));
    }
    // The journal's record of who wiped what (fields JOB=, DEVICE=, UID=, METHOD=).
    tracing::info!(
        job = n, device = %dev_text, uid, method = method.name(),
        "job {n}: wiping {dev_text} ({}) for uid {uid}", method.name()
    );
    tokio::spawn(follow(
        conn.clone(),
        shared.clone(),
        n,
        path.clone(),
        props,
        handle.clone(),
        rx,
    ));
    let path =
        OwnedObjectPath::try_from(path).map_err(|e| Error::Failed(format!("{what}: {e}")))?;
    Ok((path, handle))
}

/// Reserves `req.device` ([`crate::shared::State::reserve`]), then probes, plans and starts
/// the wipe on a blocking thread, no lock held meanwhile (the probe stats, runs ioctls, walks
/// sysfs and every `/dev/disk/by-id` link: the loop keeps serving); the job is registered as
/// number `n` before the reservation ends. `done` gets the job's end (success, summary).
///
/// Errors: `Busy` (a job runs on the device, or another start is under way on it), else as
/// [`start_wipe`].
async fn start_off_loop(
    shared: &Arc<Shared>,
    req: &crate::wipe::Request,
    n: u64,
    what: &str,
    done: tokio::sync::oneshot::Sender<(bool, String)>,
) -> Result<(Arc<JobHandle>, crate::wipe::Plan)> {
    let busy = |what: &str, reason: String| Error::Busy(format!("{what}: {reason}"));
    let mut reserved = shared
        .core
        .reserve(&req.device)
        .map_err(|r| busy(what, r))?;
    let (core, req, who) = (shared.core.clone(), req.clone(), what.to_string());
    let started = shared
        .core
        .wipe_worker
        .run(move || {
            let (handle, plan) = crate::wipe::start(&core.root, &req, |plan| {
                // The node the probe resolved, when the path asked for led elsewhere.
                if let Err(r) = reserved.also(&plan.device) {
                    return Err(StartErr::Bus(busy(&who, r)));
                }
                let dev = plan.device.display().to_string();
                Ok(crate::wipe::Hooks {
                    leases: Arc::new(ServiceLeases(core.clone())),
                    on_progress: None,
                    on_complete: Some(Box::new(move |r| {
                        let _ = done.send((r.is_ok(), crate::wipe::progress::summary(&dev, r)));
                    })),
                })
            })?;
            let handle = Arc::new(handle);
            let job = RunningJob {
                device: plan.device.clone(),
                handle: handle.clone(),
            };
            reserved.register(n, job);
            Ok::<_, StartErr>((handle, plan))
        })
        .await
        .map_err(|e| Error::Failed(format!("{what}: {e}")))?;
    started.map_err(|e| match e {
        StartErr::Wipe(WipeError::Random(e)) => Error::Failed(format!("{what}: getrandom: {e}")),
        StartErr::Wipe(e) => Error::from(e).context(what),
        StartErr::Bus(e) => e,
    })
}

/// The new job's properties: its operation, device, plan and the arrays it works on (those
/// whose limits it leases, and the device itself when it is an array; [`super::shared::ArrayPaths::paths_of`] keeps
/// only names the service serves).
fn job_props(shared: &Shared, plan: &crate::wipe::Plan, uid: u32) -> JobProps {
    let worked_on = plan
        .leases
        .iter()
        .flat_map(|l| l.arrays.keys())
        .map(std::string::String::as_str)
        .chain(std::iter::once(plan.name.as_str()));
    JobProps {
        operation: format!("wipe-{}", plan.method.name()),
        device: plan.device.display().to_string(),
        progress: 0.0,
        progress_valid: plan.total_bytes() > 0,
        objects: lock(&shared.arrays).paths_of(worked_on),
        plan_data: PlanData::from_plan(plan),
        bytes: plan.total_bytes(),
        bytes_done: 0,
        rate: 0,
        start_time: crate::host::unix_now_us(),
        expected_end_time: 0,
        plan: plan.describe(),
        cancelable: true,
        started_by_uid: uid,
    }
}

/// Publishes `handle`'s progress on `path` (PropertiesChanged for what changed).
async fn update(
    conn: &zbus::Connection,
    path: &str,
    props: &Mutex<JobProps>,
    handle: &JobHandle,
    end: bool,
) {
    let changed = {
        let mut cur = lock(props);
        let mut new = cur.with_progress(&handle.progress());
        if end {
            new.cancelable = false;
            new.rate = 0;
            new.expected_end_time = 0;
        }
        let c = JobProps::changed(&cur, &new);
        *cur = new;
        c
    };
    if let Ok(emitter) = SignalEmitter::new(conn, path) {
        emit_changed(&emitter, JOB_IFACE, changed).await;
    }
}

/// The job's follower: progress every interval while it runs, Completed at the end, then the
/// object's removal after [`JOB_LINGER`].
async fn follow(
    conn: zbus::Connection,
    shared: Arc<Shared>,
    n: u64,
    path: String,
    props: Arc<Mutex<JobProps>>,
    handle: Arc<JobHandle>,
    mut done: tokio::sync::oneshot::Receiver<(bool, String)>,
) {
    let every = shared.core.progress_interval;
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (ok, message) = loop {
        tokio::select! {
            r = &mut done => break r.unwrap_or_else(|_| {
                (false, "the wipe job ended without a result".to_string())
            }),
            _ = tick.tick() => { update(&conn, &path, &props, &handle, false).await; }
        }
    };
    update(&conn, &path, &props, &handle, true).await;
    if let Ok(emitter) = SignalEmitter::new(&conn, path.as_str()) {
        if let Err(e) = JobObject::completed(&emitter, ok, &message).await {
            tracing::warn!("cannot emit Completed on {path}: {e}");
        }
    }
    let (device, uid) = {
        let p = lock(&props);
        (p.device.clone(), p.started_by_uid)
    };
    if ok {
        tracing::info!(job = n, device = %device, uid, "job {n}: {message}");
    } else {
        tracing::warn!(job = n, device = %device, uid, "job {n}: {message}");
    }
    lock(&shared.core.jobs).remove(&n);
    tokio::time::sleep(linger()).await;
    if let Err(e) = conn
        .object_server()
        .remove::<JobObject, _>(path.as_str())
        .await
    {
        tracing::warn!("cannot remove {path}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_running_values_are_diffed() {
        let a = JobProps {
            bytes: 100,
            cancelable: true,
            ..JobProps::default()
        };
        let mut b = a.clone();
        assert!(JobProps::changed(&a, &b).is_empty());
        b.bytes_done = 50;
        b.progress = 0.5;
        b.cancelable = false;
        let c = JobProps::changed(&a, &b);
        let mut keys: Vec<_> = c.keys().copied().collect();
        keys.sort();
        assert_eq!(keys, ["BytesDone", "Cancelable", "Progress"]);
    }

    #[test]
    fn paths() {
        assert_eq!(job_path(3), "/org/mdpilot/MdPilot1/jobs/3");
    }
}
