//! `mdpilot status`: arrays from `/proc/mdstat` enriched with sysfs, as text, JSON or Prometheus text.
//!
//! The model comes from [`crate::sysfs::collect`] (the reading layer the service uses too).
//! [`render_text`] is pure (model in, text out). The JSON form follows
//! `docs/status-json.md` (version 1): it is the [`MdStat`] model serialized.

use crate::cli::{fail, Context};
use crate::host::Root;
use crate::model::{
    Array, MdStat, MemberFlag, MemberRole, MemberState, SyncAction, SyncKind, SyncState,
};
use crate::policy::PolicyWarning;
use crate::sysfs::collect;
use crate::units::human_bytes_1dp;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `mdpilot status [--json] [ARRAY...]`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Print JSON following the status-json contract (same as `--format json`).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Exit like `mdadm --detail --test`: 0 all arrays fine, 1 at least one degraded, 2 at least
    /// one unusable (inactive, broken, or too few members for its level), 4 error reading
    /// /proc/mdstat (missing, unreadable, or not parseable).
    #[arg(long)]
    pub test: bool,
    /// `text` (default), `json`, or `prometheus`: the metrics of `serve --metrics` in the text
    /// format 0.0.4, for node_exporter's textfile collector.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<StatusFormat>,
    /// Write to FILE atomically (temporary file in the same directory, then rename) instead of
    /// stdout.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Arrays to show (`md0`, `/dev/md0`, `/dev/md/NAME`, `md/NAME`, the metadata name); all
    /// when none is given.
    pub arrays: Vec<String>,
}

/// Output formats of `mdpilot status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StatusFormat {
    /// For humans, like the summary of mdadm --detail.
    Text,
    /// The status-json contract (version 1).
    Json,
    /// Prometheus text exposition format 0.0.4 (the families of serve --metrics).
    Prometheus,
}

/// Why `mdpilot status` could not report.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// An `ARRAY` argument names no array of `/proc/mdstat`.
    #[error("no array {0} in /proc/mdstat")]
    UnknownArray(String),
}

/// Exit status when part of `/proc/mdstat` could not be parsed (the rest is still shown).
pub const EXIT_PARSE_ERRORS: u8 = 3;

/// Keeps only the arrays named in `wanted` (`md0`, `/dev/md0`, `/dev/md/root`, `md/root` or the
/// metadata name, resolved under `root` by [`crate::array_names::resolve_array`]), in `/proc/mdstat`
/// order. An empty `wanted` keeps all. Errors: [`StatusError::UnknownArray`] for the first name
/// that matches no array.
pub fn select(root: &Root, stat: &mut MdStat, wanted: &[String]) -> Result<(), StatusError> {
    if wanted.is_empty() {
        return Ok(());
    }
    let known: Vec<String> = stat.arrays.iter().map(|a| a.name.clone()).collect();
    let mut names = Vec::new();
    for w in wanted {
        match crate::array_names::resolve_array(root, w, &known) {
            Ok(n) => names.push(n),
            Err(_) => return Err(StatusError::UnknownArray(w.clone())),
        }
    }
    stat.arrays.retain(|a| names.contains(&a.name));
    Ok(())
}

