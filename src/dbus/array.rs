//! `org.mdpilot.MdPilot1.Array` at `/org/mdpilot/MdPilot1/arrays/<uuid>`: one object per md array
//! (path: [`super::array_path`]).
//!
//! [`ArrayProps::from_model`] is the pure mapping from the model ([`crate::model::Array`]) to the
//! D-Bus properties; [`ArrayProps::changed`] lists only the properties whose values differ, which
//! the service sends as one `PropertiesChanged`. A property named like one of udisks2's
//! `org.freedesktop.UDisks2.MDRaid` has udisks2's type and meaning (UUID, Name, Level,
//! NumDevices, Size, SyncAction, SyncCompleted, SyncRate, SyncRemainingTime, Degraded,
//! BitmapLocation, ChunkSize, Running); the others have names udisks2 does not use (KernelName,
//! Members, DeviceNode, NamedDevice, ConsistencyPolicy...). Units are udisks2's too (bytes,
//! bytes/s, µs). `RequestSyncAction` is udisks2's method of that name.

use super::auth::Request;
use super::check::CheckProps;
use super::errors::{Error, Result};
use super::options::Options;
use super::shared::Shared;
use crate::lock::lock;
use crate::model::{Array, SpeedLimit, SyncAction};
use std::collections::HashMap;
use std::sync::Arc;
use zbus::interface;
use zbus::message::Header;
use zbus::zvariant::{OwnedValue, Value};

/// One entry of `Members`: `(member name, slot (-1 = none), state words, read errors)`.
pub type MemberInfo = (String, i32, Vec<String>, u64);

/// The properties of one array, as published. All sizes in bytes, rates in bytes/s, limits in
/// KiB/s, times in µs; 0 / "" where the kernel does not say.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ArrayProps {
    /// Kernel name (`md0`).
    pub kernel_name: String,
    /// Metadata name (`host:root`, udev's `MD_NAME`), "" where unknown.
    pub name: String,
    /// UUID in mdadm's colon form, "" where unknown.
    pub uuid: String,
    /// `/dev/<kernel name>`.
    pub device_node: String,
    /// The `/dev/md/NAME` link, "" when none.
    pub named_device: String,
    /// `md/level` (or the mdstat personality).
    pub level: String,
    /// [`Array::array_state`]: `md/array_state` (`clean`, `active`, `read-auto`...), else the
    /// nearest state of the mdstat header.
    pub state: String,
    /// Read-only or auto-read-only ([`Array::is_read_only`]).
    pub read_only: bool,
    /// Array size in bytes (mdstat blocks × 1024).
    pub size: u64,
    /// `raid_disks`.
    pub num_devices: u32,
    /// Members ([`Array::members_with_roles`]).
    pub members: Vec<MemberInfo>,
    /// Each member's role word ([`crate::model::MemberRole`]: `in_sync`, `rebuilding`,
    /// `spare`, `faulty`, `journal`) by member name.
    pub member_roles: HashMap<String, String>,
    /// [`Array::health`]: `ok`, `degraded`, `inactive`, `unusable` (`status --test`'s verdict).
    pub health: String,
    /// [`Array::initial_build`]: the running sync is the array's first build.
    pub initial_build: bool,
    /// [`crate::vocab::Level::redundancy`] of [`Array::level`]: `none`, `mirror`, `parity`.
    pub redundancy: String,
    /// [`Array::degraded`]: `md/degraded`, else T − A of mdstat's `[T/A]`; 0 where unknown.
    pub degraded: u32,
    /// [`Array::sync_action`] (`idle`, `resync`, `recover`, `check`, `repair`, `reshape`,
    /// `frozen`): `md/sync_action`, else the mdstat sync line's word in sysfs vocabulary.
    pub sync_action: String,
    /// Fraction done, 0..1 ([`Array::sync_progress`]; 0 when no sync runs).
    pub sync_completed: f64,
    /// `md/sync_completed` done part, 512-byte sectors.
    pub sync_completed_sectors: u64,
    /// `md/sync_completed` total part, 512-byte sectors.
    pub sync_total_sectors: u64,
    /// [`Array::sync_speed_kib_s`] × 1024: bytes/s; 0 when no sync runs.
    pub sync_rate: u64,
    /// Estimated µs left ([`Array::sync_remaining_s`]: mdstat's `finish=`, else the remaining
    /// sectors at the sync speed); 0 when unknown.
    pub sync_remaining_time: u64,
    /// `md/sync_speed_min`: (KiB/s, "local" | "system").
    pub sync_speed_min: (u64, String),
    /// `md/sync_speed_max`: (KiB/s, "local" | "system").
    pub sync_speed_max: (u64, String),
    /// `md/chunk_size` in bytes.
    pub chunk_size: u64,
    /// `md/bitmap/location` as bytes (udisks2's `ay`): `none`, `file`, `+8`; empty when unknown.
    pub bitmap_location: Vec<u8>,
    /// `md/consistency_policy`, "" where unknown.
    pub consistency_policy: String,
    /// `md/metadata_version` (`1.2`, `external:imsm`), "" where unknown.
    pub metadata_version: String,
    /// The selected word of `md/bitmap_type` (`none`, `bitmap`, `llbitmap`), "" where the
    /// kernel lacks the file (before Linux 6.19).
    pub bitmap_type: String,
    /// `md/logical_block_size` in bytes (Linux 6.19+), 0 where absent.
    pub logical_block_size: u64,
    /// [`Array::write_intent_bitmap`]: `none`, `internal`, `file`, `llbitmap`; "" for an
    /// array without redundancy.
    pub write_intent_bitmap: String,
    /// [`Array::bitmap_advised`]: a redundant array without a bitmap (a crash means a full
    /// resync).
    pub bitmap_advised: bool,
    /// The full resync a crash would cost while [`ArrayProps::bitmap_advised`], µs
    /// ([`Array::full_resync_estimate`]); 0 otherwise or when unknown.
    pub full_resync_time: u64,
    /// A bitmap add waits for the running sync to end (the array's UUID is in the service's
    /// `bitmap-wanted` list); set by the service, not the model.
    pub bitmap_pending: bool,
    /// [`Array::warnings`], one line each.
    pub warnings: Vec<String>,
    /// `md/mismatch_cnt` in sectors.
    pub mismatch_count: u64,
    /// The array is started: not [`Array::is_stopped`].
    pub running: bool,
    /// The check properties, from the check record and the schedule, not the model
    /// ([`super::check::CheckView::props`]).
    pub check: CheckProps,
}

