//! `mdpilot serve --sim`: a simulated kernel tree in a temporary root, so installer developers can
//! build against the D-Bus API without RAID hardware.
//!
//! The tree has what the service reads: `/proc/mdstat`, `/proc/sys/dev/raid/speed_limit_{min,max}`
//! and `/sys/block/mdN/md/*` (formats as in kernel Documentation/admin-guide/md.rst). Two arrays:
//! `md0` (raid1, clean, idle) and `md1` (raid5, resyncing), both without a write-intent bitmap
//! (`consistency_policy` `resync`, `bitmap_type` `[none] bitmap`; md1 with a
//! `logical_block_size`, as a Linux 6.19+ kernel writes it). The resync advances on a timer
//! honouring md's speed-limit semantics (see [`sync_rate_kib_s`]) and stops at the end; the
//! timer runs only while a sync runs. A `check`/`repair` written to `md/sync_action` starts at
//! `md/sync_min`; interrupted, it leaves `sync_min` at the point reached, and complete it resets
//! it to 0, as md's `md_do_sync` does, which also names each sync in `md/last_sync_action`. Regular files raise no `POLLPRI`, so after each write the
//! simulator sends the watcher's [`Event`]s into the service's channel itself.
//!
//! Env: `MDPILOT_SIM_TICK_MS` (default 1000) sets the step; `MDPILOT_SIM_TRACE=FILE` appends
//! `<CLOCK_MONOTONIC ns> <array> <sync_completed sectors>` per step (used by the latency bench);
//! `MDPILOT_SIM_HISTORY_S` sets the sync history's slot, seconds ([`sync_history`]);
//! `MDPILOT_SIM_CHECKPOINT=N` makes `md/sync_completed` md's checkpoint, moved every 1/N of a
//! sync, while mdstat shows the exact point ([`Sim::set_checkpoint`]);
//! `MDPILOT_SIM_ARRAYS=N` (N > 2) adds idle raid1 arrays `md2`..`md{N-1}` (the metrics bench);
//! `MDPILOT_SIM_DEVICES=/dev/loop3,/dev/loop4@/srv` shows real block devices (loop devices a test
//! attached) in the tree as wipe candidates, `@MOUNTPOINT` ones as mounted there
//! ([`Sim::add_devices`]).
//!
//! A member fails as with `mdadm --fail`: write `faulty` to `md/dev-<member>/state`, then send
//! the service SIGUSR1 ([`Sim::watch_control_signal`]): the simulator marks the member faulty,
//! counts it in `md/degraded` and `/proc/mdstat` (`(F)`, `[2/1] [U_]`).

use crate::host::{read_optional, Root};
use crate::model::SpeedLimit;
use crate::policy::{KERNEL_DEFAULT_MAX, KERNEL_DEFAULT_MIN};
use crate::watch::Event;
use std::io::Write;
use std::time::Duration;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

/// The simulated disks' bandwidth for resync in KiB/s (what an idle array could reach).
pub const DEVICE_KIB_S: u64 = 400_000;

/// The sync history of `serve --sim` ([`crate::sync_history`]): slots of
/// `MDPILOT_SIM_HISTORY_S` seconds (default the service's 10), so tests and demonstrations see
/// a chart fill in seconds; [`crate::sync_history::CAPACITY`] samples.
pub fn sync_history() -> crate::sync_history::SyncHistory {
    let s = std::env::var("MDPILOT_SIM_HISTORY_S")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(crate::sync_history::INTERVAL_S);
    crate::sync_history::SyncHistory::new(s, crate::sync_history::CAPACITY)
}

/// One simulated array.
#[derive(Debug, Clone, PartialEq)]
pub struct SimArray {
    /// `md0`.
    pub name: String,
    /// `raid1`, `raid5`.
    pub level: String,
    /// Members in slot order.
    pub members: Vec<String>,
    /// `md/component_size` in KiB.
    pub component_kib: u64,
    /// Chunk size in bytes (0 for raid1).
    pub chunk_bytes: u64,
    /// `md/uuid`.
    pub uuid: String,
    /// Metadata name (`sim:root`), published through the simulated udev database.
    pub md_name: String,
    /// The `/dev/md/` link name (`root`).
    pub link: String,
    /// The running sync's `md/sync_action` word (`resync`, `check`, `repair`).
    pub action: String,
    /// Sectors done of the running sync; `None` when idle.
    pub sync_done_sectors: Option<u64>,
    /// Last step's rate in KiB/s.
    pub sync_rate_kib_s: u64,
    /// `md/sync_min`'s mtime when the running check started (md refuses writes to it while a
    /// sync runs: a change seen when it stops was written after the stop).
    pub sync_min_at_start: Option<std::time::SystemTime>,
    /// Members marked faulty (`faulty` written to `md/dev-<member>/state`), in slot order.
    pub faulty: Vec<String>,
}

impl SimArray {
    /// Size of the array in KiB (raid1: one component; raid5: n-1 components).
    pub fn size_kib(&self) -> u64 {
        let n = u32::try_from(self.members.len()).unwrap_or(u32::MAX);
        crate::model::Level::from(self.level.as_str())
            .capacity_kib(self.component_kib, n)
            .unwrap_or(self.component_kib)
    }

