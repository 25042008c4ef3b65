//! The one kernel-access layer of mdpilot under a [`Root`], reads and writes: [`collect`]
//! (`/proc/mdstat` parsed and enriched), an array's sysfs attributes as typed values
//! ([`read_array`]), the speed limits ([`read_speed_limits`], and [`read_limit`], the one reader
//! of the `N` / `N (local|system)` files, which the policy's knobs and the simulator use too),
//! and in the submodules:
//! - [`arrays`]: the one array list ([`list_arrays`]), single attributes (`sync_min`,
//!   `resync_start`, `sync_completed` typed) and the kernel paths of attributes for messages;
//! - [`block`]: block devices (partitions, holders, slaves, queue limits) and an array's members
//!   with their data regions, for the wipe probe and the check scheduler;
//! - [`pressure`]: the io pressure (`/proc/pressure/io`) and the power source
//!   (`/sys/class/power_supply`), for the check throttle and guards;
//! - [`proc`]: `/proc/self/mountinfo` and `/proc/swaps`;
//! - [`udev`]: the udev database's `MD_NAME`/`MD_UUID` and the `/dev/md/` links of an array;
//! - [`write`](mod@write): the one writer ([`write_attr`]), which never creates a file.
//!
//! Outside this layer only `wipe/sink`, `wipe/ioctl` (device I/O), `sim` (the simulated tree) and
//! `host` (the root, the process's own `/proc/self/status`) name kernel paths.
//!
//! Source of truth: the kernel's Documentation/admin-guide/md.rst (`/sys/block/mdN/md/*`,
//! `dev-*/{state,slot,errors}`), Documentation/ABI/stable/sysfs-block (`queue/*`) and
//! Documentation/admin-guide/sysctl (`/proc/sys/dev/raid/speed_limit_{min,max}`, KiB/s).
//!
//! Missing files are normal (older kernels, containers, test roots): the field is `None`, never an
//! error. A file that exists but cannot be read (EACCES, EIO) or holds text we do not understand
//! is logged with `tracing::warn!` and left `None` as well, so `mdpilot status` always shows what
//! it can. Value parsing is kept in small pure functions below, tested without a filesystem.

use crate::host::{read_optional, Root};
use crate::model::{
    parse_plain_u64, ArrayState, ArraySysfs, BitmapType, ConsistencyPolicy, MdStat, MemberSysfs,
    SpeedLimit, SyncAction, SyncCompleted,
};
use std::path::{Path, PathBuf};

pub mod arrays;
pub mod block;
pub mod pressure;
pub mod proc;
pub mod udev;
pub mod write;

pub use arrays::{
    array_attr_kernel_path, attr_path, global_knob_kernel_path, has_attr, list_arrays, read_attr,
    read_resync_start, read_sync_completed, read_sync_min, ResyncStart,
};
pub use block::{MdDetail, MdMember};
pub use write::{send_uevent, write_array_attr, write_attr, WriteError};

/// Why `/proc/mdstat` could not be read (see [`collect`]).
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    /// `/proc/mdstat` does not exist: md is not built in and the module is not loaded.
    #[error("no /proc/mdstat: the md driver is not loaded")]
    NoMdstat,
    /// `/proc/mdstat` exists but reading it failed.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file (under the root).
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Reads `/proc/mdstat` under `root`, parses it and enriches it with the speed limits and sysfs
/// (see [`enrich`]): the whole model, as `mdpilot status` and the service show it.
///
/// Errors: [`CollectError::NoMdstat`] when the file is missing, [`CollectError::Read`] when it
/// cannot be read. Parse problems are not errors: they are listed in [`MdStat::errors`]. Bytes
/// that are not UTF-8 are replaced (U+FFFD) before parsing.
pub fn collect(root: &Root) -> Result<MdStat, CollectError> {
    #[cfg(test)]
    COLLECTIONS.with(|c| c.set(c.get() + 1));
    let mut stat = read_mdstat(root)?;
    enrich(root, &mut stat);
    Ok(stat)
}

