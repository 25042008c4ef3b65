//! The engine: runs a [`Plan`] on a [`Sink`] with `queue_depth` worker threads.
//!
//! Honest progress: a block counts only when its request completed — an O_DIRECT `pwrite`
//! returned, a `BLKZEROOUT`/`BLKDISCARD` returned, or (buffered fallback) `sync_file_range`
//! waited for its writeback — never when merely queued. The job flushes (fdatasync, a cache
//! flush) before it reports success. Memory is bounded by `queue_depth * block_bytes`.
//!
//! [`Job`] is what front ends drive: the CLI polls [`JobHandle::progress`], a D-Bus Job object
//! can do the same (Bytes, BytesDone, Rate, ExpectedEndTime) or take the [`Job::on_progress`]
//! callback, call [`JobHandle::cancel`] for `Cancel`, and emit `Completed` from
//! [`JobHandle::wait`]'s result.

use super::buffer::AlignedBuf;
use super::error::WipeError;
use super::leases::{LeaseProvider, NoLeases};
use super::planner::{Data, Method, Op, Plan, Range, ResyncAction};
use super::resync::ResyncControl;
use super::sink::{BlockDevice, Sink};
use super::stream;
use crate::host::Root;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the job is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Not started yet (opening, leases, freezing the resync).
    Starting,
    /// Writing / zeroing / discarding.
    Wipe,
    /// Flushing the device cache.
    Flush,
    /// Reading back (`--verify`).
    Verify,
    /// Finished (success, failure or cancel).
    Done,
}

/// A snapshot of a job's progress.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Progress {
    /// Bytes durably written so far.
    pub done_bytes: u64,
    /// Bytes the job writes in all.
    pub total_bytes: u64,
    /// Bytes read back and checked (`--verify`).
    pub verified_bytes: u64,
    /// Average rate of the current phase since it started, bytes per second; during `flush`
    /// and `done` the wipe phase's last rate (verify's, after a verify).
    pub rate_bytes_per_s: f64,
    /// Seconds since the job started.
    pub elapsed_s: f64,
    /// Current phase.
    pub phase: Phase,
}

impl Progress {
    /// Fraction done, 0..=1 (1 for an empty job).
    pub fn fraction(&self) -> f64 {
        if self.total_bytes == 0 {
            1.0
        } else {
            self.done_bytes as f64 / self.total_bytes as f64
        }
    }

    /// Estimated seconds left in the current phase at its rate: the wipe's remaining bytes in
    /// `wipe`, the read-back's in `verify`; `None` before a rate is known, during `starting`
    /// and `flush` (a cache flush has no byte count), and once `done` (nothing is expected).
    pub fn eta_s(&self) -> Option<f64> {
        let left = match self.phase {
            Phase::Wipe => self.total_bytes.saturating_sub(self.done_bytes),
            Phase::Verify => self.total_bytes.saturating_sub(self.verified_bytes),
            Phase::Starting | Phase::Flush | Phase::Done => return None,
        };
        (self.rate_bytes_per_s > 0.0).then(|| left as f64 / self.rate_bytes_per_s)
    }
}

/// A successful job's summary.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Outcome {
    /// Bytes written (durable).
    pub bytes: u64,
    /// Seconds the wipe phase took (without verify).
    pub wipe_s: f64,
    /// Average wipe rate, bytes per second.
    pub rate_bytes_per_s: f64,
    /// Whether the data was read back and matched.
    pub verified: bool,
    /// Whether the array's resync was skipped (`resync_start` set to `none`).
    pub resync_skipped: bool,
}

struct Shared {
    done: AtomicU64,
    verified: AtomicU64,
    total: u64,
    phase: AtomicU8,
    cancel: Arc<AtomicBool>,
    started: Instant,
    phase_started: Mutex<Instant>,
    /// The rate of the last counted phase (wipe or verify) when it ended, as f64 bits: shown
    /// during `flush` and `done` instead of 0.
    last_rate: AtomicU64,
    /// Set (and notified) when the job thread is about to end.
    ended: (Mutex<bool>, Condvar),
}

impl Shared {
    fn new(total: u64, cancel: Arc<AtomicBool>) -> Self {
        Shared {
            done: AtomicU64::new(0),
            verified: AtomicU64::new(0),
            total,
            phase: AtomicU8::new(Phase::Starting as u8),
            cancel,
            started: Instant::now(),
            phase_started: Mutex::new(Instant::now()),
            last_rate: AtomicU64::new(0f64.to_bits()),
            ended: (Mutex::new(false), Condvar::new()),
        }
    }