/// The sync properties of [`ArrayProps`]: `(SyncCompletedSectors, SyncTotalSectors,
/// SyncCompleted, SyncRate, SyncRemainingTime)`, all 0 while no sync runs.
fn sync_props(a: &Array) -> (u64, u64, f64, u64, u64) {
    let Some(p) = a.sync_progress() else {
        return (0, 0, 0.0, 0, 0);
    };
    // Kernel numbers are not trusted to fit: saturate instead of overflowing (debug builds).
    let rate = a.sync_speed_kib_s().unwrap_or(0).saturating_mul(1024);
    let remaining_us = a.sync_remaining_s().map_or(0, |s| (s * 1e6).round() as u64);
    (
        p.done_sectors,
        p.total_sectors,
        p.fraction(),
        rate,
        remaining_us,
    )
}

/// `Members` and `MemberRoles`: the model's members ([`Array::members_with_roles`]):
/// `md/dev-*` where read, else the mdstat member list in sysfs words.
fn members(a: &Array) -> (Vec<MemberInfo>, HashMap<String, String>) {
    let ms = a.members_with_roles();
    let roles = ms
        .iter()
        .map(|m| (m.name.clone(), m.role.as_str().to_string()))
        .collect();
    let info = ms
        .into_iter()
        .map(|m| {
            (
                m.name,
                m.slot.map_or(-1, |s| i32::try_from(s).unwrap_or(i32::MAX)),
                m.states.iter().map(ToString::to_string).collect(),
                m.errors.unwrap_or(0),
            )
        })
        .collect();
    (info, roles)
}

/// The bitmap and warning properties of [`ArrayProps`] (the rest default).
fn bitmap_props(a: &Array, global_min_kib_s: Option<u64>) -> ArrayProps {
    let sys = a.sysfs.as_ref();
    let advised = a.bitmap_advised();
    let estimate = advised
        .then(|| a.full_resync_estimate(global_min_kib_s))
        .flatten();
    ArrayProps {
        bitmap_type: sys
            .and_then(|s| s.bitmap_type.as_ref())
            .map_or_else(String::new, ToString::to_string),
        logical_block_size: sys.and_then(|s| s.md_logical_block_size).unwrap_or(0),
        write_intent_bitmap: if a.is_redundant() {
            a.write_intent_bitmap().as_str().to_string()
        } else {
            String::new()
        },
        bitmap_advised: advised,
        full_resync_time: estimate.map_or(0, |e| (e.seconds * 1e6).round() as u64),
        warnings: a
            .warnings(global_min_kib_s)
            .iter()
            .map(ToString::to_string)
            .collect(),
        ..ArrayProps::default()
    }
}

/// `SyncSpeedMin`, `SyncSpeedMax`: (KiB/s, "local" | "system"), (0, "") where unknown.
fn limit(l: Option<SpeedLimit>) -> (u64, String) {
    l.map_or((0, String::new()), |l| (l.kib_s, l.origin().to_string()))
}

impl ArrayProps {
    /// Maps the model to properties: the array's facts are the model's ([`Array::degraded`],
    /// [`Array::sync_action`], [`Array::sync_progress`], [`Array::is_stopped`]...: sysfs over
    /// mdstat); the other values are sysfs where read, else mdstat's.
    pub fn from_model(a: &Array) -> ArrayProps {
        ArrayProps::from_model_in(a, None)
    }