/// Runs `mdpilot status`: exit 0, [`EXIT_PARSE_ERRORS`] when `errors` is not empty, 1 when
/// `/proc/mdstat` cannot be read or an `ARRAY` is unknown; with `--test` the [`crate::health`] code
/// (0, 1, 2) or 4 for any of those errors.
pub fn run(ctx: &Context, args: StatusArgs) -> ExitCode {
    let read_fail = if args.test {
        crate::health::EXIT_READ_ERROR
    } else {
        1
    };
    let mut stat = match collect(&ctx.root) {
        Ok(s) => s,
        Err(e) => return fail(&e, read_fail),
    };
    if let Err(e) = select(&ctx.root, &mut stat, &args.arrays) {
        return fail(&e, read_fail);
    }
    let throttles = resync_notes(&ctx.root, &stat);
    let mut warnings = frozen_warnings(ctx, &stat);
    warnings.extend(array_warnings(&stat));
    let format = match (args.json, args.format) {
        (true, _) => StatusFormat::Json,
        (false, f) => f.unwrap_or(StatusFormat::Text),
    };
    let text = match format {
        StatusFormat::Json => {
            let mut v = match serde_json::to_value(&stat) {
                Ok(v) => v,
                Err(e) => return fail(&e, 1),
            };
            if let Some(o) = v.as_object_mut() {
                o.insert("warnings".into(), serde_json::json!(warnings));
                o.insert("resync_throttle".into(), serde_json::json!(throttles));
            }
            add_array_facts(&mut v, &stat);
            match serde_json::to_string_pretty(&v) {
                Ok(s) => s + "\n",
                Err(e) => return fail(&e, 1),
            }
        }
        StatusFormat::Text => text_form(&stat, &throttles, &warnings),
        StatusFormat::Prometheus => crate::metrics::render(
            &crate::cli::prometheus::snapshot(&ctx.root, stat.clone()),
            crate::metrics::Format::Text,
        ),
    };
    if let Some(path) = &args.output {
        if let Err(e) = crate::cli::prometheus::write_atomic(path, &text) {
            eprintln!("mdpilot: cannot write {}: {e}", path.display());
            return ExitCode::from(1);
        }
    } else {
        // A closed pipe (`mdpilot status | head`) is the reader's choice, not a failure to report.
        let mut stdout = std::io::stdout().lock();
        if let Err(e) = stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush())
        {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                return fail(&e, 1);
            }
        }
    }
    if format == StatusFormat::Text {
        for e in &stat.errors {
            eprintln!("mdpilot: /proc/mdstat line {}: {}", e.line, e.message);
        }
    }
    if args.test && !stat.errors.is_empty() {
        ExitCode::from(crate::health::EXIT_READ_ERROR)
    } else if args.test {
        ExitCode::from(crate::health::health(&stat).exit_code())
    } else if stat.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_PARSE_ERRORS)
    }
}

/// Arrays whose `md/sync_action` reads `frozen` without a freeze of ours in the policy's journal
/// ([`crate::policy::journal::foreign_frozen`]): frozen by someone else, so their resync never
/// resumes by itself. The texts of [`PolicyWarning::ForeignFrozen`]. An unreadable config or state
/// file counts as an empty journal.
fn frozen_warnings(ctx: &Context, stat: &MdStat) -> Vec<String> {
    use crate::policy::journal::{self, ArrayNow};
    let now: BTreeMap<String, ArrayNow> = stat
        .arrays
        .iter()
        .filter_map(|a| {
            let sys = a.sysfs.as_ref()?;
            let mut attrs = BTreeMap::new();
            attrs.insert(
                journal::SYNC_ACTION.to_string(),
                sys.sync_action.as_ref()?.as_str().to_string(),
            );
            Some((
                a.name.clone(),
                ArrayNow {
                    uuid: sys.uuid.clone(),
                    attrs,
                },
            ))
        })
        .collect();
    let frozen = |a: &Array| {
        a.sysfs.as_ref().and_then(|s| s.sync_action.as_ref()) == Some(&SyncAction::Frozen)
    };
    if !stat.arrays.iter().any(frozen) {
        return Vec::new();
    }
    let changes = crate::config::Config::load(&ctx.root)
        .ok()
        .and_then(|c| crate::policy::state::read(&c.policy_settings(&ctx.root).state_path).ok())
        .map(|st| st.changes)
        .unwrap_or_default();
    journal::foreign_frozen(&changes, &now)
        .into_iter()
        .map(|array| PolicyWarning::ForeignFrozen { array }.to_string())
        .collect()
}

/// Every array's [`Array::warnings`], one line each (the `Warning:` lines and the JSON
/// `warnings`).
pub fn array_warnings(stat: &MdStat) -> Vec<String> {
    stat.arrays
        .iter()
        .flat_map(|a| a.warnings(stat.speed_limit_min))
        .map(|w| w.to_string())
        .collect()
}

