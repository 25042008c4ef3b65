//! The journaled changes of [`Policy`] ([`super::journal`]): array writes a job holds (a
//! frozen `sync_action`) beside the leases, recorded in the same state file before the write and
//! put back on every exit path (by the job, or by the next command's repair when it died).

use super::adapter::{failpoint, Policy};
use super::journal::{self, ArrayRef, Change};
use super::knobs::KnobError;
use super::lease::PolicyState;
use super::state;
use super::{cli_alive, PolicyError};
use std::collections::BTreeSet;

/// What [`Policy::hold`] decided under the lock.
enum Held {
    /// Nothing to write: `true` = a dead owner's same change taken over, `false` = someone
    /// else's value, left alone.
    Done(bool),
    /// Recorded; the kernel write is still to be made.
    Recorded(Change),
}

impl Policy {
    /// Makes a journaled change ([`super::journal`]): records it in the state file under the
    /// lock, then writes it with the lock released (md may take minutes to answer a
    /// `sync_action` write on a failing member, and every other policy operation waits for the
    /// lock), then records the outcome. The array's UUID is read and recorded with the name.
    /// Changes of dead owners are repaired first, except the same change (id, array, attribute,
    /// value) of a dead owner that the attribute still reads: that one is taken over (owner
    /// replaced, nothing written), so a resumed job never lets a frozen resync run in between.
    /// Returns `false` (nothing recorded or written) when the attribute already reads the
    /// value: then the change is someone else's (an array already frozen) and ours must not
    /// put it back.
    ///
    /// While the write is under way the entry is in the journal (a crash then is repaired by
    /// the next command). When another command dropped the entry meanwhile (`policy restore`
    /// undoes every change, and drops one whose attribute does not read it yet), the write is
    /// put back here, so nothing is left changed that no entry records.
    ///
    /// # Errors
    /// [`PolicyError::State`]; [`PolicyError::Invalid`]-like failures of a malformed change are
    /// a [`PolicyError::Write`] naming the attribute; a failed kernel write removes the entry
    /// again ([`PolicyError::Write`], `rolled_back` true when the state was saved back); an
    /// entry dropped by another command during the write is a [`PolicyError::Write`] too
    /// (`rolled_back` true when the put-back succeeded).
    pub fn hold(&self, change: Change) -> Result<bool, PolicyError> {
        let c = match self.record_hold(change)? {
            Held::Done(held) => return Ok(held),
            Held::Recorded(c) => c,
        };
        let (path, id) = (&self.settings.state_path, &c.id);
        let written = self.io.write_attr(&c.array.name, &c.attr, &c.written);
        failpoint("journal-after-write");
        let _lock = state::lock(path)?;
        let mut st = state::load(path)?;
        let entry = st.changes.get(id).cloned();
        match (written, entry) {
            (Ok(()), Some(_)) => Ok(true),
            (Err(source), entry) => {
                let rolled_back = entry.is_none() || {
                    st.changes.remove(id);
                    state::save(path, &st).is_ok()
                };
                Err(PolicyError::Write {
                    source,
                    state_path: path.clone(),
                    rolled_back,
                })
            }
            (Ok(()), None) => {
                let undone = self.io.write_attr(&c.array.name, &c.attr, &c.restore);
                tracing::warn!(id = %id, "{} {}: the journal entry was dropped by another command during the write; put back ({})", c.array, c.attr, c.restore);
                Err(PolicyError::Write {
                    rolled_back: undone.is_ok(),
                    source: undone.err().unwrap_or_else(|| KnobError::Write {
                        path: format!("{} {}", c.array.name, c.attr).into(),
                        value: c.written.clone(),
                        source: std::io::Error::other(
                            "the journal entry was dropped by another command during the write",
                        ),
                    }),
                    state_path: path.clone(),
                })
            }
        }
    }