    /// [`ArrayProps::from_model`] with the global `speed_limit_min` (KiB/s) of the model the
    /// array is part of: the floor of [`Array::full_resync_estimate`] where the array's own
    /// `md/sync_speed_min` is not read.
    pub fn from_model_in(a: &Array, global_min_kib_s: Option<u64>) -> ArrayProps {
        let sys = a.sysfs.clone().unwrap_or_default();
        let (done, total, sync_completed, sync_rate, sync_remaining_time) = sync_props(a);
        let (members, member_roles) = members(a);
        let uuid = a.uuid().map(|u| u.to_string()).unwrap_or_default();
        ArrayProps {
            kernel_name: a.name.clone(),
            name: sys.metadata_name.clone().unwrap_or_default(),
            uuid,
            device_node: format!("/dev/{}", a.name),
            named_device: sys.named_device.clone().unwrap_or_default(),
            level: a.level().map(|l| l.to_string()).unwrap_or_default(),
            state: a.array_state().to_string(),
            read_only: a.is_read_only(),
            size: a.size_kib.unwrap_or(0).saturating_mul(1024),
            num_devices: a.raid_disks().unwrap_or(0),
            members,
            member_roles,
            health: a.health().as_str().to_string(),
            initial_build: a.initial_build(),
            redundancy: a
                .level()
                .map_or(crate::vocab::Redundancy::None, |l| l.redundancy())
                .as_str()
                .to_string(),
            degraded: a.degraded().unwrap_or(0),
            sync_action: a.sync_action().to_string(),
            sync_completed,
            sync_completed_sectors: done,
            sync_total_sectors: total,
            sync_rate,
            sync_remaining_time,
            sync_speed_min: limit(sys.sync_speed_min),
            sync_speed_max: limit(sys.sync_speed_max),
            chunk_size: sys.chunk_size_bytes.unwrap_or(0),
            bitmap_location: a.bitmap_location().unwrap_or_default().into_bytes(),
            consistency_policy: sys
                .consistency_policy
                .as_ref()
                .map_or_else(String::new, ToString::to_string),
            metadata_version: sys
                .metadata_version
                .clone()
                .or_else(|| a.metadata.clone())
                .unwrap_or_default(),
            mismatch_count: sys.mismatch_cnt.unwrap_or(0),
            running: !a.is_stopped(),
            check: CheckProps::default(),
            ..bitmap_props(a, global_min_kib_s)
        }
    }

    /// The properties whose values differ between `old` and `new`, by D-Bus name.
    pub fn changed(old: &ArrayProps, new: &ArrayProps) -> HashMap<&'static str, OwnedValue> {
        let mut out = super::props::changed_props!(old, new;
            name => "Name", uuid => "UUID", named_device => "NamedDevice",
            level => "Level", state => "State",
            read_only => "ReadOnly", size => "Size", num_devices => "NumDevices",
            members => "Members", degraded => "Degraded",
            sync_action => "SyncAction", sync_completed => "SyncCompleted",
            sync_completed_sectors => "SyncCompletedSectors",
            sync_total_sectors => "SyncTotalSectors", sync_rate => "SyncRate",
            sync_remaining_time => "SyncRemainingTime", sync_speed_min => "SyncSpeedMin",
            sync_speed_max => "SyncSpeedMax", chunk_size => "ChunkSize",
            bitmap_location => "BitmapLocation", consistency_policy => "ConsistencyPolicy",
            metadata_version => "MetadataVersion", mismatch_count => "MismatchCount",
            running => "Running", bitmap_type => "BitmapType",
            logical_block_size => "LogicalBlockSize", write_intent_bitmap => "WriteIntentBitmap",
            bitmap_advised => "BitmapAdvised", full_resync_time => "FullResyncTime",
            bitmap_pending => "BitmapPending", warnings => "Warnings",
            member_roles => "MemberRoles", health => "Health", initial_build => "InitialBuild",
            redundancy => "Redundancy",
        );
        out.extend(CheckProps::changed(&old.check, &new.check));
        out
    }
}

/// The D-Bus object of one array; the service replaces `props` and emits the differences.
pub struct ArrayObject {
    /// Current published values.
    pub props: ArrayProps,
    /// Shared state (root, policy, bus) for `RequestSyncAction`.
    pub shared: Arc<Shared>,
}

/// The `sync_action` words `RequestSyncAction` accepts (udisks2's set): `check`, `repair`,
/// `idle`. Not the others md knows: `frozen` would stop every sync of the array with no owner
/// to undo it (the service journals only its wipes' freezes); `resync` and `recover` md
/// starts by itself when the array needs them (writing them only restarts one); `reshape`
/// belongs to mdadm --grow. The word is checked before the caller is authorized, so only one
/// of these three reaches polkit's details.
pub const REQUESTABLE_SYNC_ACTIONS: [SyncAction; 3] =
    [SyncAction::Check, SyncAction::Repair, SyncAction::Idle];

/// The requestable [`SyncAction`] `word` names, exactly as md spells it.
///
/// Errors: `InvalidArgument` (naming `what` and at most 64 characters of the word).
pub fn requestable_sync_action(what: &str, word: &str) -> Result<SyncAction> {
    let action = SyncAction::from(word);
    if word.len() > 16 || !REQUESTABLE_SYNC_ACTIONS.contains(&action) {
        return Err(Error::InvalidArgument(format!(
            "{what}: {} is not check, repair or idle",
            super::options::shown(word)
        )));
    }
    Ok(action)
}

