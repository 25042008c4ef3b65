//! Resync priority policy: leases on the md speed limits, saved durably, restored on every exit
//! path.
//!
//! Any number of holders take leases ([`LeaseRequest`]) asking for global limits
//! (`/proc/sys/dev/raid/speed_limit_{min,max}`) and/or per-array limits
//! (`/sys/block/mdN/md/sync_speed_{min,max}`), KiB/s, and for the resync I/O depth
//! (`/proc/sys/dev/raid/sync_io_depth`, `md/sync_io_depth`, Linux 6.16+; absent knobs are never
//! written). The effective value of each knob is the most yielding request (lowest min, lowest
//! max, lowest I/O depth). The first lease on a knob saves its original reading
//! in the state file *before* the kernel write; when no lease targets the knob any more, the
//! original is written back — unless someone else changed the knob meanwhile, in which case their
//! value is left and a warning is kept for `policy show`.
//!
//! Layout: [`request`] what a lease asks for (pure), [`holder`] who holds it (the reserved
//! schemes), [`lease`] the pure state machine,
//! [`warning`] its warnings, [`journal`] the other array writes a job holds (freezes) and `changes`
//! ([`Policy::hold`], [`Policy::let_go`]) that make them, [`state`] the durable
//! file and its lock, [`knobs`] the kernel files, [`adapter`] ([`Policy`]) ties them together.
//! Knob readings are [`SpeedLimit`]s (the model's type); the policy's files and its JSON view
//! spell the number `kibs` (see `kibs_form`).

pub mod adapter;
mod changes;
pub mod holder;
pub mod journal;
pub mod knobs;
pub mod lease;
pub mod request;
pub mod state;
pub mod warning;

pub use crate::model::SpeedLimit;
pub use adapter::Policy;
pub use holder::Holder;
pub use lease::Setting;
pub use request::{
    Bound, CoreError, KnobId, LeaseKind, LeaseRequest, Limits, Owner, KERNEL_DEFAULT_IO_DEPTH,
    KERNEL_DEFAULT_MAX, KERNEL_DEFAULT_MIN,
};
pub use warning::PolicyWarning;

use crate::host::{pid_alive, process_start_time};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Settings of the policy adapter (built by `Config::policy_settings`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicySettings {
    /// The state file, absolute and already resolved under the `Root`
    /// (default `/run/mdpilot/policy.toml`). The lock file is `<state_path>.lock`.
    pub state_path: PathBuf,
    /// Global `speed_limit_min` of the install policy (`mdpilot policy apply` with no limits),
    /// KiB/s. Default 0: resync always yields to other I/O.
    pub install_min: u64,
    /// Global `speed_limit_max` of the install policy, KiB/s; `None` (default) leaves it alone.
    pub install_max: Option<u64>,
}

/// Errors of policy operations; the messages name the file and the reason.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The request itself is invalid (holder, array name, limit, pid).
    #[error("invalid lease request")]
    Invalid(#[from] CoreError),
    /// The state file or its lock failed (including a corrupt state file, moved aside).
    #[error(transparent)]
    State(#[from] state::StateError),
    /// The caller refused the operation on the state it saw under the lock (a restore while a
    /// wipe holds a freeze); nothing was written. The text is the caller's reason.
    #[error("{0}")]
    Refused(String),
    /// A knob could not be read (missing, non-numeric, unreadable); nothing was written.
    #[error("nothing written")]
    Read(#[source] knobs::KnobError),
    /// A knob write failed; earlier writes of the same operation were undone and the state file
    /// is back to what it was (or, when undoing failed too, it records both values as ours).
    #[error("{}", if *rolled_back {
        format!("kernel write failed; earlier writes undone, {} unchanged", state_path.display())
    } else {
        format!("kernel write failed and undoing failed too; {} keeps the originals, run `mdpilot policy restore`", state_path.display())
    })]
    Write {
        /// The failing write.
        #[source]
        source: knobs::KnobError,
        /// The state file.
        state_path: PathBuf,
        /// True when every earlier write was undone and the old state saved.
        rolled_back: bool,
    },
}