    fn set_phase(&self, p: Phase) {
        let before = self.snapshot();
        if matches!(before.phase, Phase::Wipe | Phase::Verify) && before.rate_bytes_per_s > 0.0 {
            self.last_rate
                .store(before.rate_bytes_per_s.to_bits(), Ordering::SeqCst);
        }
        *self.phase_started.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        self.phase.store(p as u8, Ordering::SeqCst);
    }

    fn snapshot(&self) -> Progress {
        let phase = match self.phase.load(Ordering::SeqCst) {
            0 => Phase::Starting,
            1 => Phase::Wipe,
            2 => Phase::Flush,
            3 => Phase::Verify,
            _ => Phase::Done,
        };
        let done = self.done.load(Ordering::SeqCst);
        let verified = self.verified.load(Ordering::SeqCst);
        let since = self
            .phase_started
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed()
            .as_secs_f64();
        let rate = match phase {
            Phase::Wipe | Phase::Verify if since > 0.0 => {
                let counted = if phase == Phase::Wipe { done } else { verified };
                counted as f64 / since
            }
            Phase::Flush | Phase::Done => f64::from_bits(self.last_rate.load(Ordering::SeqCst)),
            _ => 0.0,
        };
        Progress {
            done_bytes: done,
            total_bytes: self.total,
            verified_bytes: verified,
            rate_bytes_per_s: rate,
            elapsed_s: self.started.elapsed().as_secs_f64(),
            phase,
        }
    }
}

type ProgressFn = Box<dyn FnMut(&Progress) + Send>;
type CompleteFn = Box<dyn FnOnce(&Result<Outcome, WipeError>) + Send>;

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

    /// Waits up to `timeout` for the job to end; true when it has (front ends poll progress
    /// with this instead of sleeping, so a short job is not held up by the poll interval).
    pub fn wait_for(&self, timeout: Duration) -> bool {
        let (m, cv) = &self.shared.ended;
        let g = m.lock().unwrap_or_else(|e| e.into_inner());
        let (g, _) = cv
            .wait_timeout_while(g, timeout, |ended| !*ended)
            .unwrap_or_else(|e| e.into_inner());
        *g || self.is_finished()
    }

    /// True once the job thread has ended (then [`JobHandle::wait`] does not block).
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().map_or(true, |t| t.is_finished())
    }

    /// Waits for the end: the outcome, or the error that ended the job (leases released and
    /// resync unfrozen already).
    pub fn wait(mut self) -> Result<Outcome, WipeError> {
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            _ => Err(WipeError::Usage("wipe job thread panicked".into())),
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

    /// The plan this job runs.
    pub fn plan(&self) -> &Plan {
        &self.plan
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
            shared.phase.store(Phase::Done as u8, Ordering::SeqCst);
        }
        JobHandle { shared, thread }
    }

    /// Runs the job on the calling thread; `cancel` is polled between blocks.
    pub fn run(self, cancel: &AtomicBool) -> Result<Outcome, WipeError> {
        let shared = Arc::new(Shared::new(self.plan.total_bytes(), self.cancel.clone()));
        std::thread::scope(|s| {
            let sh = shared.clone();
            let h = s.spawn(move || self.run_shared(&sh));
            let (m, cv) = &shared.ended;
            let mut ended = m.lock().unwrap_or_else(|e| e.into_inner());
            while !*ended && !h.is_finished() {
                if cancel.load(Ordering::SeqCst) {
                    shared.cancel.store(true, Ordering::SeqCst);
                }
                ended = cv
                    .wait_timeout(ended, Duration::from_millis(20))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            drop(ended);
            h.join()
                .unwrap_or_else(|_| Err(WipeError::Usage("wipe job thread panicked".into())))
        })
    }

    fn run_shared(mut self, shared: &Shared) -> Result<Outcome, WipeError> {
        let r = self.run_inner(shared);
        shared.set_phase(Phase::Done);
        let snap = shared.snapshot();
        if let Some(f) = self.on_progress.as_mut() {
            f(&snap);
        }
        if let Some(f) = self.on_complete.take() {
            f(&r);
        }
        let (m, cv) = &shared.ended;
        *m.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
        r
    }

    fn run_inner(&mut self, shared: &Shared) -> Result<Outcome, WipeError> {
        let (sink, plan) = match self.sink.clone() {
            Some(s) => (s, self.plan.clone()),
            None => open_device(&self.plan)?,
        };
        let sources = Sources::open(&plan.op)?;
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
        let resync = match &plan.resync {
            ResyncAction::FreezeAndSkip { array } => {
                let c = ResyncControl::new(&self.root, array);
                if let Err(e) = c.freeze() {
                    self.release(&held);
                    return Err(e);
                }
                Some(c)
            }
            ResyncAction::Leave => None,
        };
        let on_progress = Mutex::new(self.on_progress.take());
        let mut result = run_phases(&plan, &*sink, shared, &sources, &on_progress);
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
                result = run_phases(&p2, &*sink, shared, &sources, &on_progress);
            }
        }
        self.on_progress = on_progress.into_inner().unwrap_or_else(|e| e.into_inner());
        let result = match (result, &resync) {
            (Ok(mut o), Some(c)) => match c.mark_in_sync() {
                Ok(()) => {
                    o.resync_skipped = true;
                    Ok(o)
                }
                Err(e) => {
                    // Never leave the array frozen.
                    let _ = c.unfreeze();
                    Err(e)
                }
            },
            (Ok(o), None) => Ok(o),
            (Err(e), Some(c)) => {
                if let Err(u) = c.unfreeze() {
                    tracing::error!("{u}");
                }
                Err(e)
            }
            (Err(e), None) => Err(e),
        };
        self.release(&held);
        result
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
/// refused (EINVAL).
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
    match open(plan) {
        Ok(file) => Ok((
            Arc::new(BlockDevice {
                file,
                direct: plan.open.direct,
            }),
            plan.clone(),
        )),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) && plan.open.direct => {
            let p = plan.buffered_fallback();
            let file = open(&p).map_err(|source| WipeError::Open {
                path: p.device.clone(),
                source,
            })?;
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

/// The requests of a plan: each range cut into `block` pieces, addressed by index without
/// materialising the list (a 3 TB disk is 750k requests).
struct Units<'a> {
    ranges: &'a [Range],
    /// Number of units before range i.
    starts: Vec<u64>,
    block: u64,
    count: u64,
}