/// An md array (kernel Documentation/admin-guide/md.rst), named like udisks2's
/// org.freedesktop.UDisks2.MDRaid where the meaning is the same. The object path is keyed by the
/// array UUID (/org/mdpilot/MdPilot1/arrays/<32 hex digits>), stable across reboots and
/// renumbering; arrays without a UUID use /org/mdpilot/MdPilot1/arrays/name_<kernel name>.
/// Every property emits PropertiesChanged when it changes, except the constant KernelName and
/// DeviceNode (a renumbered array is a new object).
#[interface(name = "org.mdpilot.MdPilot1.Array")]
impl ArrayObject {
    /// Asks md for a sync action by writing md/sync_action, as udisks2's MDRaid.RequestSyncAction:
    /// check (read all members, count mismatches in MismatchCount), repair (check and rewrite
    /// mismatches), idle (stop the running check, repair or resync; md restarts a needed resync
    /// later from its checkpoint). Options: auth.no_user_interaction (b). Any other word is
    /// InvalidArgument; md refusing (a sync already runs, array read-only) is Busy. Needs uid 0
    /// or polkit org.mdpilot.MdPilot1.manage-priority (details: device, sync-action). Errors:
    /// NotAuthorized; InvalidArgument (another word, an unknown option, EINVAL from md); Busy
    /// (EBUSY, EROFS); NoSuchArray (the array is gone); Failed.
    async fn request_sync_action(
        &self,
        sync_action: String,
        options: Options,
        #[zbus(header)] header: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> Result<()> {
        let name = &self.props.kernel_name;
        let what = format!("RequestSyncAction {name}");
        let (_, action) = self
            .shared
            .auth
            .guarded(conn, &header, "RequestSyncAction", options, |options| {
                parse_sync_action_options(&what, &options)?;
                let action = requestable_sync_action(&what, &sync_action)?;
                let req = Request::request_sync_action(name, action.as_str());
                Ok((action, req))
            })
            .await?;
        // On the check worker: md answers an `idle` only when its sync thread has stopped.
        let (root, array, word) = (self.shared.core.root.clone(), name.clone(), action.clone());
        let written = self
            .shared
            .core
            .check_worker
            .run(move || crate::sysfs::write_sync_action(&root, &array, &word))
            .await
            .map_err(|e| Error::Failed(format!("{what}: {e}")))?;
        written.map_err(|e| {
            use crate::sysfs::WriteError;
            let msg = format!("{what}: {}", crate::error::error_chain(&e));
            match e {
                WriteError::Busy { .. } => Error::Busy(msg),
                WriteError::Invalid { .. } => Error::InvalidArgument(msg),
                WriteError::Gone { .. } => Error::NoSuchArray(msg),
                WriteError::Io { .. } | WriteError::NotTaken { .. } => Error::Failed(msg),
            }
        })?;
        tracing::info!(array = %name, sync_action = %sync_action, "{what}: wrote {sync_action}");
        self.shared.core.refresh_array(name);
        Ok(())
    }

    /// Adds an internal write-intent bitmap, as `mdpilot bitmap add`: runs mdadm in grow mode
    /// with an internal bitmap on /dev/<KernelName> (since 1.3). md refuses while a sync runs or the
    /// array is frozen: then the array's UUID is queued in /var/lib/mdpilot/bitmap-wanted,
    /// BitmapPending turns true, and the service adds the bitmap when the sync ends (the
    /// journal says when; no Job object: SyncCompleted is the progress). Returns true when
    /// queued, false when added now or present already (WriteIntentBitmap says which; the
    /// lockless llbitmap is never added). Options: auth.no_user_interaction (b); no other.
    /// Needs uid 0 or polkit org.mdpilot.MdPilot1.add-bitmap (details: method, device).
    /// Errors: InvalidArgument (an unknown option; no redundancy, external metadata, a
    /// journal or PPL); Busy (the array is not running); NoSuchArray; NotAuthorized; Failed
    /// (mdadm's message, the list cannot be written).
    async fn add_bitmap(
        &self,
        options: Options,
        #[zbus(header)] header: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> Result<bool> {
        let name = self.props.kernel_name.clone();
        let what = format!("AddBitmap {name}");
        self.shared
            .auth
            .guarded(conn, &header, "AddBitmap", options, |options| {
                parse_sync_action_options(&what, &options)?;
                let a = lock(&self.shared.core.model)
                    .arrays
                    .iter()
                    .find(|a| a.name == name)
                    .cloned();
                let a =
                    a.ok_or_else(|| Error::NoSuchArray(format!("{what}: the array has gone")))?;
                crate::bitmap::plan(&a).map_err(|e| bitmap_error(&what, e))?;
                Ok(((), Request::add_bitmap(&name)))
            })
            .await?;
        let root = self.shared.core.root.clone();
        let n = name.clone();
        let outcome = self
            .shared
            .core
            .bitmap_worker
            .run(move || crate::bitmap::add_or_queue(&root, &n))
            .await
            .map_err(|e| Error::Failed(format!("{what}: {e}")))?
            .map_err(|e| bitmap_error(&what, e))?;
        tracing::info!(array = %name, "{what}: {outcome:?}");
        self.shared.core.refresh_array(&name);
        Ok(matches!(outcome, crate::bitmap::Outcome::Queued(_)))
    }

    /// Starts a check (scrub) of the whole array from sector 0, as `mdpilot check start`:
    /// writes md/sync_min 0, then md/sync_action check (or repair); a saved position is
    /// dropped (ResumeCheck keeps it). Options: repair (b: rewrite mismatches, default
    /// false), duration (t: seconds until the service pauses the check, keeping its position;
    /// 0 = no end; at most 3650 days), max (t: KiB/s, the array's md/sync_speed_max while the check runs, a lease
    /// check-<KernelName> shown in Manager.Leases and released when the check pauses, ends or
    /// is cancelled; 0 = the config's check_max, else none), force (b, since 1.4: start
    /// although a guard holds the check, see CheckHeld; the reason overridden goes to the
    /// journal), auth.no_user_interaction (b). Needs uid 0 or polkit
    /// org.mdpilot.MdPilot1.manage-priority (a repair: org.mdpilot.MdPilot1.repair; details:
    /// method, device). Errors: NotAuthorized; InvalidArgument (unknown option, wrong type, a
    /// duration above 3650 days, EINVAL from md); Busy (another sync runs: resync, recover,
    /// reshape, check, frozen; EBUSY; or, without force, a guard holds the check: the array or
    /// one sharing a disk with it is degraded or rebuilding, the message says which); NoSuchArray;
    /// Failed (the check record /var/lib/mdpilot/checks.toml, the throttle).
    async fn start_check(
        &self,
        options: Options,
        #[zbus(header)] header: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> Result<()> {
        super::check::start(
            &self.shared,
            conn,
            &header,
            &self.props.kernel_name,
            options,
        )
        .await
    }

