//! What a lease asks for, and the names of the knobs it asks about: the request types, their
//! validation and the knob identities the state machine ([`super::lease`]) works on. Pure: no I/O.
//!
//! Source of truth for the knobs and their limits: kernel `Documentation/admin-guide/md.rst`
//! (`/proc/sys/dev/raid/speed_limit_{min,max}`, `/sys/block/mdN/md/sync_speed_{min,max}`) and
//! `drivers/md/md.c` (`sync_io_depth`, Linux 6.16+: `/proc/sys/dev/raid/sync_io_depth` and
//! `/sys/block/mdN/md/sync_io_depth`, shown and stored like the speed limits).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Kernel default of `/proc/sys/dev/raid/speed_limit_min`, KiB/s (md.rst).
pub const KERNEL_DEFAULT_MIN: u64 = 1000;
/// Kernel default of `/proc/sys/dev/raid/speed_limit_max`, KiB/s (md.rst).
pub const KERNEL_DEFAULT_MAX: u64 = 200_000;
/// The lowest value `sync_speed_min` and `sync_speed_max` accept: the kernel rejects 0 with
/// EINVAL (`sync_min_store` / `sync_max_store` in `drivers/md/md.c`), so a per-array request of
/// 0 is written as 1.
pub const ARRAY_MIN_FLOOR: u64 = 1;
/// Kernel default of `/proc/sys/dev/raid/sync_io_depth` (`sysctl_sync_io_depth` in
/// `drivers/md/md.c`, Linux 6.16+), resync requests in flight.
pub const KERNEL_DEFAULT_IO_DEPTH: u64 = 32;
/// The lowest `sync_io_depth` written: the per-array attribute rejects 0 with EINVAL
/// (`sync_io_depth_store`), and a global 0 would let no resync request through while the
/// array is busy, so a request of 0 is written as 1 on both.
pub const IO_DEPTH_FLOOR: u64 = 1;
/// The largest limit accepted: the kernel stores the global limits as C `int`.
pub const LIMIT_CEILING: u64 = i32::MAX as u64;
/// Who holds a lease; decides nothing but is shown and logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LeaseKind {
    /// The Debian installer (the udeb's partman hook, or a patched partman-md), via the CLI.
    Installer,
    /// A wipe job of this service.
    WipeJob,
    /// An admin at the CLI.
    Admin,
    /// A client of the D-Bus service.
    DbusClient,
}

impl LeaseKind {
    /// The serde / CLI spelling: `installer`, `wipe-job`, `admin`, `dbus-client`.
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseKind::Installer => "installer",
            LeaseKind::WipeJob => "wipe-job",
            LeaseKind::Admin => "admin",
            LeaseKind::DbusClient => "dbus-client",
        }
    }
}

impl fmt::Display for LeaseKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What keeps a lease (or a journaled change) alive. A lease whose owner is dead is dropped by
/// `reap`.
///
/// Serialized as `"none"`, `{process = {pid = 123, start-time = 4567}}`, `{pid = 123}` or
/// `{bus-name = ":1.42"}`. New records of a process are [`Owner::Process`] (see
/// `policy::process_owner`); [`Owner::Pid`] is what state files written before start times
/// hold, and what is recorded when `/proc/PID/stat` cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Owner {
    /// A process pinned against pid reuse: alive while `kill(pid, 0)` does not fail with ESRCH
    /// AND field 22 of `/proc/PID/stat` (start time, clock ticks since boot) is `start_time`.
    #[serde(rename_all = "kebab-case")]
    Process {
        /// The process id.
        pid: u32,
        /// Its start time, clock ticks since boot (`/proc/PID/stat` field 22, `proc(5)`).
        start_time: u64,
    },
    /// A bare process id (older state files; or the start time was unreadable): alive while
    /// `kill(pid, 0)` does not fail with ESRCH, as before start times were recorded; a reused
    /// pid keeps it alive.
    Pid(u32),
    /// A D-Bus peer: alive while it is on the bus (only the service can tell).
    BusName(String),
    /// Lives until released by name (or `restore`), or until its duration ends.
    None,
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The start time only pins the pid; people know processes by pid.
            Owner::Process { pid: p, .. } | Owner::Pid(p) => write!(f, "pid {p}"),
            Owner::BusName(n) => write!(f, "bus name {n}"),
            Owner::None => f.write_str("none (released by name)"),
        }
    }
}

