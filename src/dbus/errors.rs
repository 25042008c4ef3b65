//! Typed D-Bus errors: `org.mdpilot.MdPilot1.Error.<Variant>`, each carrying a message that names
//! the array/device and the reason.

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
