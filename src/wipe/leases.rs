//! Policy leases on the md speed limits, as the wipe job needs them.
//!
//! The job only talks to a [`LeaseProvider`]: the real one is [`crate::policy::Policy`] (the
//! same state file, lock and originals as `mdpilot policy`); tests use [`RecordingLeases`].

use std::sync::Mutex;

use crate::policy::Policy;
pub use crate::policy::{LeaseKind, LeaseRequest, Limits, Owner};

/// What a wipe job needs from the policy: acquire before the first write, release at the end
/// (success, failure or cancel). Errors are the policy's messages.
pub trait LeaseProvider: Send + Sync {
    /// Grants `req` or says why not.
    fn acquire(&self, req: LeaseRequest) -> Result<(), String>;
    /// Drops the lease named `holder`.
    fn release(&self, holder: &str) -> Result<(), String>;
}

/// A provider that grants everything and changes nothing (engine unit tests on plain files).
#[derive(Debug, Default)]
pub struct NoLeases;

impl LeaseProvider for NoLeases {
    fn acquire(&self, _req: LeaseRequest) -> Result<(), String> {
        Ok(())
    }
    fn release(&self, _holder: &str) -> Result<(), String> {
        Ok(())
    }
}

/// A provider that records calls (`acquire:<holder>` / `release:<holder>`), for tests.
#[derive(Debug, Default)]
pub struct RecordingLeases {
    /// The calls in order.
    pub calls: Mutex<Vec<String>>,
    /// When set, `acquire` fails with this message.
    pub refuse: Option<String>,
}

impl LeaseProvider for RecordingLeases {
    fn acquire(&self, req: LeaseRequest) -> Result<(), String> {
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!("acquire:{}", req.holder));
        match &self.refuse {
            Some(m) => Err(m.clone()),
            None => Ok(()),
        }
    }
    fn release(&self, holder: &str) -> Result<(), String> {
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!("release:{holder}"));
        Ok(())
    }
}

/// The real provider: leases go into the policy state file and onto the kernel's knobs.
impl LeaseProvider for Policy {
    fn acquire(&self, req: LeaseRequest) -> Result<(), String> {
        Policy::acquire(self, req)
            .map(|_| ())
            .map_err(|e| crate::error::error_chain(&e))
    }
    fn release(&self, holder: &str) -> Result<(), String> {
        Policy::release(self, holder)
            .map(|_| ())
            .map_err(|e| crate::error::error_chain(&e))
    }
}