/// Adds the model's derived bitmap facts to each array object of the status JSON `v` (the
/// serialized `stat`): `write_intent_bitmap` (`none`, `internal`, `file`, `llbitmap`; `null`
/// without redundancy), `bitmap_advised` (bool) and `full_resync_estimate` (`{"kib",
/// "speed_kib_s", "basis", "seconds"}` while advised, else `null`).
pub fn add_array_facts(v: &mut serde_json::Value, stat: &MdStat) {
    let Some(arrays) = v.get_mut("arrays").and_then(|a| a.as_array_mut()) else {
        return;
    };
    for (obj, a) in arrays.iter_mut().zip(&stat.arrays) {
        let Some(o) = obj.as_object_mut() else {
            continue;
        };
        let bitmap = a.is_redundant().then(|| a.write_intent_bitmap().as_str());
        let advised = a.bitmap_advised();
        let estimate = advised
            .then(|| a.full_resync_estimate(stat.speed_limit_min))
            .flatten();
        o.insert("write_intent_bitmap".into(), serde_json::json!(bitmap));
        o.insert("bitmap_advised".into(), serde_json::json!(advised));
        o.insert("full_resync_estimate".into(), serde_json::json!(estimate));
    }
}

/// The human form: one block per array in the manner of `mdadm --detail`'s summary (level,
/// state, size, counts, sync with a progress bar, bitmap, members), then the global speed
/// limits. Pure; ends with a newline.
pub fn render_text(stat: &MdStat) -> String {
    let mut out = String::new();
    if stat.arrays.is_empty() {
        out.push_str("no md arrays\n\n");
    }
    for a in &stat.arrays {
        render_array(&mut out, a);
        bitmap_rows(&mut out, a, stat.speed_limit_min);
        member_rows(&mut out, a);
        out.push('\n');
    }
    let limit = |v: Option<u64>| v.map_or("unknown".to_string(), |k| format!("{k} KiB/s"));
    let _ = writeln!(
        out,
        "Resync speed limits: min {}, max {}",
        limit(stat.speed_limit_min),
        limit(stat.speed_limit_max)
    );
    out
}

/// The resync throttle's notes of the arrays in `stat` ([`crate::resync_throttle`]); none
/// when the configuration does not load.
fn resync_notes(root: &Root, stat: &MdStat) -> crate::resync_throttle::Notes {
    let mut notes = crate::config::Config::load(root)
        .map(|c| crate::resync_throttle::NOTES.load(root, &c))
        .unwrap_or_default();
    notes.retain(|name, _| stat.arrays.iter().any(|a| &a.name == name));
    notes
}

/// The text form: [`render_text`], the resync throttle's lines, then `Warning: ...` lines.
fn text_form(
    stat: &MdStat,
    throttles: &crate::resync_throttle::Notes,
    warnings: &[String],
) -> String {
    let mut t = render_text(stat);
    t.push_str(&resync_throttle_lines(throttles));
    for w in warnings {
        let _ = writeln!(t, "Warning: {w}");
    }
    t
}

/// One line per array under the resync throttle ([`crate::resync_throttle::Note`]):
/// `Resync throttle of md1: 2000 KiB/s (recovery: io pressure 30.0% ...)`, or without a lease
/// held (`aside`, `off`) `Resync throttle of md1: none (...)`. Pure.
pub fn resync_throttle_lines(notes: &crate::resync_throttle::Notes) -> String {
    let mut out = String::new();
    for (array, n) in notes {
        let limit = match n.limit_kib_s {
            0 => "none".to_string(),
            l => format!("{l} KiB/s"),
        };
        let _ = writeln!(out, "Resync throttle of {array}: {limit} ({})", n.why);
        if let Some(na) = &n.not_applied {
            let _ = writeln!(out, "Resync throttle of {array}: not applied: {na}");
        }
    }
    out
}

/// One `{label:>16} : {value}` row.
fn row(out: &mut String, label: &str, value: &str) {
    let _ = writeln!(out, "{label:>16} : {value}");
}

