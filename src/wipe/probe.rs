//! What the kernel says about a block device before it is wiped.
//!
//! [`Probe`] is plain data (the planner's input, built by hand in tests); [`probe`] is the
//! adapter that fills it: `stat` and ioctls on the device node (a real path, resolved as given),
//! sysfs under `root.sys()` found through `/sys/dev/block/MAJ:MIN`, and `/proc/self/mountinfo`
//! and `/proc/swaps` under `root.proc()`. Sources: Documentation/ABI/stable/sysfs-block,
//! Documentation/admin-guide/md.rst, proc(5).

use super::error::WipeError;
use super::ioctl;
use crate::host::{read_optional, Root};
use crate::model::{ArrayState, SyncAction};
use crate::sysfs;
use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// A device number `(major, minor)`.
pub type DevNum = (u32, u32);

/// Facts about a device that the planner decides from. Sizes are bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Probe {
    /// The device node, links resolved (`/dev/loop0`, `/dev/md0`).
    pub path: PathBuf,
    /// Kernel name (`loop0`, `md0`, `sda2`), the sysfs directory's name.
    pub name: String,
    /// Device number.
    pub dev: DevNum,
    /// Size in bytes (BLKGETSIZE64).
    pub size_bytes: u64,
    /// Logical block size in bytes (BLKSSZGET; `queue/logical_block_size`).
    pub logical_block_size: u64,
    /// Physical block size in bytes (BLKPBSZGET).
    pub physical_block_size: u64,
    /// `queue/optimal_io_size`: full stripe for raid5/6 (0 = not reported).
    pub optimal_io_size: u64,
    /// `queue/minimum_io_size`: chunk size for md arrays.
    pub minimum_io_size: u64,
    /// `queue/write_zeroes_max_bytes`: 0 when the device cannot offload zeroing.
    pub write_zeroes_max_bytes: u64,
    /// `queue/discard_max_bytes`: 0 when the device cannot discard.
    pub discard_max_bytes: u64,
    /// `queue/discard_zeroes_data` reads 1 (discarded blocks read back as zeroes; Linux 4.12+
    /// always reads 0, sysfs-block: "don't rely on any specific behavior for discards").
    pub discard_zeroes_data: bool,
    /// `queue/rotational`.
    pub rotational: bool,
    /// Whether this is a partition (has a `partition` attribute).
    pub is_partition: bool,
    /// Entries of `holders/` (of the device and its partitions).
    pub holders: Vec<Holder>,
    /// Mounts of the device or one of its partitions (`/proc/self/mountinfo`).
    pub mounts: Vec<MountUse>,
    /// Active swap areas on the device or its partitions (`/proc/swaps`).
    pub swaps: Vec<String>,
    /// The filesystem mounted at `/` lives on this device (directly or through dm/md/partitions).
    pub backs_root: bool,
    /// When the device is an md array: its state.
    pub array: Option<ArrayFacts>,
    /// Other md arrays in `resync`/`recover` whose members share a physical disk with this device.
    pub resyncing_neighbours: Vec<String>,
    /// Kernel names of the device's partitions when probed (`sdb1`, `loop3p2`): subdirectories
    /// of its sysfs directory with a `partition` attribute.
    pub partitions: Vec<String>,
    /// A name for the device that survives a reboot, for resume checkpoints: `md-uuid-<UUID>`
    /// (`md/uuid`), else `dm-uuid:<UUID>` or `dm-name:<name>` for device-mapper (`dm/uuid`,
    /// `dm/name`), else the first `/dev/disk/by-id` link to it, else `loop:<backing file>`
    /// (`loop/backing_file`), else `name:<kernel name>` (weakest: names move between boots).
    pub stable_id: String,
    /// For an md array: the facts member offload and resume decide from.
    pub md: Option<MdDetail>,
}

