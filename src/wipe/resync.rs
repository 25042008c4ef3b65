//! Freezing and skipping an md resync through sysfs (md.rst: `sync_action`, `resync_start`).
//!
//! Sequence for a complete wipe of a resyncing array: `frozen` -> `sync_action` before the first
//! write; after the last block is durable, `none` -> `resync_start` (the array is in sync) and
//! `idle` -> `sync_action`. On cancel or failure only `idle`, so the resync resumes from its
//! checkpoint and the array is never marked clean without being written.

use super::error::WipeError;
use crate::host::Root;
use crate::model::SyncAction;
use crate::sysfs;

/// The resync position of an array as md reports it, recorded right after the job froze the
/// resync (md.rst `resync_start`, `sync_completed`): a resumed job may skip the resync only if
/// these did not move while it was interrupted (no one unfroze the array in between).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ResyncMark {
    /// `md/resync_start` (`none` or a sector).
    pub resync_start: String,
    /// `md/sync_completed` (`none` or `DONE / TOTAL` sectors).
    pub sync_completed: String,
}

/// Writes to one array's `md/` directory under a root, through the one writer
/// ([`sysfs::write_array_attr`]: an array that has gone is an error, never a created file).
#[derive(Debug, Clone)]
pub struct ResyncControl {
    root: Root,
    /// The array's kernel name (also the journal field ARRAY= of the log records).
    array: String,
}

impl ResyncControl {
    /// Control of array `name` (`md0`): `/sys/block/<name>/md/` under `root`.
    pub fn new(root: &Root, name: &str) -> Self {
        ResyncControl {
            root: root.clone(),
            array: name.to_string(),
        }
    }

    fn write(&self, file: &str, value: &str) -> Result<(), WipeError> {
        sysfs::write_array_attr(&self.root, &self.array, file, value).map_err(|e| {
            WipeError::Resync {
                path: e.path().to_path_buf(),
                value: value.to_string(),
                source: e.into(),
            }
        })
    }

    /// The array's resync position now: `resync_start` and `sync_completed` (empty where
    /// unreadable), for a resumed job's "did anyone unfreeze it in between" check.
    pub fn mark(&self) -> ResyncMark {
        let read = |f: &str| sysfs::read_attr(&self.root, &self.array, f).unwrap_or_default();
        ResyncMark {
            resync_start: read("resync_start"),
            sync_completed: read("sync_completed"),
        }
    }

    /// `frozen` -> `sync_action`: the resync stops at its checkpoint.
    pub fn freeze(&self) -> Result<(), WipeError> {
        self.write("sync_action", SyncAction::Frozen.as_str())?;
        tracing::info!(array = %self.array, "resync frozen for the wipe");
        Ok(())
    }

    /// `none` -> `resync_start`, then `idle` -> `sync_action`: the resync is skipped. Only after
    /// the whole array was written and flushed.
    pub fn mark_in_sync(&self) -> Result<(), WipeError> {
        self.write("resync_start", crate::vocab::NONE)?;
        self.write("sync_action", SyncAction::Idle.as_str())?;
        tracing::info!(array = %self.array, "resync skipped: the wiped array is in sync");
        Ok(())
    }

    /// `idle` -> `sync_action`: the resync continues from its checkpoint.
    pub fn unfreeze(&self) -> Result<(), WipeError> {
        self.write("sync_action", SyncAction::Idle.as_str())?;
        tracing::info!(array = %self.array, "resync unfrozen");
        Ok(())
    }
}
