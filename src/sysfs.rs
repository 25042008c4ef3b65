//! Reads an array's sysfs attributes and the global md speed limits under a [`Root`].
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
use crate::model::{ArraySysfs, MdStat, MemberSysfs, SpeedLimit, SyncCompleted};
use std::path::Path;

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
    SpeedLimits {
        min_kib_s: read_parsed(&dir.join("speed_limit_min"), parse_plain_u64),
        max_kib_s: read_parsed(&dir.join("speed_limit_max"), parse_plain_u64),
    }
}

/// True when `/sys/block/<name>/md` exists under `root`, i.e. sysfs knows the array.
pub fn has_array(root: &Root, name: &str) -> bool {
    md_dir(root, name).is_dir()
}

fn md_dir(root: &Root, name: &str) -> std::path::PathBuf {
    root.sys("block").join(name).join("md")
}

/// Reads `/sys/block/<name>/md/*`, `md/dev-*/{state,slot,errors}` and
/// `/sys/block/<name>/queue/{logical_block_size,physical_block_size,optimal_io_size}` under
/// `root`. `name` is the kernel name (`md0`, `md_d0`, `md127`). Every field is `None` (members
/// empty) where its file is missing; never fails (see module doc).
pub fn read_array(root: &Root, name: &str) -> ArraySysfs {
    let md = md_dir(root, name);
    let queue = root.sys("block").join(name).join("queue");
    let word = |f: &str| read_parsed(&md.join(f), parse_word);
    let num = |f: &str| read_parsed(&md.join(f), parse_plain_u64);
    ArraySysfs {
        array_state: word("array_state"),
        level: word("level"),
        raid_disks: read_parsed(&md.join("raid_disks"), parse_raid_disks),
        degraded: read_parsed(&md.join("degraded"), |s| {
            parse_plain_u64(s)?.try_into().ok()
        }),
        sync_action: word("sync_action"),
        sync_completed: read_parsed(&md.join("sync_completed"), parse_sync_completed),
        sync_speed_kib_s: read_parsed(&md.join("sync_speed"), parse_sync_speed).flatten(),
        sync_speed_min: read_parsed(&md.join("sync_speed_min"), parse_speed_limit),
        sync_speed_max: read_parsed(&md.join("sync_speed_max"), parse_speed_limit),
        metadata_version: word("metadata_version"),
        chunk_size_bytes: num("chunk_size"),
        component_size_kib: num("component_size"),
        uuid: word("uuid"),
        mismatch_cnt: num("mismatch_cnt"),
        logical_block_size: read_parsed(&queue.join("logical_block_size"), parse_plain_u64),
        physical_block_size: read_parsed(&queue.join("physical_block_size"), parse_plain_u64),
        optimal_io_size: read_parsed(&queue.join("optimal_io_size"), parse_plain_u64),
        members: read_members(&md),
        consistency_policy: word("consistency_policy"),
        bitmap_location: word("bitmap/location"),
        metadata_name: crate::names::metadata_name(root, name),
        mdadm_uuid: crate::names::array_uuid(root, name),
        named_device: crate::names::named_device(root, name),
    }
}

/// Adds the speed limits and each array's sysfs values to a parsed mdstat, and applies the rules
/// where sysfs wins over mdstat:
/// - `sync.action` becomes `md/sync_action` when that names a running sync (mdstat prints a
///   repair as `resync`; sysfs says `repair`). sysfs `recover` is reported as mdstat's
///   `recovery`, so consumers see one vocabulary; `idle` and `frozen` change nothing.
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
        if let (Some(sync), Some(action)) = (&mut array.sync, sys.sync_action.as_deref()) {
            if let Some(a) = action_word(action) {
                sync.action = a.to_string();
            }
        }
        array.sysfs = Some(sys);
    }
}

/// Writes `word` (`check`, `repair`, `idle`, ...) to `/sys/block/<name>/md/sync_action` under
/// `root` (kernel Documentation/admin-guide/md.rst: writing an action word starts it, `idle`
/// stops the running one). The file must exist: a missing array is `NotFound`, never created.
///
/// Errors: the kernel's (`EBUSY` while another sync runs, `EINVAL` for a word the array's level
/// cannot do, `EROFS` on a read-only array) or `NotFound`.
pub fn write_sync_action(root: &Root, name: &str, word: &str) -> std::io::Result<()> {
    use std::io::Write;
    let path = md_dir(root, name).join("sync_action");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)?;
    f.write_all(format!("{word}\n").as_bytes())
}

