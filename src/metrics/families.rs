//! The list of `mdpilot_*` families ([`FAMILIES`]), their label vocabularies, and the encoder
//! that writes collected samples through `prometheus-client` in a fixed order. Pure.

use crate::model::{ArrayState, ConsistencyPolicy, MemberRole, SyncAction};
use crate::policy::LeaseKind;
use crate::vocab::MEMBER_ACTIVE;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

/// Values of `md/array_state` (md.rst), one `mdpilot_array_state` series each; a word outside
/// the list ([`ArrayState::Other`]) gets its own series.
pub const ARRAY_STATES: [ArrayState; 10] = [
    ArrayState::Clear,
    ArrayState::Inactive,
    ArrayState::Suspended,
    ArrayState::Readonly,
    ArrayState::ReadAuto,
    ArrayState::Clean,
    ArrayState::Active,
    ArrayState::WritePending,
    ArrayState::ActiveIdle,
    ArrayState::Broken,
];

/// Values of `md/sync_action` (md.rst), one `mdpilot_array_sync_action` series each; a word
/// outside the list ([`SyncAction::Other`]) gets its own series.
pub const SYNC_ACTIONS: [SyncAction; 7] = [
    SyncAction::Idle,
    SyncAction::Resync,
    SyncAction::Recover,
    SyncAction::Check,
    SyncAction::Repair,
    SyncAction::Reshape,
    SyncAction::Frozen,
];

/// Member states of `mdpilot_array_members`.
/// `active` is mdadm's word for a member in sync ([`MEMBER_ACTIVE`]), `down` a missing slot
/// (`_` in mdstat's `[UU_]`), `write-mostly` the `write_mostly` member state; the rest are the
/// [`MemberRole`] words.
pub const MEMBER_STATES: [&str; 7] = [
    MEMBER_ACTIVE,
    MemberRole::Rebuilding.as_str(),
    MemberRole::Spare.as_str(),
    MemberRole::Faulty.as_str(),
    MEMBER_DOWN,
    MEMBER_WRITE_MOSTLY,
    MemberRole::Journal.as_str(),
];

/// The `mdpilot_array_members` label of a missing slot (`_` in mdstat's `[UU_]`).
pub const MEMBER_DOWN: &str = "down";

/// The `mdpilot_array_members` label of `write_mostly` members (the state word with `-`, as
/// `mdpilot status` prints it).
pub const MEMBER_WRITE_MOSTLY: &str = "write-mostly";

/// Values of `md/consistency_policy` (md.rst), one `mdpilot_array_consistency_policy` series
/// each; a word outside the list gets its own series.
pub const CONSISTENCY_POLICIES: [ConsistencyPolicy; 5] = [
    ConsistencyPolicy::None,
    ConsistencyPolicy::Resync,
    ConsistencyPolicy::Bitmap,
    ConsistencyPolicy::Journal,
    ConsistencyPolicy::Ppl,
];

/// Kinds of `mdpilot_array_write_intent_bitmap`, one series each.
pub const WRITE_INTENT_BITMAPS: [crate::model::WriteIntentBitmap; 4] = [
    crate::model::WriteIntentBitmap::None,
    crate::model::WriteIntentBitmap::Internal,
    crate::model::WriteIntentBitmap::File,
    crate::model::WriteIntentBitmap::Llbitmap,
];

/// Lease kinds of `mdpilot_policy_leases`, one series each.
pub const LEASE_KINDS: [LeaseKind; 4] = [
    LeaseKind::Installer,
    LeaseKind::WipeJob,
    LeaseKind::Admin,
    LeaseKind::DbusClient,
];