/// What `policy show` prints and every operation returns (serde: the `--json` shape; it also
/// deserializes, so a client of the service can render a view it received as JSON).
///
/// Values are KiB/s; per-array readings are `{"kibs": N, "system": bool}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyView {
    /// The state file.
    pub state_path: PathBuf,
    /// Current `/proc/sys/dev/raid/speed_limit_min`; `null` when unreadable (see warnings).
    pub speed_limit_min: Option<u64>,
    /// Current `/proc/sys/dev/raid/speed_limit_max`; `null` when unreadable.
    pub speed_limit_max: Option<u64>,
    /// Current `/proc/sys/dev/raid/sync_io_depth`, resync requests in flight; `null` on kernels
    /// without it (before 6.16; no warning) or when unreadable.
    #[serde(default)]
    pub sync_io_depth: Option<u64>,
    /// Saved originals of the global knobs we manage (`null` when not managed).
    pub originals: GlobalOriginals,
    /// Leases in the state file, by holder (`dead`: a pid owner that has exited).
    pub leases: Vec<LeaseView>,
    /// Arrays that are leased or managed.
    pub arrays: BTreeMap<String, ArrayView>,
    /// Warnings kept in the state file plus knobs changed behind our back right now, as text
    /// ([`PolicyWarning`]'s `Display`).
    pub warnings: Vec<String>,
    /// Where a corrupt state file was moved to, while the originals are unknown (until
    /// `restore --defaults`); `null` normally.
    #[serde(default)]
    pub originals_unknown: Option<String>,
    /// Journaled array changes held now (freezes of running wipe jobs), as in the state file
    /// (`{"id", "owner", "array": {"name", "uuid"}, "attr", "written", "restore"}`).
    #[serde(default)]
    pub changes: Vec<journal::Change>,
}

/// A lease as shown: the request's fields plus `dead` (JSON:
/// `{"holder": .., "kind": .., "owner": .., "global": {..}, "arrays": {..}, "dead": false}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseView {
    /// Unique name of the holder.
    pub holder: String,
    /// What kind of client holds it.
    pub kind: LeaseKind,
    /// What keeps it alive.
    pub owner: Owner,
    /// Global limits.
    #[serde(default)]
    pub global: Limits,
    /// Per-array limits by kernel name.
    #[serde(default)]
    pub arrays: BTreeMap<String, Limits>,
    /// True when the owner is a pid that no longer exists ([`pid_alive`]): the next mutating
    /// command (or the service) drops the lease. Bus-name owners are never shown dead here.
    #[serde(default)]
    pub dead: bool,
    /// When a timed lease ends (`policy apply --for`), Unix seconds; absent for leases without
    /// a duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_unix_s: Option<u64>,
    /// When the lease was first taken, Unix seconds (replacing it keeps the time); absent for
    /// leases in state files written before this field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taken_unix_s: Option<u64>,
}

impl LeaseView {
    /// The view of `lease`, with `dead` as given and no expiry.
    pub fn new(lease: LeaseRequest, dead: bool) -> Self {
        LeaseView {
            holder: lease.holder,
            kind: lease.kind,
            owner: lease.owner,
            global: lease.global,
            arrays: lease.arrays,
            dead,
            expires_unix_s: None,
            taken_unix_s: None,
        }
    }
}

/// Saved originals of `speed_limit_{min,max}` (KiB/s) and `sync_io_depth` (requests).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GlobalOriginals {
    /// Original `speed_limit_min`.
    pub speed_limit_min: Option<u64>,
    /// Original `speed_limit_max`.
    pub speed_limit_max: Option<u64>,
    /// Original `sync_io_depth` (requests in flight).
    #[serde(default)]
    pub sync_io_depth: Option<u64>,
}

