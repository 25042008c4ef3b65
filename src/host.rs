//! Where the kernel's trees live: `/proc`, `/sys`, `/dev` and `/run` under a configurable root.
//!
//! Every adapter that touches the kernel takes a [`Root`]. In production it is `/`; tests and the
//! simulator (`mdpilot serve --sim`) pass a temporary directory holding a fake tree, so nothing in
//! the test suite reads or writes the host's real `/proc/sys` or `/sys`.
//!
//! Also the running process and the clock, which are never under a [`Root`]: the wall clock
//! ([`unix_now_s`], [`unix_now_us`], [`utc_offset_s`]), this process's umask and children, and
//! other processes' liveness, parent and start time ([`pid_alive`], [`parent_pid`],
//! [`process_start_time`]).

use std::io;
use std::path::{Path, PathBuf};

/// A filesystem root under which the absolute kernel paths are resolved.
///
/// `Root::new("/tmp/t").path("/proc/mdstat")` is `/tmp/t/proc/mdstat`; with the default root `/`
/// paths are unchanged. Set by the global `--root DIR` option of every subcommand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    base: PathBuf,
}

impl Default for Root {
    fn default() -> Self {
        Root::system()
    }
}

impl Root {
    /// The running system: paths are used as they are.
    pub fn system() -> Self {
        Root {
            base: PathBuf::from("/"),
        }
    }

    /// A root at `base` (a directory; it need not exist yet).
    pub fn new(base: impl Into<PathBuf>) -> Self {
        Root { base: base.into() }
    }

    /// True when this root is `/`, i.e. the real kernel trees.
    pub fn is_system(&self) -> bool {
        self.base == Path::new("/")
    }

    /// Resolves an absolute path (`/proc/mdstat`) under this root. A relative path is taken as
    /// relative to the root as well.
    pub fn path(&self, abs: impl AsRef<Path>) -> PathBuf {
        let abs = abs.as_ref();
        let rel = abs.strip_prefix("/").unwrap_or(abs);
        if rel.as_os_str().is_empty() {
            return self.base.clone();
        }
        self.base.join(rel)
    }

    /// `/proc/<rel>` under this root.
    pub fn proc(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.path("/proc").join(rel)
    }

    /// `/sys/<rel>` under this root.
    pub fn sys(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.path("/sys").join(rel)
    }

    /// `/dev/<rel>` under this root.
    pub fn dev(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.path("/dev").join(rel)
    }

    /// `/run/<rel>` under this root.
    pub fn run(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.path("/run").join(rel)
    }
}

/// Reads a small text file (sysfs attribute, `/proc/sys` knob) and trims trailing whitespace.
///
/// Returns `Ok(None)` when the file does not exist (`ENOENT`/`ENOTDIR`): missing sysfs files are
/// normal on older kernels and in test roots. Any other error (EACCES, EIO, ...) is returned.
pub fn read_optional(path: &Path) -> io::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s.trim_end().to_string())),
        Err(e)
            if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// This process's umask, from the `Umask:` line of `/proc/self/status` (Linux 4.7 and later):
/// reading it with umask(2) would change it for a moment under every thread. 0o022 when the
/// line cannot be read. Like [`pid_alive`], not under a [`Root`]: it is this process's own.
pub fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

/// Liveness of a process, the one check the policy (`Owner::Pid` leases), the CLI and the service
/// share: `kill(pid, 0)` fails with ESRCH only when no such process exists (EPERM means it
/// exists but belongs to someone else). Pid 0 and pids above `pid_t` are dead.
///
/// Processes are not under a [`Root`]: the simulator's and the tests' roots hold no process
/// table, and a lease's pid is a process of the running kernel, so this always asks the kernel.
pub fn pid_alive(pid: u32) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    let pid = nix::unistd::Pid::from_raw(pid as i32);
    !matches!(
        nix::sys::signal::kill(pid, None),
        Err(nix::errno::Errno::ESRCH)
    )
}

/// Field 22 of `/proc/PID/stat`: the start time of process `pid` in clock ticks since boot
/// (`proc(5)`, read with `procfs`); `None` when there is no such process or it cannot be read.
/// With the pid it names one process for the life of the machine (polkit pins its subjects
/// the same way). Like [`pid_alive`], this asks the running kernel, not a [`Root`].
pub fn process_start_time(pid: u32) -> Option<u64> {
    let pid = i32::try_from(pid).ok().filter(|p| *p > 0)?;
    let stat = procfs::process::Process::new(pid).ok()?.stat().ok()?;
    Some(stat.starttime)
}

