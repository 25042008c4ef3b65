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
    /// The write was accepted but the attribute reads back something else right after (see
    /// [`holds`]): the kernel's answer, as read.
    #[error("wrote {:?} to {} but it reads back {now:?}", value.trim_end(), path.display())]
    NotTaken {
        /// The attribute file.
        path: PathBuf,
        /// The text we wrote.
        value: String,
        /// What it read right after (trimmed).
        now: String,
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
            | WriteError::NotTaken { path, .. }
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
            e @ WriteError::NotTaken { .. } => io::Error::other(e.to_string()),
            WriteError::Busy { source, .. }
            | WriteError::Invalid { source, .. }
            | WriteError::Io { source, .. } => source,
        }
    }
}

/// Held by [`write_attr`] for each write, so this process's writes of kernel attributes never
/// interleave with a simulator's rewrite of the same regular files (`serve --sim`,
/// [`crate::sim::normalize_limits`]: a read, then the kernel's read-back form written back).
/// Without it, a lease written between the simulator's read and its write was lost. The kernel
/// serializes its own stores; on real sysfs the lock is uncontended.
static WRITES: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The guard of the one lock of this process's attribute writes: while it is held, no
/// [`write_attr`] of this process runs. For a simulator that rewrites attribute files it does
/// not own; a poisoned lock is taken all the same (it guards no data).
pub fn writes_lock() -> std::sync::MutexGuard<'static, ()> {
    crate::lock::lock(&WRITES)
}

/// Writes `value` to the existing attribute file `path` in one `write(2)` (one store in the
/// kernel); `O_WRONLY|O_TRUNC`, never `O_CREAT` (O_TRUNC as a shell's `echo idle > sync_action`:
/// sysfs ignores it, a test tree's regular file needs it). `value` is written as given (add the
/// `\n` where the caller wants one).
///
/// Errors: [`WriteError`]: `Gone` when the file does not exist (nothing is created), `Busy`,
/// `Invalid`, `Io` from the kernel's answer.
pub fn write_attr(path: &Path, value: &str) -> Result<(), WriteError> {
    let _one_at_a_time = writes_lock();
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(|e| WriteError::new(path, value, e))
}

/// How many times [`write_array_attr`] tries a write md refuses with EBUSY (the first
/// included): md answers EBUSY to a `sync_action` or `sync_min` write while the sync thread of
/// a just-written `frozen` or `idle` is still winding down.
pub const BUSY_TRIES: u32 = 5;

/// The pause before the first retry after EBUSY; it doubles for each further one (10, 20, 40,
/// 80 ms: at most 150 ms in all).
pub const BUSY_FIRST_PAUSE: std::time::Duration = std::time::Duration::from_millis(10);

/// [`write_attr`] on `/sys/block/<array>/md/<attr>` under `root`, retried while md answers
/// EBUSY ([`BUSY_TRIES`], [`BUSY_FIRST_PAUSE`]), then read back: when [`holds`] knows the
/// attribute and the text read does not hold the value, [`WriteError::NotTaken`] with what it
/// reads. A read-back that fails (the array went away just after) is not an error.
///
/// Errors: [`WriteError`]; after the last EBUSY, `Busy` with the kernel's answer.
pub fn write_array_attr(
    root: &Root,
    array: &str,
    attr: &str,
    value: &str,
) -> Result<(), WriteError> {
    let path = super::attr_path(root, array, attr);
    retry_busy(|| write_attr(&path, value), std::thread::sleep)?;
    let Ok(Some(now)) = crate::host::read_optional(&path) else {
        return Ok(());
    };
    let now = now.trim();
    match holds(attr, value.trim(), now) {
        Some(false) => Err(WriteError::NotTaken {
            path,
            value: value.to_string(),
            now: now.to_string(),
        }),
        Some(true) | None => Ok(()),
    }
}

/// Runs `attempt` until it succeeds, fails otherwise than `Busy`, or has been tried
/// [`BUSY_TRIES`] times; `pause` waits between tries (doubling from [`BUSY_FIRST_PAUSE`]).
fn retry_busy(
    mut attempt: impl FnMut() -> Result<(), WriteError>,
    mut pause: impl FnMut(std::time::Duration),
) -> Result<(), WriteError> {
    let mut wait = BUSY_FIRST_PAUSE;
    let mut tries = 1;
    loop {
        match attempt() {
            Err(e @ WriteError::Busy { .. }) if tries < BUSY_TRIES => {
                tracing::debug!("{e}; trying again in {wait:?}");
                pause(wait);
                wait *= 2;
                tries += 1;
            }
            r => return r,
        }
    }
}