impl<'a> Units<'a> {
    fn new(ranges: &'a [Range], block: u64) -> Self {
        let mut starts = Vec::with_capacity(ranges.len());
        let mut n = 0;
        for r in ranges {
            starts.push(n);
            n += r.len.div_ceil(block);
        }
        Units {
            ranges,
            starts,
            block,
            count: n,
        }
    }

    fn get(&self, idx: u64) -> Option<(u64, u64)> {
        if idx >= self.count {
            return None;
        }
        let i = self.starts.partition_point(|&s| s <= idx) - 1;
        let r = self.ranges[i];
        let k = idx - self.starts[i];
        let off = r.offset + k * self.block;
        Some((off, self.block.min(r.offset + r.len - off)))
    }
}

fn fill_pattern(content: &[u8], offset: u64, buf: &mut [u8]) {
    if content.is_empty() {
        buf.fill(0);
        return;
    }
    let mut pos = (offset % content.len() as u64) as usize;
    let mut i = 0;
    while i < buf.len() {
        let n = (content.len() - pos).min(buf.len() - i);
        buf[i..i + n].copy_from_slice(&content[pos..pos + n]);
        i += n;
        pos = 0;
    }
}

/// Fills `buf` with the bytes of a file of `len` bytes repeated from device offset 0, starting
/// at device `offset`: `pread` at `offset % len`, wrapping at the file's end. Thread-safe (no
/// shared file position); memory is only `buf`.
fn fill_repeat(file: &File, len: u64, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    if len == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "data file is empty",
        ));
    }
    let mut pos = offset % len;
    let mut i = 0;
    while i < buf.len() {
        let want = ((len - pos) as usize).min(buf.len() - i);
        let n = file.read_at(&mut buf[i..i + want], pos)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("data file shrank below {len} bytes during the job"),
            ));
        }
        i += n;
        pos = (pos + n as u64) % len;
    }
    Ok(())
}

/// Reads up to `buf.len()` bytes from a stream; fewer only at its end.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The open data sources of a plan's operation: a streamed source (read in device order under
/// a lock, with the count of bytes read so far) and a repeated file (read with `pread`).
struct Sources {
    stream: Option<(std::path::PathBuf, Mutex<(File, u64)>)>,
    repeat: Option<(File, u64)>,
}

impl Sources {
    fn open(op: &Op) -> Result<Sources, WipeError> {
        let open = |p: &Path| {
            File::open(p).map_err(|source| WipeError::Open {
                path: p.to_path_buf(),
                source,
            })
        };
        Ok(match op {
            Op::Write(Data::Stream(p)) => Sources {
                stream: Some((p.clone(), Mutex::new((open(p)?, 0)))),
                repeat: None,
            },
            Op::Write(Data::RepeatFile { path, len }) => Sources {
                stream: None,
                repeat: Some((open(path)?, *len)),
            },
            _ => Sources {
                stream: None,
                repeat: None,
            },
        })
    }
}

