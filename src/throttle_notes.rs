//! The throttles' runtime notes: what the check throttle ([`crate::check::throttle`]) and the
//! resync throttle ([`crate::resync_throttle`]) decided last, one [`Note`] per array, kept as a
//! JSON object by kernel name in a file beside the policy's state file (default
//! `/run/mdpilot/<name>`), gone at reboot (the controllers start afresh). One owner per file:
//! `check-throttle.json` is the check throttle's, `resync-throttle.json` the resync throttle's;
//! `check status`, `mdpilot status`, the D-Bus Array and the metrics only [`load`].

use crate::config::Config;
use crate::host::Root;
use crate::pressure::Note;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The notes of one throttle, by array kernel name.
pub type Notes = BTreeMap<String, Note>;

/// One throttle's notes file, by its name beside the policy's state file: each throttle owns
/// one as a constant (`check-throttle.json`, `resync-throttle.json`).
#[derive(Debug, Clone, Copy)]
pub struct NotesFile(pub &'static str);

impl NotesFile {
    /// The file beside the policy's state file (`[policy] state_path`), under `root`.
    pub fn path(self, root: &Root, config: &Config) -> PathBuf {
        path(root, config, self.0)
    }

    /// The notes; none when the file is missing or does not parse ([`load`]).
    pub fn load(self, root: &Root, config: &Config) -> Notes {
        load(root, config, self.0)
    }

    /// Replaces the file with `notes`, or removes it when there are none ([`save`]).
    pub fn save(self, root: &Root, config: &Config, notes: &Notes) {
        save(root, config, self.0, notes);
    }
}

/// The file `name` beside the policy's state file (`[policy] state_path`), under `root`.
pub fn path(root: &Root, config: &Config, name: &str) -> PathBuf {
    root.path(&config.policy.state_path).with_file_name(name)
}

/// The notes in `name`; none when the file is missing or does not parse (a runtime file: the
/// next decision writes it again).
pub fn load(root: &Root, config: &Config, name: &str) -> Notes {
    std::fs::read_to_string(path(root, config, name))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// Replaces `name` with `notes` atomically (mode 0644), or removes it when there are none.
/// Failures are logged, not returned: the next look of the service writes it again.
pub fn save(root: &Root, config: &Config, name: &str, notes: &Notes) {
    let path = path(root, config, name);
    let r = if notes.is_empty() {
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    } else {
        serde_json::to_vec(notes)
            .map_err(std::io::Error::other)
            .and_then(|t| {
                std::fs::create_dir_all(path.parent().unwrap_or(std::path::Path::new("/")))?;
                crate::atomic::write(&path, &t, 0o644)
            })
    };
    if let Err(e) = r {
        tracing::warn!("{}: {e}", path.display());
    }
}
