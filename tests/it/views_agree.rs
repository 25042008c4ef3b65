//! The views agree on the facts of an array: every /proc/mdstat fixture (tests/fixtures/mdstat/),
//! under generated sysfs trees (each of `md/array_state`, `level`, `raid_disks`, `degraded`,
//! `sync_action`, `sync_completed`, `sync_speed` present or not, consistent with the text or
//! not), read back through `sysfs::collect` and shown by the D-Bus properties, the alerts view,
//! the metrics families and health/`status`: all of them say what the model's facts say
//! (`Array::degraded`, `sync_action`, `running_sync`, `sync_progress`, `is_stopped`,
//! `is_serving`, `write_intent_bitmap`, `bitmap_location`, `bitmap_advised`,
//! `recorded_logical_block_size`, under generated `consistency_policy`, `bitmap/location`,
//! `bitmap_type` and `logical_block_size` files too), so none disagrees with another about one array. Also the health verdict
//! (`status --test`'s, the D-Bus `Health` the Cockpit page looks up), the member roles (under a
//! generated `md/dev-*/state` and `slot` of the first member) and the UUID (under a generated
//! `md/uuid`, in mdadm's spelling everywhere).

use crate::support;

use mdpilot::dbus::array::ArrayProps;
use mdpilot::health::{array_health, Health};
use mdpilot::model::{Array, ArrayState, MdStat, SyncAction};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn fixtures() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mdstat");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .map(|p: PathBuf| {
            let text = String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned();
            (p.file_name().unwrap().to_string_lossy().into_owned(), text)
        })
        .collect();
    out.sort();
    assert!(out.len() >= 50, "fixtures missing: {}", out.len());
    out
}

/// The sysfs files of one array; `None` leaves the file out.
#[derive(Debug, Clone)]
struct Overlay {
    array_state: Option<&'static str>,
    level: Option<&'static str>,
    raid_disks: Option<u32>,
    degraded: Option<u32>,
    sync_action: Option<&'static str>,
    sync_completed: Option<String>,
    sync_speed: Option<String>,
    /// `consistency_policy`, `bitmap/location`, `bitmap_type`, `logical_block_size`.
    bitmap: (
        Option<&'static str>,
        Option<&'static str>,
        Option<&'static str>,
        Option<&'static str>,
    ),
    /// `uuid`, and the first member's `dev-*/state` and `dev-*/slot`.
    ids: (
        Option<&'static str>,
        Option<&'static str>,
        Option<&'static str>,
    ),
}

/// `md/uuid`, the first member's `dev-*/state` and `dev-*/slot` of [`Overlay::ids`].
#[allow(clippy::type_complexity)]
fn ids() -> impl Strategy<
    Value = (
        Option<&'static str>,
        Option<&'static str>,
        Option<&'static str>,
    ),
> {
    let word = |w: &'static [&'static str]| proptest::option::of(proptest::sample::select(w));
    (
        word(&["3b6c2a6e-0d0e-4b7a-9d5e-8a7b1c2d3e4f", "not-a-uuid", ""]),
        word(&[
            "in_sync",
            "spare",
            "faulty",
            "in_sync,write_mostly",
            "journal,in_sync",
            "faulty,in_sync",
            "want_replacement,in_sync",
        ]),
        word(&["0", "1", "none"]),
    )
}

fn overlay() -> impl Strategy<Value = Overlay> {
    let word = |w: &'static [&'static str]| proptest::option::of(proptest::sample::select(w));
    let completed = prop_oneof![
        Just("none".to_string()),
        Just("delayed".to_string()),
        (0u64..1 << 40, 0u64..1 << 40).prop_map(|(a, b)| format!("{} / {}", a.min(b), b)),
        (0u64..4096).prop_map(|a| format!("{a} / 0")),
    ];
    let speed = prop_oneof![
        Just("none".to_string()),
        (0u64..10_000_000).prop_map(|v| v.to_string())
    ];
    (
        word(&[
            "clear",
            "inactive",
            "suspended",
            "readonly",
            "read-auto",
            "clean",
            "active",
            "write-pending",
            "active-idle",
            "broken",
            "future",
        ]),
        word(&["raid0", "raid1", "raid5", "raid6", "raid10", "linear", ""]),
        proptest::option::of(1u32..8),
        proptest::option::of(0u32..4),
        word(&[
            "idle", "resync", "recover", "check", "repair", "reshape", "frozen", "future",
            "rectify",
        ]),
        proptest::option::of(completed),
        proptest::option::of(speed),
        (
            word(&["none", "resync", "bitmap", "journal", "ppl", "future"]),
            word(&["none", "file", "+8", "-16", ""]),
            word(&[
                "[none] bitmap",
                "none [bitmap]",
                "none bitmap [llbitmap]",
                "odd",
            ]),
            word(&["512", "4096", "0"]),
        ),
        ids(),
    )
        .prop_map(
            |(
                array_state,
                level,
                raid_disks,
                degraded,
                sync_action,
                sync_completed,
                sync_speed,
                bitmap,
                ids,
            )| {
                Overlay {
                    array_state,
                    level,
                    raid_disks,
                    degraded,
                    sync_action,
                    sync_completed,
                    sync_speed,
                    bitmap,
                    ids,
                }
            },
        )
}

