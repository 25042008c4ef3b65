//! Fuzzes the pure sysfs/procfs value parsers with any text: no panic, and what parses prints
//! back to the same value. Body and the crate functions it calls: common/checks.rs `sysfs_values`.
#![no_main]

#[path = "common/checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::sysfs_values(data));
