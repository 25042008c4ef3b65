//! `org.mdpilot.MdPilot1.Array` at `/org/mdpilot/MdPilot1/arrays/<name>`: one object per md array.
//!
//! [`ArrayProps::from_model`] is the pure mapping from the model ([`crate::model::Array`]) to the
//! D-Bus properties; [`ArrayProps::changed`] lists only the properties whose values differ, which
//! the service sends as one `PropertiesChanged`. Names follow udisks2's
//! `org.freedesktop.UDisks2.MDRaid` where the meaning is the same (UUID, Name, Level, NumDevices,
//! Size, SyncAction, SyncCompleted, SyncRate, SyncRemainingTime, Degraded, BitmapLocation,
//! ChunkSize, ActiveDevices, Running); units are udisks2's too (bytes, bytes/s, µs).

use crate::model::{Array, HeaderState, MemberFlag, SyncCompleted, SyncState};
use std::collections::HashMap;
use zbus::interface;
use zbus::zvariant::OwnedValue;

/// One entry of `ActiveDevices`: `(member name, slot (-1 = none), state words, read errors)`.
pub type ActiveDevice = (String, i32, Vec<String>, u64);

/// The properties of one array, as published. All sizes in bytes, rates in bytes/s, limits in
/// KiB/s, times in µs; 0 / "" where the kernel does not say.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ArrayProps {
    /// Kernel name (`md0`).
    pub name: String,
    /// `md/uuid`, "" where unknown.
    pub uuid: String,
    /// `md/level` (or the mdstat personality).
    pub level: String,
    /// `md/array_state` (`clean`, `active`, `read-auto`...) or the mdstat state word.
    pub state: String,
    /// Read-only or auto-read-only.
    pub read_only: bool,
    /// Array size in bytes (mdstat blocks × 1024).
    pub size: u64,
    /// `raid_disks`.
    pub num_devices: u32,
    /// Members.
    pub active_devices: Vec<ActiveDevice>,
    /// `md/degraded`: missing devices.
    pub degraded: u32,
    /// `md/sync_action` (`idle`, `resync`, `recover`, `check`, `repair`, `reshape`, `frozen`).
    pub sync_action: String,
    /// Fraction done, 0..1 (0 when no sync).
    pub sync_completed: f64,
    /// `md/sync_completed` done part, 512-byte sectors.
    pub sync_completed_sectors: u64,
    /// `md/sync_completed` total part, 512-byte sectors.
    pub sync_total_sectors: u64,
    /// `md/sync_speed` × 1024: bytes/s.
    pub sync_rate: u64,
    /// Estimated µs left (remaining bytes / SyncRate); 0 when unknown.
    pub sync_remaining_time: u64,
    /// `md/sync_speed_min`: (KiB/s, "local" | "system").
    pub sync_speed_min: (u64, String),
    /// `md/sync_speed_max`: (KiB/s, "local" | "system").
    pub sync_speed_max: (u64, String),
    /// `md/chunk_size` in bytes.
    pub chunk_size: u64,
    /// "none", "internal" or the bitmap file.
    pub bitmap_location: String,
    /// `md/mismatch_cnt` in sectors.
    pub mismatch_count: u64,
    /// The array is started.
    pub running: bool,
}

fn flag_word(f: &MemberFlag) -> &'static str {
    match f {
        MemberFlag::WriteMostly => "write_mostly",
        MemberFlag::Journal => "journal",
        MemberFlag::Faulty => "faulty",
        MemberFlag::Spare => "spare",
        MemberFlag::Replacement => "replacement",
    }
}

