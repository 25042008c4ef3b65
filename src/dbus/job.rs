//! Wipe jobs on the bus: `Manager.StartWipe(s device, a{sv} options)` probes and plans the wipe
//! ([`crate::wipe::probe`], [`crate::wipe::planner`]), starts a [`crate::wipe::engine::Job`] on
//! its own thread, and serves `/org/mdpilot/MdPilot1/jobs/<n>` with interface
//! `org.mdpilot.MdPilot1.Job` ([`JobObject`]).
//!
//! Progress: a per-job tokio task (it exists only while the job does: no timer without jobs)
//! samples [`crate::wipe::JobHandle::progress`] every `progress_interval_ms` and emits
//! PropertiesChanged for the values that changed; the engine's `on_complete` callback wakes it at
//! the end, it emits the last values and `Completed(b success, s message)`, and removes the
//! object [`JOB_LINGER`] later (InterfacesRemoved through the ObjectManager). On SIGTERM the
//! service cancels every running job ([`Shared::cancel_jobs`]) before restoring the limits; the
//! engine unfreezes the resync and releases the job's leases itself.
//!
//! Leases go through the service's [`crate::policy::Policy`] ([`ServiceLeases`]), owned by the
//! service's pid (a lease of a job that died with the service is reaped at the next start).

use super::auth::authorize;
use super::errors::{Error, Result};
use super::options::{no_options, parse_start_wipe, Options};
use super::props::{changed_props, emit_changed};
use super::{BusChoice, MANAGER_PATH};
use crate::policy::Owner;
use crate::service::state::{RunningJob, ServiceLeases, Shared};
use crate::wipe::{JobHandle, Outcome, WipeError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
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
        .map(Duration::from_millis)
        .unwrap_or(JOB_LINGER)
}