    /// Total sectors of a sync (per member: `component_size` × 2).
    pub fn sync_total_sectors(&self) -> u64 {
        self.component_kib * 2
    }
}

/// md's resync throttle (drivers/md/md.c `md_do_sync`): a sync never goes faster than `max`;
/// it may be slowed down to `min` when the array has other I/O, never below. The simulated disks
/// are otherwise idle, so the rate is the device's bandwidth capped at `max` (and at least `min`,
/// which can exceed the device only if the admin asks the impossible; the device wins then).
pub fn sync_rate_kib_s(min: u64, max: u64, device_kib_s: u64, foreground_io: bool) -> u64 {
    let wanted = if foreground_io { min } else { max };
    wanted.min(device_kib_s)
}

/// Effective `(min, max)` in KiB/s for an array: a local value in `md/sync_speed_{min,max}`
/// overrides the system `speed_limit_{min,max}`. A file holding `system` or `0` (what a writer
/// stored, not yet in the read-back form) or `N (system)` follows the system.
pub fn effective_limits(root: &Root, array: &str) -> (u64, u64) {
    let (gmin, gmax) = global_limits(root);
    let local = |f: &str| -> Option<u64> {
        let s = read_optional(&root.sys(format!("block/{array}/md/{f}")))
            .ok()
            .flatten()?;
        SpeedLimit::parse(&s)
            .filter(|l| !l.system && l.kib_s != 0)
            .map(|l| l.kib_s)
    };
    (
        local("sync_speed_min").unwrap_or(gmin),
        local("sync_speed_max").unwrap_or(gmax),
    )
}

/// The system `(speed_limit_min, speed_limit_max)` in KiB/s, read by
/// [`crate::sysfs::read_speed_limits`] (kernel defaults 1000 and 200000 where unreadable).
pub fn global_limits(root: &Root) -> (u64, u64) {
    let l = crate::sysfs::read_speed_limits(root);
    (
        l.min_kib_s.unwrap_or(KERNEL_DEFAULT_MIN),
        l.max_kib_s.unwrap_or(KERNEL_DEFAULT_MAX),
    )
}

/// Rewrites `/sys/block/<array>/md/sync_speed_{min,max}` in the kernel's read-back form
/// (`N (local)` / `N (system)`) after a writer (the policy) left `N`, `0` or `system` in them: a
/// regular file cannot do what the kernel's store/show pair does. The reads and the rewrite
/// happen under [`crate::sysfs::write::writes_lock`], so a limit mdpilot writes meanwhile is
/// never replaced by an older value. Errors: the files cannot be written.
pub fn normalize_limits(root: &Root, array: &str) -> std::io::Result<()> {
    let _no_writer = crate::sysfs::write::writes_lock();
    let (min, max) = effective_limits(root, array);
    let (gmin, gmax) = global_limits(root);
    for (f, v, g) in [("sync_speed_min", min, gmin), ("sync_speed_max", max, gmax)] {
        let p = root.sys(format!("block/{array}/md/{f}"));
        let Some(raw) = read_optional(&p)? else {
            continue;
        };
        let system = raw.contains("(system)") || raw.starts_with("system") || raw == "0";
        let text = if system {
            format!("{g} (system)\n")
        } else {
            format!("{v} (local)\n")
        };
        if raw + "\n" != text {
            write(p, &text)?;
        }
    }
    Ok(())
}

/// The service loop's side of the simulator: before each read, the simulated limit files get
/// the kernel's read-back form, and after mdpilot wrote an `md/sync_action` the simulator is
/// woken to absorb it ([`Sim::run`]'s `poke`).
pub struct LoopHook {
    poke: UnboundedSender<()>,
}

impl LoopHook {
    /// A hook and the receiver [`Sim::run`] takes as `poke`.
    pub fn new() -> (LoopHook, UnboundedReceiver<()>) {
        let (poke, rx) = tokio::sync::mpsc::unbounded_channel();
        (LoopHook { poke }, rx)
    }

    /// Called by the loop before it reads `root`; `sync_action_written`: a `md/sync_action`
    /// was written since the last read (the simulator then looks at its tree again).
    pub fn before_read(&self, root: &Root, sync_action_written: bool) {
        // The simulator's limit files are regular files: give them the kernel's read-back
        // form before reading (a limit change always arrives as a refresh).
        if let Err(e) = normalize_all_limits(root) {
            tracing::warn!("simulator: {e}");
        }
        if sync_action_written {
            let _ = self.poke.send(());
        }
    }
}

/// [`normalize_limits`] for every array of the tree (`/sys/block/md*/md`).
pub fn normalize_all_limits(root: &Root) -> std::io::Result<()> {
    for e in std::fs::read_dir(root.sys("block"))?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("md") && e.path().join("md").is_dir() {
            normalize_limits(root, &name)?;
        }
    }
    Ok(())
}

