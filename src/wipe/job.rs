//! The job: runs a [`Plan`] on a [`Sink`] with `queue_depth` worker threads
//! ([`super::workers`]), from the first lease to the last unfreeze.
//!
//! Lifecycle: open the device with the plan's flags (buffered fallback when O_DIRECT is
//! refused), open the data sources, take the plan's leases, freeze the resync; then the phases
//! wipe -> flush -> verify (`run_phases`); then mark the array in sync (or unfreeze it) and
//! release the leases, whatever the result. The job flushes (fdatasync, a cache flush) before it
//! reports success. Memory is bounded by `queue_depth * block_bytes`.
//!
//! [`Job`] is what front ends drive: the CLI polls [`JobHandle::progress`], a D-Bus Job object
//! can do the same (Bytes, BytesDone, Rate, ExpectedEndTime) or take the [`Job::on_progress`]
//! callback, call [`JobHandle::cancel`] for `Cancel`, and emit `Completed` from
//! [`JobHandle::wait`]'s result.

use super::checkpoint::{self, Checkpoint, Checkpointer, ResyncRecord};
use super::error::WipeError;
use super::leases::{LeaseProvider, NoLeases};
use super::offload;
use super::plan::{Data, Method, Op, Plan, ResyncAction, StartedBy};
use super::progress::{notify, CompleteFn, Outcome, Phase, Progress, ProgressFn, Shared};
use super::rescan;
use super::sink::{BlockDevice, Sink};
use super::source::Sources;
use super::target::{check_opened, Bound};
use super::verify::{check_resumed, verify};
use super::workers::{wipe_all, Pool};
use crate::host::Root;
use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The error of a job whose thread panicked: an internal failure (a bug), not a refusal.
fn panicked() -> WipeError {
    WipeError::Internal("wipe job thread panicked".into())
}

/// A wipe job: a plan, where to run it, and who to tell.
pub struct Job {
    plan: Plan,
    root: Root,
    sink: Option<Arc<dyn Sink>>,
    leases: Arc<dyn LeaseProvider>,
    on_progress: Option<ProgressFn>,
    on_complete: Option<CompleteFn>,
    cancel: Arc<AtomicBool>,
}

/// Handle of a started job (see [`Job::start`]).
pub struct JobHandle {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<Result<Outcome, WipeError>>>,
}

impl JobHandle {
    /// The current progress (cheap; atomics only).
    pub fn progress(&self) -> Progress {
        self.shared.snapshot()
    }

    /// Asks the job to stop after the requests in flight; the result becomes
    /// [`WipeError::Cancelled`] (unless it already finished). Idempotent.
    pub fn cancel(&self) {
        self.shared.cancel.store(true, Ordering::SeqCst);
    }

    /// Like [`JobHandle::cancel`], but the job is interrupted rather than abandoned: its
    /// checkpoint is kept (saved up to what is durable), so `--resume` or the service's
    /// start-up continues it. What `mdpilot serve` does to its jobs when it stops.
    pub fn interrupt(&self) {
        self.shared.keep_checkpoint.store(true, Ordering::SeqCst);
        self.cancel();
    }

    /// Waits up to `timeout` for the job to end; true when it has (front ends poll progress
    /// with this instead of sleeping, so a short job is not held up by the poll interval).
    pub fn wait_for(&self, timeout: Duration) -> bool {
        let (m, cv) = &self.shared.ended;
        let g = crate::lock::lock(m);
        let (g, _) = cv
            .wait_timeout_while(g, timeout, |ended| !*ended)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *g || self.is_finished()
    }

    /// True once the job thread has ended (then [`JobHandle::wait`] does not block).
    pub fn is_finished(&self) -> bool {
        self.thread
            .as_ref()
            .map_or(true, std::thread::JoinHandle::is_finished)
    }

    /// Waits for the end: the outcome, or the error that ended the job (leases released and
    /// resync unfrozen already).
    pub fn wait(mut self) -> Result<Outcome, WipeError> {
        match self.thread.take().map(std::thread::JoinHandle::join) {
            Some(Ok(r)) => r,
            _ => Err(panicked()),
        }
    }
}

