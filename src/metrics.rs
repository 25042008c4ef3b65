//! Prometheus metrics: the `mdpilot_*` families, rendered from an owned [`Snapshot`] in the
//! Prometheus text exposition format (0.0.4) or OpenMetrics 1.0. Pure: no I/O; the service
//! (`serve --metrics`, from the model it keeps) and `status --format prometheus` (from one read)
//! build the snapshot.
//!
//! Conventions: prefix `mdpilot_`, base units (bytes, seconds, bytes per second, ratios 0..=1;
//! the kernel's KiB and KiB/s are multiplied by 1024), every family a gauge. Per-array series
//! carry only `array` (the kernel name, `md0`); `uuid`, `level` and `metadata` are labels of
//! `mdpilot_array_info` alone, joined with `* on(array) group_left(level) mdpilot_array_info`.
//! Label values come from fixed vocabularies (states, actions, lease kinds) or from the arrays of
//! the machine, never from unbounded input. The table of families, with their kernel source
//! files, is in the README ("Metrics"); [`FAMILIES`] is the same list in code.
//!
//! Families without data are still described (`# HELP`/`# TYPE`) but have no samples:
//! - `mdpilot_array_last_check_*`: there is no record of completed checks yet (the scheduled
//!   checks feature will feed it);
//! - `mdpilot_policy_install_applied_timestamp_seconds`: the policy state file records no time
//!   for a lease (a `taken_at` field in `[[lease]]` is missing), so [`Snapshot::install_applied_at`]
//!   is `None` today; alerts use `mdpilot_policy_leases{kind="installer"}` with `for: 24h`;
//! - wipe families when [`Snapshot::wipe_jobs`] is `None` (the CLI cannot see the service's jobs).

use crate::model::{Array, ArrayState, MdStat, MemberFlag, ReadOnly, SyncCompleted, SyncState};
use crate::policy::{LeaseKind, PolicyView};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

/// Everything a scrape shows, owned (the service clones it out of its locks, then renders).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// The arrays and global limits as `status --json` has them (mdstat enriched with sysfs).
    pub model: MdStat,
    /// The policy view (leases, saved originals); `None` when the policy could not be read.
    pub policy: Option<PolicyView>,
    /// When the install policy lease was taken, Unix seconds; `None` while the state file keeps
    /// no timestamp (always, today: see the module doc).
    pub install_applied_at: Option<f64>,
    /// Running wipe jobs; `None` when unknown (the CLI), `Some(vec![])` when none run.
    pub wipe_jobs: Option<Vec<WipeSample>>,
    /// mdpilot's version (`CARGO_PKG_VERSION`).
    pub version: String,
}

/// One running wipe job, from the engine's `Progress`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WipeSample {
    /// Bytes durably written so far.
    pub done_bytes: u64,
    /// Bytes the job writes in all.
    pub total_bytes: u64,
    /// Current rate of the job's phase, bytes per second.
    pub rate_bytes_per_s: f64,
}

/// Exposition format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text format 0.0.4 (node_exporter's textfile collector reads this).
    Text,
    /// OpenMetrics 1.0 text (`# UNIT` lines, `# EOF`).
    OpenMetrics,
}

impl Format {
    /// The `Content-Type` of a response in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// The format an `Accept` header asks for: OpenMetrics when it names
    /// `application/openmetrics-text` (as Prometheus does by default), else text.
    pub fn from_accept(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Text,
        }
    }
}

/// Values of `md/array_state` (md.rst), one `mdpilot_array_state` series each.
pub const ARRAY_STATES: [&str; 10] = [
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
];

/// Values of `md/sync_action` (md.rst), one `mdpilot_array_sync_action` series each.
pub const SYNC_ACTIONS: [&str; 7] = [
    "idle", "resync", "recover", "check", "repair", "reshape", "frozen",
];

/// Member states of `mdpilot_array_members`.
pub const MEMBER_STATES: [&str; 6] = [
    "active",
    "spare",
    "faulty",
    "down",
    "write-mostly",
    "journal",
];

const LEASE_KINDS: [LeaseKind; 4] = [
    LeaseKind::Installer,
    LeaseKind::WipeJob,
    LeaseKind::Admin,
    LeaseKind::DbusClient,
];

