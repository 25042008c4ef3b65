//! Typed D-Bus errors: `org.mdpilot.MdPilot1.Error.<Variant>`, each carrying a message that names
//! the array/device and the reason, and the mapping of the core's errors ([`PolicyError`],
//! [`WipeError`]) onto them.

use crate::policy::knobs::KnobError;
use crate::policy::{CoreError, PolicyError};
use crate::wipe::WipeError;
use zbus::DBusError;

/// Errors returned by the service's methods.
#[derive(Debug, DBusError)]
#[zbus(prefix = "org.mdpilot.MdPilot1.Error")]
pub enum Error {
    /// A zbus transport error (never sent as such; mapped by zbus to a generic error).
    #[zbus(error)]
    ZBus(zbus::Error),
    /// The caller is neither uid 0 nor authorized by polkit for `org.mdpilot.MdPilot1.manage`.
    NotAuthorized(String),
    /// No array by that name.
    NoSuchArray(String),
    /// The resource is in use (another job on the device, a lease id taken).
    Busy(String),
    /// A bad argument: unknown option, wrong type, min above max.
    InvalidArgument(String),
    /// The operation failed (the message gives the file and the reason).
    Failed(String),
}

/// Result of a D-Bus method.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The same error with `what` (the method, maybe with its array or device) in front of the
    /// message: `"{what}: {message}"`.
    pub fn context(self, what: &str) -> Error {
        let add = |m: String| format!("{what}: {m}");
        match self {
            Error::ZBus(e) => Error::ZBus(e),
            Error::NotAuthorized(m) => Error::NotAuthorized(add(m)),
            Error::NoSuchArray(m) => Error::NoSuchArray(add(m)),
            Error::Busy(m) => Error::Busy(add(m)),
            Error::InvalidArgument(m) => Error::InvalidArgument(add(m)),
            Error::Failed(m) => Error::Failed(add(m)),
        }
    }
}

/// A policy error on the bus, by what it means for the caller: a request the policy can never
/// apply is `InvalidArgument`; a per-array knob that does not exist (the array is gone or
/// stopped) `NoSuchArray`; a kernel write refused with EBUSY `Busy`; anything else (state
/// file, unreadable knobs, failed writes) `Failed`. The message is the error's own text (add
/// the method with [`Error::context`]).
impl From<PolicyError> for Error {
    fn from(e: PolicyError) -> Error {
        let msg = e.to_string();
        match &e {
            PolicyError::Invalid(CoreError::MissingReading(_)) => Error::Failed(msg),
            PolicyError::Invalid(_) => Error::InvalidArgument(msg),
            PolicyError::Read(KnobError::Missing { array: true, .. }) => Error::NoSuchArray(msg),
            PolicyError::Write {
                source: KnobError::Write { source, .. },
                ..
            } if source.raw_os_error() == Some(libc::EBUSY) => Error::Busy(msg),
            _ => Error::Failed(msg),
        }
    }
}

/// A wipe error on the bus: refusals (mounted, swap, holders, backs `/`) are `Busy`, bad
/// devices, unsupported methods and bad usage `InvalidArgument`, the rest `Failed`. The message
/// is the whole error chain, naming the device and the reason (add the method with
/// [`Error::context`]).
impl From<WipeError> for Error {
    fn from(e: WipeError) -> Error {
        let msg = crate::error::error_chain(&e);
        match e {
            WipeError::Refused { .. } => Error::Busy(msg),
            WipeError::Probe { .. } | WipeError::Unsupported { .. } | WipeError::Usage(_) => {
                Error::InvalidArgument(msg)
            }
            _ => Error::Failed(msg),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn name(e: &Error) -> &'static str {
        match e {
            Error::ZBus(_) => "ZBus",
            Error::NotAuthorized(_) => "NotAuthorized",
            Error::NoSuchArray(_) => "NoSuchArray",
            Error::Busy(_) => "Busy",
            Error::InvalidArgument(_) => "InvalidArgument",
            Error::Failed(_) => "Failed",
        }
    }

    #[test]
    fn policy_errors_keep_their_meaning() {
        let e = Error::from(PolicyError::Invalid(CoreError::InvalidPid(0)));
        assert_eq!(name(&e), "InvalidArgument");
        let e = Error::from(PolicyError::Read(KnobError::Missing {
            path: PathBuf::from("/sys/block/md9/md/sync_speed_min"),
            array: true,
        }));
        assert_eq!(name(&e), "NoSuchArray");
        let e = Error::from(PolicyError::Read(KnobError::Missing {
            path: PathBuf::from("/proc/sys/dev/raid/speed_limit_min"),
            array: false,
        }));
        assert_eq!(name(&e), "Failed");
        let write = |errno| PolicyError::Write {
            source: KnobError::Write {
                path: PathBuf::from("/sys/block/md0/md/sync_speed_min"),
                value: "5".into(),
                source: std::io::Error::from_raw_os_error(errno),
            },
            state_path: PathBuf::from("/run/mdpilot/policy.toml"),
            rolled_back: true,
        };
        assert_eq!(name(&Error::from(write(libc::EBUSY))), "Busy");
        assert_eq!(name(&Error::from(write(libc::EACCES))), "Failed");
    }

    #[test]
    fn context_prefixes_the_message() {
        let e = Error::from(PolicyError::Invalid(CoreError::InvalidPid(0))).context("X");
        let Error::InvalidArgument(m) = e else {
            panic!("{e:?}")
        };
        assert_eq!(m, "X: invalid lease request");
    }
}