/// Events the service's event sinks dropped because the event program's queue (64 events) was
/// full, since the process started: the value of `mdpilot_hook_events_dropped_total`, a
/// counter never reset (a SIGHUP that replaces the sink keeps it). Fed by
/// `service::events`, read by the service's scrape; always 0 in the CLI.
pub static HOOK_EVENTS_DROPPED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Every family: (name as exposed, help), in exposition order. `docs/metrics.md` is generated
/// from this list and [`FAMILY_DOCS`] (`cargo run -p xtask -- metrics-doc`).
pub const FAMILIES: [(&str, &str); 37] = [
    ("mdpilot_build_info", "mdpilot version (value 1)."),
    ("mdpilot_mdstat_parse_errors", "Parts of /proc/mdstat that could not be parsed."),
    ("mdpilot_speed_limit_bytes_per_second", "Global resync speed limit, /proc/sys/dev/raid/speed_limit_{min,max} (the kernel unit is KiB/s)."),
    ("mdpilot_speed_limit_original_bytes_per_second", "Original global speed limit saved by mdpilot while its leases change the knob (restored when the last lease goes)."),
    ("mdpilot_policy_leases", "Live resync priority leases by kind of holder."),
    ("mdpilot_policy_install_applied_timestamp_seconds", "When the install policy (an installer lease) was first taken, Unix time; no sample while none applies."),
    ("mdpilot_hook_events_dropped_total", "Events the service did not hand to the event program because its queue (64 events) was full, since start."),
    ("mdpilot_io_pressure_ratio", "The io pressure, /proc/pressure/io avg10 as a ratio of wall time: some (a task waited on io) and full (every non-idle task did)."),
    ("mdpilot_wipe_jobs_running", "Wipe jobs running in the service."),
    ("mdpilot_wipe_done_bytes", "Bytes durably written by the running wipe jobs."),
    ("mdpilot_wipe_total_bytes", "Bytes the running wipe jobs write in all."),
    ("mdpilot_wipe_rate_bytes_per_second", "Summed current rate of the running wipe jobs."),
    ("mdpilot_array_info", "Array identity (value 1): level, uuid and metadata version as labels."),
    ("mdpilot_array_state", "md/array_state, one series per state, 1 for the current one (from the /proc/mdstat header where sysfs is absent)."),
    ("mdpilot_array_size_bytes", "Array size, the blocks of /proc/mdstat (KiB) in bytes."),
    ("mdpilot_array_raid_disks", "md/raid_disks: members the array is built of."),
    ("mdpilot_array_degraded", "md/degraded: members missing from the array (0 when whole)."),
    ("mdpilot_array_members", "Members by role: active (in sync), rebuilding, spare, faulty, journal; write-mostly; down (empty or not yet in sync slots)."),
    ("mdpilot_array_consistency_policy", "md/consistency_policy (none, resync, bitmap, journal, ppl), one series per policy, 1 for the current one (no samples where sysfs lacks it)."),
    ("mdpilot_array_write_intent_bitmap", "The array's write-intent bitmap (none, internal, file, llbitmap), one series per kind, 1 for the current one."),
    ("mdpilot_array_md_logical_block_size_bytes", "md/logical_block_size (Linux 6.19+): the logical block size md records in a 1.x superblock."),
    ("mdpilot_array_warning", "Warnings about the array, one series per kind (no_bitmap, logical_block_size) with value 1 while it applies."),
    ("mdpilot_array_full_resync_estimate_seconds", "Estimated length of a full resync (what a crash costs an array without a write-intent bitmap) at the speed named by basis (observed, speed_limit_min); only for arrays the bitmap advisor warns about."),
    ("mdpilot_array_sync_action", "md/sync_action, one series per action, 1 for the current one."),
    ("mdpilot_array_sync_completed_ratio", "md/sync_completed as a fraction of the running sync (no sample while none runs)."),
    ("mdpilot_array_sync_speed_bytes_per_second", "md/sync_speed, the recent speed of the running sync (the kernel unit is KiB/s)."),
    ("mdpilot_array_sync_remaining_seconds", "Estimated time left of the running sync (finish= of /proc/mdstat)."),
    ("mdpilot_array_mismatch_sectors", "md/mismatch_cnt: 512-byte sectors found inconsistent by the last check or repair."),
    ("mdpilot_array_last_check_completion_timestamp_seconds", "When the last check completed, Unix time (from mdpilot's check record)."),
    ("mdpilot_array_last_check_mismatch_sectors", "md/mismatch_cnt at the end of the last completed check (from mdpilot's check record)."),
    ("mdpilot_array_sync_speed_limit_bytes_per_second", "Effective md/sync_speed_{min,max} of the array (the kernel unit is KiB/s)."),
    ("mdpilot_array_sync_speed_limit_local", "1 when md/sync_speed_{min,max} is set for the array (local), 0 when it follows the global limit (system)."),
    ("mdpilot_array_check_throttle_limit_bytes_per_second", "The pressure throttle's limit on the array's running sync: md/sync_speed_max through the check-<array> or resync-<array> lease (the kernel unit is KiB/s)."),
    ("mdpilot_array_check_throttle_applied", "1 when the throttle's limit took effect (md/sync_speed_max reads it and md/sync_speed keeps to it), 0 when not."),
    ("mdpilot_array_check_throttle_decisions_total", "Decisions of the pressure throttle that changed the running sync's limit, by decision (start, down, up, fixed); reset when the sync ends."),
    ("mdpilot_array_check_throttle_pressure_ratio", "The io pressure the throttle's last decision used, as a ratio of wall time: over the interval since its previous look (source interval), or avg10 (source avg10: first look, a counter or clock that went back, a long gap)."),
    ("mdpilot_array_check_throttle_io_depth", "md/sync_io_depth the throttle asks for through the check lease at its floor (Linux 6.16+; requests in flight); no sample while md's own depth applies."),
];

