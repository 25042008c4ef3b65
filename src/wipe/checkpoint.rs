//! Durable checkpoints of wipe jobs: what lets `mdpilot wipe DEVICE --resume` continue a wipe
//! after a power cut, a killed installer or a reboot instead of starting again at 0.
//!
//! Where: `/var/lib/mdpilot/wipe/<escaped stable id>.json` ([`path_for`]) under the
//! [`crate::host::Root`] ([`DIR`]), beside (not inside) the policy state. The policy state
//! lives in `/run/mdpilot` because what it
//! records (speed limits) dies with the kernel; a checkpoint describes bytes on a disk, which
//! survive a power cut that empties `/run`, so it must be on persistent storage.
//!
//! What: the device identity ([`Identity`]: stable id, size, logical block size), the method,
//! the random key (hex; the file is 0600 in a 0700 directory: the key only reproduces the
//! written stream for `--verify`), every range, `durable_offset`: every byte of the ranges
//! below it is on the device (written, then a cache flush returned), and `head`: the SHA-256 of
//! the wipe's own first bytes ([`head_digest`]), which a resume reads back before it writes.
//! Files without `head` (earlier versions) load, and resume only when a person asks.
//!
//! When ([`Checkpointer`]): at the start (offset where the job begins), then after a completed
//! request when at least a second has passed or 1 GiB more is durable since the last save
//! (whichever comes first: at rates above 1 GiB/s that is more than once a second, bounding the
//! work a resume repeats to 1 GiB), always after `fdatasync` on the device returned for the
//! bytes it describes; saved by [`crate::atomic::write`] (a randomly named temporary file,
//! fsync, rename, fsync of the directory). Removed when the job completes or is cancelled;
//! kept when it fails (a resume may continue).
//! A file that does not parse is kept aside as `NAME.corrupt-<unix seconds>` and read as no
//! checkpoint ([`load_or_set_aside`]), as the policy state does with a corrupt state file.

use super::plan::{Data, HeadDigest, Identity, Method, Op, Range, ResyncMark, StartedBy};
use super::sink::Sink;
use super::stream::Seed;
use crate::host::Root;
use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The checkpoint directory, relative to the root.
pub const DIR: &str = "/var/lib/mdpilot/wipe";
/// Save at least every this many durable bytes (1 GiB).
pub const SAVE_EVERY_BYTES: u64 = 1 << 30;
/// Save at most this often, unless [`SAVE_EVERY_BYTES`] more are durable.
pub const SAVE_INTERVAL: Duration = Duration::from_secs(1);

/// The checkpoint file's content (JSON).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Checkpoint {
    /// Format version (1).
    pub version: u32,
    /// The device node when the job started (informative: names move between boots).
    pub device: PathBuf,
    /// Its kernel name then (`sdb`, `md0`).
    pub name: String,
    /// Who the device is.
    pub identity: Identity,
    /// [`Method::name`].
    pub method: String,
    /// The random key in hex (`random` only).
    pub seed_hex: Option<String>,
    /// `--verify` was asked for.
    pub verify: bool,
    /// Every range of the whole wipe, bytes.
    pub ranges: Vec<Range>,
    /// Every byte of `ranges` below this device offset is durable.
    pub durable_offset: u64,
    /// For a freeze-and-skip job: the array and its resync position right after the freeze.
    pub resync: Option<ResyncRecord>,
    /// Who ran the job: only the service's own jobs are continued when it starts
    /// ([`StartedBy::Service`]); absent in older files (read as the CLI's).
    #[serde(default)]
    pub started_by: StartedBy,
    /// The first bytes of the wipe as the device holds them once durable ([`head_digest`]):
    /// what the service's auto-resume needs to confirm the disk before it writes ([`locate`]).
    /// `None` in files written before mdpilot recorded it (those resume only when a person
    /// asks: `--resume`), and for operations whose result is device-defined (`discard`).
    #[serde(default)]
    pub head: Option<HeadDigest>,
}

/// The resync part of a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ResyncRecord {
    /// Kernel name of the array (`md0`).
    pub array: String,
    /// `resync_start` and `sync_completed` right after the first run froze the resync.
    pub mark: ResyncMark,
}

impl Checkpoint {
    /// The method recorded, if it is one this version knows.
    pub fn method(&self) -> Option<Method> {
        Method::from_name(&self.method)
    }

