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
//! the machine, never from unbounded input. [`FAMILIES`] and [`FAMILY_DOCS`] list the families
//! with their labels and kernel source files; `docs/metrics.md` is generated from them.
//!
//! Files: `families.rs` (the list, the label vocabularies, the encoder), `array.rs` (the
//! per-array families), this file (the snapshot, the formats, the global families).
//!
//! Families without data are still described (`# HELP`/`# TYPE`) but have no samples:
//! - `mdpilot_array_last_check_*` for arrays with no completed check in the check record;
//! - `mdpilot_policy_install_applied_timestamp_seconds` while no installer lease applies (the
//!   time is the lease's `taken` entry in the policy state file);
//! - wipe families when [`Snapshot::wipe_jobs`] is `None` (the CLI cannot see the service's jobs).

mod array;
mod families;

pub use families::HOOK_EVENTS_DROPPED;
pub use families::{
    ARRAY_STATES, CONSISTENCY_POLICIES, FAMILIES, FAMILY_DOCS, LEASE_KINDS, MEMBER_STATES,
    SYNC_ACTIONS,
};

use crate::model::MdStat;
use crate::policy::PolicyView;
use families::{esc, int, Builder, Value};

/// Everything a scrape shows, owned (the service clones it out of its locks, then renders).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// The arrays and global limits as `status --json` has them (mdstat enriched with sysfs).
    pub model: MdStat,
    /// The policy view (leases, saved originals); `None` when the policy could not be read.
    pub policy: Option<PolicyView>,
    /// When the install policy lease was taken, Unix seconds ([`install_applied_at`] of the
    /// policy view); `None` when no installer lease applies or its state file entry predates
    /// the `taken` times.
    pub install_applied_at: Option<f64>,
    /// The last completed check per array kernel name, from the check record
    /// (`[check] state_path`, [`crate::check::CheckState`]); empty when none is recorded.
    pub last_checks: std::collections::BTreeMap<String, crate::check::CheckResult>,
    /// The io pressure, `/proc/pressure/io` `avg10` in percent: (`some`, `full`); `None`
    /// without PSI.
    pub io_pressure_pct: Option<(f64, f64)>,
    /// The pressure throttle's last decision per array kernel name (running checks only).
    pub check_throttles: std::collections::BTreeMap<String, crate::pressure::Note>,
    /// The resync throttle's last decision per array kernel name (resyncs and recoveries
    /// under `[resync] pressure_target` only; [`crate::resync_throttle`]).
    pub resync_throttles: std::collections::BTreeMap<String, crate::pressure::Note>,
    /// Running wipe jobs; `None` when unknown (the CLI), `Some(vec![])` when none run.
    pub wipe_jobs: Option<Vec<WipeSample>>,
    /// Events the service's event program queue dropped since start
    /// (`crate::service::events::hook_events_dropped_total`); `None` outside the service.
    pub hook_events_dropped: Option<u64>,
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

/// When the install policy was first applied: the earliest `taken_unix_s` of the view's live
/// leases of kind `installer` (Unix seconds); `None` without one.
pub fn install_applied_at(view: &PolicyView) -> Option<f64> {
    view.leases
        .iter()
        .filter(|l| l.kind == crate::policy::LeaseKind::Installer && !l.dead)
        .filter_map(|l| l.taken_unix_s)
        .min()
        .map(|t| t as f64)
}

