//! Block devices in sysfs, for the wipe probe, the wipe candidates and the check scheduler:
//! a device's directory by number or name, its partitions, holders, slaves and queue limits, an
//! md array's members with their data regions ([`MdDetail`]), and the disks under a device.
//!
//! Source of truth: Documentation/ABI/stable/sysfs-block (`dev`, `size` in 512-byte sectors,
//! `partition`, `holders/`, `slaves/`, `queue/*`), Documentation/admin-guide/md.rst
//! (`md/dev-*/{offset,size,state,slot,errors}`, `md/reshape_position`, `md/resync_start`).
//! Missing files read as 0 / `None` / empty (older kernels, test roots), never as errors.

use crate::host::{read_optional, Root};
use crate::model::{ArrayState, MemberSysfs};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// A device number `(major, minor)`.
pub type DevNum = (u32, u32);

/// Parses `MAJ:MIN`.
pub fn parse_devnum(s: &str) -> Option<DevNum> {
    let (a, b) = s.trim().split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// The sysfs directory of a block device by kernel name (`/sys/class/block/<name>` under `root`).
pub fn class_dir(root: &Root, name: &str) -> PathBuf {
    root.sys("class/block").join(name)
}

/// The sysfs directory of a block device by number (`/sys/dev/block/MAJ:MIN` under `root`).
pub fn devnum_dir(root: &Root, dev: DevNum) -> PathBuf {
    root.sys(format!("dev/block/{}:{}", dev.0, dev.1))
}

/// The kernel name of device `dev` (the name `/sys/dev/block/MAJ:MIN` links to), or `None`.
pub fn name_of_devnum(root: &Root, dev: DevNum) -> Option<String> {
    let link = devnum_dir(root, dev);
    std::fs::canonicalize(&link)
        .ok()
        .or_else(|| std::fs::read_link(&link).ok())
        .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()))
}

/// The size of block device `dev` in bytes, from `/sys/dev/block/MAJ:MIN/size` under `root`
/// (512-byte sectors whatever the device's block size, block/genhd.c): what BLKGETSIZE64
/// answers, read without opening the device. `None` where missing or not a number.
pub fn size_bytes_of_devnum(root: &Root, dev: DevNum) -> Option<u64> {
    read_text(&devnum_dir(root, dev), "size")
        .and_then(|s| s.trim().parse::<u64>().ok())
        .and_then(|sectors| sectors.checked_mul(512))
}

/// `<dir>/<rel>` of a block device's sysfs directory, trailing whitespace removed; `None` where
/// missing or unreadable.
pub fn read_text(dir: &Path, rel: &str) -> Option<String> {
    read_optional(&dir.join(rel)).ok().flatten()
}

