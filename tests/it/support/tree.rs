//! Temporary kernel trees: a temp dir holding the `/proc`, `/sys`, `/dev`, `/etc` and `/run`
//! files a test needs, handed to the code as its `--root` (or a [`Root`]). Nothing touches the
//! host's files.

use std::path::{Path, PathBuf};
use std::process::Command;

pub use mdpilot::host::Root;
use mdpilot::policy::{Policy, PolicySettings};
pub use mdpilot::sim::Sim;

/// Writes `text` to `root/rel`, creating the parent directories.
pub fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// Replaces `root/rel` with `text` at once (a temporary file beside it, renamed over it), as the
/// simulator does: a reader polling the file never sees it empty or half written, which the
/// kernel's `/proc/mdstat` never is either.
pub fn replace(root: &Path, rel: &str, text: &str) {
    let tmp = format!("{rel}.replacing");
    write(root, &tmp, text);
    std::fs::rename(root.join(tmp), root.join(rel)).unwrap();
}

/// Writes each `(file, text)` under `root/dir` (see [`write`]).
pub fn write_all(root: &Path, dir: &str, files: &[(&str, &str)]) {
    for (file, text) in files {
        write(root, &format!("{dir}/{file}"), text);
    }
}

/// The file's text, trimmed (panics when it cannot be read).
pub fn read_trim(p: impl AsRef<Path>) -> String {
    std::fs::read_to_string(p).unwrap().trim().to_string()
}

/// A temp root holding only `proc/mdstat` = `mdstat`.
pub fn mdstat_root(mdstat: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "proc/mdstat", mdstat);
    d
}

/// `proc/sys/dev/raid/speed_limit_{min,max}` = 1000 / 200000 under `root` (the kernel defaults).
pub fn write_speed_limits(root: &Path) {
    write(root, "proc/sys/dev/raid/speed_limit_min", "1000\n");
    write(root, "proc/sys/dev/raid/speed_limit_max", "200000\n");
}

/// A root for `mdpilot serve --root` wiping real (loop) devices: `sys` and `dev` are links to
/// the host's (read by the probe; a loop device is no md array, so nothing is written there)
/// while `proc` is private (no arrays, default speed limits, the host's mountinfo and swaps),
/// so the policy's files and its state file stay in the temp dir. A config drop-in sets
/// `progress_interval_ms = 100`.
pub fn job_root() -> tempfile::TempDir {
    // On tmpfs where there is one, as /run is on a real system: the policy state's fsyncs must
    // not queue behind the gigabytes a wipe test leaves dirty on the disk's filesystem.
    let mut b = tempfile::Builder::new();
    b.prefix("mdpilot-jobroot.");
    let t = b.tempdir_in("/dev/shm").or_else(|_| b.tempdir()).unwrap();
    let r = t.path();
    std::os::unix::fs::symlink("/sys", r.join("sys")).unwrap();
    std::os::unix::fs::symlink("/dev", r.join("dev")).unwrap();
    write(
        r,
        "proc/mdstat",
        "Personalities : \nunused devices: <none>\n",
    );
    write_speed_limits(r);
    std::fs::create_dir_all(r.join("proc/self")).unwrap();
    std::fs::copy("/proc/self/mountinfo", r.join("proc/self/mountinfo")).unwrap();
    std::fs::copy("/proc/swaps", r.join("proc/swaps")).unwrap();
    write(
        r,
        "etc/mdpilot/config.d/test.toml",
        "[service]\nprogress_interval_ms = 100\n",
    );
    t
}