impl Job {
    /// A job for `plan` on the real device (opened at start with the plan's flags), with no
    /// leases (see [`Job::with_leases`]). `root` locates `/sys` for the resync control.
    pub fn new(plan: Plan, root: Root) -> Self {
        Job {
            plan,
            root,
            sink: None,
            leases: Arc::new(NoLeases),
            on_progress: None,
            on_complete: None,
            cancel: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The job's cancel flag: storing `true` has the effect of [`JobHandle::cancel`] (usable
    /// from the progress callback or a signal handler, before or after start).
    pub fn cancel_token(&self) -> Arc<AtomicBool> {
        self.cancel.clone()
    }

    /// Runs on `sink` instead of opening the device (tests: files, memory).
    pub fn with_sink(mut self, sink: Arc<dyn Sink>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// Takes the plan's leases from `leases`.
    pub fn with_leases(mut self, leases: Arc<dyn LeaseProvider>) -> Self {
        self.leases = leases;
        self
    }

    /// Calls `f` (from a worker thread) after every completed request and at phase changes.
    pub fn on_progress(mut self, f: impl FnMut(&Progress) + Send + 'static) -> Self {
        self.on_progress = Some(Box::new(f));
        self
    }

    /// Calls `f` once on the job thread when the job has ended (after leases are released and
    /// the resync is unfrozen) with its result: what a D-Bus `Completed(b success, s message)`
    /// signal is emitted from.
    pub fn on_complete(
        mut self,
        f: impl FnOnce(&Result<Outcome, WipeError>) + Send + 'static,
    ) -> Self {
        self.on_complete = Some(Box::new(f));
        self
    }

    /// Starts the job on its own thread.
    pub fn start(self) -> JobHandle {
        let shared = Arc::new(Shared::new(self.plan.total_bytes(), self.cancel.clone()));
        let s2 = shared.clone();
        let thread = std::thread::Builder::new()
            .name("mdpilot-wipe".into())
            .spawn(move || self.run_shared(&s2))
            .ok();
        if thread.is_none() {
            shared.set_done();
        }
        JobHandle { shared, thread }
    }

    /// Runs the job on the calling thread; `cancel` is polled between blocks.
    pub fn run(self, cancel: &AtomicBool) -> Result<Outcome, WipeError> {
        let shared = Arc::new(Shared::new(self.plan.total_bytes(), self.cancel.clone()));
        // A cancel set before the call must be seen before the first block, not raced by a
        // small job that finishes before the loop below first polls `cancel`.
        if cancel.load(Ordering::SeqCst) {
            shared.cancel.store(true, Ordering::SeqCst);
        }
        std::thread::scope(|s| {
            let sh = shared.clone();
            let h = s.spawn(move || self.run_shared(&sh));
            let (m, cv) = &shared.ended;
            let mut ended = crate::lock::lock(m);
            while !*ended && !h.is_finished() {
                if cancel.load(Ordering::SeqCst) {
                    shared.cancel.store(true, Ordering::SeqCst);
                }
                ended = cv
                    .wait_timeout(ended, Duration::from_millis(20))
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0;
            }
            drop(ended);
            h.join().unwrap_or_else(|_| Err(panicked()))
        })
    }

    fn run_shared(mut self, shared: &Shared) -> Result<Outcome, WipeError> {
        let mut r = self.run_inner(shared);
        // The device is closed now: udev's re-probe is not blocked by our exclusive open.
        if self.sink.is_none() {
            match rescan::send_change(&self.root, &self.plan.name) {
                Ok(()) => {
                    if let Ok(o) = r.as_mut() {
                        o.uevent_sent = true;
                    }
                }
                Err(e) => tracing::warn!("{}: udev change event: {e}", self.plan.name),
            }
        }
        shared.set_phase(Phase::Done);
        let snap = shared.snapshot();
        if let Some(f) = self.on_progress.as_mut() {
            f(&snap);
        }
        if let Some(f) = self.on_complete.take() {
            f(&r);
        }
        let (m, cv) = &shared.ended;
        *crate::lock::lock(m) = true;
        cv.notify_all();
        r
    }

    fn run_inner(&mut self, shared: &Shared) -> Result<Outcome, WipeError> {
        let (sink, plan) = match self.sink.clone() {
            Some(s) => (s, self.plan.clone()),
            None => open_device(&self.plan)?,
        };
        // A resumed job first reads back some of what it says is already there.
        check_resumed(&plan, &*sink)?;
        let sources = Sources::open(&plan.op)?;
        let held = self.take_leases(&plan)?;
        let resync = self.freeze_target(&plan, &held)?;
        let (ckpt, skip_allowed) = match self.checkpointer(&plan, &*sink) {
            Ok(c) => c,
            Err(e) => {
                self.undo_start(&held, resync.as_deref());
                return Err(e);
            }
        };
        let result = self.run_with_fallback(&plan, &*sink, shared, &sources, ckpt.as_ref());
        let result = self.end_resync(&plan, result, resync.as_deref(), skip_allowed);
        if let (Some(cp), Some(ck)) = (&plan.checkpoint, &ckpt) {
            match &result {
                Err(WipeError::Cancelled { .. })
                    if shared.keep_checkpoint.load(Ordering::SeqCst) =>
                {
                    ck.final_save();
                }
                Ok(_) | Err(WipeError::Cancelled { .. }) => {
                    if let Err(e) = checkpoint::remove(&cp.path) {
                        tracing::warn!("{}: cannot remove: {e}", cp.path.display());
                    }
                }
                Err(_) => ck.final_save(),
            }
        }
        self.release(&held);
        result
    }

    /// Acquires the plan's leases in order; on a refusal releases those taken and fails.
    fn take_leases(&self, plan: &Plan) -> Result<Vec<String>, WipeError> {
        let mut held = Vec::new();
        for l in &plan.leases {
            if let Err(message) = self.leases.acquire(l.clone()) {
                self.release(&held);
                return Err(WipeError::Lease {
                    device: plan.device.clone(),
                    holder: l.holder.clone(),
                    message: crate::error::error_chain(&message),
                });
            }
            held.push(l.holder.clone());
        }
        Ok(held)
    }

    /// Freezes the target's resync where the plan says so: the array this job froze, `None`
    /// when there is nothing to freeze or someone else froze it before us (wipe, but neither
    /// skip nor unfreeze). On failure releases `held`.
    fn freeze_target(&self, plan: &Plan, held: &[String]) -> Result<Option<String>, WipeError> {
        let ResyncAction::FreezeAndSkip { array } = &plan.resync else {
            return Ok(None);
        };
        match self.leases.freeze(&self.root, array) {
            Ok(true) => Ok(Some(array.clone())),
            Ok(false) => Ok(None),
            Err(e) => {
                self.release(held);
                Err(e)
            }
        }
    }

    /// The phases, again by writes when `zero`'s BLKZEROOUT is refused by the driver before the
    /// first byte; then the partition re-read and the outcome's facts.
    fn run_with_fallback(
        &mut self,
        plan: &Plan,
        sink: &dyn Sink,
        shared: &Shared,
        sources: &Sources,
        ckpt: Option<&Checkpointer<'_>>,
    ) -> Result<Outcome, WipeError> {
        let on_progress = Mutex::new(self.on_progress.take());
        let mut result = run_phases(plan, sink, shared, sources, &on_progress, ckpt);
        if let Err(WipeError::Unsupported {
            op: "zeroout",
            detail,
            ..
        }) = &result
        {
            // `zero` chose BLKZEROOUT but the driver refuses it: same result by writes.
            if plan.method == Method::Zero && shared.done.load(Ordering::SeqCst) == 0 {
                let p2 = plan.zeroout_fallback(detail);
                tracing::info!(
                    "{}: {}",
                    p2.device.display(),
                    p2.reasons.last().map_or("", |r| r)
                );
                result = run_phases(&p2, sink, shared, sources, &on_progress, ckpt);
            }
        }
        self.on_progress = on_progress.into_inner().unwrap_or_else(|e| e.into_inner());
        if let Ok(o) = result.as_mut() {
            o.partitions_reread = rescan::reread(sink, &plan.name, plan.reread_partitions);
            o.resumed_bytes = plan.checkpoint.as_ref().map_or(0, |c| c.resumed_bytes);
            o.offloaded = !plan.offload.is_empty();
        }
        result
    }

    /// Ends the freeze of `resync` (the array this job froze): skipped (`none` ->
    /// `resync_start`) after a whole wipe when allowed, else unfrozen; never left frozen.
    fn end_resync(
        &self,
        plan: &Plan,
        result: Result<Outcome, WipeError>,
        resync: Option<&str>,
        skip_allowed: bool,
    ) -> Result<Outcome, WipeError> {
        match (result, resync) {
            (Ok(mut o), Some(array)) if skip_allowed => {
                match self.leases.unfreeze(&self.root, array, true) {
                    Ok(()) => {
                        o.resync_skipped = true;
                        Ok(o)
                    }
                    Err(e) => {
                        // Never leave the array frozen.
                        let _ = self.leases.unfreeze(&self.root, array, false);
                        Err(e)
                    }
                }
            }
            (Ok(o), Some(array)) => {
                tracing::info!(
                    "{}: the resync moved while the wipe was interrupted: resync resumes (idle)",
                    plan.device.display()
                );
                self.leases.unfreeze(&self.root, array, false).map(|()| o)
            }
            (Ok(o), None) => Ok(o),
            (Err(e), Some(array)) => {
                if let Err(u) = self.leases.unfreeze(&self.root, array, false) {
                    tracing::error!("{u}");
                }
                Err(e)
            }
            (Err(e), None) => Err(e),
        }
    }

    /// The plan's checkpointer (saved once now, before the first write), and whether the
    /// resync may be skipped at the end: always for a fresh job; for a resumed freeze-and-skip
    /// job only if the resync position recorded by the first run is still the array's (no one
    /// unfroze it in between). A checkpoint that cannot be saved ends a service job here, before
    /// the first write ([`WipeError::Checkpoint`]: its client and the next service start count
    /// on resuming it); a CLI job goes on with a warning (only a resume would start again at 0).
    fn checkpointer<'s>(
        &self,
        plan: &Plan,
        sink: &'s dyn Sink,
    ) -> Result<(Option<Checkpointer<'s>>, bool), WipeError> {
        let mark_now = match &plan.resync {
            ResyncAction::FreezeAndSkip { array } => Some((
                array.clone(),
                super::resync::ResyncControl::new(&self.root, array).mark(),
            )),
            ResyncAction::Leave => None,
        };
        let Some(cp) = &plan.checkpoint else {
            return Ok((None, true));
        };
        let skip_allowed = match (&cp.resync_mark, &mark_now) {
            (Some(old), Some((_, now))) => old == now,
            (None, _) => cp.resumed_bytes == 0,
            (Some(_), None) => true,
        };
        let start = plan.ranges.first().map_or_else(
            || cp.full_ranges.last().map_or(0, |r| r.offset + r.len),
            |r| r.offset,
        );
        let ck = Checkpoint {
            version: 1,
            device: plan.device.clone(),
            name: plan.name.clone(),
            identity: plan.identity.clone(),
            method: plan.method.name().into(),
            seed_hex: match &plan.op {
                Op::Write(Data::Random(s)) => Some(checkpoint::seed_hex(s)),
                _ => None,
            },
            verify: plan.verify,
            ranges: cp.full_ranges.clone(),
            durable_offset: start,
            resync: mark_now.map(|(array, now)| ResyncRecord {
                array,
                mark: cp.resync_mark.clone().unwrap_or(now),
            }),
            started_by: cp.started_by,
            head: checkpoint::head_digest(&plan.op, &cp.full_ranges),
        };
        let c = Checkpointer::new(cp.path.clone(), sink, ck);
        #[cfg(feature = "failpoints")]
        let c = c.hold_cancel(self.cancel.clone());
        match c.save_now() {
            Ok(()) => {}
            Err(source) if matches!(cp.started_by, StartedBy::Service { .. }) => {
                return Err(WipeError::Checkpoint {
                    device: plan.device.clone(),
                    path: cp.path.clone(),
                    source,
                });
            }
            Err(e) => tracing::warn!("{}: cannot save the checkpoint: {e}", cp.path.display()),
        }
        Ok((Some(c), skip_allowed))
    }

    /// Undoes the start when the job ends before its first write: unfreezes `array`'s resync
    /// (without marking it in sync) and releases the `held` leases.
    fn undo_start(&self, held: &[String], array: Option<&str>) {
        if let Some(a) = array {
            if let Err(u) = self.leases.unfreeze(&self.root, a, false) {
                tracing::error!("{u}");
            }
        }
        self.release(held);
    }

    fn release(&self, held: &[String]) {
        for h in held {
            if let Err(m) = self.leases.release(h) {
                tracing::warn!("releasing lease {h}: {}", crate::error::error_chain(&m));
            }
        }
    }
}

/// Opens the plan's device with its flags; falls back to buffered writes when O_DIRECT is
/// refused (EINVAL). The open device must be the probed one (`plan.dev`, `plan.size_bytes`):
/// [`WipeError::Changed`] otherwise, before anything is written.
fn open_device(plan: &Plan) -> Result<(Arc<dyn Sink>, Plan), WipeError> {
    let open = |p: &Plan| {
        let mut flags = libc::O_CLOEXEC;
        if p.open.exclusive {
            flags |= libc::O_EXCL;
        }
        if p.open.direct {
            flags |= libc::O_DIRECT;
        }
        OpenOptions::new()
            .write(true)
            .read(p.open.read)
            .custom_flags(flags)
            .open(&p.device)
    };
    // The node may have been replaced since the probe: the open file must be the probed device.
    let want = Bound {
        dev: plan.dev,
        size_bytes: plan.size_bytes,
    };
    match open(plan) {
        Ok(file) => {
            check_opened(&plan.device, &file, want)?;
            Ok((
                Arc::new(BlockDevice {
                    file,
                    direct: plan.open.direct,
                }),
                plan.clone(),
            ))
        }
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) && plan.open.direct => {
            let p = plan.buffered_fallback();
            let file = open(&p).map_err(|source| WipeError::Open {
                path: p.device.clone(),
                source,
            })?;
            check_opened(&p.device, &file, want)?;
            Ok((
                Arc::new(BlockDevice {
                    file,
                    direct: false,
                }),
                p,
            ))
        }
        Err(source) => Err(WipeError::Open {
            path: plan.device.clone(),
            source,
        }),
    }
}

/// The phases of a job on an open sink: wipe (every request durable), flush, and verify when
/// the plan asks for it.
///
/// Errors: the first failure of the wipe phase ([`WipeError::Io`] with the lowest offset,
/// [`WipeError::Unsupported`], [`WipeError::SourceEnded`]), [`WipeError::Cancelled`], a failed
/// flush, or the verify phase's errors.
fn run_phases(
    plan: &Plan,
    sink: &dyn Sink,
    shared: &Shared,
    sources: &Sources,
    on_progress: &Mutex<Option<ProgressFn>>,
    ckpt: Option<&Checkpointer<'_>>,
) -> Result<Outcome, WipeError> {
    let dev = plan.device.as_path();
    shared.set_phase(Phase::Wipe);
    notify(on_progress, shared);
    let t0 = Instant::now();
    if plan.offload.is_empty() {
        let pool =
            Pool::new(plan, sink, shared, on_progress, plan.request_bytes()).with_checkpoint(ckpt);
        wipe_all(&pool, sources)?;
    } else {
        offload::run(plan, sink, shared, on_progress)?;
    }
    let done = shared.done.load(Ordering::SeqCst);
    if shared.cancelled() && done < shared.total {
        return Err(WipeError::Cancelled {
            device: dev.to_path_buf(),
            done_bytes: done,
            total_bytes: shared.total,
        });
    }
    shared.set_phase(Phase::Flush);
    notify(on_progress, shared);
    sink.flush()
        .map_err(|e| WipeError::io(dev, "flush", 0, e))?;
    let wipe_s = t0.elapsed().as_secs_f64();
    let mut outcome = Outcome {
        bytes: done,
        wipe_s,
        rate_bytes_per_s: if wipe_s > 0.0 {
            done as f64 / wipe_s
        } else {
            0.0
        },
        verified: false,
        resync_skipped: false,
        partitions_reread: false,
        uevent_sent: false,
        resumed_bytes: 0,
        offloaded: false,
    };
    if plan.verify {
        shared.set_phase(Phase::Verify);
        notify(on_progress, shared);
        // A resumed job reads back the whole wipe, not only what this run wrote.
        let whole = match &plan.checkpoint {
            Some(c) => Plan {
                ranges: c.full_ranges.clone(),
                ..plan.clone()
            },
            None => plan.clone(),
        };
        verify(&whole, sink, shared, on_progress)?;
        outcome.verified = true;
    }
    Ok(outcome)
}