/// Every family: (name as exposed, help). The README table follows this list.
pub const FAMILIES: [(&str, &str); 25] = [
    ("mdpilot_build_info", "mdpilot version (value 1)."),
    ("mdpilot_mdstat_parse_errors", "Parts of /proc/mdstat that could not be parsed."),
    ("mdpilot_speed_limit_bytes_per_second", "Global resync speed limit, /proc/sys/dev/raid/speed_limit_{min,max} (the kernel unit is KiB/s)."),
    ("mdpilot_speed_limit_original_bytes_per_second", "Original global speed limit saved by mdpilot while its leases change the knob (restored when the last lease goes)."),
    ("mdpilot_policy_leases", "Live resync priority leases by kind of holder."),
    ("mdpilot_policy_install_applied_timestamp_seconds", "When the install policy lease was taken, Unix time (no samples while the state file keeps no timestamp)."),
    ("mdpilot_wipe_jobs_running", "Wipe jobs running in the service."),
    ("mdpilot_wipe_done_bytes", "Bytes durably written by the running wipe jobs."),
    ("mdpilot_wipe_total_bytes", "Bytes the running wipe jobs write in all."),
    ("mdpilot_wipe_rate_bytes_per_second", "Summed current rate of the running wipe jobs."),
    ("mdpilot_array_info", "Array identity (value 1): level, uuid and metadata version as labels."),
    ("mdpilot_array_state", "md/array_state, one series per state, 1 for the current one (from the /proc/mdstat header where sysfs is absent)."),
    ("mdpilot_array_size_bytes", "Array size, the blocks of /proc/mdstat (KiB) in bytes."),
    ("mdpilot_array_raid_disks", "md/raid_disks: members the array is built of."),
    ("mdpilot_array_degraded", "md/degraded: members missing from the array (0 when whole)."),
    ("mdpilot_array_members", "Members by state: active (in sync), spare, faulty, down (empty slots), write-mostly, journal."),
    ("mdpilot_array_sync_action", "md/sync_action, one series per action, 1 for the current one."),
    ("mdpilot_array_sync_completed_ratio", "md/sync_completed as a fraction of the running sync (no sample while none runs)."),
    ("mdpilot_array_sync_speed_bytes_per_second", "md/sync_speed, the recent speed of the running sync (the kernel unit is KiB/s)."),
    ("mdpilot_array_sync_remaining_seconds", "Estimated time left of the running sync (finish= of /proc/mdstat)."),
    ("mdpilot_array_mismatch_sectors", "md/mismatch_cnt: 512-byte sectors found inconsistent by the last check or repair."),
    ("mdpilot_array_last_check_completion_timestamp_seconds", "When the last check completed, Unix time (no samples until mdpilot records checks)."),
    ("mdpilot_array_last_check_mismatch_sectors", "md/mismatch_cnt at the end of the last completed check (no samples until mdpilot records checks)."),
    ("mdpilot_array_sync_speed_limit_bytes_per_second", "Effective md/sync_speed_{min,max} of the array (the kernel unit is KiB/s)."),
    ("mdpilot_array_sync_speed_limit_local", "1 when md/sync_speed_{min,max} is set for the array (local), 0 when it follows the global limit (system)."),
];

#[derive(Debug, Clone, Copy)]
enum Value {
    Int(i64),
    Float(f64),
}

type Labels = Vec<(&'static str, String)>;

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
    }
}

impl Collector for Families {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for fam in &self.0 {
            let (full, help) = FAMILIES[fam.idx];
            let unit = unit_of(full);
            // prometheus-client appends `_<unit>` to the name it is given.
            let name = match &unit {
                Some(u) => &full[..full.len() - u.as_str().len() - 1],
                None => full,
            };
            let mut metric = encoder.encode_descriptor(
                name,
                help,
                unit.as_ref(),
                prometheus_client::metrics::MetricType::Gauge,
            )?;
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

/// Escapes a label value as the exposition formats require (`\`, `"`, newline);
/// prometheus-client writes values as given.
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn int(v: u64) -> Value {
    Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
}

struct Builder(Vec<Fam>);

impl Builder {
    fn fam(&mut self, name: &str) -> &mut Fam {
        let idx = FAMILIES
            .iter()
            .position(|(n, _)| *n == name)
            .expect("family listed in FAMILIES");
        if let Some(i) = self.0.iter().position(|f| f.idx == idx) {
            return &mut self.0[i];
        }
        self.0.push(Fam {
            idx,
            samples: Vec::new(),
        });
        self.0.last_mut().expect("just pushed")
    }