/// The documentation of every family of [`FAMILIES`], in the same order: (name, labels, source
/// of the value). Labels and sources are Markdown (`docs/metrics.md` is generated from them);
/// a unit test keeps the names in step with [`FAMILIES`].
pub const FAMILY_DOCS: [(&str, &str, &str); 37] = [
    ("mdpilot_build_info", "`version`", "mdpilot (value 1)"),
    ("mdpilot_mdstat_parse_errors", "", "`/proc/mdstat` parts that could not be parsed"),
    ("mdpilot_speed_limit_bytes_per_second", "`bound` (`min`, `max`)", "`/proc/sys/dev/raid/speed_limit_{min,max}`"),
    ("mdpilot_speed_limit_original_bytes_per_second", "`bound`", "policy state file: the original saved while a lease changes the knob"),
    ("mdpilot_policy_leases", "`kind` (`installer`, `wipe-job`, `admin`, `dbus-client`)", "policy state file: live leases (dead pid owners left out)"),
    ("mdpilot_policy_install_applied_timestamp_seconds", "", "the earliest `[taken]` time of a live installer lease in the policy state file (none while no installer lease applies)"),
    ("mdpilot_hook_events_dropped_total", "", "the service's event program queue (`[events] program`): events dropped to keep it at 64, or because the program was not configured (0); service only"),
    ("mdpilot_io_pressure_ratio", "`kind` (`some`, `full`)", "`/proc/pressure/io` `avg10` / 100 (no samples without PSI)"),
    ("mdpilot_wipe_jobs_running", "", "the service's wipe jobs (service only)"),
    ("mdpilot_wipe_done_bytes", "", "wipe engine progress, summed over running jobs"),
    ("mdpilot_wipe_total_bytes", "", "wipe engine progress, summed over running jobs"),
    ("mdpilot_wipe_rate_bytes_per_second", "", "wipe engine rate of the current phase, summed"),
    ("mdpilot_array_info", "`array`, `level`, `metadata`, `uuid`", "`/proc/mdstat` header, `md/level`, `md/metadata_version`, the array's UUID in mdadm's spelling (udev's `MD_UUID`, else `md/uuid` regrouped; as `mdadm --detail` and the D-Bus `UUID`) (value 1)"),
    ("mdpilot_array_state", "`array`, `state` (the 10 words of md.rst)", "`md/array_state` (the `/proc/mdstat` header without sysfs); 1 for the current state"),
    ("mdpilot_array_size_bytes", "`array`", "`/proc/mdstat` blocks"),
    ("mdpilot_array_raid_disks", "`array`", "`md/raid_disks` (else `[T/A]`)"),
    ("mdpilot_array_degraded", "`array`", "`md/degraded` (else T − A of `[T/A]`)"),
    ("mdpilot_array_members", "`array`, `state` (`active`, `rebuilding`, `spare`, `faulty`, `down`, `write-mostly`, `journal`)", "the model's member roles: `md/dev-*/state` and `slot`, else the flags `(S)(F)(W)(J)(R)` of `/proc/mdstat`; `_` slots of `[UU_]`"),
    ("mdpilot_array_consistency_policy", "`array`, `policy` (`none`, `resync`, `bitmap`, `journal`, `ppl`)", "`md/consistency_policy`; 1 for the current policy (no samples without sysfs)"),
    ("mdpilot_array_write_intent_bitmap", "`array`, `bitmap` (`none`, `internal`, `file`, `llbitmap`)", "`md/bitmap_type`, `md/bitmap/location`, `md/consistency_policy` (else the mdstat bitmap line); redundant arrays only"),
    ("mdpilot_array_md_logical_block_size_bytes", "`array`", "`md/logical_block_size` (no sample where the kernel lacks it)"),
    ("mdpilot_array_warning", "`array`, `kind` (`no_bitmap`, `logical_block_size`)", "the model's array warnings: a redundant array without a bitmap; a superblock that records a logical block size (Linux 6.18 and older cannot assemble it)"),
    ("mdpilot_array_full_resync_estimate_seconds", "`array`, `basis` (`observed`, `speed_limit_min`)", "`md/component_size` over the running sync's speed, else `md/sync_speed_min` (else `speed_limit_min`)"),
    ("mdpilot_array_sync_action", "`array`, `action` (`idle`, `resync`, `recover`, `check`, `repair`, `reshape`, `frozen`)", "`md/sync_action`; 1 for the current action"),
    ("mdpilot_array_sync_completed_ratio", "`array`", "`md/sync_completed` (else the mdstat progress line); only while a sync runs"),
    ("mdpilot_array_sync_speed_bytes_per_second", "`array`", "`md/sync_speed` (else mdstat `speed=`)"),
    ("mdpilot_array_sync_remaining_seconds", "`array`", "mdstat `finish=` (else from `sync_completed` and `sync_speed`)"),
    ("mdpilot_array_mismatch_sectors", "`array`", "`md/mismatch_cnt` (512-byte sectors)"),
    ("mdpilot_array_last_check_completion_timestamp_seconds", "`array`", "the last completed check in mdpilot's check record (`[check] state_path`, by array UUID)"),
    ("mdpilot_array_last_check_mismatch_sectors", "`array`", "`md/mismatch_cnt` at that check's end, from the same record"),
    ("mdpilot_array_sync_speed_limit_bytes_per_second", "`array`, `bound`", "`md/sync_speed_{min,max}` (the value in force, local or system)"),
    ("mdpilot_array_sync_speed_limit_local", "`array`, `bound`", "`md/sync_speed_{min,max}`: 1 for `(local)`, 0 for `(system)`"),
    ("mdpilot_array_check_throttle_limit_bytes_per_second", "`array`, `throttle` (`check`, `resync`)", "the throttle's last decision (`/run/mdpilot/check-throttle.json`, `resync-throttle.json`); only while a check of mdpilot runs under `[check] pressure_target`, or a resync or recovery under `[resync] pressure_target` with the throttle holding its lease"),
    ("mdpilot_array_check_throttle_applied", "`array`, `throttle`", "the throttle's read-back of `md/sync_speed_max` and `md/sync_speed`"),
    ("mdpilot_array_check_throttle_decisions_total", "`array`, `throttle`, `decision` (`start`, `down`, `up`, `fixed`)", "the throttle's decisions, counted per check or resync"),
    ("mdpilot_array_check_throttle_pressure_ratio", "`array`, `throttle`, `source` (`interval`, `avg10`)", "`/proc/pressure/io`: the band's line's `total` counter over the interval since the throttle's last look, else its `avg10`; only while the throttle decides on pressure"),
    ("mdpilot_array_check_throttle_io_depth", "`array`, `throttle`", "the throttle's last decision; only while it holds the sync at its floor"),
];

