//! Which device a job writes: the device a person approved, and no other.
//!
//! Three guards, from the front end to the first write:
//! - [`resolve_trusted`] (D-Bus `StartWipe`, before polkit is asked): the caller's path is
//!   walked one component at a time, every symlink hop followed by hand, and refused unless it
//!   names a node under `/dev` reached only through directories no one but root can change and
//!   everyone can search. The canonical node is what the prompt shows and what the job opens;
//!   a caller cannot re-point a link between the question and the wipe, and a link target in a
//!   directory the caller cannot read never reaches the polkit details.
//! - [`Bound`]: the device number and size that were shown; [`super::plan_for`] refuses a probe
//!   of anything else.
//! - [`check_opened`]: after the `O_EXCL` open (the array, and each member of a member
//!   offload), `fstat().st_rdev` and `BLKGETSIZE64` must still be the probed values, else the
//!   job fails before its first write.
//!
//! Under a root other than `/` (`--root`, `--sim`) the given path is taken inside the root
//! (`/dev/loop0` is `<root>/dev/loop0`, [`in_root`]): the safety facts come from the fake tree,
//! so only nodes the tree itself holds (or links to) are opened, never the host's `/dev/sda`
//! by accident.

use super::error::WipeError;
use super::ioctl;
use super::probe::DevNum;
use crate::host::Root;
use crate::sysfs::block;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

/// Symlink hops followed before giving up (the kernel's limit, `MAXSYMLINKS`).
const MAX_HOPS: u32 = 40;

/// The device a front end showed for approval: its number and size when it was resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    /// Device number `(major, minor)` (`st_rdev` of the node).
    pub dev: DevNum,
    /// Size in bytes (BLKGETSIZE64).
    pub size_bytes: u64,
}

/// Refuses `found` unless it is `want` (pure): the device number and the size, the kernel's
/// `st_rdev` and BLKGETSIZE64 of what was opened or probed under `path`.
///
/// Errors: [`WipeError::Changed`] naming both numbers or sizes; nothing has been written.
pub fn check_same(path: &Path, want: Bound, found: Bound) -> Result<(), WipeError> {
    let changed = |reason: String| {
        Err(WipeError::Changed {
            device: path.to_path_buf(),
            reason,
        })
    };
    if want.dev != found.dev {
        return changed(format!(
            "it was device {}:{} when approved, it is {}:{} now",
            want.dev.0, want.dev.1, found.dev.0, found.dev.1
        ));
    }
    if want.size_bytes != found.size_bytes {
        return changed(format!(
            "it was {} bytes when approved, it is {} bytes now",
            want.size_bytes, found.size_bytes
        ));
    }
    Ok(())
}

/// What an open block device is: `fstat().st_rdev` and BLKGETSIZE64 of `file`.
///
/// Errors: the OS error; `ENOTBLK` when `file` is not a block device.
pub fn opened(file: &fs::File) -> std::io::Result<Bound> {
    let meta = file.metadata()?;
    if !meta.file_type().is_block_device() {
        return Err(std::io::Error::from_raw_os_error(libc::ENOTBLK));
    }
    let rdev = meta.rdev();
    Ok(Bound {
        dev: (libc::major(rdev), libc::minor(rdev)),
        size_bytes: ioctl::size_bytes(file)?,
    })
}

/// Checks that `file`, just opened as `path`, is the device `want` ([`opened`], [`check_same`]).
///
/// Errors: [`WipeError::Changed`], or [`WipeError::Probe`] when fstat or the ioctl fails.
pub fn check_opened(path: &Path, file: &fs::File, want: Bound) -> Result<(), WipeError> {
    let found = opened(file).map_err(|source| WipeError::Probe {
        device: path.to_path_buf(),
        what: "cannot fstat the opened device".into(),
        source,
    })?;
    check_same(path, want, found)
}

/// The node `given` names under `root`: itself on the system root; under any other root the
/// same path inside it (`<root>/dev/loop0`), which must name something (a fake tree opens only
/// what it holds).
///
/// Errors: [`WipeError::Probe`] when `given` is not absolute or not in the fake tree.
pub fn in_root(root: &Root, given: &Path) -> Result<PathBuf, WipeError> {
    if root.is_system() {
        return Ok(given.to_path_buf());
    }
    let inside = root.path(given);
    if !given.is_absolute() || fs::symlink_metadata(&inside).is_err() {
        return Err(WipeError::Probe {
            device: given.to_path_buf(),
            what: format!(
                "not in the tree of root {} (under a fake root only the nodes its dev/ holds \
                 are opened)",
                root.path("/").display()
            ),
            source: std::io::Error::from_raw_os_error(libc::ENOENT),
        });
    }
    Ok(inside)
}

