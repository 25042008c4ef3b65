//! The service's side of `/var/lib/mdpilot/bitmap-wanted` ([`crate::bitmap::wanted`]): after
//! each step of the loop, every listed array that is known, redundant and idle gets its
//! internal bitmap ([`crate::bitmap::add_now`], mdadm on a blocking worker, never on the
//! loop's thread); its line goes once it has a bitmap, or once md can never give it one (no
//! redundancy, external metadata, a journal or PPL). UUIDs of arrays not present stay. The
//! journal says what happened to each. A failed mdadm is not retried until the service starts
//! again (its message is in the journal; the line stays).

use crate::bitmap::{self, wanted, BitmapError, Plan};
use crate::host::Root;
use crate::lock::lock;
use crate::model::MdStat;
use crate::shared::State;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

/// The arrays (by UUID) with a bitmap add under way, and those whose mdadm failed.
#[derive(Debug, Default)]
pub struct Upkeep {
    busy: Mutex<BTreeSet<String>>,
    failed: Mutex<BTreeSet<String>>,
}

impl Upkeep {
    /// The UUIDs in the list now (what `BitmapPending` shows); empty when it cannot be read
    /// (logged).
    pub fn pending(root: &Root) -> Vec<String> {
        wanted::load(root).unwrap_or_else(|e| {
            tracing::warn!("cannot read {}: {e}", wanted::WANTED_PATH);
            Vec::new()
        })
    }

    /// One pass over the list against `model`: starts a worker for each listed array md would
    /// give a bitmap now (or that has one, or never can), and returns how many it started. The
    /// loop runs it once at start (the installer's arrays whose resync ended while no service
    /// ran) and after every step.
    pub fn step(self: &Arc<Self>, state: &Arc<State>, model: &MdStat) -> usize {
        let list = Upkeep::pending(&state.root);
        let mut started = 0;
        for a in &model.arrays {
            let Some(uuid) = bitmap::mdadm_uuid(a).map(|u| u.to_ascii_lowercase()) else {
                continue;
            };
            if !list.contains(&uuid) || lock(&self.failed).contains(&uuid) {
                continue;
            }
            match bitmap::plan(a) {
                Ok(Plan::WaitForSync(_)) | Err(BitmapError::NotRunning(..)) => continue,
                _ => {}
            }
            if !lock(&self.busy).insert(uuid.clone()) {
                continue;
            }
            let (me, st, name) = (self.clone(), state.clone(), a.name.clone());
            drop(
                state
                    .bitmap_worker
                    .submit(move || me.add(&st, &name, &uuid)),
            );
            started += 1;
        }
        started
    }

    /// The worker: adds the bitmap of `name`, updates the list, logs, and asks the loop to
    /// re-read the array.
    fn add(&self, state: &State, name: &str, uuid: &str) {
        let root = &state.root;
        let drop_line = match bitmap::add_now(root, name) {
            Ok(Plan::AddNow) => {
                tracing::info!(array = %name, uuid = %uuid, "bitmap-wanted: added an internal write-intent bitmap to {name} now that its sync has ended");
                true
            }
            Ok(Plan::AlreadyHas(b)) => {
                tracing::info!(array = %name, uuid = %uuid, "bitmap-wanted: {name} has a {b} bitmap already");
                true
            }
            Ok(Plan::WaitForSync(a)) => {
                tracing::info!(array = %name, "bitmap-wanted: {name} runs {a} again; waiting");
                false
            }
            Err(e @ BitmapError::Mdadm { .. }) => {
                tracing::error!(array = %name, uuid = %uuid, "bitmap-wanted: {}; not retried until the service restarts", crate::error::error_chain(&e));
                lock(&self.failed).insert(uuid.to_string());
                false
            }
            Err(e @ (BitmapError::NoArray(_) | BitmapError::NotRunning(..))) => {
                tracing::info!(array = %name, "bitmap-wanted: {e}; kept");
                false
            }
            Err(e) => {
                tracing::warn!(array = %name, uuid = %uuid, "bitmap-wanted: {}; dropped from the list", crate::error::error_chain(&e));
                true
            }
        };
        if drop_line {
            if let Err(e) = wanted::remove(root, uuid) {
                tracing::error!("cannot update {}: {e}", wanted::WANTED_PATH);
            }
        }
        lock(&self.busy).remove(uuid);
        state.refresh_array(name);
    }
}