/// One array's block: the rows, then the member table.
fn render_array(out: &mut String, a: &Array) {
    let sys = a.sysfs.as_ref();
    let _ = writeln!(out, "/dev/{}:", a.name);
    row(
        out,
        "Raid Level",
        a.level()
            .as_ref()
            .map_or("none (container or not started)", |l| l.as_str()),
    );
    row(out, "State", &state_text(a));
    size_rows(out, a);
    count_rows(out, a);
    if let Some((label, text)) = sync_row(a) {
        row(out, &label, &text);
    }
    if let Some(m) = sys.and_then(|s| s.mismatch_cnt).filter(|&m| m > 0) {
        row(out, "Mismatch Count", &format!("{m} sectors"));
    }
    if let Some(b) = &a.bitmap {
        let mut text = format!(
            "{}/{} pages [{} KiB], {} chunk",
            b.pages_used,
            b.pages_total,
            b.memory_kib,
            human_bytes_1dp(b.chunk_bytes)
        );
        if let Some(f) = &b.file {
            let _ = write!(text, ", file {f}");
        }
        row(out, "Bitmap", &text);
    }
    if let Some(lim) = sys.and_then(|s| s.sync_speed_min.zip(s.sync_speed_max)) {
        let src = |l: crate::model::SpeedLimit| l.origin();
        row(
            out,
            "Speed Limits",
            &format!(
                "min {} KiB/s ({}), max {} KiB/s ({})",
                lim.0.kib_s,
                src(lim.0),
                lim.1.kib_s,
                src(lim.1)
            ),
        );
    }
}

/// Consistency, the write-intent bitmap of a redundant array (with the advisor's words where
/// it has none), `md/bitmap_type` and `md/logical_block_size` where the kernel has them.
fn bitmap_rows(out: &mut String, a: &Array, global_min_kib_s: Option<u64>) {
    let sys = a.sysfs.as_ref();
    if let Some(p) = sys.and_then(|s| s.consistency_policy.as_ref()) {
        row(out, "Consistency", p.as_str());
    }
    if let Some(t) = sys.and_then(|s| s.bitmap_type.as_ref()) {
        let note = if *t == crate::model::BitmapType::Llbitmap {
            " (lockless bitmap, experimental in the kernel)"
        } else {
            ""
        };
        row(out, "Bitmap Type", &format!("{t}{note}"));
    }
    if a.bitmap.is_none() && a.is_redundant() {
        let mut text = a.write_intent_bitmap().as_str().to_string();
        if a.bitmap_advised() {
            text.push_str(": a crash or power loss means a full resync");
            if let Some(e) = a.full_resync_estimate(global_min_kib_s) {
                let _ = write!(
                    text,
                    ", about {} at {} {} KiB/s",
                    crate::units::minutes(e.seconds / 60.0),
                    e.basis,
                    e.speed_kib_s
                );
            }
        }
        row(out, "Bitmap", &text);
    }
    if let Some(l) = sys.and_then(|s| s.md_logical_block_size) {
        let note = if a.recorded_logical_block_size().is_some() {
            " (recorded in the superblock: Linux 6.18 and older cannot assemble it)"
        } else {
            ""
        };
        row(out, "Logical Block", &format!("{l} bytes{note}"));
    }
}

/// `active, auto-read-only, degraded, resyncing (sysfs: clean)`: the mdstat header word, its
/// read-only marker, [`Array::degraded`], the sync line, then `md/array_state` where read.
fn state_text(a: &Array) -> String {
    let mut state = a.state.as_str().to_string();
    if let Some(ro) = a.read_only {
        let _ = write!(state, ", {ro}");
    }
    if a.degraded().is_some_and(|d| d > 0) {
        state.push_str(", degraded");
    }
    if let Some(w) = sync_state_word(a) {
        let _ = write!(state, ", {w}");
    }
    if let Some(st) = a.sysfs.as_ref().and_then(|s| s.array_state.as_ref()) {
        let _ = write!(state, " (sysfs: {st})");
    }
    state
}

/// Array Size, Used Dev Size, Metadata, Chunk Size, UUID.
fn size_rows(out: &mut String, a: &Array) {
    let sys = a.sysfs.as_ref();
    if let Some(kib) = a.size_kib {
        row(
            out,
            "Array Size",
            &format!("{} ({kib} KiB)", human_kib(kib)),
        );
    }
    if let Some(kib) = sys.and_then(|s| s.component_size_kib) {
        row(
            out,
            "Used Dev Size",
            &format!("{} ({kib} KiB)", human_kib(kib)),
        );
    }
    row(
        out,
        "Metadata",
        a.metadata.as_deref().unwrap_or("0.90 or none"),
    );
    if let Some(chunk) = sys.and_then(|s| s.chunk_size_bytes).filter(|&c| c > 0) {
        row(out, "Chunk Size", &human_bytes_1dp(chunk));
    }
    if let Some(uuid) = a.uuid() {
        row(out, "UUID", &uuid.to_string());
    }
}