/// Why a directory on the way may not be trusted, if it may not (pure over its metadata):
/// writable by anyone but root (owner not 0, group-writable with a group other than 0,
/// world-writable, sticky or not) or not searchable by everyone.
pub fn distrust(mode: u32, uid: u32, gid: u32) -> Option<&'static str> {
    if uid != 0 {
        Some("is owned by a user other than root")
    } else if mode & 0o002 != 0 {
        Some("is writable by others")
    } else if mode & 0o020 != 0 && gid != 0 {
        Some("is writable by a group other than root's")
    } else if mode & 0o001 == 0 {
        Some("is not searchable by everyone")
    } else {
        None
    }
}

/// Whether the kernel name `name` is an optical (`sr*`) or floppy (`fd*`) drive, which is never
/// opened nor wiped: opening one can move its tray or spin it up, and wiping one means nothing.
pub fn tray_drive(name: &str) -> bool {
    name.starts_with("sr") || name.starts_with("fd")
}

/// Resolves `given` (a caller's path) to its device node under the trust rules of the module
/// doc: absolute, under `/dev` (inside `root`), no `..`; each directory looked into (of the
/// path and of every symlink hop, the root's own directory excepted) passes [`distrust`]; the
/// end is a block device under `<root>/dev` or `/dev`, and no optical or floppy drive
/// ([`tray_drive`]). Returns the canonical node and its [`Bound`]: `st_rdev` of a `stat` and
/// the size from sysfs (`/sys/dev/block/MAJ:MIN/size`). Path work only: on the system root the
/// device is never opened (an open of storage that stopped answering does not return; this
/// runs before the caller is authorized, and for any caller); only a fake tree without the
/// device's sysfs entry has its size read from the device. Writes nothing; messages never
/// name a link's target.
///
/// Errors: [`WipeError::Untrusted`] when a rule is broken or the device is an optical or
/// floppy drive; [`WipeError::Probe`] when a component does not exist (the path names nothing:
/// nothing to hide), the end is not a block device or sysfs gives it no size.
pub fn resolve_trusted(root: &Root, given: &Path) -> Result<(PathBuf, Bound), WipeError> {
    let refuse = |reason: String| WipeError::Untrusted {
        device: given.to_path_buf(),
        reason,
    };
    if !given.is_absolute() {
        return Err(refuse("not an absolute path".into()));
    }
    if given.components().any(|c| c == Component::ParentDir) {
        return Err(refuse("the path contains `..`".into()));
    }
    if !given.starts_with("/dev") || given.components().count() < 3 {
        return Err(refuse("not a node under /dev".into()));
    }
    let end = match walk(&root.path("/"), given) {
        Ok(end) => end,
        Err(Stop::Untrusted(why)) => return Err(refuse(why)),
        Err(Stop::Missing(source)) => {
            return Err(WipeError::Probe {
                device: given.to_path_buf(),
                what: "cannot resolve".into(),
                source,
            })
        }
    };
    if !(end.starts_with(root.dev("")) || end.starts_with("/dev")) {
        return Err(refuse("it leads out of /dev".into()));
    }
    let probe_err = |what: &str, source| WipeError::Probe {
        device: given.to_path_buf(),
        what: what.into(),
        source,
    };
    let meta = fs::metadata(&end).map_err(|e| probe_err("cannot stat", e))?;
    if !meta.file_type().is_block_device() {
        let e = std::io::Error::from_raw_os_error(libc::ENOTBLK);
        return Err(probe_err("not a block device", e));
    }
    let dev = (libc::major(meta.rdev()), libc::minor(meta.rdev()));
    let name = block::name_of_devnum(root, dev).unwrap_or_default();
    if tray_drive(&name) {
        return Err(refuse(format!(
            "{name} is an optical or floppy drive, which is never wiped"
        )));
    }
    let size_bytes = match block::size_bytes_of_devnum(root, dev) {
        Some(s) => s,
        // A fake tree (`--root`, `--sim`) may fake a device's facts but not its sysfs entry:
        // the size comes from the device itself then. Never on the system root, whose sysfs
        // has every block device.
        None if !root.is_system() => {
            let f = super::probe::open_read(&end).map_err(|e| probe_err("cannot open", e))?;
            opened(&f)
                .map_err(|e| probe_err("BLKGETSIZE64", e))?
                .size_bytes
        }
        None => {
            let e = std::io::Error::from_raw_os_error(libc::ENOENT);
            return Err(probe_err("no size in /sys/dev/block", e));
        }
    };
    Ok((end, Bound { dev, size_bytes }))
}

/// Why [`walk`] stopped.
enum Stop {
    /// A trust rule is broken (the sentence).
    Untrusted(String),
    /// A component does not exist (the OS error).
    Missing(std::io::Error),
}

