//! A stand-in for mdadm (the build host has no md driver; `tests/vm` runs the real one): a
//! script that appends its argv to a log and, under a test root (`MDPILOT_ROOT`, which the
//! adapter passes), changes the array's sysfs as `mdadm --grow --bitmap=internal` would
//! (`consistency_policy` `bitmap`, `bitmap/location` `+8`). `EXIT` (in the script's
//! environment) makes it fail with that status and mdadm's message.

use std::path::{Path, PathBuf};

/// The script and its log, in a temporary directory.
pub struct FakeMdadm {
    dir: tempfile::TempDir,
}

impl FakeMdadm {
    /// A stand-in exiting `exit` (0: success, the tree changed).
    pub fn new(exit: i32) -> FakeMdadm {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("argv.log");
        let script = format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\n\
             if [ {exit} -ne 0 ]; then echo 'mdadm: Cannot add bitmap while array is resyncing' >&2; exit {exit}; fi\n\
             dev=${{3#/dev/}}\n\
             if [ -n \"$MDPILOT_ROOT\" ]; then\n\
               d=\"$MDPILOT_ROOT/sys/block/$dev/md\"\n\
               echo bitmap > \"$d/consistency_policy\"\n\
               mkdir -p \"$d/bitmap\" && echo +8 > \"$d/bitmap/location\"\n\
             fi\n",
            log.display()
        );
        let path = dir.path().join("mdadm");
        std::fs::write(&path, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        FakeMdadm { dir }
    }

    /// The program (for `MDPILOT_MDADM`).
    pub fn program(&self) -> PathBuf {
        self.dir.path().join("mdadm")
    }

    /// The program as text.
    pub fn program_str(&self) -> String {
        self.program().to_string_lossy().into_owned()
    }

    /// One line per run: its arguments.
    pub fn calls(&self) -> Vec<String> {
        read_lines(&self.dir.path().join("argv.log"))
    }
}

fn read_lines(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .map(|t| t.lines().map(String::from).collect())
        .unwrap_or_default()
}
