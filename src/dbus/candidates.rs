//! `Manager.WipeCandidates`, bounded: any local user may call it (it reads only), so what one
//! caller can make the service do is capped.
//!
//! - One call in flight per caller (its unique bus name): a second one is `Busy` at once.
//! - One listing at a time for everyone, and a listing younger than [`CACHE_FOR`] is answered
//!   from memory: a flood of calls costs one probe of each device every few seconds.
//! - The probes run on a pool of their own ([`PROBE_THREADS`] threads,
//!   [`crate::workers::Pool`]), never on tokio's shared blocking pool nor the loop's thread.
//! - Each device has until [`DEVICE_TIMEOUT`] after its probe was queued: a device that has not
//!   answered by then is listed as not answering, and is not probed again while its first
//!   probe is still waiting (storage that stopped answering holds at most one thread per
//!   device).
//! - No side effects ([`crate::wipe::candidates::probe_one`]: a corrupt checkpoint stays where
//!   it is).

use super::errors::{Error, Result};
use crate::host::Root;
use crate::lock::lock;
use crate::wipe::candidates::{self, Candidate};
use crate::workers::Pool;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Threads probing devices for `WipeCandidates`.
pub const PROBE_THREADS: usize = 4;
/// How long a device's probe may take before the device is listed as not answering.
pub const DEVICE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a listing is answered from memory.
pub const CACHE_FOR: Duration = Duration::from_secs(3);

/// The bounded lister (one per service).
pub struct Candidates {
    pool: Pool,
    /// Callers (unique bus names) with a call in flight.
    callers: Mutex<BTreeSet<String>>,
    /// The last listing and when it was made; held across a listing, so there is one at a time.
    last: tokio::sync::Mutex<Option<(Instant, Vec<Candidate>)>>,
    /// Devices whose probe has not returned yet.
    waiting: Arc<Mutex<BTreeSet<String>>>,
}

/// Removes the caller from the in-flight set when its call ends, however it ends (answered,
/// failed, or dropped because the caller left).
struct InFlight<'a> {
    callers: &'a Mutex<BTreeSet<String>>,
    caller: String,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        lock(self.callers).remove(&self.caller);
    }
}

impl Default for Candidates {
    fn default() -> Self {
        Candidates::new()
    }
}

impl Candidates {
    /// A lister with its own probe pool.
    pub fn new() -> Candidates {
        Candidates {
            pool: Pool::new("candidates", PROBE_THREADS),
            callers: Mutex::new(BTreeSet::new()),
            last: tokio::sync::Mutex::new(None),
            waiting: Arc::new(Mutex::new(BTreeSet::new())),
        }
    }

    /// Every candidate device under `root` ([`candidates::names`]), probed as the module doc
    /// says, for `caller` (its unique bus name).
    ///
    /// Errors: `Busy` when `caller` has a call in flight already.
    pub async fn list(&self, root: &Root, caller: &str) -> Result<Vec<Candidate>> {
        if !lock(&self.callers).insert(caller.to_string()) {
            return Err(Error::Busy(format!(
                "WipeCandidates: a call of {caller} is already running; wait for its answer"
            )));
        }
        let _in_flight = InFlight {
            callers: &self.callers,
            caller: caller.to_string(),
        };
        let mut last = self.last.lock().await;
        if let Some((at, list)) = &*last {
            if at.elapsed() < CACHE_FOR {
                return Ok(list.clone());
            }
        }
        let list = self.probe_all(root).await;
        *last = Some((Instant::now(), list.clone()));
        Ok(list)
    }

    /// Lists and probes every device on the pool; one deadline, [`DEVICE_TIMEOUT`] from now,
    /// for each.
    async fn probe_all(&self, root: &Root) -> Vec<Candidate> {
        let deadline = tokio::time::Instant::now() + DEVICE_TIMEOUT;
        let r = root.clone();
        let names =
            tokio::time::timeout_at(deadline, self.pool.submit(move || candidates::names(&r)))
                .await;
        let Ok(Ok(names)) = names else {
            return Vec::new();
        };
        let mut pending = Vec::new();
        for name in names {
            if !lock(&self.waiting).insert(name.clone()) {
                pending.push((name, None));
                continue;
            }
            let (r, n, waiting) = (root.clone(), name.clone(), self.waiting.clone());
            let rx = self.pool.submit(move || {
                let c = candidates::probe_one(&r, &n);
                lock(&waiting).remove(&n);
                c
            });
            pending.push((name, Some(rx)));
        }
        let mut out = Vec::with_capacity(pending.len());
        for (name, rx) in pending {
            let got = match rx {
                Some(rx) => tokio::time::timeout_at(deadline, rx)
                    .await
                    .ok()
                    .and_then(|r| r.ok()),
                None => None,
            };
            out.push(got.unwrap_or_else(|| not_answering(&name)));
        }
        out
    }
}

/// The entry of a device whose probe did not answer in time.
fn not_answering(name: &str) -> Candidate {
    Candidate {
        device: format!("/dev/{name}"),
        accepted: false,
        reason: format!(
            "/dev/{name}: not answering (its probe did not finish within {} s; the storage \
             may have stopped answering)",
            DEVICE_TIMEOUT.as_secs()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    #[tokio::test]
    async fn a_caller_has_one_call_in_flight_and_listings_are_cached() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::new(d.path());
        let c = Candidates::new();
        let held = c.last.lock().await;
        let first = c.list(&root, ":1.5");
        tokio::pin!(first);
        // The first call is in flight (waiting for the listing lock) ...
        assert!(first.as_mut().now_or_never().is_none());
        let e = c.list(&root, ":1.5").await.unwrap_err();
        assert!(matches!(e, Error::Busy(_)), "{e:?}");
        drop(held);
        assert!(first.await.unwrap().is_empty());
        // ... and a later call of the same caller goes through, from the cache.
        assert!(c.list(&root, ":1.5").await.unwrap().is_empty());
        assert!(c.last.lock().await.is_some());
    }

    #[test]
    fn a_device_that_does_not_answer_says_so() {
        let c = not_answering("loop7");
        assert_eq!(c.device, "/dev/loop7");
        assert!(!c.accepted);
        assert!(c.reason.contains("not answering"), "{c:?}");
    }
}
