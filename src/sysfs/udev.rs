//! The names the system gives an md array beyond its kernel name: udev's database entry
//! (`/run/udev/data/b<major>:<minor>`: `MD_NAME`, `MD_UUID`, written from `mdadm --detail
//! --export`) and the `/dev/md/` links, read under a [`Root`]; the resolver from what users type
//! is [`crate::array_names`].

use crate::host::Root;
use std::collections::BTreeMap;

/// The `E:KEY=VALUE` properties of the udev database entry of array `kernel`
/// (`/run/udev/data/b<major>:<minor>`, major:minor read from `/sys/block/<kernel>/dev`); empty
/// when either file is missing (no udev, a temporary tree without it).
pub fn udev_properties(root: &Root, kernel: &str) -> BTreeMap<String, String> {
    let Some(dev) = super::arrays::block_dev_text(root, kernel) else {
        return BTreeMap::new();
    };
    let db = root.run(format!("udev/data/b{dev}"));
    let Ok(text) = std::fs::read_to_string(db) else {
        return BTreeMap::new();
    };
    text.lines()
        .filter_map(|l| l.strip_prefix("E:"))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The names udev's database entry of an array gives (see the module doc), from one read of
/// the entry ([`udev_names`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UdevNames {
    /// `MD_NAME`, the metadata name (`host:root`); `None` where empty or absent (0.90
    /// metadata, no udev database).
    pub metadata_name: Option<String>,
    /// `MD_UUID` in mdadm's colon form ([`mdadm_uuid`]); `None` where absent or not a UUID.
    pub mdadm_uuid: Option<String>,
}

/// [`UdevNames`] of array `kernel`, reading its udev database entry once.
pub fn udev_names(root: &Root, kernel: &str) -> UdevNames {
    let mut props = udev_properties(root, kernel);
    UdevNames {
        metadata_name: props.remove("MD_NAME").filter(|n| !n.is_empty()),
        mdadm_uuid: props.get("MD_UUID").and_then(|u| mdadm_uuid(u)),
    }
}

/// The metadata name of array `kernel` (`host:root`; udev's `MD_NAME`, see the module doc), or
/// `None` where unknown (0.90 metadata, no udev database).
pub fn metadata_name(root: &Root, kernel: &str) -> Option<String> {
    udev_names(root, kernel).metadata_name
}

/// mdadm's colon form of an array UUID (`xxxxxxxx:xxxxxxxx:xxxxxxxx:xxxxxxxx`, what
/// `mdadm --detail` prints and udisks2 publishes) from any spelling of its 32 hex digits
/// (`md/uuid`'s `%pU` form `8-4-4-4-12`, the colon form itself); `None` unless there are exactly
/// 32 hex digits. For 1.x metadata both forms hold the same bytes in the same order; for 0.90
/// metadata mdadm prints each 32-bit word in host order, so prefer udev's `MD_UUID` where it
/// exists ([`array_uuid`]).
pub fn mdadm_uuid(any: &str) -> Option<String> {
    crate::model::ArrayUuid::parse(any).map(|u| u.to_string())
}

/// The UUID of array `kernel` in mdadm's colon form: udev's `MD_UUID`, else `md/uuid` converted
/// by [`mdadm_uuid`]; `None` where neither exists (inactive arrays, containers, old kernels).
pub fn array_uuid(root: &Root, kernel: &str) -> Option<String> {
    if let Some(u) = udev_names(root, kernel).mdadm_uuid {
        return Some(u);
    }
    mdadm_uuid(&super::read_attr(root, kernel, "uuid")?)
}

/// The `/dev/md/` links by the kernel name they point to: `{"md127": ["/dev/md/root"]}` (paths as
/// seen on the host, not under the root), each list sorted. Links whose target is not a plain
/// `/dev/<kernel name>` node are ignored; no `/dev/md` directory gives an empty map.
pub fn md_links(root: &Root) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir(root.dev("md")) else {
        return out;
    };
    for e in dir.flatten() {
        let Ok(target) = std::fs::read_link(e.path()) else {
            continue;
        };
        let (Some(kernel), Some(link)) = (
            target.file_name().and_then(|n| n.to_str()),
            e.file_name().to_str().map(String::from),
        ) else {
            continue;
        };
        out.entry(kernel.to_string())
            .or_default()
            .push(format!("/dev/md/{link}"));
    }
    for v in out.values_mut() {
        v.sort();
    }
    out
}

/// The `/dev/md/NAME` link of array `kernel` (the first in sort order when there are several),
/// or `None`.
pub fn named_device(root: &Root, kernel: &str) -> Option<String> {
    md_links(root).remove(kernel)?.into_iter().next()
}
