//! Replays every input kept under tests/fuzz_regressions/<target>/ (crashes the fuzzers found,
//! plus a few hand-made edge cases) through the same body as the fuzz target
//! (fuzz/fuzz_targets/common/checks.rs), on stable, in the normal `cargo test`. The D-Bus targets'
//! inputs are in wire form (`D` + a serialized `a{sv}`; see fuzz/fuzz_targets/common/options.rs).
//!
//! With MDPILOT_WRITE_FUZZ_SEEDS=1, `seeds_for_the_dbus_targets` (re)writes fuzz/seeds/dbus_*/
//! (wire-form dicts of every option, which libFuzzer cannot easily invent from nothing).

#[path = "../../fuzz/fuzz_targets/common/checks.rs"]
mod checks;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use zbus::zvariant::{OwnedValue, Value};

fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz_regressions")
        .join(target);
    let mut out: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_file() && p.extension().map_or(true, |x| x != "md"))
                .map(|p| {
                    let b = std::fs::read(&p).unwrap();
                    (p, b)
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

fn replay(target: &str, f: impl Fn(&[u8])) {
    for (path, data) in inputs(target) {
        eprintln!("replaying {}", path.display());
        f(&data);
    }
}

#[test]
fn mdstat() {
    replay("mdstat", checks::mdstat);
}

#[test]
fn sysfs_values() {
    replay("sysfs_values", checks::sysfs_values);
}

#[test]
fn sysfs_tree() {
    let base = std::env::temp_dir().join(format!("mdpilot-fuzz-regress-{}", std::process::id()));
    replay("sysfs_tree", |d| checks::sysfs_tree(&base, d));
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn config_fragment() {
    replay("config_fragment", checks::config_fragment);
}

#[test]
fn state_file() {
    replay("state_file", checks::state_file);
}

#[test]
fn dbus_acquire() {
    replay("dbus_acquire", |d| {
        let opts = checks::wire_options(d).expect("a wire-form a{sv} (`D` + bytes)");
        checks::dbus_acquire(&opts, checks::install_of(d));
    });
}

#[test]
fn dbus_wipe_options() {
    replay("dbus_wipe_options", |d| {
        let opts = checks::wire_options(d).expect("a wire-form a{sv} (`D` + bytes)");
        checks::dbus_wipe_options(&opts);
    });
}

fn dict(entries: Vec<(&str, Value<'static>)>) -> checks::Options {
    entries
        .into_iter()
        .map(|(k, v)| (k.to_string(), OwnedValue::try_from(v).unwrap()))
        .collect()
}

#[test]
fn wire_form_round_trips() {
    let d = dict(vec![
        ("min", Value::from(5u64)),
        ("kind", Value::from("admin")),
    ]);
    assert_eq!(checks::wire_options(&checks::to_wire(&d)), Some(d));
}

#[test]
fn seeds_for_the_dbus_targets() {
    let arrays: HashMap<String, (u64, u64)> = [("md0".to_string(), (1000, 0))].into();
    let acquire = [
        dict(vec![]),
        dict(vec![
            ("min", Value::from(0u64)),
            ("max", Value::from(5000u64)),
        ]),
        dict(vec![
            ("min", Value::from(7u32)),
            ("kind", Value::from("installer")),
        ]),
        dict(vec![
            ("holder", Value::from("installer")),
            ("kind", Value::from("installer")),
        ]),
        dict(vec![
            ("arrays", Value::from(arrays)),
            ("pid", Value::from(1u32)),
        ]),
        dict(vec![("max", Value::from(-1i64))]),
    ];
    let wipe = [
        dict(vec![]),
        dict(vec![
            ("method", Value::from("random")),
            ("verify", Value::from(true)),
        ]),
        dict(vec![("keep-resync", Value::from(false))]),
        dict(vec![("method", Value::from(1u32))]),
    ];
    for d in &acquire {
        checks::dbus_acquire(d, (0, None));
    }
    for d in &wipe {
        checks::dbus_wipe_options(d);
    }
    if std::env::var_os("MDPILOT_WRITE_FUZZ_SEEDS").is_none() {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds");
    for (target, dicts) in [
        ("dbus_acquire", &acquire[..]),
        ("dbus_wipe_options", &wipe[..]),
    ] {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).unwrap();
        for (i, d) in dicts.iter().enumerate() {
            std::fs::write(dir.join(format!("wire-{i}")), checks::to_wire(d)).unwrap();
        }
    }
}