/// `/proc/mdstat` for the simulated arrays, in md.c's `md_seq_show` format.
pub fn render_mdstat(arrays: &[SimArray]) -> String {
    let mut s = String::from("Personalities : [raid1] [raid6] [raid5] [raid4] \n");
    for a in arrays {
        s.push_str(&format!("{} : active {}", a.name, a.level));
        for (i, m) in a.members.iter().enumerate().rev() {
            let f = if a.faulty.contains(m) { "(F)" } else { "" };
            s.push_str(&format!(" {m}[{i}]{f}"));
        }
        s.push('\n');
        let n = a.members.len();
        let up = n - a.faulty.len().min(n);
        let u: String = a
            .members
            .iter()
            .map(|m| if a.faulty.contains(m) { '_' } else { 'U' })
            .collect();
        if a.level == "raid1" {
            s.push_str(&format!(
                "      {} blocks super 1.2 [{n}/{up}] [{u}]\n",
                a.size_kib()
            ));
        } else {
            s.push_str(&format!(
                "      {} blocks super 1.2 level 5, {}k chunk, algorithm 2 [{n}/{up}] [{u}]\n",
                a.size_kib(),
                a.chunk_bytes / 1024
            ));
        }
        if let Some(done) = a.sync_done_sectors {
            let total_kib = a.component_kib;
            let done_kib = done / 2;
            let permille = done_kib * 1000 / total_kib.max(1);
            let bar = (permille * 20 / 1000) as usize;
            let rate = a.sync_rate_kib_s.max(1);
            let finish = (total_kib - done_kib) as f64 / rate as f64 / 60.0;
            s.push_str(&format!(
                "      [{}>{}]  resync = {:>2}.{}% ({done_kib}/{total_kib}) finish={finish:.1}min speed={rate}K/sec\n",
                "=".repeat(bar),
                ".".repeat(20 - bar.min(20)),
                permille / 10,
                permille % 10
            ));
        }
        s.push_str("      \n");
    }
    s.push_str("unused devices: <none>\n");
    s
}

/// The simulator: owns the temporary tree (deleted on drop) and the array states.
pub struct Sim {
    dir: tempfile::TempDir,
    root: Root,
    arrays: Vec<SimArray>,
    /// SIGUSR1: look at the tree again ([`Sim::watch_control_signal`]).
    control: Option<tokio::signal::unix::Signal>,
    /// md's checkpoint ([`Sim::set_checkpoint`]): `sync_completed` moves every 1/N of a sync.
    checkpoint_parts: Option<u64>,
}

/// The number in the environment variable `name`; `None` when unset or not a number.
fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Writes `text` to `path` atomically (a hidden temporary file in the same directory, renamed
/// over it), so a concurrent reader (`status --json` on the tree, a scrape) sees the old or the
/// new text, never an empty or half-written file as `fs::write`'s truncate-then-write can give.
fn write(path: std::path::PathBuf, text: &str) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| std::path::Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(".{name}.sim-tmp"));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, &path)
}

impl Sim {
    /// Creates the tree in a new temporary directory. Errors: the directory cannot be written.
    pub fn create() -> std::io::Result<Sim> {
        let dir = tempfile::Builder::new().prefix("mdpilot-sim.").tempdir()?;
        let root = Root::new(dir.path());
        let mut arrays = vec![
            SimArray {
                name: "md0".into(),
                level: "raid1".into(),
                members: vec!["sda1".into(), "sdb1".into()],
                component_kib: 1_048_576,
                chunk_bytes: 0,
                uuid: "3b6c2a6e-0d0e-4b7a-9d5e-8a7b1c2d3e4f".into(),
                md_name: "sim:root".into(),
                link: "root".into(),
                action: "idle".into(),
                sync_done_sectors: None,
                sync_rate_kib_s: 0,
                sync_min_at_start: None,
                faulty: Vec::new(),
            },
            SimArray {
                name: "md1".into(),
                level: "raid5".into(),
                members: vec!["sdc1".into(), "sdd1".into(), "sde1".into()],
                component_kib: 64 * 1_048_576,
                chunk_bytes: 512 * 1024,
                uuid: "9f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b".into(),
                md_name: "sim:data".into(),
                link: "data".into(),
                action: "resync".into(),
                sync_done_sectors: Some(0),
                sync_rate_kib_s: 0,
                sync_min_at_start: None,
                faulty: Vec::new(),
            },
        ];
        // MDPILOT_SIM_ARRAYS=N (benches): idle raid1 arrays md2..md{N-1} after the two above.
        let n = env_u64("MDPILOT_SIM_ARRAYS").map_or(2, |n| usize::try_from(n).unwrap_or(2));
        for i in 2..n {
            arrays.push(SimArray {
                name: format!("md{i}"),
                level: "raid1".into(),
                members: vec![format!("nvme{i}n1p1"), format!("nvme{i}n2p1")],
                component_kib: 1_048_576,
                chunk_bytes: 0,
                uuid: format!("{i:08x}-0000-4000-8000-{i:012x}"),
                md_name: format!("sim:bench{i}"),
                link: format!("bench{i}"),
                action: "idle".into(),
                sync_done_sectors: None,
                sync_rate_kib_s: 0,
                sync_min_at_start: None,
                faulty: Vec::new(),
            });
        }
        write(root.proc("sys/dev/raid/speed_limit_min"), "1000\n")?;
        write(root.proc("sys/dev/raid/speed_limit_max"), "200000\n")?;
        std::fs::create_dir_all(root.run("mdpilot"))?;
        std::fs::create_dir_all(root.dev("md"))?;
        let sim = Sim {
            dir,
            root,
            arrays,
            control: None,
            checkpoint_parts: env_u64("MDPILOT_SIM_CHECKPOINT").filter(|&n| n > 0),
        };
        for (minor, a) in sim.arrays.iter().enumerate() {
            sim.write_identity(a, minor)?;
            sim.write_static(a)?;
            sim.write_dynamic(a, true)?;
        }
        write(sim.root.proc("mdstat"), &render_mdstat(&sim.arrays))?;
        if let Ok(spec) = std::env::var("MDPILOT_SIM_DEVICES") {
            sim.add_devices(&spec)?;
        }
        Ok(sim)
    }

