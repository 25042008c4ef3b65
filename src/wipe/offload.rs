//! Member offload: a `zero` wipe of an md array whose members can zero themselves, done on the
//! members instead of through md.
//!
//! md raid1/raid10/raid4/5/6 report `queue/write_zeroes_max_bytes` 0 (kernels up to at least
//! 6.1), so BLKZEROOUT through the array writes zero pages, while each member (NVMe Write
//! Zeroes, SCSI WRITE SAME, virtio-blk write-zeroes) could zero itself in one command; mdadm does
//! the same at create time (`--write-zeroes`). The planner decides ([`super::planner::offload`]);
//! this runs it: one thread per member, BLKZEROOUT over the member's data region in
//! [`super::planner::RANGE_STEP`] steps (cancel checked between steps), fdatasync of each member,
//! then BLKFLSBUF on the array so md's cached pages of the old content are dropped. The job has
//! frozen the resync and holds the array open `O_EXCL` throughout; it skips the resync after.
//!
//! Members are opened `O_WRONLY` without `O_EXCL`: md itself holds them exclusively. Each open
//! member must still be the probed one (device number, size), else nothing is written to it.

use super::error::WipeError;
use super::ioctl;
use super::plan::{MemberRegion, Plan};
use super::planner::RANGE_STEP;
use super::progress::{notify, ProgressFn, Shared};
use super::sink::Sink;
use super::target;
use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Zeroes every member region of `plan.offload`, then drops `array`'s cache. Progress: the
/// array's bytes in proportion to the member bytes zeroed (`Shared::done`).
///
/// Errors: [`WipeError::Open`] (a member), [`WipeError::Io`] (`member zeroout` at the member's
/// offset, `member flush`, `drop cache`), [`WipeError::Cancelled`].
pub(super) fn run(
    plan: &Plan,
    array: &dyn Sink,
    shared: &Shared,
    on_progress: &Mutex<Option<ProgressFn>>,
) -> Result<(), WipeError> {
    // Every member is opened and checked before the first is written.
    let files = plan
        .offload
        .iter()
        .map(open_member)
        .collect::<Result<Vec<_>, _>>()?;
    let member_total: u64 = plan.offload.iter().map(|r| r.len_bytes).sum::<u64>().max(1);
    let zeroed = AtomicU64::new(0);
    let first_err: Mutex<Option<WipeError>> = Mutex::new(None);
    std::thread::scope(|s| {
        for (r, f) in plan.offload.iter().zip(&files) {
            let (zeroed, first_err) = (&zeroed, &first_err);
            s.spawn(move || {
                if let Err(e) = zero_member(r, f, shared, &|n| {
                    let z = zeroed.fetch_add(n, Ordering::SeqCst) + n;
                    let done = (z as u128 * shared.total as u128 / member_total as u128) as u64;
                    shared.done.store(done.min(shared.total), Ordering::SeqCst);
                    notify(on_progress, shared);
                }) {
                    // Stop the others at their next step.
                    shared.cancel.store(true, Ordering::SeqCst);
                    crate::lock::lock(first_err).get_or_insert(e);
                }
            });
        }
    });
    if let Some(e) = first_err
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
    {
        return Err(e);
    }
    if shared.cancelled() {
        return Err(WipeError::Cancelled {
            device: plan.device.clone(),
            done_bytes: shared.done.load(Ordering::SeqCst),
            total_bytes: shared.total,
        });
    }
    shared.done.store(shared.total, Ordering::SeqCst);
    array
        .drop_cache()
        .map_err(|e| WipeError::io(&plan.device, "drop cache", 0, e))
}

/// Refuses a member whose open node is not the probed member (another device number, or a
/// size other than the probed one when sysfs gave one, or too small for the data region).
///
/// Errors: [`WipeError::Changed`], [`WipeError::Probe`] (fstat, BLKGETSIZE64).
fn check_member(r: &MemberRegion, f: &std::fs::File) -> Result<(), WipeError> {
    let found = target::opened(f).map_err(|source| WipeError::Probe {
        device: r.path.clone(),
        what: "cannot fstat the opened member".into(),
        source,
    })?;
    let Some(dev) = r.dev else {
        return Err(WipeError::Changed {
            device: r.path.clone(),
            reason: "sysfs gave no device number for this member when probed".into(),
        });
    };
    let size_bytes = if r.size_bytes == 0 {
        found.size_bytes
    } else {
        r.size_bytes
    };
    target::check_same(&r.path, target::Bound { dev, size_bytes }, found)?;
    if found.size_bytes < r.offset_bytes + r.len_bytes {
        return Err(WipeError::Changed {
            device: r.path.clone(),
            reason: format!(
                "{} bytes, smaller than its data region's end at {} bytes",
                found.size_bytes,
                r.offset_bytes + r.len_bytes
            ),
        });
    }
    Ok(())
}

/// Opens one member for writing and checks it is the probed one ([`check_member`]).
fn open_member(r: &MemberRegion) -> Result<std::fs::File, WipeError> {
    let f = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(&r.path)
        .map_err(|source| WipeError::Open {
            path: r.path.clone(),
            source,
        })?;
    check_member(r, &f)?;
    Ok(f)
}

/// Zeroes one member's data region on its open file `f`; `step(n)` after each `n` bytes.
fn zero_member(
    r: &MemberRegion,
    f: &std::fs::File,
    shared: &Shared,
    step: &dyn Fn(u64),
) -> Result<(), WipeError> {
    let mut off = r.offset_bytes;
    let end = r.offset_bytes + r.len_bytes;
    while off < end {
        if shared.cancelled() {
            return Ok(());
        }
        let n = RANGE_STEP.min(end - off);
        ioctl::zeroout(f, off, n).map_err(|e| WipeError::io(&r.path, "member zeroout", off, e))?;
        off += n;
        step(n);
    }
    f.sync_data()
        .map_err(|e| WipeError::io(&r.path, "member flush", 0, e))
}
