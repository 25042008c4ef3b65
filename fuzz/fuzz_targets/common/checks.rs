//! The body of every fuzz target, shared with the stable replay of found inputs
//! (tests/it/fuzz_regressions.rs includes this file by path), so a regression input is fed to exactly
//! the same calls and assertions as the fuzzer feeds it. Uses only mdpilot, zbus and std.
//!
//! Crate functions called, per target (fix these paths when the code moves):
//! - mdstat: `mdpilot::mdstat::parse`
//! - sysfs_values: `mdpilot::model::{parse_plain_u64, SpeedLimit::parse, SyncAction::from}`,
//!   `mdpilot::vocab::SyncCompleted::parse`, `mdpilot::policy::knobs::parse_reading`,
//!   `mdpilot::policy::KnobId::{from_str, to_string, is_array}`
//! - sysfs_tree: `mdpilot::host::Root::new`, `mdpilot::sysfs::{read_array, read_speed_limits}`
//!   (reach the private `parse_word`, `parse_raid_disks`, `parse_sync_speed`, `parse_state`,
//!   `parse_slot`)
//! - config_fragment: `mdpilot::config::ConfigFragment::parse`, `mdpilot::config::Config::{default,
//!   apply}`
//! - state_file: `mdpilot::policy::state::{from_toml, to_toml}`
//! - dbus_acquire: `mdpilot::dbus::options::parse_acquire` (`Options` =
//!   `HashMap<String, OwnedValue>`)
//! - dbus_wipe_options: `mdpilot::dbus::options::parse_start_wipe`
#![allow(dead_code)]

use mdpilot::model::SyncCompleted;
use mdpilot::policy::{Bound, KnobId};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use zbus::zvariant::serialized::{Context, Data};
use zbus::zvariant::{OwnedValue, LE};

/// The `a{sv}` dict of a D-Bus method.
pub type Options = HashMap<String, OwnedValue>;

pub fn mdstat(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let stat = mdpilot::mdstat::parse(&text);
    let lines = text.split('\n').count();
    for e in &stat.errors {
        assert!(e.line >= 1 && e.line <= lines);
    }
    // The JSON form must always serialize (no NaN or other unrepresentable values).
    for a in &stat.arrays {
        if let Some(s) = &a.sync {
            assert!(s.percent.map_or(true, f64::is_finite));
            assert!(s.finish_min.map_or(true, f64::is_finite));
        }
    }
}

pub fn sysfs_values(data: &[u8]) {
    let s = String::from_utf8_lossy(data);
    let s = s.as_ref();
    if let Some(n) = mdpilot::model::parse_plain_u64(s) {
        assert_eq!(mdpilot::model::parse_plain_u64(&n.to_string()), Some(n));
    }
    if let Some(SyncCompleted::Sectors { done, total }) = SyncCompleted::parse(s) {
        let back = SyncCompleted::parse(&format!("{done} / {total}"));
        assert_eq!(back, Some(SyncCompleted::Sectors { done, total }));
    }
    if let Some(l) = mdpilot::model::SpeedLimit::parse(s) {
        let tag = if l.system { "system" } else { "local" };
        let back = mdpilot::model::SpeedLimit::parse(&format!("{} ({tag})", l.kib_s));
        assert_eq!(back, Some(l));
    }
    let _ = mdpilot::model::SyncAction::from(s);
    let global = KnobId::Global(Bound::Min);
    let array = KnobId::Array {
        array: "md0".into(),
        bound: Bound::Max,
    };
    for knob in [&global, &array] {
        if let Some(r) = mdpilot::policy::knobs::parse_reading(knob, s) {
            assert!(!r.system || knob.is_array(), "(system) on a global knob");
        }
    }
    if let Ok(k) = s.parse::<KnobId>() {
        assert_eq!(k.to_string().parse::<KnobId>().ok(), Some(k));
    }
}

