//! The check record's one owner: where it lives (`[check] state_path` under the root, default
//! `/var/lib/mdpilot/checks.toml`), how it is read (a missing file is an empty record; keys in
//! `md/uuid`'s dashed spelling load under mdadm's, [`CheckState::parse`]), how it is saved
//! (atomic, mode 0600, and never replaced by text that does not load back as the record
//! saved) and its lock (`<path>.lock`, the same `flock` as the policy state's,
//! [`crate::policy::state::lock`]). Every reader and writer of the record goes through a
//! [`CheckStore`]: `mdpilot check`, the D-Bus Array methods and properties, the service
//! loop's upkeep and schedule, and the metrics.

use super::{record_key, ArrayRecord, CheckResult, CheckState};
use crate::config::Config;
use crate::host::Root;
use crate::model::MdStat;
use crate::policy::state::StateLock;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The check record could not be locked, read, parsed or saved.
#[derive(Debug, thiserror::Error)]
#[error("check state {path}: {reason}")]
pub struct StoreError {
    /// The record file.
    pub path: PathBuf,
    /// Why (the I/O or parse error, or why nothing was saved).
    pub reason: String,
}

/// The check record file of one configuration (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckStore {
    path: PathBuf,
}

/// The record's lock, held until dropped; the only way to save ([`Locked::save`]).
#[derive(Debug)]
pub struct Locked<'a> {
    store: &'a CheckStore,
    _lock: StateLock,
}

impl CheckStore {
    /// The record of `config` (`[check] state_path`) under `root`.
    pub fn new(root: &Root, config: &Config) -> CheckStore {
        CheckStore::at(root.path(&config.check.state_path))
    }

    /// The record at `path` (already under its root).
    pub fn at(path: PathBuf) -> CheckStore {
        CheckStore { path }
    }

    /// The record file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn error(&self, reason: impl Into<String>) -> StoreError {
        StoreError {
            path: self.path.clone(),
            reason: reason.into(),
        }
    }

    /// Reads the record without the lock (saves are atomic renames: a reader sees the old or
    /// the new file). A missing file is the empty record.
    ///
    /// Errors: [`StoreError`] when the file cannot be read or parsed.
    pub fn load(&self) -> Result<CheckState, StoreError> {
        match crate::host::read_optional(&self.path) {
            Ok(Some(t)) => CheckState::parse(&t).map_err(|e| self.error(e)),
            Ok(None) => Ok(CheckState::default()),
            Err(e) => Err(self.error(e.to_string())),
        }
    }

    /// [`CheckStore::load`] for the views (properties, metrics, the schedule's plan): an
    /// unreadable or corrupt record reads as empty, logged at warn naming `what` goes without.
    pub fn load_or_empty(&self, what: &str) -> CheckState {
        self.load().unwrap_or_else(|e| {
            tracing::warn!("{e}; {what}");
            CheckState::default()
        })
    }

    /// Takes the record's lock, waiting for any other writer (creates the directory).
    ///
    /// Errors: [`StoreError`] when the lock file cannot be created or locked.
    pub fn lock(&self) -> Result<Locked<'_>, StoreError> {
        let lock = crate::policy::state::lock(&self.path)
            .map_err(|e| self.error(crate::error::error_chain(&e)))?;
        Ok(Locked {
            store: self,
            _lock: lock,
        })
    }

    /// Refuses a step whose record could not be saved (`rec` as it would be after the step)
    /// before anything is written: a value TOML cannot hold would otherwise leave the kernel
    /// changed and the record behind.
    ///
    /// Errors: [`StoreError`] naming the file.
    pub fn saveable(&self, rec: &ArrayRecord) -> Result<(), StoreError> {
        let mut one = CheckState::default();
        one.array.insert(String::new(), rec.clone());
        one.to_toml()
            .map(drop)
            .map_err(|reason| self.error(format!("refused, nothing written: {reason}")))
    }

    /// The last completed check of each array of `stat`, by kernel name. A missing record
    /// gives an empty map; an unreadable one too (logged at warn).
    pub fn last_checks(&self, stat: &MdStat) -> BTreeMap<String, CheckResult> {
        let st = self.load_or_empty("no check metrics");
        stat.arrays
            .iter()
            .filter_map(|a| {
                let last = st.array.get(&record_key(a))?.last.clone()?;
                Some((a.name.clone(), last))
            })
            .collect()
    }
}

