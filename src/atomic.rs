//! Atomic replacement of a small file: the one helper for every file mdpilot rewrites whole
//! (the policy state, the check record, `status --output` / textfile-collector files).
//!
//! The new content goes to a temporary file created with `O_EXCL` and a random name in the
//! target's directory ([`tempfile::Builder::tempfile_in`]), so a symlink or file planted at a
//! predictable name is never opened or followed. The file is fsynced, renamed over the target
//! ([`tempfile::NamedTempFile::persist`], `rename(2)`: readers see the old or the new content,
//! never a mix), and the directory is fsynced so the rename survives a crash. On any error the
//! temporary file is removed and the target is left as it was.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The prefix of the temporary names beside `path` (`NAME.tmp-`, then random characters):
/// what a writer killed between create and rename leaves behind, for cleanup under a lock.
pub fn temp_prefix(path: &Path) -> String {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    format!("{name}.tmp-")
}

/// Replaces `path` with `bytes`, atomically and durably, with permission bits `mode`
/// (`0o600`, `0o644`; the umask does not apply). The directory must exist.
///
/// Errors: `InvalidInput` when `path` has no file name; otherwise the `io::Error` of the
/// failing step (create in a read-only or missing directory, ENOSPC on write, fsync, rename).
/// Never follows a symlink at a temporary name; a symlink at `path` itself is replaced, not
/// followed (rename replaces the directory entry).
pub fn write(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    if path.file_name().is_none() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} has no file name", path.display()),
        ));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(&temp_prefix(path))
        .tempfile_in(dir)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn replaces_with_the_mode_and_leaves_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("state.toml");
        write(&p, b"a\n", 0o600).unwrap();
        write(&p, b"b\n", 0o644).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "b\n");
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o777, 0o644);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_symlink_at_the_old_predictable_temporary_name_is_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let secret = d.path().join("secret");
        std::fs::write(&secret, "keep").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        let p = d.path().join("out.prom");
        for name in [
            format!(".out.prom.tmp.{}", std::process::id()),
            format!("out.prom.tmp-{}", std::process::id()),
        ] {
            std::os::unix::fs::symlink(&secret, d.path().join(name)).unwrap();
        }
        write(&p, b"new\n", 0o644).unwrap();
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "keep");
        assert_eq!(std::fs::metadata(&secret).unwrap().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new\n");
        assert!(!std::fs::symlink_metadata(&p)
            .unwrap()
            .file_type()
            .is_symlink());
    }

    #[test]
    fn a_failed_write_leaves_the_target_and_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("missing-dir").join("x");
        assert!(write(&p, b"x", 0o600).is_err());
        assert!(write(Path::new("/"), b"x", 0o600).is_err());
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }
}