    /// PauseCheck with options (since 1.2): auth.no_user_interaction (b: true = no polkit
    /// prompt, NotAuthorized at once instead); no other option. Otherwise as PauseCheck.
    async fn pause_check_with_options(
        &self,
        options: Options,
        #[zbus(header)] header: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> Result<()> {
        let name = &self.props.kernel_name;
        super::check::step_with(
            &self.shared,
            conn,
            &header,
            name,
            "PauseCheck",
            Some(options),
        )
        .await
    }

    /// ResumeCheck with options (since 1.2): auth.no_user_interaction (b); no other option.
    /// Otherwise as ResumeCheck.
    async fn resume_check_with_options(
        &self,
        options: Options,
        #[zbus(header)] header: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> Result<()> {
        let name = &self.props.kernel_name;
        super::check::step_with(
            &self.shared,
            conn,
            &header,
            name,
            "ResumeCheck",
            Some(options),
        )
        .await
    }

    /// CancelCheck with options (since 1.2): auth.no_user_interaction (b); no other option.
    /// Otherwise as CancelCheck.
    async fn cancel_check_with_options(
        &self,
        options: Options,
        #[zbus(header)] header: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> Result<()> {
        let name = &self.props.kernel_name;
        super::check::step_with(
            &self.shared,
            conn,
            &header,
            name,
            "CancelCheck",
            Some(options),
        )
        .await
    }

    /// Pauses the running check: saves its position (md/sync_completed done, rounded down to
    /// the chunk as md/sync_min requires) durably first, then writes md/sync_action idle and
    /// releases the throttle. Nothing to do when no check runs. Same authorization and
    /// errors as StartCheck.
    async fn pause_check(
        &self,
        #[zbus(header)] header: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> Result<()> {
        super::check::step(
            &self.shared,
            conn,
            &header,
            &self.props.kernel_name,
            "PauseCheck",
        )
        .await
    }

    /// Resumes the paused check at CheckPosition: writes md/sync_min = CheckPosition, then
    /// md/sync_action as it was (check or repair), with the throttle it was started with.
    /// Errors as StartCheck; Failed when no check is paused.
    async fn resume_check(
        &self,
        #[zbus(header)] header: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> Result<()> {
        super::check::step(
            &self.shared,
            conn,
            &header,
            &self.props.kernel_name,
            "ResumeCheck",
        )
        .await
    }

    /// Cancels the check: md/sync_action idle (when a check runs), md/sync_min 0, the saved
    /// position forgotten (CheckPosition 0), the throttle released. Same authorization and
    /// errors as StartCheck.
    async fn cancel_check(
        &self,
        #[zbus(header)] header: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> Result<()> {
        super::check::step(
            &self.shared,
            conn,
            &header,
            &self.props.kernel_name,
            "CancelCheck",
        )
        .await
    }

    /// The last hour of this array's sync (since 1.5), oldest first: one sample per 10 s while
    /// a sync (check, repair, resync, recover, reshape) runs and one at speed 0 when it stops,
    /// at most 360, each (time t: Unix seconds; speed t: md/sync_speed, KiB/s; limit t:
    /// md/sync_speed_max in force, KiB/s, the check throttle's lease included; pressure d:
    /// /proc/pressure/io full avg10, percent, -1 without PSI). Kept in the service's memory
    /// only: empty after its restart and for an array that did not sync within the hour.
    /// Open to every caller, like the properties; changes nothing. No errors.
    #[zbus(out_args("samples"))]
    fn get_sync_history(&self) -> Vec<(u64, u64, u64, f64)> {
        lock(&self.shared.core.sync_history).samples(&self.props.kernel_name)
    }

