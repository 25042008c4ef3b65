//! The names users type for an md array, and the one resolver from them to the kernel name.
//!
//! An array has up to four names:
//! - the kernel name, `md0` / `md127` (`/sys/block/<name>`); its device node is `/dev/<name>`;
//! - the `/dev/md/` link, `/dev/md/root` (written by udev's `63-md-raid-arrays.rules` from
//!   mdadm's `MD_DEVNAME`), typed as `/dev/md/root` or `md/root`;
//! - the metadata name stored in the superblock, `host:root` for 1.x metadata (none for 0.90).
//!   The kernel does not export it in sysfs for 1.x arrays (`md/array_name` is absent, not empty),
//!   so it is read where udev stores what `mdadm --detail --export` said: `E:MD_NAME=` in the udev
//!   database `/run/udev/data/b<major>:<minor>` (major:minor from `/sys/block/<name>/dev`);
//! - mdadm's UUID in colon form (`E:MD_UUID=` there; [`mdadm_uuid`] derives it from `md/uuid`).
//!
//! [`resolve_array`] accepts any of the first three (and the metadata name's part after `host:`)
//! wherever a front end takes an array: `mdpilot status ARRAY`, `mdpilot policy --array`, the
//! D-Bus methods. Everything is read under a [`Root`] through the kernel-access layer
//! ([`crate::sysfs::udev`] reads the udev database and `/dev/md`), so tests use temporary trees.

use crate::host::Root;
use std::path::Path;

/// Why a name names no array.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Nothing known by that name.
    #[error(
        "no md array named {0:?} (try a kernel name like md0, /dev/md0, /dev/md/NAME, md/NAME or \
         the metadata name)"
    )]
    Unknown(String),
    /// The name matches more than one array (two arrays with the same metadata name).
    #[error("{word:?} names more than one md array: {}", arrays.join(", "))]
    Ambiguous {
        /// What was typed.
        word: String,
        /// The kernel names it matches.
        arrays: Vec<String>,
    },
}

pub use crate::sysfs::udev::{
    array_uuid, md_links, mdadm_uuid, metadata_name, named_device, udev_properties,
};