/// Raid Devices, Active Devices, Failed Devices, Spare Devices (mdstat's counts and flags).
fn count_rows(out: &mut String, a: &Array) {
    if let Some(t) = a.raid_disks {
        row(out, "Raid Devices", &t.to_string());
    }
    if let Some(act) = a.active_disks {
        let status = a.member_status.as_deref().unwrap_or("");
        row(out, "Active Devices", &format!("{act} [{status}]"));
    }
    let count = |f: MemberFlag| a.members.iter().filter(|m| m.flags.contains(&f)).count();
    let (failed, spare) = (count(MemberFlag::Faulty), count(MemberFlag::Spare));
    if failed > 0 {
        row(out, "Failed Devices", &failed.to_string());
    }
    if spare > 0 {
        row(out, "Spare Devices", &spare.to_string());
    }
}

/// The member table: slot, role (`md/dev-*/slot`), name, flag words and sysfs state.
fn member_rows(out: &mut String, a: &Array) {
    if a.members.is_empty() {
        out.push_str("    (no member devices)\n");
        return;
    }
    let sys = a.sysfs.as_ref();
    let width = a
        .members
        .iter()
        .map(|m| m.name.len())
        .max()
        .unwrap_or(0)
        .max(6);
    let _ = writeln!(out, "    Number  RaidDevice  {:<width$}  State", "Device");
    let roles = a.members_with_roles();
    for m in &a.members {
        let member_sys = sys.and_then(|s| s.members.iter().find(|x| x.name == m.name));
        let role = member_sys
            .and_then(|x| x.slot)
            .map_or("-".to_string(), |r| r.to_string());
        // The human text spells the flag word with `-` (`write-mostly`).
        let mut words: Vec<String> = m
            .flags
            .iter()
            .map(|f| f.as_str().replace('_', "-"))
            .collect();
        // The model's role: a member being recovered is rebuilding, not active.
        let member_role = roles.iter().find(|r| r.name == m.name).map(|r| r.role);
        let word = match member_role {
            // Members of a stopped or broken array are assembled, not in service.
            Some(MemberRole::InSync | MemberRole::Journal | MemberRole::Rebuilding)
                if !a.is_serving() =>
            {
                Some("assembled")
            }
            Some(MemberRole::InSync | MemberRole::Journal) => Some(crate::vocab::MEMBER_ACTIVE),
            Some(MemberRole::Rebuilding) => Some("rebuilding"),
            Some(MemberRole::Spare | MemberRole::Faulty) | None => None,
        };
        if let Some(w) = word {
            words.insert(0, w.into());
        }
        if let Some(x) = member_sys.filter(|x| !x.state.is_empty()) {
            let state: Vec<&str> = x.state.iter().map(MemberState::as_str).collect();
            words.push(format!("(sysfs: {})", state.join(",")));
        }
        if let Some(e) = member_sys.and_then(|x| x.errors).filter(|&e| e > 0) {
            words.push(format!("{e} errors"));
        }
        let _ = writeln!(
            out,
            "    {:>6}  {:>10}  {:<width$}  {}",
            m.slot,
            role,
            m.name,
            words.join(" ")
        );
    }
}

/// The verb of a running sync (`resyncing`).
fn sync_verb(kind: &SyncKind) -> &str {
    match kind {
        SyncKind::Resync => "resyncing",
        SyncKind::Recovery | SyncKind::Recover => "recovering",
        SyncKind::Reshape => "reshaping",
        SyncKind::Check => "checking",
        SyncKind::Repair => "repairing",
        SyncKind::Other(other) => other,
    }
}

/// The sync in the State row: the running one's verb ([`Array::running_sync`]), else what the
/// mdstat sync line says is queued (`resync delayed`), else the line's word and
/// `md/sync_action` (`resync idle`: sysfs says the printed sync does not run).
fn sync_state_word(a: &Array) -> Option<String> {
    if let Some(r) = a.running_sync() {
        return Some(sync_verb(&r.kind).to_string());
    }
    let s = a.sync.as_ref()?;
    Some(match s.state {
        SyncState::Running => format!("{} {}", s.action, a.sync_action()),
        SyncState::Delayed => format!("{} delayed", s.action),
        SyncState::Pending => format!("{} pending", s.action),
        SyncState::Remote => format!("{} on another node", s.action),
    })
}

