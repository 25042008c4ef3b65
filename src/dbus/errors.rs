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
    /// The caller is neither uid 0 nor authorized by polkit for the method's action
    /// (`org.mdpilot.MdPilot1.manage-priority` or `org.mdpilot.MdPilot1.wipe`, see
    /// [`super::auth`]), or polkit is unreachable.
    NotAuthorized(String),
    /// No array by that name.
    NoSuchArray(String),
    /// The resource is in use (another job on the device, a lease id taken).
    Busy(String),
    /// A bad argument: unknown option, wrong type, min above max.
    InvalidArgument(String),
    /// The operation failed (the message gives the file and the reason).
    Failed(String),
    /// The job was cancelled: `Job.Cancel` on a job whose cancellation is already under way
    /// or done.
    Cancelled(String),
    /// The device cannot do what was asked (e.g. `method` `discard` on a device whose
    /// `queue/discard_max_bytes` is 0).
    NotSupported(String),
}

/// Every error name the service returns, with its meaning: the list documented in the
/// introspection XML files (see [`xml_doc`]) and checked against [`Error`] by the tests.
pub const ERRORS: &[(&str, &str)] = &[
    (
        "NotAuthorized",
        "the caller is neither uid 0 nor authorized by polkit for the method's action \
         (org.mdpilot.MdPilot1.manage-priority, org.mdpilot.MdPilot1.wipe), or polkit is unreachable",
    ),
    ("NoSuchArray", "no array by that name"),
    (
        "Busy",
        "the resource is in use: a job already runs on the device, the device is mounted, \
         swap, held or backs /, or the kernel answered EBUSY",
    ),
    (
        "InvalidArgument",
        "a bad argument: unknown option, wrong type, min above max, not a block device",
    ),
    (
        "Failed",
        "the operation failed; the message names the file or device and the reason",
    ),
    (
        "Cancelled",
        "Job.Cancel on a job whose cancellation is already under way or done",
    ),
    (
        "NotSupported",
        "the device cannot do it (e.g. method discard on a device without discard)",
    ),
];

/// The error prefix: every error is `org.mdpilot.MdPilot1.Error.<Name>`.
pub const ERROR_PREFIX: &str = "org.mdpilot.MdPilot1.Error";

/// The XML comment block that documents [`ERRORS`] and the authorization rule (polkit actions,
/// `auth.no_user_interaction`) in each committed introspection file (`dbus/*.xml`, after the
/// interface; introspection itself lists neither). Lines end in `\n`; the first is `  <!--`.
pub fn xml_doc() -> String {
    let mut s = String::from(
        "  <!--\n   Errors (D-Bus error names; the message names the array or device and the reason):\n",
    );
    for (name, meaning) in ERRORS {
        let one_line: String = meaning.split_whitespace().collect::<Vec<_>>().join(" ");
        s.push_str(&format!("     {ERROR_PREFIX}.{name}: {one_line}\n"));
    }
    s.push_str(
        "   Authorization: uid 0, or polkit org.mdpilot.MdPilot1.manage-priority (speed limits,\n     \
         leases, sync actions) or org.mdpilot.MdPilot1.wipe (StartWipe, Cancel of another uid's\n     \
         job). Every a{sv} options argument also takes auth.no_user_interaction (b): true = no\n     \
         polkit prompt, NotAuthorized instead.\n",
    );
    s.push_str("   -->\n");
    s
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
            Error::Cancelled(m) => Error::Cancelled(add(m)),
            Error::NotSupported(m) => Error::NotSupported(add(m)),
        }
    }
}

/// A policy error on the bus, by what it means for the caller: a request the policy can never
/// apply is `InvalidArgument`; a per-array knob that does not exist (the array is gone or
/// stopped) `NoSuchArray`; a kernel write refused with EBUSY, and an operation the caller
/// refused under the lock (RestoreLimits while a wipe holds a freeze), `Busy`; anything else (state
/// file, unreadable knobs, failed writes) `Failed`. The message is the error's own text (add
/// the method with [`Error::context`]).
impl From<PolicyError> for Error {
    fn from(e: PolicyError) -> Error {
        let msg = e.to_string();
        match &e {
            PolicyError::Invalid(CoreError::MissingReading(_)) => Error::Failed(msg),
            PolicyError::Invalid(_) => Error::InvalidArgument(msg),
            PolicyError::Refused(_) => Error::Busy(msg),
            PolicyError::Read(KnobError::Missing { array: true, .. }) => Error::NoSuchArray(msg),
            PolicyError::Write {
                source: KnobError::Write { source, .. },
                ..
            } if source.raw_os_error() == Some(libc::EBUSY) => Error::Busy(msg),
            _ => Error::Failed(msg),
        }
    }
}

/// A wipe error on the bus: refusals (mounted, swap, holders, backs `/`) are `Busy`, methods
/// the device cannot do (discard without discard, zeroout without offload) `NotSupported`, bad
/// devices and bad usage `InvalidArgument`, the rest `Failed`. The message
/// is the whole error chain, naming the device and the reason (add the method with
/// [`Error::context`]).
impl From<WipeError> for Error {
    fn from(e: WipeError) -> Error {
        let msg = crate::error::error_chain(&e);
        match e {
            WipeError::Refused { .. } => Error::Busy(msg),
            WipeError::Unsupported { .. } => Error::NotSupported(msg),
            WipeError::Cancelled { .. } => Error::Cancelled(msg),
            WipeError::Probe { .. } | WipeError::Usage(_) | WipeError::Untrusted { .. } => {
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
            Error::Cancelled(_) => "Cancelled",
            Error::NotSupported(_) => "NotSupported",
        }
    }

    #[test]
    fn every_error_is_documented_with_its_bus_name() {
        let all = [
            Error::NotAuthorized(String::new()),
            Error::NoSuchArray(String::new()),
            Error::Busy(String::new()),
            Error::InvalidArgument(String::new()),
            Error::Failed(String::new()),
            Error::Cancelled(String::new()),
            Error::NotSupported(String::new()),
        ];
        let documented: Vec<&str> = ERRORS.iter().map(|(n, _)| *n).collect();
        for e in &all {
            assert!(documented.contains(&name(e)), "{} undocumented", name(e));
            let bus = zbus::DBusError::name(e).to_string();
            assert_eq!(bus, format!("{ERROR_PREFIX}.{}", name(e)));
        }
        assert_eq!(
            documented.len(),
            all.len(),
            "ERRORS lists a name Error lacks"
        );
        let doc = xml_doc();
        assert!(doc.contains("org.mdpilot.MdPilot1.Error.NotSupported: the device"));
        // An XML comment may not hold "--" but at its ends.
        assert_eq!(doc.matches("--").count(), 2, "{doc}");
    }

    #[test]
    fn unsupported_wipes_are_not_supported() {
        let e = Error::from(WipeError::Unsupported {
            device: PathBuf::from("/dev/loop0"),
            op: "discard",
            detail: "discard_max_bytes is 0".into(),
        });
        assert_eq!(name(&e), "NotSupported");
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