impl ArrayProps {
    /// Maps the model to properties; sysfs values win over mdstat where both exist.
    pub fn from_model(a: &Array) -> ArrayProps {
        let sys = a.sysfs.clone().unwrap_or_default();
        let state_word = match a.state {
            HeaderState::Active => "active",
            HeaderState::Inactive => "inactive",
            HeaderState::Broken => "broken",
        };
        let state = sys
            .array_state
            .as_ref()
            .map_or_else(|| state_word.into(), |s| s.to_string());
        let read_only = a.read_only.is_some() || matches!(state.as_str(), "readonly" | "read-auto");
        let num_devices = sys.raid_disks.or(a.raid_disks).unwrap_or(0);
        let active_devices = if !sys.members.is_empty() {
            sys.members
                .iter()
                .map(|m| {
                    (
                        m.name.clone(),
                        m.slot.map_or(-1, |s| s as i32),
                        m.state.clone(),
                        m.errors.unwrap_or(0),
                    )
                })
                .collect()
        } else {
            a.members
                .iter()
                .map(|m| {
                    let mut st: Vec<String> =
                        m.flags.iter().map(|f| flag_word(f).to_string()).collect();
                    if st.is_empty() {
                        st.push("in_sync".into());
                    }
                    (m.name.clone(), m.slot as i32, st, 0)
                })
                .collect()
        };
        let degraded = sys
            .degraded
            .unwrap_or_else(|| num_devices.saturating_sub(a.active_disks.unwrap_or(num_devices)));
        let running_sync = a.sync.as_ref().filter(|s| s.state == SyncState::Running);
        let sync_action = sys
            .sync_action
            .as_ref()
            .map(|s| s.to_string())
            .or_else(|| a.sync.as_ref().map(|s| s.action.to_string()))
            .unwrap_or_else(|| "idle".into());
        let (done, total) = match sys.sync_completed {
            Some(SyncCompleted::Sectors { done, total }) => (done, total),
            Some(_) => (0, 0),
            None => running_sync
                .map(|s| (s.done_kib.unwrap_or(0) * 2, s.total_kib.unwrap_or(0) * 2))
                .unwrap_or((0, 0)),
        };
        let sync_completed = if total > 0 {
            done as f64 / total as f64
        } else {
            0.0
        };
        let rate_kib = if total > 0 {
            sys.sync_speed_kib_s
                .or_else(|| running_sync.and_then(|s| s.speed_kib_s))
                .unwrap_or(0)
        } else {
            0
        };
        let sync_rate = rate_kib * 1024;
        let sync_remaining_time = if sync_rate > 0 {
            ((total - done.min(total)) as u128 * 512 * 1_000_000 / sync_rate as u128) as u64
        } else {
            0
        };
        let limit = |l: Option<crate::model::SpeedLimit>| {
            l.map_or((0, String::new()), |l| {
                (
                    l.kib_s,
                    if l.system { "system" } else { "local" }.to_string(),
                )
            })
        };
        let bitmap_location = match &a.bitmap {
            None => "none".to_string(),
            Some(b) => b.file.clone().unwrap_or_else(|| "internal".into()),
        };
        ArrayProps {
            name: a.name.clone(),
            uuid: sys.uuid.clone().unwrap_or_default(),
            level: sys
                .level
                .clone()
                .or_else(|| a.level.clone())
                .unwrap_or_default(),
            state,
            read_only,
            size: a.size_kib.unwrap_or(0) * 1024,
            num_devices,
            active_devices,
            degraded,
            sync_action,
            sync_completed,
            sync_completed_sectors: done,
            sync_total_sectors: total,
            sync_rate,
            sync_remaining_time,
            sync_speed_min: limit(sys.sync_speed_min),
            sync_speed_max: limit(sys.sync_speed_max),
            chunk_size: sys.chunk_size_bytes.unwrap_or(0),
            bitmap_location,
            mismatch_count: sys.mismatch_cnt.unwrap_or(0),
            running: a.state == HeaderState::Active,
        }
    }

    /// True while a sync makes progress (the service runs its progress timer then).
    pub fn syncing(&self) -> bool {
        !matches!(self.sync_action.as_str(), "idle" | "frozen" | "") || self.sync_total_sectors > 0
    }

    /// The properties whose values differ between `old` and `new`, by D-Bus name.
    pub fn changed(old: &ArrayProps, new: &ArrayProps) -> HashMap<&'static str, OwnedValue> {
        super::props::changed_props!(old, new;
            name => "Name", uuid => "UUID", level => "Level", state => "State",
            read_only => "ReadOnly", size => "Size", num_devices => "NumDevices",
            active_devices => "ActiveDevices", degraded => "Degraded",
            sync_action => "SyncAction", sync_completed => "SyncCompleted",
            sync_completed_sectors => "SyncCompletedSectors",
            sync_total_sectors => "SyncTotalSectors", sync_rate => "SyncRate",
            sync_remaining_time => "SyncRemainingTime", sync_speed_min => "SyncSpeedMin",
            sync_speed_max => "SyncSpeedMax", chunk_size => "ChunkSize",
            bitmap_location => "BitmapLocation", mismatch_count => "MismatchCount",
            running => "Running",
        )
    }
}

/// The D-Bus object of one array; the service replaces `props` and emits the differences.
#[derive(Debug, Clone)]
pub struct ArrayObject {
    /// Current published values.
    pub props: ArrayProps,
}