/// The md facts beyond [`ArrayFacts`]: array state, reshape, resync position and members
/// (md.rst: `array_state`, `reshape_position`, `resync_start`, `sync_completed`, `dev-*/`).
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
    pub members: Vec<MemberFacts>,
}

/// One member of an md array (`md/dev-<name>/`, md.rst) and its queue limits.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct MemberFacts {
    /// Kernel name (`vdb`, `sda1`).
    pub name: String,
    /// The device node (`/dev/vdb` under the root).
    pub path: PathBuf,
    /// Device number (`/sys/class/block/<name>/dev`); `None` where sysfs does not say.
    pub dev: Option<DevNum>,
    /// Size in bytes (`/sys/class/block/<name>/size`, 512-byte sectors); 0 where missing.
    pub size_bytes: u64,
    /// `dev-*/offset`: start of the data region on the member, 512-byte sectors.
    pub offset_sectors: u64,
    /// `dev-*/size`: length of the data region used, KiB.
    pub size_kib: u64,
    /// `dev-*/state` words (`in_sync`, `faulty`, `spare`, `write_mostly`, ...).
    pub state: Vec<String>,
    /// The member's (or its disk's) `queue/write_zeroes_max_bytes`: 0 = no zeroing offload.
    pub write_zeroes_max_bytes: u64,
    /// The member's (or its disk's) `queue/discard_max_bytes`.
    pub discard_max_bytes: u64,
}

/// A holder of the device (`/sys/class/block/X/holders/Y`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Holder {
    /// Kernel name of the holding device (`md0`, `dm-3`).
    pub name: String,
    /// Which of the device's block devices is held (the device itself or a partition).
    pub held: String,
    /// For an md holder: its `md/array_state` (`inactive`, `clear`, `active`, `clean`, ...).
    pub md_array_state: Option<ArrayState>,
}

impl Holder {
    /// True for a holder that keeps the data in use: anything but an md array that is stopped
    /// or inactive (md.rst: `clear`, `inactive`).
    pub fn is_active(&self) -> bool {
        !self
            .md_array_state
            .as_ref()
            .is_some_and(ArrayState::is_stopped)
    }
}

/// A mount of the device or of one of its partitions.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MountUse {
    /// The mounted block device's kernel name.
    pub device: String,
    /// The mount point.
    pub mount_point: String,
}

/// State of an md array (from `/sys/block/mdX/md/`, md.rst, read by [`sysfs::read_array_at`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ArrayFacts {
    /// Kernel name (`md0`).
    pub name: String,
    /// `md/level` (`raid1`, `raid5`, ...); empty where missing.
    pub level: String,
    /// `md/sync_action`: `idle`, `resync`, `recover`, `check`, `repair`, `reshape`, `frozen`;
    /// `idle` where missing (raid0, linear).
    pub sync_action: SyncAction,
    /// `md/raid_disks` (the new count during a reshape); 0 where missing.
    pub raid_disks: u32,
    /// `md/chunk_size` in bytes (0 for raid1 and where missing).
    pub chunk_size: u64,
}

/// One parsed line of `/proc/self/mountinfo` (proc(5)): the fields we need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountInfo {
    /// Field 3, `major:minor` of `st_dev`.
    pub dev: DevNum,
    /// Field 5, the mount point (octal escapes left as they are).
    pub mount_point: String,
    /// The mount source after the ` - ` separator (`/dev/sda1`, `tmpfs`).
    pub source: String,
}

/// Parses `/proc/self/mountinfo`; lines that do not parse are skipped.
pub fn parse_mountinfo(text: &str) -> Vec<MountInfo> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split(' ');
            let _id = f.next()?;
            let _parent = f.next()?;
            let dev = parse_devnum(f.next()?)?;
            let _root = f.next()?;
            let mount_point = f.next()?.to_string();
            let (_, after) = line.split_once(" - ")?;
            let mut a = after.split(' ');
            let _fstype = a.next()?;
            let source = a.next()?.to_string();
            Some(MountInfo {
                dev,
                mount_point,
                source,
            })
        })
        .collect()
}