#[cfg(test)]
thread_local! {
    /// How many times [`collect`] ran on this thread (unit tests count a step's collections).
    pub static COLLECTIONS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Reads and parses `/proc/mdstat` under `root` only: no speed limits, no sysfs (for callers
/// that poll often and enrich selectively). Errors as [`collect`].
pub fn read_mdstat(root: &Root) -> Result<MdStat, CollectError> {
    let path = arrays::mdstat_path(root);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(CollectError::NoMdstat),
        Err(source) => return Err(CollectError::Read { path, source }),
    };
    Ok(crate::mdstat::parse(&String::from_utf8_lossy(&bytes)))
}

/// The global resync speed limits, `/proc/sys/dev/raid/speed_limit_{min,max}`, in KiB/s.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpeedLimits {
    /// `speed_limit_min`; `None` where absent or unreadable.
    pub min_kib_s: Option<u64>,
    /// `speed_limit_max`; `None` where absent or unreadable.
    pub max_kib_s: Option<u64>,
}

/// Reads `/proc/sys/dev/raid/speed_limit_{min,max}` under `root`. Never fails (see module doc).
pub fn read_speed_limits(root: &Root) -> SpeedLimits {
    let dir = root.proc("sys/dev/raid");
    let read = |f: &str| lenient(read_limit(&dir.join(f), LimitForm::Global)).map(|l| l.kib_s);
    SpeedLimits {
        min_kib_s: read("speed_limit_min"),
        max_kib_s: read("speed_limit_max"),
    }
}

/// Which text a speed-limit file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitForm {
    /// `/proc/sys/dev/raid/speed_limit_{min,max}`: a bare `N` ([`SpeedLimit::parse_global`]).
    Global,
    /// `/sys/block/mdN/md/sync_speed_{min,max}`: `N (local)` / `N (system)`
    /// ([`SpeedLimit::parse`]).
    Array,
}

/// Why a speed-limit file gave no value (see [`read_limit`]); each names the file.
#[derive(Debug, thiserror::Error)]
pub enum LimitError {
    /// The file does not exist (`ENOENT`/`ENOTDIR`).
    #[error("{} does not exist", path.display())]
    Missing {
        /// The file.
        path: PathBuf,
    },
    /// Reading failed (EACCES, EIO, EISDIR...).
    #[error("cannot read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The text is not a limit of the expected [`LimitForm`].
    #[error("{} holds {text:?}, not a speed limit in KiB/s", path.display())]
    NotNumeric {
        /// The file.
        path: PathBuf,
        /// What it held (trailing whitespace removed).
        text: String,
    },
}