    fn add(&mut self, name: &str, labels: Labels, value: Value) {
        self.fam(name).samples.push((labels, value));
    }
}

/// Renders every family of [`FAMILIES`] for `snap` in `format`. Pure; output ends with a
/// newline (OpenMetrics: with `# EOF`).
pub fn render(snap: &Snapshot, format: Format) -> String {
    let mut b = Builder(Vec::new());
    // Describe every family in the listed order, samples or not.
    for (name, _) in FAMILIES {
        b.fam(name);
    }
    global(&mut b, snap);
    for a in &snap.model.arrays {
        array(&mut b, a);
    }
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Families(b.0)));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry)
        .expect("writing to a String cannot fail");
    match format {
        Format::OpenMetrics => out,
        // 0.0.4 has no UNIT and no EOF; everything else is the same for gauges.
        Format::Text => out
            .lines()
            .filter(|l| !l.starts_with("# UNIT ") && *l != "# EOF")
            .fold(String::with_capacity(out.len()), |mut s, l| {
                s.push_str(l);
                s.push('\n');
                s
            }),
    }
}

fn global(b: &mut Builder, snap: &Snapshot) {
    b.add(
        "mdpilot_build_info",
        vec![("version", esc(&snap.version))],
        Value::Int(1),
    );
    b.add(
        "mdpilot_mdstat_parse_errors",
        vec![],
        int(snap.model.errors.len() as u64),
    );
    let view = snap.policy.as_ref();
    let limit = |min: bool| {
        let v = view.and_then(|v| {
            if min {
                v.speed_limit_min
            } else {
                v.speed_limit_max
            }
        });
        let m = if min {
            snap.model.speed_limit_min
        } else {
            snap.model.speed_limit_max
        };
        m.or(v)
    };
    for (bound, min) in [("min", true), ("max", false)] {
        if let Some(kib) = limit(min) {
            b.add(
                "mdpilot_speed_limit_bytes_per_second",
                vec![("bound", bound.into())],
                int(kib.saturating_mul(1024)),
            );
        }
    }
    if let Some(v) = view {
        for (bound, orig) in [
            ("min", v.originals.speed_limit_min),
            ("max", v.originals.speed_limit_max),
        ] {
            if let Some(kib) = orig {
                b.add(
                    "mdpilot_speed_limit_original_bytes_per_second",
                    vec![("bound", bound.into())],
                    int(kib.saturating_mul(1024)),
                );
            }
        }
        for kind in LEASE_KINDS {
            let n = v
                .leases
                .iter()
                .filter(|l| l.kind == kind && !l.dead)
                .count();
            b.add(
                "mdpilot_policy_leases",
                vec![("kind", kind.as_str().into())],
                int(n as u64),
            );
        }
    }
    if let Some(t) = snap.install_applied_at {
        b.add(
            "mdpilot_policy_install_applied_timestamp_seconds",
            vec![],
            Value::Float(t),
        );
    }
    if let Some(jobs) = &snap.wipe_jobs {
        b.add("mdpilot_wipe_jobs_running", vec![], int(jobs.len() as u64));
        let done: u64 = jobs.iter().map(|j| j.done_bytes).sum();
        let total: u64 = jobs.iter().map(|j| j.total_bytes).sum();
        // `Sum` of no f64 is -0.0.
        let rate = jobs.iter().fold(0.0, |r, j| r + j.rate_bytes_per_s);
        b.add("mdpilot_wipe_done_bytes", vec![], int(done));
        b.add("mdpilot_wipe_total_bytes", vec![], int(total));
        b.add(
            "mdpilot_wipe_rate_bytes_per_second",
            vec![],
            Value::Float(rate),
        );
    }
}