impl Locked<'_> {
    /// Reads the record under the lock ([`CheckStore::load`]).
    ///
    /// Errors: as [`CheckStore::load`].
    pub fn load(&self) -> Result<CheckState, StoreError> {
        self.store.load()
    }

    /// Saves `st` atomically through [`crate::atomic::write`] (temporary file, fsync, rename,
    /// directory fsync), mode 0600, creating the directory. The text is parsed back first: a
    /// record that would not load back as `st` is not saved and the file stays as it was.
    ///
    /// Errors: [`StoreError`] when `st` cannot be written as TOML (an integer above
    /// `i64::MAX`), would not load back, or the file cannot be written.
    pub fn save(&self, st: &CheckState) -> Result<(), StoreError> {
        let store = self.store;
        let unchanged =
            |reason: String| store.error(format!("not saved, the file is unchanged: {reason}"));
        let text = st.to_toml().map_err(unchanged)?;
        match CheckState::parse(&text) {
            Ok(back) if back == *st => {}
            Ok(_) => return Err(unchanged("it would not load back as saved".into())),
            Err(e) => return Err(unchanged(format!("it would not load back: {e}"))),
        }
        let dir = store.path.parent().unwrap_or(Path::new("/"));
        std::fs::create_dir_all(dir).map_err(|e| store.error(e.to_string()))?;
        crate::atomic::write(&store.path, text.as_bytes(), 0o600)
            .map_err(|e| store.error(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{CheckAction, Position};

    fn store() -> (tempfile::TempDir, CheckStore) {
        let d = tempfile::tempdir().unwrap();
        let s = CheckStore::at(d.path().join("lib/checks.toml"));
        (d, s)
    }

    #[test]
    fn a_missing_record_is_empty_and_a_saved_one_loads_back() {
        let (_d, s) = store();
        assert_eq!(s.load().unwrap(), CheckState::default());
        let mut st = CheckState::default();
        st.array.insert(
            "3b6c2a6e:0d0e4b7a:9d5e8a7b:1c2d3e4f".into(),
            ArrayRecord {
                name: "md0".into(),
                running: Some(CheckAction::Check),
                ..ArrayRecord::default()
            },
        );
        s.lock().unwrap().save(&st).unwrap();
        assert_eq!(s.load().unwrap(), st);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(s.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_record_that_would_not_load_back_is_not_saved() {
        let (_d, s) = store();
        let good = "[array.\"name:md0\"]\nname = \"md0\"\n";
        std::fs::create_dir_all(s.path().parent().unwrap()).unwrap();
        std::fs::write(s.path(), good).unwrap();
        // A key in md/uuid's dashed spelling loads under mdadm's: saved as is it would come
        // back under another key, so it is refused.
        let mut dashed = CheckState::default();
        dashed.array.insert(
            "3b6c2a6e-0d0e-4b7a-9d5e-8a7b1c2d3e4f".into(),
            ArrayRecord::default(),
        );
        let e = s.lock().unwrap().save(&dashed).unwrap_err();
        assert!(e.to_string().contains("would not load back"), "{e}");
        // A value TOML cannot hold.
        let mut huge = CheckState::default();
        huge.array.insert(
            "name:md0".into(),
            ArrayRecord {
                position: Some(Position {
                    action: CheckAction::Check,
                    sectors: u64::MAX,
                    total_sectors: 0,
                    saved_s: 0,
                    mismatch_cnt: u64::MAX,
                }),
                ..ArrayRecord::default()
            },
        );
        assert!(s.lock().unwrap().save(&huge).is_err());
        assert!(s.saveable(&huge.array["name:md0"]).is_err());
        assert_eq!(std::fs::read_to_string(s.path()).unwrap(), good);
    }

    #[test]
    fn an_unreadable_record_is_an_error_to_writers_and_empty_to_views() {
        let (_d, s) = store();
        std::fs::create_dir_all(s.path().parent().unwrap()).unwrap();
        std::fs::write(s.path(), "this is [not toml").unwrap();
        assert!(s.load().is_err());
        assert_eq!(s.load_or_empty("test"), CheckState::default());
        assert!(s.last_checks(&MdStat::default()).is_empty());
    }
}
