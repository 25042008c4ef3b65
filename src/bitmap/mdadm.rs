//! The one adapter that runs mdadm: `mdadm --grow --bitmap=internal /dev/<array>`. mdadm does
//! the superblock work (room for the bitmap, the write to `md/bitmap/location`); mdpilot never
//! does it itself.
//!
//! The program is `mdadm` found on `PATH` (`/sbin` in the installer, `/usr/sbin` under the
//! shipped unit), or what `MDPILOT_MDADM` names: the tests point it at a stand-in script that
//! records its argv, since the build host has no md driver; the VM tier (`tests/vm`) runs the
//! real one on real arrays.

use crate::host::Root;
use std::process::Command;

/// The environment variable naming the mdadm program (tests).
pub const MDADM_ENV: &str = "MDPILOT_MDADM";

/// Why mdadm did not add the bitmap.
#[derive(Debug, thiserror::Error)]
pub enum MdadmError {
    /// The program could not be started (not installed, not executable).
    #[error("cannot run {program}")]
    Spawn {
        /// What was run.
        program: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// mdadm ran and failed; `stderr` is its message (`Cannot add bitmap while array is
    /// resyncing`, `bitmap already present`...).
    #[error("{program} --grow --bitmap=internal {device} failed ({status}): {stderr}")]
    Failed {
        /// What was run.
        program: String,
        /// The array's device node.
        device: String,
        /// The exit status as printed.
        status: String,
        /// mdadm's message, trimmed (at most 2000 characters).
        stderr: String,
    },
}

/// The mdadm program: [`MDADM_ENV`] where set and not empty, else `mdadm`.
pub fn program() -> String {
    std::env::var(MDADM_ENV)
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "mdadm".to_string())
}

/// Runs `mdadm --grow --bitmap=internal /dev/<array>` (`array` is the kernel name, `md0`) and
/// waits for it. Blocking: the service runs it on a blocking worker. Under a test root (not
/// `/`) the child gets `MDPILOT_ROOT=<root>`, so a stand-in can change the tree as md would
/// (mdadm itself ignores it).
///
/// Errors: [`MdadmError::Spawn`] when it cannot start, [`MdadmError::Failed`] when it exits
/// non-zero or is killed.
pub fn grow_bitmap_internal(root: &Root, array: &str) -> Result<(), MdadmError> {
    let program = program();
    let device = format!("/dev/{array}");
    let mut cmd = Command::new(&program);
    if !root.is_system() {
        cmd.env("MDPILOT_ROOT", root.path("/"));
    }
    let out = cmd
        .args(["--grow", "--bitmap=internal", &device])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|source| MdadmError::Spawn {
            program: program.clone(),
            source,
        })?;
    if out.status.success() {
        return Ok(());
    }
    let stderr: String = String::from_utf8_lossy(&out.stderr)
        .trim()
        .chars()
        .take(2000)
        .collect();
    Err(MdadmError::Failed {
        program,
        device,
        status: out.status.to_string(),
        stderr,
    })
}