/// Files of the sysfs_tree target, in the order the input's NUL-separated parts fill them.
pub const SYSFS_FILES: &[&str] = &[
    "sys/block/md0/md/array_state",
    "sys/block/md0/md/level",
    "sys/block/md0/md/raid_disks",
    "sys/block/md0/md/degraded",
    "sys/block/md0/md/sync_action",
    "sys/block/md0/md/sync_completed",
    "sys/block/md0/md/sync_speed",
    "sys/block/md0/md/sync_speed_min",
    "sys/block/md0/md/sync_speed_max",
    "sys/block/md0/md/chunk_size",
    "sys/block/md0/md/dev-sda/state",
    "sys/block/md0/md/dev-sda/slot",
    "sys/block/md0/md/dev-sda/errors",
    "sys/block/md0/queue/logical_block_size",
    "proc/sys/dev/raid/speed_limit_min",
    "proc/sys/dev/raid/speed_limit_max",
];

/// `base` must be a directory of the caller's own (created if missing, files overwritten).
pub fn sysfs_tree(base: &Path, data: &[u8]) {
    let mut parts = data.split(|&c| c == 0);
    for f in SYSFS_FILES {
        let p = base.join(f);
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(p, parts.next().unwrap_or(b"")).unwrap();
    }
    let root = mdpilot::host::Root::new(PathBuf::from(base));
    let a = mdpilot::sysfs::read_array(&root, "md0");
    assert!(a.members.len() <= 1);
    let _ = mdpilot::sysfs::read_speed_limits(&root);
}

pub fn config_fragment(data: &[u8]) {
    use mdpilot::config::{Config, ConfigFragment};
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
}

pub fn state_file(data: &[u8]) {
    use mdpilot::policy::state::{from_toml, to_toml};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(state) = from_toml(text) {
        let again = to_toml(&state).expect("a state read from TOML is written back");
        assert_eq!(
            from_toml(&again).as_ref(),
            Ok(&state),
            "round trip of\n{again}"
        );
    }
}

/// Known keys of AcquirePriority's dict.
pub const ACQUIRE_KEYS: &[&str] = &["min", "max", "arrays", "kind", "holder", "pid"];

pub fn dbus_acquire(opts: &Options, install: (u64, Option<u64>)) {
    if let Ok(a) = mdpilot::dbus::options::parse_acquire(opts, install) {
        let ok = |l: &mdpilot::policy::Limits| match (l.min, l.max) {
            (Some(mn), Some(mx)) => mn <= mx,
            _ => true,
        };
        assert!(ok(&a.global));
        assert!(a.arrays.values().all(ok));
        assert_ne!(a.pid, Some(0));
        assert_ne!(a.holder.as_deref(), Some(""));
    }
}

/// Known keys of StartWipe's dict.
pub const WIPE_KEYS: &[&str] = &["method", "verify", "keep-resync", "resume"];

pub fn dbus_wipe_options(opts: &Options) {
    if mdpilot::dbus::options::parse_start_wipe(opts).is_ok() {
        assert!(opts.keys().all(|k| WIPE_KEYS.contains(&k.as_str())));
    }
}

/// The install policy the dbus_acquire target passes, from the input's first two bytes.
pub fn install_of(data: &[u8]) -> (u64, Option<u64>) {
    (
        data.first().copied().map_or(0, u64::from),
        data.get(1).map(|&b| u64::from(b) + 256),
    )
}

/// Input `D` + a D-Bus-serialized little-endian `a{sv}`: the dict, or `None` when it does not
/// decode (the form regression inputs of the D-Bus targets are kept in).
pub fn wire_options(data: &[u8]) -> Option<Options> {
    let wire = data.strip_prefix(b"D")?;
    let (dict, _) = Data::new(wire, Context::new_dbus(LE, 0))
        .deserialize::<Options>()
        .ok()?;
    Some(dict)
}

/// `opts` as a wire-form input (`D` + serialized `a{sv}`), for keeping a found input.
pub fn to_wire(opts: &Options) -> Vec<u8> {
    let mut out = b"D".to_vec();
    if let Ok(d) = zbus::zvariant::to_bytes(Context::new_dbus(LE, 0), opts) {
        out.extend_from_slice(&d);
    }
    out
}
