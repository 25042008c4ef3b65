//! The journal of per-array kernel changes a job holds (pure: no I/O; the adapter in
//! [`super::adapter`] reads and writes the files).
//!
//! The speed-limit knobs are journaled by the lease machine ([`super::lease`]); this module keeps
//! the other writes mdpilot makes to an array on behalf of one owner, in the same state file
//! (`[[change]]` entries, see [`super::state`]):
//! - a freeze: `frozen` -> `md/sync_action`, put back with `idle` (the resync resumes from its
//!   checkpoint; `resync_start none` is never a put-back value, only the job writes it after the
//!   whole array was written);
//! - any other attribute (the form later issues use for `sync_min` / `sync_max` of a check
//!   window): `written` -> `md/<attr>`, put back with `restore`.
//!
//! A change is recorded *before* its write and is ours only while the attribute still reads what
//! we wrote: an array someone else unfroze (or froze before us) is never touched. The entry names
//! the array by kernel name and by UUID (`md/uuid`), so a renumbered array is found under its
//! new name and a different array with the same name is left alone.
//!
//! Source of truth: kernel `Documentation/admin-guide/md.rst` (`sync_action`, `sync_min`,
//! `sync_max`, `resync_start`, `uuid`).

use super::request::{valid_array_name, Owner};
use crate::vocab::{SyncAction, NONE};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// The attribute a freeze writes.
pub const SYNC_ACTION: &str = "sync_action";

/// The `md/` attributes a change may name: the ones whose put-back value is a plain word or
/// number. Anything else in a state file is refused (a path could leave `/sys/block`).
pub const ATTRS: [&str; 3] = [SYNC_ACTION, "sync_min", "sync_max"];

/// An array named twice: the kernel name when the change was made and the array's UUID.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArrayRef {
    /// Kernel name (`md0`), validated by [`valid_array_name`].
    pub name: String,
    /// `md/uuid` (`3b6c2a6e-0d0e-...`); `None` when the kernel did not expose it (then the
    /// array is recognised by name only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
}

impl fmt::Display for ArrayRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.uuid {
            Some(u) => write!(f, "{} (uuid {u})", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// One kernel write held by one owner, with the value that puts it back.
///
/// State file form:
/// ```toml
/// [[change]]
/// id = "freeze:md0"
/// owner = {pid = 1234}
/// array = {name = "md0", uuid = "3b6c2a6e-..."}
/// attr = "sync_action"
/// written = "frozen"
/// restore = "idle"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Change {
    /// Unique name of the change (`freeze:md0`).
    pub id: String,
    /// What keeps it alive: the process running the job (the CLI's, or the service's).
    pub owner: Owner,
    /// The array.
    pub array: ArrayRef,
    /// The `md/` attribute, one of [`ATTRS`].
    pub attr: String,
    /// What we write (and what the attribute reads while the change is ours).
    pub written: String,
    /// What puts it back.
    pub restore: String,
}

impl Change {
    /// The freeze of `array` by `owner`: `frozen` -> `sync_action`, put back with `idle`.
    pub fn freeze(array: ArrayRef, owner: Owner) -> Change {
        Change {
            id: super::Holder::freeze(&array.name).to_string(),
            owner,
            array,
            attr: SYNC_ACTION.into(),
            written: SyncAction::Frozen.as_str().into(),
            restore: SyncAction::Idle.as_str().into(),
        }
    }

    /// True when `reading` (the attribute's text, trimmed) is what we wrote.
    pub fn is_ours(&self, reading: &str) -> bool {
        reading.trim() == self.written
    }

    /// Checks a change read from a file: array name, attribute, one-line values.
    pub fn validate(&self) -> Result<(), String> {
        if !valid_array_name(&self.array.name) {
            return Err(format!("invalid array name in change {:?}", self.id));
        }
        if !ATTRS.contains(&self.attr.as_str()) {
            return Err(format!(
                "unknown attribute {:?} in change {:?}",
                self.attr, self.id
            ));
        }
        let word =
            |s: &str| !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_graphic());
        if !word(&self.written) || !word(&self.restore) || self.id.is_empty() {
            return Err(format!("invalid values in change {:?}", self.id));
        }
        if self.restore == NONE || self.written == NONE {
            // `resync_start none` marks an array clean; it is never a journaled value.
            return Err(format!("change {:?} writes none", self.id));
        }
        Ok(())
    }
}

/// What the kernel says about an array right now, as the adapter read it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArrayNow {
    /// `md/uuid`, when readable.
    pub uuid: Option<String>,
    /// The attributes the changes name (`sync_action` -> `frozen`), trimmed.
    pub attrs: BTreeMap<String, String>,
}

/// Where a change's array is now: its kernel name, or why it cannot be touched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Located {
    /// The array, possibly under another name (renumbered).
    At(String),
    /// No array with this UUID (or name, without UUID) exists: nothing to put back.
    Gone,
    /// An array of that name exists but is another array (another UUID).
    Replaced {
        /// The UUID of the array that now has the name.
        found: String,
    },
}