/// Parses `/proc/swaps`: the `Filename` column of every active swap area.
pub fn parse_swaps(text: &str) -> Vec<String> {
    text.lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .map(|s| s.replace("\\040", " "))
        .collect()
}

/// Parses `MAJ:MIN`.
pub fn parse_devnum(s: &str) -> Option<DevNum> {
    let (a, b) = s.trim().split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

fn read_u64(dir: &Path, rel: &str) -> u64 {
    read_optional(&dir.join(rel))
        .ok()
        .flatten()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

fn read_str(dir: &Path, rel: &str) -> Option<String> {
    read_optional(&dir.join(rel)).ok().flatten()
}

fn list_dir(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(std::result::Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The sysfs directory of a block device by kernel name (`/sys/class/block/<name>`).
fn class_dir(root: &Root, name: &str) -> PathBuf {
    root.sys("class/block").join(name)
}

/// Kernel names of the partitions of `dir` (subdirectories with a `partition` attribute).
fn partitions(dir: &Path) -> Vec<String> {
    list_dir(dir)
        .into_iter()
        .filter(|n| dir.join(n).join("partition").exists())
        .collect()
}

/// The physical disks under a block device: through `slaves/` (dm, md) recursively, and from a
/// partition to its disk. Bounded depth so a malformed tree cannot loop.
fn base_disks(root: &Root, name: &str, depth: u32, out: &mut BTreeSet<String>) {
    if depth > 16 {
        return;
    }
    let dir = class_dir(root, name);
    if dir.join("partition").exists() {
        if let Some(parent) = fs::canonicalize(&dir).ok().and_then(|p| {
            p.parent()
                .and_then(|p| p.file_name())
                .map(std::borrow::ToOwned::to_owned)
        }) {
            base_disks(root, &parent.to_string_lossy(), depth + 1, out);
            return;
        }
    }
    let slaves = list_dir(&dir.join("slaves"));
    if slaves.is_empty() {
        out.insert(name.to_string());
    } else {
        for s in slaves {
            base_disks(root, &s, depth + 1, out);
        }
    }
}

/// Every block device name at or below `name` (slaves recursively, partitions' disks).
fn ancestry(root: &Root, name: &str, depth: u32, out: &mut BTreeSet<String>) {
    if depth > 16 || !out.insert(name.to_string()) {
        return;
    }
    let dir = class_dir(root, name);
    if dir.join("partition").exists() {
        if let Some(parent) = fs::canonicalize(&dir).ok().and_then(|p| {
            p.parent()
                .and_then(|p| p.file_name())
                .map(std::borrow::ToOwned::to_owned)
        }) {
            ancestry(root, &parent.to_string_lossy(), depth + 1, out);
        }
    }
    for s in list_dir(&dir.join("slaves")) {
        ancestry(root, &s, depth + 1, out);
    }
}

fn name_of_devnum(root: &Root, dev: DevNum) -> Option<String> {
    let link = root.sys(format!("dev/block/{}:{}", dev.0, dev.1));
    fs::canonicalize(&link)
        .ok()
        .or_else(|| fs::read_link(&link).ok())
        .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()))
}

/// Probes `device` (resolved as given: links followed; must be a block device).
///
/// Errors: [`WipeError::Probe`] when the path does not resolve, is not a block device, or the
/// size ioctls fail; missing sysfs attributes read as 0 (older kernels, test roots).
pub fn probe(root: &Root, device: &Path) -> Result<Probe, WipeError> {
    let perr = |what: &str, source: std::io::Error| WipeError::Probe {
        device: device.to_path_buf(),
        what: what.to_string(),
        source,
    };
    let path = fs::canonicalize(device).map_err(|e| perr("cannot resolve", e))?;
    let meta = fs::metadata(&path).map_err(|e| perr("cannot stat", e))?;
    if !meta.file_type().is_block_device() {
        return Err(WipeError::Probe {
            device: path,
            what: "not a block device".into(),
            source: std::io::Error::from_raw_os_error(libc::ENOTBLK),
        });
    }
    let rdev = meta.rdev();
    let dev = (libc::major(rdev), libc::minor(rdev));
    let f = fs::File::open(&path).map_err(|e| perr("cannot open read-only", e))?;
    let size_bytes = ioctl::size_bytes(&f).map_err(|e| perr("BLKGETSIZE64", e))?;
    let logical = u64::from(ioctl::logical_block_size(&f).map_err(|e| perr("BLKSSZGET", e))?);
    let physical = u64::from(ioctl::physical_block_size(&f).map_err(|e| perr("BLKPBSZGET", e))?);
    drop(f);

    let sysdir = root.sys(format!("dev/block/{}:{}", dev.0, dev.1));
    let name = name_of_devnum(root, dev).unwrap_or_else(|| {
        path.file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    let is_partition = sysdir.join("partition").exists();
    // Partitions have no queue/ of their own: use the disk's.
    let queue = if is_partition {
        sysdir.join("../queue")
    } else {
        sysdir.join("queue")
    };

    // The device and its partitions, by name and number.
    let mut own: Vec<(String, Option<DevNum>)> = vec![(name.clone(), Some(dev))];
    for p in partitions(&sysdir) {
        let num = read_str(&sysdir.join(&p), "dev").and_then(|s| parse_devnum(&s));
        own.push((p, num));
    }
    let own_nums: BTreeSet<DevNum> = own.iter().filter_map(|(_, n)| *n).collect();
    let own_paths: BTreeSet<PathBuf> = std::iter::once(path.clone())
        .chain(own.iter().map(|(n, _)| root.dev(n)))
        .collect();

    let mut holders = Vec::new();
    for (held, _) in &own {
        let hdir = if held == &name {
            sysdir.join("holders")
        } else {
            sysdir.join(held).join("holders")
        };
        for h in list_dir(&hdir) {
            let md_array_state = sysfs::read_array_state_at(&class_dir(root, &h));
            holders.push(Holder {
                name: h,
                held: held.clone(),
                md_array_state,
            });
        }
    }

    let mountinfo = fs::read_to_string(root.proc("self/mountinfo")).unwrap_or_default();
    let mounts_parsed = parse_mountinfo(&mountinfo);
    let name_of = |n: DevNum| {
        own.iter()
            .find(|(_, d)| *d == Some(n))
            .map(|(s, _)| s.clone())
    };
    let mut mounts = Vec::new();
    for m in &mounts_parsed {
        let by_num = if own_nums.contains(&m.dev) {
            name_of(m.dev)
        } else {
            None
        };
        let by_source = if by_num.is_none() && m.source.starts_with('/') {
            let src = fs::canonicalize(&m.source).unwrap_or_else(|_| PathBuf::from(&m.source));
            own_paths.contains(&src).then(|| m.source.clone())
        } else {
            None
        };
        if let Some(d) = by_num.or(by_source) {
            mounts.push(MountUse {
                device: d,
                mount_point: m.mount_point.clone(),
            });
        }
    }

    let swaps_text = fs::read_to_string(root.proc("swaps")).unwrap_or_default();
    let swaps = parse_swaps(&swaps_text)
        .into_iter()
        .filter(|s| {
            let p = Path::new(s);
            if own_paths.contains(p) {
                return true;
            }
            fs::metadata(p)
                .ok()
                .filter(|m| m.file_type().is_block_device())
                .is_some_and(|m| own_nums.contains(&(libc::major(m.rdev()), libc::minor(m.rdev()))))
        })
        .collect();

    let backs_root = mounts_parsed
        .iter()
        .filter(|m| m.mount_point == "/")
        .filter_map(|m| name_of_devnum(root, m.dev))
        .any(|rootdev| {
            let mut anc = BTreeSet::new();
            ancestry(root, &rootdev, 0, &mut anc);
            own.iter().any(|(n, _)| anc.contains(n))
        });

    let array = sysdir.join("md").is_dir().then(|| {
        let sys = sysfs::read_array_at(&sysdir);
        ArrayFacts {
            name: name.clone(),
            level: sys.level.unwrap_or_default(),
            sync_action: sys.sync_action.unwrap_or_default(),
            raid_disks: sys.raid_disks.unwrap_or(0),
            chunk_size: sys.chunk_size_bytes.unwrap_or(0),
        }
    });

    let mut mine = BTreeSet::new();
    base_disks(root, &name, 0, &mut mine);
    let mut resyncing_neighbours = Vec::new();
    for other in list_dir(&root.sys("block")) {
        if other == name || !other.starts_with("md") {
            continue;
        }
        let action = sysfs::read_sync_action_at(&class_dir(root, &other));
        if !matches!(action, Some(SyncAction::Resync | SyncAction::Recover)) {
            continue;
        }
        let mut theirs = BTreeSet::new();
        base_disks(root, &other, 0, &mut theirs);
        if !mine.is_disjoint(&theirs) {
            resyncing_neighbours.push(other);
        }
    }

    let md = array.as_ref().map(|_| md_detail(root, &sysdir));
    let stable_id = stable_id(root, &path, &name, &sysdir, md.as_ref());
    let parts = partitions(&sysdir);

    Ok(Probe {
        path,
        name,
        dev,
        size_bytes,
        logical_block_size: logical.max(1),
        physical_block_size: physical.max(1),
        optimal_io_size: read_u64(&queue, "optimal_io_size"),
        minimum_io_size: read_u64(&queue, "minimum_io_size"),
        write_zeroes_max_bytes: read_u64(&queue, "write_zeroes_max_bytes"),
        discard_max_bytes: read_u64(&queue, "discard_max_bytes"),
        discard_zeroes_data: read_u64(&queue, "discard_zeroes_data") == 1,
        rotational: read_u64(&queue, "rotational") == 1,
        is_partition,
        holders,
        mounts,
        swaps,
        backs_root,
        array,
        resyncing_neighbours,
        partitions: parts,
        stable_id,
        md,
    })
}

/// The queue directory of a block device by sysfs dir (a partition's is its disk's).
fn queue_of(dir: &Path) -> PathBuf {
    if dir.join("partition").exists() {
        dir.join("../queue")
    } else {
        dir.join("queue")
    }
}

/// Reads [`MdDetail`] from an array's sysfs directory.
fn md_detail(root: &Root, sysdir: &Path) -> MdDetail {
    let md = sysdir.join("md");
    let text = |f: &str| read_str(&md, f).unwrap_or_default().trim().to_string();
    let members = list_dir(&md)
        .into_iter()
        .filter_map(|f| {
            let dev = f.strip_prefix("dev-")?.to_string();
            let d = md.join(&f);
            let name = dev.replace('!', "/");
            let cdir = class_dir(root, &name);
            let q = queue_of(&cdir);
            Some(MemberFacts {
                path: root.dev(&name),
                dev: read_str(&cdir, "dev").and_then(|s| parse_devnum(&s)),
                size_bytes: read_u64(&cdir, "size") * 512,
                offset_sectors: read_u64(&d, "offset"),
                size_kib: read_u64(&d, "size"),
                state: read_str(&d, "state")
                    .unwrap_or_default()
                    .split(',')
                    .map(|w| w.trim().to_string())
                    .filter(|w| !w.is_empty())
                    .collect(),
                write_zeroes_max_bytes: read_u64(&q, "write_zeroes_max_bytes"),
                discard_max_bytes: read_u64(&q, "discard_max_bytes"),
                name,
            })
        })
        .collect();
    MdDetail {
        array_state: sysfs::read_array_state_at(sysdir),
        reshape_position: text("reshape_position"),
        resync_start: text("resync_start"),
        sync_completed: text("sync_completed"),
        uuid: text("uuid"),
        members,
    }
}

/// See [`Probe::stable_id`].
fn stable_id(root: &Root, path: &Path, name: &str, sysdir: &Path, md: Option<&MdDetail>) -> String {
    if let Some(m) = md.filter(|m| !m.uuid.is_empty()) {
        return format!("md-uuid-{}", m.uuid);
    }
    // device-mapper (dm.rst / sysfs `dm/`): a kernel name dm-N is reused by the next device.
    if let Some(u) = read_str(sysdir, "dm/uuid").filter(|u| !u.trim().is_empty()) {
        return format!("dm-uuid:{}", u.trim());
    }
    if let Some(n) = read_str(sysdir, "dm/name").filter(|n| !n.trim().is_empty()) {
        return format!("dm-name:{}", n.trim());
    }
    let by_id = root.dev("disk/by-id");
    for link in list_dir(&by_id) {
        if fs::canonicalize(by_id.join(&link)).ok().as_deref() == Some(path) {
            return format!("by-id:{link}");
        }
    }
    if let Some(b) = read_str(sysdir, "loop/backing_file") {
        return format!("loop:{}", b.trim());
    }
    format!("name:{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dm_devices_are_named_by_dm_uuid_then_dm_name() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::new(d.path());
        let sysdir = root.sys("block/dm-0");
        fs::create_dir_all(sysdir.join("dm")).unwrap();
        fs::write(sysdir.join("dm/name"), "vanish\n").unwrap();
        fs::write(sysdir.join("dm/uuid"), "\n").unwrap();
        let dev = root.dev("dm-0");
        let id = || stable_id(&root, &dev, "dm-0", &sysdir, None);
        // A dm-N name is reused by the next device: the checkpoint follows the mapping instead.
        assert_eq!(id(), "dm-name:vanish");
        fs::write(sysdir.join("dm/uuid"), "CRYPT-LUKS2-abc-vanish\n").unwrap();
        assert_eq!(id(), "dm-uuid:CRYPT-LUKS2-abc-vanish");
        let plain = root.sys("block/sdz");
        fs::create_dir_all(&plain).unwrap();
        assert_eq!(
            stable_id(&root, &root.dev("sdz"), "sdz", &plain, None),
            "name:sdz"
        );
    }

    #[test]
    fn mountinfo_fields() {
        let t = "22 1 8:2 / / rw,relatime shared:1 - ext4 /dev/sda2 rw\n\
                 30 22 0:25 / /run rw - tmpfs tmpfs rw\n\
                 garbage\n";
        let m = parse_mountinfo(t);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].dev, (8, 2));
        assert_eq!(m[0].mount_point, "/");
        assert_eq!(m[0].source, "/dev/sda2");
        assert_eq!(m[1].source, "tmpfs");
    }

    #[test]
    fn swaps_filenames() {
        let t = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n\
                 /dev/loop3                              partition\t65532\t\t0\t\t-2\n";
        assert_eq!(parse_swaps(t), vec!["/dev/loop3".to_string()]);
        assert!(parse_swaps("Filename Type Size Used Priority\n").is_empty());
    }

    #[test]
    fn holder_activity() {
        let h = |s: Option<&str>| Holder {
            name: "md0".into(),
            held: "sda1".into(),
            md_array_state: s.map(ArrayState::from),
        };
        assert!(!h(Some("inactive")).is_active());
        assert!(!h(Some("clear")).is_active());
        assert!(h(Some("clean")).is_active());
        assert!(h(None).is_active());
    }

    #[test]
    fn not_a_block_device_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("file");
        std::fs::write(&f, b"x").unwrap();
        let e = probe(&Root::new(d.path()), &f).unwrap_err();
        assert!(e.to_string().contains("not a block device"), "{e}");
        let e = probe(&Root::new(d.path()), &d.path().join("missing")).unwrap_err();
        assert!(e.to_string().contains("cannot resolve"), "{e}");
    }
}
