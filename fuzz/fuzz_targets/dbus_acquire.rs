//! Fuzzes AcquirePriority's option dictionary (built by common/options.rs from the input): any
//! `a{sv}` is accepted or refused with InvalidArgument, never a panic; what is accepted keeps
//! min <= max, no pid 0, no empty holder. Body: common/checks.rs `dbus_acquire`.
//! Set MDPILOT_FUZZ_WIRE=DIR to write each input's dict in wire form (for a regression file).
#![no_main]

#[path = "common/checks.rs"]
mod checks;
#[path = "common/options.rs"]
mod options;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some(opts) = options::options(data, checks::ACQUIRE_KEYS) else {
        return;
    };
    options::keep_wire(&opts, checks::install_of(data));
    checks::dbus_acquire(&opts, checks::install_of(data));
});
