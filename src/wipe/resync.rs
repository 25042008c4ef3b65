//! Freezing and skipping an md resync through sysfs (md.rst: `sync_action`, `resync_start`).
//!
//! Sequence for a complete wipe of a resyncing array: `frozen` -> `sync_action` before the first
//! write; after the last block is durable, `none` -> `resync_start` (the array is in sync) and
//! `idle` -> `sync_action`. On cancel or failure only `idle`, so the resync resumes from its
//! checkpoint and the array is never marked clean without being written.

use super::error::WipeError;
use super::plan::ResyncMark;
use crate::host::Root;
use std::path::PathBuf;

/// Writes to one array's `md/` directory under a root.
#[derive(Debug, Clone)]
pub struct ResyncControl {
    dir: PathBuf,
    /// The array's kernel name, for the log records (journal field ARRAY=).
    array: String,
}

impl ResyncControl {
    /// Control of array `name` (`md0`): `/sys/block/<name>/md/` under `root`.
    pub fn new(root: &Root, name: &str) -> Self {
        ResyncControl {
            dir: root.sys("block").join(name).join("md"),
            array: name.to_string(),
        }
    }

    fn write(&self, file: &str, value: &str) -> Result<(), WipeError> {
        let path = self.dir.join(file);
        std::fs::write(&path, value).map_err(|source| WipeError::Resync {
            path,
            value: value.to_string(),
            source,
        })
    }

    /// The array's resync position now: `resync_start` and `sync_completed` (empty where
    /// unreadable), for a resumed job's "did anyone unfreeze it in between" check.
    pub fn mark(&self) -> ResyncMark {
        let read = |f: &str| {
            std::fs::read_to_string(self.dir.join(f))
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        };
        ResyncMark {
            resync_start: read("resync_start"),
            sync_completed: read("sync_completed"),
        }
    }

    /// `frozen` -> `sync_action`: the resync stops at its checkpoint.
    pub fn freeze(&self) -> Result<(), WipeError> {
        self.write("sync_action", "frozen")?;
        tracing::info!(array = %self.array, "resync frozen for the wipe");
        Ok(())
    }

    /// `none` -> `resync_start`, then `idle` -> `sync_action`: the resync is skipped. Only after
    /// the whole array was written and flushed.
    pub fn mark_in_sync(&self) -> Result<(), WipeError> {
        self.write("resync_start", "none")?;
        self.write("sync_action", "idle")?;
        tracing::info!(array = %self.array, "resync skipped: the wiped array is in sync");
        Ok(())
    }

    /// `idle` -> `sync_action`: the resync continues from its checkpoint.
    pub fn unfreeze(&self) -> Result<(), WipeError> {
        self.write("sync_action", "idle")?;
        tracing::info!(array = %self.array, "resync unfrozen");
        Ok(())
    }
}
