//! Fuzzes the /proc/mdstat parser: any bytes must parse without panicking, and every reported
//! error must point at a line of the input. Seed the corpus with tests/fixtures/mdstat/*.txt:
//!   mkdir -p fuzz/corpus/mdstat && cp tests/fixtures/mdstat/*.txt fuzz/corpus/mdstat/
//!   cargo +nightly fuzz run mdstat
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let stat = mdpilot::mdstat::parse(&text);
    let lines = text.split('\n').count();
    for e in &stat.errors {
        assert!(e.line >= 1 && e.line <= lines);
    }
    // The JSON form must always serialize (no NaN or other unrepresentable values).
    serde_json_check(&stat);
});

fn serde_json_check(stat: &mdpilot::model::MdStat) {
    for a in &stat.arrays {
        if let Some(s) = &a.sync {
            assert!(s.percent.is_none_or(f64::is_finite));
            assert!(s.finish_min.is_none_or(f64::is_finite));
        }
    }
}