/// The model `sysfs::collect` reads from `mdstat` plus, for the `i`-th array, `overlays[i %
/// len]` (the array has no sysfs directory where `overlays` is empty).
fn model(mdstat: &str, overlays: &[Overlay]) -> MdStat {
    let d = support::tree::mdstat_root(mdstat);
    let root = d.path();
    let parsed = mdpilot::mdstat::parse(mdstat).arrays;
    let names: Vec<String> = parsed.iter().map(|a| a.name.clone()).collect();
    for (i, name) in names.iter().enumerate() {
        let Some(o) = overlays.get(i % overlays.len().max(1)) else {
            break;
        };
        let dir = format!("sys/block/{name}/md");
        std::fs::create_dir_all(root.join(&dir)).unwrap();
        if let (Some(m), Some(state)) = (parsed[i].members.first(), o.ids.1) {
            let dev = format!("{dir}/dev-{}", m.name.replace('/', "!"));
            support::tree::write(root, &format!("{dev}/state"), &format!("{state}\n"));
            if let Some(slot) = o.ids.2 {
                support::tree::write(root, &format!("{dev}/slot"), &format!("{slot}\n"));
            }
        }
        let files: [(&str, Option<String>); 12] = [
            ("array_state", o.array_state.map(String::from)),
            ("level", o.level.map(String::from)),
            ("raid_disks", o.raid_disks.map(|n| n.to_string())),
            ("degraded", o.degraded.map(|n| n.to_string())),
            ("sync_action", o.sync_action.map(String::from)),
            ("sync_completed", o.sync_completed.clone()),
            ("sync_speed", o.sync_speed.clone()),
            ("consistency_policy", o.bitmap.0.map(String::from)),
            ("bitmap/location", o.bitmap.1.map(String::from)),
            ("bitmap_type", o.bitmap.2.map(String::from)),
            ("logical_block_size", o.bitmap.3.map(String::from)),
            ("uuid", o.ids.0.map(String::from)),
        ];
        for (file, text) in files {
            if let Some(t) = text {
                support::tree::write(root, &format!("{dir}/{file}"), &format!("{t}\n"));
            }
        }
    }
    mdpilot::sysfs::collect(&support::tree::Root::new(root)).unwrap()
}

/// `family{array="name"[,key="word"]} value` samples of the text exposition, by
/// (family, array, other label value).
fn samples(text: &str) -> BTreeMap<(String, String, String), f64> {
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("mdpilot_array_")) {
        let (series, value) = line.rsplit_once(' ').unwrap();
        let (family, labels) = series.split_once('{').unwrap();
        let mut array = String::new();
        let mut other = String::new();
        for kv in labels.trim_end_matches('}').split("\",") {
            let (k, v) = kv.split_once("=\"").unwrap();
            let v = v.trim_end_matches('"').to_string();
            if k == "array" {
                array = v;
            } else if matches!(k, "state" | "action" | "bitmap" | "kind" | "uuid") {
                other = v;
            }
        }
        out.insert((family.to_string(), array, other), value.parse().unwrap());
    }
    out
}

/// The `State` row and the member roles of `name`'s block in `mdpilot status`'s text.
fn status_block<'a>(text: &'a str, name: &str) -> &'a str {
    let start = text.find(&format!("/dev/{name}:\n")).unwrap();
    let rest = &text[start..];
    let end = rest[1..].find("\n/dev/").map_or(rest.len(), |e| e + 1);
    &rest[..end]
}