    /// Where a paused check resumes, in 512-byte sectors from the start of each member (a
    /// multiple of 4 KiB and of the chunk, as md/sync_min keeps it); 0 = no saved position. While a check runs
    /// the service saves its position every 60 s (what a crash can lose), and shows it here.
    #[zbus(property)]
    fn check_position(&self) -> u64 {
        self.props.check.position
    }
    /// The last completed check or repair: action (s), mismatch_cnt (t: md/mismatch_cnt then,
    /// 512-byte sectors), completed (t: Unix seconds), level (s), severity (s: warning for
    /// mismatches on raid4/5/6, where parity must match; info otherwise, including mismatches
    /// on raid1/raid10, which swap and in-flight writes cause). Empty when none completed.
    #[zbus(property)]
    fn last_check_result(&self) -> HashMap<String, OwnedValue> {
        super::check::result_dict(self.props.check.last.as_ref())
    }
    /// When the last check or repair ran to the end, Unix seconds; 0 = never (as recorded by
    /// mdpilot in /var/lib/mdpilot/checks.toml).
    #[zbus(property)]
    fn last_check_completed(&self) -> u64 {
        self.props.check.last_completed
    }
    /// When the next window of the configured check schedule ([check] schedule) opens for
    /// this array, Unix seconds; 0 = no schedule, or the schedule skips this array.
    /// Refreshed when the array's properties are re-read.
    #[zbus(property)]
    fn next_check_start(&self) -> u64 {
        self.props.check.next_start
    }
    /// The check's pressure throttle ([check] pressure_target), while a check of mdpilot runs:
    /// limit (t: md/sync_speed_max through the lease check-<KernelName>, KiB/s), decision (s:
    /// start, down, up, hold, floor, ceiling, fixed), why (s: in words), full_avg10 and
    /// some_avg10 (d: /proc/pressure/io, percent; absent without PSI), changed (t: Unix
    /// seconds of the last change), not_applied (s: why the limit did not take effect; absent
    /// when it did); since 1.6 pressure (d: the io pressure the last decision used, percent),
    /// source (s: interval, over the interval since the throttle's previous look, or avg10),
    /// interval_ms (t: that interval) and io_depth (t: md/sync_io_depth asked for at the
    /// floor; absent while md's own depth applies). Empty without a pressure throttle or a
    /// running check.
    #[zbus(property)]
    fn check_throttle(&self) -> HashMap<String, OwnedValue> {
        super::check::throttle_dict(self.props.check.throttle.as_ref())
    }
    /// The pressure throttle of this array's resync or recovery ([resync] pressure_target, an
    /// admin's opt-in), while one runs: the keys of CheckThrottle, with limit (t:
    /// md/sync_speed_max through the lease resync-<KernelName>, KiB/s; 0 while it holds none)
    /// and decision (s: start, down, up, hold, floor, ceiling; aside: another lease sets the
    /// speed limits and wins; off: no /proc/pressure/io, md's own limits). Empty without the
    /// opt-in or while no covered sync runs. Since API 1.6.
    #[zbus(property)]
    fn resync_throttle(&self) -> HashMap<String, OwnedValue> {
        super::check::throttle_dict(self.props.check.resync_throttle.as_ref())
    }
    /// Why a check would not start on this array now, or why the service paused its check:
    /// "md0 is degraded (1 member(s) missing)", "md0 runs recover", "it shares disk sda: ...",
    /// "the machine runs on battery" (scheduled checks only), "paused: degraded" (resumes when
    /// the array is redundant again), "paused: shutdown" (resumes after the restart). Empty:
    /// nothing holds a check. StartCheck with the option force (b) overrides the array guards.
    #[zbus(property)]
    fn check_held(&self) -> String {
        self.props.check.held.clone()
    }

