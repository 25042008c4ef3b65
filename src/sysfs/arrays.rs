//! The one list of md arrays (`/sys/block/*/md`), single attributes of an array as text or typed
//! values, and the kernel paths of the attributes and speed-limit knobs for messages.
//!
//! Source of truth: kernel Documentation/admin-guide/md.rst (`md/sync_min`, `md/resync_start`,
//! `md/sync_completed`, `md/uuid`) and Documentation/ABI/stable/sysfs-block (`dev`).

use super::read_parsed;
use crate::host::{read_optional, Root};
use crate::model::{parse_plain_u64, SyncCompleted};
pub use crate::vocab::ResyncStart;
use std::fs::File;
use std::path::PathBuf;

/// Kernel names of the md arrays sysfs knows: the entries of `/sys/block` under `root` that have
/// an `md/` directory, sorted. Empty when `/sys/block` cannot be read. The one array list: every
/// caller filters it further (valid names, a given attribute) where it needs to.
pub fn list_arrays(root: &Root) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(root.sys("block"))
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().join("md").is_dir())
                .filter_map(|e| e.file_name().to_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// `/sys/block/<array>/md/<attr>` under `root` (`attr` may hold a `/`: `dev-sda/state`).
pub fn attr_path(root: &Root, array: &str, attr: &str) -> PathBuf {
    root.sys("block").join(array).join("md").join(attr)
}

/// True when `/sys/block/<array>/md/<attr>` exists under `root`.
pub fn has_attr(root: &Root, array: &str, attr: &str) -> bool {
    attr_path(root, array, attr).exists()
}

/// The absolute kernel path of an array attribute, `/sys/block/<array>/md/<attr>`, for messages
/// and the policy's knob names (resolve it under a [`Root`] with [`Root::path`]).
pub fn array_attr_kernel_path(array: &str, attr: &str) -> String {
    format!("/sys/block/{array}/md/{attr}")
}

/// The absolute kernel path of a global md knob, `/proc/sys/dev/raid/<name>` (`name` is
/// `speed_limit_min`, `speed_limit_max` or `sync_io_depth`), for messages and the policy's knob
/// names.
pub fn global_knob_kernel_path(name: &str) -> String {
    format!("/proc/sys/dev/raid/{name}")
}

/// The text of `/sys/block/<array>/md/<attr>` under `root`, trailing whitespace removed; `None`
/// where missing, and where unreadable (logged at debug: callers that need the reason read the
/// file with [`crate::host::read_optional`] on [`attr_path`]).
pub fn read_attr(root: &Root, array: &str, attr: &str) -> Option<String> {
    let path = attr_path(root, array, attr);
    match read_optional(&path) {
        Ok(t) => t.map(|t| t.trim().to_string()),
        Err(e) => {
            tracing::debug!("cannot read {}: {e}", path.display());
            None
        }
    }
}

/// `md/sync_min` of `array`: where the next check or repair starts, 512-byte sectors; `None`
/// where missing or not a number.
pub fn read_sync_min(root: &Root, array: &str) -> Option<u64> {
    read_parsed(&attr_path(root, array, "sync_min"), parse_plain_u64)
}

/// `md/sync_completed` of `array` (`none`, `delayed` or `done / total` in 512-byte sectors);
/// `None` where missing or not understood.
pub fn read_sync_completed(root: &Root, array: &str) -> Option<SyncCompleted> {
    read_parsed(
        &attr_path(root, array, "sync_completed"),
        SyncCompleted::parse,
    )
}

/// `md/resync_start` of `array`; `None` where missing or not understood.
pub fn read_resync_start(root: &Root, array: &str) -> Option<ResyncStart> {
    read_parsed(&attr_path(root, array, "resync_start"), ResyncStart::parse)
}

/// The device number of block device `kernel` as sysfs prints it (`9:127`,
/// `/sys/block/<kernel>/dev`); `None` where missing.
pub fn block_dev_text(root: &Root, kernel: &str) -> Option<String> {
    read_optional(&root.sys("block").join(kernel).join("dev"))
        .ok()
        .flatten()
        .map(|t| t.trim().to_string())
}

/// `/proc/mdstat` under `root` (for messages, and the watcher's poll).
pub fn mdstat_path(root: &Root) -> PathBuf {
    root.proc("mdstat")
}

/// Opens `/proc/mdstat` under `root` read-only, for `POLLPRI` (md notifies every change).
///
/// Errors: the open's (ENOENT when the md driver is not loaded).
pub fn open_mdstat(root: &Root) -> std::io::Result<File> {
    File::open(mdstat_path(root))
}

/// Opens `/sys/block/<array>/md/<attr>` under `root` read-only, for `POLLPRI` (md.rst: the
/// pollable attributes `array_state`, `sync_action`, `degraded`, `sync_completed`...).
///
/// Errors: the open's (ENOENT for an attribute this array or kernel lacks).
pub fn open_attr(root: &Root, array: &str, attr: &str) -> std::io::Result<File> {
    File::open(attr_path(root, array, attr))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn the_array_list_and_typed_reads() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::new(d.path());
        assert!(list_arrays(&root).is_empty());
        for a in ["md1", "md0"] {
            fs::create_dir_all(root.sys(format!("block/{a}/md"))).unwrap();
        }
        fs::create_dir_all(root.sys("block/sda")).unwrap();
        fs::create_dir_all(root.sys("block/md9")).unwrap();
        assert_eq!(list_arrays(&root), ["md0", "md1"]);
        let w = |a: &str, t: &str| fs::write(attr_path(&root, "md0", a), t).unwrap();
        w("sync_min", "2048\n");
        w("resync_start", "none\n");
        w("sync_completed", "10 / 20\n");
        assert_eq!(read_sync_min(&root, "md0"), Some(2048));
        assert_eq!(read_resync_start(&root, "md0"), Some(ResyncStart::InSync));
        assert_eq!(
            read_sync_completed(&root, "md0"),
            Some(SyncCompleted::Sectors {
                done: 10,
                total: 20
            })
        );
        w("resync_start", "4096\n");
        assert_eq!(
            read_resync_start(&root, "md0"),
            Some(ResyncStart::Sector(4096))
        );
        assert_eq!(read_sync_min(&root, "md1"), None);
        assert_eq!(read_attr(&root, "md0", "sync_min").as_deref(), Some("2048"));
        assert!(has_attr(&root, "md0", "sync_min"));
        assert_eq!(
            array_attr_kernel_path("md0", "sync_speed_min"),
            "/sys/block/md0/md/sync_speed_min"
        );
        assert_eq!(
            global_knob_kernel_path("speed_limit_max"),
            "/proc/sys/dev/raid/speed_limit_max"
        );
    }
}
