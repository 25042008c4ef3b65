//! Build-time generators for packaging, from mdpilot's clap definitions
//! (`mdpilot::cli::args::command`):
//!
//! - `cargo run -p xtask -- man OUTDIR`: `mdpilot.8` and `mdpilot-SUBCOMMAND.8` for each
//!   subcommand (clap_mangen), plus the hand-written `docs/man/*.5` copied beside them;
//! - `cargo run -p xtask -- completions OUTDIR`: `mdpilot.bash`, `_mdpilot` (zsh) and
//!   `mdpilot.fish` (clap_complete).
//!
//! packaging/build-deb runs both; nothing they generate is committed.
//!
//! - `cargo run -p xtask -- metrics-doc`: rewrites the table of families in `docs/metrics.md`
//!   from `mdpilot::metrics::{FAMILIES, FAMILY_DOCS}`. That file is committed; a test fails when
//!   it differs from what the code gives (`MDPILOT_UPDATE_DOCS=1 cargo test -p xtask` rewrites it).

use clap_complete::Shell;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Section 8: system administration commands (man-pages(7)); mdpilot needs root for most.
const SECTION: &str = "8";

fn man(out: &Path) -> std::io::Result<()> {
    let mut cmd = mdpilot::cli::args::command();
    // Propagates the global options (--root, -v) into every subcommand's page.
    cmd.build();
    let version = cmd.get_version().unwrap_or_default().to_string();
    let subs: Vec<clap::Command> = cmd
        .get_subcommands()
        .filter(|s| s.get_name() != "help")
        .cloned()
        .collect();
    let mut see_also: Vec<String> = subs
        .iter()
        .map(|s| format!("\\fBmdpilot\\-{}\\fR(8)", s.get_name().replace('-', "\\-")))
        .collect();
    see_also.push("\\fBmdpilot.toml\\fR(5)".into());
    see_also.push("\\fBmdadm\\fR(8)".into());
    see_also.push("\\fBmd\\fR(4)".into());
    write_page(out, cmd.clone(), "mdpilot", &version, &see_also)?;
    for sub in &subs {
        let name = format!("mdpilot-{}", sub.get_name());
        // The page names the command as it is typed (`mdpilot wipe`), the file as man(1) finds it.
        let sub = sub
            .clone()
            .name(name.clone())
            .bin_name(format!("mdpilot {}", sub.get_name()));
        let see = [
            "\\fBmdpilot\\fR(8)".to_string(),
            "\\fBmdpilot.toml\\fR(5)".into(),
        ];
        write_page(out, sub, &name, &version, &see)?;
    }
    let hand = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/man");
    for e in std::fs::read_dir(&hand)? {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "5") {
            std::fs::copy(&p, out.join(p.file_name().unwrap()))?;
        }
    }
    Ok(())
}

/// Renders `cmd` as `OUT/NAME.8`, with a SEE ALSO section (roff, already escaped) appended.
fn write_page(
    out: &Path,
    cmd: clap::Command,
    name: &str,
    version: &str,
    see_also: &[String],
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd)
        .title(name.to_uppercase())
        .section(SECTION)
        .source(format!("mdpilot {version}"))
        .manual("System Administration")
        .render(&mut buf)?;
    buf.extend_from_slice(format!(".SH \"SEE ALSO\"\n{}\n", see_also.join(", ")).as_bytes());
    std::fs::write(out.join(format!("{name}.{SECTION}")), buf)
}

fn completions(out: &Path) -> std::io::Result<()> {
    for (shell, file) in [
        (Shell::Bash, "mdpilot.bash"),
        (Shell::Zsh, "_mdpilot"),
        (Shell::Fish, "mdpilot.fish"),
    ] {
        let mut cmd = mdpilot::cli::args::command();
        let mut buf = Vec::new();
        clap_complete::generate(shell, &mut cmd, "mdpilot", &mut buf);
        std::fs::write(out.join(file), buf)?;
    }
    Ok(())
}

