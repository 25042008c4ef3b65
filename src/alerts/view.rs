//! The classifier's input: one [`ArrayView`] per array per snapshot, and its one converter
//! from the model ([`views_from_model`]). Pure.

use crate::model::{Array, MdStat, SyncAction, SyncKind};
use serde::Serialize;

pub use crate::vocab::MemberRole;

/// One member in a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemberView {
    /// Kernel device name (`sdb1`).
    pub name: String,
    /// Its role now.
    pub role: MemberRole,
}

/// The kind of a running sync, as events group them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncGroup {
    /// `resync`, `recovery`, `reshape`: the array rebuilds redundancy or layout.
    Rebuild,
    /// `check` or `repair`: a scrub.
    Check,
}

/// A running (not queued) sync.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SyncView {
    /// The kind, in mdstat's vocabulary (`resync`, `recovery`, `reshape`, `check`, `repair`).
    pub action: SyncKind,
    /// Done, 0.0 ..= 100.0 percent.
    pub percent: f64,
}

impl SyncView {
    /// Check/repair or rebuild.
    pub fn group(&self) -> SyncGroup {
        match self.action {
            SyncKind::Check | SyncKind::Repair => SyncGroup::Check,
            _ => SyncGroup::Rebuild,
        }
    }
}

/// What the classifier needs of one array at one instant. Build it with [`views_from_model`]
/// or by hand in tests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArrayView {
    /// Kernel name (`md0`): the key across snapshots.
    pub name: String,
    /// The array's UUID in mdadm's spelling ([`Array::uuid`]), where known.
    pub uuid: Option<String>,
    /// `raid1`, `raid5`, ...
    pub level: Option<String>,
    /// False for an inactive, stopped or broken array: treated as absent.
    pub active: bool,
    /// Slots (`[T/A]`'s T); `None` for raid0/linear/containers.
    pub raid_disks: Option<u32>,
    /// Missing members (`md/degraded`, else T − A).
    pub degraded: u32,
    /// Members in printed order.
    pub members: Vec<MemberView>,
    /// The running sync, `None` when idle or only queued (DELAYED/PENDING).
    pub sync: Option<SyncView>,
    /// `md/sync_action` reads `frozen`.
    pub frozen: bool,
    /// `md/mismatch_cnt` in 512-byte sectors, where read.
    pub mismatch_cnt: Option<u64>,
    /// `md/sync_min` in 512-byte sectors, where read (see the module doc on paused checks).
    pub sync_min_sectors: Option<u64>,
    /// Creation time, seconds since the epoch (superblock `ctime`), where known.
    pub created_unix_s: Option<u64>,
}

impl ArrayView {
    /// Members that are spares (no slot).
    pub(crate) fn spares(&self) -> u32 {
        self.members
            .iter()
            .filter(|m| m.role == MemberRole::Spare)
            .count() as u32
    }

    /// Missing members all have a listed member waiting for or under recovery.
    pub(crate) fn degradation_covered(&self) -> bool {
        let Some(t) = self.raid_disks else {
            return true;
        };
        let slotted = self
            .members
            .iter()
            // A spare counts: a fresh raid5's last member is a spare, slot none, until md starts
            // the recovery onto it (the first snapshot can come before that).
            .filter(|m| {
                matches!(
                    m.role,
                    MemberRole::InSync | MemberRole::Rebuilding | MemberRole::Spare
                )
            })
            .count() as u32;
        slotted >= t
    }
}

/// The classifier's view of every array of the model (mdstat enriched with sysfs, as
/// `status::collect` and the service produce it). Member roles come from `md/dev-*/state`
/// where read, else from the mdstat flags; degraded, the sync and stopped-ness are the model's
/// facts ([`Array::degraded`], [`Array::running_sync`], [`Array::is_serving`]).
/// `created_unix_s` is not in the model: the caller sets it where it reads it.
pub fn views_from_model(stat: &MdStat) -> Vec<ArrayView> {
    stat.arrays.iter().map(view_from_array).collect()
}

/// One array of [`views_from_model`].
pub fn view_from_array(a: &Array) -> ArrayView {
    let sys = a.sysfs.as_ref();
    let sync = a.running_sync().map(|r| SyncView {
        action: r.kind,
        percent: r.progress.map_or(0.0, |p| p.percent),
    });
    ArrayView {
        name: a.name.clone(),
        uuid: a.uuid().map(|u| u.to_string()),
        level: a.level().map(|l| l.to_string()),
        active: a.is_serving(),
        raid_disks: a.raid_disks(),
        degraded: a.degraded().unwrap_or(0),
        members: members(a),
        sync,
        frozen: a.sync_action() == SyncAction::Frozen,
        mismatch_cnt: sys.and_then(|s| s.mismatch_cnt),
        sync_min_sectors: sys.and_then(|s| s.sync_min_sectors),
        created_unix_s: None,
    }
}

/// Member roles: the model's ([`Array::members_with_roles`]).
fn members(a: &Array) -> Vec<MemberView> {
    a.members_with_roles()
        .into_iter()
        .map(|m| MemberView {
            name: m.name,
            role: m.role,
        })
        .collect()
}
