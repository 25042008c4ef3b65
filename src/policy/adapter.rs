//! [`Policy`]: the file-backed adapter around the pure core. Every operation takes the lock
//! beside the state file, loads the state, computes the transition, saves the `mid` state
//! atomically, writes the kernel knobs, and saves the `end` state.

use super::journal::{self, Change};
use super::knobs::{FsKnobs, KnobError, KnobIo};
use super::lease::{self, PolicyState, Setting};
use super::request::{self, KnobId};
use super::state::{self, StateError};
use super::warning::PolicyWarning;
use super::{
    cli_alive, ArrayView, Bound, CoreError, GlobalOriginals, LeaseRequest, LeaseView, Owner,
    PolicyError, PolicySettings, PolicyView, KERNEL_DEFAULT_IO_DEPTH, KERNEL_DEFAULT_MAX,
    KERNEL_DEFAULT_MIN,
};
use crate::host::Root;
use crate::model::SpeedLimit;
use std::collections::{BTreeMap, BTreeSet};

/// Aborts the process when built with `--features failpoints` and `MDPILOT_FAILPOINT` names this
/// point (a comma-separated list is accepted). Used by the crash-loop test. Points:
/// `policy-after-mid-save` (state saved, no kernel write yet), `policy-after-first-write`,
/// `policy-before-end-save` (all writes done), `policy-after-end-save`; for journaled changes
/// `journal-after-record` (recorded, not written), `journal-after-write`,
/// `journal-before-forget` (put back, entry not yet removed).
#[inline]
pub fn failpoint(name: &str) {
    #[cfg(feature = "failpoints")]
    if let Ok(v) = std::env::var("MDPILOT_FAILPOINT") {
        if v.split(',').any(|p| p == name) {
            eprintln!("mdpilot: failpoint {name}: aborting");
            std::process::abort();
        }
    }
    #[cfg(not(feature = "failpoints"))]
    let _ = name;
}