/// Now, in seconds since the Unix epoch (0 if the clock is before 1970): lease expiries, check
/// records, the names of files set aside.
pub fn unix_now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Now, in microseconds since the Unix epoch (0 if the clock is before 1970; saturates in the
/// year 586 524): the D-Bus jobs' times.
pub fn unix_now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// The parent of process `pid`: field 4 of `/proc/PID/stat` (`proc(5)`, read with `procfs`);
/// `None` when there is no such process or it cannot be read. Like [`pid_alive`], this asks
/// the running kernel, not a [`Root`].
pub fn parent_pid(pid: u32) -> Option<u32> {
    let pid = i32::try_from(pid).ok().filter(|p| *p > 0)?;
    let stat = procfs::process::Process::new(pid).ok()?.stat().ok()?;
    u32::try_from(stat.ppid).ok()
}

/// True when process `pid` is `ancestor` itself or one of its descendants, following the
/// parent chain of `/proc/PID/stat` ([`parent_pid`]) up from `pid`. False when the chain ends
/// (pid 0, an unreadable entry) without meeting `ancestor`. The chain is walked at most
/// 4096 steps (far deeper than any real process tree), so a racing table never loops.
pub fn descends_from(pid: u32, ancestor: u32) -> bool {
    let mut p = pid;
    for _ in 0..4096 {
        if p == ancestor {
            return true;
        }
        match parent_pid(p) {
            Some(parent) if parent != 0 && parent != p => p = parent,
            _ => return false,
        }
    }
    false
}

/// A child of this process as `/proc/PID/stat` shows it (`proc(5)`: fields 1, 3, 4 and 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnChild {
    /// Its pid.
    pub pid: i32,
    /// Its process group id (`pgrp`).
    pub pgid: i32,
    /// True when it has exited and waits for this process to reap it (state `Z`).
    pub zombie: bool,
}

/// The children of this process: every `/proc/PID/stat` whose `ppid` is [`std::process::id`]
/// (children of every thread, and orphans adopted as a child subreaper). A child cannot leave
/// this list, nor its pid be reused, before this process reaps it. Like [`pid_alive`], not
/// under a [`Root`]: it is this process's own. Unreadable entries (processes that exit while
/// the list is read) are left out.
pub fn own_children() -> Vec<OwnChild> {
    let me = std::process::id().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            parse_child_stat(pid, &stat, &me)
        })
        .collect()
}

/// The [`OwnChild`] of a `/proc/PID/stat` line when its `ppid` is `parent`. `comm` may hold
/// spaces and parentheses: the fields start after its last `") "`.
fn parse_child_stat(pid: i32, stat: &str, parent: &str) -> Option<OwnChild> {
    let (_, rest) = stat.rsplit_once(") ")?;
    let mut f = rest.split_ascii_whitespace();
    let state = f.next()?;
    if f.next()? != parent {
        return None;
    }
    Some(OwnChild {
        pid,
        pgid: f.next()?.parse().ok()?,
        zombie: state == "Z",
    })
}

/// The local wall-clock offset east of UTC, seconds, at `t` (Unix seconds), from
/// `localtime_r(3)` and the TZ database (0 where unknown).
pub fn utc_offset_s(t: i64) -> i64 {
    let tt = t as libc::time_t;
    // SAFETY: localtime_r writes only into the tm we pass, and reads the time_t we pass.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&tt, &mut tm).is_null() {
            return 0;
        }
        tm.tm_gmtoff
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_stat_lines_give_pid_group_and_zombie_state() {
        let line = "4242 (a) b (c)) Z 17 4240 17 0 -1 4194560 0 0 0 0\n";
        assert_eq!(
            parse_child_stat(4242, line, "17"),
            Some(OwnChild {
                pid: 4242,
                pgid: 4240,
                zombie: true
            })
        );
        assert_eq!(parse_child_stat(4242, line, "18"), None);
        assert_eq!(parse_child_stat(1, "garbage", "17"), None);
    }

    #[test]
    fn a_spawned_child_is_listed_until_reaped() {
        let mut c = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = c.id() as i32;
        assert!(own_children().iter().any(|k| k.pid == pid && !k.zombie));
        c.kill().unwrap();
        c.wait().unwrap();
        assert!(!own_children().iter().any(|k| k.pid == pid));
    }

    #[test]
    fn system_root_keeps_paths() {
        let r = Root::system();
        assert_eq!(r.path("/proc/mdstat"), PathBuf::from("/proc/mdstat"));
        assert_eq!(
            r.sys("block/md0/md/level"),
            PathBuf::from("/sys/block/md0/md/level")
        );
        assert!(r.is_system());
    }

    #[test]
    fn test_root_prefixes_paths() {
        let r = Root::new("/tmp/x");
        assert_eq!(r.path("/proc/mdstat"), PathBuf::from("/tmp/x/proc/mdstat"));
        assert_eq!(
            r.run("mdpilot/policy.toml"),
            PathBuf::from("/tmp/x/run/mdpilot/policy.toml")
        );
        assert_eq!(r.dev("md0"), PathBuf::from("/tmp/x/dev/md0"));
        assert!(!r.is_system());
    }

    #[test]
    fn own_process_is_alive_and_pid_zero_is_not() {
        assert!(pid_alive(std::process::id()));
        assert!(!pid_alive(0));
        assert!(!pid_alive(u32::MAX));
    }

    #[test]
    fn a_child_descends_from_us_and_init_does_not() {
        let me = std::process::id();
        assert!(descends_from(me, me));
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        assert!(descends_from(child.id(), me));
        assert_eq!(parent_pid(child.id()), Some(me));
        assert!(!descends_from(me, child.id()));
        assert!(!descends_from(1, me));
        assert!(!descends_from(0, me));
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn read_optional_missing_is_none() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(read_optional(&d.path().join("nope")).unwrap(), None);
        assert_eq!(read_optional(&d.path().join("nope/deeper")).unwrap(), None);
        std::fs::write(d.path().join("f"), "42 (local)\n").unwrap();
        assert_eq!(
            read_optional(&d.path().join("f")).unwrap().as_deref(),
            Some("42 (local)")
        );
    }
}