impl Owner {
    /// The process id of a process owner ([`Owner::Process`] or [`Owner::Pid`]), else `None`.
    pub fn pid(&self) -> Option<u32> {
        match self {
            Owner::Process { pid, .. } | Owner::Pid(pid) => Some(*pid),
            Owner::BusName(_) | Owner::None => None,
        }
    }
}

/// Requested limits: speeds in KiB/s, the I/O depth in resync requests; `None` leaves that
/// knob to other leases (or untouched).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Wanted minimum resync speed, KiB/s (`speed_limit_min` / `sync_speed_min`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<u64>,
    /// Wanted maximum resync speed, KiB/s (`speed_limit_max` / `sync_speed_max`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u64>,
    /// Wanted resync I/O depth, requests in flight while the array is busy with other I/O
    /// (`sync_io_depth`, Linux 6.16+; kernel default 32): higher lets resync through faster,
    /// lower yields more. On a kernel without the knob the request is never written and is no
    /// error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_depth: Option<u64>,
}

impl Limits {
    /// True when no knob is requested.
    pub fn is_empty(&self) -> bool {
        self.min.is_none() && self.max.is_none() && self.io_depth.is_none()
    }

    /// The requested value for `bound` (KiB/s, or requests for [`Bound::IoDepth`]).
    pub fn get(&self, bound: Bound) -> Option<u64> {
        match bound {
            Bound::Min => self.min,
            Bound::Max => self.max,
            Bound::IoDepth => self.io_depth,
        }
    }
}

/// A request for resync priority. Holding it again under the same `holder` replaces the lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaseRequest {
    /// Unique name of the holder (`installer`, `wipe-job-3`, a bus name...).
    pub holder: String,
    /// What kind of client holds it.
    pub kind: LeaseKind,
    /// What keeps it alive.
    pub owner: Owner,
    /// Global limits (`/proc/sys/dev/raid/speed_limit_{min,max}`).
    #[serde(default)]
    pub global: Limits,
    /// Per-array limits (`/sys/block/<name>/md/sync_speed_{min,max}`), keyed by kernel name (`md0`).
    #[serde(default)]
    pub arrays: BTreeMap<String, Limits>,
}

/// Errors of the pure core: requests that can never be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoreError {
    /// The holder name is empty or too long or has control characters.
    #[error("invalid lease holder {0:?}: want 1-128 printable characters")]
    InvalidHolder(String),
    /// Not a kernel md array name (`md0`, `md127`, `md_d0`).
    #[error("invalid array name {0:?}: want md followed by letters, digits or '_'")]
    InvalidArray(String),
    /// A limit larger than the kernel's `int`.
    #[error("limit {value}{unit} for {knob} is larger than the kernel accepts ({max})", max = LIMIT_CEILING, unit = knob.unit())]
    LimitTooLarge {
        /// The knob it was meant for.
        knob: KnobId,
        /// The requested value, KiB/s.
        value: u64,
    },
    /// A pid that cannot name a live process (0, or above the kernel's `pid_t`).
    #[error("invalid owner pid {0}")]
    InvalidPid(u32),
    /// The lease asks for nothing.
    #[error("lease of {0:?} requests no limit")]
    EmptyLease(String),
    /// The same request asks for a minimum above its maximum.
    #[error("invalid argument: min {min} KiB/s is above max {max} KiB/s for {knob}")]
    MinAboveMax {
        /// The knob pair (the `min` one).
        knob: KnobId,
        /// Requested minimum, KiB/s.
        min: u64,
        /// Requested maximum, KiB/s.
        max: u64,
    },
    /// A holder in a scheme the service keeps for itself ([`super::holder::Holder`]): chosen by a
    /// caller, or a lease a front end may not end by name.
    #[error("lease holder {holder:?}: {why}")]
    ReservedHolder {
        /// The holder as given.
        holder: String,
        /// Why, and how such a lease ends.
        why: String,
    },
    /// A timed lease's duration (or end) beyond [`crate::units::MAX_DURATION_S`].
    #[error("lease of {holder:?}: {source}")]
    DurationTooLong {
        /// The holder.
        holder: String,
        /// The duration asked for.
        source: crate::units::DurationTooLong,
    },
    /// The adapter did not provide a reading for a knob a lease targets (a bug in the adapter).
    #[error("no reading for {0}")]
    MissingReading(KnobId),
}

