//! Fuzzes the policy state file parser: any text parses or is refused without panicking, and a
//! state that parses renders and parses back to the same state (what `save` writes, `load`
//! reads).
//!
//! Calls: mdpilot::policy::state::{from_toml, to_toml}.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mdpilot::policy::state::{from_toml, to_toml};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(state) = from_toml(text) {
        let again = to_toml(&state);
        assert_eq!(from_toml(&again).as_ref(), Ok(&state), "round trip of\n{again}");
    }
});
