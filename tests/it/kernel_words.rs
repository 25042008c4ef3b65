//! One typed word for each md fact: no module but the vocabulary (`src/vocab.rs`) spells a
//! kernel word as a string literal. Every other module matches the enums and constants of
//! `mdpilot::vocab` (re-exported by `mdpilot::model`); the simulator (`src/sim*`) writes
//! fixtures and tests write kernel trees, so both are left out, as are comments. The few
//! literals that happen to spell such a word but are no md fact (a configuration section, a
//! bus name, a D-Bus option, a metrics label name) are listed in [`NOT_MD_FACTS`] with the reason.

use std::path::{Path, PathBuf};

/// The words md prints or accepts in sysfs and `/proc/mdstat`: `md/level`, `md/array_state`,
/// the mdstat header, `md/sync_action` and the sync kinds, `dev-*/state`, the consistency
/// policy, the bitmap, `md/sync_completed`, the speed limits' origin.
const KERNEL_WORDS: &[&str] = &[
    "idle",
    "resync",
    "recover",
    "recovery",
    "check",
    "repair",
    "frozen",
    "reshape",
    "in_sync",
    "faulty",
    "spare",
    "write_mostly",
    "want_replacement",
    "replacement",
    "write_error",
    "blocked",
    "journal",
    "linear",
    "multipath",
    "raid0",
    "raid1",
    "raid4",
    "raid5",
    "raid6",
    "raid10",
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
    "read-only",
    "auto-read-only",
    "delayed",
    "pending",
    "remote",
    "none",
    "bitmap",
    "llbitmap",
    "ppl",
    "local",
    "system",
    "external",
    "internal",
    "file",
];

/// `(file, text on the line, why it is no md fact)`. Each entry must still match a line, so a
/// stale one fails the test too.
const NOT_MD_FACTS: &[(&str, &str, &str)] = &[
    (
        "src/mdstat.rs",
        "if t.starts_with(\"bitmap\") {",
        "the mdstat parser's syntax: the bitmap line's keyword",
    ),
    (
        "src/mdstat.rs",
        ".strip_prefix(\"bitmap\")",
        "the mdstat parser's syntax: the bitmap line's keyword",
    ),
    (
        "src/config.rs",
        "(\"check\", self.check != new.check),",
        "the configuration's [check] section",
    ),
    (
        "src/config.rs",
        "(\"resync\", self.resync != new.resync),",
        "the configuration's [resync] section",
    ),
    (
        "src/cli/status.rs",
        "0 => \"none\".to_string(),",
        "the status line's word for no resync-throttle lease held",
    ),
    (
        "src/metrics/mod.rs",
        "throttle(&mut b, &a.name, \"check\", n);",
        "the metrics label throttle=\"check\": the check throttle, not a sync_action read",
    ),
    (
        "src/metrics/mod.rs",
        "throttle(&mut b, &a.name, \"resync\", n);",
        "the metrics label throttle=\"resync\": the resync throttle, not a sync_action read",
    ),
    (
        "src/shared.rs",
        "Pool::new(\"check\", 1)",
        "a worker pool's thread name",
    ),
    (
        "src/shared.rs",
        "Pool::new(\"bitmap\", 1)",
        "a worker pool's thread name",
    ),
    (
        "src/metrics/array.rs",
        "\"bitmap\",",
        "the label name of mdpilot_array_write_intent_bitmap",
    ),
    (
        "src/cli/monitor.rs",
        "default_value = \"system\"",
        "the system bus (--bus)",
    ),
    (
        "src/service/mod.rs",
        "default_value = \"system\"",
        "the system bus (--bus)",
    ),
    (
        "src/dbus/mod.rs",
        "\"system\" => BusChoice::System,",
        "the system bus (--bus)",
    ),
    (
        "src/cli/wipe.rs",
        "\"resync\": plan.resync,",
        "a key of the wipe plan's JSON",
    ),
    (
        "src/cli/policy.rs",
        "\"none\".to_string()",
        "a message: no profile is configured",
    ),
    (
        "src/dbus/plan.rs",
        "Data::RepeatFile { .. } => \"file\",",
        "the wipe plan's data source kind (Job.PlanData)",
    ),
    (
        "src/dbus/check.rs",
        "(\"repair\", Value::Bool(b)) => repair = *b,",
        "the name of a D-Bus method option",
    ),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The lines of `text` up to its test module (`mod tests {` at the left margin), without
/// comment lines, numbered from 1.
fn production_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .take_while(|(_, l)| !l.starts_with("mod tests {"))
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .map(|(i, l)| (i + 1, l))
}

#[test]
fn kernel_words_are_spelled_only_by_the_vocabulary() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&crate_dir.join("src"), &mut files);
    files.sort();
    let mut found = Vec::new();
    let mut used = vec![false; NOT_MD_FACTS.len()];
    for f in &files {
        let rel = f
            .strip_prefix(crate_dir)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if rel == "src/vocab.rs" || rel.starts_with("src/sim") {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in production_lines(&text) {
            let Some(w) = KERNEL_WORDS
                .iter()
                .find(|w| line.contains(&format!("\"{w}\"")))
            else {
                continue;
            };
            let allowed = NOT_MD_FACTS
                .iter()
                .position(|(file, text, _)| *file == rel && line.contains(text));
            match allowed {
                Some(i) => used[i] = true,
                None => found.push(format!("{rel}:{n}: \"{w}\" in `{}`", line.trim())),
            }
        }
    }
    assert!(
        found.is_empty(),
        "kernel words spelled outside src/vocab.rs (match the enums or constants of \
         mdpilot::vocab instead, or list a literal that is no md fact in NOT_MD_FACTS):\n{}",
        found.join("\n")
    );
    let stale: Vec<_> = NOT_MD_FACTS
        .iter()
        .zip(&used)
        .filter(|(_, u)| !**u)
        .map(|((f, t, _), _)| format!("{f}: {t}"))
        .collect();
    assert!(
        stale.is_empty(),
        "NOT_MD_FACTS entries that match no line: {stale:?}"
    );
}
