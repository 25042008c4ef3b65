//! Fuzzes AcquirePriority's option dictionary: any `a{sv}` is accepted or refused with
//! InvalidArgument, never a panic; what is accepted keeps min <= max everywhere and no pid 0.
//!
//! Calls: mdpilot::dbus::manager::parse_acquire (type mdpilot::dbus::manager::Options).
#![no_main]

#[path = "common/options.rs"]
mod common;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let known = ["min", "max", "arrays", "kind", "holder", "pid"];
    let Some(opts) = common::options(data, &known) else {
        return;
    };
    let install = (
        data.first().copied().map_or(0, u64::from),
        data.get(1).map(|&b| u64::from(b) + 256),
    );
    if let Ok(a) = mdpilot::dbus::manager::parse_acquire(&opts, install) {
        let ok = |l: &mdpilot::policy::lease::Limits| match (l.min, l.max) {
            (Some(mn), Some(mx)) => mn <= mx,
            _ => true,
        };
        assert!(ok(&a.global));
        assert!(a.arrays.values().all(ok));
        assert_ne!(a.pid, Some(0));
        assert_ne!(a.holder.as_deref(), Some(""));
    }
});