/// `<dir>/<rel>` as a number (the first word); 0 where missing or not a number.
pub fn read_u64(dir: &Path, rel: &str) -> u64 {
    read_text(dir, rel)
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// `<dir>/dev`: the device number of a block device's sysfs directory.
pub fn read_devnum(dir: &Path) -> Option<DevNum> {
    read_text(dir, "dev").and_then(|s| parse_devnum(&s))
}

/// Entry names of `dir`, sorted (empty when unreadable).
fn list_dir(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// True when the block device at `dir` is a partition (has a `partition` attribute).
pub fn is_partition(dir: &Path) -> bool {
    dir.join("partition").exists()
}

/// True when the block device at `dir` is an md array (has an `md/` directory).
pub fn is_array(dir: &Path) -> bool {
    dir.join("md").is_dir()
}

/// Kernel names of the partitions of the disk at `dir` (subdirectories with a `partition`
/// attribute), sorted.
pub fn partitions(dir: &Path) -> Vec<String> {
    list_dir(dir)
        .into_iter()
        .filter(|n| is_partition(&dir.join(n)))
        .collect()
}

/// Kernel names in `<dir>/holders/` (dm, md and other devices built on this one), sorted.
pub fn holders(dir: &Path) -> Vec<String> {
    list_dir(&dir.join("holders"))
}

/// The queue limits of a block device (a partition's are its disk's). Bytes; 0 where missing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Queue {
    /// `queue/optimal_io_size` (full stripe for raid5/6; 0 = not reported).
    pub optimal_io_size: u64,
    /// `queue/minimum_io_size` (chunk size for md arrays).
    pub minimum_io_size: u64,
    /// `queue/write_zeroes_max_bytes` (0 = no zeroing offload).
    pub write_zeroes_max_bytes: u64,
    /// `queue/discard_max_bytes` (0 = no discard).
    pub discard_max_bytes: u64,
    /// `queue/discard_zeroes_data` reads 1.
    pub discard_zeroes_data: bool,
    /// `queue/rotational` reads 1.
    pub rotational: bool,
}

/// Reads [`Queue`] for the block device at `dir` (`<dir>/queue`, or `<dir>/../queue` for a
/// partition).
pub fn read_queue(dir: &Path) -> Queue {
    let q = if is_partition(dir) {
        dir.join("../queue")
    } else {
        dir.join("queue")
    };
    Queue {
        optimal_io_size: read_u64(&q, "optimal_io_size"),
        minimum_io_size: read_u64(&q, "minimum_io_size"),
        write_zeroes_max_bytes: read_u64(&q, "write_zeroes_max_bytes"),
        discard_max_bytes: read_u64(&q, "discard_max_bytes"),
        discard_zeroes_data: read_u64(&q, "discard_zeroes_data") == 1,
        rotational: read_u64(&q, "rotational") == 1,
    }
}

/// The disk a partition `dir` belongs to (the parent directory's name), or `None` for a disk.
fn disk_of_partition(dir: &Path) -> Option<String> {
    if !is_partition(dir) {
        return None;
    }
    let real = std::fs::canonicalize(dir).ok()?;
    Some(real.parent()?.file_name()?.to_string_lossy().into_owned())
}

/// The whole disk under block device `name` (`sda1` → `sda`, `nvme0n1p2` → `nvme0n1`; a disk
/// is its own), from `/sys/class/block/<name>` under `root`.
pub fn whole_disk(root: &Root, name: &str) -> String {
    disk_of_partition(&class_dir(root, name)).unwrap_or_else(|| name.to_string())
}

/// The physical disks under block device `name`: through `slaves/` (dm, md) recursively, and
/// from a partition to its disk. Bounded depth, so a malformed tree cannot loop.
pub fn base_disks(root: &Root, name: &str) -> BTreeSet<String> {
    fn walk(root: &Root, name: &str, depth: u32, out: &mut BTreeSet<String>) {
        if depth > 16 {
            return;
        }
        let dir = class_dir(root, name);
        if let Some(disk) = disk_of_partition(&dir) {
            return walk(root, &disk, depth + 1, out);
        }
        let slaves = list_dir(&dir.join("slaves"));
        if slaves.is_empty() {
            out.insert(name.to_string());
        }
        for s in slaves {
            walk(root, &s, depth + 1, out);
        }
    }
    let mut out = BTreeSet::new();
    walk(root, name, 0, &mut out);
    out
}

/// Every block device name at or below `name` (itself, slaves recursively, a partition's disk).
/// Bounded depth.
pub fn ancestry(root: &Root, name: &str) -> BTreeSet<String> {
    fn walk(root: &Root, name: &str, depth: u32, out: &mut BTreeSet<String>) {
        if depth > 16 || !out.insert(name.to_string()) {
            return;
        }
        let dir = class_dir(root, name);
        if let Some(disk) = disk_of_partition(&dir) {
            walk(root, &disk, depth + 1, out);
        }
        for s in list_dir(&dir.join("slaves")) {
            walk(root, &s, depth + 1, out);
        }
    }
    let mut out = BTreeSet::new();
    walk(root, name, 0, &mut out);
    out
}

/// A disk or partition under `/sys/block` (see [`disks_and_partitions`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct BlockEntry {
    /// Kernel name (`sda`, `sda1`).
    pub name: String,
    /// `size`: 512-byte sectors; 0 where missing.
    pub size_sectors: u64,
}

/// Every disk in `/sys/block` under `root` and every partition of it, sorted by name. Empty
/// when `/sys/block` cannot be read.
pub fn disks_and_partitions(root: &Root) -> Vec<BlockEntry> {
    let block = root.sys("block");
    let mut out = Vec::new();
    for disk in list_dir(&block) {
        let dir = block.join(&disk);
        for p in partitions(&dir) {
            let size_sectors = read_u64(&dir.join(&p), "size");
            out.push(BlockEntry {
                name: p,
                size_sectors,
            });
        }
        let size_sectors = read_u64(&dir, "size");
        out.push(BlockEntry {
            name: disk,
            size_sectors,
        });
    }
    out.sort();
    out
}

/// The md facts of an array a wipe decides from, beyond [`crate::model::ArraySysfs`]: array
/// state, reshape, resync position and members with their data regions (md.rst:
/// `array_state`, `reshape_position`, `resync_start`, `sync_completed`, `dev-*/`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct MdDetail {
    /// `md/array_state`.
    pub array_state: Option<ArrayState>,
    /// `md/reshape_position`: `none`, or a sector during / after an interrupted reshape.
    pub reshape_position: String,
    /// `md/resync_start`: `none` when in sync, else the sector the resync restarts from.
    pub resync_start: String,
    /// `md/sync_completed`: `none` or `DONE / TOTAL` in 512-byte sectors.
    pub sync_completed: String,
    /// `md/uuid` (empty where missing).
    pub uuid: String,
    /// The members (`md/dev-*`), sorted by name.
    pub members: Vec<MdMember>,
}

