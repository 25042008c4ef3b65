//! Fuzzes the policy state file parser: any text parses or is refused without panicking, and a
//! state that parses renders and parses back to the same state. Body: common/checks.rs
//! `state_file`.
#![no_main]

#[path = "common/checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::state_file(data));