/// `Resync Status`.
fn sync_label(kind: &SyncKind) -> String {
    let mut word = kind.to_string();
    if let Some(c) = word.get_mut(..1) {
        c.make_ascii_uppercase();
    }
    format!("{word} Status")
}

/// The sync row, label and text: the running sync ([`Array::running_sync`]), else the queued
/// one of the mdstat line; `None` when neither.
fn sync_row(a: &Array) -> Option<(String, String)> {
    if let Some(r) = a.running_sync() {
        return Some((sync_label(&r.kind), running_text(a)));
    }
    let s = a.sync.as_ref()?;
    let text = match s.state {
        SyncState::Delayed => "delayed: waits for another array on the same disks".into(),
        SyncState::Pending => "pending: starts on the first write (auto-read-only)".into(),
        SyncState::Remote => "done by another cluster node".into(),
        SyncState::Running => format!("not running (md/sync_action {})", a.sync_action()),
    };
    Some((sync_label(&s.action), text))
}

/// `[=====>..............]  27.3% (142848/523264 KiB) at 53.6 MiB/s, ETA 2m 06s`: the
/// model's running sync ([`Array::sync_progress`], [`Array::sync_speed_kib_s`],
/// [`Array::sync_remaining_s`]: sysfs over mdstat).
fn running_text(a: &Array) -> String {
    let progress = a.sync_progress();
    let pct = progress.map_or(0.0, |p| p.percent);
    let mut t = format!("{} {pct:5.1}%", progress_bar(pct, 20));
    if let Some(p) = progress {
        let (d, total) = (p.done_sectors / 2, p.total_sectors / 2);
        let _ = write!(t, " ({d}/{total} KiB)");
    }
    if let Some(v) = a.sync_speed_kib_s() {
        let _ = write!(t, " at {}/s", human_kib(v));
    }
    if let Some(secs) = a.sync_remaining_s() {
        let secs = if secs.is_finite() && secs > 0.0 {
            secs.round() as u64
        } else {
            0
        };
        let eta = crate::units::duration(secs, crate::units::DurationStyle::Spaced);
        let _ = write!(t, ", ETA {eta}");
    }
    t
}

/// A text progress bar `[====>.....]` of `width` cells for `percent` (0..=100, clamped).
pub fn progress_bar(percent: f64, width: usize) -> String {
    let p = if percent.is_finite() {
        percent.clamp(0.0, 100.0)
    } else {
        0.0
    };
    let filled = ((p / 100.0) * width as f64).floor() as usize;
    let filled = filled.min(width);
    let mut bar = String::with_capacity(width + 2);
    bar.push('[');
    bar.push_str(&"=".repeat(filled));
    if filled < width {
        bar.push('>');
        bar.push_str(&".".repeat(width - filled - 1));
    }
    bar.push(']');
    bar
}

