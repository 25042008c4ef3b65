//! The process's view of mounts and swap areas: `/proc/self/mountinfo` and `/proc/swaps` under a
//! [`Root`], parsed by small pure functions (proc(5)). Missing or unreadable files read as empty.

use super::block::{parse_devnum, DevNum};
use crate::host::Root;

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

/// This process's mounts, `/proc/self/mountinfo` under `root`; empty when unreadable.
pub fn read_mountinfo(root: &Root) -> Vec<MountInfo> {
    parse_mountinfo(&std::fs::read_to_string(root.proc("self/mountinfo")).unwrap_or_default())
}

/// The active swap areas, `/proc/swaps` under `root`; empty when unreadable.
pub fn read_swaps(root: &Root) -> Vec<String> {
    parse_swaps(&std::fs::read_to_string(root.proc("swaps")).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
