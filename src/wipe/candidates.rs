//! Which block devices a wipe would accept, probed without writing: the list behind
//! `Manager.WipeCandidates` (what an admin tool offers before `StartWipe`).
//!
//! Each device under `/sys/block` (disks and their partitions) that has a node in `/dev` and a
//! non-zero size, but optical (`sr*`) and floppy (`fd*`) drives, goes through [`super::plan_for`] exactly as `StartWipe` would plan a `zero`
//! wipe of it: the probe (ioctls on a read-only open, sysfs, `/proc/self/mountinfo`,
//! `/proc/swaps`) and the pure planner. Nothing is written; a device the planner refuses
//! (mounted, swap, held, backing `/`) carries the refusal's words.

use super::{plan_for, Method, Options, Request};
use crate::host::Root;

/// One block device and whether a wipe of it would start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// `/dev/<name>` (the kernel name under `/sys/block`): what `StartWipe` takes.
    pub device: String,
    /// True when the probe and the planner accept a `zero` wipe of it.
    pub accepted: bool,
    /// Why not, as `StartWipe` would say it (`/dev/sdb: refusing to wipe: mounted at /srv`);
    /// "" when accepted.
    pub reason: String,
}

/// Every disk and partition of `root` (sorted by kernel name) with a `/dev` node and a size
/// above 0, but `sr*` and `fd*`, each probed and planned as a `zero` wipe ([`probe_one`]).
/// Never fails: an unreadable `/sys/block` lists nothing, a device that cannot be probed is
/// refused with the probe's error.
pub fn list(root: &Root) -> Vec<Candidate> {
    names(root).iter().map(|n| probe_one(root, n)).collect()
}

/// The kernel names [`list`] probes, sorted: sysfs and `lstat` of the `/dev` node only, no
/// device is opened.
pub fn names(root: &Root) -> Vec<String> {
    crate::sysfs::block::disks_and_partitions(root)
        .into_iter()
        // Opening an optical or floppy drive can move its tray or spin it up.
        .filter(|e| !super::target::tray_drive(&e.name))
        .filter(|e| e.size_sectors > 0 && std::fs::symlink_metadata(root.dev(&e.name)).is_ok())
        .map(|e| e.name)
        .collect()
}

/// Plans a `zero` wipe of `/dev/<name>` under `root` without any side effect (a corrupt
/// checkpoint stays where it is: [`Options::read_only`]): accepted, or the error's chain. Opens
/// the device read-only: storage that stopped answering makes this wait as long as it does.
pub fn probe_one(root: &Root, name: &str) -> Candidate {
    // The path as a caller names it: the planner takes it inside `root` itself.
    let device = format!("/dev/{name}");
    let req = Request {
        device: device.clone().into(),
        method: Method::Zero,
        options: Options {
            read_only: true,
            ..Options::default()
        },
    };
    match plan_for(root, &req) {
        Ok(_) => Candidate {
            device,
            accepted: true,
            reason: String::new(),
        },
        Err(e) => Candidate {
            device,
            accepted: false,
            reason: crate::error::error_chain(&e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_without_a_node_or_a_size_are_not_listed() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::new(d.path());
        for (name, size) in [("loop0", "0"), ("sdz", "2048")] {
            std::fs::create_dir_all(root.sys(format!("block/{name}"))).unwrap();
            std::fs::write(root.sys(format!("block/{name}/size")), size).unwrap();
        }
        std::fs::create_dir_all(root.sys("block/sdz/sdz1")).unwrap();
        std::fs::write(root.sys("block/sdz/sdz1/partition"), "1").unwrap();
        std::fs::write(root.sys("block/sdz/sdz1/size"), "1024").unwrap();
        assert!(list(&root).is_empty(), "no /dev nodes");
        std::fs::create_dir_all(root.dev("")).unwrap();
        std::fs::write(root.dev("sdz1"), "").unwrap();
        std::fs::write(root.dev("loop0"), "").unwrap();
        let l = list(&root);
        assert_eq!(l.len(), 1, "{l:?}");
        assert_eq!(l[0].device, "/dev/sdz1");
        assert!(!l[0].accepted);
        assert!(l[0].reason.contains("not a block device"), "{l:?}");
    }
}