/// KiB as a binary-unit size with one decimal ([`human_bytes_1dp`]): `523264` → `511.0 MiB`.
pub fn human_kib(kib: u64) -> String {
    human_bytes_1dp(kib.saturating_mul(1024))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::minutes;

    #[test]
    fn resync_throttle_lines_say_the_limit_and_why() {
        let note = |limit: u64, why: &str, na: Option<&str>| crate::resync_throttle::Note {
            limit_kib_s: limit,
            why: why.into(),
            not_applied: na.map(String::from),
            ..Default::default()
        };
        let notes = crate::resync_throttle::Notes::from([
            (
                "md1".into(),
                note(2000, "resync: io pressure 30.0% ...", None),
            ),
            (
                "md2".into(),
                note(0, "recovery not throttled: the lease installer ...", None),
            ),
            (
                "md3".into(),
                note(5000, "recovery: ...", Some("md/sync_speed_max reads 9")),
            ),
        ]);
        assert_eq!(
            resync_throttle_lines(&notes),
            "Resync throttle of md1: 2000 KiB/s (resync: io pressure 30.0% ...)\n\
             Resync throttle of md2: none (recovery not throttled: the lease installer ...)\n\
             Resync throttle of md3: 5000 KiB/s (recovery: ...)\n\
             Resync throttle of md3: not applied: md/sync_speed_max reads 9\n"
        );
    }

    #[test]
    fn eta_of_days_prints_days() {
        assert_eq!(minutes(43200.0), "30d 00h");
        assert_eq!(minutes(197.2), "3h 17m");
    }

    #[test]
    fn human_units() {
        assert_eq!(human_kib(523264), "511.0 MiB");
        assert_eq!(human_bytes_1dp(512), "512 B");
        assert_eq!(human_bytes_1dp(67108864), "64.0 MiB");
        assert_eq!(human_kib(5853468288), "5.5 TiB");
        assert_eq!(minutes(197.2), "3h 17m");
        assert_eq!(minutes(0.2), "12s");
        assert_eq!(minutes(4.6), "4m 36s");
    }

    #[test]
    fn bar_shapes() {
        assert_eq!(progress_bar(0.0, 10), "[>.........]");
        assert_eq!(progress_bar(50.0, 10), "[=====>....]");
        assert_eq!(progress_bar(100.0, 10), "[==========]");
        assert_eq!(progress_bar(f64::NAN, 4), "[>...]");
    }

    #[test]
    fn select_accepts_dev_paths_and_names_unknown() {
        let mut s = crate::mdstat::parse(
            "md0 : active raid0 sda[0]\n  100 blocks 64k chunks\nmd1 : active raid0 sdb[0]\n  100 blocks 64k chunks\n",
        );
        let d = tempfile::tempdir().unwrap();
        let root = Root::new(d.path());
        select(&root, &mut s, &["/dev/md1".into()]).unwrap();
        assert_eq!(s.arrays.len(), 1);
        assert_eq!(s.arrays[0].name, "md1");
        let err = select(&root, &mut s, &["md9".into()]).unwrap_err();
        assert_eq!(err.to_string(), "no array md9 in /proc/mdstat");
    }

    #[test]
    fn select_accepts_dev_md_links() {
        let mut s = crate::mdstat::parse(
            "md126 : active raid0 sda[0]
  100 blocks 64k chunks
md127 : active raid0 sdb[0]
  100 blocks 64k chunks
",
        );
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("dev/md")).unwrap();
        std::os::unix::fs::symlink("../md127", d.path().join("dev/md/root")).unwrap();
        let root = Root::new(d.path());
        for w in ["/dev/md/root", "md/root"] {
            let mut s = s.clone();
            select(&root, &mut s, &[w.into()]).unwrap();
            assert_eq!(s.arrays.len(), 1, "{w}");
            assert_eq!(s.arrays[0].name, "md127");
        }
        let err = select(&root, &mut s, &["/dev/md/home".into()]).unwrap_err();
        assert_eq!(err.to_string(), "no array /dev/md/home in /proc/mdstat");
    }

    #[test]
    fn text_has_size_sync_and_limits() {
        let mut s = crate::mdstat::parse(
            "Personalities : [raid1]\nmd0 : active raid1 vdb[1] vda[0]\n      523264 blocks super 1.2 [2/2] [UU]\n      [=============>.......]  resync = 68.5% (359232/523264) finish=0.0min speed=179616K/sec\n      bitmap: 0/8 pages [0KB], 65536KB chunk\n\nunused devices: <none>\n",
        );
        s.speed_limit_min = Some(1000);
        let t = render_text(&s);
        assert!(t.contains("511.0 MiB (523264 KiB)"), "{t}");
        assert!(
            t.contains("Resync Status : [=============>......]  68.5%"),
            "{t}"
        );
        assert!(t.contains("175.4 MiB/s"), "{t}");
        assert!(t.contains("min 1000 KiB/s, max unknown"), "{t}");
    }

    #[test]
    fn a_member_being_rebuilt_reads_rebuilding_not_active() {
        let s = crate::mdstat::parse(
            "Personalities : [raid1]\nmd1 : active raid1 sdb[1] sda[0]\n      1046528 blocks super 1.2 [2/1] [U_]\n      [=>...................]  recovery =  8.5% (89128/1046528) finish=1.5min speed=10000K/sec\n\nunused devices: <none>\n",
        );
        let t = render_text(&s);
        let row = |name: &str| {
            t.lines()
                .find(|l| l.split_whitespace().nth(2) == Some(name))
                .unwrap_or_else(|| panic!("{name}: {t}"))
                .to_string()
        };
        assert!(row("sdb").ends_with("  rebuilding"), "{t}");
        assert!(row("sda").ends_with("  active"), "{t}");
    }
}
