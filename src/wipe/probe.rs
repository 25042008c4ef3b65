//! What the kernel says about a block device before it is wiped.
//!
//! [`Probe`] is plain data (the planner's input, built by hand in tests); [`probe`] is the
//! adapter that fills it: `stat` and ioctls on the device node (a real path, resolved as given),
//! sysfs under `root.sys()` found through `/sys/dev/block/MAJ:MIN`, and `/proc/self/mountinfo`
//! and `/proc/swaps` under `root.proc()`. Sources: Documentation/ABI/stable/sysfs-block,
//! Documentation/admin-guide/md.rst, proc(5).

use super::error::WipeError;
use super::ioctl;
use crate::host::Root;
use crate::model::{ArrayState, SyncAction};
use crate::sysfs::{self, block};
use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

pub use crate::sysfs::block::{parse_devnum, DevNum, MdDetail, MdMember as MemberFacts};
pub use crate::sysfs::proc::{parse_mountinfo, parse_swaps, MountInfo};

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

/// The device and its partitions, by kernel name and number, with their nodes.
struct Own {
    /// The device itself first, then its partitions.
    devices: Vec<(String, Option<DevNum>)>,
    nums: BTreeSet<DevNum>,
    paths: BTreeSet<PathBuf>,
}

impl Own {
    fn read(root: &Root, path: &Path, name: &str, dev: DevNum, sysdir: &Path) -> Own {
        let mut devices: Vec<(String, Option<DevNum>)> = vec![(name.to_string(), Some(dev))];
        for p in block::partitions(sysdir) {
            let num = block::read_devnum(&sysdir.join(&p));
            devices.push((p, num));
        }
        let nums = devices.iter().filter_map(|(_, n)| *n).collect();
        let paths = std::iter::once(path.to_path_buf())
            .chain(devices.iter().map(|(n, _)| root.dev(n)))
            .collect();
        Own {
            devices,
            nums,
            paths,
        }
    }

    fn name_of(&self, n: DevNum) -> Option<String> {
        self.devices
            .iter()
            .find(|(_, d)| *d == Some(n))
            .map(|(s, _)| s.clone())
    }
}

/// Opens `path` read-only, as every probe of a device does (its size, its block sizes).
///
/// With `--features failpoints` and `MDPILOT_FAILPOINT_OPEN_WAITS=NODE:MARK:FIFO`, an open of
/// `NODE` stands for one that storage which stopped answering never completes: it appends a
/// line to the file `MARK` (the test's signal that the open has begun, one line per open) and
/// then opens the FIFO `FIFO` for reading, which blocks until the test opens its other end.
///
/// Errors: the OS error of the open.
pub fn open_read(path: &Path) -> std::io::Result<fs::File> {
    #[cfg(feature = "failpoints")]
    if let Ok(v) = std::env::var("MDPILOT_FAILPOINT_OPEN_WAITS") {
        let mut parts = v.splitn(3, ':');
        if let (Some(node), Some(mark), Some(fifo)) = (parts.next(), parts.next(), parts.next()) {
            if path == Path::new(node) || fs::canonicalize(path).is_ok_and(|p| p == Path::new(node))
            {
                use std::io::Write;
                let f = fs::OpenOptions::new().create(true).append(true).open(mark);
                let _ = f.and_then(|mut f| f.write_all(b"open\n"));
                let _ = fs::File::open(fifo);
            }
        }
    }
    fs::File::open(path)
}

/// The device node as given, resolved and checked: path, number, size and block sizes (ioctls on
/// a read-only open).
struct Identity {
    path: PathBuf,
    dev: DevNum,
    size_bytes: u64,
    logical: u64,
    physical: u64,
}

fn identity(device: &Path) -> Result<Identity, WipeError> {
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
    let f = open_read(&path).map_err(|e| perr("cannot open read-only", e))?;
    let size_bytes = ioctl::size_bytes(&f).map_err(|e| perr("BLKGETSIZE64", e))?;
    let logical = u64::from(ioctl::logical_block_size(&f).map_err(|e| perr("BLKSSZGET", e))?);
    let physical = u64::from(ioctl::physical_block_size(&f).map_err(|e| perr("BLKPBSZGET", e))?);
    Ok(Identity {
        path,
        dev: (libc::major(rdev), libc::minor(rdev)),
        size_bytes,
        logical,
        physical,
    })
}

/// What keeps the device or its partitions in use: holders, mounts, swap, the root filesystem.
struct InUse {
    holders: Vec<Holder>,
    mounts: Vec<MountUse>,
    swaps: Vec<String>,
    backs_root: bool,
}

fn in_use(root: &Root, own: &Own, sysdir: &Path) -> InUse {
    let mounts_parsed = sysfs::proc::read_mountinfo(root);
    InUse {
        holders: holders(root, own, sysdir),
        mounts: mounts(&mounts_parsed, own),
        swaps: swaps(root, own),
        backs_root: mounts_parsed
            .iter()
            .filter(|m| m.mount_point == "/")
            .filter_map(|m| block::name_of_devnum(root, m.dev))
            .any(|rootdev| {
                let anc = block::ancestry(root, &rootdev);
                own.devices.iter().any(|(n, _)| anc.contains(n))
            }),
    }
}

fn holders(root: &Root, own: &Own, sysdir: &Path) -> Vec<Holder> {
    let mut out = Vec::new();
    for (i, (held, _)) in own.devices.iter().enumerate() {
        // The device itself is first; its partitions are subdirectories.
        let dir = if i == 0 {
            sysdir.to_path_buf()
        } else {
            sysdir.join(held)
        };
        for h in block::holders(&dir) {
            let md_array_state = sysfs::read_array_state_at(&block::class_dir(root, &h));
            out.push(Holder {
                name: h,
                held: held.clone(),
                md_array_state,
            });
        }
    }
    out
}