/// Which resync knob: a side of the speed window, or the I/O depth inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bound {
    /// `speed_limit_min` / `sync_speed_min`, KiB/s.
    Min,
    /// `speed_limit_max` / `sync_speed_max`, KiB/s.
    Max,
    /// `sync_io_depth` (global and per array, Linux 6.16+): how many resync requests md keeps
    /// in flight while the array is busy and the speed is between min and max. Optional: a
    /// kernel without it never sees it written.
    IoDepth,
}

impl Bound {
    /// `min`, `max` or `io_depth` (the option and field name).
    pub fn as_str(self) -> &'static str {
        match self {
            Bound::Min => "min",
            Bound::Max => "max",
            Bound::IoDepth => "io_depth",
        }
    }

    /// Every knob kind, in state-file order.
    pub const ALL: [Bound; 3] = [Bound::Min, Bound::Max, Bound::IoDepth];

    /// The file name: `speed_limit_min` (global) / `sync_speed_min` (array), and
    /// `sync_io_depth` for both.
    fn file(self, array: bool) -> &'static str {
        match (self, array) {
            (Bound::Min, false) => "speed_limit_min",
            (Bound::Max, false) => "speed_limit_max",
            (Bound::Min, true) => "sync_speed_min",
            (Bound::Max, true) => "sync_speed_max",
            (Bound::IoDepth, _) => "sync_io_depth",
        }
    }
}

/// One kernel knob. Displayed (and stored in the state file) as `speed_limit_min`,
/// `sync_io_depth`, `md0/sync_speed_min` or `md0/sync_io_depth`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KnobId {
    /// `/proc/sys/dev/raid/speed_limit_{min,max}` or `sync_io_depth`.
    Global(Bound),
    /// `/sys/block/<array>/md/sync_speed_{min,max}` or `sync_io_depth`.
    Array {
        /// Kernel name, validated by [`valid_array_name`].
        array: String,
        /// Which knob of the array.
        bound: Bound,
    },
}

impl KnobId {
    /// The absolute kernel path (resolve it under a `Root`).
    pub fn kernel_path(&self) -> String {
        match self {
            KnobId::Global(b) => crate::sysfs::global_knob_kernel_path(b.file(false)),
            KnobId::Array { array, bound } => {
                crate::sysfs::array_attr_kernel_path(array, bound.file(true))
            }
        }
    }

    /// Which knob of its place.
    pub fn bound(&self) -> Bound {
        match self {
            KnobId::Global(b) | KnobId::Array { bound: b, .. } => *b,
        }
    }

    /// True for a knob some kernels lack (`sync_io_depth` before Linux 6.16): a missing file is
    /// then "not on this kernel" — never written, never an error — rather than a missing md
    /// driver or array.
    pub fn optional(&self) -> bool {
        self.bound() == Bound::IoDepth
    }