    /// Shows real block devices in the tree, so `Manager.WipeCandidates` and `StartWipe` work on
    /// them under `--sim`: `spec` is `PATH[@MOUNTPOINT],...` (e.g. `/dev/loop3,/dev/loop4@/srv`).
    /// Each gets `/sys/block/<name>/size` (512-byte sectors, from BLKGETSIZE64) and a
    /// `/dev/<name>` link to the real node; one with `@MOUNTPOINT` is listed in the tree's
    /// `/proc/self/mountinfo` as mounted there (by its real major:minor), so the service
    /// refuses it as it would a mounted device. Errors: a path that is no block device, or the
    /// tree cannot be written.
    pub fn add_devices(&self, spec: &str) -> std::io::Result<()> {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let mut mountinfo = String::new();
        for (i, entry) in spec.split(',').filter(|e| !e.is_empty()).enumerate() {
            let (path, mount) = entry.split_once('@').unwrap_or((entry, ""));
            let real = std::fs::canonicalize(path)?;
            let meta = std::fs::metadata(&real)?;
            if !meta.file_type().is_block_device() {
                return Err(std::io::Error::other(format!(
                    "MDPILOT_SIM_DEVICES: {path} is not a block device"
                )));
            }
            let name = real
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let bytes = crate::wipe::ioctl::size_bytes(&std::fs::File::open(&real)?)?;
            write(
                self.root.sys(format!("block/{name}/size")),
                &format!("{}\n", bytes / 512),
            )?;
            let link = self.root.dev(&name);
            if std::fs::symlink_metadata(&link).is_err() {
                std::os::unix::fs::symlink(&real, link)?;
            }
            if !mount.is_empty() {
                let (major, minor) = (libc::major(meta.rdev()), libc::minor(meta.rdev()));
                mountinfo.push_str(&format!(
                    "{} 1 {major}:{minor} / {mount} rw,relatime - ext4 {} rw\n",
                    100 + i,
                    real.display()
                ));
            }
        }
        write(self.root.proc("self/mountinfo"), &mountinfo)
    }

    /// Makes SIGUSR1 wake the simulator to look at its tree again (a member's `faulty`, a
    /// `sync_action` word) while it would otherwise wait: what a test sends after writing to the
    /// tree. Call it from the service's runtime before the service owns its name, so no signal
    /// arrives before the handler. Errors: the handler cannot be installed.
    pub fn watch_control_signal(&mut self) -> std::io::Result<()> {
        use tokio::signal::unix::{signal, SignalKind};
        self.control = Some(signal(SignalKind::user_defined1())?);
        Ok(())
    }

    /// The root of the simulated tree (pass it to everything that reads the kernel).
    pub fn root(&self) -> &Root {
        &self.root
    }

    /// The temporary directory (for logs).
    pub fn path(&self) -> &std::path::Path {
        self.dir.path()
    }

    fn md(&self, a: &SimArray, f: &str) -> std::path::PathBuf {
        self.root.sys(format!("block/{}/md/{f}", a.name))
    }

