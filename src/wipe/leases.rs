//! Policy leases on the md speed limits, as the wipe job needs them.
//!
//! The job only talks to a [`LeaseProvider`]: the real one is [`crate::policy::Policy`] (the
//! same state file, lock and originals as `mdpilot policy`); tests use [`RecordingLeases`].

use std::sync::Mutex;

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
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!("acquire:{}", req.holder));
        match &self.refuse {
            Some(m) => Err(LeaseError::Refused(m.clone())),
            None => Ok(()),
        }
    }
    fn release(&self, holder: &str) -> Result<(), LeaseError> {
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!("release:{holder}"));
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
}
