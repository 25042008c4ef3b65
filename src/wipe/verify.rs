//! `--verify`: read every range back (O_DIRECT where the device was opened so) and compare it
//! with what the plan writes, regenerated (`source::expected`); the first mismatching
//! offset is the error.

use super::buffer::AlignedBuf;
use super::error::WipeError;
use super::plan::{Data, HeadDigest, Op, Plan, Range};
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

/// Blocks read back before a resumed job writes ([`check_resumed`]).
const RESUME_SAMPLES: u64 = 16;
/// Bytes per sample (a page; a multiple of every logical block size).
const SAMPLE_BYTES: u64 = 4096;

/// Before a resumed job writes: reads back the first bytes of the wipe and compares their
/// SHA-256 with the one the checkpoint recorded ([`super::plan::HeadDigest`], when it has one),
/// then reads [`RESUME_SAMPLES`] blocks spread over what the interrupted run made durable (the
/// first and the last block below the durable offset among them) and compares them with the
/// wipe's data (zeroes, or the random stream at those offsets under the checkpoint's key). A
/// fresh job, a member offload (redone whole) and `discard` (device-defined contents) are not
/// checked.
///
/// Errors: [`WipeError::ResumeHeadMismatch`], [`WipeError::ResumeMismatch`] naming the device
/// and the first differing offset (another disk at this name?), [`WipeError::Io`] (`read`);
/// nothing has been written.
pub(super) fn check_resumed(plan: &Plan, sink: &dyn Sink) -> Result<(), WipeError> {
    let Some(cp) = plan.checkpoint.as_ref().filter(|c| c.resumed_bytes > 0) else {
        return Ok(());
    };
    if !plan.offload.is_empty()
        || !matches!(
            plan.op,
            Op::Write(Data::Zero | Data::Random(_)) | Op::ZeroOut
        )
    {
        return Ok(());
    }
    if let Some(h) = &cp.head {
        check_head(plan, sink, h)?;
    }
    let start = plan.ranges.first().map_or(u64::MAX, |r| r.offset);
    let written = super::checkpoint::durable_ranges(&cp.full_ranges, start);
    let sources = Sources::none();
    let mut got = AlignedBuf::zeroed(SAMPLE_BYTES as usize);
    let mut want = AlignedBuf::zeroed(SAMPLE_BYTES as usize);
    for off in sample_offsets(&written, plan.identity.logical_block_size.max(512)) {
        let len = sample_len(&written, off) as usize;
        let (g, w) = (&mut got[..len], &mut want[..len]);
        sink.read_at(g, off)
            .map_err(|e| WipeError::io(&plan.device, "read", off, e))?;
        expected(&plan.op, &sources, off, w)
            .map_err(|e| WipeError::io(&plan.device, "read", off, e))?;
        if let Some(i) = g.iter().zip(w.iter()).position(|(a, b)| a != b) {
            return Err(WipeError::ResumeMismatch {
                device: plan.device.clone(),
                offset: off + i as u64,
            });
        }
    }
    Ok(())
}

/// Reads the `head` bytes back from `sink` and compares their SHA-256 with the recorded one.
/// Its place was checked against the plan's ranges ([`super::planner::resume`]), so its length
/// is at most [`super::checkpoint::HEAD_BYTES`].
///
/// Errors: [`WipeError::ResumeHeadMismatch`], [`WipeError::Io`] (`read`).
fn check_head(plan: &Plan, sink: &dyn Sink, head: &HeadDigest) -> Result<(), WipeError> {
    let len = head.len.min(super::checkpoint::HEAD_BYTES) as usize;
    let mut got = AlignedBuf::zeroed(len);
    sink.read_at(&mut got[..len], head.offset)
        .map_err(|e| WipeError::io(&plan.device, "read", head.offset, e))?;
    let found = super::checkpoint::sha256_hex(&got[..len]);
    if found != head.sha256 {
        return Err(WipeError::ResumeHeadMismatch {
            device: plan.device.clone(),
            offset: head.offset,
            len: head.len,
            found,
            recorded: head.sha256.clone(),
        });
    }
    Ok(())
}

/// Sample offsets over `written` (sorted ranges), `lbs`-aligned: evenly spread, plus the last
/// block (pure).
fn sample_offsets(written: &[Range], lbs: u64) -> Vec<u64> {
    let total: u64 = written.iter().map(|r| r.len).sum();
    if total == 0 {
        return Vec::new();
    }
    let at = |mut k: u64| {
        for r in written {
            if k < r.len {
                return r.offset + k / lbs * lbs;
            }
            k -= r.len;
        }
        0
    };
    let mut v: Vec<u64> = (0..RESUME_SAMPLES)
        .map(|i| at(total / RESUME_SAMPLES * i))
        .collect();
    v.push(at(total - SAMPLE_BYTES.min(total)));
    v.sort_unstable();
    v.dedup();
    v
}

/// Bytes to read at `off`: [`SAMPLE_BYTES`], or less where its range ends.
fn sample_len(written: &[Range], off: u64) -> u64 {
    written
        .iter()
        .find(|r| off >= r.offset && off < r.offset + r.len)
        .map_or(0, |r| (r.offset + r.len - off).min(SAMPLE_BYTES))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_cover_the_first_and_last_written_block() {
        let w = [
            Range {
                offset: 0,
                len: 1 << 20,
            },
            Range {
                offset: 2 << 20,
                len: 1 << 20,
            },
        ];
        let s = sample_offsets(&w, 512);
        assert_eq!(s[0], 0);
        assert_eq!(*s.last().unwrap(), (3 << 20) - 4096);
        assert!(s.iter().all(|o| o % 512 == 0 && sample_len(&w, *o) > 0));
        assert!(sample_offsets(&[], 512).is_empty());
    }
}
