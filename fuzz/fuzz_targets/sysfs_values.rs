//! Fuzzes the pure sysfs/procfs value parsers with any text: no panic, and what parses prints
//! back to the same value.
//!
//! Calls: mdpilot::sysfs::{parse_plain_u64, parse_sync_completed, parse_speed_limit,
//! action_word}, mdpilot::policy::knobs::parse_reading, mdpilot::policy::lease::KnobId::from_str
//! (the private parse_word/raid_disks/sync_speed/state/slot are reached by the sysfs_tree target).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mdpilot::model::SyncCompleted;
use mdpilot::policy::knobs::parse_reading;
use mdpilot::policy::lease::{Bound, KnobId};
use mdpilot::sysfs;

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    let s = s.as_ref();
    if let Some(n) = sysfs::parse_plain_u64(s) {
        assert_eq!(sysfs::parse_plain_u64(&n.to_string()), Some(n));
    }
    if let Some(SyncCompleted::Sectors { done, total }) = sysfs::parse_sync_completed(s) {
        let back = sysfs::parse_sync_completed(&format!("{done} / {total}"));
        assert_eq!(back, Some(SyncCompleted::Sectors { done, total }));
    }
    if let Some(l) = sysfs::parse_speed_limit(s) {
        let tag = if l.system { "system" } else { "local" };
        assert_eq!(
            sysfs::parse_speed_limit(&format!("{} ({tag})", l.kib_s)),
            Some(l)
        );
    }
    let _ = sysfs::action_word(s);
    let global = KnobId::Global(Bound::Min);
    let array = KnobId::Array {
        array: "md0".into(),
        bound: Bound::Max,
    };
    for knob in [&global, &array] {
        if let Some(r) = parse_reading(knob, s) {
            assert!(!r.system || knob.is_array(), "(system) on a global knob");
        }
    }
    if let Ok(k) = s.parse::<KnobId>() {
        assert_eq!(k.to_string().parse::<KnobId>().ok(), Some(k));
    }
});
