//! `/var/lib/mdpilot/bitmap-wanted`: the arrays that get an internal bitmap once their sync
//! ends. One line per array, its UUID in mdadm's colon form
//! (`3b6c2a6e:0d0e4b7a:9d5e8a7b:1c2d3e4f`). The installer's udeb writes it at finish-install when
//! a resync still runs; `AddBitmap` on D-Bus and `mdpilot bitmap add --queue` append to it; the
//! service removes a line once it added that array's bitmap (or found one). Lines it does not
//! know (another machine's array, text that is no UUID) stay. Blank lines and `#` comments are
//! ignored and kept.
//!
//! [`parse`] and [`without`] are pure; [`load`], [`append`] and [`remove`] read and replace the
//! file atomically ([`crate::atomic::write`], mode 0644), under one in-process lock.

use crate::host::Root;
use std::path::PathBuf;
use std::sync::Mutex;

/// The file's absolute path (resolved under a [`Root`]).
pub const WANTED_PATH: &str = "/var/lib/mdpilot/bitmap-wanted";

/// Serializes this process's read-modify-write cycles of the file.
static LOCK: Mutex<()> = Mutex::new(());

/// The file under `root`.
pub fn path(root: &Root) -> PathBuf {
    root.path(WANTED_PATH)
}

/// A line's UUID in lower case when the line holds one in mdadm's colon form (four groups of
/// eight hex digits), surrounding whitespace ignored; `None` for anything else.
pub fn parse_line(line: &str) -> Option<String> {
    let t = line.trim();
    let groups: Vec<&str> = t.split(':').collect();
    let ok = groups.len() == 4
        && groups
            .iter()
            .all(|g| g.len() == 8 && g.bytes().all(|b| b.is_ascii_hexdigit()));
    ok.then(|| t.to_ascii_lowercase())
}

/// The UUIDs of `text`, in order, duplicates once. Pure.
pub fn parse(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for u in text.lines().filter_map(parse_line) {
        if !out.contains(&u) {
            out.push(u);
        }
    }
    out
}

/// `text` without the lines naming `uuid` (any case); the other lines as they were. Pure.
pub fn without(text: &str, uuid: &str) -> String {
    text.lines()
        .filter(|l| parse_line(l).as_deref() != Some(&uuid.to_ascii_lowercase()))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The UUIDs in the file under `root`; empty when it does not exist.
///
/// Errors: the read's (EACCES, EIO).
pub fn load(root: &Root) -> std::io::Result<Vec<String>> {
    let _g = crate::lock::lock(&LOCK);
    Ok(read_text(root)?.map(|t| parse(&t)).unwrap_or_default())
}

fn read_text(root: &Root) -> std::io::Result<Option<String>> {
    match std::fs::read_to_string(path(root)) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Adds `uuid` (mdadm's colon form) to the file under `root` unless it is there; creates the
/// directory and the file as needed. Returns false when it was there already.
///
/// Errors: `InvalidInput` for text that is no UUID; the I/O errors of the read or the write.
pub fn append(root: &Root, uuid: &str) -> std::io::Result<bool> {
    let uuid = parse_line(uuid).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{uuid:?} is not an array UUID in mdadm's form"),
        )
    })?;
    let _g = crate::lock::lock(&LOCK);
    let text = read_text(root)?.unwrap_or_default();
    if parse(&text).contains(&uuid) {
        return Ok(false);
    }
    let mut new = text;
    if !new.is_empty() && !new.ends_with('\n') {
        new.push('\n');
    }
    new.push_str(&uuid);
    new.push('\n');
    let p = path(root);
    if let Some(dir) = p.parent() {
        std::fs::create_dir_all(dir)?;
    }
    crate::atomic::write(&p, new.as_bytes(), 0o644)?;
    Ok(true)
}

/// Removes `uuid`'s lines from the file under `root`; the file goes when nothing but blank
/// lines is left. Returns false when the UUID was not there (nothing written).
///
/// Errors: the I/O errors of the read, the write or the removal.
pub fn remove(root: &Root, uuid: &str) -> std::io::Result<bool> {
    let _g = crate::lock::lock(&LOCK);
    let Some(text) = read_text(root)? else {
        return Ok(false);
    };
    let new = without(&text, uuid);
    if new == text || (new.len() == text.len() && parse(&new) == parse(&text)) {
        return Ok(false);
    }
    if new.trim().is_empty() {
        std::fs::remove_file(path(root))?;
    } else {
        crate::atomic::write(&path(root), new.as_bytes(), 0o644)?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "3b6c2a6e:0d0e4b7a:9d5e8a7b:1c2d3e4f";
    const B: &str = "00000000:11111111:22222222:33333333";

    #[test]
    fn lines_are_uuids_in_mdadm_form_and_the_rest_stays() {
        assert_eq!(
            parse_line(&format!("  {}\n", A.to_uppercase())),
            Some(A.into())
        );
        for bad in [
            "",
            "md0",
            "3b6c2a6e-0d0e-4b7a-9d5e-8a7b1c2d3e4f",
            "3b6c2a6e:0d0e4b7a",
        ] {
            assert_eq!(parse_line(bad), None, "{bad:?}");
        }
        let text = format!("# installer\n{A}\nnot a uuid\n{B}\n{A}\n");
        assert_eq!(parse(&text), vec![A.to_string(), B.to_string()]);
        assert_eq!(without(&text, A), format!("# installer\nnot a uuid\n{B}\n"));
    }

    #[test]
    fn append_and_remove_keep_unknown_lines() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::new(d.path());
        assert!(load(&root).unwrap().is_empty());
        assert!(!remove(&root, A).unwrap());
        assert!(append(&root, A).unwrap());
        assert!(!append(&root, &A.to_uppercase()).unwrap());
        assert!(append(&root, B).unwrap());
        assert!(append(&root, "nonsense").is_err());
        assert_eq!(load(&root).unwrap(), vec![A.to_string(), B.to_string()]);
        assert!(remove(&root, A).unwrap());
        assert_eq!(
            std::fs::read_to_string(path(&root)).unwrap(),
            format!("{B}\n")
        );
        assert!(remove(&root, B).unwrap());
        assert!(!path(&root).exists(), "an empty list leaves no file");
    }
}
