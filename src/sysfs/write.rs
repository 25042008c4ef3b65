//! The one writer of kernel attributes: `/sys/block/mdN/md/*`, `/sys/class/block/X/uevent` and
//! `/proc/sys/dev/raid/*` all go through [`write_attr`].
//!
//! The file is opened write-only, without `O_CREAT`: sysfs removes an array's `md/` directory the
//! moment the array is stopped, and a plain `std::fs::write` would then create a regular file
//! where the attribute was (on a test tree, or on a tmpfs that stands in for /sys in a
//! container). A missing attribute is [`WriteError::Gone`] instead, never a new file.
//!
//! Source of truth: kernel Documentation/admin-guide/md.rst (which md attributes accept which
//! words, EBUSY while another sync runs, EINVAL for a word the level cannot do) and
//! Documentation/ABI/testing/sysfs-uevent.

use crate::host::Root;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

/// Why a write to a kernel attribute failed; each names the file and the value.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The attribute does not exist (ENOENT, ENOTDIR, ENODEV): the array or device has gone
    /// (stopped, removed), or the root has no such file. Nothing was created.
    #[error("{} is gone (the array or device was stopped or removed)", path.display())]
    Gone {
        /// The attribute file.
        path: PathBuf,
        /// The text we tried to write.
        value: String,
    },
    /// The kernel refused for now (EBUSY: another sync runs; EROFS: the array is read-only).
    #[error("cannot write {:?} to {}: busy", value.trim_end(), path.display())]
    Busy {
        /// The attribute file.
        path: PathBuf,
        /// The text we tried to write.
        value: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The kernel rejects the value (EINVAL: a word the array's level cannot do, a number out of
    /// range).
    #[error("cannot write {:?} to {}: the kernel rejects it", value.trim_end(), path.display())]
    Invalid {
        /// The attribute file.
        path: PathBuf,
        /// The text we tried to write.
        value: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Any other failure (EIO, EACCES when not root, ...).
    #[error("cannot write {:?} to {}", value.trim_end(), path.display())]
    Io {
        /// The attribute file.
        path: PathBuf,
        /// The text we tried to write.
        value: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

impl WriteError {
    fn new(path: &Path, value: &str, source: io::Error) -> Self {
        let (path, value) = (path.to_path_buf(), value.to_string());
        let gone = source.kind() == io::ErrorKind::NotFound
            || matches!(source.raw_os_error(), Some(libc::ENOTDIR | libc::ENODEV));
        match source.raw_os_error() {
            _ if gone => WriteError::Gone { path, value },
            Some(libc::EBUSY | libc::EROFS) => WriteError::Busy {
                path,
                value,
                source,
            },
            Some(libc::EINVAL) => WriteError::Invalid {
                path,
                value,
                source,
            },
            _ => WriteError::Io {
                path,
                value,
                source,
            },
        }
    }

    /// True for [`WriteError::Gone`].
    pub fn is_gone(&self) -> bool {
        matches!(self, WriteError::Gone { .. })
    }

    /// The attribute file.
    pub fn path(&self) -> &Path {
        match self {
            WriteError::Gone { path, .. }
            | WriteError::Busy { path, .. }
            | WriteError::Invalid { path, .. }
            | WriteError::Io { path, .. } => path,
        }
    }
}

impl From<WriteError> for io::Error {
    /// The OS error back (`NotFound` for [`WriteError::Gone`]), for callers that keep an
    /// `io::Error` in their own error type.
    fn from(e: WriteError) -> io::Error {
        match e {
            WriteError::Gone { .. } => io::Error::from(io::ErrorKind::NotFound),
            WriteError::Busy { source, .. }
            | WriteError::Invalid { source, .. }
            | WriteError::Io { source, .. } => source,
        }
    }
}

/// Writes `value` to the existing attribute file `path` in one `write(2)` (one store in the
/// kernel); `O_WRONLY|O_TRUNC`, never `O_CREAT` (O_TRUNC as a shell's `echo idle > sync_action`:
/// sysfs ignores it, a test tree's regular file needs it). `value` is written as given (add the
/// `\n` where the caller wants one).
///
/// Errors: [`WriteError`]: `Gone` when the file does not exist (nothing is created), `Busy`,
/// `Invalid`, `Io` from the kernel's answer.
pub fn write_attr(path: &Path, value: &str) -> Result<(), WriteError> {
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(|e| WriteError::new(path, value, e))
}

/// [`write_attr`] on `/sys/block/<array>/md/<attr>` under `root`.
pub fn write_array_attr(
    root: &Root,
    array: &str,
    attr: &str,
    value: &str,
) -> Result<(), WriteError> {
    write_attr(&super::attr_path(root, array, attr), value)
}

/// Writes `action` (`change`, `add`...) to `/sys/class/block/<name>/uevent` under `root`: a
/// synthetic uevent, so udev re-probes the device (`udevadm trigger --action=<action>`).
///
/// Errors: [`WriteError`] (`Gone` when the device is gone or the root has no such file).
pub fn send_uevent(root: &Root, name: &str, action: &str) -> Result<(), WriteError> {
    write_attr(&super::block::class_dir(root, name).join("uevent"), action)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vanished_array_is_gone_and_no_file_is_created() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::new(d.path());
        // The whole md/ directory is gone (array stopped).
        let e = write_array_attr(&root, "md0", "sync_action", "idle").unwrap_err();
        assert!(e.is_gone(), "{e:?}");
        assert!(e.to_string().contains("is gone"), "{e}");
        assert!(!root.sys("block/md0").exists());
        // md/ is there but the attribute is not: still no file created.
        std::fs::create_dir_all(root.sys("block/md0/md")).unwrap();
        let e = write_array_attr(&root, "md0", "resync_start", "none").unwrap_err();
        assert!(matches!(e, WriteError::Gone { ref value, .. } if value == "none"));
        assert!(!root.sys("block/md0/md/resync_start").exists());
        assert_eq!(e.path(), root.sys("block/md0/md/resync_start"));
        assert_eq!(io::Error::from(e).kind(), io::ErrorKind::NotFound);
        let e = send_uevent(&root, "sdz", "change").unwrap_err();
        assert!(e.is_gone());
        assert!(!root.sys("class/block/sdz/uevent").exists());
    }

    #[test]
    fn an_existing_attribute_is_replaced() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::new(d.path());
        std::fs::create_dir_all(root.sys("block/md0/md")).unwrap();
        let p = root.sys("block/md0/md/sync_action");
        std::fs::write(&p, "resync\n").unwrap();
        write_array_attr(&root, "md0", "sync_action", "frozen\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "frozen\n");
    }

    #[test]
    fn kernel_answers_are_told_apart() {
        let p = Path::new("/sys/block/md0/md/sync_action");
        let err = |n| WriteError::new(p, "check", io::Error::from_raw_os_error(n));
        assert!(matches!(err(libc::EBUSY), WriteError::Busy { .. }));
        assert!(matches!(err(libc::EROFS), WriteError::Busy { .. }));
        assert!(matches!(err(libc::EINVAL), WriteError::Invalid { .. }));
        assert!(matches!(err(libc::EIO), WriteError::Io { .. }));
        assert!(err(libc::ENODEV).is_gone());
        assert!(err(libc::ENOTDIR).is_gone());
        assert_eq!(
            io::Error::from(err(libc::EBUSY)).raw_os_error(),
            Some(libc::EBUSY)
        );
        // A directory where the attribute should be: EISDIR, not "gone".
        let d = tempfile::tempdir().unwrap();
        let e = write_attr(d.path(), "x").unwrap_err();
        assert!(matches!(e, WriteError::Io { .. }), "{e:?}");
    }
}
