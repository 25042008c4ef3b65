//! The durable policy state: a TOML file (default `/run/mdpilot/policy.toml`) holding the live
//! leases and, per managed knob, the original reading and what we wrote; plus the lock file
//! beside it (`policy.toml.lock`, `flock`) that serialises writers.
//!
//! Saving is atomic: a temporary file in the same directory, `fsync`, `rename` over the state
//! file, `fsync` of the directory. A state file that does not parse is never guessed from: it is
//! moved aside to `policy.toml.corrupt-<unix seconds>` (hard link, then a fresh state saved over
//! it, so the state path never goes missing), the fresh state records
//! `originals_unknown = "<moved-to path>"`, and the error names both paths. Until
//! `restore --defaults`, no original is captured (the kernel may hold our own earlier value).
//! [`read`] (for `policy show`) only reports corruption and changes nothing.
//!
//! File shape (version 1), as written:
//! ```toml
//! version = 1
//! warnings = []
//! # originals_unknown = "/run/mdpilot/policy.toml.corrupt-1700000000"  (only after corruption)
//!
//! [[lease]]
//! holder = "installer"
//! kind = "installer"            # installer | wipe-job | admin | dbus-client
//! owner = "none"                # or {pid = 1234} or {bus-name = ":1.42"}
//! [lease.global]
//! min = 0
//! [lease.arrays.md0]
//! min = 0
//!
//! [[knob]]
//! knob = "speed_limit_min"      # or "md0/sync_speed_min"
//! written = 0                   # what we last wrote
//! pending = {kibs = 0}          # only while a write is in progress ("system" for system)
//! uuid = "3b6c..."               # per-array knobs: md/uuid of the array when first managed
//! [knob.original]
//! kibs = 1000
//! system = false                # true: the per-array file read "N (system)"
//!
//! [[change]]                    # the journal of other array writes (policy::journal)
//! id = "freeze:md0"
//! owner = {pid = 1234}
//! array = {name = "md0", uuid = "3b6c..."}
//! attr = "sync_action"
//! written = "frozen"            # ours while it reads this
//! restore = "idle"              # what puts it back
//! ```
//!
//! Every field added since the first version is optional, so older files still parse.

use super::journal::Change;
use super::lease::{Managed, PolicyState, Setting};
use super::request::{KnobId, LeaseRequest};
use super::warning::PolicyWarning;
use crate::model::SpeedLimit;
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

/// The state file format version written by this code.
pub const STATE_VERSION: u32 = 1;

