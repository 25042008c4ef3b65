//! Fuzzes StartWipe's option dictionary (built by common/options.rs from the input): any `a{sv}`
//! is accepted or refused with InvalidArgument, never a panic; an accepted dict holds only known
//! keys. Body: common/checks.rs `dbus_wipe_options`.
//! Set MDPILOT_FUZZ_WIRE=DIR to write each input's dict in wire form (for a regression file).
#![no_main]

#[path = "common/checks.rs"]
mod checks;
#[path = "common/options.rs"]
mod options;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some(opts) = options::options(data, checks::WIPE_KEYS) else {
        return;
    };
    options::keep_wire(&opts, (0, None));
    checks::dbus_wipe_options(&opts);
});