/// An md array (kernel Documentation/admin-guide/md.rst). Read-only; every property emits
/// PropertiesChanged when it changes, except Name which is constant.
#[interface(name = "org.mdpilot.MdPilot1.Array")]
impl ArrayObject {
    /// Kernel name, e.g. md0.
    #[zbus(property(emits_changed_signal = "const"))]
    fn name(&self) -> String {
        self.props.name.clone()
    }
    /// Array UUID (md/uuid), empty where unknown.
    #[zbus(property, name = "UUID")]
    fn uuid(&self) -> String {
        self.props.uuid.clone()
    }
    /// RAID level: raid0, raid1, raid4, raid5, raid6, raid10, linear.
    #[zbus(property)]
    fn level(&self) -> String {
        self.props.level.clone()
    }
    /// md/array_state: clear, inactive, suspended, readonly, read-auto, clean, active,
    /// write-pending, active-idle, broken.
    #[zbus(property)]
    fn state(&self) -> String {
        self.props.state.clone()
    }
    /// True when read-only or auto-read-only.
    #[zbus(property)]
    fn read_only(&self) -> bool {
        self.props.read_only
    }
    /// Array size in bytes.
    #[zbus(property)]
    fn size(&self) -> u64 {
        self.props.size
    }
    /// Number of member slots (raid_disks).
    #[zbus(property)]
    fn num_devices(&self) -> u32 {
        self.props.num_devices
    }
    /// Members: (name, slot or -1, state words of md/dev-*/state, read errors).
    #[zbus(property)]
    fn active_devices(&self) -> Vec<ActiveDevice> {
        self.props.active_devices.clone()
    }
    /// Number of missing devices (md/degraded).
    #[zbus(property)]
    fn degraded(&self) -> u32 {
        self.props.degraded
    }
    /// md/sync_action: idle, resync, recover, check, repair, reshape, frozen.
    #[zbus(property)]
    fn sync_action(&self) -> String {
        self.props.sync_action.clone()
    }
    /// Fraction of the running sync done, 0..1; 0 when idle.
    #[zbus(property)]
    fn sync_completed(&self) -> f64 {
        self.props.sync_completed
    }
    /// Sectors (512 bytes) done of the running sync.
    #[zbus(property)]
    fn sync_completed_sectors(&self) -> u64 {
        self.props.sync_completed_sectors
    }
    /// Sectors (512 bytes) in the running sync; 0 when idle.
    #[zbus(property)]
    fn sync_total_sectors(&self) -> u64 {
        self.props.sync_total_sectors
    }
    /// Current sync speed in bytes per second.
    #[zbus(property)]
    fn sync_rate(&self) -> u64 {
        self.props.sync_rate
    }
    /// Estimated time left for the sync in microseconds; 0 when unknown.
    #[zbus(property)]
    fn sync_remaining_time(&self) -> u64 {
        self.props.sync_remaining_time
    }
    /// md/sync_speed_min: (KiB/s, "local" or "system").
    #[zbus(property)]
    fn sync_speed_min(&self) -> (u64, String) {
        self.props.sync_speed_min.clone()
    }
    /// md/sync_speed_max: (KiB/s, "local" or "system").
    #[zbus(property)]
    fn sync_speed_max(&self) -> (u64, String) {
        self.props.sync_speed_max.clone()
    }
    /// Chunk size in bytes (0 where the level has none).
    #[zbus(property)]
    fn chunk_size(&self) -> u64 {
        self.props.chunk_size
    }
    /// Write-intent bitmap: none, internal, or the bitmap file.
    #[zbus(property)]
    fn bitmap_location(&self) -> String {
        self.props.bitmap_location.clone()
    }
    /// md/mismatch_cnt in sectors after the last check or repair.
    #[zbus(property)]
    fn mismatch_count(&self) -> u64 {
        self.props.mismatch_count
    }
    /// True when the array is started (active).
    #[zbus(property)]
    fn running(&self) -> bool {
        self.props.running
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;

    fn array() -> Array {
        Array {
            name: "md1".into(),
            state: HeaderState::Active,
            read_only: None,
            level: Some("raid1".into()),
            size_kib: Some(1024),
            metadata: Some("1.2".into()),
            raid_disks: Some(2),
            active_disks: Some(1),
            member_status: Some("U_".into()),
            members: vec![Member {
                name: "sda1".into(),
                slot: 0,
                flags: vec![],
            }],
            sync: None,
            bitmap: None,
            sysfs: None,
        }
    }

    #[test]
    fn mdstat_only_model_maps() {
        let p = ArrayProps::from_model(&array());
        assert_eq!(p.size, 1024 * 1024);
        assert_eq!(p.degraded, 1);
        assert_eq!(p.sync_action, "idle");
        assert_eq!(
            p.active_devices,
            vec![("sda1".into(), 0, vec!["in_sync".into()], 0)]
        );
        assert_eq!(p.bitmap_location, "none");
        assert!(p.running);
        assert!(!p.syncing());
    }

    #[test]
    fn sysfs_progress_gives_rate_and_remaining_time() {
        let mut a = array();
        a.sysfs = Some(ArraySysfs {
            sync_action: Some("resync".into()),
            sync_completed: Some(SyncCompleted::Sectors {
                done: 1000,
                total: 3000,
            }),
            sync_speed_kib_s: Some(1000),
            ..Default::default()
        });
        let p = ArrayProps::from_model(&a);
        assert!((p.sync_completed - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!(p.sync_rate, 1_024_000);
        assert_eq!(p.sync_remaining_time, 1_000_000);
        assert!(p.syncing());
    }

    #[test]
    fn changed_lists_only_differences() {
        let old = ArrayProps::from_model(&array());
        let mut new = old.clone();
        assert!(ArrayProps::changed(&old, &new).is_empty());
        new.sync_completed = 0.5;
        new.degraded = 0;
        let c = ArrayProps::changed(&old, &new);
        let mut keys: Vec<_> = c.keys().copied().collect();
        keys.sort();
        assert_eq!(keys, vec!["Degraded", "SyncCompleted"]);
    }
}