/// A fake `/sys` and `/proc` under a temp root for the real loop device `d`: a partition `<name>p1` mounted on `/srv/data` and held by md5
/// (whose `array_state` is `holder_state`), and a resyncing md7 with the disk as a slave.
pub fn disk_tree(d: &super::LoopDev, holder_state: &str) -> tempfile::TempDir {
    use std::os::unix::fs::symlink;
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let name = &d.name();
    let (maj, min) = {
        use std::os::unix::fs::MetadataExt;
        let r = std::fs::metadata(&d.path).unwrap().rdev();
        (libc::major(r), libc::minor(r))
    };
    let block = "sys/devices/virtual/block";
    let dev = format!("{block}/{name}");
    let part = format!("{dev}/{name}p1");
    write_all(
        root,
        &format!("{dev}/queue"),
        &[
            ("optimal_io_size", "1572864\n"),
            ("minimum_io_size", "524288\n"),
            ("write_zeroes_max_bytes", "0\n"),
            ("discard_max_bytes", "4096\n"),
            ("rotational", "1\n"),
        ],
    );
    write_all(root, &part, &[("partition", "1\n"), ("dev", "259:77\n")]);
    for dir in [format!("{dev}/holders"), format!("{part}/holders/md5")] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    // md5 holds the partition; md7 (resyncing) has the disk as a slave.
    for md in ["md5", "md7"] {
        let m = root.join(block).join(md);
        std::fs::create_dir_all(m.join("slaves")).unwrap();
        std::fs::create_dir_all(root.join("sys/class/block")).unwrap();
        std::fs::create_dir_all(root.join("sys/block")).unwrap();
        std::fs::create_dir_all(m.join("md")).unwrap();
        symlink(&m, root.join("sys/class/block").join(md)).unwrap();
        symlink(&m, root.join("sys/block").join(md)).unwrap();
    }
    write_all(
        root,
        &format!("{block}/md5/md"),
        &[("array_state", holder_state), ("sync_action", "idle")],
    );
    write(root, &format!("{block}/md7/md/sync_action"), "resync\n");
    std::fs::create_dir_all(root.join(format!("{block}/md7/slaves/{name}"))).unwrap();
    symlink(root.join(&dev), root.join("sys/class/block").join(name)).unwrap();
    std::fs::create_dir_all(root.join("sys/dev/block")).unwrap();
    symlink(
        format!("../../devices/virtual/block/{name}"),
        root.join(format!("sys/dev/block/{maj}:{min}")),
    )
    .unwrap();
    write(
        root,
        "proc/self/mountinfo",
        "22 1 8:2 / / rw - ext4 /dev/sda2 rw\n\
         40 22 259:77 / /srv/data rw,relatime - ext4 /dev/fake rw\n",
    );
    write(root, "proc/swaps", "Filename\tType\tSize\tUsed\tPriority\n");
    t
}

/// A temp root with `sys/block/<array>/md/sync_action` = `action` and `resync_start` = 1024;
/// also returns that `md` directory.
pub fn md_root(array: &str, action: &str) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let md = format!("sys/block/{array}/md");
    write_all(
        d.path(),
        &md,
        &[("sync_action", action), ("resync_start", "1024")],
    );
    let md = d.path().join(md);
    (d, md)
}

/// The policy tests' kernel: a temporary root with `/proc/sys/dev/raid/speed_limit_{min,max}` =
/// 1000 / 200000 and `/sys/block/md0/md/sync_speed_{min,max}` = `1000 (system)` /
/// `200000 (system)`.
///
/// Regular files cannot emulate `system` semantics: writing `system` to a per-array file leaves
/// the text `system`, which the tests check (and [`FakeTree::settle`] turns back into
/// `N (system)` the way the kernel would show it).
pub struct FakeTree {
    pub dir: tempfile::TempDir,
}

