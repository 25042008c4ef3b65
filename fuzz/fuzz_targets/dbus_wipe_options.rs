//! Fuzzes StartWipe's option dictionary: any `a{sv}` is accepted or refused with
//! InvalidArgument, never a panic; an accepted dict holds only known keys.
//!
//! Calls: mdpilot::dbus::job::parse_options.
#![no_main]

#[path = "common/options.rs"]
mod common;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let known = ["method", "verify", "keep-resync"];
    let Some(opts) = common::options(data, &known) else {
        return;
    };
    if mdpilot::dbus::job::parse_options(&opts).is_ok() {
        assert!(opts.keys().all(|k| known.contains(&k.as_str())));
    }
});