/// The line after which `docs/metrics.md` holds the generated table of families.
const FAMILIES_BEGIN: &str = "<!-- families: generated from src/metrics/families.rs by \
                              `cargo run -p xtask -- metrics-doc`; do not edit -->";
/// The line that ends the generated table.
const FAMILIES_END: &str = "<!-- end of families -->";

/// `docs/metrics.md` in the repository.
fn metrics_doc_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/metrics.md")
}

/// The Markdown table of every metric family: name, labels, help (the `# HELP` text) and the
/// source of the value, in exposition order.
fn families_table() -> String {
    let mut t = String::from("| name | labels | meaning | source |\n| --- | --- | --- | --- |\n");
    for ((name, help), (doc_name, labels, source)) in mdpilot::metrics::FAMILIES
        .iter()
        .zip(mdpilot::metrics::FAMILY_DOCS)
    {
        assert_eq!(*name, doc_name, "FAMILY_DOCS out of step with FAMILIES");
        let help = help.trim_end_matches('.').replace('|', "\\|");
        t.push_str(&format!("| `{name}` | {labels} | {help} | {source} |\n"));
    }
    t
}

/// `doc` with the text between [`FAMILIES_BEGIN`] and [`FAMILIES_END`] replaced by the table.
/// Errors: a marker is missing (the message names it).
fn with_families_table(doc: &str) -> Result<String, String> {
    let begin = doc
        .find(FAMILIES_BEGIN)
        .ok_or_else(|| format!("no line {FAMILIES_BEGIN}"))?
        + FAMILIES_BEGIN.len();
    let end = doc[begin..]
        .find(FAMILIES_END)
        .ok_or_else(|| format!("no line {FAMILIES_END} after the table's start"))?
        + begin;
    Ok(format!(
        "{}\n{}{}",
        &doc[..begin],
        families_table(),
        &doc[end..]
    ))
}

