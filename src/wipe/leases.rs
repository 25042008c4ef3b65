//! Policy leases on the md speed limits, as the wipe job needs them.
//!
//! `crate::policy` is built in parallel; until the merge these are mirror types of its API
//! (`LeaseKind`, `Owner`, `Limits`, `LeaseRequest`; `Policy::acquire/release`). The job only
//! talks to a [`LeaseProvider`], so wiring the real policy is one `impl LeaseProvider for Policy`
//! (mapping these structs field by field) at merge time.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Who asks for a lease (mirror of `policy::LeaseKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum LeaseKind {
    /// The Debian installer or similar.
    Installer,
    /// A wipe job (what this module uses).
    WipeJob,
    /// An administrator on the command line.
    Admin,
    /// A D-Bus client.
    DbusClient,
}

/// What keeps a lease alive (mirror of `policy::Owner`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum Owner {
    /// A process: the lease ends when it exits.
    Pid(u32),
    /// A D-Bus unique name: the lease ends when it leaves the bus.
    BusName(String),
    /// Released explicitly only.
    None,
}

/// Speed limits in KiB/s (mirror of `policy::Limits`); `None` leaves a bound alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Limits {
    /// Floor: `speed_limit_min` / `md/sync_speed_min`, KiB/s.
    pub min: Option<u64>,
    /// Ceiling: `speed_limit_max` / `md/sync_speed_max`, KiB/s.
    pub max: Option<u64>,
}

/// A request for a lease (mirror of `policy::LeaseRequest`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LeaseRequest {
    /// Unique holder name (the job uses `wipe:<device path>`).
    pub holder: String,
    /// Who asks.
    pub kind: LeaseKind,
    /// What keeps it alive.
    pub owner: Owner,
    /// Global limits (`/proc/sys/dev/raid/speed_limit_{min,max}`).
    pub global: Limits,
    /// Per-array limits, keyed by kernel name (`md0`).
    pub arrays: BTreeMap<String, Limits>,
}

/// What a wipe job needs from the policy: acquire before the first write, release at the end
/// (success, failure or cancel). Errors are the policy's messages.
pub trait LeaseProvider: Send + Sync {
    /// Grants `req` or says why not.
    fn acquire(&self, req: LeaseRequest) -> Result<(), String>;
    /// Drops the lease named `holder`.
    fn release(&self, holder: &str) -> Result<(), String>;
}

/// A provider that grants everything and changes nothing (tests, and the CLI until the policy
/// is wired in at merge).
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