/// One array's `sync_speed_{min,max}` and `sync_io_depth`: current and saved original readings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArrayView {
    /// Current `sync_speed_min` (`null` when unreadable).
    #[serde(default, with = "kibs_form::option")]
    pub sync_speed_min: Option<SpeedLimit>,
    /// Current `sync_speed_max`.
    #[serde(default, with = "kibs_form::option")]
    pub sync_speed_max: Option<SpeedLimit>,
    /// Saved original `sync_speed_min` (when managed).
    #[serde(default, with = "kibs_form::option")]
    pub original_min: Option<SpeedLimit>,
    /// Saved original `sync_speed_max` (when managed).
    #[serde(default, with = "kibs_form::option")]
    pub original_max: Option<SpeedLimit>,
    /// Current `sync_io_depth` (requests in flight, in the same `{kibs, system}` form as the
    /// speeds; `null` on kernels without it or when unreadable).
    #[serde(default, with = "kibs_form::option")]
    pub sync_io_depth: Option<SpeedLimit>,
    /// Saved original `sync_io_depth` (when managed).
    #[serde(default, with = "kibs_form::option")]
    pub original_io_depth: Option<SpeedLimit>,
}

/// The owner to record for process `pid`: [`Owner::Process`] with its start time, or a bare
/// [`Owner::Pid`] when the start time cannot be read (no such process, `/proc` hidden).
pub fn process_owner(pid: u32) -> Owner {
    match process_start_time(pid) {
        Some(start_time) => Owner::Process { pid, start_time },
        None => Owner::Pid(pid),
    }
}

/// Whether the process a process owner names still runs; `None` for bus-name and `None`
/// owners. [`Owner::Process`]: [`pid_alive`] and the start time still matches (a different
/// start time is a reused pid: dead; an unreadable one, with the pid alive, counts as alive,
/// as a bare pid would). [`Owner::Pid`] (older state files): [`pid_alive`] alone.
pub fn process_alive(owner: &Owner) -> Option<bool> {
    match owner {
        Owner::Process { pid, start_time } => Some(
            pid_alive(*pid) && !matches!(process_start_time(*pid), Some(t) if t != *start_time),
        ),
        Owner::Pid(p) => Some(pid_alive(*p)),
        Owner::BusName(_) | Owner::None => None,
    }
}

/// The liveness test the CLI uses for `reap`: process owners are checked with
/// [`process_alive`] (pid and start time); bus names are kept (only the service can see the
/// bus, and it reaps them); `Owner::None` lives until released.
pub fn cli_alive(owner: &Owner) -> bool {
    process_alive(owner).unwrap_or(true)
}

/// serde adapter: a [`SpeedLimit`] in the policy's form `{kibs = N, system = bool}` (state file
/// version 1 and `policy show --json`), which must stay as it is while the status JSON spells the
/// same value `{"kib_s": N, "system": bool}`. `system` defaults to false when reading.
mod kibs_form {
    use crate::model::SpeedLimit;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct Form {
        kibs: u64,
        #[serde(default)]
        system: bool,
    }

    impl From<&SpeedLimit> for Form {
        fn from(l: &SpeedLimit) -> Self {
            Form {
                kibs: l.kib_s,
                system: l.system,
            }
        }
    }

    impl From<Form> for SpeedLimit {
        fn from(f: Form) -> Self {
            SpeedLimit {
                kib_s: f.kibs,
                system: f.system,
            }
        }
    }

    pub fn serialize<S: Serializer>(l: &SpeedLimit, s: S) -> Result<S::Ok, S::Error> {
        Form::from(l).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SpeedLimit, D::Error> {
        Form::deserialize(d).map(SpeedLimit::from)
    }

    /// The same for `Option<SpeedLimit>` (`null` for `None`).
    pub mod option {
        use super::Form;
        use crate::model::SpeedLimit;
        use serde::{Deserialize, Deserializer, Serialize, Serializer};

        pub fn serialize<S: Serializer>(l: &Option<SpeedLimit>, s: S) -> Result<S::Ok, S::Error> {
            l.as_ref().map(Form::from).serialize(s)
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<SpeedLimit>, D::Error> {
            Option::<Form>::deserialize(d).map(|f| f.map(SpeedLimit::from))
        }
    }
}
