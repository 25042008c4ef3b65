//! Adding a write-intent bitmap to a redundant array, the one entry point of `mdpilot bitmap
//! add`, the D-Bus `Array.AddBitmap` and the service's `bitmap-wanted` upkeep.
//!
//! Without a bitmap md resyncs a whole redundant array after a crash or a power loss (the
//! advisor: [`crate::model::Array::bitmap_advised`]). md refuses a new bitmap while any sync
//! runs or the array is `frozen` (`mdadm`: "Cannot add bitmap while array is resyncing";
//! `md/bitmap/location`: EBUSY), so [`plan`] says to wait then. The bitmap added is always
//! the classic internal one: the lockless bitmap (`llbitmap`) is shown where an array has it,
//! never offered (the kernel marks it experimental).
//!
//! - [`plan`]: pure, what adding would do to an array of the model now;
//! - [`add_now`]: re-reads the array, plans, and runs mdadm ([`mdadm`]) when due;
//! - [`wanted`]: the durable list of arrays waiting for their sync to end.

pub mod mdadm;
pub mod wanted;

use crate::host::Root;
use crate::model::{Array, ConsistencyPolicy, SyncAction, WriteIntentBitmap};

/// What adding a bitmap to an array means now, from [`plan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// No sync runs: run mdadm now.
    AddNow,
    /// The array has one already (nothing to do).
    AlreadyHas(WriteIntentBitmap),
    /// A sync runs or the array is frozen (`md/sync_action`): md refuses until it is idle.
    WaitForSync(SyncAction),
}

/// Why an array cannot get a bitmap.
#[derive(Debug, thiserror::Error)]
pub enum BitmapError {
    /// No such array in `/proc/mdstat` (or it went while it was read).
    #[error("no md array {0}")]
    NoArray(String),
    /// The level has no redundancy: a bitmap would serve nothing.
    #[error("{array} is {level}: an array without redundancy has no resync to shorten")]
    NotRedundant {
        /// Kernel name.
        array: String,
        /// Its level (`raid0`, `linear`, or `none`).
        level: String,
    },
    /// The array does not run (inactive, clear, broken).
    #[error("{0} is not running (its md/array_state is {1})")]
    NotRunning(String, String),
    /// External metadata (IMSM, DDF): the container's tools manage it, not `mdadm --grow`.
    #[error("{0} has external metadata ({1}): mdadm cannot add an internal bitmap to it")]
    External(String, String),
    /// A journal or PPL keeps the array consistent; md allows no bitmap beside it.
    #[error("{0} uses md/consistency_policy {1}: md allows no bitmap beside it")]
    OtherPolicy(String, String),
    /// Queueing: the array shows no UUID to queue it by.
    #[error("{0} has no UUID to queue it by")]
    NoUuid(String),
    /// Queueing: the list could not be written.
    #[error("cannot write {}", wanted::WANTED_PATH)]
    Queue(#[source] std::io::Error),
    /// mdadm failed.
    #[error("adding a bitmap to {array}")]
    Mdadm {
        /// Kernel name.
        array: String,
        /// What mdadm said.
        #[source]
        source: mdadm::MdadmError,
    },
}

/// What adding a bitmap to `a` would do now. Pure.
///
/// Errors: [`BitmapError::NotRedundant`], [`BitmapError::NotRunning`],
/// [`BitmapError::External`], [`BitmapError::OtherPolicy`].
pub fn plan(a: &Array) -> Result<Plan, BitmapError> {
    let name = a.name.clone();
    if !a.is_redundant() {
        let level = a
            .level()
            .map_or_else(|| crate::vocab::NONE.to_string(), |l| l.to_string());
        return Err(BitmapError::NotRedundant { array: name, level });
    }
    if !a.is_serving() {
        return Err(BitmapError::NotRunning(name, a.array_state().to_string()));
    }
    if let Some(m) = a.external_metadata() {
        return Err(BitmapError::External(name, m.to_string()));
    }
    let existing = a.write_intent_bitmap();
    if existing != WriteIntentBitmap::None {
        return Ok(Plan::AlreadyHas(existing));
    }
    if let Some(p @ (ConsistencyPolicy::Journal | ConsistencyPolicy::Ppl)) = a.consistency_policy()
    {
        return Err(BitmapError::OtherPolicy(name, p.to_string()));
    }
    match a.sync_action() {
        SyncAction::Idle => Ok(Plan::AddNow),
        other => Ok(Plan::WaitForSync(other)),
    }
}

/// The array's UUID in mdadm's colon form (udev's `MD_UUID`, else `md/uuid` regrouped); `None`
/// where neither is known.
pub fn mdadm_uuid(a: &Array) -> Option<String> {
    a.uuid().map(|u| u.to_string())
}

/// Reads the array `name` (kernel name) under `root` afresh ([`crate::sysfs::collect`]).
///
/// Errors: [`BitmapError::NoArray`] when `/proc/mdstat` cannot be read or lacks it.
pub fn read_array(root: &Root, name: &str) -> Result<Array, BitmapError> {
    crate::sysfs::collect(root)
        .ok()
        .and_then(|m| m.arrays.into_iter().find(|a| a.name == name))
        .ok_or_else(|| BitmapError::NoArray(name.to_string()))
}

/// Re-reads the array `name` under `root`, [`plan`]s, and runs `mdadm --grow
/// --bitmap=internal` when the plan is [`Plan::AddNow`]. Returns the plan it followed.
/// Blocking (mdadm runs to its end).
///
/// Errors: [`read_array`]'s, [`plan`]'s, [`BitmapError::Mdadm`].
pub fn add_now(root: &Root, name: &str) -> Result<Plan, BitmapError> {
    let a = read_array(root, name)?;
    let p = plan(&a)?;
    if p == Plan::AddNow {
        mdadm::grow_bitmap_internal(root, name).map_err(|source| BitmapError::Mdadm {
            array: name.to_string(),
            source,
        })?;
    }
    Ok(p)
}

/// What [`add_or_queue`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// mdadm added an internal bitmap.
    Added,
    /// The array had one (nothing done).
    AlreadyHad(WriteIntentBitmap),
    /// A sync runs: the array waits in [`wanted`] for the service.
    Queued(SyncAction),
}

