//! Build-time generators for packaging, from mdpilot's clap definitions
//! (`mdpilot::cli::args::command`):
//!
//! - `cargo run -p xtask -- man OUTDIR`: `mdpilot.8` and `mdpilot-SUBCOMMAND.8` for each
//!   subcommand (clap_mangen), plus the hand-written `docs/man/*.5` copied beside them;
//! - `cargo run -p xtask -- completions OUTDIR`: `mdpilot.bash`, `_mdpilot` (zsh) and
//!   `mdpilot.fish` (clap_complete).
//!
//! packaging/build-deb runs both; nothing generated is committed.

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

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (what, out) = match args.as_slice() {
        [w, o] if w == "man" || w == "completions" => (w.as_str(), PathBuf::from(o)),
        _ => {
            eprintln!("usage: cargo run -p xtask -- man|completions OUTDIR");
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
