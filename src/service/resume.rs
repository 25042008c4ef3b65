//! Auto-resume at start-up: the wipe jobs a previous `mdpilot serve` ran (D-Bus `StartWipe`)
//! and did not finish — it was killed, crashed, the machine lost power, or it stopped with the
//! job running ([`crate::wipe::JobHandle::interrupt`]) — are continued from their durable
//! checkpoints ([`crate::wipe::checkpoint`], `/var/lib/mdpilot/wipe` under the root) and
//! published as job objects like any StartWipe job.
//!
//! Only checkpoints whose `started_by` is the service are taken; a CLI wipe's checkpoint is the
//! CLI user's to continue with `mdpilot wipe DEVICE --resume`. And only checkpoints the disk
//! can confirm ([`checkpoint::needs_a_person`]): with durable bytes and the digest of the
//! wipe's first bytes, which the job reads back before it writes (a mismatch is the job's
//! error, in the log and its `Completed`, with nothing written); the others (nothing durable,
//! a kernel name, a file of an earlier mdpilot) are logged at warn and left in place. A
//! checkpoint whose device is gone or no longer matches (another device at that node, another
//! size, block size or ranges) is logged at warn and left in place: nothing is written,
//! nothing deleted. A corrupt checkpoint
//! (not JSON, or not one this version reads) is kept aside as `NAME.corrupt-<unix seconds>`
//! with one warning ([`checkpoint::list`]) and not resumed. Config switch:
//! `[wipe] auto_resume` (default true).
//!
//! Order: after the objects are served, before the previous run's dead leases and journaled
//! freezes are reaped: each resumed job first takes over its dead run's freeze (the same change,
//! [`crate::policy::Policy::hold`]), so the array's resync never runs in between.

use crate::dbus::shared::Shared;
use crate::wipe::checkpoint;
use crate::wipe::plan::{Method, Options, StartedBy};
use crate::wipe::{JobHandle, Phase, Request};
use std::sync::Arc;
use std::time::Duration;

/// How long start-up waits for the resumed jobs to pass their freeze (open, leases, freeze).
const SETTLE: Duration = Duration::from_secs(10);

/// Continues every service-started job with a checkpoint under the root (see the module doc);
/// returns how many jobs were started. With `enabled` false only says what it leaves.
/// Failures are logged (warn) and never stop the service.
pub async fn resume_jobs(shared: &Arc<Shared>, conn: &zbus::Connection, enabled: bool) -> usize {
    let dir = shared.core.root.path(checkpoint::DIR);
    let mut started: Vec<Arc<JobHandle>> = Vec::new();
    for (path, ck) in checkpoint::list(&dir) {
        let StartedBy::Service { uid } = ck.started_by else {
            tracing::info!(
                "{}: a CLI wipe of {} was interrupted: not resumed by the service \
                 (`mdpilot wipe {} --resume` continues it)",
                path.display(),
                ck.device.display(),
                ck.device.display()
            );
            continue;
        };
        if !enabled {
            tracing::info!(
                "{}: interrupted wipe of {} left alone (wipe.auto_resume is off)",
                path.display(),
                ck.device.display()
            );
            continue;
        }
        let device = match checkpoint::locate(&shared.core.root, &dir, &path, &ck) {
            Ok(d) => d,
            Err(why) => {
                tracing::warn!(
                    "{}: not resuming the interrupted {} wipe: {why}; checkpoint left in place",
                    path.display(),
                    ck.method
                );
                continue;
            }
        };
        let req = Request {
            device,
            method: ck.method().unwrap_or(Method::Zero),
            options: Options {
                resume: true,
                owner: Some(crate::policy::process_owner(std::process::id())),
                started_by: ck.started_by,
                ..Options::default()
            },
        };
        match crate::dbus::job::launch(shared, conn, &req, uid, "auto-resume").await {
            Ok((job, handle)) => {
                tracing::info!(
                    "{job}: resuming the interrupted {} wipe of {} for uid {uid} ({} of {} \
                     bytes durable)",
                    ck.method,
                    req.device.display(),
                    ck.durable_bytes(),
                    ck.total_bytes()
                );
                started.push(handle);
            }
            Err(e) => tracing::warn!(
                "{}: not resuming the interrupted {} wipe of {}: {e}; checkpoint left in place",
                path.display(),
                ck.method,
                req.device.display()
            ),
        }
    }
    // Let each job take over its dead run's freeze before the caller reaps dead owners.
    let deadline = tokio::time::Instant::now() + SETTLE;
    while started
        .iter()
        .any(|h| h.progress().phase == Phase::Starting && !h.is_finished())
    {
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!("resumed wipe jobs still starting after {SETTLE:?}");
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    started.len()
}