impl Default for FakeTree {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeTree {
    pub fn new() -> Self {
        let t = FakeTree {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(t.root().proc("sys/dev/raid")).unwrap();
        std::fs::create_dir_all(t.root().sys("block/md0/md")).unwrap();
        t.set("/proc/sys/dev/raid/speed_limit_min", "1000\n");
        t.set("/proc/sys/dev/raid/speed_limit_max", "200000\n");
        t.set("/sys/block/md0/md/sync_speed_min", "1000 (system)\n");
        t.set("/sys/block/md0/md/sync_speed_max", "200000 (system)\n");
        t
    }

    /// [`FakeTree::new`] on a kernel with `sync_io_depth` (Linux 6.16+, as 7.3 reads on a new
    /// RAID1): `/proc/sys/dev/raid/sync_io_depth` = 32 and `md0/md/sync_io_depth` =
    /// `32 (system)`.
    pub fn with_io_depth() -> Self {
        let t = FakeTree::new();
        t.set("/proc/sys/dev/raid/sync_io_depth", "32\n");
        t.set("/sys/block/md0/md/sync_io_depth", "32 (system)\n");
        t
    }

    pub fn root(&self) -> Root {
        Root::new(self.dir.path())
    }

    pub fn path(&self, abs: &str) -> PathBuf {
        self.root().path(abs)
    }

    pub fn set(&self, abs: &str, text: &str) {
        std::fs::write(self.path(abs), text).unwrap();
    }

    /// The file's text, trimmed.
    pub fn get(&self, abs: &str) -> String {
        read_trim(self.path(abs))
    }

    pub fn gmin(&self) -> String {
        self.get("/proc/sys/dev/raid/speed_limit_min")
    }

    pub fn gmax(&self) -> String {
        self.get("/proc/sys/dev/raid/speed_limit_max")
    }

    pub fn amin(&self) -> String {
        self.get("/sys/block/md0/md/sync_speed_min")
    }

    pub fn amax(&self) -> String {
        self.get("/sys/block/md0/md/sync_speed_max")
    }

    /// `/proc/sys/dev/raid/sync_io_depth`, `""` where the kernel has none.
    pub fn gdepth(&self) -> String {
        let p = self.path("/proc/sys/dev/raid/sync_io_depth");
        if p.exists() {
            read_trim(p)
        } else {
            String::new()
        }
    }

    /// `md0/md/sync_io_depth`, `""` where the kernel has none.
    pub fn adepth(&self) -> String {
        let p = self.path("/sys/block/md0/md/sync_io_depth");
        if p.exists() {
            read_trim(p)
        } else {
            String::new()
        }
    }

    /// Emulates the kernel after a `system` write: the file reads `N (system)` again.
    pub fn settle(&self) {
        for (f, v) in [
            ("/sys/block/md0/md/sync_speed_min", "1000"),
            ("/sys/block/md0/md/sync_speed_max", "200000"),
            ("/sys/block/md0/md/sync_io_depth", "32"),
        ] {
            if self.path(f).exists() && self.get(f) == "system" {
                self.set(f, &format!("{v} (system)\n"));
            }
        }
    }

    pub fn state_path(&self) -> PathBuf {
        self.path("/run/mdpilot/policy.toml")
    }

    /// The names of the files in the state directory, sorted.
    pub fn state_dir_names(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.state_path().parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    pub fn settings(&self) -> PolicySettings {
        PolicySettings {
            state_path: self.state_path(),
            install_min: 0,
            install_max: None,
        }
    }

    pub fn policy(&self) -> Policy {
        Policy::new(self.root(), self.settings())
    }

    /// `mdpilot --root TREE policy` (no failpoint, no RUST_LOG from the caller's environment);
    /// the test adds the subcommand.
    pub fn policy_cmd(&self) -> Command {
        self.policy_cmd_of(Command::new(super::BIN))
    }

    /// [`FakeTree::policy_cmd`] run through `wrapper` (e.g. [`super::as_nobody`]), which
    /// already names the binary.
    pub fn policy_cmd_of(&self, mut wrapper: Command) -> Command {
        wrapper
            .arg("--root")
            .arg(self.dir.path())
            .arg("policy")
            .env_remove("MDPILOT_FAILPOINT")
            .env_remove("RUST_LOG");
        wrapper
    }
}