/// `md/sync_action` → the mdstat word for a running action; `None` for `idle`, `frozen` or
/// anything unknown.
pub fn action_word(sync_action: &str) -> Option<&'static str> {
    match sync_action {
        "resync" => Some("resync"),
        "recover" | "recovery" => Some("recovery"),
        "check" => Some("check"),
        "repair" => Some("repair"),
        "reshape" => Some("reshape"),
        _ => None,
    }
}

fn read_members(md: &Path) -> Vec<MemberSysfs> {
    let entries = match std::fs::read_dir(md) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            tracing::warn!("cannot list {}: {e}", md.display());
            return Vec::new();
        }
    };
    let mut members: Vec<MemberSysfs> = entries
        .filter_map(|e| e.ok())
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
fn read_parsed<T>(path: &Path, parse: impl FnOnce(&str) -> Option<T>) -> Option<T> {
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

/// A decimal number (sysfs prints no sign).
pub fn parse_plain_u64(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn parse_word(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

fn parse_raid_disks(s: &str) -> Option<u32> {
    // During a reshape md prints `new (old)`, e.g. `4 (3)`: the new count is the one in force.
    let first = s.split_whitespace().next()?;
    parse_plain_u64(first)?.try_into().ok()
}

/// `md/sync_completed`: `none`, `delayed`, or `done / total` in 512-byte sectors.
pub fn parse_sync_completed(s: &str) -> Option<SyncCompleted> {
    match s {
        "none" => Some(SyncCompleted::None),
        "delayed" => Some(SyncCompleted::Delayed),
        _ => {
            let (d, t) = s.split_once('/')?;
            Some(SyncCompleted::Sectors {
                done: parse_plain_u64(d.trim())?,
                total: parse_plain_u64(t.trim())?,
            })
        }
    }
}

/// `md/sync_speed`: KiB/s, or `none` when no sync runs (→ `Some(None)`).
fn parse_sync_speed(s: &str) -> Option<Option<u64>> {
    if s == "none" {
        return Some(None);
    }
    parse_plain_u64(s).map(Some)
}

/// `md/sync_speed_{min,max}`: `N (local)` or `N (system)`, KiB/s; a bare `N` counts as local.
pub fn parse_speed_limit(s: &str) -> Option<SpeedLimit> {
    let mut toks = s.split_whitespace();
    let kib_s = parse_plain_u64(toks.next()?)?;
    let system = match toks.next() {
        None | Some("(local)") => false,
        Some("(system)") => true,
        Some(_) => return None,
    };
    if toks.next().is_some() {
        return None;
    }
    Some(SpeedLimit { kib_s, system })
}

/// `dev-*/state`: comma-separated words (`in_sync,write_mostly`).
fn parse_state(s: &str) -> Vec<String> {
    s.split([',', ' ', '\n'])
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// `dev-*/slot`: a role number, or `none` for a spare (→ `Some(None)`).
fn parse_slot(s: &str) -> Option<Option<u32>> {
    if s == "none" {
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
    fn value_forms() {
        assert_eq!(
            parse_speed_limit("1000 (system)"),
            Some(SpeedLimit {
                kib_s: 1000,
                system: true
            })
        );
        assert_eq!(
            parse_speed_limit("50000 (local)").map(|l| l.system),
            Some(false)
        );
        assert_eq!(parse_speed_limit("fast"), None);
        assert_eq!(
            parse_sync_completed("1024 / 4096"),
            Some(SyncCompleted::Sectors {
                done: 1024,
                total: 4096
            })
        );
        assert_eq!(
            parse_sync_completed("delayed"),
            Some(SyncCompleted::Delayed)
        );
        assert_eq!(parse_sync_completed("x / y"), None);
        assert_eq!(parse_raid_disks("4 (3)"), Some(4));
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
        assert_eq!(s.members[1].state, Vec::<String>::new());
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