/// Rewrites the table of families in `docs/metrics.md`.
fn metrics_doc() -> Result<(), String> {
    let path = metrics_doc_path();
    let doc = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let new = with_families_table(&doc).map_err(|e| format!("{}: {e}", path.display()))?;
    std::fs::write(&path, new).map_err(|e| format!("{}: {e}", path.display()))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args == ["metrics-doc"] {
        return match metrics_doc() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("xtask metrics-doc: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let (what, out) = match args.as_slice() {
        [w, o] if w == "man" || w == "completions" => (w.as_str(), PathBuf::from(o)),
        _ => {
            eprintln!("usage: cargo run -p xtask -- man|completions OUTDIR | metrics-doc");
            return ExitCode::from(2);
        }
    };
    let r = std::fs::create_dir_all(&out).and_then(|()| match what {
        "man" => man(&out),
        _ => completions(&out),
    });
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask {what}: {}: {e}", out.display());
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Renders `page` as man(1) would: `man -l`, else `groff -man -Tutf8`; `None` when neither
    /// is installed (the test then says so and passes: CI installs man-db).
    fn render(page: &Path) -> Option<(bool, String, String)> {
        let tries: [(&str, Vec<&str>); 2] = [
            ("man", vec!["--warnings", "-l"]),
            ("groff", vec!["-man", "-Tutf8", "-ww"]),
        ];
        for (tool, args) in tries {
            let out = Command::new(tool)
                .args(&args)
                .arg(page)
                .env("MANWIDTH", "80")
                .env("MAN_KEEP_FORMATTING", "0")
                .output();
            if let Ok(o) = out {
                return Some((
                    o.status.success(),
                    plain(&String::from_utf8_lossy(&o.stdout)),
                    String::from_utf8_lossy(&o.stderr).into_owned(),
                ));
            }
        }
        None
    }

    /// Without a terminal the formatter prints bold as `X\bX` and underline as `_\bX`: the text.
    fn plain(s: &str) -> String {
        let mut out: Vec<char> = Vec::new();
        for c in s.chars() {
            if c == '\u{8}' {
                out.pop();
            } else {
                out.push(c);
            }
        }
        out.into_iter().collect::<String>().replace('\u{2010}', "-")
    }

    #[test]
    fn every_page_is_written_and_mdpilot_8_renders() {
        let dir = tempfile::tempdir().unwrap();
        man(dir.path()).unwrap();
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "mdpilot-bitmap.8",
                "mdpilot-blockdev-wipe.8",
                "mdpilot-check.8",
                "mdpilot-monitor.8",
                "mdpilot-policy.8",
                "mdpilot-serve.8",
                "mdpilot-status.8",
                "mdpilot-wipe.8",
                "mdpilot.8",
                "mdpilot.toml.5",
            ]
        );
        for page in ["mdpilot.8", "mdpilot-wipe.8", "mdpilot.toml.5"] {
            let Some((ok, text, err)) = render(&dir.path().join(page)) else {
                eprintln!("neither man nor groff installed: {page} not rendered");
                return;
            };
            assert!(ok, "{page} does not render: {err}");
            // Warnings from groff (e.g. an unknown macro) would show as broken pages.
            assert!(!err.contains("warning"), "{page}: {err}");
            assert!(text.contains("NAME"), "{page}:\n{text}");
            assert!(text.contains("SEE ALSO"), "{page}:\n{text}");
        }
        let (_, text, _) = render(&dir.path().join("mdpilot.8")).unwrap();
        for word in ["mdpilot", "--root", "blockdev-wipe", "mdpilot.toml(5)"] {
            assert!(text.contains(word), "mdpilot.8 lacks {word}:\n{text}");
        }
    }

    /// The committed `docs/metrics.md` has the table the code gives; with `MDPILOT_UPDATE_DOCS`
    /// set the file is rewritten instead (as the D-Bus XML golden test does for `dbus/`).
    #[test]
    fn metrics_doc_lists_every_family_as_the_code_does() {
        let path = metrics_doc_path();
        let doc = std::fs::read_to_string(&path).unwrap();
        let want = with_families_table(&doc).unwrap();
        if std::env::var_os("MDPILOT_UPDATE_DOCS").is_some() {
            std::fs::write(&path, &want).unwrap();
            return;
        }
        assert!(
            doc == want,
            "docs/metrics.md differs from the family table in src/metrics/families.rs; \
             regenerate with `cargo run -p xtask -- metrics-doc` (or MDPILOT_UPDATE_DOCS=1 \
             cargo test -p xtask)"
        );
        for (name, _) in mdpilot::metrics::FAMILIES {
            assert!(doc.contains(&format!("| `{name}` |")), "{name}");
        }
    }

    #[test]
    fn metrics_doc_without_markers_is_an_error() {
        let e = with_families_table("# Metrics\n").unwrap_err();
        assert!(e.contains("families: generated"), "{e}");
    }

    #[test]
    fn completions_cover_mdpilot_in_three_shells() {
        let dir = tempfile::tempdir().unwrap();
        completions(dir.path()).unwrap();
        let bash = std::fs::read_to_string(dir.path().join("mdpilot.bash")).unwrap();
        assert!(
            bash.lines()
                .any(|l| l.trim_start().starts_with("complete ")
                    && l.trim_end().ends_with(" mdpilot")),
            "no `complete ... mdpilot` in:\n{bash}"
        );
        // bash itself accepts the file and registers the completion.
        if let Ok(o) = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source {} && complete -p mdpilot",
                dir.path().join("mdpilot.bash").display()
            ))
            .output()
        {
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            assert!(String::from_utf8_lossy(&o.stdout).contains("mdpilot"));
        }
        let zsh = std::fs::read_to_string(dir.path().join("_mdpilot")).unwrap();
        assert!(zsh.starts_with("#compdef mdpilot"), "{zsh}");
        let fish = std::fs::read_to_string(dir.path().join("mdpilot.fish")).unwrap();
        assert!(fish.contains("complete -c mdpilot"), "{fish}");
        for sub in [
            "status",
            "policy",
            "wipe",
            "blockdev-wipe",
            "serve",
            "monitor",
        ] {
            assert!(
                bash.contains(sub) && zsh.contains(sub) && fish.contains(sub),
                "{sub}"
            );
        }
    }
}