/// Appends `a`'s UUID to [`wanted`] under `root`; false when it was there already.
///
/// Errors: [`BitmapError::NoUuid`], [`BitmapError::Queue`].
pub fn queue(root: &Root, a: &Array) -> Result<bool, BitmapError> {
    let uuid = mdadm_uuid(a).ok_or_else(|| BitmapError::NoUuid(a.name.clone()))?;
    wanted::append(root, &uuid).map_err(BitmapError::Queue)
}

/// Adds the bitmap of the array `name` now when md allows it ([`add_now`]), else queues it for
/// the service ([`queue`]): what `AddBitmap` on D-Bus does. Blocking.
///
/// Errors: those of [`add_now`] and [`queue`].
pub fn add_or_queue(root: &Root, name: &str) -> Result<Outcome, BitmapError> {
    match add_now(root, name)? {
        Plan::AddNow => Ok(Outcome::Added),
        Plan::AlreadyHas(b) => Ok(Outcome::AlreadyHad(b)),
        Plan::WaitForSync(action) => {
            queue(root, &read_array(root, name)?)?;
            Ok(Outcome::Queued(action))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ArraySysfs, BitmapType};

    fn raid1(sys: ArraySysfs) -> Array {
        let text = "md0 : active raid1 sdb1[1] sda1[0]\n      1048576 blocks super 1.2 [2/2] [UU]\n\nunused devices: <none>\n";
        let mut a = crate::mdstat::parse(text).arrays.remove(0);
        a.sysfs = Some(sys);
        a
    }

    #[test]
    fn plans_follow_the_array() {
        let none = || ArraySysfs {
            consistency_policy: Some(ConsistencyPolicy::Resync),
            bitmap_location: Some("none".into()),
            sync_action: Some(SyncAction::Idle),
            ..Default::default()
        };
        assert_eq!(plan(&raid1(none())).unwrap(), Plan::AddNow);
        let mut s = none();
        s.sync_action = Some(SyncAction::Resync);
        assert_eq!(
            plan(&raid1(s)).unwrap(),
            Plan::WaitForSync(SyncAction::Resync)
        );
        let mut s = none();
        s.sync_action = Some(SyncAction::Frozen);
        assert_eq!(
            plan(&raid1(s)).unwrap(),
            Plan::WaitForSync(SyncAction::Frozen)
        );
        let mut s = none();
        s.bitmap_location = Some("+8".into());
        assert_eq!(
            plan(&raid1(s)).unwrap(),
            Plan::AlreadyHas(WriteIntentBitmap::Internal)
        );
        let mut s = none();
        s.bitmap_type = Some(BitmapType::Llbitmap);
        assert_eq!(
            plan(&raid1(s)).unwrap(),
            Plan::AlreadyHas(WriteIntentBitmap::Llbitmap)
        );
        let mut s = none();
        s.consistency_policy = Some(ConsistencyPolicy::Ppl);
        assert!(matches!(plan(&raid1(s)), Err(BitmapError::OtherPolicy(..))));
        let mut s = none();
        s.level = Some("raid0".into());
        assert!(matches!(
            plan(&raid1(s)),
            Err(BitmapError::NotRedundant { .. })
        ));
        let mut s = none();
        s.array_state = Some("inactive".into());
        assert!(matches!(plan(&raid1(s)), Err(BitmapError::NotRunning(..))));
        let mut s = none();
        s.metadata_version = Some("external:imsm".into());
        assert!(matches!(plan(&raid1(s)), Err(BitmapError::External(..))));
    }
}
