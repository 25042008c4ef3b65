//! Fuzzes config fragments (TOML): parsing any text and applying it over the defaults never
//! panics; an applied fragment leaves a valid config. Body: common/checks.rs `config_fragment`.
#![no_main]

#[path = "common/checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::config_fragment(data));
