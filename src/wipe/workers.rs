//! The worker pool: `queue_depth` threads claim a plan's requests by index, so at most
//! `queue_depth` requests are in flight and memory stays at `queue_depth * block_bytes`.
//!
//! A request counts (its bytes are added to `Shared::done`) only when it completed: an
//! O_DIRECT `pwrite` returned, a `BLKZEROOUT`/`BLKDISCARD` returned, or (buffered fallback)
//! `sync_file_range` waited for its writeback. Workers stop between requests on cancel or on
//! the first failure; the failure with the lowest offset is the job's error (that is where the
//! device stopped being wiped).

use super::buffer::AlignedBuf;
use super::checkpoint::Checkpointer;
use super::error::WipeError;
use super::plan::{Op, Plan, Range};
use super::progress::{notify, ProgressFn, Shared};
use super::sink::Sink;
use super::source::{fill, FillError, Sources};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

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
    /// The requests of `ranges` cut into `block` bytes (the last one of a range may be shorter).
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

    /// Request `idx` as `(offset, len)` in bytes; `None` past the last one.
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

/// The first failure of a pool (the lowest offset among I/O errors).
struct Failure {
    err: Mutex<Option<WipeError>>,
    failed: AtomicBool,
}

impl Failure {
    fn set(&self, e: WipeError) {
        let mut g = crate::lock::lock(&self.err);
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

/// What the workers of one phase share: the plan, the sink, the job's counters, the progress
/// callback, the requests and the next unclaimed one, and the first failure.
pub(super) struct Pool<'a> {
    /// The plan being run.
    pub(super) plan: &'a Plan,
    /// Where it runs.
    pub(super) sink: &'a dyn Sink,
    /// The job's counters.
    pub(super) shared: &'a Shared,
    on_progress: &'a Mutex<Option<ProgressFn>>,
    units: Units<'a>,
    next: AtomicU64,
    fail: Failure,
    /// Told of every completed wipe request (resume checkpoints).
    checkpoint: Option<&'a Checkpointer<'a>>,
}

impl<'a> Pool<'a> {
    /// A pool over `plan`'s ranges cut into requests of `block` bytes.
    pub(super) fn new(
        plan: &'a Plan,
        sink: &'a dyn Sink,
        shared: &'a Shared,
        on_progress: &'a Mutex<Option<ProgressFn>>,
        block: u64,
    ) -> Self {
        Pool {
            plan,
            sink,
            shared,
            on_progress,
            units: Units::new(&plan.ranges, block.max(1)),
            next: AtomicU64::new(0),
            checkpoint: None,
            fail: Failure {
                err: Mutex::new(None),
                failed: AtomicBool::new(false),
            },
        }
    }

    /// Runs `worker` on `plan.queue_depth` threads (at least one) until each returns; then the
    /// first failure, if any.
    pub(super) fn run(&self, worker: impl Fn(&Pool<'a>) + Sync) -> Result<(), WipeError> {
        std::thread::scope(|s| {
            for _ in 0..self.plan.queue_depth.max(1) {
                s.spawn(|| worker(self));
            }
        });
        match crate::lock::lock(&self.fail.err).take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// True when workers must stop claiming requests: the job was cancelled or one failed.
    pub(super) fn stopped(&self) -> bool {
        self.shared.cancelled() || self.fail.failed.load(Ordering::SeqCst)
    }

    /// The same pool, telling `c` of every completed wipe request.
    pub(super) fn with_checkpoint(mut self, c: Option<&'a Checkpointer<'a>>) -> Self {
        self.checkpoint = c;
        self
    }

    /// Claims the next request, `(offset, len)` in bytes; `None` once all are claimed.
    pub(super) fn claim(&self) -> Option<(u64, u64)> {
        self.claim_indexed().map(|(_, o, l)| (o, l))
    }

    /// Claims the next request, `(index, offset, len)`: the index in the plan's request order.
    fn claim_indexed(&self) -> Option<(u64, u64, u64)> {
        let i = self.next.fetch_add(1, Ordering::SeqCst);
        self.units.get(i).map(|(o, l)| (i, o, l))
    }

    /// Records a failure; every worker stops before its next request.
    pub(super) fn fail(&self, e: WipeError) {
        self.fail.set(e);
    }

    /// Tells the progress callback (after a counted request or a phase change).
    pub(super) fn notify(&self) {
        notify(self.on_progress, self.shared);
    }
}

/// Runs the wipe phase of `pool.plan`: every request written, zeroed or discarded, or the first
/// failure (cancel is not an error here: the caller looks at the counters).
pub(super) fn wipe_all(pool: &Pool<'_>, sources: &Sources) -> Result<(), WipeError> {
    pool.run(|pool| wipe_worker(pool, sources))
}

/// One worker of the wipe phase.
fn wipe_worker(pool: &Pool<'_>, sources: &Sources) {
    let (plan, sink) = (pool.plan, pool.sink);
    let dev = plan.device.as_path();
    let mut buf = match plan.op {
        Op::Write(_) => AlignedBuf::zeroed(plan.block_bytes as usize),
        _ => AlignedBuf::zeroed(0),
    };
    while !pool.stopped() {
        // A streamed source must be read in device order: claim and read together.
        let mut guard = sources.stream.as_ref().map(|(_, m)| crate::lock::lock(m));
        let Some((idx, off, len)) = pool.claim_indexed() else {
            return;
        };
        let r = match &plan.op {
            Op::ZeroOut => sink.zeroout(off, len).map_err(|e| ("zeroout", e)),
            Op::Discard => sink.discard(off, len).map_err(|e| ("discard", e)),
            Op::Write(data) => {
                let b = &mut buf[..len as usize];
                match fill(data, sources, guard.as_deref_mut(), off, b) {
                    Err(FillError::Ended { source_bytes }) => {
                        pool.fail(WipeError::SourceEnded {
                            source_path: sources
                                .stream
                                .as_ref()
                                .map(|(p, _)| p.clone())
                                .unwrap_or_default(),
                            source_bytes,
                            device: dev.to_path_buf(),
                            device_bytes: plan.size_bytes,
                        });
                        return;
                    }
                    Err(FillError::Io(op, e)) => Err((op, e)),
                    Ok(()) => {
                        drop(guard.take());
                        sink.write_at(b, off)
                            .map_err(|e| ("write", e))
                            .and_then(|()| sink.settle(off, len).map_err(|e| ("write", e)))
                    }
                }
            }
        };
        drop(guard);
        match r {
            Ok(()) => {
                pool.shared.done.fetch_add(len, Ordering::SeqCst);
                if let Some(c) = pool.checkpoint {
                    c.completed(idx, off + len);
                }
                pool.notify();
            }
            Err((op, e)) => {
                let unsupported = matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOTTY));
                pool.fail(if unsupported && !matches!(plan.op, Op::Write(_)) {
                    WipeError::Unsupported {
                        device: dev.to_path_buf(),
                        op,
                        detail: e.to_string(),
                    }
                } else {
                    WipeError::io(dev, op, off, e)
                });
                return;
            }
        }
    }
}