/// Finds `array` among `arrays` (kernel name -> current state): by name when the UUID matches
/// (or either is unknown), else by UUID under another name.
pub fn locate(array: &ArrayRef, arrays: &BTreeMap<String, ArrayNow>) -> Located {
    let by_name = arrays.get(&array.name);
    match (&array.uuid, by_name) {
        (None, Some(_)) => return Located::At(array.name.clone()),
        (None, None) => return Located::Gone,
        (Some(want), Some(now)) if now.uuid.as_deref().map_or(true, |u| u == want) => {
            return Located::At(array.name.clone());
        }
        _ => {}
    }
    let want = array.uuid.as_deref();
    if let Some((name, _)) = arrays.iter().find(|(_, a)| a.uuid.as_deref() == want) {
        return Located::At(name.clone());
    }
    match by_name.and_then(|a| a.uuid.clone()) {
        Some(found) => Located::Replaced { found },
        None => Located::Gone,
    }
}

/// One attribute write of an undo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttrWrite {
    /// The id of the change it undoes.
    pub id: String,
    /// Kernel name of the array (where it is now).
    pub array: String,
    /// The `md/` attribute.
    pub attr: String,
    /// What to write.
    pub value: String,
}

/// The result of [`undo`]: do `writes` (each independent), then save the changes without the
/// undone ones. `notes` are what the adapter logs at warn (one per change undone or dropped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undo {
    /// The changes that stay (not selected).
    pub kept: BTreeMap<String, Change>,
    /// Writes putting back what is still ours.
    pub writes: Vec<AttrWrite>,
    /// One line per selected change: what was done with it.
    pub notes: Vec<String>,
}

/// Undoes the changes `select` picks (e.g. those whose owner is dead), given the arrays as they
/// are now. A change whose attribute still reads what we wrote gets its `restore` written (on
/// the array found by [`locate`]); one that reads anything else is no longer ours and is just
/// dropped; one whose array is gone or replaced by another is dropped without a write.
pub fn undo(
    changes: &BTreeMap<String, Change>,
    select: impl Fn(&Change) -> bool,
    arrays: &BTreeMap<String, ArrayNow>,
) -> Undo {
    let mut out = Undo {
        kept: BTreeMap::new(),
        writes: Vec::new(),
        notes: Vec::new(),
    };
    for (id, c) in changes {
        if !select(c) {
            out.kept.insert(id.clone(), c.clone());
            continue;
        }
        let what = format!("{} of {} {} by {}", c.attr, c.written, c.array, c.owner);
        match locate(&c.array, arrays) {
            Located::At(name) => {
                let now = arrays.get(&name).and_then(|a| a.attrs.get(&c.attr));
                match now {
                    Some(r) if c.is_ours(r) => {
                        let moved = if name == c.array.name {
                            String::new()
                        } else {
                            format!(" (now {name})")
                        };
                        out.notes.push(format!(
                            "undoing {what}{moved}: writing {} to {}",
                            c.restore, c.attr
                        ));
                        out.writes.push(AttrWrite {
                            id: id.clone(),
                            array: name,
                            attr: c.attr.clone(),
                            value: c.restore.clone(),
                        });
                    }
                    Some(r) => out.notes.push(format!(
                        "dropping {what}: {} reads {r:?}, no longer ours; left as it is",
                        c.attr
                    )),
                    None => out.notes.push(format!(
                        "dropping {what}: {} is unreadable; left as it is",
                        c.attr
                    )),
                }
            }
            Located::Gone => out.notes.push(format!(
                "dropping {what}: the array is gone; nothing to put back"
            )),
            Located::Replaced { found } => out.notes.push(format!(
                "dropping {what}: {} is now another array (uuid {found}); not touched",
                c.array.name
            )),
        }
    }
    out
}