/// Failures reading, writing or locking the state file; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The file exists but cannot be read (EACCES, EIO...).
    #[error("cannot read policy state {path}")]
    Read {
        /// The state file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The file does not parse; it was moved aside and is no longer used.
    #[error(
        "policy state {path} is corrupt ({reason}); moved it to {moved_to}; originals are \
         unknown: check the limits, or run `mdpilot policy restore --defaults`"
    )]
    Corrupt {
        /// The state file.
        path: PathBuf,
        /// Where it is now.
        moved_to: PathBuf,
        /// The parse error.
        reason: String,
    },
    /// The file does not parse; found by a read-only reader ([`read`]), so it was left in place.
    #[error(
        "policy state {path} is corrupt ({reason}); originals are unknown: the next \
         `mdpilot policy apply|release|restore` moves it aside; check the limits, or run \
         `mdpilot policy restore --defaults`"
    )]
    CorruptUntouched {
        /// The state file.
        path: PathBuf,
        /// The parse error (one line).
        reason: String,
    },
    /// The file does not parse and could not be moved aside either.
    #[error("policy state {path} is corrupt ({reason}) and could not be moved to {moved_to}")]
    CorruptStuck {
        /// The state file.
        path: PathBuf,
        /// Where we tried to move it.
        moved_to: PathBuf,
        /// The parse error.
        reason: String,
        /// Why the rename failed.
        #[source]
        source: io::Error,
    },
    /// Creating, writing, syncing or renaming the file (or its temporary) failed.
    #[error("cannot write policy state {path}")]
    Write {
        /// The file that failed (state file, temporary or directory).
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The state cannot be written as TOML (a number TOML cannot hold: its integers are i64);
    /// nothing was written, neither the file nor the kernel.
    #[error("policy state {path} not saved, nothing changed: {reason}")]
    Unrepresentable {
        /// The state file.
        path: PathBuf,
        /// The serializer's message.
        reason: String,
    },
    /// Opening or locking the lock file failed.
    #[error("cannot lock {path}")]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateFile {
    version: u32,
    #[serde(default)]
    warnings: Vec<PolicyWarning>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    originals_unknown: Option<String>,
    /// Timed leases (holder → Unix seconds); absent in files written before timed leases.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    expires: BTreeMap<String, u64>,
    /// When each lease was first taken (holder → Unix seconds); absent in older files.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    taken: BTreeMap<String, u64>,
    #[serde(default, rename = "lease")]
    leases: Vec<LeaseRequest>,
    #[serde(default, rename = "knob")]
    knobs: Vec<KnobEntry>,
    #[serde(default, rename = "change", skip_serializing_if = "Vec::is_empty")]
    changes: Vec<Change>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KnobEntry {
    knob: String,
    #[serde(with = "super::kibs_form")]
    original: SpeedLimit,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    written: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pending: Option<Setting>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    uuid: Option<String>,
}

/// Renders a state as the TOML text of the file.
///
/// Errors: the serializer's message (one line) when a value cannot be written as TOML (an
/// integer above `i64::MAX`, such as an expiry from an unbounded duration): the caller saves
/// nothing then, never an empty file.
pub fn to_toml(state: &PolicyState) -> Result<String, String> {
    let file = StateFile {
        version: STATE_VERSION,
        warnings: state.warnings.clone(),
        originals_unknown: state.originals_unknown.clone(),
        expires: state.expires.clone(),
        taken: state.taken.clone(),
        leases: state.leases.values().cloned().collect(),
        knobs: state
            .knobs
            .iter()
            .map(|(k, m)| KnobEntry {
                knob: k.to_string(),
                original: m.original,
                written: m.written,
                pending: m.pending,
                uuid: m.uuid.clone(),
            })
            .collect(),
        changes: state.changes.values().cloned().collect(),
    };
    toml::to_string(&file).map_err(|e| one_line(&e.to_string()))
}

/// Checks that `state` can be saved to `path` ([`to_toml`] succeeds), before anything that
/// depends on saving it is done.
///
/// Errors: [`StateError::Unrepresentable`].
pub fn saveable(path: &Path, state: &PolicyState) -> Result<(), StateError> {
    to_toml(state)
        .map(drop)
        .map_err(|reason| StateError::Unrepresentable {
            path: path.to_path_buf(),
            reason,
        })
}

/// Parses the TOML text of a state file. Errors: a message (syntax, unknown field, wrong
/// version, duplicate holder or knob, bad knob name), on one line.
pub fn from_toml(text: &str) -> Result<PolicyState, String> {
    from_toml_inner(text).map_err(|e| one_line(&e))
}

/// `text` with line breaks (the TOML parser's messages can have them) replaced by spaces, so
/// that error messages stay one line in logs.
fn one_line(text: &str) -> String {
    text.split(['\n', '\r'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

fn from_toml_inner(text: &str) -> Result<PolicyState, String> {
    let file: StateFile = toml::from_str(text).map_err(|e| e.message().to_string())?;
    if file.version != STATE_VERSION {
        return Err(format!(
            "unsupported version {} (want {STATE_VERSION})",
            file.version
        ));
    }
    let mut state = PolicyState {
        warnings: file.warnings,
        originals_unknown: file.originals_unknown,
        expires: file.expires,
        taken: file.taken,
        ..Default::default()
    };
    for l in file.leases {
        super::request::validate(&l).map_err(|e| e.to_string())?;
        let holder = l.holder.clone();
        if state.leases.insert(holder.clone(), l).is_some() {
            return Err(format!("duplicate lease holder {holder:?}"));
        }
    }
    for k in file.knobs {
        let id: KnobId = k.knob.parse()?;
        let m = Managed {
            original: k.original,
            written: k.written,
            pending: k.pending,
            uuid: k.uuid,
        };
        if state.knobs.insert(id, m).is_some() {
            return Err(format!("duplicate knob {:?}", k.knob));
        }
    }
    for c in file.changes {
        c.validate()?;
        let id = c.id.clone();
        if state.changes.insert(id.clone(), c).is_some() {
            return Err(format!("duplicate change {id:?}"));
        }
    }
    // An expiry without its lease means nothing (a hand-edited file): drop it.
    let leases = &state.leases;
    state.expires.retain(|h, _| leases.contains_key(h));
    state.taken.retain(|h, _| leases.contains_key(h));
    Ok(state)
}

/// Reads the state at `path` without changing anything: `Ok(default)` when missing, a corrupt
/// file is [`StateError::CorruptUntouched`]. Needs no lock (saves are atomic renames).
pub fn read(path: &Path) -> Result<PolicyState, StateError> {
    match parse_file(path)? {
        Ok(s) => Ok(s),
        Err(reason) => Err(StateError::CorruptUntouched {
            path: path.to_path_buf(),
            reason,
        }),
    }
}

/// Loads the state at `path` (call it under [`lock`]): `Ok(default)` when missing. A corrupt
/// file is moved aside to `<path>.corrupt-<unix seconds>`, a fresh state with
/// `originals_unknown` set is saved in its place, and [`StateError::Corrupt`] is returned (the
/// next load sees the fresh state).
pub fn load(path: &Path) -> Result<PolicyState, StateError> {
    match parse_file(path)? {
        Ok(s) => Ok(s),
        Err(reason) => move_aside(path, reason),
    }
}

/// [`load`] for a reset that needs nothing from the file (`restore --defaults`): a file that
/// cannot be read at all (EIO, a file system gone bad) is set aside like a corrupt one, with
/// the read error as the reason, instead of stopping the reset.
///
/// Errors: as [`load`] ([`StateError::Corrupt`] once the file is set aside: the caller goes
/// on with an empty state); [`StateError::CorruptStuck`] when it cannot be set aside.
pub fn load_for_reset(path: &Path) -> Result<PolicyState, StateError> {
    match parse_file(path) {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(reason)) => move_aside(path, reason),
        Err(StateError::Read { source, .. }) => {
            move_aside(path, one_line(&format!("unreadable: {source}")))
        }
        Err(e) => Err(e),
    }
}

/// The parsed file (`Ok(Ok(default))` when missing), `Ok(Err(reason))` when it does not parse.
fn parse_file(path: &Path) -> Result<Result<PolicyState, String>, StateError> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(from_toml(&t)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Ok(PolicyState::default())),
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            Ok(Err(one_line(&format!("not UTF-8: {e}"))))
        }
        Err(source) => Err(StateError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn move_aside(path: &Path, reason: String) -> Result<PolicyState, StateError> {
    let secs = crate::host::unix_now_s();
    let mut moved_to = sibling(path, &format!(".corrupt-{secs}"));
    // Two corrupt files in the same second: never overwrite the first one.
    let mut n = 1;
    while moved_to.exists() {
        moved_to = sibling(path, &format!(".corrupt-{secs}.{n}"));
        n += 1;
    }
    let stuck = |source| StateError::CorruptStuck {
        path: path.to_path_buf(),
        moved_to: moved_to.clone(),
        reason: reason.clone(),
        source,
    };
    // Link first, then replace the state atomically by the marker state: at no point is the
    // state path missing (a missing file would read as "no state" and the next apply would
    // capture the kernel's current value, possibly our own 0, as the original). If saving the
    // marker fails, the corrupt file is still in place and the next load tries again.
    // A file system without hard links: a copy keeps the same guarantee.
    std::fs::hard_link(path, &moved_to)
        .or_else(|_| std::fs::copy(path, &moved_to).map(drop))
        .map_err(stuck)?;
    let marker = PolicyState {
        originals_unknown: Some(moved_to.display().to_string()),
        ..Default::default()
    };
    save(path, &marker).map_err(|e| match e {
        StateError::Write { source, .. } => stuck(source),
        other => other,
    })?;
    tracing::error!(path = %path.display(), moved_to = %moved_to.display(), %reason, "corrupt policy state moved aside; originals unknown");
    Err(StateError::Corrupt {
        path: path.to_path_buf(),
        moved_to,
        reason,
    })
}

/// `path` with `suffix` appended to its file name (`policy.toml` -> `policy.toml.lock`).
pub fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// Saves `state` to `path` atomically through [`crate::atomic::write`] (random `O_EXCL`
/// temporary `<state>.tmp-XXXXXX` in the same directory, fsync, rename, fsync of the
/// directory), mode 0666 less the process's umask, as a plain create gives: 0644 for the CLI
/// under the usual 022 (`policy show` run by any user reads it), 0600 for the service under its
/// unit's `UMask=0077`. The directory is created when missing.
///
/// Errors: [`StateError::Unrepresentable`] (the file is left as it was), [`StateError::Write`].
pub fn save(path: &Path, state: &PolicyState) -> Result<(), StateError> {
    let err = |p: &Path| {
        let p = p.to_path_buf();
        move |source| StateError::Write { path: p, source }
    };
    let text = to_toml(state).map_err(|reason| StateError::Unrepresentable {
        path: path.to_path_buf(),
        reason,
    })?;
    let dir = path.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(dir).map_err(err(dir))?;
    crate::atomic::write(path, text.as_bytes(), 0o666 & !crate::host::umask()).map_err(err(path))
}

/// An exclusive `flock` on `<state>.lock`, held until dropped (the kernel drops it when the
/// process dies, so a killed writer never blocks the next one).
#[derive(Debug)]
pub struct StateLock {
    _lock: Flock<File>,
}

/// Takes the lock beside `state_path`, waiting for any other writer. Creates the directory.
pub fn lock(state_path: &Path) -> Result<StateLock, StateError> {
    let path = sibling(state_path, ".lock");
    let err = |source| StateError::Lock {
        path: path.clone(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(err)?;
    let lock = Flock::lock(file, FlockArg::LockExclusive)
        .map_err(|(_, errno)| err(io::Error::from(errno)))?;
    remove_stale_temps(state_path);
    Ok(StateLock { _lock: lock })
}

/// Removes `<state>.tmp-*` files left by a writer killed mid-save. Only called under the
/// lock, when no other writer can be saving. Best effort: failures are ignored.
fn remove_stale_temps(state_path: &Path) {
    let Some(dir) = state_path.parent() else {
        return;
    };
    let prefix = crate::atomic::temp_prefix(state_path);
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with(&prefix) {
                tracing::debug!(path = %e.path().display(), "removing stale temporary state");
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::request::{Bound, LeaseKind, Limits, Owner};
    use pretty_assertions::assert_eq;
    use std::collections::BTreeMap;

    fn sample() -> PolicyState {
        let mut s = PolicyState::default();
        let mut arrays = BTreeMap::new();
        arrays.insert(
            "md0".to_string(),
            Limits {
                min: Some(0),
                max: None,
                io_depth: None,
            },
        );
        for (h, owner) in [
            ("installer", Owner::None),
            ("job", Owner::Pid(42)),
            (":1.7", Owner::BusName(":1.7".into())),
        ] {
            s.leases.insert(
                h.into(),
                LeaseRequest {
                    holder: h.into(),
                    kind: LeaseKind::WipeJob,
                    owner,
                    global: Limits {
                        min: Some(0),
                        max: Some(5),
                        io_depth: None,
                    },
                    arrays: arrays.clone(),
                },
            );
        }
        s.knobs.insert(
            KnobId::Global(Bound::Min),
            Managed {
                original: SpeedLimit::local(1000),
                written: Some(0),
                pending: None,
                uuid: None,
            },
        );
        s.knobs.insert(
            KnobId::Array {
                array: "md0".into(),
                bound: Bound::Min,
            },
            Managed {
                original: SpeedLimit {
                    kib_s: 1000,
                    system: true,
                },
                written: None,
                pending: Some(Setting::System),
                uuid: Some("3b6c2a6e-0d0e-4b7a-9d5e-8a7b1c2d3e4f".into()),
            },
        );
        let c = Change::freeze(
            crate::policy::journal::ArrayRef {
                name: "md0".into(),
                uuid: Some("3b6c2a6e-0d0e-4b7a-9d5e-8a7b1c2d3e4f".into()),
            },
            Owner::Pid(42),
        );
        s.changes.insert(c.id.clone(), c);
        s.warnings.push(PolicyWarning::Other("x changed".into()));
        s
    }

    #[test]
    fn toml_round_trip() {
        let s = sample();
        let text = to_toml(&s).unwrap();
        assert_eq!(from_toml(&text).unwrap(), s, "{text}");
    }

    #[test]
    fn an_unrepresentable_state_is_an_error_and_the_file_is_kept() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("policy.toml");
        save(&p, &sample()).unwrap();
        let before = std::fs::read(&p).unwrap();
        let mut huge = sample();
        huge.expires.insert("installer".into(), u64::MAX);
        assert!(to_toml(&huge).is_err());
        let e = save(&p, &huge).unwrap_err();
        assert!(matches!(e, StateError::Unrepresentable { .. }), "{e:?}");
        assert!(saveable(&p, &huge).is_err());
        assert_eq!(std::fs::read(&p).unwrap(), before);
        assert_eq!(load(&p).unwrap(), sample());
    }

    #[test]
    fn save_load_atomic_and_missing_is_empty() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("run/mdpilot/policy.toml");
        assert_eq!(load(&p).unwrap(), PolicyState::default());
        save(&p, &sample()).unwrap();
        assert_eq!(load(&p).unwrap(), sample());
        let names: Vec<_> = std::fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("policy.toml")]);
    }

    #[test]
    fn corrupt_is_moved_aside() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("policy.toml");
        std::fs::write(&p, "version = 1\n[[knob]]\nknob = \"bogus\"\n").unwrap();
        match load(&p) {
            Err(StateError::Corrupt { moved_to, .. }) => {
                assert!(moved_to.exists());
                // The state path never goes missing: it now holds the marker state.
                assert!(p.exists());
                assert_eq!(
                    std::fs::read_to_string(&moved_to).unwrap(),
                    "version = 1\n[[knob]]\nknob = \"bogus\"\n"
                );
                assert!(moved_to
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("policy.toml.corrupt-"));
            }
            other => panic!("{other:?}"),
        }
        // A second load sees the marker state: no leases, originals unknown.
        let s = load(&p).unwrap();
        assert!(s.leases.is_empty() && s.knobs.is_empty());
        assert!(s
            .originals_unknown
            .as_deref()
            .is_some_and(|m| m.contains("policy.toml.corrupt-")));
        for bad in [
            "garbage",
            "version = 2",
            "version = 1\nextra = 3",
            "\u{0}\u{ff}",
        ] {
            std::fs::write(&p, bad).unwrap();
            assert!(matches!(load(&p), Err(StateError::Corrupt { .. })), "{bad}");
        }
    }

    #[test]
    fn corrupt_reason_is_one_line_and_read_leaves_the_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("policy.toml");
        std::fs::write(&p, "this is [not toml").unwrap();
        let e = read(&p).unwrap_err();
        assert!(matches!(e, StateError::CorruptUntouched { .. }), "{e:?}");
        assert!(!e.to_string().contains('\n'), "{e}");
        // read-only: nothing moved or created
        let names: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("policy.toml")]);
        let e = load(&p).unwrap_err();
        assert!(matches!(e, StateError::Corrupt { .. }), "{e:?}");
        assert!(!e.to_string().contains('\n'), "{e}");
    }

    #[test]
    fn lock_removes_temps_of_killed_writers() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("policy.toml");
        std::fs::write(d.path().join("policy.toml.tmp-123"), "half").unwrap();
        std::fs::write(d.path().join("policy.toml.corrupt-1"), "kept").unwrap();
        drop(lock(&p).unwrap());
        assert!(!d.path().join("policy.toml.tmp-123").exists());
        assert!(d.path().join("policy.toml.corrupt-1").exists());
    }

    #[test]
    fn lock_is_exclusive() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x/policy.toml");
        let l = lock(&p).unwrap();
        let f = File::open(sibling(&p, ".lock")).unwrap();
        assert!(Flock::lock(f, FlockArg::LockExclusiveNonblock).is_err());
        drop(l);
        let f = File::open(sibling(&p, ".lock")).unwrap();
        assert!(Flock::lock(f, FlockArg::LockExclusiveNonblock).is_ok());
    }
}