/// One member of an md array: what the status shows of it ([`MemberSysfs`], read by the same
/// reader as [`crate::sysfs::read_array`]) and its data region and queue limits.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MdMember {
    /// Name, `state` words, `slot`, `errors` (`md/dev-<name>/`).
    #[serde(flatten)]
    pub sysfs: MemberSysfs,
    /// The device node (`/dev/<name>` under the root).
    pub path: PathBuf,
    /// Device number (`/sys/class/block/<name>/dev`); `None` where sysfs does not say.
    pub dev: Option<DevNum>,
    /// Size in bytes (`/sys/class/block/<name>/size`, 512-byte sectors); 0 where missing.
    pub size_bytes: u64,
    /// `dev-*/offset`: start of the data region on the member, 512-byte sectors.
    pub offset_sectors: u64,
    /// `dev-*/size`: length of the data region used, KiB.
    pub size_kib: u64,
    /// The member's (or its disk's) `queue/write_zeroes_max_bytes`: 0 = no zeroing offload.
    pub write_zeroes_max_bytes: u64,
    /// The member's (or its disk's) `queue/discard_max_bytes`.
    pub discard_max_bytes: u64,
}

/// Reads [`MdDetail`] of the array whose block device sysfs directory is `dir` (members' own
/// directories looked up by name under `root`).
pub fn read_md_detail(root: &Root, dir: &Path) -> MdDetail {
    let md = dir.join("md");
    let text = |f: &str| read_text(&md, f).unwrap_or_default().trim().to_string();
    let members = super::read_members(&md)
        .into_iter()
        .map(|sysfs| {
            // sysfs spells a `/` in the name as `!`; read_members has turned it back.
            let d = md.join(format!("dev-{}", sysfs.name.replace('/', "!")));
            let cdir = class_dir(root, &sysfs.name);
            let q = read_queue(&cdir);
            MdMember {
                path: root.dev(&sysfs.name),
                dev: read_devnum(&cdir),
                size_bytes: read_u64(&cdir, "size") * 512,
                offset_sectors: read_u64(&d, "offset"),
                size_kib: read_u64(&d, "size"),
                write_zeroes_max_bytes: q.write_zeroes_max_bytes,
                discard_max_bytes: q.discard_max_bytes,
                sysfs,
            }
        })
        .collect();
    MdDetail {
        array_state: super::read_array_state_at(dir),
        reshape_position: text("reshape_position"),
        resync_start: text("resync_start"),
        sync_completed: text("sync_completed"),
        uuid: text("uuid"),
        members,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn members_disks_and_partitions() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::new(d.path());
        let b = d.path();
        let w = |p: &str, t: &str| {
            let p = b.join(p);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, t).unwrap();
        };
        w("sys/block/vdb/size", "4096\n");
        w("sys/block/vdb/vdb1/partition", "1\n");
        w("sys/block/vdb/vdb1/size", "2048\n");
        w("sys/block/vdb/vdb1/dev", "252:17\n");
        w("sys/block/vdb/queue/write_zeroes_max_bytes", "1024\n");
        fs::create_dir_all(b.join("sys/class/block")).unwrap();
        std::os::unix::fs::symlink("../../block/vdb/vdb1", b.join("sys/class/block/vdb1")).unwrap();
        w("sys/block/md0/md/dev-vdb1/state", "in_sync\n");
        w("sys/block/md0/md/dev-vdb1/offset", "2048\n");
        w("sys/block/md0/md/dev-vdb1/size", "512\n");
        w("sys/block/md0/md/resync_start", "none\n");
        assert_eq!(whole_disk(&root, "vdb1"), "vdb");
        assert_eq!(whole_disk(&root, "vdb"), "vdb");
        assert_eq!(
            base_disks(&root, "vdb1").into_iter().collect::<Vec<_>>(),
            ["vdb"]
        );
        assert_eq!(
            ancestry(&root, "vdb1").into_iter().collect::<Vec<_>>(),
            ["vdb", "vdb1"]
        );
        let names: Vec<_> = disks_and_partitions(&root)
            .into_iter()
            .map(|e| (e.name, e.size_sectors))
            .collect();
        assert_eq!(
            names,
            [
                ("md0".into(), 0),
                ("vdb".into(), 4096),
                ("vdb1".into(), 2048)
            ]
        );
        let md = read_md_detail(&root, &root.sys("block/md0"));
        assert_eq!(md.resync_start, "none");
        let m = &md.members[0];
        assert_eq!(m.sysfs.name, "vdb1");
        assert_eq!(m.sysfs.state, ["in_sync"]);
        assert_eq!((m.offset_sectors, m.size_kib), (2048, 512));
        assert_eq!((m.dev, m.size_bytes), (Some((252, 17)), 2048 * 512));
        assert_eq!(m.write_zeroes_max_bytes, 1024);
    }
}