/// One sample's value: gauges are integers or floats; counters (families named `*_total`)
/// are integers.
#[derive(Debug, Clone, Copy)]
pub enum Value {
    /// A counter's value (only in a `*_total` family).
    Counter(u64),
    /// An integer gauge (counts, bytes, 0/1 states).
    Int(i64),
    /// A float gauge (ratios, seconds, rates).
    Float(f64),
}

/// A sample's labels, `(name, escaped value)` in exposition order.
pub type Labels = Vec<(&'static str, String)>;

#[derive(Debug)]
struct Fam {
    /// Index into [`FAMILIES`].
    idx: usize,
    samples: Vec<(Labels, Value)>,
}

/// All families of one render, encoded in order by `prometheus-client` (its `Family` is a
/// hash map: a fixed order keeps golden files and diffs stable).
#[derive(Debug)]
struct Families(Vec<Fam>);

fn unit_of(name: &str) -> Option<Unit> {
    if name.ends_with("_bytes_per_second") {
        Some(Unit::Other("bytes_per_second".into()))
    } else if name.ends_with("_bytes") {
        Some(Unit::Bytes)
    } else if name.ends_with("_seconds") {
        Some(Unit::Seconds)
    } else if name.ends_with("_ratio") {
        Some(Unit::Other("ratio".into()))
    } else {
        None
    }
}

fn put(enc: prometheus_client::encoding::MetricEncoder, value: Value) -> std::fmt::Result {
    match value {
        Value::Int(v) => ConstGauge::new(v).encode(enc),
        Value::Float(v) => ConstGauge::new(v).encode(enc),
        Value::Counter(v) => ConstCounter::new(v).encode(enc),
    }
}

impl Collector for Families {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for fam in &self.0 {
            let (full, help) = FAMILIES[fam.idx];
            let unit = unit_of(full);
            // prometheus-client appends `_<unit>` to the name it is given, and `_total` to a
            // counter's samples.
            let (full, kind) = match full.strip_suffix("_total") {
                Some(n) => (n, MetricType::Counter),
                None => (full, MetricType::Gauge),
            };
            let name = match &unit {
                Some(u) => &full[..full.len() - u.as_str().len() - 1],
                None => full,
            };
            let mut metric = encoder.encode_descriptor(name, help, unit.as_ref(), kind)?;
            match fam.samples.as_slice() {
                // A family without labels has one sample, written `name value` (not `name{}`).
                [(labels, value)] if labels.is_empty() => put(metric, *value)?,
                samples => {
                    for (labels, value) in samples {
                        put(metric.encode_family(labels)?, *value)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// A line of the OpenMetrics text as the Prometheus text format 0.0.4 spells it: the `# HELP`
/// and `# TYPE` lines of a counter name the samples' `_total` name there (OpenMetrics names the
/// family without it); every other line is unchanged.
pub fn text_0_0_4_line(line: &str) -> std::borrow::Cow<'_, str> {
    for tag in ["# HELP ", "# TYPE "] {
        let Some(rest) = line.strip_prefix(tag) else {
            continue;
        };
        let name = rest.split(' ').next().unwrap_or_default();
        let total = format!("{name}_total");
        if FAMILIES.iter().any(|(n, _)| *n == total) {
            return format!("{tag}{total}{}", &rest[name.len()..]).into();
        }
    }
    line.into()
}

/// Escapes a label value as the exposition formats require (`\`, `"`, newline);
/// prometheus-client writes values as given.
pub fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// An integer gauge from a `u64` (saturating at `i64::MAX`).
pub fn int(v: u64) -> Value {
    Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
}

/// Collects samples per family; [`Builder::encode`] writes every family of [`FAMILIES`], in
/// that order, samples or not.
#[derive(Debug)]
pub struct Builder(Vec<Fam>);

impl Default for Builder {
    fn default() -> Self {
        Builder(
            (0..FAMILIES.len())
                .map(|idx| Fam {
                    idx,
                    samples: Vec::new(),
                })
                .collect(),
        )
    }
}

impl Builder {
    /// Adds one sample to the family `name`. Panics when `name` is not in [`FAMILIES`] (a
    /// programming error the unit tests catch).
    pub fn add(&mut self, name: &str, labels: Labels, value: Value) {
        let idx = FAMILIES
            .iter()
            .position(|(n, _)| *n == name)
            .expect("family listed in FAMILIES");
        self.0[idx].samples.push((labels, value));
    }

    /// OpenMetrics 1.0 text of every family (ends with `# EOF\n`).
    pub fn encode(self) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Families(self.0)));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry)
            .expect("writing to a String cannot fail");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(esc("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn every_family_is_documented_in_order() {
        let names: Vec<&str> = FAMILIES.iter().map(|(n, _)| *n).collect();
        let documented: Vec<&str> = FAMILY_DOCS.iter().map(|(n, _, _)| *n).collect();
        assert_eq!(names, documented);
        for (name, labels, source) in FAMILY_DOCS {
            assert!(!source.is_empty() && !source.contains('|'), "{name}");
            assert!(!labels.contains('|'), "{name}");
        }
    }

    #[test]
    fn names_and_helps_follow_the_conventions() {
        for (name, help) in FAMILIES {
            assert!(name.starts_with("mdpilot_"), "{name}");
            assert!(help.ends_with('.') && !help.contains('\n'), "{name}");
        }
    }
}