/// The views of one array side by side: the D-Bus properties, the alerts' view, the metrics
/// and the array's block of `mdpilot status`, with `at` naming the case in messages.
struct Views<'a> {
    a: &'a Array,
    at: String,
    p: ArrayProps,
    v: mdpilot::alerts::ArrayView,
    metrics: &'a BTreeMap<(String, String, String), f64>,
    block: &'a str,
}

impl Views<'_> {
    /// The metric `fam` of this array with the other label `other`.
    fn m(&self, fam: &str, other: &str) -> Option<f64> {
        self.metrics
            .get(&(fam.to_string(), self.a.name.clone(), other.to_string()))
            .copied()
    }
}

fn agree(file: &str, a: &Array, metrics: &BTreeMap<(String, String, String), f64>, text: &str) {
    let w = Views {
        a,
        at: format!("{file} {}: {a:?}", a.name),
        p: ArrayProps::from_model(a),
        v: mdpilot::alerts::view_from_array(a),
        metrics,
        block: status_block(text, &a.name),
    };
    let health = agree_degraded(&w);
    agree_sync(&w);
    agree_stopped(&w, health);
    agree_bitmap(&w);
    agree_members(&w);
    agree_uuid(&w);
}

/// The Cockpit page's table of the service's Health words (`cockpit/src/format.js`, `HEALTH`).
fn page_health_words() -> &'static str {
    static PAGE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PAGE.get_or_init(|| {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("cockpit/src/format.js");
        let text = std::fs::read_to_string(p).unwrap();
        let start = text.find("export const HEALTH = {").unwrap();
        let end = start + text[start..].find("};").unwrap();
        text[start..end].to_string()
    })
}

/// The member roles agree: D-Bus `MemberRoles`, the alerts' member view, the metrics' counts
/// and `status`'s member table all show the model's ([`Array::members_with_roles`]).
fn agree_members(w: &Views<'_>) {
    use mdpilot::model::{HeaderState, MemberRole};
    let (a, at, p, v, block) = (w.a, &w.at, &w.p, &w.v, w.block);
    let roles = a.members_with_roles();
    let dbus: BTreeMap<&str, &str> = p
        .member_roles
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let model: BTreeMap<&str, &str> = roles
        .iter()
        .map(|m| (m.name.as_str(), m.role.as_str()))
        .collect();
    assert_eq!(dbus, model, "D-Bus MemberRoles: {at}");
    let alerts: Vec<(&str, MemberRole)> = v
        .members
        .iter()
        .map(|m| (m.name.as_str(), m.role))
        .collect();
    let mine: Vec<(&str, MemberRole)> = roles.iter().map(|m| (m.name.as_str(), m.role)).collect();
    assert_eq!(alerts, mine, "alerts member roles: {at}");
    let count = |r: MemberRole| roles.iter().filter(|m| m.role == r).count() as f64;
    let active = if a.state == HeaderState::Active {
        count(MemberRole::InSync)
    } else {
        0.0
    };
    for (label, n) in [
        ("active", active),
        ("rebuilding", count(MemberRole::Rebuilding)),
        ("spare", count(MemberRole::Spare)),
        ("faulty", count(MemberRole::Faulty)),
        ("journal", count(MemberRole::Journal)),
    ] {
        assert_eq!(
            w.m("mdpilot_array_members", label),
            Some(n),
            "metrics {label}: {at}"
        );
    }
    for m in roles.iter().filter(|m| m.role == MemberRole::Rebuilding) {
        let line = block
            .lines()
            .find(|l| l.split_whitespace().nth(2) == Some(m.name.as_str()))
            .unwrap_or_else(|| panic!("status row of {}: {at}\n{block}", m.name));
        let word = if a.is_serving() {
            "rebuilding"
        } else {
            "assembled"
        };
        assert!(line.contains(word), "status {word}: {at}\n{block}");
        assert!(!line.contains("active"), "status: {at}\n{block}");
    }
}