/// The `md/array_state` word, or the nearest one from the `/proc/mdstat` header.
fn array_state_word(a: &Array) -> String {
    if let Some(s) = a.sysfs.as_ref().and_then(|s| s.array_state.as_deref()) {
        return s.to_string();
    }
    match (a.state, a.read_only) {
        (ArrayState::Inactive, _) => "inactive",
        (ArrayState::Broken, _) => "broken",
        (ArrayState::Active, Some(ReadOnly::ReadOnly)) => "readonly",
        (ArrayState::Active, Some(ReadOnly::AutoReadOnly)) => "read-auto",
        (ArrayState::Active, None) => "active",
    }
    .to_string()
}

/// The `md/sync_action` word, or the nearest one from the mdstat sync line (`idle` without).
fn sync_action_word(a: &Array) -> String {
    if let Some(s) = a.sysfs.as_ref().and_then(|s| s.sync_action.as_deref()) {
        return s.to_string();
    }
    match a.sync.as_ref().map(|s| s.action.as_str()) {
        Some("recovery") => "recover".into(),
        Some(w) => w.to_string(),
        None => "idle".into(),
    }
}

/// (done, total) of the running sync in KiB: `md/sync_completed` (sectors / 2), else the
/// mdstat progress line.
fn sync_progress_kib(a: &Array) -> Option<(f64, f64)> {
    if let Some(c) = a.sysfs.as_ref().and_then(|s| s.sync_completed) {
        return match c {
            SyncCompleted::Sectors { done, total } if total > 0 => {
                Some((done as f64 / 2.0, total as f64 / 2.0))
            }
            _ => None,
        };
    }
    let s = a.sync.as_ref().filter(|s| s.state == SyncState::Running)?;
    match (s.done_kib, s.total_kib) {
        (Some(d), Some(t)) if t > 0 => Some((d as f64, t as f64)),
        _ => None,
    }
}

