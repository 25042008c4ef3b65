//! `mdpilot status --format prometheus [--output FILE]`: the metrics of `serve --metrics` from
//! one read, for node_exporter's textfile collector on machines that do not run the service.
//!
//! The policy view comes from the state file (read-only, as `policy show`); wipe jobs are the
//! service's and unknown here, so their families have no samples. `--output` writes atomically
//! (a temporary file in the same directory, then `rename`), so the collector never reads half a
//! file; it must end in `.prom` for the collector to pick it up (not enforced).

use crate::config::Config;
use crate::host::Root;
use crate::metrics::Snapshot;
use crate::model::MdStat;
use crate::policy::Policy;
use std::path::Path;

/// The snapshot of `stat` plus the policy view under `root` (`None`, with a warning, when the
/// configuration or the state file cannot be read).
pub fn snapshot(root: &Root, stat: MdStat) -> Snapshot {
    let config = Config::load(root);
    let last_checks = config
        .as_ref()
        .map(|c| crate::check::store::CheckStore::new(root, c).last_checks(&stat))
        .unwrap_or_default();
    let check_throttles = config
        .as_ref()
        .map(|c| crate::check::throttle::NOTES.load(root, c))
        .unwrap_or_default();
    let resync_throttles = config
        .as_ref()
        .map(|c| crate::resync_throttle::NOTES.load(root, c))
        .unwrap_or_default();
    let policy = match config {
        Ok(c) => match Policy::new(root.clone(), c.policy_settings(root)).show() {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::warn!("no policy metrics: {}", crate::error::error_chain(&e));
                None
            }
        },
        Err(e) => {
            tracing::warn!("no policy metrics: {}", crate::error::error_chain(&e));
            None
        }
    };
    Snapshot {
        model: stat,
        install_applied_at: policy.as_ref().and_then(crate::metrics::install_applied_at),
        policy,
        last_checks,
        io_pressure_pct: crate::sysfs::pressure::read_io_pressure(root)
            .ok()
            .map(|p| (p.some_avg10, p.full_avg10)),
        check_throttles,
        resync_throttles,
        wipe_jobs: None,
        hook_events_dropped: None,
        version: env!("CARGO_PKG_VERSION").to_string(),
    }
}

/// Writes `text` to `path` atomically through [`crate::atomic::write`] (a random `O_EXCL`
/// temporary in the same directory, fsync, rename, directory fsync: a symlink planted beside
/// the target is never followed). The file is mode 0644 (the collector runs as another user).
/// Errors: `InvalidInput` without a file name, the directory is not writable, the disk is full;
/// the temporary file is removed.
pub fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    crate::atomic::write(path, text.as_bytes(), 0o644)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("mdpilot.prom");
        write_atomic(&p, "a 1\n").unwrap();
        write_atomic(&p, "a 2\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a 2\n");
        let names: Vec<_> = std::fs::read_dir(d.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1);
        assert!(write_atomic(&d.path().join("no/such/dir.prom"), "x").is_err());
    }
}