    /// Kernel name, e.g. md127 (/sys/block/<KernelName>); may differ after a reboot.
    #[zbus(property(emits_changed_signal = "const"))]
    fn kernel_name(&self) -> String {
        self.props.kernel_name.clone()
    }
    /// The metadata name as mdadm reports it (udev's MD_NAME), e.g. host:root; empty where unknown
    /// (0.90 metadata, no udev). udisks2: Name.
    #[zbus(property)]
    fn name(&self) -> String {
        self.props.name.clone()
    }
    /// Array UUID in mdadm's colon form xxxxxxxx:xxxxxxxx:xxxxxxxx:xxxxxxxx (udev's MD_UUID, else
    /// md/uuid regrouped); empty where unknown. udisks2: UUID.
    #[zbus(property, name = "UUID")]
    fn uuid(&self) -> String {
        self.props.uuid.clone()
    }
    /// The device node, /dev/<KernelName>.
    #[zbus(property(emits_changed_signal = "const"))]
    fn device_node(&self) -> String {
        self.props.device_node.clone()
    }
    /// The /dev/md/NAME link to the device node (first in sort order), empty when none.
    #[zbus(property)]
    fn named_device(&self) -> String {
        self.props.named_device.clone()
    }
    /// RAID level: raid0, raid1, raid4, raid5, raid6, raid10, linear. udisks2: Level.
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
    /// Array size in bytes. udisks2: Size.
    #[zbus(property)]
    fn size(&self) -> u64 {
        self.props.size
    }
    /// Number of member slots (md/raid_disks). udisks2: NumDevices.
    #[zbus(property)]
    fn num_devices(&self) -> u32 {
        self.props.num_devices
    }
    /// Members: (kernel name of the member, slot or -1, state words of md/dev-*/state such as
    /// in_sync, faulty, spare, write_mostly, read errors). Not udisks2's ActiveDevices, which
    /// names Block objects.
    #[zbus(property)]
    fn members(&self) -> Vec<MemberInfo> {
        self.props.members.clone()
    }
    /// Each member's role by member name: in_sync, rebuilding (given a slot, being recovered
    /// into it), spare, faulty, journal. From md/dev-*/state and slot, else /proc/mdstat's
    /// flags. Since 1.3.
    #[zbus(property)]
    fn member_roles(&self) -> HashMap<String, String> {
        self.props.member_roles.clone()
    }
    /// The verdict of `mdadm -D -t` (detail, test) and `mdpilot status`'s test option: ok (every
    /// member present), degraded (members missing, data served), inactive (not started), unusable
    /// (broken, or more members missing than the level survives). Since 1.3.
    #[zbus(property)]
    fn health(&self) -> String {
        self.props.health.clone()
    }
    /// True while the running sync is the array's first build: a resync, or a recovery with
    /// no faulty member and every slot filled (how md builds a new raid5); information, not a
    /// failure. Since 1.3.
    #[zbus(property)]
    fn initial_build(&self) -> bool {
        self.props.initial_build
    }
    /// How the level keeps the data redundant: parity (raid4/5/6: a repair recomputes the
    /// parity, and mismatches after a check mean trouble), mirror (raid1/raid10: a repair
    /// copies one copy over the others), none (raid0, linear; empty level). Since 1.3.
    #[zbus(property)]
    fn redundancy(&self) -> String {
        self.props.redundancy.clone()
    }
    /// Number of missing devices (md/degraded). udisks2: Degraded.
    #[zbus(property)]
    fn degraded(&self) -> u32 {
        self.props.degraded
    }
    /// md/sync_action: idle, resync, recover, check, repair, reshape, frozen. udisks2:
    /// SyncAction.
    #[zbus(property)]
    fn sync_action(&self) -> String {
        self.props.sync_action.clone()
    }
    /// Fraction of the running sync done, 0..1; 0 when idle. udisks2: SyncCompleted.
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
    /// Current sync speed in bytes per second. udisks2: SyncRate.
    #[zbus(property)]
    fn sync_rate(&self) -> u64 {
        self.props.sync_rate
    }
    /// Estimated time left for the sync in microseconds; 0 when unknown. udisks2:
    /// SyncRemainingTime.
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
    /// Chunk size in bytes (0 where the level has none). udisks2: ChunkSize.
    #[zbus(property)]
    fn chunk_size(&self) -> u64 {
        self.props.chunk_size
    }
    /// md/bitmap/location as a bytestring, as udisks2's BitmapLocation: none, file, or the
    /// offset of an internal bitmap from the superblock in sectors (+8); empty when unknown.
    #[zbus(property)]
    fn bitmap_location(&self) -> Vec<u8> {
        self.props.bitmap_location.clone()
    }
    /// md/consistency_policy: none, resync, bitmap, journal, ppl; empty where unknown.
    #[zbus(property)]
    fn consistency_policy(&self) -> String {
        self.props.consistency_policy.clone()
    }
    /// md/metadata_version: 0.90, 1.0, 1.1, 1.2, external:imsm...; empty where unknown.
    #[zbus(property)]
    fn metadata_version(&self) -> String {
        self.props.metadata_version.clone()
    }
    /// md/mismatch_cnt in sectors after the last check or repair.
    #[zbus(property)]
    fn mismatch_count(&self) -> u64 {
        self.props.mismatch_count
    }
    /// True when the array is started (active). udisks2: Running.
    #[zbus(property)]
    fn running(&self) -> bool {
        self.props.running
    }
    /// The selected word of md/bitmap_type (Linux 6.19+): none, bitmap, or llbitmap (the
    /// lockless bitmap, experimental in the kernel); empty where the kernel lacks the file.
    /// Since 1.3.
    #[zbus(property)]
    fn bitmap_type(&self) -> String {
        self.props.bitmap_type.clone()
    }
    /// md/logical_block_size in bytes (Linux 6.19+); 0 where the kernel lacks the file. Since
    /// 1.3.
    #[zbus(property)]
    fn logical_block_size(&self) -> u64 {
        self.props.logical_block_size
    }
    /// The write-intent bitmap of a redundant array: none, internal, file, llbitmap; empty for
    /// an array without redundancy. From md/bitmap_type, md/bitmap/location and
    /// md/consistency_policy. Since 1.3.
    #[zbus(property)]
    fn write_intent_bitmap(&self) -> String {
        self.props.write_intent_bitmap.clone()
    }
    /// True for a running redundant array without a write-intent bitmap (and no journal or
    /// PPL): after a crash or power loss md resyncs all of it (see FullResyncTime); AddBitmap
    /// adds one. Since 1.3.
    #[zbus(property)]
    fn bitmap_advised(&self) -> bool {
        self.props.bitmap_advised
    }
    /// While BitmapAdvised: the estimated length of that full resync in µs, md/component_size
    /// over the running sync's speed, else over md/sync_speed_min (the floor md keeps under
    /// load); 0 otherwise or when unknown. Since 1.3.
    #[zbus(property)]
    fn full_resync_time(&self) -> u64 {
        self.props.full_resync_time
    }
    /// True while an AddBitmap (or the installer's request) waits for the running sync to end;
    /// the service then adds the bitmap. Since 1.3.
    #[zbus(property)]
    fn bitmap_pending(&self) -> bool {
        self.props.bitmap_pending
    }
    /// What an admin should know about the array, one line each: no write-intent bitmap (with
    /// the estimate), a superblock that records a logical block size (Linux 6.18 and older
    /// cannot assemble the array). Since 1.3.
    #[zbus(property)]
    fn warnings(&self) -> Vec<String> {
        self.props.warnings.clone()
    }
}

/// A [`crate::bitmap::BitmapError`] as the D-Bus error of `what` (`AddBitmap md0`).
fn bitmap_error(what: &str, e: crate::bitmap::BitmapError) -> Error {
    use crate::bitmap::BitmapError as B;
    let msg = format!("{what}: {}", crate::error::error_chain(&e));
    match e {
        B::NoArray(_) => Error::NoSuchArray(msg),
        B::NotRunning(..) => Error::Busy(msg),
        B::NotRedundant { .. } | B::External(..) | B::OtherPolicy(..) => {
            Error::InvalidArgument(msg)
        }
        B::NoUuid(_) | B::Queue(_) | B::Mdadm { .. } => Error::Failed(msg),
    }
}

