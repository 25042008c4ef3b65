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
use std::io::Write as _;
use std::path::Path;

/// The snapshot of `stat` plus the policy view under `root` (`None`, with a warning, when the
/// configuration or the state file cannot be read).
pub fn snapshot(root: &Root, stat: MdStat) -> Snapshot {
    let policy = match Config::load(root) {
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
        policy,
        install_applied_at: None,
        wipe_jobs: None,
        version: env!("CARGO_PKG_VERSION").to_string(),
    }
}

/// Writes `text` to `path` atomically: `.<name>.tmp.<pid>` in the same directory, fsync,
/// rename over `path`. The file is created mode 0644 (the collector runs as another user).
/// Errors: the directory is not writable, the disk is full; the temporary file is removed.
pub fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "--output needs a file name",
        )
    })?;
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let res = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o644)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
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