/// The UUID: D-Bus, the alerts (the journal's `MD_UUID=`), the metrics' `uuid` label and
/// `status` show one spelling, mdadm's ([`Array::uuid`]).
fn agree_uuid(w: &Views<'_>) {
    let (a, at, p, v, block) = (w.a, &w.at, &w.p, &w.v, w.block);
    let uuid = a.uuid().map(|u| u.to_string());
    assert_eq!(
        Some(p.uuid.clone()).filter(|u| !u.is_empty()),
        uuid,
        "D-Bus UUID: {at}"
    );
    assert_eq!(v.uuid, uuid, "alerts uuid: {at}");
    if let Some(u) = &uuid {
        assert_eq!(
            w.m("mdpilot_array_info", u),
            Some(1.0),
            "metrics uuid: {at}"
        );
        assert!(
            block.contains(&format!("UUID : {u}")),
            "status UUID: {at}\n{block}"
        );
        assert_eq!(u.len(), 35, "mdadm's spelling: {at}");
    }
}

/// The write-intent bitmap, the advisor and the array's warnings agree across the views.
fn agree_bitmap(w: &Views<'_>) {
    let (a, at, p, block) = (w.a, &w.at, &w.p, w.block);
    let m = |fam: &str, other: &str| w.m(fam, other);
    let bitmap = a.write_intent_bitmap();
    let advised = a.bitmap_advised();
    assert_eq!(p.bitmap_advised, advised, "D-Bus BitmapAdvised: {at}");
    assert_eq!(
        p.bitmap_location,
        a.bitmap_location().unwrap_or_default().into_bytes(),
        "D-Bus BitmapLocation: {at}"
    );
    assert_eq!(
        m("mdpilot_array_warning", "no_bitmap"),
        advised.then_some(1.0),
        "metrics no_bitmap: {at}"
    );
    let lbs = a.recorded_logical_block_size().is_some();
    assert_eq!(
        m("mdpilot_array_warning", "logical_block_size"),
        lbs.then_some(1.0),
        "metrics logical_block_size: {at}"
    );
    assert_eq!(
        p.warnings.len(),
        usize::from(advised) + usize::from(lbs),
        "{at}"
    );
    if a.is_redundant() {
        assert_eq!(p.write_intent_bitmap, bitmap.as_str(), "D-Bus: {at}");
        assert_eq!(
            m("mdpilot_array_write_intent_bitmap", bitmap.as_str()),
            Some(1.0),
            "metrics bitmap: {at}"
        );
        if a.bitmap.is_none() {
            let row = format!("Bitmap : {}", bitmap.as_str());
            assert!(block.contains(&row), "status {row}: {at}\n{block}");
        }
    } else {
        assert_eq!(p.write_intent_bitmap, "", "D-Bus: {at}");
    }
    assert_eq!(
        block.contains("a crash or power loss means a full resync"),
        advised && a.bitmap.is_none(),
        "status advice: {at}\n{block}"
    );
}

/// The degraded count and the health agree across the views; returns the health.
fn agree_degraded(w: &Views<'_>) -> Health {
    let (a, at, p, v, block) = (w.a, &w.at, &w.p, &w.v, w.block);
    let m = |fam: &str, other: &str| w.m(fam, other);
    let degraded = a.degraded();
    // Degraded count.
    assert_eq!(p.degraded, degraded.unwrap_or(0), "D-Bus Degraded: {at}");
    assert_eq!(v.degraded, degraded.unwrap_or(0), "alerts degraded: {at}");
    assert_eq!(
        m("mdpilot_array_degraded", ""),
        degraded.map(f64::from),
        "metrics degraded: {at}"
    );
    let health = array_health(a);
    assert_eq!(p.health, health.as_str(), "D-Bus Health: {at}");
    assert!(
        page_health_words().contains(&format!("    {}: [", health.as_str())),
        "the Cockpit page knows the word {}: {at}",
        health.as_str()
    );
    let whole = degraded.unwrap_or(0) == 0;
    assert_eq!(
        health == Health::Ok,
        a.is_serving() && whole,
        "health: {at}"
    );
    let state_row = block.lines().find(|l| l.contains("State : ")).unwrap();
    assert_eq!(
        state_row.contains(", degraded"),
        !whole,
        "status: {at}\n{block}"
    );
    health
}