    /// The random key, if any (and well-formed).
    pub fn seed(&self) -> Option<Seed> {
        let h = self.seed_hex.as_deref()?;
        if h.len() != 64 {
            return None;
        }
        let mut k = [0u8; 32];
        for (i, b) in k.iter_mut().enumerate() {
            *b = u8::from_str_radix(h.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Seed(k))
    }

    /// Bytes of `ranges` below `durable_offset`.
    pub fn durable_bytes(&self) -> u64 {
        durable_bytes(&self.ranges, self.durable_offset)
    }

    /// Total bytes of `ranges`.
    pub fn total_bytes(&self) -> u64 {
        self.ranges.iter().map(|r| r.len).sum()
    }
}

/// How much of the start of a wipe a checkpoint hashes ([`head_digest`]): 64 KiB, a multiple of
/// every logical block size and less than a request ([`super::planner::MIN_BLOCK`]), so
/// durable as soon as any byte is. It covers what a disk's own first sectors usually hold
/// (partition tables, GPT, md 1.1/1.2 superblocks at 0 and 4 KiB, filesystem superblocks):
/// another disk whose first 4 KiB happen to read as zeroes still differs here.
pub const HEAD_BYTES: u64 = 64 * 1024;

/// The [`HeadDigest`] of a wipe applying `op` to `ranges` (pure): the SHA-256 of what `op`
/// leaves in the first [`HEAD_BYTES`] of the first range (shorter when that range is). `None`
/// when there is nothing to record: no ranges, or an operation whose result the device
/// defines (`BLKDISCARD`) or that comes from a file or a stream (not checkpointed).
pub fn head_digest(op: &Op, ranges: &[Range]) -> Option<HeadDigest> {
    if !matches!(op, Op::Write(Data::Zero | Data::Random(_)) | Op::ZeroOut) {
        return None;
    }
    let first = ranges.first().filter(|r| r.len > 0)?;
    let len = first.len.min(HEAD_BYTES);
    let mut want = vec![0u8; usize::try_from(len).ok()?];
    super::source::expected(op, &super::source::Sources::none(), first.offset, &mut want).ok()?;
    Some(HeadDigest {
        offset: first.offset,
        len,
        sha256: sha256_hex(&want),
    })
}

/// `seed` as 64 hex digits.
pub fn seed_hex(seed: &Seed) -> String {
    seed.0.iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes of `ranges` below device offset `off`.
pub fn durable_bytes(ranges: &[Range], off: u64) -> u64 {
    ranges
        .iter()
        .map(|r| off.clamp(r.offset, r.offset + r.len) - r.offset)
        .sum()
}

/// The parts of `ranges` below device offset `off` (pure): what a checkpoint says is durable.
pub fn durable_ranges(ranges: &[Range], off: u64) -> Vec<Range> {
    ranges
        .iter()
        .filter(|r| r.offset < off)
        .map(|r| Range {
            offset: r.offset,
            len: (r.offset + r.len).min(off) - r.offset,
        })
        .collect()
}

/// What is left of `ranges` at and above device offset `off` (pure).
pub fn remaining(ranges: &[Range], off: u64) -> Vec<Range> {
    ranges
        .iter()
        .filter(|r| r.offset + r.len > off)
        .map(|r| {
            let start = r.offset.max(off);
            Range {
                offset: start,
                len: r.offset + r.len - start,
            }
        })
        .collect()
}

/// Longest escaped stable id kept whole in a file name; longer ones are cut and hashed
/// ([`path_for`]). With `.json` and the `.corrupt-<seconds>.N` or temporary suffixes the name
/// stays well under `NAME_MAX` (255 bytes).
const NAME_MAX_ESCAPED: usize = 180;
/// How much of an over-long escaped id a name keeps before the hash.
const NAME_KEPT: usize = 120;

/// The file of the device whose stable id is `stable_id` in `dir` (pure, injective: two ids
/// never share a file). The id is percent-escaped: `[A-Za-z0-9._-]` stay, every other byte of
/// its UTF-8 becomes `%XX` (upper-case hex; `%` itself too), so `by-id:usb-A-0:0` is
/// `by-id%3Ausb-A-0%3A0.json` and `by-id:usb-A-0_0` is `by-id%3Ausb-A-0_0.json`. An escaped id
/// longer than 180 bytes (a deep loop backing file) is cut to its first 120 (never inside an
/// escape), then `~` and the SHA-256 of the whole id in hex: `~` never appears in an escaped
/// id, so the two forms cannot meet. Ids without characters to escape keep the name the
/// previous scheme gave them; for the others, [`path_in`] still finds a file of that scheme.
pub fn path_for(dir: &Path, stable_id: &str) -> PathBuf {
    let mut safe = String::with_capacity(stable_id.len());
    for b in stable_id.bytes() {
        if b.is_ascii_alphanumeric() || b"._-".contains(&b) {
            safe.push(char::from(b));
        } else {
            safe.push_str(&format!("%{b:02X}"));
        }
    }
    if safe.len() > NAME_MAX_ESCAPED {
        let mut cut = NAME_KEPT;
        // Not inside a `%XX`: back off to the escape's start.
        while safe.as_bytes()[cut - 2..cut].contains(&b'%') {
            cut -= 1;
        }
        safe = format!("{}~{}", &safe[..cut], sha256_hex(stable_id.as_bytes()));
    }
    dir.join(format!("{safe}.json"))
}

/// The name the previous scheme gave `stable_id`'s file: every character outside
/// `[A-Za-z0-9._-]` replaced by `_` (not injective: `usb-A-0:0` and `usb-A-0_0` met).
fn legacy_path_for(dir: &Path, stable_id: &str) -> PathBuf {
    let safe: String = stable_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    dir.join(format!("{safe}.json"))
}

/// Where the checkpoint of `stable_id` is in `dir`: [`path_for`], unless no file is there and a
/// file under the previous scheme's name (`legacy_path_for`) records this very stable id
/// (then that file: a checkpoint written before the upgrade is resumed, saved and removed
/// where it is). A previous-scheme file of another id (the collision the new names end) or
/// one that does not load is not taken. Reads only; changes nothing.
pub fn path_in(dir: &Path, stable_id: &str) -> PathBuf {
    let path = path_for(dir, stable_id);
    let old = legacy_path_for(dir, stable_id);
    if old == path || fs::symlink_metadata(&path).is_ok() {
        return path;
    }
    match load(&old) {
        Ok(Some(c)) if c.identity.stable_id == stable_id => old,
        _ => path,
    }
}

/// SHA-256 of `bytes`, 64 lower-case hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Reads the checkpoint at `path`; `Ok(None)` when there is none. Changes nothing (see
/// [`load_or_set_aside`] for what the front ends use).
///
/// Errors: the OS error, or `InvalidData` for a file that is not a checkpoint.
pub fn load(path: &Path) -> io::Result<Option<Checkpoint>> {
    match fs::read(path) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Reads the checkpoint at `path` like [`load`], but a file that is not a checkpoint (torn,
/// edited, another version's) is kept aside ([`set_aside`]: renamed to
/// `NAME.corrupt-<unix seconds>` in the same directory, a warning naming both paths) and read as
/// no checkpoint: a corrupt file must not block every wipe of its device, and its bytes stay
/// for a person to look at. `Ok(None)` when there is none (or it was set aside).
///
/// Errors: the OS error of the read, or of the rename (`InvalidData`, naming both paths: the
/// corrupt file is still in place).
pub fn load_or_set_aside(path: &Path) -> io::Result<Option<Checkpoint>> {
    match load(path) {
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            set_aside(path, &e.to_string())?;
            Ok(None)
        }
        other => other,
    }
}

/// Renames the corrupt checkpoint at `path` to `NAME.corrupt-<unix seconds>` (`.N` appended
/// when that exists: never over an earlier one) in its directory, fsyncs the directory, and
/// logs a warning naming both paths and `reason` (what the parser said). Returns the new path.
///
/// Errors: `InvalidData` naming both paths and the OS error when the rename fails.
pub fn set_aside(path: &Path, reason: &str) -> io::Result<PathBuf> {
    let secs = crate::host::unix_now_s();
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let aside = |suffix: String| path.with_file_name(format!("{name}.corrupt-{secs}{suffix}"));
    let mut moved_to = aside(String::new());
    let mut n = 1;
    while moved_to.exists() {
        moved_to = aside(format!(".{n}"));
        n += 1;
    }
    if let Err(e) = fs::rename(path, &moved_to) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "checkpoint {} is corrupt ({reason}) and could not be moved to {}: {e}",
                path.display(),
                moved_to.display()
            ),
        ));
    }
    if let Some(d) = path.parent() {
        let _ = fs::File::open(d).and_then(|d| d.sync_all());
    }
    tracing::warn!(
        "wipe checkpoint {} is corrupt ({reason}): moved it to {}; going on as if there were \
         no checkpoint",
        path.display(),
        moved_to.display()
    );
    Ok(moved_to)
}