/// The kernel name (`md127`) of the array the user typed as `word`, among `known` (the kernel
/// names of the arrays the caller knows, e.g. those in `/proc/mdstat`). Accepted, in this order:
/// 1. a kernel name or its device node: `md127`, `/dev/md127`;
/// 2. a `/dev/md/` link: `/dev/md/root`, `md/root`, or the bare link name `root`;
/// 3. the metadata name (`host:root`) or its part after the colon (`root`).
///
/// Errors: [`NameError::Unknown`] when nothing matches; [`NameError::Ambiguous`] when a
/// metadata name matches several arrays.
pub fn resolve_array(root: &Root, word: &str, known: &[String]) -> Result<String, NameError> {
    let is_known = |k: &str| known.iter().any(|n| n == k);
    let plain = word.strip_prefix("/dev/").unwrap_or(word);
    if is_known(plain) {
        return Ok(plain.to_string());
    }
    let link = plain.strip_prefix("md/").unwrap_or(plain);
    if !link.is_empty() && !link.contains('/') {
        if let Ok(target) = std::fs::read_link(root.dev("md").join(link)) {
            if let Some(k) = Path::new(&target).file_name().and_then(|n| n.to_str()) {
                if is_known(k) {
                    return Ok(k.to_string());
                }
            }
        }
    }
    let matches: Vec<String> = known
        .iter()
        .filter(|k| {
            metadata_name(root, k).is_some_and(|n| {
                n == word || n.split_once(':').is_some_and(|(_, short)| short == word)
            })
        })
        .cloned()
        .collect();
    match matches.len() {
        1 => Ok(matches.into_iter().next().unwrap_or_default()),
        0 => Err(NameError::Unknown(word.to_string())),
        _ => Err(NameError::Ambiguous {
            word: word.to_string(),
            arrays: matches,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// md127 (`/dev/md/root`, `host:root`), md126 (no link, `other:data`), md125 (no udev).
    fn tree() -> (tempfile::TempDir, Root) {
        let d = tempfile::tempdir().unwrap();
        let b = d.path();
        let w = |p: &str, s: &str| {
            let p = b.join(p);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, s).unwrap();
        };
        w("sys/block/md127/dev", "9:127\n");
        w(
            "sys/block/md127/md/uuid",
            "3b6c2a6e-0d0e-4b7a-9d5e-8a7b1c2d3e4f\n",
        );
        w(
            "run/udev/data/b9:127",
            "S:md/root\nE:MD_NAME=host:root\nE:MD_UUID=3b6c2a6e:0d0e4b7a:9d5e8a7b:1c2d3e4f\n",
        );
        w("sys/block/md126/dev", "9:126\n");
        w(
            "sys/block/md126/md/uuid",
            "9F1E2D3C-4B5A-6978-8A9B-0C1D2E3F4A5B\n",
        );
        w(
            "run/udev/data/b9:126",
            "E:MD_NAME=other:data\nE:MD_LEVEL=raid5\n",
        );
        w("sys/block/md125/md/level", "raid0\n");
        fs::create_dir_all(b.join("dev/md")).unwrap();
        std::os::unix::fs::symlink("../md127", b.join("dev/md/root")).unwrap();
        std::os::unix::fs::symlink("../md999", b.join("dev/md/gone")).unwrap();
        let root = Root::new(b);
        (d, root)
    }

    fn known() -> Vec<String> {
        vec!["md125".into(), "md126".into(), "md127".into()]
    }

    #[test]
    fn every_typed_form_resolves_to_the_kernel_name() {
        let (_d, root) = tree();
        for w in [
            "md127",
            "/dev/md127",
            "/dev/md/root",
            "md/root",
            "root",
            "host:root",
        ] {
            assert_eq!(resolve_array(&root, w, &known()).unwrap(), "md127", "{w}");
        }
        assert_eq!(resolve_array(&root, "data", &known()).unwrap(), "md126");
        assert_eq!(
            resolve_array(&root, "other:data", &known()).unwrap(),
            "md126"
        );
        assert_eq!(resolve_array(&root, "md125", &known()).unwrap(), "md125");
    }

    #[test]
    fn unknown_and_dangling_names_are_clear_errors() {
        let (_d, root) = tree();
        for w in ["md9", "/dev/md/gone", "md/nothing", "", "/dev/sda"] {
            let e = resolve_array(&root, w, &known()).unwrap_err();
            assert_eq!(e, NameError::Unknown(w.into()));
            assert!(e.to_string().contains("/dev/md/NAME"), "{e}");
        }
    }

    #[test]
    fn a_metadata_name_on_two_arrays_is_ambiguous() {
        let (d, root) = tree();
        fs::write(d.path().join("run/udev/data/b9:126"), "E:MD_NAME=x:root\n").unwrap();
        // The link wins over the metadata name.
        assert_eq!(resolve_array(&root, "root", &known()).unwrap(), "md127");
        fs::remove_file(d.path().join("dev/md/root")).unwrap();
        let e = resolve_array(&root, "root", &known()).unwrap_err();
        assert!(matches!(e, NameError::Ambiguous { ref arrays, .. } if arrays.len() == 2));
    }

    #[test]
    fn uuid_name_and_links_are_read() {
        let (_d, root) = tree();
        assert_eq!(
            array_uuid(&root, "md127").as_deref(),
            Some("3b6c2a6e:0d0e4b7a:9d5e8a7b:1c2d3e4f")
        );
        // No MD_UUID in udev: md/uuid converted.
        assert_eq!(
            array_uuid(&root, "md126").as_deref(),
            Some("9f1e2d3c:4b5a6978:8a9b0c1d:2e3f4a5b")
        );
        assert_eq!(array_uuid(&root, "md125"), None);
        assert_eq!(metadata_name(&root, "md127").as_deref(), Some("host:root"));
        assert_eq!(metadata_name(&root, "md125"), None);
        assert_eq!(
            named_device(&root, "md127").as_deref(),
            Some("/dev/md/root")
        );
        assert_eq!(named_device(&root, "md126"), None);
        assert_eq!(md_links(&root)["md999"], ["/dev/md/gone"]);
        assert_eq!(
            crate::sysfs::list_arrays(&root),
            ["md125", "md126", "md127"]
        );
    }

    #[test]
    fn mdadm_uuid_needs_32_hex_digits() {
        assert_eq!(
            mdadm_uuid("3B6C2A6E-0D0E-4B7A-9D5E-8A7B1C2D3E4F").as_deref(),
            Some("3b6c2a6e:0d0e4b7a:9d5e8a7b:1c2d3e4f")
        );
        assert_eq!(mdadm_uuid("00000000-0000"), None);
        assert_eq!(mdadm_uuid("zz6c2a6e-0d0e-4b7a-9d5e-8a7b1c2d3e4f"), None);
    }
}
