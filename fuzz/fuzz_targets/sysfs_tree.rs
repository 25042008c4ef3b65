//! Fuzzes the sysfs reading layer end to end: the input, split at NUL bytes, becomes the text of
//! an array's sysfs files (and the global limits) in a temporary tree; reading it never panics.
//!
//! Calls: mdpilot::host::Root::new, mdpilot::sysfs::{read_array, read_speed_limits} (which reach
//! the private parse_word, parse_raid_disks, parse_sync_speed, parse_state, parse_slot).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mdpilot::host::Root;
use std::path::PathBuf;
use std::sync::OnceLock;

const FILES: &[&str] = &[
    "sys/block/md0/md/array_state",
    "sys/block/md0/md/level",
    "sys/block/md0/md/raid_disks",
    "sys/block/md0/md/degraded",
    "sys/block/md0/md/sync_action",
    "sys/block/md0/md/sync_completed",
    "sys/block/md0/md/sync_speed",
    "sys/block/md0/md/sync_speed_min",
    "sys/block/md0/md/sync_speed_max",
    "sys/block/md0/md/chunk_size",
    "sys/block/md0/md/dev-sda/state",
    "sys/block/md0/md/dev-sda/slot",
    "sys/block/md0/md/dev-sda/errors",
    "sys/block/md0/queue/logical_block_size",
    "proc/sys/dev/raid/speed_limit_min",
    "proc/sys/dev/raid/speed_limit_max",
];

fn base() -> &'static PathBuf {
    static BASE: OnceLock<PathBuf> = OnceLock::new();
    BASE.get_or_init(|| {
        let b = std::env::temp_dir().join(format!("mdpilot-fuzz-sysfs-{}", std::process::id()));
        for f in FILES {
            std::fs::create_dir_all(b.join(f).parent().unwrap()).unwrap();
        }
        b
    })
}

fuzz_target!(|data: &[u8]| {
    let b = base();
    let mut parts = data.split(|&c| c == 0);
    for f in FILES {
        std::fs::write(b.join(f), parts.next().unwrap_or(b"")).unwrap();
    }
    let root = Root::new(b.clone());
    let a = mdpilot::sysfs::read_array(&root, "md0");
    assert!(a.members.len() <= 1);
    let _ = mdpilot::sysfs::read_speed_limits(&root);
});
