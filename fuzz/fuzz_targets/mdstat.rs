//! Fuzzes the /proc/mdstat parser: any bytes must parse without panicking, and every reported
//! error must point at a line of the input. Body: common/checks.rs `mdstat`.
//! Seeds: fuzz/seeds/mdstat/ (the fixtures); run: cargo +nightly fuzz run mdstat
#![no_main]

#[path = "common/checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::mdstat(data));