fn mounts(mounts_parsed: &[MountInfo], own: &Own) -> Vec<MountUse> {
    let mut out = Vec::new();
    for m in mounts_parsed {
        let by_num = if own.nums.contains(&m.dev) {
            own.name_of(m.dev)
        } else {
            None
        };
        let by_source = if by_num.is_none() && m.source.starts_with('/') {
            let src = fs::canonicalize(&m.source).unwrap_or_else(|_| PathBuf::from(&m.source));
            own.paths.contains(&src).then(|| m.source.clone())
        } else {
            None
        };
        if let Some(d) = by_num.or(by_source) {
            out.push(MountUse {
                device: d,
                mount_point: m.mount_point.clone(),
            });
        }
    }
    out
}

fn swaps(root: &Root, own: &Own) -> Vec<String> {
    sysfs::proc::read_swaps(root)
        .into_iter()
        .filter(|s| {
            let p = Path::new(s);
            if own.paths.contains(p) {
                return true;
            }
            fs::metadata(p)
                .ok()
                .filter(|m| m.file_type().is_block_device())
                .is_some_and(|m| {
                    own.nums
                        .contains(&(libc::major(m.rdev()), libc::minor(m.rdev())))
                })
        })
        .collect()
}

/// Other md arrays in `resync`/`recover` whose members share a physical disk with `name`.
fn resyncing_neighbours(root: &Root, name: &str) -> Vec<String> {
    let mine = block::base_disks(root, name);
    sysfs::list_arrays(root)
        .into_iter()
        .filter(|other| other != name)
        .filter(|other| {
            matches!(
                sysfs::read_sync_action(root, other),
                Some(SyncAction::Resync | SyncAction::Recover)
            )
        })
        .filter(|other| !mine.is_disjoint(&block::base_disks(root, other)))
        .collect()
}

fn array_facts(sysdir: &Path, name: &str) -> Option<ArrayFacts> {
    block::is_array(sysdir).then(|| {
        let sys = sysfs::read_array_at(sysdir);
        ArrayFacts {
            name: name.to_string(),
            level: sys.level.unwrap_or_default(),
            sync_action: sys.sync_action.unwrap_or_default(),
            raid_disks: sys.raid_disks.unwrap_or(0),
            chunk_size: sys.chunk_size_bytes.unwrap_or(0),
        }
    })
}

/// Probes `device` (resolved as given: links followed; must be a block device).
///
/// Errors: [`WipeError::Probe`] when the path does not resolve, is not a block device, or the
/// size ioctls fail; missing sysfs attributes read as 0 (older kernels, test roots).
pub fn probe(root: &Root, device: &Path) -> Result<Probe, WipeError> {
    let id = identity(device)?;
    let sysdir = block::devnum_dir(root, id.dev);
    let name = block::name_of_devnum(root, id.dev).unwrap_or_else(|| {
        id.path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    let own = Own::read(root, &id.path, &name, id.dev, &sysdir);
    let used = in_use(root, &own, &sysdir);
    let array = array_facts(&sysdir, &name);
    let md = array.as_ref().map(|_| block::read_md_detail(root, &sysdir));
    let stable_id = stable_id(root, &id.path, &name, &sysdir, md.as_ref());
    let q = block::read_queue(&sysdir);
    Ok(Probe {
        dev: id.dev,
        size_bytes: id.size_bytes,
        logical_block_size: id.logical.max(1),
        physical_block_size: id.physical.max(1),
        optimal_io_size: q.optimal_io_size,
        minimum_io_size: q.minimum_io_size,
        write_zeroes_max_bytes: q.write_zeroes_max_bytes,
        discard_max_bytes: q.discard_max_bytes,
        discard_zeroes_data: q.discard_zeroes_data,
        rotational: q.rotational,
        is_partition: block::is_partition(&sysdir),
        holders: used.holders,
        mounts: used.mounts,
        swaps: used.swaps,
        backs_root: used.backs_root,
        array,
        resyncing_neighbours: resyncing_neighbours(root, &name),
        partitions: block::partitions(&sysdir),
        stable_id,
        md,
        path: id.path,
        name,
    })
}

/// See [`Probe::stable_id`].
fn stable_id(root: &Root, path: &Path, name: &str, sysdir: &Path, md: Option<&MdDetail>) -> String {
    if let Some(m) = md.filter(|m| !m.uuid.is_empty()) {
        return format!("md-uuid-{}", m.uuid);
    }
    // device-mapper (dm.rst / sysfs `dm/`): a kernel name dm-N is reused by the next device.
    if let Some(u) = block::read_text(sysdir, "dm/uuid").filter(|u| !u.trim().is_empty()) {
        return format!("dm-uuid:{}", u.trim());
    }
    if let Some(n) = block::read_text(sysdir, "dm/name").filter(|n| !n.trim().is_empty()) {
        return format!("dm-name:{}", n.trim());
    }
    let by_id = root.dev("disk/by-id");
    let mut links: Vec<_> = fs::read_dir(&by_id)
        .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    links.sort();
    for link in links {
        let link = link.to_string_lossy();
        if fs::canonicalize(by_id.join(&*link)).ok().as_deref() == Some(path) {
            return format!("by-id:{link}");
        }
    }
    if let Some(b) = block::read_text(sysdir, "loop/backing_file") {
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
