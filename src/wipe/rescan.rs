//! The hand-over after a wipe: the kernel and udev are told the device changed, so udev,
//! udisks2 and an installer's partitioner forget partitions and signatures that are gone.
//!
//! Two steps, in this order, before the job reports its end: BLKRRPART on the job's own
//! (exclusive) descriptor where the plan asks for it ([`super::plan::Plan::reread_partitions`],
//! as wipefs(8) does), and, once the device is closed, a synthetic `change` uevent (`change`
//! written to `/sys/class/block/<name>/uevent`, Documentation/ABI/testing/sysfs-uevent) so
//! udev re-probes it (`udevadm trigger --action=change` does the same).

use super::sink::Sink;
use crate::host::Root;

/// What the hand-over did, for the job's [`super::Outcome`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandOver {
    /// BLKRRPART succeeded.
    pub partitions_reread: bool,
    /// The `change` uevent was written.
    pub uevent_sent: bool,
}

/// BLKRRPART through `sink` when `wanted`. A failure is logged, not fatal (the data is wiped;
/// only the kernel's view of partitions is stale), and EINVAL / ENOTTY are silent: the device
/// cannot have partitions (a loop device without partition scanning, a test sink), so none
/// can be stale. Returns whether the table was re-read.
pub fn reread(sink: &dyn Sink, device: &str, wanted: bool) -> bool {
    if !wanted {
        return false;
    }
    match sink.reread_partitions() {
        Ok(()) => true,
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOTTY)) => false,
        Err(e) => {
            tracing::warn!("{device}: re-reading the partition table (BLKRRPART) failed: {e}");
            false
        }
    }
}

/// Writes `change` to `/sys/class/block/<name>/uevent` under `root`, through the one writer
/// ([`crate::sysfs::send_uevent`]: never creates the file).
///
/// Errors: [`crate::sysfs::WriteError`] (`Gone` when the device is gone or the root has no such
/// file).
pub fn send_change(root: &Root, name: &str) -> Result<(), crate::sysfs::WriteError> {
    crate::sysfs::send_uevent(root, name, "change")
}