    /// What udev and mdadm add: `/sys/block/<name>/dev`, the udev database entry with
    /// `MD_NAME`/`MD_UUID` (see [`crate::names`]) and the `/dev/md/<link>` symlink.
    fn write_identity(&self, a: &SimArray, minor: usize) -> std::io::Result<()> {
        write(
            self.root.sys(format!("block/{}/dev", a.name)),
            &format!("9:{minor}\n"),
        )?;
        let uuid = crate::array_names::mdadm_uuid(&a.uuid).unwrap_or_default();
        write(
            self.root.run(format!("udev/data/b9:{minor}")),
            &format!(
                "S:md/{}\nE:MD_LEVEL={}\nE:MD_DEVICES={}\nE:MD_METADATA=1.2\nE:MD_UUID={uuid}\n\
                 E:MD_DEVNAME={}\nE:MD_NAME={}\n",
                a.link,
                a.level,
                a.members.len(),
                a.link,
                a.md_name
            ),
        )?;
        let link = self.root.dev(format!("md/{}", a.link));
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(format!("../{}", a.name), link)?;
        }
        Ok(())
    }

    fn write_static(&self, a: &SimArray) -> std::io::Result<()> {
        write(self.md(a, "level"), &format!("{}\n", a.level))?;
        write(self.md(a, "raid_disks"), &format!("{}\n", a.members.len()))?;
        write(self.md(a, "metadata_version"), "1.2\n")?;
        write(self.md(a, "chunk_size"), &format!("{}\n", a.chunk_bytes))?;
        write(
            self.md(a, "component_size"),
            &format!("{}\n", a.component_kib),
        )?;
        write(self.md(a, "uuid"), &format!("{}\n", a.uuid))?;
        write(self.md(a, "mismatch_cnt"), "0\n")?;
        write(self.md(a, "consistency_policy"), "resync\n")?;
        write(self.md(a, "bitmap/location"), "none\n")?;
        // Linux 6.19+'s attributes (as 7.3 prints them: no llbitmap built in); md1 stands for
        // an array a 6.19+ kernel created, whose superblock records the logical block size.
        write(self.md(a, "bitmap_type"), "[none] bitmap\n")?;
        if a.name == "md1" {
            write(self.md(a, "logical_block_size"), "512\n")?;
        }
        write(self.md(a, "degraded"), "0\n")?;
        write(self.md(a, "sync_speed_min"), "1000 (system)\n")?;
        write(self.md(a, "sync_speed_max"), "200000 (system)\n")?;
        write(self.md(a, "sync_min"), "0\n")?;
        // md_do_sync names each sync as it starts; none since the assembly reads `idle` (6.11+).
        let last = if a.sync_done_sectors.is_some() {
            a.action.as_str()
        } else {
            "idle"
        };
        write(self.md(a, "last_sync_action"), &format!("{last}\n"))?;
        write(
            self.root.sys(format!("block/{}/size", a.name)),
            &format!("{}\n", a.size_kib() * 2),
        )?;
        for (i, m) in a.members.iter().enumerate() {
            write(self.md(a, &format!("dev-{m}/state")), "in_sync\n")?;
            write(self.md(a, &format!("dev-{m}/slot")), &format!("{i}\n"))?;
            write(self.md(a, &format!("dev-{m}/errors")), "0\n")?;
        }
        Ok(())
    }

    /// Progress files; `md/sync_action` only at a start or end (a step could hide a new `idle`).
    /// Makes `md/sync_completed` md's checkpoint, as the kernel keeps it (md.c `md_do_sync`:
    /// `curr_resync_completed` moves every 1/16 of the sync, or 5 minutes), while
    /// `/proc/mdstat` shows the exact point reached: with `Some(n)`, `sync_completed` moves
    /// every 1/n of a sync and an interrupted check leaves `sync_min` at that checkpoint.
    /// `None` (the default; `MDPILOT_SIM_CHECKPOINT=N` at [`Sim::create`]): both exact.
    pub fn set_checkpoint(&mut self, parts: Option<u64>) {
        self.checkpoint_parts = parts.filter(|&n| n > 0);
    }

    /// md's checkpoint of `a`'s sync at `done` sectors ([`Sim::set_checkpoint`]).
    fn checkpoint(&self, a: &SimArray, done: u64) -> u64 {
        match self.checkpoint_parts {
            Some(n) => {
                let step = (a.sync_total_sectors() / n).max(1);
                done - done % step
            }
            None => done,
        }
    }

    fn write_dynamic(&self, a: &SimArray, action_too: bool) -> std::io::Result<()> {
        let (action, completed, state) = match a.sync_done_sectors {
            Some(d) => (
                a.action.as_str(),
                format!("{} / {}", self.checkpoint(a, d), a.sync_total_sectors()),
                "active",
            ),
            None => ("idle", "none".to_string(), "clean"),
        };
        if action_too {
            write(self.md(a, "sync_action"), &format!("{action}\n"))?;
        }
        write(self.md(a, "sync_completed"), &format!("{completed}\n"))?;
        write(self.md(a, "array_state"), &format!("{state}\n"))?;
        let speed = if a.sync_done_sectors.is_some() {
            a.sync_rate_kib_s.to_string()
        } else {
            "none".to_string()
        };
        write(self.md(a, "sync_speed"), &format!("{speed}\n"))?;
        normalize_limits(&self.root, &a.name)?;
        Ok(())
    }

    /// Where a sync written as `word` starts: `md/sync_min` (sectors) for check and repair
    /// (md_do_sync: `j = resync_min` for a requested sync).
    fn start_sector(&self, a: &SimArray, word: &str) -> u64 {
        let text = read_optional(&self.md(a, "sync_min")).ok().flatten();
        let n = text.and_then(|t| t.trim().parse().ok()).unwrap_or(0);
        if word == "resync" {
            0
        } else {
            n
        }
    }

    fn sync_min_mtime(&self, a: &SimArray) -> Option<std::time::SystemTime> {
        let p = self.md(a, "sync_min");
        std::fs::metadata(p).ok()?.modified().ok()
    }

    /// True while any array syncs.
    pub fn syncing(&self) -> bool {
        self.arrays.iter().any(|a| a.sync_done_sectors.is_some())
    }

    /// Acts on words written to `md/sync_action` since the last look, as md does (md.rst):
    /// `check`, `repair` or `resync` on an idle array start that sync from 0; `idle` or `frozen`
    /// stop the running one; a member whose `md/dev-*/state` says `faulty` fails
    /// (`Sim::absorb_faults`). Returns the events for the arrays that changed.
    pub fn absorb_writes(&mut self) -> std::io::Result<Vec<Event>> {
        let mut events = Vec::new();
        let mut arrays = std::mem::take(&mut self.arrays);
        let mut res = Ok(());
        for a in &mut arrays {
            let word = read_optional(&self.md(a, "sync_action"))
                .ok()
                .flatten()
                .unwrap_or_default();
            let changed = match (word.as_str(), a.sync_done_sectors) {
                ("check" | "repair" | "resync", None) => {
                    let start = self.start_sector(a, &word);
                    a.action = word.clone();
                    a.sync_done_sectors = Some(start.min(a.sync_total_sectors()));
                    a.sync_min_at_start = self.sync_min_mtime(a);
                    res = res.and(write(self.md(a, "last_sync_action"), &format!("{word}\n")));
                    true
                }
                ("idle" | "frozen", Some(done)) => {
                    // An interrupted check leaves sync_min at the point reached (md_do_sync:
                    // `resync_min = curr_resync_completed`), unless written since (cancel's 0).
                    if matches!(a.action.as_str(), "check" | "repair")
                        && self.sync_min_mtime(a) == a.sync_min_at_start
                    {
                        let kept = self.checkpoint(a, done);
                        res = res.and(write(self.md(a, "sync_min"), &format!("{kept}\n")));
                    }
                    a.action = "idle".into();
                    a.sync_done_sectors = None;
                    true
                }
                _ => false,
            };
            if changed {
                events.push(Event::Mdstat);
                if res.is_ok() {
                    res = self.write_dynamic(a, true);
                }
            }
            match self.absorb_faults(a) {
                Ok(true) => events.push(Event::Mdstat),
                Ok(false) => {}
                Err(e) => res = res.and(Err(e)),
            }
        }
        self.arrays = arrays;
        res?;
        if !events.is_empty() {
            write(self.root.proc("mdstat"), &render_mdstat(&self.arrays))?;
        }
        Ok(events)
    }

    /// Marks members whose `md/dev-<member>/state` says `faulty` (what `mdadm --fail` writes)
    /// as failed: `md/degraded` counts them. Returns whether a member failed since the last
    /// look. Errors: the tree cannot be written.
    fn absorb_faults(&self, a: &mut SimArray) -> std::io::Result<bool> {
        let mut failed = false;
        for m in a.members.clone() {
            let state = read_optional(&self.md(a, &format!("dev-{m}/state")))
                .ok()
                .flatten()
                .unwrap_or_default();
            if state.split(',').any(|w| w.trim() == "faulty") && !a.faulty.contains(&m) {
                a.faulty.push(m);
                failed = true;
            }
        }
        if failed {
            write(self.md(a, "degraded"), &format!("{}\n", a.faulty.len()))?;
        }
        Ok(failed)
    }

    /// Advances every running sync by `elapsed`, rewrites the tree and returns the events the
    /// kernel would raise (mdstat when a sync ends, sysfs attributes on progress).
    pub fn step(&mut self, elapsed: Duration) -> std::io::Result<Vec<Event>> {
        let mut events = Vec::new();
        let mut arrays = std::mem::take(&mut self.arrays);
        let mut res = Ok(());
        for a in &mut arrays {
            let Some(done) = a.sync_done_sectors else {
                continue;
            };
            let (min, max) = effective_limits(&self.root, &a.name);
            let rate = sync_rate_kib_s(min, max, DEVICE_KIB_S, false);
            a.sync_rate_kib_s = rate;
            let add = (rate as f64 * 2.0 * elapsed.as_secs_f64()) as u64;
            let total = a.sync_total_sectors();
            let done = (done + add.max(1)).min(total);
            if done >= total {
                // A complete requested sync forgets its start (md_do_sync: `resync_min = 0`).
                if matches!(a.action.as_str(), "check" | "repair") && res.is_ok() {
                    res = write(self.md(a, "sync_min"), "0\n");
                }
                a.sync_done_sectors = None;
                a.action = "idle".into();
                events.push(Event::Mdstat);
            } else {
                a.sync_done_sectors = Some(done);
            }
            for attr in ["sync_completed", "sync_action", "array_state"] {
                events.push(Event::ArrayAttr {
                    array: a.name.clone(),
                    attr: attr.into(),
                });
            }
            if res.is_ok() {
                res = self.write_dynamic(a, a.sync_done_sectors.is_none());
            }
        }
        self.arrays = arrays;
        res?;
        write(self.root.proc("mdstat"), &render_mdstat(&self.arrays))?;
        Ok(events)
    }

    /// Runs the simulation until `tx` or `poke` closes: steps every `MDPILOT_SIM_TICK_MS`
    /// (default 1000) while a sync runs; with no sync there is no timer, only `poke` (sent by the
    /// service after a write to `md/sync_action`), which makes it look at its tree again
    /// ([`Sim::absorb_writes`]).
    pub async fn run(mut self, tx: UnboundedSender<Event>, mut poke: UnboundedReceiver<()>) -> Sim {
        let tick = std::env::var("MDPILOT_SIM_TICK_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1000u64);
        let mut trace = std::env::var_os("MDPILOT_SIM_TRACE").and_then(|p| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .ok()
        });
        let tick = Duration::from_millis(tick.max(1));
        loop {
            if !self.syncing() {
                tokio::select! {
                    p = poke.recv() => if p.is_none() { return self },
                    () = control(&mut self.control) => {}
                }
            }
            match self.absorb_writes() {
                Ok(events) => {
                    for e in events {
                        if tx.send(e).is_err() {
                            return self;
                        }
                    }
                }
                Err(e) => tracing::error!("simulator cannot write its tree: {e}"),
            }
            if !self.syncing() {
                continue;
            }
            if !self.run_syncs(&tx, &mut poke, tick, &mut trace).await {
                return self;
            }
        }
    }

    /// [`Sim::absorb_writes`] and sends its events; false when `tx` is closed.
    fn absorb_and_send(&mut self, tx: &UnboundedSender<Event>) -> bool {
        match self.absorb_writes() {
            Ok(events) => events.into_iter().all(|e| tx.send(e).is_ok()),
            Err(e) => {
                tracing::error!("simulator cannot write its tree: {e}");
                true
            }
        }
    }

    /// Steps the running syncs every `tick` until none runs (true) or `tx` closes (false). A
    /// poke in between makes it absorb writes to `md/sync_action` first.
    async fn run_syncs(
        &mut self,
        tx: &UnboundedSender<Event>,
        poke: &mut UnboundedReceiver<()>,
        tick: Duration,
        trace: &mut Option<std::fs::File>,
    ) -> bool {
        let mut interval = tokio::time::interval(tick);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        interval.tick().await;
        let mut last = tokio::time::Instant::now();
        while self.syncing() {
            tokio::select! {
                _ = interval.tick() => {}
                () = control(&mut self.control) => {
                    if !self.absorb_and_send(tx) {
                        return false;
                    }
                    continue;
                }
                p = poke.recv() => {
                    if p.is_some() {
                        match self.absorb_writes() {
                            Ok(events) => {
                                for e in events {
                                    if tx.send(e).is_err() {
                                        return false;
                                    }
                                }
                            }
                            Err(e) => tracing::error!("simulator cannot write its tree: {e}"),
                        }
                    }
                    continue;
                }
            }
            let now = tokio::time::Instant::now();
            match self.step(now - last) {
                Ok(events) => {
                    if let Some(f) = trace.as_mut() {
                        let ns = monotonic_ns();
                        for a in &self.arrays {
                            let d = a.sync_done_sectors.unwrap_or(0);
                            let _ = writeln!(f, "{ns} {} {d}", a.name);
                        }
                    }
                    for e in events {
                        if tx.send(e).is_err() {
                            return false;
                        }
                    }
                }
                Err(e) => tracing::error!("simulator cannot write its tree: {e}"),
            }
            last = now;
        }
        true
    }
}