/// Every readable checkpoint in `dir` with its path, sorted by path. A corrupt file is set
/// aside ([`load_or_set_aside`], one warning); a file that cannot be read is skipped with a
/// warning.
pub fn list(dir: &Path) -> Vec<(PathBuf, Checkpoint)> {
    let mut v: Vec<_> = fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(std::result::Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .filter_map(|p| match load_or_set_aside(&p) {
                    Ok(c) => c.map(|c| (p, c)),
                    Err(e) => {
                        tracing::warn!("{}: checkpoint skipped: {e}", p.display());
                        None
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// The device checkpoint `ck` (read from `path` in `dir`) is of, if it is still there and may
/// be continued without a person: the `/dev/disk/by-id` link or `/dev/mapper` name its stable
/// id names (kernel names move between boots), else the node it was started on, as a caller
/// names it (`/dev/disk/by-id/…`; a request finds it under the root); accepted only when that
/// device's stable id leads to this same file ([`path_in`]), i.e. it is the device the
/// checkpoint describes. Size, block size, method and ranges are checked later by
/// [`super::planner::resume`], and the job reads back what the checkpoint says is durable —
/// the first bytes by their [`HeadDigest`], then samples — before it writes.
///
/// What the service's auto-resume goes by: a checkpoint that leaves nothing to confirm the
/// disk with ([`needs_a_person`]) is never located (no person confirms the disk at start-up).
///
/// Errors: why not, as a sentence (see [`needs_a_person`]; no such device, cannot probe it,
/// another device there now).
pub fn locate(root: &Root, dir: &Path, path: &Path, ck: &Checkpoint) -> Result<PathBuf, String> {
    let id = &ck.identity.stable_id;
    if let Some(why) = needs_a_person(ck) {
        return Err(format!(
            "{why}: not resumed automatically; `mdpilot wipe {} --resume` continues it once a \
             person has confirmed the disk (`--restart` starts again at 0)",
            ck.device.display()
        ));
    }
    // The node as a caller names it (what a request takes; `plan_for` finds it in the root),
    // and where it is under the root.
    let named = if let Some(link) = id.strip_prefix("by-id:") {
        Some(PathBuf::from(format!("/dev/disk/by-id/{link}")))
    } else {
        id.strip_prefix("dm-name:")
            .map(|n| PathBuf::from(format!("/dev/mapper/{n}")))
    };
    let (dev, probed) = match named {
        Some(n) => (n.clone(), root.path(n)),
        None => (ck.device.clone(), ck.device.clone()),
    };
    let p = super::probe::probe(root, &probed).map_err(|e| {
        format!(
            "{} ({id}): {}",
            dev.display(),
            crate::error::error_chain(&e)
        )
    })?;
    if path_in(dir, &p.stable_id) != path {
        return Err(format!(
            "{} is now another device ({}, the checkpoint is of {id})",
            dev.display(),
            p.stable_id
        ));
    }
    Ok(dev)
}

/// Why `ck` may be continued only when a person asks (`--resume`), if so (pure): its identity
/// [`is_weak`] (a kernel name may be another disk after a reboot); nothing of it is durable
/// (its device holds none of the wipe's data yet, so the read-back before a resume has
/// nothing to compare, and a `by-id` name is not unique: USB enclosures that report one
/// serial share it); or it records no [`HeadDigest`] (written by an earlier mdpilot, or a
/// `discard`, whose result the device defines) or one below its durable offset.
pub fn needs_a_person(ck: &Checkpoint) -> Option<String> {
    let id = &ck.identity.stable_id;
    if is_weak(id) {
        return Some(format!(
            "its device is known only by its kernel name ({id}), which may name another disk \
             after a reboot (virtio disks without a serial, xvd*, nbd*, rbd* are renumbered)"
        ));
    }
    if ck.durable_bytes() == 0 {
        return Some(format!(
            "nothing of it was durable when it stopped: no data of the wipe on the disk can \
             confirm that {id} is still the disk it was wiping (a by-id name can be shared, \
             e.g. by USB enclosures that report one serial)"
        ));
    }
    match &ck.head {
        None => Some(
            "it records none of the wipe's first bytes to check the disk by (a checkpoint of \
             an earlier mdpilot, or a discard, whose result the device defines)"
                .into(),
        ),
        Some(h) if ck.durable_offset < h.offset.saturating_add(h.len) => Some(format!(
            "its first bytes (at offset {}, {} bytes) are not durable yet",
            h.offset, h.len
        )),
        Some(_) => None,
    }
}

/// True for a stable id that names only the kernel name (`name:<kernel name>`, see
/// [`super::probe::Probe::stable_id`]): after a reboot it may be another disk.
pub fn is_weak(stable_id: &str) -> bool {
    stable_id.starts_with("name:")
}

/// Saves `ck` at `path` durably with [`crate::atomic::write`] (0600; a temporary file with a
/// random name created `O_EXCL`, so nothing planted beside it is opened or followed; fsync,
/// rename, fsync of the directory), after creating the directory (0700).
///
/// Errors: the OS error of any step, or `InvalidData` when `ck` does not serialize; `path` is
/// then left as it was.
pub fn save(path: &Path, ck: &Checkpoint) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
    let body =
        serde_json::to_vec_pretty(ck).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    crate::atomic::write(path, &body, 0o600)
}

/// Removes the checkpoint at `path` (and fsyncs the directory); a missing file is fine.
///
/// Errors: the OS error.
pub fn remove(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    }
    if let Some(d) = path.parent() {
        fs::File::open(d)?.sync_all()?;
    }
    Ok(())
}

/// Which request indices completed, and the offset below which all did.
struct Track {
    /// The next request index not yet counted in `durable_offset`.
    next: u64,
    /// Completed requests at or above `next`: index -> end offset.
    pending: BTreeMap<u64, u64>,
    /// Every range byte below this offset completed.
    completed_offset: u64,
    /// `completed_offset` when a save was last started, and when.
    saved_offset: u64,
    saved_at: Instant,
}

/// Keeps a job's checkpoint current while its workers complete requests (see the module doc).
pub struct Checkpointer<'a> {
    path: PathBuf,
    sink: &'a dyn Sink,
    track: Mutex<Track>,
    /// The template (its `durable_offset` is the last one written), under the save lock.
    written: Mutex<Checkpoint>,
    /// The failpoint `MDPILOT_FAILPOINT_WIPE_HOLD`, when armed ([`Checkpointer::hold_cancel`]).
    #[cfg(feature = "failpoints")]
    hold: Option<Hold>,
}

/// The failpoint's hold: at which completed offset, the FIFO it reports on, the job's cancel
/// flag (which ends it), and whether it happened.
#[cfg(feature = "failpoints")]
struct Hold {
    at: u64,
    fifo: PathBuf,
    cancel: std::sync::Arc<std::sync::atomic::AtomicBool>,
    held: std::sync::atomic::AtomicBool,
}

impl<'a> Checkpointer<'a> {
    /// A checkpointer for `ck` (whose `durable_offset` is where this run starts) at `path`,
    /// flushing `sink` before each save. Nothing is written until [`Checkpointer::save_now`] or a
    /// completion.
    pub fn new(path: PathBuf, sink: &'a dyn Sink, ck: Checkpoint) -> Self {
        let start = ck.durable_offset;
        Checkpointer {
            path,
            sink,
            track: Mutex::new(Track {
                next: 0,
                pending: BTreeMap::new(),
                completed_offset: start,
                saved_offset: start,
                saved_at: Instant::now(),
            }),
            written: Mutex::new(ck),
            #[cfg(feature = "failpoints")]
            hold: None,
        }
    }

    /// Saves the checkpoint as it stands (no flush: nothing new is claimed durable).
    ///
    /// Errors: as [`save`].
    pub fn save_now(&self) -> io::Result<()> {
        let ck = crate::lock::lock(&self.written);
        save(&self.path, &ck)
    }

    /// Request `index` (in the order of the plan's requests) completed, ending at device
    /// offset `end`. Saves when due (after a flush of the sink); a failed save is logged.
    pub fn completed(&self, index: u64, end: u64) {
        let due = {
            let mut t = crate::lock::lock(&self.track);
            t.pending.insert(index, end);
            loop {
                let next = t.next;
                match t.pending.remove(&next) {
                    Some(e) => {
                        t.completed_offset = e;
                        t.next += 1;
                    }
                    None => break,
                }
            }
            #[cfg(feature = "failpoints")]
            self.hold_point(&t);
            let fresh = t.completed_offset > t.saved_offset;
            let due = fresh
                && (t.saved_at.elapsed() >= SAVE_INTERVAL
                    || t.completed_offset - t.saved_offset >= SAVE_EVERY_BYTES);
            if due {
                t.saved_offset = t.completed_offset;
                t.saved_at = Instant::now();
            }
            due.then_some(t.completed_offset)
        };
        if let Some(off) = due {
            self.flush_and_save(off);
        }
    }

    /// With `--features failpoints` and `MDPILOT_FAILPOINT_WIPE_HOLD=BYTES:FIFO` (read once, by
    /// [`Checkpointer::hold_cancel`]): the first completion that takes the completed offset to
    /// `BYTES` or more saves the checkpoint at once, writes `held OFFSET` (the offset saved) to
    /// the FIFO `FIFO` (its open blocks until the test reads), and then waits for the job's
    /// cancel. It holds the completion lock, so every other worker stops at its next
    /// completion: the job stands still, part written, for the test to kill it or stop it at a
    /// known point however fast the host writes.
    #[cfg(feature = "failpoints")]
    fn hold_point(&self, t: &Track) {
        use std::sync::atomic::Ordering;
        let Some(h) = &self.hold else {
            return;
        };
        if t.completed_offset < h.at || h.held.swap(true, Ordering::SeqCst) {
            return;
        }
        self.flush_and_save(t.completed_offset);
        let saved = crate::lock::lock(&self.written).durable_offset;
        if let Ok(mut f) = fs::OpenOptions::new().write(true).open(&h.fifo) {
            use std::io::Write;
            let _ = writeln!(f, "held {saved}");
        }
        while !h.cancel.load(Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Arms the failpoint `MDPILOT_FAILPOINT_WIPE_HOLD` when the environment sets it
    /// (`BYTES:FIFO`; anything else leaves it off), with the job's cancel flag, which ends the
    /// hold.
    #[cfg(feature = "failpoints")]
    pub fn hold_cancel(mut self, cancel: std::sync::Arc<std::sync::atomic::AtomicBool>) -> Self {
        let v = std::env::var("MDPILOT_FAILPOINT_WIPE_HOLD").unwrap_or_default();
        if let Some((bytes, fifo)) = v.split_once(':') {
            if let Ok(at) = bytes.parse::<u64>() {
                self.hold = Some(Hold {
                    at,
                    fifo: PathBuf::from(fifo),
                    cancel,
                    held: Default::default(),
                });
            }
        }
        self
    }

    /// Flushes the sink and saves everything completed so far (at the end of a failed job).
    pub fn final_save(&self) {
        let off = crate::lock::lock(&self.track).completed_offset;
        self.flush_and_save(off);
    }

    fn flush_and_save(&self, off: u64) {
        let mut ck = crate::lock::lock(&self.written);
        if off <= ck.durable_offset {
            return;
        }
        // Everything below `off` completed before this flush was issued: after it returns,
        // it is durable even on a device with a volatile write cache.
        if let Err(e) = self.sink.flush() {
            tracing::warn!(
                "{}: flush before checkpoint failed: {e}",
                self.path.display()
            );
            return;
        }
        let before = ck.durable_offset;
        ck.durable_offset = off;
        if let Err(e) = save(&self.path, &ck) {
            ck.durable_offset = before;
            tracing::warn!("{}: cannot save the checkpoint: {e}", self.path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_checkpoint_known_only_by_kernel_name_is_never_located_for_auto_resume() {
        let d = tempfile::tempdir().unwrap();
        let ck = Checkpoint {
            version: 1,
            device: "/dev/vdb".into(),
            name: "vdb".into(),
            identity: Identity {
                stable_id: "name:vdb".into(),
                size_bytes: 1 << 30,
                logical_block_size: 512,
            },
            method: "zero".into(),
            seed_hex: None,
            verify: false,
            ranges: vec![],
            durable_offset: 0,
            resync: None,
            started_by: StartedBy::Service { uid: 0 },
            head: None,
        };
        let p = path_for(d.path(), "name:vdb");
        let e = locate(&Root::new(d.path()), d.path(), &p, &ck).unwrap_err();
        assert!(e.contains("kernel name") && e.contains("--resume"), "{e}");
        assert!(is_weak("name:vdb") && !is_weak("by-id:virtio-x") && !is_weak("loop:/f"));
    }

    use super::*;
    use crate::wipe::sink::MemSink;

    fn ck(ranges: Vec<Range>) -> Checkpoint {
        Checkpoint {
            version: 1,
            device: "/dev/x".into(),
            name: "x".into(),
            identity: Identity::default(),
            method: "random".into(),
            seed_hex: Some(seed_hex(&Seed([0xab; 32]))),
            verify: false,
            ranges,
            durable_offset: 0,
            resync: None,
            started_by: StartedBy::Cli,
            head: None,
        }
    }

    #[test]
    fn only_a_checkpoint_with_durable_bytes_and_their_digest_is_resumed_without_a_person() {
        let whole = vec![Range {
            offset: 0,
            len: 8 << 20,
        }];
        let mut c = ck(whole.clone());
        c.identity.stable_id = "by-id:usb-A-0:0".into();
        c.head = head_digest(&Op::Write(Data::Zero), &whole);
        let h = c.head.clone().unwrap();
        assert_eq!((h.offset, h.len), (0, HEAD_BYTES));
        assert_eq!(h.sha256, sha256_hex(&[0; HEAD_BYTES as usize]));
        let why = needs_a_person(&c).unwrap();
        assert!(why.contains("nothing of it was durable"), "{why}");
        c.durable_offset = 4 << 20;
        assert_eq!(needs_a_person(&c), None);
        // A damaged record whose bytes lie above the durable offset.
        c.head.as_mut().unwrap().offset = 5 << 20;
        assert!(needs_a_person(&c).unwrap().contains("not durable yet"));
        // A file of an earlier mdpilot has no `head`: it loads, but waits for `--resume`.
        let mut old = serde_json::to_value(&c).unwrap();
        old.as_object_mut().unwrap().remove("head");
        let back: Checkpoint = serde_json::from_value(old).unwrap();
        assert_eq!(back.head, None);
        let why = needs_a_person(&back).unwrap();
        assert!(why.contains("earlier mdpilot"), "{why}");
        let d = tempfile::tempdir().unwrap();
        let e = locate(&Root::new(d.path()), d.path(), d.path(), &back).unwrap_err();
        assert!(
            e.contains("--resume") && e.contains("not resumed automatically"),
            "{e}"
        );
        // Discard leaves device-defined bytes: nothing to record.
        assert_eq!(head_digest(&Op::Discard, &whole), None);
        let short = [Range {
            offset: 4096,
            len: 512,
        }];
        let r = head_digest(&Op::Write(Data::Random(Seed([1; 32]))), &short).unwrap();
        assert_eq!((r.offset, r.len), (4096, 512));
    }

    #[test]
    fn remaining_and_durable_bytes_follow_the_ranges() {
        let r = vec![
            Range {
                offset: 0,
                len: 100,
            },
            Range {
                offset: 1000,
                len: 100,
            },
        ];
        assert_eq!(durable_bytes(&r, 50), 50);
        assert_eq!(durable_bytes(&r, 500), 100);
        assert_eq!(durable_bytes(&r, 1050), 150);
        assert_eq!(
            remaining(&r, 50),
            vec![
                Range {
                    offset: 50,
                    len: 50
                },
                Range {
                    offset: 1000,
                    len: 100
                }
            ]
        );
        assert_eq!(
            remaining(&r, 500),
            vec![Range {
                offset: 1000,
                len: 100
            }]
        );
        assert!(remaining(&r, 1100).is_empty());
    }

    #[test]
    fn started_by_is_recorded_and_old_files_read_as_the_cli() {
        let mut c = ck(vec![]);
        c.started_by = StartedBy::Service { uid: 1000 };
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(
            v["started_by"],
            serde_json::json!({"service": {"uid": 1000}})
        );
        assert_eq!(serde_json::from_value::<Checkpoint>(v.clone()).unwrap(), c);
        let mut old = v;
        old.as_object_mut().unwrap().remove("started_by");
        let back: Checkpoint = serde_json::from_value(old).unwrap();
        assert_eq!(back.started_by, StartedBy::Cli);
    }

    #[test]
    fn seed_round_trips_and_path_is_safe() {
        let c = ck(vec![]);
        assert_eq!(c.seed(), Some(Seed([0xab; 32])));
        assert_eq!(
            path_for(Path::new("/d"), "loop:/var/tmp/a b.img"),
            PathBuf::from("/d/loop%3A%2Fvar%2Ftmp%2Fa%20b.img.json")
        );
    }

    #[test]
    fn a_symlink_at_the_old_temporary_name_is_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let secret = d.path().join("secret");
        fs::write(&secret, "keep").unwrap();
        let p = path_for(d.path(), "by-id:usb-A-0:0");
        // The name the writer used to open with O_CREAT|O_TRUNC, following links.
        std::os::unix::fs::symlink(&secret, p.with_extension("json.tmp")).unwrap();
        save(&p, &ck(vec![])).unwrap();
        assert_eq!(fs::read_to_string(&secret).unwrap(), "keep");
        assert!(!fs::symlink_metadata(&p).unwrap().file_type().is_symlink());
        assert_eq!(load(&p).unwrap().unwrap(), ck(vec![]));
        let mode = fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn ids_that_differ_only_in_escaped_characters_get_two_files() {
        let d = Path::new("/d");
        let (a, b) = ("by-id:usb-A-0:0", "by-id:usb-A-0_0");
        assert_ne!(path_for(d, a), path_for(d, b));
        let dir = tempfile::tempdir().unwrap();
        let (mut ca, mut cb) = (ck(vec![]), ck(vec![]));
        ca.identity.stable_id = a.into();
        cb.identity.stable_id = b.into();
        save(&path_for(dir.path(), a), &ca).unwrap();
        save(&path_for(dir.path(), b), &cb).unwrap();
        let back = |id| load(&path_for(dir.path(), id)).unwrap().unwrap();
        assert_eq!((back(a), back(b)), (ca, cb));
    }

    #[test]
    fn a_checkpoint_under_its_previous_scheme_name_is_still_found() {
        let d = tempfile::tempdir().unwrap();
        let id = "by-id:usb-A-0:0";
        let old = d.path().join("by-id_usb-A-0_0.json");
        assert_eq!(
            path_in(d.path(), id),
            path_for(d.path(), id),
            "nothing there"
        );
        let mut c = ck(vec![]);
        c.identity.stable_id = id.into();
        save(&old, &c).unwrap();
        assert_eq!(path_in(d.path(), id), old);
        // The file there is the other id's (the collision): not this device's checkpoint.
        assert_eq!(
            path_in(d.path(), "by-id:usb-A-0/0"),
            path_for(d.path(), "by-id:usb-A-0/0")
        );
        // Once a file has the new name, it is the one.
        save(&path_for(d.path(), id), &c).unwrap();
        assert_eq!(path_in(d.path(), id), path_for(d.path(), id));
        // An id with nothing to escape had the same name under both schemes.
        assert_eq!(
            path_for(d.path(), "md-uuid-abc"),
            d.path().join("md-uuid-abc.json")
        );
    }

    mod names {
        use super::*;
        use proptest::prelude::*;

        /// Characters that old and naive escapes confuse: escaped ones, the escape character,
        /// hex digits, a multi-byte one, a control character.
        const ALPHABET: &[char] = &[
            'a', 'A', '3', ':', '_', '/', '%', '~', '.', '-', ' ', '\u{e9}', '\0',
        ];

        fn id() -> impl Strategy<Value = String> {
            (
                proptest::collection::vec(proptest::sample::select(ALPHABET), 0..6),
                prop_oneof![Just(0usize), 150usize..260],
            )
                .prop_map(|(v, long)| {
                    v.into_iter()
                        .chain(std::iter::repeat('x').take(long))
                        .collect()
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1000))]
            /// Two stable ids never share a file, and every name is one short path component.
            #[test]
            fn path_for_is_injective(a in id(), b in id()) {
                let d = Path::new("/d");
                let (pa, pb) = (path_for(d, &a), path_for(d, &b));
                prop_assert_eq!(a == b, pa == pb, "{:?} {:?} -> {:?}", a, b, pa);
                let name = pa.file_name().unwrap().to_string_lossy().into_owned();
                prop_assert_eq!(pa.parent(), Some(d));
                prop_assert!(name.len() <= 200 && name.ends_with(".json"), "{}", name);
            }
        }
    }

    #[test]
    fn saves_only_the_contiguous_prefix_and_never_goes_back() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("w/c.json");
        let sink = MemSink::new(16, 0);
        let c = Checkpointer::new(
            p.clone(),
            &sink,
            ck(vec![Range {
                offset: 0,
                len: 400,
            }]),
        );
        c.save_now().unwrap();
        assert_eq!(load(&p).unwrap().unwrap().durable_offset, 0);
        // Request 1 completes first: nothing below it is complete yet.
        c.completed(1, 200);
        c.final_save();
        assert_eq!(load(&p).unwrap().unwrap().durable_offset, 0);
        c.completed(0, 100);
        c.final_save();
        assert_eq!(load(&p).unwrap().unwrap().durable_offset, 200);
        c.flush_and_save(100);
        assert_eq!(load(&p).unwrap().unwrap().durable_offset, 200);
        let mode = fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        remove(&p).unwrap();
        assert!(load(&p).unwrap().is_none());
        remove(&p).unwrap();
    }

    #[test]
    fn a_corrupt_checkpoint_is_set_aside_and_reads_as_none() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("loop_x.json");
        fs::write(&p, b"{ not json \xff").unwrap();
        assert_eq!(load(&p).unwrap_err().kind(), io::ErrorKind::InvalidData);
        assert!(load_or_set_aside(&p).unwrap().is_none());
        assert!(!p.exists());
        fs::write(&p, b"garbage").unwrap();
        assert!(list(d.path()).is_empty());
        let mut names: Vec<String> = fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(names[0].starts_with("loop_x.json.corrupt-"), "{names:?}");
        assert!(names[1].starts_with("loop_x.json.corrupt-"), "{names:?}");
        assert_eq!(fs::read(d.path().join(&names[1])).unwrap(), b"garbage");
    }
}
