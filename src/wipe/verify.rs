//! `--verify`: read every range back (O_DIRECT where the device was opened so) and compare it
//! with what the plan writes, regenerated (`source::expected`); the first mismatching
//! offset is the error.

use super::buffer::AlignedBuf;
use super::error::WipeError;
use super::plan::{Data, Op, Plan};
use super::progress::{ProgressFn, Shared};
use super::sink::Sink;
use super::source::{expected, Sources};
use super::workers::Pool;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The verify phase of a job: reads of `block_bytes` on `queue_depth` threads, counted in
/// [`Shared::verified`].
///
/// Errors: [`WipeError::Io`] (`read`, `read data file`), [`WipeError::VerifyMismatch`] with the
/// lowest differing offset, [`WipeError::Cancelled`].
pub(super) fn verify(
    plan: &Plan,
    sink: &dyn Sink,
    shared: &Shared,
    on_progress: &Mutex<Option<ProgressFn>>,
) -> Result<(), WipeError> {
    let dev = plan.device.as_path();
    // Only a repeated file is read again; a stream cannot be verified (the planner refuses).
    let sources = match &plan.op {
        Op::Write(Data::RepeatFile { .. }) => Sources::open(&plan.op)?,
        _ => Sources::none(),
    };
    let mismatch = AtomicU64::new(u64::MAX);
    let pool = Pool::new(plan, sink, shared, on_progress, plan.block_bytes);
    pool.run(|pool| verify_worker(pool, &sources, &mismatch))?;
    let m = mismatch.load(Ordering::SeqCst);
    if m != u64::MAX {
        return Err(WipeError::VerifyMismatch {
            device: dev.to_path_buf(),
            offset: m,
        });
    }
    if shared.cancelled() {
        return Err(WipeError::Cancelled {
            device: dev.to_path_buf(),
            done_bytes: shared.done.load(Ordering::SeqCst),
            total_bytes: shared.total,
        });
    }
    Ok(())
}

/// One reader: compares each claimed block and lowers `mismatch` to its first differing byte.
fn verify_worker(pool: &Pool<'_>, sources: &Sources, mismatch: &AtomicU64) {
    let plan = pool.plan;
    let dev = plan.device.as_path();
    let mut got = AlignedBuf::zeroed(plan.block_bytes as usize);
    let mut want = AlignedBuf::zeroed(plan.block_bytes as usize);
    while !pool.stopped() {
        let Some((off, len)) = pool.claim() else {
            return;
        };
        let g = &mut got[..len as usize];
        if let Err(e) = pool.sink.read_at(g, off) {
            pool.fail(WipeError::io(dev, "read", off, e));
            return;
        }
        let w = &mut want[..len as usize];
        if let Err(e) = expected(&plan.op, sources, off, w) {
            pool.fail(WipeError::io(dev, "read data file", off, e));
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
        pool.shared.verified.fetch_add(len, Ordering::SeqCst);
        pool.notify();
    }
}

/// Reads back `plan`'s ranges from `sink` and compares them with what the plan writes; the
/// first mismatching offset is the error. Used by `--verify` (also exposed for tests).
///
/// Errors: as the verify phase of a job ([`WipeError::Io`], [`WipeError::VerifyMismatch`]).
pub fn verify_plan(plan: &Plan, sink: &dyn Sink) -> Result<(), WipeError> {
    let shared = Shared::new(plan.total_bytes(), Arc::new(AtomicBool::new(false)));
    verify(plan, sink, &shared, &Mutex::new(None))
}