/// Object path of job `n`: `/org/mdpilot/MdPilot1/jobs/<n>`.
pub fn job_path(n: u64) -> String {
    format!("{MANAGER_PATH}/jobs/{n}")
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

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

impl JobProps {
    /// Refreshes the progress fields from `p` (pure but for the clock).
    pub fn with_progress(&self, p: &crate::wipe::Progress) -> JobProps {
        let mut n = self.clone();
        n.bytes_done = p.done_bytes;
        n.progress = p.fraction().clamp(0.0, 1.0);
        n.rate = p.rate_bytes_per_s.max(0.0) as u64;
        n.expected_end_time = p
            .eta_s()
            .map(|s| now_us().saturating_add((s * 1e6) as u64))
            .unwrap_or(0);
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
    /// The bus the service is on (for authorization).
    pub bus: BusChoice,
}

/// A wipe job of mdpilot. Reads are open to everyone; Cancel needs uid 0 or polkit action
/// org.mdpilot.MdPilot1.manage. The object goes away some seconds after Completed.
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
    /// Durably written fraction, 0..1.
    #[zbus(property)]
    fn progress(&self) -> f64 {
        self.p().progress
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
    /// are done, the resync unfrozen and the leases released. No options yet. Failed when the
    /// job has already finished.
    async fn cancel(
        &self,
        options: Options,
        #[zbus(header)] header: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> Result<()> {
        authorize(conn, &header, &self.bus).await?;
        no_options("Cancel", &options)?;
        match &self.handle {
            Some(h) if !h.is_finished() && self.p().cancelable => {
                h.cancel();
                Ok(())
            }
            _ => Err(Error::Failed(format!(
                "Cancel: the job on {} has already finished",
                self.p().device
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
    /// A snapshot of the published values.
    fn p(&self) -> JobProps {
        self.props.lock().unwrap_or_else(|e| e.into_inner()).clone()
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

/// The human summary of a job's end, for `Completed`.
pub fn completion_message(device: &str, r: &std::result::Result<Outcome, WipeError>) -> String {
    match r {
        Ok(o) => {
            let mut s = format!(
                "{device}: wiped {} bytes in {:.1} s ({:.0} MB/s)",
                o.bytes,
                o.wipe_s,
                o.rate_bytes_per_s / 1e6
            );
            if o.verified {
                s.push_str(", verified");
            }
            if o.resync_skipped {
                s.push_str(", initial resync skipped");
            }
            s
        }
        Err(e) => crate::error::error_chain(e),
    }
}

/// `Manager.StartWipe`: authorizes the caller, probes and plans, starts the job and serves its
/// object. Returns the object path.
///
/// Errors: `NotAuthorized`; `InvalidArgument` (options, not a block device, unsupported
/// method); `Busy` (refused: mounted, swap, holders, backs `/`, or a job already runs on the
/// device); `Failed` (anything else), each naming the device and the reason.
pub async fn start_wipe(
    shared: &Arc<Shared>,
    conn: &zbus::Connection,
    header: &Header<'_>,
    device: String,
    options: Options,
) -> Result<OwnedObjectPath> {
    authorize(conn, header, &shared.bus).await?;
    if device.is_empty() {
        return Err(Error::InvalidArgument("StartWipe: empty device".into()));
    }
    let (method, verify, keep_resync, resume) = parse_start_wipe(&options)?;
    let sender = header
        .sender()
        .map(|s| s.to_owned())
        .ok_or_else(|| Error::InvalidArgument("StartWipe: message has no sender".into()))?;
    let uid = zbus::fdo::DBusProxy::new(conn)
        .await
        .map_err(|e| Error::Failed(format!("StartWipe: cannot ask the bus: {e}")))?
        .get_connection_unix_user(zbus::names::BusName::from(sender))
        .await
        .map_err(|e| Error::Failed(format!("StartWipe: caller's uid unknown: {e}")))?;
    let req = crate::wipe::Request {
        device: device.into(),
        method,
        options: crate::wipe::Options {
            verify,
            keep_resync,
            resume,
            owner: Some(Owner::Pid(std::process::id())),
            ..crate::wipe::Options::default()
        },
    };
    let n = shared.next_job_number();
    let path = job_path(n);
    let (tx, rx) = tokio::sync::oneshot::channel::<(bool, String)>();
    let (handle, plan) = {
        // Check and register under one lock: two StartWipe calls on one device cannot both pass.
        let mut jobs = shared.jobs.lock().unwrap_or_else(|e| e.into_inner());
        let (handle, plan) = crate::wipe::start(&shared.root, &req, |plan| {
            if let Some(j) = jobs
                .values()
                .find(|j| j.device == plan.device && !j.handle.is_finished())
            {
                return Err(StartErr::Bus(Error::Busy(format!(
                    "StartWipe: a job is already wiping {}",
                    j.device.display()
                ))));
            }
            let dev2 = plan.device.display().to_string();
            Ok(crate::wipe::Hooks {
                leases: Arc::new(ServiceLeases(shared.clone())),
                on_progress: None,
                on_complete: Some(Box::new(move |r| {
                    let _ = tx.send((r.is_ok(), completion_message(&dev2, r)));
                })),
            })
        })
        .map_err(|e| match e {
            StartErr::Wipe(WipeError::Random(e)) => {
                Error::Failed(format!("StartWipe: getrandom: {e}"))
            }
            StartErr::Wipe(e) => Error::from(e).context("StartWipe"),
            StartErr::Bus(e) => e,
        })?;
        let handle = Arc::new(handle);
        jobs.insert(
            n,
            RunningJob {
                device: plan.device.clone(),
                handle: handle.clone(),
            },
        );
        (handle, plan)
    };
    let dev_text = plan.device.display().to_string();
    let props = JobProps {
        operation: format!("wipe-{}", method.name()),
        device: dev_text.clone(),
        progress: 0.0,
        bytes: plan.total_bytes(),
        bytes_done: 0,
        rate: 0,
        start_time: now_us(),
        expected_end_time: 0,
        plan: plan.describe(),
        cancelable: true,
        started_by_uid: uid,
    };
    let props = Arc::new(Mutex::new(props));
    let obj = JobObject {
        props: props.clone(),
        handle: Some(handle.clone()),
        bus: shared.bus.clone(),
    };
    // ObjectServer::at emits InterfacesAdded through the ObjectManager.
    if let Err(e) = conn.object_server().at(path.as_str(), obj).await {
        handle.cancel();
        return Err(Error::Failed(format!(
            "StartWipe {dev_text}: cannot serve {path}: {e}"
        )));
    }
    tracing::info!("job {n}: wiping {dev_text} ({method:?}) for uid {uid}");
    tokio::spawn(follow(
        conn.clone(),
        shared.clone(),
        n,
        path.clone(),
        props,
        handle,
        rx,
    ));
    OwnedObjectPath::try_from(path).map_err(|e| Error::Failed(format!("StartWipe: {e}")))
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
        let mut cur = props.lock().unwrap_or_else(|e| e.into_inner());
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
    let every = shared.progress_interval;
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
    tracing::info!("job {n}: {message}");
    shared
        .jobs
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&n);
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
