//! Kernel I/O for the speed-limit knobs, under a [`Root`].
//!
//! - `/proc/sys/dev/raid/speed_limit_{min,max}`: a decimal number, KiB/s.
//! - `/sys/block/mdN/md/sync_speed_{min,max}`: `N (local)` or `N (system)` (a bare `N` is
//!   accepted too); writing `system` reverts the array to the global value. The kernel rejects 0
//!   for `sync_speed_min` and `sync_speed_max` with EINVAL, which is why the core never asks for
//!   it (0 is written as 1).
//!
//! Source of truth: kernel `Documentation/admin-guide/md.rst` and `drivers/md/md.c`
//! (`sync_min_show` prints `"%d (%s)\n"` with `system` or `local`).

use super::journal::ArrayNow;
use super::lease::Setting;
use super::request::KnobId;
use crate::host::Root;
use crate::model::SpeedLimit;
use crate::sysfs::{self, LimitError, LimitForm};
use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;

/// Failures reading or writing a knob; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum KnobError {
    /// The file does not exist (no md driver loaded, or no such array).
    #[error("{path} does not exist ({})", if *array {
        "no such array, or it is stopped?"
    } else {
        "md driver not loaded?"
    })]
    Missing {
        /// The knob file.
        path: PathBuf,
        /// True for a per-array knob (the hint differs: a global one means no md driver).
        array: bool,
    },
    /// The file does not hold a number (or `N (local|system)` for per-array knobs).
    #[error("{path} holds {text:?}, not a speed limit in KiB/s")]
    NotNumeric {
        /// The knob file.
        path: PathBuf,
        /// What it held.
        text: String,
    },
    /// Reading failed.
    #[error("cannot read {path}")]
    Read {
        /// The knob file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The write was accepted but the knob reads back another value right after.
    #[error("wrote {value:?} to {path} but it reads back {now}")]
    NotTaken {
        /// The knob file.
        path: PathBuf,
        /// The text we wrote.
        value: String,
        /// What it reads now.
        now: SpeedLimit,
    },
    /// Writing failed (EACCES when not root, EROFS for a read-only /proc/sys, EINVAL...).
    #[error("cannot write {value:?} to {path}")]
    Write {
        /// The knob file.
        path: PathBuf,
        /// The text we tried to write.
        value: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

impl KnobError {
    /// True for [`KnobError::Missing`].
    pub fn is_missing(&self) -> bool {
        matches!(self, KnobError::Missing { .. })
    }
}

/// Reads and writes knobs. The real implementation is [`FsKnobs`]; tests wrap it to inject
/// failures.
pub trait KnobIo: Send + Sync {
    /// Current reading of `knob`.
    fn read(&self, knob: &KnobId) -> Result<SpeedLimit, KnobError>;
    /// Writes `setting` to `knob`.
    fn write(&self, knob: &KnobId, setting: Setting) -> Result<(), KnobError>;
    /// Names of the md arrays that have speed-limit knobs (`/sys/block/md*/md/sync_speed_min`),
    /// sorted. Used by `restore --defaults`.
    fn arrays(&self) -> Vec<String>;
    /// `md/uuid` of array `name` (`None` when missing or unreadable).
    fn uuid(&self, _name: &str) -> Option<String> {
        None
    }
    /// Every md array (`/sys/block/md*/md`) with its UUID and the trimmed text of `attrs`
    /// (missing or unreadable attributes are left out), for the journal ([`super::journal`]).
    fn arrays_now(&self, _attrs: &[&str]) -> BTreeMap<String, ArrayNow> {
        BTreeMap::new()
    }
    /// Writes `value` to `/sys/block/<array>/md/<attr>` (`attr` one of [`super::journal::ATTRS`]
    /// or `resync_start`).
    fn write_attr(&self, array: &str, attr: &str, value: &str) -> Result<(), KnobError> {
        Err(KnobError::Write {
            path: PathBuf::from(sysfs::array_attr_kernel_path(array, attr)),
            value: value.to_string(),
            source: io::Error::from(io::ErrorKind::Unsupported),
        })
    }
}

/// The files under a [`Root`].
#[derive(Debug, Clone)]
pub struct FsKnobs {
    root: Root,
}

impl FsKnobs {
    /// Knobs under `root` (`Root::system()` for the real kernel).
    pub fn new(root: Root) -> Self {
        FsKnobs { root }
    }

    /// The file of `knob` under the root.
    pub fn path(&self, knob: &KnobId) -> PathBuf {
        self.root.path(knob.kernel_path())
    }

    /// Writes `setting` to `knob`'s file: one `write(2)` to procfs/sysfs, a rename onto a test
    /// root's regular file; never creates the file.
    fn store(&self, knob: &KnobId, setting: Setting) -> Result<(), KnobError> {
        let path = self.path(knob);
        let value = setting.to_text();
        let err = |source: io::Error| {
            if source.kind() == io::ErrorKind::NotFound {
                KnobError::Missing {
                    path: path.clone(),
                    array: knob.is_array(),
                }
            } else {
                KnobError::Write {
                    path: path.clone(),
                    value: value.clone(),
                    source,
                }
            }
        };
        let text = format!("{value}\n");
        if is_kernel_file(&path) {
            // One write(2) to procfs/sysfs is one atomic store in the kernel; the one writer
            // never creates a file: a missing knob is an error.
            return sysfs::write_attr(&path, &text).map_err(|e| err(e.into()));
        }
        // A regular file standing in for a knob (test roots, the simulator): replace it by
        // rename so that, like the kernel's store, a crash never leaves it half written.
        let meta = std::fs::metadata(&path).map_err(err)?;
        if meta.is_dir() {
            return Err(err(io::Error::from_raw_os_error(libc::EISDIR)));
        }
        let tmp = super::state::sibling(&path, &format!(".mdpilot-tmp-{}", std::process::id()));
        let result =
            std::fs::write(&tmp, text.as_bytes()).and_then(|()| std::fs::rename(&tmp, &path));
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map_err(err)
    }
}

/// True when `path` is on procfs or sysfs (a real kernel knob), false for a regular file in a
/// test root or when it cannot be told.
fn is_kernel_file(path: &std::path::Path) -> bool {
    use nix::sys::statfs::{statfs, PROC_SUPER_MAGIC, SYSFS_MAGIC};
    statfs(path).is_ok_and(|s| {
        let t = s.filesystem_type();
        t == PROC_SUPER_MAGIC || t == SYSFS_MAGIC
    })
}

/// The text form of `knob`'s file: per-array knobs read `N (local)` / `N (system)`.
fn form(knob: &KnobId) -> LimitForm {
    if knob.is_array() {
        LimitForm::Array
    } else {
        LimitForm::Global
    }
}

/// Parses a knob's text: `N`, `N (local)` or (per-array only) `N (system)` (the model's one
/// parser for the form of `knob`'s file).
pub fn parse_reading(knob: &KnobId, text: &str) -> Option<SpeedLimit> {
    match form(knob) {
        LimitForm::Array => SpeedLimit::parse(text),
        LimitForm::Global => SpeedLimit::parse_global(text),
    }
}

impl KnobIo for FsKnobs {
    /// Reads through [`sysfs::read_limit`], the one reader of the limit files.
    fn read(&self, knob: &KnobId) -> Result<SpeedLimit, KnobError> {
        sysfs::read_limit(&self.path(knob), form(knob)).map_err(|e| match e {
            LimitError::Missing { path } => KnobError::Missing {
                path,
                array: knob.is_array(),
            },
            LimitError::Read { path, source } => KnobError::Read { path, source },
            LimitError::NotNumeric { path, text } => KnobError::NotNumeric { path, text },
        })
    }

    /// Writes through [`sysfs::write_attr`] (or, on a test root's regular file, by rename),
    /// then reads the knob back: a reading that `setting` does not match is
    /// [`KnobError::NotTaken`] with what it reads. (A regular file cannot turn `system` into
    /// `N (system)`, so there only numbers are read back.)
    fn write(&self, knob: &KnobId, setting: Setting) -> Result<(), KnobError> {
        let kernel = is_kernel_file(&self.path(knob));
        self.store(knob, setting)?;
        if !kernel && setting == Setting::System {
            return Ok(());
        }
        let now = self.read(knob)?;
        if setting.matches(&now) {
            Ok(())
        } else {
            Err(KnobError::NotTaken {
                path: self.path(knob),
                value: setting.to_text(),
                now,
            })
        }
    }

    fn arrays(&self) -> Vec<String> {
        sysfs::list_arrays(&self.root)
            .into_iter()
            .filter(|a| {
                super::request::valid_array_name(a)
                    && sysfs::has_attr(&self.root, a, "sync_speed_min")
            })
            .collect()
    }

    fn uuid(&self, name: &str) -> Option<String> {
        sysfs::read_attr(&self.root, name, "uuid").filter(|u| !u.is_empty())
    }

    fn arrays_now(&self, attrs: &[&str]) -> BTreeMap<String, ArrayNow> {
        let mut out = BTreeMap::new();
        for name in sysfs::list_arrays(&self.root) {
            if !super::request::valid_array_name(&name) {
                continue;
            }
            let mut now = ArrayNow {
                uuid: self.uuid(&name),
                ..Default::default()
            };
            for a in attrs {
                if let Some(v) = sysfs::read_attr(&self.root, &name, a) {
                    now.attrs.insert((*a).to_string(), v);
                }
            }
            out.insert(name, now);
        }
        out
    }

    /// Through [`sysfs::write_array_attr`], the one writer: a missing attribute (array
    /// stopped) is [`KnobError::Missing`], never a new file.
    fn write_attr(&self, array: &str, attr: &str, value: &str) -> Result<(), KnobError> {
        sysfs::write_array_attr(&self.root, array, attr, value).map_err(|e| match e {
            sysfs::WriteError::Gone { path, .. } => KnobError::Missing { path, array: true },
            e => KnobError::Write {
                path: e.path().to_path_buf(),
                value: value.to_string(),
                source: e.into(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::request::Bound;

    fn arr() -> KnobId {
        KnobId::Array {
            array: "md0".into(),
            bound: Bound::Min,
        }
    }

    #[test]
    fn parses_kernel_formats() {
        let g = KnobId::Global(Bound::Min);
        assert_eq!(parse_reading(&g, "1000\n"), Some(SpeedLimit::local(1000)));
        assert_eq!(parse_reading(&g, "1000 (system)"), None);
        assert_eq!(parse_reading(&g, "abc"), None);
        assert_eq!(parse_reading(&g, ""), None);
        assert_eq!(parse_reading(&g, "-1"), None);
        assert_eq!(
            parse_reading(&arr(), "1 (local)\n"),
            Some(SpeedLimit::local(1))
        );
        assert_eq!(
            parse_reading(&arr(), "200000 (system)"),
            Some(SpeedLimit {
                kib_s: 200000,
                system: true
            })
        );
        assert_eq!(parse_reading(&arr(), "5"), Some(SpeedLimit::local(5)));
        assert_eq!(parse_reading(&arr(), "system"), None);
        assert_eq!(parse_reading(&arr(), "5 (weird)"), None);
    }

    #[test]
    fn fs_read_write_and_errors() {
        let d = tempfile::tempdir().unwrap();
        let k = FsKnobs::new(Root::new(d.path()));
        let g = KnobId::Global(Bound::Max);
        let e = k.read(&g).unwrap_err();
        assert!(e.is_missing());
        assert!(
            e.to_string()
                .ends_with("does not exist (md driver not loaded?)"),
            "{e}"
        );
        let e = k.read(&arr()).unwrap_err().to_string();
        assert!(e.ends_with("(no such array, or it is stopped?)"), "{e}");
        assert!(k.write(&g, Setting::Kibs(1)).unwrap_err().is_missing());
        assert!(!k.path(&g).exists(), "write must not create the knob");
        std::fs::create_dir_all(k.path(&g).parent().unwrap()).unwrap();
        std::fs::write(k.path(&g), "200000\n").unwrap();
        assert_eq!(k.read(&g).unwrap(), SpeedLimit::local(200000));
        k.write(&g, Setting::Kibs(5)).unwrap();
        assert_eq!(std::fs::read_to_string(k.path(&g)).unwrap(), "5\n");
        std::fs::write(k.path(&g), "lots\n").unwrap();
        let e = k.read(&g).unwrap_err().to_string();
        assert!(e.contains("speed_limit_max") && e.contains("lots"), "{e}");
        std::fs::create_dir_all(k.path(&arr()).parent().unwrap()).unwrap();
        std::fs::write(k.path(&arr()), "1000 (system)\n").unwrap();
        assert_eq!(k.arrays(), vec!["md0".to_string()]);
        k.write(&arr(), Setting::System).unwrap();
        assert_eq!(std::fs::read_to_string(k.path(&arr())).unwrap(), "system\n");
    }
}