/// Renders every family of [`FAMILIES`] for `snap` in `format`. Pure; output ends with a
/// newline (OpenMetrics: with `# EOF`).
pub fn render(snap: &Snapshot, format: Format) -> String {
    let mut b = Builder::default();
    global(&mut b, snap);
    for a in &snap.model.arrays {
        array::array(&mut b, a, snap.model.speed_limit_min);
        if let Some(c) = snap.last_checks.get(&a.name) {
            let arr = || vec![("array", a.name.clone())];
            b.add(
                "mdpilot_array_last_check_completion_timestamp_seconds",
                arr(),
                int(c.completed_s),
            );
            b.add(
                "mdpilot_array_last_check_mismatch_sectors",
                arr(),
                int(c.mismatch_cnt),
            );
        }
        if let Some(n) = snap.check_throttles.get(&a.name) {
            throttle(&mut b, &a.name, "check", n);
        }
        if let Some(n) = snap.resync_throttles.get(&a.name) {
            throttle(&mut b, &a.name, "resync", n);
        }
    }
    let out = b.encode();
    match format {
        Format::OpenMetrics => out,
        // 0.0.4 has no UNIT and no EOF; everything else is the same for gauges.
        Format::Text => out
            .lines()
            .filter(|l| !l.starts_with("# UNIT ") && *l != "# EOF")
            .fold(String::with_capacity(out.len()), |mut s, l| {
                s.push_str(&families::text_0_0_4_line(l));
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
    speed_limits(b, snap);
    if let Some(v) = snap.policy.as_ref() {
        lease_counts(b, v);
    }
    if let Some(t) = snap.install_applied_at {
        b.add(
            "mdpilot_policy_install_applied_timestamp_seconds",
            vec![],
            Value::Float(t),
        );
    }
    if let Some(n) = snap.hook_events_dropped {
        b.add(
            "mdpilot_hook_events_dropped_total",
            vec![],
            Value::Counter(n),
        );
    }
    if let Some((some, full)) = snap.io_pressure_pct {
        for (kind, v) in [("some", some), ("full", full)] {
            b.add(
                "mdpilot_io_pressure_ratio",
                vec![("kind", kind.to_string())],
                Value::Float(v / 100.0),
            );
        }
    }
    if let Some(jobs) = &snap.wipe_jobs {
        wipe_totals(b, jobs);
    }
}

/// The pressure throttle's families for one array's running sync, `throttle` = `check` (a
/// check or repair of mdpilot) or `resync` (a resync or recovery under `[resync]`). The limit
/// and `applied` only while the throttle holds a lease (a resync throttle standing aside, or
/// without PSI, holds none: limit 0 in its note).
fn throttle(b: &mut Builder, array: &str, throttle: &str, n: &crate::pressure::Note) {
    let arr = || {
        vec![
            ("array", array.to_string()),
            ("throttle", throttle.to_string()),
        ]
    };
    if n.limit_kib_s > 0 {
        b.add(
            "mdpilot_array_check_throttle_limit_bytes_per_second",
            arr(),
            int(n.limit_kib_s.saturating_mul(1024)),
        );
        b.add(
            "mdpilot_array_check_throttle_applied",
            arr(),
            int(u64::from(n.not_applied.is_none())),
        );
    }
    if let (Some(pct), Some(source)) = (n.pressure_pct, &n.source) {
        let mut l = arr();
        l.push(("source", esc(source)));
        b.add(
            "mdpilot_array_check_throttle_pressure_ratio",
            l,
            Value::Float(pct / 100.0),
        );
    }
    if let Some(depth) = n.io_depth {
        b.add("mdpilot_array_check_throttle_io_depth", arr(), int(depth));
    }
    for (decision, count) in &n.decisions {
        let mut l = arr();
        l.push(("decision", esc(decision)));
        b.add(
            "mdpilot_array_check_throttle_decisions_total",
            l,
            Value::Counter(*count),
        );
    }
}

/// The speed limits in effect (the model's, else the policy view's) and, with a policy view,
/// the originals mdpilot restores, in bytes/s (the kernel's KiB/s times 1024).
fn speed_limits(b: &mut Builder, snap: &Snapshot) {
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
    }
}

/// `mdpilot_policy_leases`: the live leases of each kind in the policy view `v`.
fn lease_counts(b: &mut Builder, v: &PolicyView) {
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

/// The wipe jobs' count, bytes done and to do, and summed rate (bytes/s).
fn wipe_totals(b: &mut Builder, jobs: &[WipeSample]) {
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
        for (name, _) in FAMILIES {
            let kind = if name.ends_with("_total") {
                "counter"
            } else {
                "gauge"
            };
            assert!(t.contains(&format!("# TYPE {name} {kind}\n")), "{name}");
        }
    }
}
