//! A disk that stops answering, for real: a loop device over a file on a FUSE filesystem
//! (`stallfs.py`, Debian's `python3-pyfuse3` on `fuse3`) whose reads and writes can be made to
//! wait, as a failing disk, an NFS file, NBD or iSCSI do.
//!
//! [`StalledDisk::block_opens`] makes every `open(2)` of the device wait in the kernel (D state in
//! `bdev_open`): a reader of the device is killed while its read waits, and its last close
//! then waits for that read's page while holding the disk's open mutex (`bdev_release` →
//! `blkdev_flush_mapping` → `truncate_inode_pages_range`). The guard lets everything go on drop,
//! detaches the loop device, unmounts the filesystem and ends its process, in that order.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

/// The FUSE server (run by Debian's python3, where python3-pyfuse3 lives).
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/support/stallfs.py");
const PYTHON: &str = "/usr/bin/python3";

/// The loop device over the FUSE file, with the filesystem's process and its stdout lines.
pub struct StalledDisk {
    /// `/dev/loopN`.
    pub path: PathBuf,
    mnt: tempfile::TempDir,
    fs: Child,
    lines: Receiver<String>,
    /// The killed reader (still exiting) and the opener seen waiting, let go at the end.
    waiting: Vec<Child>,
    attached: bool,
}

/// Whether the FUSE stand-in can run: `/dev/fuse`, Debian's python3 with pyfuse3. When not,
/// prints the skip line ([`super::skipped`]: a failure under `MDPILOT_REQUIRE_ALL=1`).
pub fn available() -> bool {
    if !Path::new("/dev/fuse").exists() {
        super::skipped("no /dev/fuse (modprobe fuse)");
        return false;
    }
    let ok = Command::new(PYTHON)
        .args(["-c", "import pyfuse3, trio"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        super::skipped("pyfuse3 not installed (apt-get install fuse3 python3-pyfuse3)");
    }
    ok
}

impl StalledDisk {
    /// Mounts the filesystem with a `size`-byte file of `fill` bytes and attaches a loop device
    /// over it (buffered I/O: every read of the device the page cache does not hold reaches
    /// the filesystem). `None` (a skip) when the stand-in cannot run ([`available`]).
    pub fn new(size: u64, fill: u8) -> Option<StalledDisk> {
        if !available() {
            return None;
        }
        let mnt = tempfile::Builder::new()
            .prefix("mdpilot-stallfs.")
            .tempdir()
            .unwrap();
        let mut fs = Command::new(PYTHON)
            .arg(SCRIPT)
            .arg(mnt.path())
            .arg(size.to_string())
            .arg(fill.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let out = fs.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    return;
                }
            }
        });
        let mut d = StalledDisk {
            path: PathBuf::new(),
            mnt,
            fs,
            lines,
            waiting: Vec::new(),
            attached: false,
        };
        d.wait_line("READY", Duration::from_secs(60));
        let file = d.mnt.path().join("disk");
        d.path = PathBuf::from(super::loopdev::run(
            "losetup",
            &["--find", "--show", file.to_str().unwrap()],
        ));
        d.attached = true;
        Some(d)
    }

    /// Waits (at most `limit`) for the line `want` from the filesystem.
    fn wait_line(&self, want: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l == want => return,
                Ok(_) => {}
                Err(e) => panic!("stallfs did not say {want:?}: {e}"),
            }
        }
    }

    /// Writes `word` (`stall` or `go`) to the filesystem's control file.
    fn control(&self, word: &str) {
        std::fs::write(self.mnt.path().join("ctl"), word).unwrap();
    }

    /// Makes every later open of the device wait until [`StalledDisk::release`] (see the
    /// module doc), and returns once an opener of its own is seen waiting in `openat`.
    pub fn block_opens(&mut self) {
        self.control("stall");
        super::loopdev::run("blockdev", &["--flushbufs", self.path.to_str().unwrap()]);
        let mut reader = Command::new("dd")
            .arg(format!("if={}", self.path.display()))
            .args(["of=/dev/null", "bs=4096", "count=1", "status=none"])
            .spawn()
            .unwrap();
        self.wait_line("STALLED read", Duration::from_secs(60));
        // Killed while its read waits: its last close keeps the open mutex until the read ends.
        reader.kill().unwrap();
        self.waiting.push(reader);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let mut opener = Command::new("dd")
                .arg(format!("if={}", self.path.display()))
                .args(["of=/dev/null", "count=0", "status=none"])
                .spawn()
                .unwrap();
            loop {
                if opener.try_wait().unwrap().is_some() {
                    // Opened and closed before the killed reader took the mutex: try again.
                    break;
                }
                let pid = opener.id();
                if in_open(pid, pid) {
                    self.waiting.push(opener);
                    return;
                }
                if in_syscall(pid, pid, libc::SYS_close) {
                    // Opened before the killed reader closed, so its own close was the last:
                    // that close now holds the mutex. The next opener waits in the open.
                    self.waiting.push(opener);
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "opens of the device never waited"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            assert!(
                Instant::now() < deadline,
                "opens of the device never waited"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Lets every waiting read, write and open go on; later ones are answered at once.
    pub fn release(&mut self) {
        let _ = std::fs::write(self.mnt.path().join("ctl"), "go");
        for mut c in self.waiting.drain(..) {
            let _ = c.wait();
        }
    }
}

/// Whether thread `tid` of process `pid` sleeps uninterruptibly (D) inside `openat(2)`: an
/// open the kernel keeps waiting.
pub fn in_open(pid: u32, tid: u32) -> bool {
    in_syscall(pid, tid, libc::SYS_openat)
}

/// Whether thread `tid` of process `pid` sleeps uninterruptibly (D) inside system call `nr`
/// (`/proc/PID/task/TID/stat`'s state and `…/syscall`, root only).
fn in_syscall(pid: u32, tid: u32, nr: libc::c_long) -> bool {
    let base = format!("/proc/{pid}/task/{tid}");
    let stat = std::fs::read_to_string(format!("{base}/stat")).unwrap_or_default();
    // The state follows the command name's closing parenthesis.
    let waits = stat
        .rsplit_once(") ")
        .is_some_and(|(_, r)| r.starts_with('D'));
    let syscall = std::fs::read_to_string(format!("{base}/syscall")).unwrap_or_default();
    waits && syscall.split(' ').next() == Some(nr.to_string().as_str())
}

/// How many threads of process `pid` wait in an open ([`in_open`]).
pub fn threads_in_open(pid: u32) -> usize {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(|t| t.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&tid| in_open(pid, tid))
        .count()
}

impl Drop for StalledDisk {
    fn drop(&mut self) {
        self.release();
        if self.attached {
            let _ = Command::new("losetup")
                .args(["-d", self.path.to_str().unwrap()])
                .status();
        }
        // A detach while the device is still open waits for its last close (autoclear), and
        // the file stays busy until then.
        let name = self.path.file_name().unwrap_or_default().to_string_lossy();
        let bound = format!("/sys/block/{name}/loop/backing_file");
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.attached && Path::new(&bound).exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let unmounted = || Command::new("umount").arg(self.mnt.path()).status();
        if !unmounted().is_ok_and(|s| s.success()) {
            // Never leave the mount behind: detached now, gone with its last user.
            let _ = Command::new("umount")
                .arg("-l")
                .arg(self.mnt.path())
                .status();
        }
        // The filesystem's process ends when it is unmounted; a kill if it did not mount.
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.fs.try_wait().ok().flatten().is_none() {
            if Instant::now() > deadline {
                let _ = self.fs.kill();
                let _ = self.fs.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