/// Walks `given` from `base` (trusted: the root), following symlinks by hand (absolute targets
/// from the host's `/`), checking each directory looked into. Returns the end, links resolved.
fn walk(base: &Path, given: &Path) -> Result<PathBuf, Stop> {
    let mut todo: VecDeque<OsString> = names(given);
    let mut cur = base.to_path_buf();
    let mut trusted_base = true;
    let mut hops = 0;
    while let Some(name) = todo.pop_front() {
        if name == ".." {
            cur.pop();
            trusted_base = false;
            continue;
        }
        if !trusted_base {
            check_dir(&cur).map_err(Stop::Untrusted)?;
        }
        trusted_base = false;
        let next = cur.join(&name);
        let meta = fs::symlink_metadata(&next).map_err(Stop::Missing)?;
        if !meta.file_type().is_symlink() {
            cur = next;
            continue;
        }
        hops += 1;
        if hops > MAX_HOPS {
            return Err(Stop::Untrusted("too many levels of symbolic links".into()));
        }
        let target = fs::read_link(&next).map_err(Stop::Missing)?;
        if target.is_absolute() {
            cur = PathBuf::from("/");
        }
        for n in names(&target).into_iter().rev() {
            todo.push_front(n);
        }
    }
    Ok(cur)
}

/// The normal components of `p` (`..` kept, `.` and `/` dropped).
fn names(p: &Path) -> VecDeque<OsString> {
    p.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect()
}

fn check_dir(dir: &Path) -> Result<(), String> {
    let m = fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    match distrust(m.mode(), m.uid(), m.gid()) {
        Some(why) => Err(format!("the directory {} on its way {why}", dir.display())),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_number_or_size_is_refused() {
        let b = |maj, size| Bound {
            dev: (maj, 0),
            size_bytes: size,
        };
        let p = Path::new("/dev/loop0");
        assert!(check_same(p, b(7, 4096), b(7, 4096)).is_ok());
        let e = check_same(p, b(7, 4096), b(8, 4096)).unwrap_err();
        assert!(matches!(e, WipeError::Changed { .. }), "{e:?}");
        assert!(
            e.to_string().contains("7:0") && e.to_string().contains("8:0"),
            "{e}"
        );
        let e = check_same(p, b(7, 4096), b(7, 8192)).unwrap_err();
        assert!(e.to_string().contains("8192 bytes now"), "{e}");
    }

    #[test]
    fn check_opened_refuses_what_is_not_a_block_device() {
        let f = tempfile::tempfile().unwrap();
        let want = Bound {
            dev: (7, 0),
            size_bytes: 0,
        };
        let e = check_opened(Path::new("/dev/loop0"), &f, want).unwrap_err();
        assert!(matches!(e, WipeError::Probe { .. }), "{e:?}");
    }

    #[test]
    fn directories_others_can_change_are_distrusted() {
        assert_eq!(distrust(0o40755, 0, 0), None);
        assert!(
            distrust(0o41777, 0, 0).is_some(),
            "sticky world-writable (/dev/shm)"
        );
        assert!(distrust(0o40755, 1000, 0).is_some());
        assert!(distrust(0o40775, 0, 6).is_some());
        assert_eq!(distrust(0o40775, 0, 0), None);
        assert!(
            distrust(0o40700, 0, 0).is_some(),
            "a 0700 dir hides its links"
        );
    }

    #[test]
    fn paths_outside_dev_are_refused_before_any_lookup() {
        let r = Root::system();
        for p in ["dev/sda", "/tmp/x", "/dev", "/dev/../etc/x", "/devx/sda"] {
            let e = resolve_trusted(&r, Path::new(p)).unwrap_err();
            assert!(matches!(e, WipeError::Untrusted { .. }), "{p}: {e:?}");
        }
        let e = resolve_trusted(&r, Path::new("/dev/shm/nothing")).unwrap_err();
        assert!(e.to_string().contains("/dev/shm"), "{e}");
    }

    #[test]
    fn a_fake_root_opens_only_its_own_nodes() {
        let d = tempfile::tempdir().unwrap();
        let r = Root::new(d.path());
        assert!(in_root(&r, Path::new("/dev/sda")).is_err());
        std::fs::create_dir_all(d.path().join("dev")).unwrap();
        std::fs::write(d.path().join("dev/sda"), b"").unwrap();
        assert_eq!(
            in_root(&r, Path::new("/dev/sda")).unwrap(),
            d.path().join("dev/sda")
        );
        assert_eq!(
            in_root(&Root::system(), Path::new("/dev/sda")).unwrap(),
            PathBuf::from("/dev/sda")
        );
    }
}