/// Waits for the next SIGUSR1 when the simulator watches for it, else forever.
async fn control(sig: &mut Option<tokio::signal::unix::Signal>) {
    match sig {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending().await,
    }
}

/// `CLOCK_MONOTONIC` in ns: comparable across processes (the bench joins on it).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec; CLOCK_MONOTONIC is always available on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_is_capped_by_max_and_device() {
        assert_eq!(sync_rate_kib_s(1000, 200_000, 400_000, false), 200_000);
        assert_eq!(sync_rate_kib_s(1000, 900_000, 400_000, false), 400_000);
        assert_eq!(sync_rate_kib_s(1000, 200_000, 400_000, true), 1000);
    }

    #[test]
    fn local_limits_override_system() {
        let mut sim = Sim::create().unwrap();
        let root = sim.root().clone();
        assert_eq!(effective_limits(&root, "md1"), (1000, 200_000));
        std::fs::write(root.sys("block/md1/md/sync_speed_max"), "50000\n").unwrap();
        assert_eq!(effective_limits(&root, "md1"), (1000, 50_000));
        sim.step(Duration::from_secs(1)).unwrap();
        let t = std::fs::read_to_string(root.sys("block/md1/md/sync_speed_max")).unwrap();
        assert_eq!(t, "50000 (local)\n");
        let c = std::fs::read_to_string(root.sys("block/md1/md/sync_completed")).unwrap();
        assert_eq!(c, format!("100000 / {}\n", 64 * 1_048_576 * 2));
        std::fs::write(root.sys("block/md1/md/sync_speed_max"), "system\n").unwrap();
        sim.step(Duration::from_secs(1)).unwrap();
        let t = std::fs::read_to_string(root.sys("block/md1/md/sync_speed_max")).unwrap();
        assert_eq!(t, "200000 (system)\n");
    }

    /// The loop's normalization runs beside the service's writes of the same files: each limit
    /// written reads back as itself (`N` or `N (local)`), never as an older value put back.
    #[test]
    fn normalizing_beside_a_writer_never_puts_an_older_limit_back() {
        let sim = Sim::create().unwrap();
        let root = sim.root().clone();
        let path = root.sys("block/md1/md/sync_speed_max");
        // Set when the writer ends, a failed assertion included (so the normalizer stops too).
        struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    normalize_limits(&root, "md1").unwrap();
                }
            });
            let _stop = StopOnDrop(&done);
            for k in 1000..1500u64 {
                crate::sysfs::write::write_attr(&path, &format!("{k}\n")).unwrap();
                let t = std::fs::read_to_string(&path).unwrap();
                assert!(
                    t == format!("{k}\n") || t == format!("{k} (local)\n"),
                    "wrote {k}, reads {t:?}"
                );
            }
        });
    }

    #[test]
    fn sync_ends_with_mdstat_event_and_idle_tree() {
        let mut sim = Sim::create().unwrap();
        let ev = sim.step(Duration::from_secs(100_000)).unwrap();
        assert!(ev.contains(&Event::Mdstat));
        assert!(!sim.syncing());
        let root = sim.root().clone();
        let a = std::fs::read_to_string(root.sys("block/md1/md/sync_action")).unwrap();
        assert_eq!(a, "idle\n");
        let m = std::fs::read_to_string(root.proc("mdstat")).unwrap();
        assert!(!m.contains("resync"), "{m}");
    }

    #[test]
    fn sync_action_writes_start_and_stop_a_check() {
        let mut sim = Sim::create().unwrap();
        let root = sim.root().clone();
        let action = || std::fs::read_to_string(root.sys("block/md0/md/sync_action")).unwrap();
        assert!(
            sim.absorb_writes().unwrap().is_empty(),
            "nothing written yet"
        );
        std::fs::write(root.sys("block/md0/md/sync_action"), "check\n").unwrap();
        assert_eq!(sim.absorb_writes().unwrap(), [Event::Mdstat]);
        assert_eq!(action(), "check\n");
        sim.step(Duration::from_secs(1)).unwrap();
        let c = std::fs::read_to_string(root.sys("block/md0/md/sync_completed")).unwrap();
        assert!(c.starts_with("400000 / "), "{c}");
        std::fs::write(root.sys("block/md0/md/sync_action"), "idle\n").unwrap();
        assert_eq!(sim.absorb_writes().unwrap(), [Event::Mdstat]);
        assert_eq!(action(), "idle\n");
        let c = std::fs::read_to_string(root.sys("block/md0/md/sync_completed")).unwrap();
        assert_eq!(c, "none\n");
        // The tree carries what udev and mdadm add.
        assert_eq!(
            crate::array_names::resolve_array(&root, "/dev/md/root", &["md0".into(), "md1".into()]),
            Ok("md0".into())
        );
        assert_eq!(
            crate::array_names::metadata_name(&root, "md1").as_deref(),
            Some("sim:data")
        );
    }

    #[test]
    fn a_check_starts_at_sync_min_and_leaves_it_where_it_stopped() {
        let mut sim = Sim::create().unwrap();
        let root = sim.root().clone();
        let md = |f: &str| {
            std::fs::read_to_string(root.sys(format!("block/md0/md/{f}")))
                .unwrap()
                .trim()
                .to_string()
        };
        assert_eq!(md("sync_min"), "0");
        std::fs::write(root.sys("block/md0/md/sync_min"), "1000000\n").unwrap();
        std::fs::write(root.sys("block/md0/md/sync_action"), "check\n").unwrap();
        sim.absorb_writes().unwrap();
        assert_eq!(md("sync_completed"), "1000000 / 2097152");
        sim.step(Duration::from_millis(500)).unwrap();
        assert_eq!(md("sync_completed"), "1200000 / 2097152");
        // Interrupted: sync_min keeps the point reached.
        std::fs::write(root.sys("block/md0/md/sync_action"), "idle\n").unwrap();
        sim.absorb_writes().unwrap();
        assert_eq!(md("sync_min"), "1200000");
        // Written after a stop (a cancel's 0): kept.
        std::fs::write(root.sys("block/md0/md/sync_action"), "check\n").unwrap();
        sim.absorb_writes().unwrap();
        std::fs::write(root.sys("block/md0/md/sync_action"), "idle\n").unwrap();
        std::thread::sleep(Duration::from_millis(10));
        std::fs::write(root.sys("block/md0/md/sync_min"), "0\n").unwrap();
        sim.absorb_writes().unwrap();
        assert_eq!(md("sync_min"), "0");
        std::fs::write(root.sys("block/md0/md/sync_min"), "1200000\n").unwrap();
        // Resumed there and run to the end: sync_min is forgotten.
        std::fs::write(root.sys("block/md0/md/sync_action"), "check\n").unwrap();
        sim.absorb_writes().unwrap();
        assert_eq!(md("sync_completed"), "1200000 / 2097152");
        sim.step(Duration::from_secs(100)).unwrap();
        assert_eq!(
            (md("sync_action").as_str(), md("sync_min").as_str()),
            ("idle", "0")
        );
    }

    #[test]
    fn a_member_written_faulty_fails_and_degrades_the_array() {
        let mut sim = Sim::create().unwrap();
        let root = sim.root().clone();
        std::fs::write(root.sys("block/md0/md/dev-sdb1/state"), "faulty\n").unwrap();
        assert_eq!(sim.absorb_writes().unwrap(), [Event::Mdstat]);
        let d = std::fs::read_to_string(root.sys("block/md0/md/degraded")).unwrap();
        assert_eq!(d, "1\n");
        let m = std::fs::read_to_string(root.proc("mdstat")).unwrap();
        assert!(m.contains("md0 : active raid1 sdb1[1](F) sda1[0]"), "{m}");
        assert!(m.contains("[2/1] [U_]"), "{m}");
        assert!(sim.absorb_writes().unwrap().is_empty(), "failed once");
    }

    #[test]
    fn mdstat_has_progress_line_while_syncing() {
        let mut sim = Sim::create().unwrap();
        sim.step(Duration::from_secs(10)).unwrap();
        let m = std::fs::read_to_string(sim.root().proc("mdstat")).unwrap();
        assert!(
            m.contains("md1 : active raid5 sde1[2] sdd1[1] sdc1[0]"),
            "{m}"
        );
        assert!(m.contains("resync =  2.9% (2000000/67108864)"), "{m}");
    }
}