    /// [`Policy::hold`]'s part under the lock: repairs, takes over or records `change`.
    fn record_hold(&self, mut change: Change) -> Result<Held, PolicyError> {
        let path = &self.settings.state_path;
        let _lock = state::lock(path)?;
        let loaded = state::load(path)?;
        let mut st = loaded.clone();
        if change.array.uuid.is_none() {
            change.array.uuid = self.io.uuid(&change.array.name);
        }
        let now = self.io.arrays_now(&[change.attr.as_str()]);
        let reading = now
            .get(&change.array.name)
            .and_then(|a| a.attrs.get(&change.attr));
        // The same change by a dead owner that still holds (a resumed wipe freezing the array
        // its killed run froze): taken over, so the attribute is never put back in between.
        let dead_twin = st.changes.get(&change.id).filter(|c| {
            !cli_alive(&c.owner)
                && c.attr == change.attr
                && c.written == change.written
                && c.array.name == change.array.name
                && (c.array.uuid.is_none() || c.array.uuid == change.array.uuid)
                && reading.is_some_and(|r| c.is_ours(r))
        });
        if let Some(old) = dead_twin {
            tracing::info!(
                id = %change.id,
                array = %change.array,
                "{} still reads {} from a dead owner ({}): taken over",
                change.attr,
                change.written,
                old.owner
            );
            change.restore = old.restore.clone();
            let id = change.id.clone();
            st.changes.insert(id.clone(), change);
            self.repair(&mut st, &|c: &Change| c.id != id && !cli_alive(&c.owner));
            state::save(path, &st)?;
            failpoint("journal-after-record");
            return Ok(Held::Done(true));
        }
        self.repair(&mut st, &|c: &Change| !cli_alive(&c.owner));
        let now = self.io.arrays_now(&[change.attr.as_str()]);
        let reading = now
            .get(&change.array.name)
            .and_then(|a| a.attrs.get(&change.attr));
        if reading.is_some_and(|r| change.is_ours(r)) && !st.changes.contains_key(&change.id) {
            tracing::warn!(
                "{} {} already reads {}: not ours, left to whoever set it",
                change.array,
                change.attr,
                change.written
            );
            if st != loaded {
                state::save(path, &st)?;
            }
            return Ok(Held::Done(false));
        }
        tracing::info!(id = %change.id, array = %change.array, "{} -> {}", change.written, change.attr);
        let held = Held::Recorded(change.clone());
        st.changes.insert(change.id.clone(), change);
        state::save(path, &st)?;
        failpoint("journal-after-record");
        Ok(held)
    }

    /// Ends the journaled change `id`: when `first` is given, writes it (`resync_start none`
    /// after a complete wipe: `(attr, value)`), then puts back the change's `restore` value if
    /// the attribute still reads ours, then removes the entry. An unknown id (already repaired)
    /// writes nothing. The writes are made with the lock released (as [`Policy::hold`]'s);
    /// the entry stays in the journal until they are done.
    ///
    /// # Errors
    /// [`PolicyError::State`]; [`PolicyError::Write`] when a write fails (the entry then stays,
    /// so the next command's repair puts it back).
    pub fn let_go(&self, id: &str, first: Option<(&str, &str)>) -> Result<(), PolicyError> {
        let path = &self.settings.state_path;
        let entry = {
            let _lock = state::lock(path)?;
            state::load(path)?.changes.get(id).cloned()
        };
        let Some(c) = entry else {
            tracing::warn!(
                "change {id} is not in the journal any more (repaired?); nothing to put back"
            );
            return Ok(());
        };
        let wr = |array: &str, attr: &str, value: &str| {
            self.io
                .write_attr(array, attr, value)
                .map_err(|source| PolicyError::Write {
                    source,
                    state_path: path.clone(),
                    rolled_back: false,
                })
        };
        let arrays = self.io.arrays_now(&[c.attr.as_str()]);
        let name = match journal::locate(&c.array, &arrays) {
            journal::Located::At(n) => Some(n),
            _ => None,
        };
        if let Some(name) = &name {
            if let Some((attr, value)) = first {
                wr(name, attr, value)?;
            }
            let now = arrays.get(name).and_then(|a| a.attrs.get(&c.attr));
            if now.is_some_and(|r| c.is_ours(r)) {
                wr(name, &c.attr, &c.restore)?;
            }
        }
        failpoint("journal-before-forget");
        let _lock = state::lock(path)?;
        let mut st = state::load(path)?;
        st.changes.remove(id);
        self.repair(&mut st, &|c: &Change| !cli_alive(&c.owner));
        state::save(path, &st)?;
        Ok(())
    }

    /// Undoes the journaled changes of `st` that `select` picks (writes their put-back values,
    /// logging each at warn) and keeps the others. A failed write keeps its entry (the next
    /// command tries again). Does not save: the caller saves `st` after.
    pub(super) fn repair(&self, st: &mut PolicyState, select: &dyn Fn(&Change) -> bool) {
        if !st.changes.values().any(select) {
            return;
        }
        let attrs: BTreeSet<&str> = st.changes.values().map(|c| c.attr.as_str()).collect();
        let attrs: Vec<&str> = attrs.into_iter().collect();
        let arrays = self.io.arrays_now(&attrs);
        let u = journal::undo(&st.changes, select, &arrays);
        for n in &u.notes {
            tracing::warn!("{n}");
        }
        let mut kept = u.kept;
        for w in &u.writes {
            if let Err(e) = self.io.write_attr(&w.array, &w.attr, &w.value) {
                tracing::error!("putting back {}: {e}; kept in the journal", w.id);
                if let Some(c) = st.changes.get(&w.id) {
                    kept.insert(w.id.clone(), c.clone());
                }
            }
        }
        st.changes = kept;
    }

    /// Names an array for a journal entry: kernel name and its `md/uuid` now.
    pub fn array_ref(&self, name: &str) -> ArrayRef {
        ArrayRef {
            name: name.to_string(),
            uuid: self.io.uuid(name),
        }
    }
}