fn array(b: &mut Builder, a: &Array) {
    let sys = a.sysfs.as_ref();
    let name = esc(&a.name);
    let arr = || -> Labels { vec![("array", name.clone())] };
    let level = a
        .level
        .as_deref()
        .or(sys.and_then(|s| s.level.as_deref()))
        .unwrap_or("");
    let metadata = sys
        .and_then(|s| s.metadata_version.as_deref())
        .or(a.metadata.as_deref())
        .unwrap_or("");
    b.add(
        "mdpilot_array_info",
        vec![
            ("array", name.clone()),
            ("level", esc(level)),
            ("metadata", esc(metadata)),
            (
                "uuid",
                esc(sys.and_then(|s| s.uuid.as_deref()).unwrap_or("")),
            ),
        ],
        Value::Int(1),
    );
    let state = array_state_word(a);
    for s in ARRAY_STATES {
        b.add(
            "mdpilot_array_state",
            vec![("array", name.clone()), ("state", s.into())],
            Value::Int((s == state) as i64),
        );
    }
    if !ARRAY_STATES.contains(&state.as_str()) {
        b.add(
            "mdpilot_array_state",
            vec![("array", name.clone()), ("state", esc(&state))],
            Value::Int(1),
        );
    }
    if let Some(kib) = a.size_kib {
        b.add(
            "mdpilot_array_size_bytes",
            arr(),
            int(kib.saturating_mul(1024)),
        );
    }
    let raid_disks = sys.and_then(|s| s.raid_disks).or(a.raid_disks);
    if let Some(n) = raid_disks {
        b.add("mdpilot_array_raid_disks", arr(), int(n.into()));
    }
    let degraded = sys.and_then(|s| s.degraded).or_else(|| {
        a.raid_disks
            .zip(a.active_disks)
            .map(|(t, act)| t.saturating_sub(act))
    });
    if let Some(d) = degraded {
        b.add("mdpilot_array_degraded", arr(), int(d.into()));
    }
    let count = |f: MemberFlag| a.members.iter().filter(|m| m.flags.contains(&f)).count() as u64;
    let active = match (a.state, a.active_disks) {
        (ArrayState::Active, Some(n)) => u64::from(n),
        (ArrayState::Active, None) => a
            .members
            .iter()
            .filter(|m| {
                !m.flags.iter().any(|f| {
                    matches!(
                        f,
                        MemberFlag::Faulty | MemberFlag::Spare | MemberFlag::Journal
                    )
                })
            })
            .count() as u64,
        _ => 0,
    };
    let down = a
        .member_status
        .as_deref()
        .map_or(0, |s| s.bytes().filter(|&c| c == b'_').count() as u64);
    for (state, n) in [
        ("active", active),
        ("spare", count(MemberFlag::Spare)),
        ("faulty", count(MemberFlag::Faulty)),
        ("down", down),
        ("write-mostly", count(MemberFlag::WriteMostly)),
        ("journal", count(MemberFlag::Journal)),
    ] {
        b.add(
            "mdpilot_array_members",
            vec![("array", name.clone()), ("state", state.into())],
            int(n),
        );
    }
    let action = sync_action_word(a);
    for s in SYNC_ACTIONS {
        b.add(
            "mdpilot_array_sync_action",
            vec![("array", name.clone()), ("action", s.into())],
            Value::Int((s == action) as i64),
        );
    }
    if !SYNC_ACTIONS.contains(&action.as_str()) {
        b.add(
            "mdpilot_array_sync_action",
            vec![("array", name.clone()), ("action", esc(&action))],
            Value::Int(1),
        );
    }
    let progress = sync_progress_kib(a);
    if let Some((done, total)) = progress {
        b.add(
            "mdpilot_array_sync_completed_ratio",
            arr(),
            Value::Float((done / total).clamp(0.0, 1.0)),
        );
    }
    let running = a.sync.as_ref().filter(|s| s.state == SyncState::Running);
    let speed_kib = sys
        .and_then(|s| s.sync_speed_kib_s)
        .or(running.and_then(|s| s.speed_kib_s));
    if let (Some(v), true) = (speed_kib, progress.is_some() || running.is_some()) {
        b.add(
            "mdpilot_array_sync_speed_bytes_per_second",
            arr(),
            int(v.saturating_mul(1024)),
        );
    }
    let remaining = running
        .and_then(|s| s.finish_min)
        .map(|m| m * 60.0)
        .or_else(|| {
            let (done, total) = progress?;
            let v = speed_kib.filter(|&v| v > 0)?;
            Some((total - done).max(0.0) / v as f64)
        });
    if let (Some(r), true) = (remaining, progress.is_some() || running.is_some()) {
        b.add(
            "mdpilot_array_sync_remaining_seconds",
            arr(),
            Value::Float(r),
        );
    }
    if let Some(m) = sys.and_then(|s| s.mismatch_cnt) {
        b.add("mdpilot_array_mismatch_sectors", arr(), int(m));
    }
    for (bound, lim) in [
        ("min", sys.and_then(|s| s.sync_speed_min)),
        ("max", sys.and_then(|s| s.sync_speed_max)),
    ] {
        let Some(lim) = lim else { continue };
        let labels = vec![("array", name.clone()), ("bound", bound.to_string())];
        b.add(
            "mdpilot_array_sync_speed_limit_bytes_per_second",
            labels.clone(),
            int(lim.kib_s.saturating_mul(1024)),
        );
        b.add(
            "mdpilot_array_sync_speed_limit_local",
            labels,
            Value::Int((!lim.system) as i64),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_header_picks_the_format() {
        assert_eq!(Format::from_accept(None), Format::Text);
        assert_eq!(
            Format::from_accept(Some(
                "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
            )),
            Format::OpenMetrics
        );
        assert_eq!(Format::from_accept(Some("text/plain")), Format::Text);
    }

    #[test]
    fn units_are_name_suffixes() {
        for (name, help) in FAMILIES {
            assert!(name.starts_with("mdpilot_"), "{name}");
            assert!(help.ends_with('.') && !help.contains('\n'), "{name}");
        }
        let s = render(&Snapshot::default(), Format::OpenMetrics);
        assert!(
            s.contains("# UNIT mdpilot_array_sync_completed_ratio ratio\n"),
            "{s}"
        );
        assert!(s.ends_with("# EOF\n"));
        let t = render(&Snapshot::default(), Format::Text);
        assert!(!t.contains("# UNIT") && !t.contains("# EOF"), "{t}");
        assert!(
            t.contains("# TYPE mdpilot_array_sync_remaining_seconds gauge\n"),
            "{t}"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(esc("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
