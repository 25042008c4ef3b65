//! Block devices the tests set up themselves (root only): loop devices over files in a temp
//! dir, an ext4 mount, active swap, a device-mapper table and a small tmpfs. Each is an RAII
//! guard that undoes itself on drop; tests only ever write to devices attached here.

use std::path::{Path, PathBuf};
use std::process::Command;

/// True when running as root (loop, mount and setpriv tests skip otherwise, see `need_root!`).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Runs a command, returns its stdout trimmed, panics with its stderr on failure.
pub fn run(cmd: &str, args: &[&str]) -> String {
    let o = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        o.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Whether `cmd args` ran and exited 0.
fn succeeds(cmd: &mut Command) -> bool {
    cmd.status().is_ok_and(|s| s.success())
}

/// A loop device (`losetup --direct-io=on`) over a file; detached on drop (and the file's temp
/// dir removed, when the guard made it).
pub struct LoopDev {
    pub path: PathBuf,
    /// The backing file.
    pub file: PathBuf,
    _dir: Option<tempfile::TempDir>,
}

impl LoopDev {
    /// Attaches a `size`-byte sparse file filled with nothing (reads as zeroes).
    pub fn new(size: u64) -> LoopDev {
        Self::with_fill(size, None)
    }

    /// Attaches a `size`-byte file whose every byte is `fill` (so a wipe is observable).
    pub fn filled(size: u64, fill: u8) -> LoopDev {
        Self::with_fill(size, Some(fill))
    }

    fn with_fill(size: u64, fill: Option<u8>) -> LoopDev {
        let dir = tempfile::Builder::new()
            .prefix("mdpilot-wipe-")
            .tempdir_in("/var/tmp")
            .unwrap_or_else(|_| tempfile::tempdir().unwrap());
        let file = dir.path().join("disk.img");
        let f = std::fs::File::create(&file).unwrap();
        f.set_len(size).unwrap();
        if let Some(b) = fill {
            use std::io::Write;
            let chunk = vec![b; 1 << 20];
            let mut w = std::io::BufWriter::new(&f);
            let mut left = size;
            while left > 0 {
                let n = left.min(chunk.len() as u64) as usize;
                w.write_all(&chunk[..n]).unwrap();
                left -= n as u64;
            }
            w.flush().unwrap();
        }
        f.sync_all().unwrap();
        drop(f);
        let mut d = Self::attach(&file);
        d._dir = Some(dir);
        d
    }

    /// A `size`-byte sparse file holding an MBR with two Linux partitions (8 MiB at 1 MiB, and
    /// the rest), attached with partition scanning (`losetup -P`): the partitions exist when
    /// this returns. The table is written by hand (no sfdisk on every host).
    /// Detaching removes the partitions with the device.
    pub fn partitioned(size: u64) -> LoopDev {
        use std::os::unix::fs::FileExt;
        let dir = tempfile::Builder::new()
            .prefix("mdpilot-wipe-")
            .tempdir_in("/var/tmp")
            .unwrap_or_else(|_| tempfile::tempdir().unwrap());
        let file = dir.path().join("disk.img");
        let f = std::fs::File::create(&file).unwrap();
        f.set_len(size).unwrap();
        let sectors = size / 512;
        let mut mbr = [0u8; 512];
        let entry = |e: &mut [u8], lba: u64, n: u64| {
            e[4] = 0x83;
            e[8..12].copy_from_slice(&(lba as u32).to_le_bytes());
            e[12..16].copy_from_slice(&(n as u32).to_le_bytes());
        };
        entry(&mut mbr[446..462], 2048, 16384);
        entry(&mut mbr[462..478], 18432, sectors - 18432);
        mbr[510] = 0x55;
        mbr[511] = 0xAA;
        f.write_all_at(&mbr, 0).unwrap();
        f.sync_all().unwrap();
        drop(f);
        let dev = run(
            "losetup",
            &[
                "--find",
                "--show",
                "-P",
                "--direct-io=on",
                file.to_str().unwrap(),
            ],
        );
        // Kernels without the msdos parser (minimal VM kernels) find nothing at attach: add
        // the partitions by BLKPG (partx -a) where the scan did not.
        let name = dev.trim_start_matches("/dev/").to_string();
        if !Path::new(&format!("/sys/class/block/{name}/{name}p1")).exists() {
            run("partx", &["-a", &dev]);
        }
        let _ = Command::new("udevadm").args(["settle", "-t", "5"]).status();
        LoopDev {
            path: PathBuf::from(dev),
            file,
            _dir: Some(dir),
        }
    }

    /// Attaches an existing file the caller owns (it must outlive the guard).
    pub fn attach(file: &Path) -> LoopDev {
        let dev = run(
            "losetup",
            &["--find", "--show", "--direct-io=on", file.to_str().unwrap()],
        );
        LoopDev {
            path: PathBuf::from(dev),
            file: file.to_path_buf(),
            _dir: None,
        }
    }

    /// The device's whole content (read through the device, bypassing nothing).
    pub fn read_all(&self) -> Vec<u8> {
        // Drop cached pages first so we see what reached the device.
        let _ = Command::new("blockdev")
            .args(["--flushbufs", self.path.to_str().unwrap()])
            .status();
        std::fs::read(&self.path).unwrap()
    }

    /// The device number `(major, minor)` (`st_rdev` of the node).
    pub fn devnum(&self) -> (u32, u32) {
        use std::os::unix::fs::MetadataExt;
        let r = std::fs::metadata(&self.path).unwrap().rdev();
        (libc::major(r), libc::minor(r))
    }

    /// The kernel name (`loop7`).
    pub fn name(&self) -> String {
        self.path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        // udev may still be probing the device after a write; detaching then only marks it
        // for autoclear, which a holder that never closes (a dm table) defeats.
        let _ = Command::new("udevadm").args(["settle", "-t", "5"]).status();
        let _ = Command::new("losetup")
            .args(["-d", self.path.to_str().unwrap()])
            .status();
    }
}

/// An ext4 filesystem made on `dev` and mounted in a temp dir; unmounted on drop.
pub struct Mounted {
    pub dir: tempfile::TempDir,
}

impl Mounted {
    pub fn new(dev: &Path) -> Mounted {
        run("mkfs.ext4", &["-q", "-F", dev.to_str().unwrap()]);
        let dir = tempfile::tempdir().unwrap();
        run(
            "mount",
            &[dev.to_str().unwrap(), dir.path().to_str().unwrap()],
        );
        Mounted { dir }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// A tmpfs of `size` (mount's `size=` option, e.g. `24m`) mounted on an existing directory;
/// unmounted on drop.
pub struct Tmpfs {
    pub dir: PathBuf,
}

impl Tmpfs {
    /// None when mounting is not permitted here (containers).
    pub fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        let ok = succeeds(
            Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={size}"), "mdpilot-test"])
                .arg(dir),
        );
        ok.then(|| Tmpfs {
            dir: dir.to_path_buf(),
        })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
    }
}

/// `dev` used as active swap; swapoff on drop.
pub struct Swap {
    pub dev: PathBuf,
}

impl Swap {
    /// None when swapon is not permitted here (containers).
    pub fn new(dev: &Path) -> Option<Swap> {
        run("mkswap", &[dev.to_str().unwrap()]);
        let ok = succeeds(Command::new("swapon").arg(dev));
        ok.then(|| Swap {
            dev: dev.to_path_buf(),
        })
    }
}

impl Drop for Swap {
    fn drop(&mut self) {
        let _ = Command::new("swapoff").arg(&self.dev).status();
    }
}

/// A device-mapper linear table over `dev`; removed on drop. None when dm is unavailable.
///
/// The table holds `dev` open: one left behind keeps the loop device attached for good (to a
/// backing file whose temp dir is gone). So removal retries while udev still has the new dm
/// device open (`dmsetup remove --retry`, after `udevadm settle`), and a `create` that failed
/// half-way (the table made, the udev sync failed) is removed too.
pub struct DmLinear {
    pub name: String,
}

impl DmLinear {
    pub fn new(dev: &Path, sectors: u64) -> Option<DmLinear> {
        let name = format!("mdpilot-wipe-{}", std::process::id());
        let table = format!("0 {sectors} linear {} 0", dev.display());
        let ok = Command::new("dmsetup")
            .args(["create", &name, "--table", &table])
            .output()
            .is_ok_and(|o| o.status.success());
        let guard = DmLinear { name };
        // A failed create may still have made the table: the guard removes it on drop.
        ok.then_some(guard)
    }

    /// Whether the table still exists (`dmsetup info NAME` succeeds).
    pub fn exists(name: &str) -> bool {
        Command::new("dmsetup")
            .args(["info", name])
            .output()
            .is_ok_and(|o| o.status.success())
    }
}

impl Drop for DmLinear {
    fn drop(&mut self) {
        for _ in 0..5 {
            if !Self::exists(&self.name) {
                return;
            }
            let _ = Command::new("udevadm").args(["settle", "-t", "5"]).status();
            let _ = Command::new("dmsetup")
                .args(["remove", "--retry", &self.name])
                .status();
        }
        if Self::exists(&self.name) {
            eprintln!("error: device-mapper table {} is left behind", self.name);
        }
    }
}

/// Whether this kernel has a device-mapper driver: `dmsetup version` reaches it (prints its
/// `Driver version`). False where the kernel has none (dm_mod neither built in nor loadable).
pub fn dm_in_kernel() -> bool {
    let _ = std::process::Command::new("modprobe")
        .arg("dm_mod")
        .stderr(std::process::Stdio::null())
        .status();
    std::process::Command::new("dmsetup")
        .arg("version")
        .output()
        .is_ok_and(|o| {
            o.status.success() && String::from_utf8_lossy(&o.stdout).contains("Driver version")
        })
}
