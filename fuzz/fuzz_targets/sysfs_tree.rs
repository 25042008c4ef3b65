//! Fuzzes the sysfs reading layer end to end: the input, split at NUL bytes, becomes the text of
//! an array's sysfs files (and the global limits) in a temporary tree; reading never panics.
//! Body and the crate functions it calls: common/checks.rs `sysfs_tree`.
#![no_main]

#[path = "common/checks.rs"]
mod checks;

use std::path::PathBuf;
use std::sync::OnceLock;

fn base() -> &'static PathBuf {
    static BASE: OnceLock<PathBuf> = OnceLock::new();
    BASE.get_or_init(|| {
        std::env::temp_dir().join(format!("mdpilot-fuzz-sysfs-{}", std::process::id()))
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::sysfs_tree(base(), data));
