//! Shared helpers of the policy tests: a fake kernel tree under a temporary root.
//!
//! Regular files cannot emulate `system` semantics: writing `system` to a per-array file leaves
//! the text `system`, which the tests check (and [`FakeTree::settle`] turns back into
//! `N (system)` the way the kernel would show it).
#![allow(dead_code)]

use mdpilot::host::Root;
use mdpilot::policy::{Policy, PolicySettings};
use std::path::PathBuf;

/// A temporary root with `/proc/sys/dev/raid/speed_limit_{min,max}` = 1000 / 200000 and
/// `/sys/block/md0/md/sync_speed_{min,max}` = `1000 (system)` / `200000 (system)`.
pub struct FakeTree {
    pub dir: tempfile::TempDir,
}

impl FakeTree {
    pub fn new() -> Self {
        let t = FakeTree {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(t.root().proc("sys/dev/raid")).unwrap();
        std::fs::create_dir_all(t.root().sys("block/md0/md")).unwrap();
        t.set("/proc/sys/dev/raid/speed_limit_min", "1000\n");
        t.set("/proc/sys/dev/raid/speed_limit_max", "200000\n");
        t.set("/sys/block/md0/md/sync_speed_min", "1000 (system)\n");
        t.set("/sys/block/md0/md/sync_speed_max", "200000 (system)\n");
        t
    }

    pub fn root(&self) -> Root {
        Root::new(self.dir.path())
    }

    pub fn path(&self, abs: &str) -> PathBuf {
        self.root().path(abs)
    }

    pub fn set(&self, abs: &str, text: &str) {
        std::fs::write(self.path(abs), text).unwrap();
    }

    /// The file's text, trimmed.
    pub fn get(&self, abs: &str) -> String {
        std::fs::read_to_string(self.path(abs))
            .unwrap()
            .trim()
            .to_string()
    }

    pub fn gmin(&self) -> String {
        self.get("/proc/sys/dev/raid/speed_limit_min")
    }

    pub fn gmax(&self) -> String {
        self.get("/proc/sys/dev/raid/speed_limit_max")
    }

    pub fn amin(&self) -> String {
        self.get("/sys/block/md0/md/sync_speed_min")
    }

    pub fn amax(&self) -> String {
        self.get("/sys/block/md0/md/sync_speed_max")
    }

    /// Emulates the kernel after a `system` write: the file reads `N (system)` again.
    pub fn settle(&self) {
        for (f, v) in [
            ("/sys/block/md0/md/sync_speed_min", "1000"),
            ("/sys/block/md0/md/sync_speed_max", "200000"),
        ] {
            if self.get(f) == "system" {
                self.set(f, &format!("{v} (system)\n"));
            }
        }
    }

    pub fn state_path(&self) -> PathBuf {
        self.path("/run/mdpilot/policy.toml")
    }

    pub fn settings(&self) -> PolicySettings {
        PolicySettings {
            state_path: self.state_path(),
            install_min: 0,
            install_max: None,
        }
    }

    pub fn policy(&self) -> Policy {
        Policy::new(self.root(), self.settings())
    }
}