/// RequestSyncAction's options: `auth.no_user_interaction` (b) only (udisks2's standard option;
/// [`super::auth::take_interaction_flags`] has taken it out already, so none is left normally).
///
/// Errors: `InvalidArgument` for any other option or a wrong type.
fn parse_sync_action_options(what: &str, opts: &Options) -> Result<()> {
    for (k, v) in opts {
        match (k.as_str(), &**v) {
            ("auth.no_user_interaction", Value::Bool(_)) => {}
            _ => {
                return Err(Error::InvalidArgument(format!(
                "{what}: unknown option {k:?} or wrong type {} (known: auth.no_user_interaction b)",
                v.value_signature()
            )))
            }
        }
    }
    Ok(())
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
            p.members,
            vec![("sda1".into(), 0, vec!["in_sync".into()], 0)]
        );
        assert_eq!(p.bitmap_location, b"none");
        assert_eq!(
            (p.kernel_name.as_str(), p.device_node.as_str()),
            ("md1", "/dev/md1")
        );
        assert_eq!(p.metadata_version, "1.2");
        assert_eq!((p.name.as_str(), p.uuid.as_str()), ("", ""));
        assert!(p.running);
        assert!(!array().is_syncing());
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
        assert!(a.is_syncing());
    }

    #[test]
    fn health_and_roles_are_published_as_the_model_decides() {
        // A raid5 of four members with two faulty: unusable, as `status --test` says (the
        // Cockpit page called it degraded when it judged by itself).
        let text = "Personalities : [raid5]\nmd0 : active raid5 sdd[3](F) sdc[2](F) sdb[1] sda[0]\n      3139584 blocks super 1.2 level 5, 512k chunk, algorithm 2 [4/2] [UU__]\n\nunused devices: <none>\n";
        let a = crate::mdstat::parse(text).arrays.remove(0);
        let p = ArrayProps::from_model(&a);
        assert_eq!(p.health, "unusable");
        assert_eq!(crate::health::array_health(&a).exit_code(), 2);
        assert_eq!(p.member_roles["sdc"], "faulty");
        assert_eq!(p.member_roles["sda"], "in_sync");
        assert_eq!(p.redundancy, "parity");
        assert!(!p.initial_build);
        // A raid1 rebuilding onto sdb: rebuilding, not in sync; no initial build while the
        // old member is faulty.
        let text = "Personalities : [raid1]\nmd1 : active raid1 sdc[2](F) sdb[1] sda[0]\n      1046528 blocks super 1.2 [2/1] [U_]\n      [=>...................]  recovery =  8.5% (89128/1046528) finish=1.5min speed=10000K/sec\n\nunused devices: <none>\n";
        let a = crate::mdstat::parse(text).arrays.remove(0);
        let p = ArrayProps::from_model(&a);
        assert_eq!(p.health, "degraded");
        assert_eq!(p.member_roles["sdb"], "rebuilding");
        assert_eq!(p.member_roles["sdc"], "faulty");
        assert!(!p.initial_build);
        let sdb = p.members.iter().find(|m| m.0 == "sdb").unwrap();
        assert_eq!(sdb.2, ["spare"]);
        assert_eq!(p.redundancy, "mirror");
        let changed = ArrayProps::changed(&ArrayProps::default(), &p);
        for k in ["Health", "MemberRoles", "Redundancy"] {
            assert!(changed.contains_key(k), "{k}");
        }
    }

    #[test]
    fn udisks_names_have_udisks_forms() {
        let mut a = array();
        a.sysfs = Some(ArraySysfs {
            uuid: Some("3B6C2A6E-0D0E-4B7A-9D5E-8A7B1C2D3E4F".into()),
            bitmap_location: Some("+8".into()),
            consistency_policy: Some("bitmap".into()),
            metadata_name: Some("host:root".into()),
            named_device: Some("/dev/md/root".into()),
            ..Default::default()
        });
        let p = ArrayProps::from_model(&a);
        assert_eq!(p.uuid, "3b6c2a6e:0d0e4b7a:9d5e8a7b:1c2d3e4f");
        assert_eq!(p.name, "host:root");
        assert_eq!(p.kernel_name, "md1");
        assert_eq!(p.bitmap_location, b"+8");
        assert_eq!(p.consistency_policy, "bitmap");
        assert_eq!(p.named_device, "/dev/md/root");
        // udev's MD_UUID wins over md/uuid.
        a.sysfs.as_mut().unwrap().mdadm_uuid = Some("00000000:11111111:22222222:33333333".into());
        assert_eq!(
            ArrayProps::from_model(&a).uuid,
            "00000000:11111111:22222222:33333333"
        );
        // mdstat's bitmap line without sysfs: a file is "file", an internal one unknown.
        let mut a = array();
        let bitmap = |file: Option<&str>| Bitmap {
            pages_used: 0,
            pages_total: 8,
            memory_kib: 0,
            chunk_bytes: 1 << 26,
            file: file.map(String::from),
        };
        a.bitmap = Some(bitmap(Some("/bitmap")));
        assert_eq!(ArrayProps::from_model(&a).bitmap_location, b"file");
        a.bitmap = Some(bitmap(None));
        assert!(ArrayProps::from_model(&a).bitmap_location.is_empty());
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
