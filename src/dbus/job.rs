//! Wipe jobs on the bus. Placeholder: issue 5 (the wipe engine) fills in `StartWipe`; until then
//! the method authorizes the caller, validates the device and returns `Failed`.

use super::errors::{Error, Result};

/// Checks `StartWipe`'s arguments and answers that wipe jobs are not available yet.
///
/// Errors: `InvalidArgument` for an empty device or unknown options; `Failed` otherwise.
pub fn start_wipe(device: &str, options: &super::manager::Options) -> Result<String> {
    if device.is_empty() {
        return Err(Error::InvalidArgument("StartWipe: empty device".into()));
    }
    if let Some(k) = options.keys().next() {
        return Err(Error::InvalidArgument(format!(
            "StartWipe: unknown option {k:?}"
        )));
    }
    Err(Error::Failed(format!(
        "StartWipe {device}: wipe jobs are not available in this build yet"
    )))
}