/// Arrays reading `frozen` that no change of ours explains: frozen by someone else (mdadm, an
/// admin, another tool). Reported, never touched. Returns the kernel names, sorted.
pub fn foreign_frozen(
    changes: &BTreeMap<String, Change>,
    arrays: &BTreeMap<String, ArrayNow>,
) -> Vec<String> {
    arrays
        .iter()
        .filter(|(_, a)| {
            a.attrs
                .get(SYNC_ACTION)
                .is_some_and(|v| SyncAction::Frozen == v.as_str())
        })
        .filter(|(name, _)| {
            !changes.values().any(|c| {
                c.attr == SYNC_ACTION && locate(&c.array, arrays) == Located::At((*name).clone())
            })
        })
        .map(|(n, _)| n.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn md(name: &str, uuid: &str, action: &str) -> (String, ArrayNow) {
        let mut attrs = BTreeMap::new();
        attrs.insert(SYNC_ACTION.to_string(), action.to_string());
        (
            name.to_string(),
            ArrayNow {
                uuid: Some(uuid.into()),
                attrs,
            },
        )
    }

    fn freeze(name: &str, uuid: &str, pid: u32) -> (String, Change) {
        let c = Change::freeze(
            ArrayRef {
                name: name.into(),
                uuid: Some(uuid.into()),
            },
            Owner::Pid(pid),
        );
        (c.id.clone(), c)
    }

    #[test]
    fn frozen_by_us_is_put_back_with_idle() {
        let ch: BTreeMap<_, _> = [freeze("md0", "u1", 7)].into();
        let arrays: BTreeMap<_, _> = [md("md0", "u1", "frozen")].into();
        let u = undo(&ch, |_| true, &arrays);
        assert!(u.kept.is_empty());
        assert_eq!(
            u.writes,
            vec![AttrWrite {
                id: "freeze:md0".into(),
                array: "md0".into(),
                attr: "sync_action".into(),
                value: "idle".into()
            }]
        );
        assert!(u.notes[0].contains("writing idle"), "{:?}", u.notes);
    }

    #[test]
    fn unselected_changes_are_kept_untouched() {
        let ch: BTreeMap<_, _> = [freeze("md0", "u1", 7), freeze("md1", "u2", 8)].into();
        let arrays: BTreeMap<_, _> = [md("md0", "u1", "frozen"), md("md1", "u2", "frozen")].into();
        let u = undo(&ch, |c| c.owner == Owner::Pid(7), &arrays);
        assert_eq!(u.kept.keys().collect::<Vec<_>>(), vec!["freeze:md1"]);
        assert_eq!(u.writes.len(), 1);
        assert_eq!(u.writes[0].array, "md0");
    }

    #[test]
    fn not_frozen_any_more_is_dropped_without_a_write() {
        // Crash after the record, before the write; or someone unfroze it since.
        for now in ["resync", "idle", "recover"] {
            let ch: BTreeMap<_, _> = [freeze("md0", "u1", 7)].into();
            let arrays: BTreeMap<_, _> = [md("md0", "u1", now)].into();
            let u = undo(&ch, |_| true, &arrays);
            assert!(u.writes.is_empty() && u.kept.is_empty(), "{now}");
            assert!(u.notes[0].contains("no longer ours"), "{:?}", u.notes);
        }
    }

    #[test]
    fn renumbered_array_is_found_by_uuid() {
        let ch: BTreeMap<_, _> = [freeze("md0", "u1", 7)].into();
        let arrays: BTreeMap<_, _> = [md("md127", "u1", "frozen")].into();
        let u = undo(&ch, |_| true, &arrays);
        assert_eq!(u.writes[0].array, "md127");
        assert!(u.notes[0].contains("(now md127)"), "{:?}", u.notes);
    }

    #[test]
    fn another_array_with_the_same_name_is_not_touched() {
        let ch: BTreeMap<_, _> = [freeze("md0", "u1", 7)].into();
        let arrays: BTreeMap<_, _> = [md("md0", "u9", "frozen")].into();
        let u = undo(&ch, |_| true, &arrays);
        assert!(u.writes.is_empty() && u.kept.is_empty());
        assert!(
            u.notes[0].contains("another array (uuid u9)"),
            "{:?}",
            u.notes
        );
        // ... and it is reported as frozen by someone else.
        assert_eq!(foreign_frozen(&u.kept, &arrays), vec!["md0".to_string()]);
        assert_eq!(foreign_frozen(&ch, &arrays), vec!["md0".to_string()]);
    }

    #[test]
    fn gone_array_is_dropped() {
        let ch: BTreeMap<_, _> = [freeze("md0", "u1", 7)].into();
        let u = undo(&ch, |_| true, &BTreeMap::new());
        assert!(u.writes.is_empty() && u.kept.is_empty());
        assert!(u.notes[0].contains("gone"));
    }

    #[test]
    fn without_uuid_the_name_decides() {
        let mut c = Change::freeze(
            ArrayRef {
                name: "md0".into(),
                uuid: None,
            },
            Owner::Pid(1),
        );
        c.id = "x".into();
        let ch: BTreeMap<_, _> = [("x".to_string(), c)].into();
        let arrays: BTreeMap<_, _> = [md("md0", "u1", "frozen")].into();
        assert_eq!(undo(&ch, |_| true, &arrays).writes.len(), 1);
    }

    #[test]
    fn foreign_frozen_ignores_ours() {
        let ch: BTreeMap<_, _> = [freeze("md0", "u1", 7)].into();
        let arrays: BTreeMap<_, _> = [
            md("md0", "u1", "frozen"),
            md("md1", "u2", "frozen"),
            md("md2", "u3", "idle"),
        ]
        .into();
        assert_eq!(foreign_frozen(&ch, &arrays), vec!["md1".to_string()]);
    }

    #[test]
    fn validate_refuses_paths_and_none() {
        let (_, c) = freeze("md0", "u1", 7);
        assert!(c.validate().is_ok());
        let mut bad = c.clone();
        bad.attr = "../../x".into();
        assert!(bad.validate().is_err());
        let mut bad = c.clone();
        bad.restore = "none".into();
        assert!(bad.validate().is_err());
        let mut bad = c.clone();
        bad.array.name = "../sda".into();
        assert!(bad.validate().is_err());
        let mut win = c;
        win.attr = "sync_max".into();
        win.written = "1024".into();
        win.restore = "max".into();
        assert!(win.validate().is_ok());
    }
}