/// The file-backed policy: state at `settings.state_path`, knobs under the root.
pub struct Policy {
    pub(super) settings: PolicySettings,
    pub(super) io: Box<dyn KnobIo>,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Policy {
    /// The policy on the kernel files under `root`.
    pub fn new(root: Root, settings: PolicySettings) -> Self {
        Policy::with_io(settings, Box::new(FsKnobs::new(root)))
    }

    /// The policy on any knob implementation (tests inject failing writes this way).
    pub fn with_io(settings: PolicySettings, io: Box<dyn KnobIo>) -> Self {
        Policy { settings, io }
    }

    /// The settings it was built with.
    pub fn settings(&self) -> &PolicySettings {
        &self.settings
    }

    /// Takes (or replaces) the lease of `req.holder` and applies the effective limits.
    ///
    /// # Errors
    /// [`PolicyError::Invalid`] for a bad request; [`PolicyError::State`] when the state file is
    /// unreadable, corrupt (moved aside) or unwritable; [`PolicyError::Read`] when a targeted
    /// knob is missing or non-numeric (nothing written); [`PolicyError::Write`] when a kernel
    /// write fails (earlier writes undone, state file unchanged).
    pub fn acquire(&self, req: LeaseRequest) -> Result<PolicyView, PolicyError> {
        self.acquire_until(req, None)
    }

    /// [`Policy::acquire`] for a timed lease: it ends at `expires_unix_s` (Unix seconds), when
    /// [`Policy::expire`] releases it as any release. The expiry is saved in the state file in
    /// the same transaction as the lease, so it survives restarts. `None`: no end (and a
    /// replaced timed lease loses its expiry).
    ///
    /// # Errors
    /// As [`Policy::acquire`].
    pub fn acquire_until(
        &self,
        req: LeaseRequest,
        expires_unix_s: Option<u64>,
    ) -> Result<PolicyView, PolicyError> {
        request::validate(&req)?;
        let now = crate::host::unix_now_s();
        if let Some(t) = expires_unix_s {
            // Past ends are fine (released at once); far ones are not what any caller means.
            let longest = now.saturating_add(crate::units::MAX_DURATION_S);
            if t > longest {
                return Err(CoreError::DurationTooLong {
                    holder: req.holder,
                    source: crate::units::DurationTooLong(t - now),
                }
                .into());
            }
        }
        tracing::info!(holder = %req.holder, kind = %req.kind, owner = %req.owner, expires = ?expires_unix_s, "acquire lease");
        let holder = req.holder.clone();
        self.change_with(
            &|c: &Change| !cli_alive(&c.owner),
            move |old| {
                let mut leases = old.leases.clone();
                leases.insert(req.holder.clone(), req);
                Some(leases)
            },
            |st| {
                match expires_unix_s {
                    Some(t) => {
                        st.expires.insert(holder.clone(), t);
                    }
                    None => {
                        st.expires.remove(&holder);
                    }
                }
                st.taken.entry(holder.clone()).or_insert(now);
            },
        )
    }

    /// [`Policy::acquire_until`] for a lease of `duration_s` seconds from now (`None`: no end):
    /// the end is computed with [`crate::units::end_after`], the one bound every front end
    /// shares.
    ///
    /// # Errors
    /// [`PolicyError::Invalid`] with [`CoreError::DurationTooLong`] above
    /// [`crate::units::MAX_DURATION_S`] (nothing read or written); else as [`Policy::acquire`].
    pub fn acquire_for(
        &self,
        req: LeaseRequest,
        duration_s: Option<u64>,
    ) -> Result<PolicyView, PolicyError> {
        let until = match duration_s {
            None => None,
            Some(d) => Some(
                crate::units::end_after(crate::host::unix_now_s(), d).map_err(|source| {
                    CoreError::DurationTooLong {
                        holder: req.holder.clone(),
                        source,
                    }
                })?,
            ),
        };
        self.acquire_until(req, until)
    }

    /// Releases every timed lease whose end is at or before `now_s` (Unix seconds), restoring
    /// as [`Policy::release`] does. `Ok(None)` when none has ended (nothing read or written).
    ///
    /// # Errors
    /// As [`Policy::release`].
    pub fn expire(&self, now_s: u64) -> Result<Option<PolicyView>, PolicyError> {
        let mut any = false;
        let view = self.change(|old| {
            let ended: Vec<&String> = old
                .expires
                .iter()
                .filter(|(_, t)| **t <= now_s)
                .map(|(h, _)| h)
                .collect();
            if ended.is_empty() {
                return None;
            }
            any = true;
            let mut leases = old.leases.clone();
            for h in ended {
                tracing::info!(holder = %h, "timed lease ended");
                leases.remove(h);
            }
            Some(leases)
        })?;
        Ok(any.then_some(view))
    }

    /// The earliest end of a timed lease (Unix seconds), from the state file without locking;
    /// `None` when there is none or the file cannot be read.
    pub fn next_expiry(&self) -> Option<u64> {
        state::read(&self.settings.state_path)
            .ok()?
            .expires
            .values()
            .min()
            .copied()
    }

    /// Drops the lease of `holder` (a warning in the view, not an error, when it holds none, so
    /// installer scripts stay idempotent) and restores knobs no other lease targets.
    ///
    /// # Errors
    /// As [`Policy::acquire`], except `Invalid`.
    pub fn release(&self, holder: &str) -> Result<PolicyView, PolicyError> {
        tracing::info!(holder = %holder, "release lease");
        let mut unknown = false;
        let view = self.change(|old| {
            let mut leases = old.leases.clone();
            unknown = leases.remove(holder).is_none();
            Some(leases)
        })?;
        Ok(if unknown {
            let mut v = view;
            let holder = holder.to_string();
            v.warnings
                .push(PolicyWarning::NoLease { holder }.to_string());
            v
        } else {
            view
        })
    }

    /// Drops every lease, undoes every journaled change (a freeze of ours: `idle` ->
    /// `sync_action`) and writes the originals back (leaving knobs someone else changed).
    ///
    /// With `defaults`, ignores the saved originals (and a corrupt or unreadable state file, set
    /// aside as `<state>.corrupt-<time>`) and writes the
    /// kernel defaults: `speed_limit_min` 1000, `speed_limit_max` 200000, `sync_io_depth` 32
    /// (where the kernel has it), and `system` to every array's `sync_speed_{min,max}` and
    /// `sync_io_depth` that is not already `(system)`.
    ///
    /// # Errors
    /// Without `defaults`: as [`Policy::release`] (a corrupt state file is an error, nothing is
    /// written). With `defaults`: [`PolicyError::State`] when the state cannot be read (other
    /// than corrupt) or saved, [`PolicyError::Write`] when a default cannot be written (the
    /// state is then left as it was; run it again).
    pub fn restore(&self, defaults: bool) -> Result<PolicyView, PolicyError> {
        let _lock = state::lock(&self.settings.state_path)?;
        self.restore_locked(defaults)
    }

    /// [`Policy::restore`] unless `refuse` gives a reason not to. `refuse` is asked under the
    /// state's lock, before anything is undone or written, with the journaled changes held
    /// (freezes of wipe jobs) as the file has them, or `None` when the file cannot be read
    /// (only with `defaults`: without them that is the error): nothing can take a freeze
    /// between the decision and the restore.
    ///
    /// # Errors
    /// [`PolicyError::Refused`] with `refuse`'s reason (nothing written); else as
    /// [`Policy::restore`].
    pub fn restore_unless(
        &self,
        defaults: bool,
        refuse: &dyn Fn(Option<&[Change]>) -> Option<String>,
    ) -> Result<PolicyView, PolicyError> {
        let path = &self.settings.state_path;
        let _lock = state::lock(path)?;
        let why = match state::read(path) {
            Ok(st) => refuse(Some(&st.changes.values().cloned().collect::<Vec<_>>())),
            Err(_) if defaults => refuse(None),
            Err(e) => return Err(e.into()),
        };
        if let Some(why) = why {
            return Err(PolicyError::Refused(why));
        }
        self.restore_locked(defaults)
    }

    /// [`Policy::restore`] with the state's lock held by the caller.
    fn restore_locked(&self, defaults: bool) -> Result<PolicyView, PolicyError> {
        tracing::info!(defaults, "restore limits: every lease dropped");
        if !defaults {
            return self.change_locked(&|_| true, |_| Some(BTreeMap::new()), |_| {});
        }
        let path = &self.settings.state_path;
        let mut warnings = Vec::new();
        let old = match state::load_for_reset(path) {
            Ok(s) => s,
            Err(e @ StateError::Corrupt { .. }) => {
                warnings.push(PolicyWarning::Other(e.to_string()));
                PolicyState::default()
            }
            Err(e) => return Err(e.into()),
        };
        // Our freezes (and other journaled changes) are put back first.
        let mut old = old;
        self.repair(&mut old, &|_| true);
        // Kernel first, state after: a crash in between leaves the old state, and running
        // restore again finishes the job.
        for (knob, setting) in self.default_writes(&old) {
            self.io
                .write(&knob, setting)
                .map_err(|source| PolicyError::Write {
                    source,
                    state_path: path.clone(),
                    rolled_back: false,
                })?;
        }
        let end = PolicyState {
            warnings: warnings.clone(),
            ..Default::default()
        };
        state::save(path, &end)?;
        Ok(self.view_of(&end))
    }

    /// What `restore --defaults` writes: the kernel's default global values
    /// (`speed_limit_min` 1000, `speed_limit_max` 200000, and `sync_io_depth` 32 where the kernel
    /// has it), and `system` for each per-array knob of the arrays now present or in `old` that
    /// is not `(system)` already (a missing one is skipped).
    fn default_writes(&self, old: &PolicyState) -> Vec<(KnobId, Setting)> {
        let mut writes = vec![
            (
                KnobId::Global(Bound::Min),
                Setting::Kibs(KERNEL_DEFAULT_MIN),
            ),
            (
                KnobId::Global(Bound::Max),
                Setting::Kibs(KERNEL_DEFAULT_MAX),
            ),
        ];
        let depth = KnobId::Global(Bound::IoDepth);
        if !self.io.read(&depth).is_err_and(|e| e.is_missing()) {
            writes.push((depth, Setting::Kibs(KERNEL_DEFAULT_IO_DEPTH)));
        }
        let mut arrays: BTreeSet<String> = self.io.arrays().into_iter().collect();
        arrays.extend(old.knobs.keys().filter_map(|k| match k {
            KnobId::Array { array, .. } => Some(array.clone()),
            KnobId::Global(_) => None,
        }));
        for array in arrays {
            for bound in Bound::ALL {
                let knob = KnobId::Array {
                    array: array.clone(),
                    bound,
                };
                match self.io.read(&knob) {
                    Ok(r) if r.system => {}
                    Err(e) if e.is_missing() => {}
                    // Unreadable or odd content: writing `system` is still the way back.
                    Ok(_) | Err(_) => writes.push((knob, Setting::System)),
                }
            }
        }
        writes
    }

    /// Reads state and knobs without changing anything: no lock, no directory or lock file
    /// created, a corrupt state file is reported and left where it is.
    ///
    /// # Errors
    /// [`PolicyError::State`] when the state file is unreadable or corrupt
    /// ([`StateError::CorruptUntouched`]). Unreadable knobs are not errors: they show as `null`
    /// with a warning.
    pub fn show(&self) -> Result<PolicyView, PolicyError> {
        // Saves are atomic renames, so a reader without the lock sees the old or the new file.
        let st = state::read(&self.settings.state_path)?;
        Ok(self.view_of(&st))
    }

    /// Drops the leases whose owner `alive` says is dead, undoes the journaled changes
    /// ([`super::journal`]) of dead owners, and restores knobs no remaining lease
    /// targets (all originals when none remain). When every owner is alive nothing is read or
    /// written (a drift is then handled by the release or restore that follows, not re-applied).
    ///
    /// # Errors
    /// As [`Policy::release`].
    pub fn reap(&self, alive: &dyn Fn(&Owner) -> bool) -> Result<PolicyView, PolicyError> {
        let dead = |c: &Change| !alive(&c.owner) || !cli_alive(&c.owner);
        self.change_with(
            &dead,
            |old| {
            let kept: BTreeMap<String, LeaseRequest> = old
                .leases
                .iter()
                .filter(|(holder, l)| {
                    let keep = alive(&l.owner);
                    if !keep {
                        tracing::info!(holder = %holder, owner = %l.owner, "dropping lease of dead owner");
                    }
                    keep
                })
                .map(|(h, l)| (h.clone(), l.clone()))
                .collect();
            (kept.len() != old.leases.len()).then_some(kept)
            },
            |_| {},
        )
    }

    /// The one transaction every mutating operation goes through. `next` gives the new lease
    /// set, or `None` for "no change" (the view of the current state is returned).
    fn change(
        &self,
        next: impl FnOnce(&PolicyState) -> Option<BTreeMap<String, LeaseRequest>>,
    ) -> Result<PolicyView, PolicyError> {
        self.change_with(&|c: &Change| !cli_alive(&c.owner), next, |_| {})
    }

    /// The knobs the transition from `old` to `leases` needs read (through the kernel
    /// layer), skipping an array knob whose name now belongs to another array (by `md/uuid`:
    /// never written; the transition drops it as gone) and a managed array that was stopped.
    ///
    /// # Errors
    /// `PolicyError::Read` for a knob that cannot be read otherwise.
    fn read_knobs(
        &self,
        old: &PolicyState,
        leases: &BTreeMap<String, LeaseRequest>,
    ) -> Result<BTreeMap<KnobId, SpeedLimit>, PolicyError> {
        let targets = lease::targets(leases);
        let mut readings = BTreeMap::new();
        for knob in lease::knobs_to_read(old, leases) {
            if let (KnobId::Array { array, .. }, Some(Some(want))) =
                (&knob, old.knobs.get(&knob).map(|m| m.uuid.as_ref()))
            {
                match self.io.uuid(array) {
                    Some(now) if &now != want && !targets.contains_key(&knob) => {
                        // Another array has the name now: never write its knob; the core
                        // drops ours as gone.
                        tracing::warn!("{knob}: {array} is now another array (uuid {now}, we managed {want}); not touched");
                        continue;
                    }
                    _ => {}
                }
            }
            match self.io.read(&knob) {
                Ok(r) => {
                    readings.insert(knob, r);
                }
                // A managed array that was stopped: the core drops it with a warning.
                Err(e) if e.is_missing() && knob.is_array() && !targets.contains_key(&knob) => {}
                // A knob this kernel lacks (sync_io_depth before 6.16): never written.
                Err(e) if e.is_missing() && knob.optional() => {
                    tracing::debug!("{knob}: not on this kernel; not written");
                }
                Err(e) => return Err(PolicyError::Read(e)),
            }
        }
        Ok(readings)
    }

    /// Records the `md/uuid` of every array knob the transition manages for the first time,
    /// in both saved states, so a later array under the same name is told apart.
    fn stamp_new_uuids(&self, t: &mut lease::Transition) {
        let uuids: BTreeMap<String, String> = t
            .end
            .knobs
            .iter()
            .filter_map(|(k, m)| match (k, &m.uuid) {
                (KnobId::Array { array, .. }, None) => {
                    self.io.uuid(array).map(|u| (array.clone(), u))
                }
                _ => None,
            })
            .collect();
        lease::stamp_uuids(&mut t.mid, &uuids);
        lease::stamp_uuids(&mut t.end, &uuids);
    }

    /// [`Policy::change`], undoing first the journaled changes `undo_changes` picks (the
    /// repair: changes of dead owners; `restore`: all), and with `edit` applied to both saved
    /// states of the transition (the lease expiries, which the pure transition carries but does
    /// not set).
    fn change_with(
        &self,
        undo_changes: &dyn Fn(&Change) -> bool,
        next: impl FnOnce(&PolicyState) -> Option<BTreeMap<String, LeaseRequest>>,
        edit: impl Fn(&mut PolicyState),
    ) -> Result<PolicyView, PolicyError> {
        let _lock = state::lock(&self.settings.state_path)?;
        self.change_locked(undo_changes, next, edit)
    }

    /// [`Policy::change_with`] with the state's lock already held by the caller.
    fn change_locked(
        &self,
        undo_changes: &dyn Fn(&Change) -> bool,
        next: impl FnOnce(&PolicyState) -> Option<BTreeMap<String, LeaseRequest>>,
        edit: impl Fn(&mut PolicyState),
    ) -> Result<PolicyView, PolicyError> {
        let path = &self.settings.state_path;
        let existed = path.exists();
        let loaded = state::load(path)?;
        let mut old = loaded.clone();
        self.repair(&mut old, undo_changes);
        let Some(leases) = next(&old) else {
            if old != loaded {
                state::save(path, &old)?;
            }
            return Ok(self.view_of(&old));
        };
        let readings = self.read_knobs(&old, &leases)?;
        let mut t = lease::transition(&old, leases, &readings)?;
        self.stamp_new_uuids(&mut t);
        edit(&mut t.mid);
        edit(&mut t.end);
        // Both records must be writable before the first of them, or any knob, is written.
        state::saveable(path, &t.mid)?;
        state::saveable(path, &t.end)?;
        for w in &t.warnings {
            tracing::warn!("{w}");
        }
        if !t.writes.is_empty() {
            state::save(path, &t.mid)?;
            failpoint("policy-after-mid-save");
            for (i, w) in t.writes.iter().enumerate() {
                if let Err(source) = self.io.write(&w.knob, w.setting) {
                    let rolled_back = self.undo(&t.writes[..i]) && self.put_back(&old, existed);
                    return Err(PolicyError::Write {
                        source,
                        state_path: path.clone(),
                        rolled_back,
                    });
                }
                log_write(w);
                if i == 0 {
                    failpoint("policy-after-first-write");
                }
            }
            failpoint("policy-before-end-save");
        }
        if t.end != loaded || !t.writes.is_empty() {
            state::save(path, &t.end)?;
            failpoint("policy-after-end-save");
        }
        Ok(self.view_of(&t.end))
    }

    /// Writes back the `before` readings of `done`, newest first. True when all succeeded.
    /// (Logged per knob: an undo is a write too.)
    fn undo(&self, done: &[lease::Write]) -> bool {
        let mut ok = true;
        for w in done.iter().rev() {
            if let Err(e) = self.io.write(&w.knob, Setting::from(w.before)) {
                tracing::error!("undoing {}: {e}", w.knob);
                ok = false;
            } else {
                tracing::info!(knob = %w.knob, value = %w.before, "undone after a failed write");
            }
        }
        ok
    }

    /// Saves `old` again (or removes the file when there was none). On failure the `mid` state
    /// stays, which still knows the originals. True on success.
    fn put_back(&self, old: &PolicyState, existed: bool) -> bool {
        let path = &self.settings.state_path;
        let r = if existed {
            state::save(path, old).map_err(|e| e.to_string())
        } else {
            std::fs::remove_file(path).map_err(|e| format!("removing {}: {e}", path.display()))
        };
        match r {
            Ok(()) => true,
            Err(e) => {
                tracing::error!("putting the policy state back: {e}");
                false
            }
        }
    }

    /// Adds the warnings about `st` itself to `warnings`: arrays reading `frozen` that no
    /// change of ours explains (frozen by someone else; `sync_action` read through the kernel
    /// layer), and originals that a corrupt state file lost (once).
    fn state_warnings(&self, st: &PolicyState, warnings: &mut Vec<PolicyWarning>) {
        let now = self.io.arrays_now(&[journal::SYNC_ACTION]);
        for array in journal::foreign_frozen(&st.changes, &now) {
            warnings.push(PolicyWarning::ForeignFrozen { array });
        }
        if let Some(moved_to) = &st.originals_unknown {
            let w = PolicyWarning::OriginalsUnknown {
                moved_to: moved_to.clone(),
            };
            if !warnings.contains(&w) {
                warnings.push(w);
            }
        }
    }

    /// Builds the view of `st` with the current readings (unreadable knobs become `null` and a
    /// warning).
    fn view_of(&self, st: &PolicyState) -> PolicyView {
        let mut warnings = st.warnings.clone();
        let mut readings: BTreeMap<KnobId, SpeedLimit> = BTreeMap::new();
        let mut read = |knob: KnobId, warnings: &mut Vec<PolicyWarning>| -> Option<SpeedLimit> {
            match self.io.read(&knob) {
                Ok(r) => {
                    readings.insert(knob, r);
                    Some(r)
                }
                // Not on this kernel: shown as null, nothing to warn about.
                Err(e) if e.is_missing() && knob.optional() => None,
                Err(e) => {
                    warnings.push(PolicyWarning::Other(e.to_string()));
                    None
                }
            }
        };
        let speed_limit_min = read(KnobId::Global(Bound::Min), &mut warnings).map(|r| r.kib_s);
        let speed_limit_max = read(KnobId::Global(Bound::Max), &mut warnings).map(|r| r.kib_s);
        let sync_io_depth = read(KnobId::Global(Bound::IoDepth), &mut warnings).map(|r| r.kib_s);
        let mut names: BTreeSet<String> = st
            .leases
            .values()
            .flat_map(|l| l.arrays.keys().cloned())
            .collect();
        names.extend(st.knobs.keys().filter_map(|k| match k {
            KnobId::Array { array, .. } => Some(array.clone()),
            KnobId::Global(_) => None,
        }));
        let mut arrays = BTreeMap::new();
        for array in names {
            let knob = |bound| KnobId::Array {
                array: array.clone(),
                bound,
            };
            let v = ArrayView {
                sync_speed_min: read(knob(Bound::Min), &mut warnings),
                sync_speed_max: read(knob(Bound::Max), &mut warnings),
                original_min: st.knobs.get(&knob(Bound::Min)).map(|m| m.original),
                original_max: st.knobs.get(&knob(Bound::Max)).map(|m| m.original),
                sync_io_depth: read(knob(Bound::IoDepth), &mut warnings),
                original_io_depth: st.knobs.get(&knob(Bound::IoDepth)).map(|m| m.original),
            };
            arrays.insert(array, v);
        }
        warnings.extend(lease::drift_warnings(st, &readings));
        self.state_warnings(st, &mut warnings);
        let orig = |b| {
            st.knobs
                .get(&KnobId::Global(b))
                .map(|m: &lease::Managed| m.original.kib_s)
        };
        PolicyView {
            state_path: self.settings.state_path.clone(),
            speed_limit_min,
            speed_limit_max,
            sync_io_depth,
            originals: GlobalOriginals {
                speed_limit_min: orig(Bound::Min),
                speed_limit_max: orig(Bound::Max),
                sync_io_depth: orig(Bound::IoDepth),
            },
            leases: st
                .leases
                .values()
                .map(|l| LeaseView {
                    expires_unix_s: st.expires.get(&l.holder).copied(),
                    taken_unix_s: st.taken.get(&l.holder).copied(),
                    ..LeaseView::new(l.clone(), !cli_alive(&l.owner))
                })
                .collect(),
            arrays,
            warnings: warnings.iter().map(ToString::to_string).collect(),
            originals_unknown: st.originals_unknown.clone(),
            changes: st.changes.values().cloned().collect(),
        }
    }
}

impl From<KnobError> for PolicyError {
    fn from(e: KnobError) -> Self {
        PolicyError::Read(e)
    }
}

/// One knob write at info (journal fields KNOB=, VALUE=, BEFORE=, and ARRAY= for a per-array
/// knob): the record of every speed limit (and `sync_io_depth`) the policy set or gave back.
fn log_write(w: &lease::Write) {
    match &w.knob {
        KnobId::Array { array, .. } => tracing::info!(
            array = %array, knob = %w.knob, value = %w.setting, before = %w.before,
            "speed limit written"
        ),
        KnobId::Global(_) => tracing::info!(
            knob = %w.knob, value = %w.setting, before = %w.before,
            "speed limit written"
        ),
    }
}