/// The sync action and the progress agree across the views.
fn agree_sync(w: &Views<'_>) {
    let (a, at, p, v, block) = (w.a, &w.at, &w.p, &w.v, w.block);
    let m = |fam: &str, other: &str| w.m(fam, other);
    let action = a.sync_action();
    let running = a.running_sync();
    let progress = a.sync_progress();
    // Where a pause saves a check's position is never behind the progress the views show.
    if let (Some(r), Some(pr)) = (a.sync_reached_sectors(), progress) {
        assert!(r >= pr.done_sectors, "sync_reached_sectors: {at}");
    }
    // Sync action and progress.
    assert_eq!(p.sync_action, action.as_str(), "D-Bus SyncAction: {at}");
    assert_eq!(
        m("mdpilot_array_sync_action", action.as_str()),
        Some(1.0),
        "metrics sync_action: {at}"
    );
    assert_eq!(
        v.frozen,
        action == SyncAction::Frozen,
        "alerts frozen: {at}"
    );
    assert_eq!(
        v.sync.as_ref().map(|s| &s.action),
        running.as_ref().map(|r| &r.kind),
        "alerts sync: {at}"
    );
    match progress {
        Some(pr) => {
            assert_eq!(
                (p.sync_completed_sectors, p.sync_total_sectors),
                (pr.done_sectors, pr.total_sectors),
                "D-Bus sectors: {at}"
            );
            assert_eq!(p.sync_completed, pr.fraction(), "D-Bus SyncCompleted: {at}");
            let ratio = m("mdpilot_array_sync_completed_ratio", "").unwrap();
            assert!((ratio - pr.fraction()).abs() < 1e-12, "metrics ratio: {at}");
            assert_eq!(v.sync.as_ref().unwrap().percent, pr.percent, "alerts: {at}");
            let pct = format!("{:5.1}%", pr.percent);
            assert!(block.contains(&pct), "status {pct}: {at}\n{block}");
        }
        None => {
            assert_eq!((p.sync_total_sectors, p.sync_completed), (0, 0.0), "{at}");
            assert_eq!(m("mdpilot_array_sync_completed_ratio", ""), None, "{at}");
            assert_eq!(v.sync.as_ref().map_or(0.0, |s| s.percent), 0.0, "{at}");
        }
    }
}

/// Stopped-ness agrees across the views and the health.
fn agree_stopped(w: &Views<'_>, health: Health) {
    let (a, at, p, v, block) = (w.a, &w.at, &w.p, &w.v, w.block);
    let m = |fam: &str, other: &str| w.m(fam, other);
    let stopped = a.is_stopped();
    // Stopped-ness.
    let state = a.array_state();
    assert_eq!(p.running, !stopped, "D-Bus Running: {at}");
    assert_eq!(p.state, state.as_str(), "D-Bus State: {at}");
    assert_eq!(v.active, a.is_serving(), "alerts active: {at}");
    assert_eq!(m("mdpilot_array_state", state.as_str()), Some(1.0), "{at}");
    assert_eq!(
        matches!(state, ArrayState::Clear | ArrayState::Inactive),
        stopped,
        "{at}"
    );
    assert_eq!(
        health == Health::Inactive,
        stopped,
        "health of a stopped array: {at}"
    );
    if !a.is_serving() {
        assert!(
            matches!(health, Health::Unusable | Health::Inactive),
            "health of an array serving nothing: {at}"
        );
        assert!(
            !block.contains("  active"),
            "status member roles: {at}\n{block}"
        );
    }
}

fn check(file: &str, text: &str, overlays: &[Overlay]) {
    let stat = model(text, overlays);
    let mut names: Vec<&str> = stat.arrays.iter().map(|a| a.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    if names.len() != stat.arrays.len() {
        return; // The views key arrays by name: a text naming one twice has no answer.
    }
    let snap = mdpilot::metrics::Snapshot {
        model: stat.clone(),
        ..Default::default()
    };
    let metrics = samples(&mdpilot::metrics::render(
        &snap,
        mdpilot::metrics::Format::Text,
    ));
    let status = mdpilot::cli::status::render_text(&stat);
    for a in &stat.arrays {
        agree(file, a, &metrics, &status);
    }
}

#[test]
fn every_fixture_without_sysfs() {
    for (file, text) in fixtures() {
        check(&file, &text, &[]);
    }
}

proptest! {
    // One fixture per case (a pass over all 56 per case costs seconds on a loaded machine).
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn every_fixture_under_generated_sysfs(
        pick in 0usize..1000,
        overlays in proptest::collection::vec(overlay(), 1..6),
    ) {
        let all = fixtures();
        let (file, text) = &all[pick % all.len()];
        check(file, text, &overlays);
    }
}
