//! The errors of wipe jobs: every message names the device and the reason.

use std::io;
use std::path::PathBuf;

/// Why a wipe job did not start, stopped, or failed. Messages name the device (as resolved) and
/// carry the offset and the OS error (errno) where one applies.
#[derive(Debug, thiserror::Error)]
pub enum WipeError {
    /// A safety check refused the device; nothing was written.
    #[error("{device}: refusing to wipe: {reason}")]
    Refused {
        /// The device as resolved.
        device: PathBuf,
        /// Why (mounted, swap, holders, backs `/`, ...).
        reason: String,
    },
    /// The path a caller gave is not trusted to name the device it leads to (not under `/dev`,
    /// through a directory others can change or not everyone can search, not a block device);
    /// nothing was probed or written. The reason never names a link's target.
    #[error("{device}: refusing the path: {reason}")]
    Untrusted {
        /// The path as given.
        device: PathBuf,
        /// Why.
        reason: String,
    },
    /// The device opened (or probed) is not the one that was probed (or approved): another
    /// device number or size at that node; nothing was written.
    #[error("{device}: not the device that was approved: {reason}; nothing was written")]
    Changed {
        /// The node opened.
        device: PathBuf,
        /// The numbers or sizes that differ.
        reason: String,
    },
    /// Reading a fact about the device failed (stat, sysfs, `/proc`, an ioctl).
    #[error("{device}: {what}")]
    Probe {
        /// The device as given or resolved.
        device: PathBuf,
        /// What was being read.
        what: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The device (or the `-f` data file) could not be opened.
    #[error("{path}: cannot open")]
    Open {
        /// The file that was opened.
        path: PathBuf,
        /// The OS error (EBUSY when another opener holds it exclusively).
        #[source]
        source: io::Error,
    },
    /// An I/O operation failed; the job ended at `offset` (bytes from the start of the device).
    #[error("{device}: {op} failed at offset {offset} bytes{}", errno_suffix(*errno))]
    Io {
        /// The device.
        device: PathBuf,
        /// `write`, `zeroout`, `discard`, `read`, `flush`.
        op: &'static str,
        /// Byte offset of the failing request.
        offset: u64,
        /// The raw errno; 0 when the error has none (e.g. a short write), and then the message
        /// prints no errno.
        errno: i32,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The device does not support the requested operation (e.g. `discard`).
    #[error("{device}: {op} is not supported by this device: {detail}")]
    Unsupported {
        /// The device.
        device: PathBuf,
        /// The operation (`discard`, `zeroout`).
        op: &'static str,
        /// What the kernel said.
        detail: String,
    },
    /// The job was cancelled between two blocks.
    #[error("{device}: cancelled after {done_bytes} of {total_bytes} bytes")]
    Cancelled {
        /// The device.
        device: PathBuf,
        /// Durable bytes when the job stopped.
        done_bytes: u64,
        /// Bytes the job would have written.
        total_bytes: u64,
    },
    /// `--verify` read back something other than what was written.
    #[error("{device}: verify: first mismatch at offset {offset} bytes")]
    VerifyMismatch {
        /// The device.
        device: PathBuf,
        /// Byte offset of the first differing byte.
        offset: u64,
    },
    /// A resumed job read back the part its interrupted run made durable and found something
    /// other than the wipe's data: perhaps another disk under the same name; nothing written.
    #[error(
        "{device}: refusing to resume: the part written before the interruption does not read \
         back as this wipe's data (first difference at offset {offset} bytes; another disk \
         under this name?); nothing was written; `--restart` starts again at 0"
    )]
    ResumeMismatch {
        /// The device.
        device: PathBuf,
        /// Byte offset of the first differing byte among the samples.
        offset: u64,
    },
    /// A resumed job read back the first bytes of the wipe and their SHA-256 is not the one
    /// its checkpoint recorded ([`super::plan::HeadDigest`]): perhaps another disk under the
    /// same name; nothing written.
    #[error(
        "{device}: refusing to resume: the first {len} bytes of the wipe (at offset {offset}) \
         do not read back as the checkpoint recorded them (SHA-256 {found}, recorded \
         {recorded}; another disk under this name?); nothing was written; `--restart` starts \
         again at 0"
    )]
    ResumeHeadMismatch {
        /// The device.
        device: PathBuf,
        /// Where the bytes start, bytes.
        offset: u64,
        /// How many, bytes.
        len: u64,
        /// The SHA-256 read back (hex).
        found: String,
        /// The SHA-256 the checkpoint recorded (hex).
        recorded: String,
    },
    /// Writing `md/sync_action` or `md/resync_start` failed.
    #[error("{path}: cannot write {value:?}")]
    Resync {
        /// The sysfs file.
        path: PathBuf,
        /// The value written.
        value: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The policy refused or failed to grant a lease on the speed limits.
    #[error("{device}: policy lease {holder}: {message}")]
    Lease {
        /// The device.
        device: PathBuf,
        /// The lease holder name.
        holder: String,
        /// The policy's message.
        message: String,
    },
    /// A streamed data source (`blockdev-wipe -f` of a pipe or a character device) ended
    /// before the device did; the device is written only up to `source_bytes`.
    #[error("{source_path}: data source ended after {source_bytes} bytes; {device} is {device_bytes} bytes")]
    SourceEnded {
        /// The data source.
        source_path: PathBuf,
        /// Bytes read from it before its end.
        source_bytes: u64,
        /// The device.
        device: PathBuf,
        /// The device's size (bytes the job writes).
        device_bytes: u64,
    },
    /// The checkpoint of a service job (D-Bus `StartWipe`) could not be saved before the first
    /// write: a job the next service start could not resume is not started; nothing was
    /// written. (A CLI job goes on with a warning: its user sees it on the terminal.)
    #[error("{device}: cannot save the checkpoint {}: refusing to start a wipe that could not resume", path.display())]
    Checkpoint {
        /// The device.
        device: PathBuf,
        /// The checkpoint file (`/var/lib/mdpilot/wipe/<escaped id>.json` under the root, [`super::checkpoint::path_for`]).
        path: PathBuf,
        /// The OS error (EROFS when `/var/lib/mdpilot` is read-only).
        #[source]
        source: io::Error,
    },
    /// A bad option combination (e.g. `--verify` with a streamed `-f` source); nothing was
    /// written.
    #[error("{0}")]
    Usage(String),
    /// No random key: getrandom(2) failed (the message is the OS error's).
    #[error(transparent)]
    Random(io::Error),
    /// An internal failure (a bug): a job or worker thread panicked. Not a refusal: the device
    /// may have been partly written.
    #[error("{0}")]
    Internal(String),
}

/// ` (errno N)` when there is an OS error, else nothing: a message never says "errno 0".
fn errno_suffix(errno: i32) -> String {
    if errno == 0 {
        String::new()
    } else {
        format!(" (errno {errno})")
    }
}

impl WipeError {
    /// An [`WipeError::Io`] with the errno taken from `source`.
    pub fn io(device: &std::path::Path, op: &'static str, offset: u64, source: io::Error) -> Self {
        WipeError::Io {
            device: device.to_path_buf(),
            op,
            offset,
            errno: source.raw_os_error().unwrap_or(0),
            source,
        }
    }
}