/// Reads one speed-limit file strictly: the one reader of the `N` / `N (local|system)` forms,
/// used by the status model, the policy's knobs and the simulator. KiB/s.
///
/// Errors: [`LimitError`] (missing, unreadable, or not of `form`).
pub fn read_limit(path: &Path, form: LimitForm) -> Result<SpeedLimit, LimitError> {
    let text = match read_optional(path) {
        Ok(Some(t)) => t,
        Ok(None) => {
            return Err(LimitError::Missing {
                path: path.to_path_buf(),
            })
        }
        Err(source) => {
            return Err(LimitError::Read {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let parsed = match form {
        LimitForm::Global => SpeedLimit::parse_global(&text),
        LimitForm::Array => SpeedLimit::parse(&text),
    };
    parsed.ok_or(LimitError::NotNumeric {
        path: path.to_path_buf(),
        text,
    })
}

/// A strict read made lenient as the module doc says: missing or empty is `None`, anything else
/// that fails is logged and `None`.
fn lenient(r: Result<SpeedLimit, LimitError>) -> Option<SpeedLimit> {
    match r {
        Ok(l) => Some(l),
        Err(LimitError::Missing { .. }) => None,
        Err(LimitError::NotNumeric { text, .. }) if text.trim().is_empty() => None,
        Err(LimitError::NotNumeric { path, text }) => {
            tracing::warn!("{}: cannot understand {:?}", path.display(), text.trim());
            None
        }
        Err(LimitError::Read { path, source }) => {
            tracing::warn!("cannot read {}: {source}", path.display());
            None
        }
    }
}

/// True when `/sys/block/<name>/md` exists under `root`, i.e. sysfs knows the array.
pub fn has_array(root: &Root, name: &str) -> bool {
    block_dir(root, name).join("md").is_dir()
}

fn block_dir(root: &Root, name: &str) -> PathBuf {
    root.sys("block").join(name)
}

/// Reads `/sys/block/<name>/md/*`, `md/dev-*/{state,slot,errors}` and
/// `/sys/block/<name>/queue/{logical_block_size,physical_block_size,optimal_io_size}` under
/// `root`. `name` is the kernel name (`md0`, `md_d0`, `md127`). Every field is `None` (members
/// empty) where its file is missing; never fails (see module doc).
///
/// The name fields (`metadata_name`, `named_device`) come from the udev database and `/dev/md`
/// under `root` ([`udev`]), as does `mdadm_uuid` (udev's `MD_UUID`, else `md/uuid` regrouped);
/// [`read_array_at`] leaves the names `None`.
pub fn read_array(root: &Root, name: &str) -> ArraySysfs {
    let base = read_array_at(&block_dir(root, name));
    let udev = udev::udev_names(root, name);
    ArraySysfs {
        metadata_name: udev.metadata_name,
        mdadm_uuid: udev.mdadm_uuid.or_else(|| base.mdadm_uuid.clone()),
        named_device: udev::named_device(root, name),
        ..base
    }
}

/// [`read_array`] for a block device's sysfs directory given as a path (`/sys/block/md0`, or
/// `/sys/dev/block/9:0` as the wipe probe finds it): reads `<dir>/md/*` and `<dir>/queue/*`
/// only, so the name fields read by [`read_array`] are `None` (`mdadm_uuid` is `md/uuid`
/// regrouped).
pub fn read_array_at(dir: &Path) -> ArraySysfs {
    let md = dir.join("md");
    let queue = dir.join("queue");
    let word = |f: &str| read_parsed(&md.join(f), parse_word);
    let num = |f: &str| read_parsed(&md.join(f), parse_plain_u64);
    let limit = |f: &str| lenient(read_limit(&md.join(f), LimitForm::Array));
    ArraySysfs {
        array_state: read_array_state_at(dir),
        level: word("level"),
        raid_disks: read_parsed(&md.join("raid_disks"), parse_raid_disks),
        degraded: read_parsed(&md.join("degraded"), |s| {
            parse_plain_u64(s)?.try_into().ok()
        }),
        sync_action: read_sync_action_at(dir),
        sync_completed: read_parsed(&md.join("sync_completed"), SyncCompleted::parse),
        sync_speed_kib_s: read_parsed(&md.join("sync_speed"), parse_sync_speed).flatten(),
        sync_speed_min: limit("sync_speed_min"),
        sync_speed_max: limit("sync_speed_max"),
        metadata_version: word("metadata_version"),
        chunk_size_bytes: num("chunk_size"),
        component_size_kib: num("component_size"),
        uuid: word("uuid"),
        mismatch_cnt: num("mismatch_cnt"),
        logical_block_size: read_parsed(&queue.join("logical_block_size"), parse_plain_u64),
        physical_block_size: read_parsed(&queue.join("physical_block_size"), parse_plain_u64),
        optimal_io_size: read_parsed(&queue.join("optimal_io_size"), parse_plain_u64),
        members: read_members(&md),
        consistency_policy: word("consistency_policy").map(|w| ConsistencyPolicy::from(w.as_str())),
        bitmap_location: word("bitmap/location"),
        bitmap_type: read_parsed(&md.join("bitmap_type"), parse_bitmap_type),
        md_logical_block_size: num("logical_block_size"),
        sync_min_sectors: num("sync_min"),
        last_sync_action: read_parsed(&md.join("last_sync_action"), |s| Some(SyncAction::from(s))),
        metadata_name: None,
        mdadm_uuid: word("uuid").as_deref().and_then(udev::mdadm_uuid),
        named_device: None,
    }
}

/// `<dir>/md/sync_action` of a block device's sysfs directory; `None` where missing or empty.
pub fn read_sync_action_at(dir: &Path) -> Option<SyncAction> {
    read_parsed(&dir.join("md/sync_action"), |s| Some(SyncAction::from(s)))
}

/// `<dir>/md/array_state` of a block device's sysfs directory; `None` where missing or empty.
pub fn read_array_state_at(dir: &Path) -> Option<ArrayState> {
    read_parsed(&dir.join("md/array_state"), |s| Some(ArrayState::from(s)))
}

/// Adds the speed limits and each array's sysfs values to a parsed mdstat, and applies the rules
/// where sysfs wins over mdstat:
/// - `sync.action` becomes `md/sync_action` when that names a running sync (mdstat prints a
///   repair as `resync`; sysfs says `repair`). sysfs `recover` is reported as mdstat's
///   `recovery` ([`SyncAction::running_kind`]), so consumers see one vocabulary; `idle` and
///   `frozen` change nothing.
///
/// `Array::sysfs` stays `None` for arrays without `/sys/block/<name>/md` under `root`.
pub fn enrich(root: &Root, stat: &mut MdStat) {
    let limits = read_speed_limits(root);
    stat.speed_limit_min = limits.min_kib_s;
    stat.speed_limit_max = limits.max_kib_s;
    for array in &mut stat.arrays {
        if !has_array(root, &array.name) {
            continue;
        }
        let sys = read_array(root, &array.name);
        if let (Some(sync), Some(action)) = (&mut array.sync, &sys.sync_action) {
            if let Some(kind) = action.running_kind() {
                sync.action = kind;
            }
        }
        array.sysfs = Some(sys);
    }
}

/// Writes `action`'s word (`check`, `repair`, `idle`, ...) to `/sys/block/<name>/md/sync_action` under
/// `root` (kernel Documentation/admin-guide/md.rst: writing an action word starts it, `idle`
/// stops the running one), through [`write_array_attr`]: a missing array is [`WriteError::Gone`],
/// never a created file; EBUSY is tried again a few times (md answers it while a just-stopped
/// sync winds down), and the word is read back.
///
/// Errors: [`WriteError`]: `Busy` (EBUSY after the last try, EROFS on a read-only array),
/// `Invalid` (EINVAL for a word the array's level cannot do), `Gone`, `NotTaken` (it reads back
/// another word, named), `Io`.
pub fn write_sync_action(root: &Root, name: &str, action: &SyncAction) -> Result<(), WriteError> {
    write_array_attr(root, name, "sync_action", &format!("{action}\n"))
}

/// `/sys/block/<name>/md/sync_action` of array `name` under `root`; `None` where missing or
/// empty.
pub fn read_sync_action(root: &Root, name: &str) -> Option<SyncAction> {
    read_sync_action_at(&block_dir(root, name))
}

/// When array `name` was created (Unix seconds): the `ctime` of the first member superblock
/// that reads back valid ([`crate::superblock`]: offset from `md/metadata_version` and the
/// member's `size`, 4 KiB read from `/dev/<member>` under the root, read-only). `None` for
/// external metadata, an array without readable members, or a test tree without device nodes;
/// read errors are logged at debug only (a missing time only means "not skipped as young").
pub fn array_created(root: &Root, name: &str) -> Option<i64> {
    use std::os::unix::fs::FileExt;
    let md = block_dir(root, name).join("md");
    let version = read_optional(&md.join("metadata_version")).ok().flatten()?;
    let entries = std::fs::read_dir(&md).ok()?;
    for e in entries.filter_map(std::result::Result::ok) {
        let file = e.file_name().to_string_lossy().into_owned();
        let Some(member) = file.strip_prefix("dev-") else {
            continue;
        };
        let kernel = member.replace('!', "/");
        let sectors = read_parsed(
            &block::class_dir(root, member).join("size"),
            parse_plain_u64,
        );
        let Some(off) = sectors
            .and_then(|s| s.checked_mul(512))
            .and_then(|b| crate::superblock::offset_bytes(&version, b))
        else {
            continue;
        };
        let dev = root.dev(&kernel);
        let mut buf = vec![0u8; crate::superblock::READ_BYTES];
        match std::fs::File::open(&dev).and_then(|f| f.read_exact_at(&mut buf, off)) {
            Ok(()) => {
                if let Some(t) = crate::superblock::ctime(&version, &buf) {
                    return Some(t);
                }
            }
            Err(err) => tracing::debug!("{}: superblock not readable: {err}", dev.display()),
        }
    }
    None
}

pub(crate) fn read_members(md: &Path) -> Vec<MemberSysfs> {
    let entries = match std::fs::read_dir(md) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            tracing::warn!("cannot list {}: {e}", md.display());
            return Vec::new();
        }
    };
    let mut members: Vec<MemberSysfs> = entries
        .filter_map(std::result::Result::ok)
        .filter_map(|e| {
            let file = e.file_name().into_string().ok()?;
            let dev = file.strip_prefix("dev-")?;
            let dir = e.path();
            Some(MemberSysfs {
                // sysfs spells a `/` in a device name (cciss/c0d0p1) as `!`.
                name: dev.replace('!', "/"),
                state: read_parsed(&dir.join("state"), |s| Some(parse_state(s)))
                    .unwrap_or_default(),
                slot: read_parsed(&dir.join("slot"), parse_slot).flatten(),
                errors: read_parsed(&dir.join("errors"), parse_plain_u64),
            })
        })
        .collect();
    // read_dir order is arbitrary; a stable order keeps output and diffs reproducible.
    members.sort_by(|a, b| a.name.cmp(&b.name));
    members
}

/// Reads `path` and parses it; `None` when missing, unreadable or unparseable (the latter two
/// logged).
pub(crate) fn read_parsed<T>(path: &Path, parse: impl FnOnce(&str) -> Option<T>) -> Option<T> {
    match read_optional(path) {
        // An inactive array prints empty `level`, `raid_disks`...: nothing to say, not an error.
        Ok(Some(text)) if text.trim().is_empty() => None,
        Ok(Some(text)) => {
            let v = parse(text.trim());
            if v.is_none() {
                tracing::warn!("{}: cannot understand {:?}", path.display(), text.trim());
            }
            v
        }
        Ok(None) => None,
        Err(e) => {
            tracing::warn!("cannot read {}: {e}", path.display());
            None
        }
    }
}

fn parse_word(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// `md/bitmap_type` (Linux 6.19+): the words md knows with the selected one in brackets
/// (`[none] bitmap llbitmap`); a single bare word is taken as selected. `None` when no word is
/// bracketed among several.
pub fn parse_bitmap_type(s: &str) -> Option<BitmapType> {
    let words: Vec<&str> = s.split_whitespace().collect();
    let selected = words
        .iter()
        .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')));
    match (selected, words.as_slice()) {
        (Some(w), _) => Some(BitmapType::from(w)),
        (None, [one]) => Some(BitmapType::from(*one)),
        (None, _) => None,
    }
}

fn parse_raid_disks(s: &str) -> Option<u32> {
    // During a reshape md prints `new (old)`, e.g. `4 (3)`: the new count is the one in force.
    let first = s.split_whitespace().next()?;
    parse_plain_u64(first)?.try_into().ok()
}

/// `md/sync_speed`: KiB/s, or `none` when no sync runs (→ `Some(None)`).
fn parse_sync_speed(s: &str) -> Option<Option<u64>> {
    if s == crate::vocab::NONE {
        return Some(None);
    }
    parse_plain_u64(s).map(Some)
}

/// `dev-*/state`: comma-separated words (`in_sync,write_mostly`).
fn parse_state(s: &str) -> Vec<crate::model::MemberState> {
    s.split([',', ' ', '\n'])
        .filter(|w| !w.is_empty())
        .map(crate::model::MemberState::from)
        .collect()
}

/// `dev-*/slot`: a role number, or `none` for a spare (→ `Some(None)`).
fn parse_slot(s: &str) -> Option<Option<u32>> {
    if s == crate::vocab::NONE {
        return Some(None);
    }
    parse_plain_u64(s)?.try_into().ok().map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    #[test]
    fn array_created_reads_the_first_valid_member_superblock() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::new(d.path());
        let base = d.path();
        write(base, "sys/block/md0/md/metadata_version", "1.2\n");
        for m in ["vdb", "vdc"] {
            fs::create_dir_all(base.join(format!("sys/block/md0/md/dev-{m}"))).unwrap();
            write(base, &format!("sys/class/block/{m}/size"), "2097152\n");
        }
        assert_eq!(array_created(&root, "md0"), None, "no device nodes");
        // vdb holds garbage, vdc a v1.2 superblock at 4 KiB created at 1764547200.
        write(base, "dev/vdb", &"x".repeat(8192));
        let mut img = vec![0u8; 8192];
        img[4096..4100].copy_from_slice(&crate::superblock::MD_SB_MAGIC.to_le_bytes());
        img[4096 + 64..4096 + 72].copy_from_slice(&(1_764_547_200u64 | (7 << 40)).to_le_bytes());
        fs::write(base.join("dev/vdc"), img).unwrap();
        assert_eq!(array_created(&root, "md0"), Some(1_764_547_200));
        write(base, "sys/block/md0/md/metadata_version", "external:imsm\n");
        assert_eq!(array_created(&root, "md0"), None);
    }

    #[test]
    fn value_forms() {
        assert_eq!(
            SpeedLimit::parse("1000 (system)"),
            Some(SpeedLimit {
                kib_s: 1000,
                system: true
            })
        );
        assert_eq!(
            SpeedLimit::parse("50000 (local)").map(|l| l.system),
            Some(false)
        );
        assert_eq!(SpeedLimit::parse("fast"), None);
        assert_eq!(
            SyncCompleted::parse("1024 / 4096"),
            Some(SyncCompleted::Sectors {
                done: 1024,
                total: 4096
            })
        );
        assert_eq!(
            SyncCompleted::parse("delayed"),
            Some(SyncCompleted::Delayed)
        );
        assert_eq!(SyncCompleted::parse("x / y"), None);
        assert_eq!(parse_raid_disks("4 (3)"), Some(4));
        assert_eq!(parse_bitmap_type("[none] bitmap"), Some(BitmapType::None));
        assert_eq!(
            parse_bitmap_type("none bitmap [llbitmap]"),
            Some(BitmapType::Llbitmap)
        );
        assert_eq!(parse_bitmap_type("bitmap"), Some(BitmapType::Bitmap));
        assert_eq!(parse_bitmap_type("none bitmap"), None);
        assert_eq!(parse_slot("none"), Some(None));
        assert_eq!(
            parse_state("in_sync,write_mostly"),
            vec!["in_sync", "write_mostly"]
        );
    }

    #[test]
    fn missing_tree_gives_empty_values() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::new(d.path());
        assert_eq!(read_array(&root, "md0"), ArraySysfs::default());
        assert_eq!(read_speed_limits(&root), SpeedLimits::default());
        assert!(!has_array(&root, "md0"));
    }

    #[test]
    fn reads_a_tree_and_repair_wins() {
        let d = tempfile::tempdir().unwrap();
        let b = d.path();
        write(b, "proc/sys/dev/raid/speed_limit_min", "1000\n");
        write(b, "proc/sys/dev/raid/speed_limit_max", "200000\n");
        write(b, "sys/block/md0/md/sync_action", "repair\n");
        write(b, "sys/block/md0/md/sync_completed", "2048 / 1046528\n");
        write(b, "sys/block/md0/md/sync_speed_min", "1000 (system)\n");
        write(b, "sys/block/md0/md/level", "raid1\n");
        write(b, "sys/block/md0/md/dev-cciss!c0d0p1/state", "in_sync\n");
        write(b, "sys/block/md0/md/dev-cciss!c0d0p1/slot", "0\n");
        write(b, "sys/block/md0/md/dev-sdb/slot", "none\n");
        write(b, "sys/block/md0/queue/optimal_io_size", "0\n");
        let mut stat = crate::mdstat::parse(
            "md0 : active raid1 sdb[1] cciss/c0d0p1[0]\n      523264 blocks super 1.2 [2/2] [UU]\n      [>....................]  resync =  0.2% (1024/523264) finish=1.0min speed=1024K/sec\n",
        );
        enrich(&Root::new(b), &mut stat);
        assert_eq!(stat.speed_limit_min, Some(1000));
        assert_eq!(stat.speed_limit_max, Some(200000));
        let a = &stat.arrays[0];
        assert_eq!(a.sync.as_ref().unwrap().action, "repair");
        let s = a.sysfs.as_ref().unwrap();
        assert_eq!(s.level.as_deref(), Some("raid1"));
        assert_eq!(s.optimal_io_size, Some(0));
        assert_eq!(s.members.len(), 2);
        assert_eq!(s.members[0].name, "cciss/c0d0p1");
        assert_eq!(s.members[0].slot, Some(0));
        assert_eq!(s.members[1].slot, None);
        assert_eq!(s.members[1].state, Vec::<crate::model::MemberState>::new());
    }

    /// IN_OPEN events on `path` while `f` runs (inotify queues them at the open itself, so
    /// the count is exact once `f` returns).
    fn opens_of(path: &Path, f: impl FnOnce()) -> usize {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: plain inotify calls on a descriptor this function owns and closes.
        unsafe {
            let fd = libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK);
            assert!(fd >= 0);
            assert!(libc::inotify_add_watch(fd, c.as_ptr(), libc::IN_OPEN) >= 0);
            f();
            let mut buf = [0u8; 4096];
            let mut n = 0;
            loop {
                let r = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
                if r <= 0 {
                    break;
                }
                n += usize::try_from(r).unwrap() / std::mem::size_of::<libc::inotify_event>();
            }
            libc::close(fd);
            n
        }
    }

    #[test]
    fn read_array_reads_the_udev_entry_once_and_sync_min() {
        let d = tempfile::tempdir().unwrap();
        let b = d.path();
        write(b, "sys/block/md0/dev", "9:0\n");
        write(b, "sys/block/md0/md/sync_min", "8192\n");
        write(
            b,
            "run/udev/data/b9:0",
            "E:MD_NAME=host:root\nE:MD_UUID=3b6c2a6e:0d0e4b7a:9d5e8a7b:1c2d3e4f\n",
        );
        let mut s = ArraySysfs::default();
        let opens = opens_of(&b.join("run/udev/data/b9:0"), || {
            s = read_array(&Root::new(b), "md0");
        });
        assert_eq!(opens, 1);
        assert_eq!(s.metadata_name.as_deref(), Some("host:root"));
        assert_eq!(
            s.mdadm_uuid.as_deref(),
            Some("3b6c2a6e:0d0e4b7a:9d5e8a7b:1c2d3e4f")
        );
        assert_eq!(s.sync_min_sectors, Some(8192));
    }

    #[test]
    fn unreadable_file_is_none_not_error() {
        // A directory where a file is expected makes read() fail with EISDIR: logged, None.
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join("sys/block/md0/md/level")).unwrap();
        let s = read_array(&Root::new(d.path()), "md0");
        assert_eq!(s.level, None);
    }
}