/// Whether the text `now` an md attribute reads right after `written` was written to it shows
/// the write took; `None` where the attribute's read-back form is not one md fixes (unknown
/// attributes, `sync_action` words that start a sync md may finish or turn at once). Known:
/// - `sync_action`: `frozen` reads `frozen`; `idle` reads anything but `frozen`; `check` and
///   `repair` read the word, or `idle` when a small array finished already;
/// - `sync_speed_min`, `sync_speed_max`, `sync_io_depth`: `N` reads `N (local)`, `system`
///   reads `M (system)`;
/// - `sync_min`, `sync_max`, `resync_start`: the text written.
///
/// Source: `drivers/md/md.c` (`action_show`, `sync_min_show`, `min_sync_show`,
/// `resync_start_show`).
pub fn holds(attr: &str, written: &str, now: &str) -> Option<bool> {
    use crate::model::{LimitOrigin, SpeedLimit, SyncAction};
    match attr {
        "sync_action" => {
            let now = SyncAction::from(now);
            match SyncAction::from(written) {
                SyncAction::Frozen => Some(now == SyncAction::Frozen),
                SyncAction::Idle => Some(now != SyncAction::Frozen),
                w @ (SyncAction::Check | SyncAction::Repair) => {
                    Some(now == w || now == SyncAction::Idle)
                }
                _ => None,
            }
        }
        "sync_speed_min" | "sync_speed_max" | "sync_io_depth" => {
            let r = SpeedLimit::parse(now);
            Some(if written == LimitOrigin::System.as_str() {
                r.is_some_and(|r| r.system)
            } else {
                r.is_some_and(|r| !r.system && r.kib_s.to_string() == written)
            })
        }
        "sync_min" | "sync_max" | "resync_start" => Some(now == written),
        _ => None,
    }
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
    fn busy_is_tried_again_a_bounded_number_of_times() {
        let busy = || {
            WriteError::new(
                Path::new("/x"),
                "idle",
                io::Error::from_raw_os_error(libc::EBUSY),
            )
        };
        // Refused twice, then taken: two pauses, doubling.
        let mut left = 2;
        let mut pauses = Vec::new();
        let r = retry_busy(
            || {
                if left > 0 {
                    left -= 1;
                    Err(busy())
                } else {
                    Ok(())
                }
            },
            |d| pauses.push(d),
        );
        assert!(r.is_ok());
        assert_eq!(pauses, [BUSY_FIRST_PAUSE, BUSY_FIRST_PAUSE * 2]);
        // Always refused: BUSY_TRIES tries, then the kernel's answer.
        let mut tries = 0;
        let e = retry_busy(
            || {
                tries += 1;
                Err(busy())
            },
            |_| {},
        )
        .unwrap_err();
        assert_eq!(tries, BUSY_TRIES);
        assert!(matches!(e, WriteError::Busy { .. }), "{e:?}");
        assert_eq!(io::Error::from(e).raw_os_error(), Some(libc::EBUSY));
        // Another refusal is not retried.
        let mut tries = 0;
        let e = retry_busy(
            || {
                tries += 1;
                Err(WriteError::new(
                    Path::new("/x"),
                    "x",
                    io::Error::from_raw_os_error(libc::EINVAL),
                ))
            },
            |_| {},
        );
        assert!(matches!(e, Err(WriteError::Invalid { .. })));
        assert_eq!(tries, 1);
    }

    #[test]
    fn read_back_forms() {
        assert_eq!(holds("sync_action", "frozen", "frozen"), Some(true));
        assert_eq!(holds("sync_action", "frozen", "resync"), Some(false));
        assert_eq!(holds("sync_action", "idle", "resync"), Some(true));
        assert_eq!(holds("sync_action", "idle", "frozen"), Some(false));
        assert_eq!(holds("sync_action", "check", "idle"), Some(true));
        assert_eq!(holds("sync_action", "check", "frozen"), Some(false));
        assert_eq!(holds("sync_action", "resync", "recover"), None);
        assert_eq!(holds("sync_speed_min", "5", "5 (local)"), Some(true));
        assert_eq!(holds("sync_speed_min", "5", "1000 (system)"), Some(false));
        assert_eq!(holds("sync_io_depth", "system", "32 (system)"), Some(true));
        assert_eq!(holds("sync_io_depth", "system", "32 (local)"), Some(false));
        assert_eq!(holds("resync_start", "none", "none"), Some(true));
        assert_eq!(holds("sync_min", "0", "2048"), Some(false));
        assert_eq!(holds("bitmap/location", "+8", "none"), None);
    }

    #[test]
    fn a_write_that_reads_back_otherwise_is_reported_with_the_kernels_answer() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::new(d.path());
        std::fs::create_dir_all(root.sys("block/md0/md")).unwrap();
        std::fs::write(root.sys("block/md0/md/sync_action"), "idle\n").unwrap();
        // A regular file reads back what was written: taken.
        write_array_attr(&root, "md0", "sync_action", "frozen\n").unwrap();
        let p = root.sys("block/md0/md/sync_min");
        std::fs::write(&p, "2048\n").unwrap();
        write_array_attr(&root, "md0", "sync_min", "0\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "0\n");
        // An attribute that swallows the write and reads back otherwise (/dev/null reads
        // empty): reported with what it reads.
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink("/dev/null", &p).unwrap();
        let e = write_array_attr(&root, "md0", "sync_min", "0\n").unwrap_err();
        assert!(
            matches!(e, WriteError::NotTaken { ref now, .. } if now.is_empty()),
            "{e:?}"
        );
        assert!(e.to_string().ends_with("but it reads back \"\""), "{e}");
        // Attributes whose read-back md does not fix are not judged.
        let q = root.sys("block/md0/md/bitmap_location");
        std::os::unix::fs::symlink("/dev/null", &q).unwrap();
        write_array_attr(&root, "md0", "bitmap_location", "+8\n").unwrap();
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