/// Expected content at `offset` for `op`, into `buf` (verify).
fn expected(op: &Op, src: &Sources, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
    match (op, &src.repeat) {
        (Op::Write(Data::Random(seed)), _) => stream::fill(seed, offset, buf),
        (Op::Write(Data::Pattern(c)), _) => fill_pattern(c, offset, buf),
        (Op::Write(Data::RepeatFile { .. }), Some((f, len))) => {
            return fill_repeat(f, *len, offset, buf)
        }
        _ => buf.fill(0),
    }
    Ok(())
}

struct Failure {
    err: Mutex<Option<WipeError>>,
    failed: AtomicBool,
}

impl Failure {
    fn set(&self, e: WipeError) {
        let mut g = self.err.lock().unwrap_or_else(|e| e.into_inner());
        // Keep the lowest failing offset: that is where the device stopped being wiped.
        let replace = match (&*g, &e) {
            (None, _) => true,
            (Some(WipeError::Io { offset: a, .. }), WipeError::Io { offset: b, .. }) => b < a,
            _ => false,
        };
        if replace {
            *g = Some(e);
        }
        self.failed.store(true, Ordering::SeqCst);
    }
}

fn notify(f: &Mutex<Option<ProgressFn>>, shared: &Shared) {
    if let Some(cb) = f.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        cb(&shared.snapshot());
    }
}

fn run_phases(
    plan: &Plan,
    sink: &dyn Sink,
    shared: &Shared,
    sources: &Sources,
    on_progress: &Mutex<Option<ProgressFn>>,
) -> Result<Outcome, WipeError> {
    let dev = plan.device.as_path();
    let units = Units::new(&plan.ranges, plan.request_bytes().max(1));
    let next = AtomicU64::new(0);
    let fail = Failure {
        err: Mutex::new(None),
        failed: AtomicBool::new(false),
    };
    shared.set_phase(Phase::Wipe);
    notify(on_progress, shared);
    let t0 = Instant::now();
    let workers = plan.queue_depth.max(1);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                let mut buf = match plan.op {
                    Op::Write(_) => AlignedBuf::zeroed(plan.block_bytes as usize),
                    _ => AlignedBuf::zeroed(0),
                };
                loop {
                    if shared.cancel.load(Ordering::SeqCst) || fail.failed.load(Ordering::SeqCst) {
                        return;
                    }
                    // A streamed source must be read in device order: claim and read together.
                    let mut guard = sources
                        .stream
                        .as_ref()
                        .map(|(_, m)| m.lock().unwrap_or_else(|e| e.into_inner()));
                    let idx = next.fetch_add(1, Ordering::SeqCst);
                    let Some((off, len)) = units.get(idx) else {
                        return;
                    };
                    let r = match &plan.op {
                        Op::ZeroOut => sink.zeroout(off, len).map_err(|e| ("zeroout", e)),
                        Op::Discard => sink.discard(off, len).map_err(|e| ("discard", e)),
                        Op::Write(data) => {
                            let b = &mut buf[..len as usize];
                            let mut r = Ok(());
                            match data {
                                Data::Zero => {}
                                Data::Random(seed) => stream::fill(seed, off, b),
                                Data::Pattern(c) => fill_pattern(c, off, b),
                                Data::RepeatFile { .. } => {
                                    if let Some((f, flen)) = &sources.repeat {
                                        r = fill_repeat(f, *flen, off, b)
                                            .map_err(|e| ("read data file", e));
                                    }
                                }
                                Data::Stream(path) => {
                                    if let Some(g) = guard.as_mut() {
                                        let (file, read) = &mut **g;
                                        match read_full(file, b) {
                                            Ok(n) => {
                                                *read += n as u64;
                                                if n < b.len() {
                                                    // Not an OS error: the source is shorter
                                                    // than the device.
                                                    fail.set(WipeError::SourceEnded {
                                                        source_path: path.clone(),
                                                        source_bytes: *read,
                                                        device: dev.to_path_buf(),
                                                        device_bytes: plan.size_bytes,
                                                    });
                                                    return;
                                                }
                                            }
                                            Err(e) => r = Err(("read data source", e)),
                                        }
                                    }
                                }
                            }
                            drop(guard.take());
                            r.and_then(|()| sink.write_at(b, off).map_err(|e| ("write", e)))
                                .and_then(|()| sink.settle(off, len).map_err(|e| ("write", e)))
                        }
                    };
                    drop(guard);
                    match r {
                        Ok(()) => {
                            shared.done.fetch_add(len, Ordering::SeqCst);
                            notify(on_progress, shared);
                        }
                        Err((op, e)) => {
                            let unsupported = matches!(
                                e.raw_os_error(),
                                Some(libc::EOPNOTSUPP) | Some(libc::ENOTTY)
                            );
                            let err = if unsupported && !matches!(plan.op, Op::Write(_)) {
                                WipeError::Unsupported {
                                    device: dev.to_path_buf(),
                                    op,
                                    detail: e.to_string(),
                                }
                            } else {
                                WipeError::io(dev, op, off, e)
                            };
                            fail.set(err);
                            return;
                        }
                    }
                }
            });
        }
    });
    if let Some(e) = fail.err.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    let done = shared.done.load(Ordering::SeqCst);
    if shared.cancel.load(Ordering::SeqCst) && done < shared.total {
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
    };
    if plan.verify {
        shared.set_phase(Phase::Verify);
        notify(on_progress, shared);
        let reads = Units::new(&plan.ranges, plan.block_bytes.max(1));
        verify(plan, sink, shared, &reads, on_progress)?;
        outcome.verified = true;
    }
    Ok(outcome)
}

