//! A job's progress as front ends see it ([`Phase`], [`Progress`], [`Outcome`]) and the shared
//! counters the workers update (atomics: reading progress never waits for a worker).
//!
//! Honest progress: a block counts only when its request completed (see [`super::workers`]).

use super::error::WipeError;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

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
    /// Whether the partition table was re-read (BLKRRPART) after the wipe.
    pub partitions_reread: bool,
    /// Whether a udev `change` event was sent for the device after the wipe.
    pub uevent_sent: bool,
    /// Bytes already durable from an interrupted run this job resumed (0 for a fresh job).
    pub resumed_bytes: u64,
    /// Whether the array's members were zeroed directly (member offload).
    pub offloaded: bool,
}

/// The counters of one job, shared by the job thread, its workers and the [`super::JobHandle`].
pub(super) struct Shared {
    /// Bytes durably written.
    pub(super) done: AtomicU64,
    /// Bytes read back and checked.
    pub(super) verified: AtomicU64,
    /// Bytes the job writes in all.
    pub(super) total: u64,
    phase: AtomicU8,
    /// The job's cancel flag (see [`super::Job::cancel_token`]).
    pub(super) cancel: Arc<AtomicBool>,
    /// Set with `cancel` by [`super::JobHandle::interrupt`]: the stop is an interruption (the
    /// service stopping), so the checkpoint is kept for a resume instead of removed.
    pub(super) keep_checkpoint: AtomicBool,
    started: Instant,
    phase_started: Mutex<Instant>,
    /// The rate of the last counted phase (wipe or verify) when it ended, as f64 bits: shown
    /// during `flush` and `done` instead of 0.
    last_rate: AtomicU64,
    /// Set (and notified) when the job thread is about to end.
    pub(super) ended: (Mutex<bool>, Condvar),
}

impl Shared {
    /// Counters for a job of `total` bytes, in [`Phase::Starting`].
    pub(super) fn new(total: u64, cancel: Arc<AtomicBool>) -> Self {
        Shared {
            done: AtomicU64::new(0),
            verified: AtomicU64::new(0),
            total,
            phase: AtomicU8::new(Phase::Starting as u8),
            cancel,
            keep_checkpoint: AtomicBool::new(false),
            started: Instant::now(),
            phase_started: Mutex::new(Instant::now()),
            last_rate: AtomicU64::new(0f64.to_bits()),
            ended: (Mutex::new(false), Condvar::new()),
        }
    }

    /// Enters phase `p` (remembering the rate of the counted phase that ends).
    pub(super) fn set_phase(&self, p: Phase) {
        let before = self.snapshot();
        if matches!(before.phase, Phase::Wipe | Phase::Verify) && before.rate_bytes_per_s > 0.0 {
            self.last_rate
                .store(before.rate_bytes_per_s.to_bits(), Ordering::SeqCst);
        }
        *crate::lock::lock(&self.phase_started) = Instant::now();
        self.phase.store(p as u8, Ordering::SeqCst);
    }

    /// Marks the job as ended without running it (its thread could not be spawned).
    pub(super) fn set_done(&self) {
        self.phase.store(Phase::Done as u8, Ordering::SeqCst);
    }

    /// True once the job was asked to stop.
    pub(super) fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::SeqCst)
    }

    /// The current progress.
    pub(super) fn snapshot(&self) -> Progress {
        let phase = match self.phase.load(Ordering::SeqCst) {
            0 => Phase::Starting,
            1 => Phase::Wipe,
            2 => Phase::Flush,
            3 => Phase::Verify,
            _ => Phase::Done,
        };
        let done = self.done.load(Ordering::SeqCst);
        let verified = self.verified.load(Ordering::SeqCst);
        let since = crate::lock::lock(&self.phase_started)
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

/// A progress callback ([`super::Job::on_progress`], [`super::Hooks::on_progress`]).
pub type ProgressFn = Box<dyn FnMut(&Progress) + Send>;
/// A completion callback ([`super::Job::on_complete`], [`super::Hooks::on_complete`]).
pub type CompleteFn = Box<dyn FnOnce(&Result<Outcome, WipeError>) + Send>;

/// Calls the progress callback in `f`, if any, with a snapshot of `shared`.
pub(super) fn notify(f: &Mutex<Option<ProgressFn>>, shared: &Shared) {
    if let Some(cb) = crate::lock::lock(f).as_mut() {
        cb(&shared.snapshot());
    }
}

/// The one-line summary of a job's end (D-Bus `Completed`'s message): `DEVICE: wiped N bytes
/// in S s (R MB/s)` plus `, verified`, `, continued after N bytes durable before an
/// interruption`, `, initial resync skipped`; or the error chain (device, offset, errno).
pub fn summary(device: &str, r: &Result<Outcome, WipeError>) -> String {
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
            if o.resumed_bytes > 0 {
                s.push_str(&format!(
                    ", continued after {} bytes durable before an interruption",
                    o.resumed_bytes
                ));
            }
            if o.resync_skipped {
                s.push_str(", initial resync skipped");
            }
            s
        }
        Err(e) => crate::error::error_chain(e),
    }
}