    /// The unit after a value of this knob in messages: ` KiB/s`, or nothing for the I/O depth
    /// (a count of requests).
    pub fn unit(&self) -> &'static str {
        match self.bound() {
            Bound::Min | Bound::Max => " KiB/s",
            Bound::IoDepth => "",
        }
    }

    /// True for per-array knobs, which read `N (local)` / `N (system)` and accept `system`.
    pub fn is_array(&self) -> bool {
        matches!(self, KnobId::Array { .. })
    }

    /// The value actually written for a wanted value: per-array limits (min and max) are raised
    /// to [`ARRAY_MIN_FLOOR`] because the kernel rejects 0 for both; the global limits accept 0;
    /// `sync_io_depth` is raised to [`IO_DEPTH_FLOOR`] everywhere.
    pub fn writable(&self, wanted: u64) -> u64 {
        match self {
            _ if self.bound() == Bound::IoDepth => wanted.max(IO_DEPTH_FLOOR),
            KnobId::Array { .. } => wanted.max(ARRAY_MIN_FLOOR),
            KnobId::Global(_) => wanted,
        }
    }
}

impl fmt::Display for KnobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KnobId::Global(b) => f.write_str(b.file(false)),
            KnobId::Array { array, bound } => write!(f, "{array}/{}", bound.file(true)),
        }
    }
}

impl std::str::FromStr for KnobId {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let file = |name: &str, array: bool| {
            Bound::ALL
                .into_iter()
                .find(|b| b.file(array) == name)
                .ok_or_else(|| format!("unknown knob {s:?}"))
        };
        match s.split_once('/') {
            None => Ok(KnobId::Global(file(s, false)?)),
            Some((array, rest)) => {
                let bound = file(rest, true)?;
                if !valid_array_name(array) {
                    return Err(format!("invalid array name in knob {s:?}"));
                }
                Ok(KnobId::Array {
                    array: array.to_string(),
                    bound,
                })
            }
        }
    }
}

/// True for kernel md array names: `md` followed by 1-29 ASCII letters, digits or `_`
/// (`md0`, `md127`, `md_d0`, `md_home`). Rejects anything that could leave `/sys/block`.
pub fn valid_array_name(name: &str) -> bool {
    name.len() > 2
        && name.len() <= 32
        && name.starts_with("md")
        && name[2..]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The longest lease holder name, bytes.
pub const MAX_HOLDER_BYTES: usize = 128;

/// 1-[`MAX_HOLDER_BYTES`] bytes without control characters: the rule for every lease holder in
/// the state file (the schemes are [`super::holder::Holder`]'s).
pub fn valid_holder_text(text: &str) -> bool {
    !text.is_empty() && text.len() <= MAX_HOLDER_BYTES && !text.chars().any(char::is_control)
}

/// Checks a lease request: holder 1-128 printable chars, array names valid, limits within the
/// kernel's `int`, at least one limit.
pub fn validate(req: &LeaseRequest) -> Result<(), CoreError> {
    if !valid_holder_text(&req.holder) {
        return Err(CoreError::InvalidHolder(req.holder.clone()));
    }
    if let Some(p) = req.owner.pid() {
        if p == 0 || p > i32::MAX as u32 {
            return Err(CoreError::InvalidPid(p));
        }
    }
    let check = |knob: KnobId, v: Option<u64>| match v {
        Some(value) if value > LIMIT_CEILING => Err(CoreError::LimitTooLarge { knob, value }),
        _ => Ok(()),
    };
    let ordered = |knob: KnobId, l: &Limits| match (l.min, l.max) {
        (Some(min), Some(max)) if min > max => Err(CoreError::MinAboveMax { knob, min, max }),
        _ => Ok(()),
    };
    for bound in Bound::ALL {
        check(KnobId::Global(bound), req.global.get(bound))?;
    }
    ordered(KnobId::Global(Bound::Min), &req.global)?;
    for (array, l) in &req.arrays {
        if !valid_array_name(array) {
            return Err(CoreError::InvalidArray(array.clone()));
        }
        ordered(
            KnobId::Array {
                array: array.clone(),
                bound: Bound::Min,
            },
            l,
        )?;
        for bound in Bound::ALL {
            let knob = KnobId::Array {
                array: array.clone(),
                bound,
            };
            check(knob, l.get(bound))?;
        }
    }
    if req.global.is_empty() && req.arrays.values().all(Limits::is_empty) {
        return Err(CoreError::EmptyLease(req.holder.clone()));
    }
    Ok(())
}