fn verify(
    plan: &Plan,
    sink: &dyn Sink,
    shared: &Shared,
    units: &Units<'_>,
    on_progress: &Mutex<Option<ProgressFn>>,
) -> Result<(), WipeError> {
    let dev: &Path = &plan.device;
    // Only a repeated file is read again; a stream cannot be verified (the planner refuses).
    let sources = match &plan.op {
        Op::Write(Data::RepeatFile { .. }) => Sources::open(&plan.op)?,
        _ => Sources {
            stream: None,
            repeat: None,
        },
    };
    let next = AtomicU64::new(0);
    let mismatch = AtomicU64::new(u64::MAX);
    let fail = Failure {
        err: Mutex::new(None),
        failed: AtomicBool::new(false),
    };
    std::thread::scope(|s| {
        for _ in 0..plan.queue_depth.max(1) {
            s.spawn(|| {
                let mut got = AlignedBuf::zeroed(plan.block_bytes as usize);
                let mut want = AlignedBuf::zeroed(plan.block_bytes as usize);
                loop {
                    if shared.cancel.load(Ordering::SeqCst) || fail.failed.load(Ordering::SeqCst) {
                        return;
                    }
                    let idx = next.fetch_add(1, Ordering::SeqCst);
                    let Some((off, len)) = units.get(idx) else {
                        return;
                    };
                    let g = &mut got[..len as usize];
                    if let Err(e) = sink.read_at(g, off) {
                        fail.set(WipeError::io(dev, "read", off, e));
                        return;
                    }
                    let w = &mut want[..len as usize];
                    if let Err(e) = expected(&plan.op, &sources, off, w) {
                        fail.set(WipeError::io(dev, "read data file", off, e));
                        return;
                    }
                    if g != w {
                        let i = g
                            .iter()
                            .zip(w.iter())
                            .position(|(a, b)| a != b)
                            .unwrap_or(0);
                        mismatch.fetch_min(off + i as u64, Ordering::SeqCst);
                    }
                    shared.verified.fetch_add(len, Ordering::SeqCst);
                    notify(on_progress, shared);
                }
            });
        }
    });
    if let Some(e) = fail.err.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    let m = mismatch.load(Ordering::SeqCst);
    if m != u64::MAX {
        return Err(WipeError::VerifyMismatch {
            device: dev.to_path_buf(),
            offset: m,
        });
    }
    if shared.cancel.load(Ordering::SeqCst) {
        return Err(WipeError::Cancelled {
            device: dev.to_path_buf(),
            done_bytes: shared.done.load(Ordering::SeqCst),
            total_bytes: shared.total,
        });
    }
    Ok(())
}

/// Reads back `plan`'s ranges from `sink` and compares them with what the plan writes; the
/// first mismatching offset is the error. Used by `--verify` (also exposed for tests).
pub fn verify_plan(plan: &Plan, sink: &dyn Sink) -> Result<(), WipeError> {
    let shared = Shared::new(plan.total_bytes(), Arc::new(AtomicBool::new(false)));
    let units = Units::new(&plan.ranges, plan.block_bytes.max(1));
    verify(plan, sink, &shared, &units, &Mutex::new(None))
}
