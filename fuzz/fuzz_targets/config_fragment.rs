//! Fuzzes config fragments (TOML): parsing any text and applying it over the defaults never
//! panics; an applied fragment leaves a valid config (absolute state path, interval >= 1).
//!
//! Calls: mdpilot::config::ConfigFragment::parse, mdpilot::config::Config::{default, apply}.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mdpilot::config::{Config, ConfigFragment};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("/etc/mdpilot/config.d/fuzz.toml");
    let Ok(frag) = ConfigFragment::parse(text, path) else {
        return;
    };
    let mut c = Config::default();
    if c.apply(&frag, path).is_ok() {
        assert!(c.policy.state_path.is_absolute());
        assert!(c.service.progress_interval_ms >= 1);
    }
});
