//! Policy leases on the md speed limits, as the wipe job needs them.
//!
//! The job only talks to a [`LeaseProvider`]: the real one is [`crate::policy::Policy`] (the
//! same state file, lock and originals as `mdpilot policy`); tests use [`RecordingLeases`].

use super::error::WipeError;
use super::resync::ResyncControl;
use crate::host::Root;
use std::path::PathBuf;
use std::sync::Mutex;

use crate::model::SyncAction;
use crate::policy::journal::Change;
pub use crate::policy::{LeaseKind, LeaseRequest, Limits, Owner};
use crate::policy::{Policy, PolicyError};

/// Why a provider did not grant or release a lease.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// The policy failed: invalid request, state file, or a knob read or write (its message and
    /// causes are the policy's).
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// A provider that is not the policy (a test double) refused, with its reason.
    #[error("{0}")]
    Refused(String),
}

/// What a wipe job needs from the policy: acquire before the first write, release at the end
/// (success, failure or cancel).
///
/// Errors: [`LeaseError`]; print it with [`crate::error::error_chain`] for the whole cause.
pub trait LeaseProvider: Send + Sync {
    /// Grants `req` or says why not.
    fn acquire(&self, req: LeaseRequest) -> Result<(), LeaseError>;
    /// Drops the lease named `holder`.
    fn release(&self, holder: &str) -> Result<(), LeaseError>;
    /// Freezes the resync of `array` (`frozen` -> `md/sync_action`) for this process's job.
    /// Returns false when the array was frozen already (by someone else: then it is not ours
    /// to unfreeze). The default writes directly through [`ResyncControl`] (no journal).
    fn freeze(&self, root: &Root, array: &str) -> Result<bool, WipeError> {
        ResyncControl::new(root, array).freeze().map(|()| true)
    }
    /// Ends a freeze of [`LeaseProvider::freeze`]: with `in_sync` (the whole array was written
    /// and flushed) `none` -> `resync_start` first, then `idle` -> `sync_action`.
    fn unfreeze(&self, root: &Root, array: &str, in_sync: bool) -> Result<(), WipeError> {
        let c = ResyncControl::new(root, array);
        if in_sync {
            c.mark_in_sync()
        } else {
            c.unfreeze()
        }
    }
}

/// A provider that grants everything and changes nothing (engine unit tests on plain files).
#[derive(Debug, Default)]
pub struct NoLeases;

impl LeaseProvider for NoLeases {
    fn acquire(&self, _req: LeaseRequest) -> Result<(), LeaseError> {
        Ok(())
    }
    fn release(&self, _holder: &str) -> Result<(), LeaseError> {
        Ok(())
    }
}

/// A provider that records calls (`acquire:<holder>` / `release:<holder>`), for tests.
#[derive(Debug, Default)]
pub struct RecordingLeases {
    /// The calls in order.
    pub calls: Mutex<Vec<String>>,
    /// When set, `acquire` fails with [`LeaseError::Refused`] and this message.
    pub refuse: Option<String>,
}

impl LeaseProvider for RecordingLeases {
    fn acquire(&self, req: LeaseRequest) -> Result<(), LeaseError> {
        crate::lock::lock(&self.calls).push(format!("acquire:{}", req.holder));
        match &self.refuse {
            Some(m) => Err(LeaseError::Refused(m.clone())),
            None => Ok(()),
        }
    }
    fn release(&self, holder: &str) -> Result<(), LeaseError> {
        crate::lock::lock(&self.calls).push(format!("release:{holder}"));
        Ok(())
    }
}

/// The real provider: leases go into the policy state file and onto the kernel's knobs.
impl LeaseProvider for Policy {
    fn acquire(&self, req: LeaseRequest) -> Result<(), LeaseError> {
        Policy::acquire(self, req)
            .map(|_| ())
            .map_err(LeaseError::from)
    }
    fn release(&self, holder: &str) -> Result<(), LeaseError> {
        Policy::release(self, holder)
            .map(|_| ())
            .map_err(LeaseError::from)
    }
    /// Journaled: the freeze is recorded in the state file (owner: this process) before
    /// `frozen` is written, so a killed job's freeze is undone by the next mdpilot command.
    fn freeze(&self, _root: &Root, array: &str) -> Result<bool, WipeError> {
        let change = Change::freeze(
            self.array_ref(array),
            crate::policy::process_owner(std::process::id()),
        );
        self.hold(change)
            .map_err(|e| journal_err(array, SyncAction::Frozen.as_str(), &e))
    }
    fn unfreeze(&self, _root: &Root, array: &str, in_sync: bool) -> Result<(), WipeError> {
        let first = in_sync.then_some(("resync_start", crate::vocab::NONE));
        self.let_go(&crate::policy::Holder::freeze(array).to_string(), first)
            .map_err(|e| {
                let what = if in_sync {
                    crate::vocab::NONE
                } else {
                    SyncAction::Idle.as_str()
                };
                journal_err(array, what, &e)
            })
    }
}

/// A policy failure around a freeze as the job reports it.
fn journal_err(array: &str, value: &str, e: &PolicyError) -> WipeError {
    WipeError::Lease {
        device: PathBuf::from(format!("/dev/{array}")),
        holder: crate::policy::Holder::freeze(array).to_string(),
        message: format!("{value}: {}", crate::error::error_chain(e)),
    }
}
