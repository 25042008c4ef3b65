//! The pure planner: `Probe + Method + Options -> Plan` (or a refusal). No I/O.
//!
//! Decisions and why (each one is also written into [`Plan::reasons`], which the user sees):
//! - block size: at least 4 MiB, a multiple of `optimal_io_size` (full raid5/6 stripes, so md
//!   never reads to compute parity) and of the logical and physical block sizes;
//! - `zero`: `BLKZEROOUT` where the device offloads it (`write_zeroes_max_bytes` > 0) or is an md
//!   array (md raid1/5/10 report 0, but the kernel then writes zero pages itself with many bios in
//!   flight, about three times faster than one O_DIRECT stream on a resyncing raid1); else
//!   O_DIRECT;
//! - several requests in flight (queue depth), memory bounded by `queue_depth * block_bytes`;
//! - resync: see [`ResyncAction`] and the leases in [`Plan::leases`].

use super::error::WipeError;
use super::leases::{LeaseKind, LeaseRequest, Limits, Owner};
use super::probe::Probe;
use super::stream::Seed;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// 1 MiB.
pub const MIB: u64 = 1 << 20;
/// Smallest block size for writes (bytes).
pub const MIN_BLOCK: u64 = 4 * MIB;
/// Largest block we accept when rounding up to `optimal_io_size` (bytes).
pub const MAX_BLOCK: u64 = 64 * MIB;
/// Step of each `BLKZEROOUT`/`BLKDISCARD` call (bytes): small enough for honest progress and
/// cancel, large enough that the per-call cost vanishes.
pub const RANGE_STEP: u64 = 64 * MIB;
/// Requests in flight for writes and zero-out steps.
pub const QUEUE_DEPTH: usize = 4;

/// What to do with the device (`--method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Zeroes, by the fastest way the device offers (BLKZEROOUT or O_DIRECT writes).
    #[default]
    Zero,
    /// A ChaCha8 stream keyed from getrandom, by O_DIRECT writes.
    Random,
    /// BLKDISCARD (fails clearly where unsupported); contents afterwards are device-defined.
    Discard,
    /// BLKZEROOUT only.
    Zeroout,
    /// md superblocks at every metadata version's offset, plus the first and last MiB.
    Signatures,
}

impl Method {
    /// The name as the CLI spells it (`zero`, `random`, `discard`, `zeroout`, `signatures`); also
    /// the JSON form.
    pub fn name(self) -> &'static str {
        match self {
            Method::Zero => "zero",
            Method::Random => "random",
            Method::Discard => "discard",
            Method::Zeroout => "zeroout",
            Method::Signatures => "signatures",
        }
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The data written by [`Op::Write`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Data {
    /// Zero bytes.
    Zero,
    /// The [`super::stream`] stream under this key.
    Random(Seed),
    /// The content of a regular file, repeated (`blockdev-wipe -f FILE`); byte at device offset
    /// `o` is `content[o % len]`.
    Pattern(Arc<Vec<u8>>),
    /// A regular file of `len` bytes (> 0), repeated over the device without loading it: the
    /// byte at device offset `o` is the file's byte at `o % len`, read with `pread` (memory stays
    /// within the block buffers whatever the file's size).
    RepeatFile {
        /// The file.
        path: PathBuf,
        /// Its size when the job was planned, bytes.
        len: u64,
    },
    /// A stream read in device order (`blockdev-wipe -f /dev/urandom`); cannot be verified.
    Stream(PathBuf),
}

impl Data {
    fn describe(&self) -> String {
        match self {
            Data::Zero => "zeroes".into(),
            Data::Random(_) => "ChaCha8 stream keyed from getrandom".into(),
            Data::Pattern(p) => format!("repeated content of the given file ({} bytes)", p.len()),
            Data::RepeatFile { path, len } => format!(
                "repeated content of {} ({})",
                path.display(),
                human_bytes(*len)
            ),
            Data::Stream(p) => format!("data read from {}", p.display()),
        }
    }
}

/// The operation applied to every range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// `pwrite` of blocks of data.
    Write(Data),
    /// `BLKZEROOUT` in steps.
    ZeroOut,
    /// `BLKDISCARD` in steps.
    Discard,
}

impl Op {
    /// What is done to each range, for people: `write zeroes`, `BLKZEROOUT`, `BLKDISCARD`, ...
    pub fn describe(&self) -> String {
        match self {
            Op::Write(d) => format!("write {}", d.describe()),
            Op::ZeroOut => "BLKZEROOUT".into(),
            Op::Discard => "BLKDISCARD".into(),
        }
    }
}

/// How the device is opened. Always `O_EXCL` (the kernel refuses if a filesystem, dm, md or
/// another `O_EXCL` opener holds it) and `O_CLOEXEC`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct OpenFlags {
    /// `O_DIRECT`: bypass the page cache; completion means the device has the data.
    pub direct: bool,
    /// `O_EXCL`.
    pub exclusive: bool,
    /// `O_RDWR` instead of `O_WRONLY` (for `--verify`).
    pub read: bool,
}

impl OpenFlags {
    /// The open(2) flags as text: `O_WRONLY|O_EXCL|O_DIRECT` (`O_CLOEXEC` always, not shown).
    pub fn describe(&self) -> String {
        format!(
            "O_{}{}{}",
            if self.read { "RDWR" } else { "WRONLY" },
            if self.exclusive { "|O_EXCL" } else { "" },
            if self.direct { "|O_DIRECT" } else { "" },
        )
    }
}

/// A byte range `[offset, offset + len)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Range {
    /// Start, bytes.
    pub offset: u64,
    /// Length, bytes.
    pub len: u64,
}

/// What happens to an md resync of the target array. JSON: `"leave"` or
/// `{"freeze-and-skip":{"array":"md0"}}`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResyncAction {
    /// Leave `sync_action` alone.
    Leave,
    /// Write `frozen` to `md/sync_action` before the first write; after the last block is
    /// durable, `none` to `md/resync_start` and `idle` to `sync_action` (the resync is skipped:
    /// every sector now holds the same data on every mirror / consistent parity). On cancel or
    /// failure only `idle` (the resync resumes from its checkpoint).
    FreezeAndSkip {
        /// Kernel name of the array (`md0`).
        array: String,
    },
}

/// The options that are not the method.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--verify`: read back and compare after writing.
    pub verify: bool,
    /// `--keep-resync`: never freeze/skip a resync of the target array.
    pub keep_resync: bool,
    /// Key for `random` (the CLI passes [`Seed::from_os`]); required for `random`.
    pub seed: Option<Seed>,
    /// Data for `blockdev-wipe -f` (replaces zeroes in `zero`).
    pub data: Option<Data>,
    /// `blockdev-wipe -s NUM` (bytes): a hint; the block is this rounded up to the alignment
    /// rules, and never below 4 MiB.
    pub block_hint: Option<u64>,
    /// Owner of the leases (the CLI passes its pid; D-Bus the caller's bus name).
    pub owner: Option<Owner>,
    /// `zero` by O_DIRECT writes even where BLKZEROOUT is preferred (benchmarks, and devices
    /// whose zero-out offload is known to be slow).
    pub prefer_writes: bool,
    /// Overrides [`QUEUE_DEPTH`] (1..=64; benchmarks).
    pub queue_depth: Option<usize>,
}

/// Everything the engine needs, and the reasons for each choice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The resolved device.
    pub device: PathBuf,
    /// Kernel name (`loop0`).
    pub name: String,
    /// Device size, bytes.
    pub size_bytes: u64,
    /// The method asked for.
    pub method: Method,
    /// What is done to each range.
    pub op: Op,
    /// How the device is opened.
    pub open: OpenFlags,
    /// Bytes per write request and per verify read (the size of each aligned buffer).
    pub block_bytes: u64,
    /// Bytes per `BLKZEROOUT`/`BLKDISCARD` request (a multiple of `block_bytes`).
    pub step_bytes: u64,
    /// Requests in flight (worker threads).
    pub queue_depth: usize,
    /// Byte ranges to process, sorted, non-overlapping, logical-block aligned.
    pub ranges: Vec<Range>,
    /// Resync handling.
    pub resync: ResyncAction,
    /// Leases held for the job's life.
    pub leases: Vec<LeaseRequest>,
    /// Read back and compare after writing.
    pub verify: bool,
    /// Human-readable reasons, in decision order.
    pub reasons: Vec<String>,
}

impl Plan {
    /// Total bytes the job processes (the sum of the ranges).
    pub fn total_bytes(&self) -> u64 {
        self.ranges.iter().map(|r| r.len).sum()
    }

    /// Bytes per request of this plan's operation (`block_bytes` or `step_bytes`).
    pub fn request_bytes(&self) -> u64 {
        match self.op {
            Op::Write(_) => self.block_bytes,
            Op::ZeroOut | Op::Discard => self.step_bytes,
        }
    }

    /// The same plan with O_DIRECT writes of zeroes instead of `BLKZEROOUT`, for a device that
    /// turned out not to support the ioctl (EOPNOTSUPP/ENOTTY on the first step).
    pub fn zeroout_fallback(&self, why: &str) -> Plan {
        let mut p = self.clone();
        p.op = Op::Write(Data::Zero);
        p.reasons.push(format!(
            "BLKZEROOUT refused ({why}): O_DIRECT writes of an aligned zero buffer instead"
        ));
        p
    }

    /// The same plan with buffered writes, for devices that refuse O_DIRECT (EINVAL at open):
    /// one request in flight, each block pushed out with `sync_file_range` and waited for before
    /// it counts, so dirty memory stays within two blocks.
    pub fn buffered_fallback(&self) -> Plan {
        let mut p = self.clone();
        p.open.direct = false;
        p.queue_depth = 1;
        p.reasons.push(
            "O_DIRECT refused by the device: buffered writes, each block flushed with \
             sync_file_range before it counts (dirty memory <= 2 blocks)"
                .into(),
        );
        p
    }

    /// A multi-line description for `--dry-run` and the job's `Plan` property: methods as the
    /// CLI spells them, sizes in binary units with the exact bytes in parentheses.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "device: {} ({})\nsize: {}\nmethod: {}\noperation: {}\nopen: {}\n\
             request: {}, {} in flight\nranges: {}, {} in all\nresync: {}\nverify: {}\n",
            self.device.display(),
            self.name,
            bytes_exact(self.size_bytes),
            self.method,
            self.op.describe(),
            self.open.describe(),
            bytes_exact(self.request_bytes()),
            self.queue_depth,
            self.ranges.len(),
            bytes_exact(self.total_bytes()),
            match &self.resync {
                ResyncAction::Leave => "leave alone".to_string(),
                ResyncAction::FreezeAndSkip { array } =>
                    format!("freeze {array}, skip it after a complete wipe"),
            },
            if self.verify { "yes" } else { "no" },
        );
        for l in &self.leases {
            let mut parts = Vec::new();
            let limits = |who: &str, min_knob: &str, max_knob: &str, lim: &Limits| {
                let mut v = Vec::new();
                if let Some(m) = lim.min {
                    v.push(format!("{who}{min_knob} {m} KiB/s"));
                }
                if let Some(m) = lim.max {
                    v.push(format!("{who}{max_knob} {m} KiB/s"));
                }
                v
            };
            parts.extend(limits("", "speed_limit_min", "speed_limit_max", &l.global));
            for (a, lim) in &l.arrays {
                parts.extend(limits(
                    &format!("{a} "),
                    "sync_speed_min",
                    "sync_speed_max",
                    lim,
                ));
            }
            s.push_str(&format!("lease: {}: {}\n", l.holder, parts.join(", ")));
        }
        s.push_str("reasons:\n");
        for r in &self.reasons {
            s.push_str("  - ");
            s.push_str(r);
            s.push('\n');
        }
        s
    }
}

/// `n` bytes in binary units for people: `4 MiB`, `1.5 GiB`, `512 B` (at most two decimals,
/// trailing zeros dropped). Exact counts are printed next to it where they matter.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut unit = 0;
    let mut div = 1u64;
    while unit + 1 < UNITS.len() && n / div >= 1024 {
        div *= 1024;
        unit += 1;
    }
    if unit == 0 {
        return format!("{n} B");
    }
    let v = format!("{:.2}", n as f64 / div as f64);
    let v = v.trim_end_matches('0').trim_end_matches('.');
    format!("{v} {}", UNITS[unit])
}

/// `4 MiB (4194304 bytes)`: human units with the exact count.
pub fn bytes_exact(n: u64) -> String {
    format!("{} ({n} bytes)", human_bytes(n))
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn lcm(a: u64, b: u64) -> u64 {
    if a == 0 || b == 0 {
        a.max(b)
    } else {
        a / gcd(a, b) * b
    }
}

fn round_up(v: u64, to: u64) -> u64 {
    v.div_ceil(to) * to
}

/// The refusals: why this device must not be wiped, or `None`.
pub fn refusal(p: &Probe) -> Option<String> {
    if let Some(m) = p.mounts.first() {
        return Some(format!("{} is mounted on {}", m.device, m.mount_point));
    }
    if let Some(s) = p.swaps.first() {
        return Some(format!("{s} is an active swap area"));
    }
    if p.backs_root {
        return Some("it backs the running system's root filesystem".into());
    }
    if let Some(h) = p.holders.iter().find(|h| h.is_active()) {
        let what = match &h.md_array_state {
            Some(st) => format!("active md array {} (array_state {st})", h.name),
            None if h.name.starts_with("dm-") => format!("device-mapper device {}", h.name),
            None => h.name.clone(),
        };
        return Some(format!("{} is held by {what}", h.held));
    }
    if p.size_bytes == 0 {
        return Some("it has size 0".into());
    }
    None
}

/// The block size for `p`: >= max(4 MiB, hint), a multiple of the logical and physical block
/// sizes and of `optimal_io_size` (unless that would exceed [`MAX_BLOCK`]). Reasons appended.
pub fn block_size(p: &Probe, hint: Option<u64>, reasons: &mut Vec<String>) -> u64 {
    let want = MIN_BLOCK.max(hint.unwrap_or(0));
    let base = lcm(p.logical_block_size.max(1), p.physical_block_size.max(1));
    let with_opt = lcm(base, p.optimal_io_size);
    let block = if p.optimal_io_size > 0 && round_up(want, with_opt) <= MAX_BLOCK.max(want) {
        let b = round_up(want, with_opt);
        reasons.push(format!(
            "block {}: >= {}, a multiple of optimal_io_size {} (full stripes) and of the block \
             sizes {}/{}",
            bytes_exact(b),
            human_bytes(want),
            bytes_exact(p.optimal_io_size),
            p.logical_block_size,
            p.physical_block_size
        ));
        b
    } else {
        let b = round_up(want, base);
        if p.optimal_io_size > 0 {
            reasons.push(format!(
                "optimal_io_size {} ignored: a multiple >= {} would exceed {}",
                bytes_exact(p.optimal_io_size),
                human_bytes(want),
                human_bytes(MAX_BLOCK)
            ));
        }
        reasons.push(format!(
            "block {}: >= {}, a multiple of the block sizes {}/{}",
            bytes_exact(b),
            human_bytes(want),
            p.logical_block_size,
            p.physical_block_size
        ));
        b
    };
    if let Some(h) = hint {
        if h < block {
            reasons.push(format!(
                "requested block {} raised to {} (larger aligned writes are faster and the \
                 result is the same)",
                bytes_exact(h),
                bytes_exact(block)
            ));
        }
    }
    block
}

/// Byte ranges of the `signatures` method for a device of `size` bytes with logical block `lbs`:
/// the first and last MiB, and every md superblock location (md.rst, mdadm super0.c/super1.c):
/// 0.90 at the 64 KiB-aligned block 64-128 KiB before the end; 1.0 at 8 KiB before the end,
/// 4 KiB-aligned; 1.1 at 0; 1.2 at 4 KiB. Sorted, merged, aligned out to `lbs`, clipped.
pub fn signature_ranges(size: u64, lbs: u64) -> Vec<Range> {
    let k = 1024;
    let mut raw: Vec<(u64, u64)> = vec![
        (0, MIB),                        // first MiB (also 1.1 at 0, 1.2 at 4 KiB)
        (size.saturating_sub(MIB), MIB), // last MiB
        (0, 4 * k),                      // 1.1
        (4 * k, 4 * k),                  // 1.2
        (size.saturating_sub(8 * k) & !(4 * k - 1), 4 * k), // 1.0
        ((size & !(64 * k - 1)).saturating_sub(64 * k), 64 * k), // 0.90
    ];
    for r in &mut raw {
        let start = r.0 / lbs * lbs;
        let end = round_up((r.0 + r.1).min(size), lbs).min(size);
        *r = (start, end);
    }
    raw.sort();
    let mut out: Vec<Range> = Vec::new();
    for (s, e) in raw {
        if e <= s {
            continue;
        }
        match out.last_mut() {
            Some(last) if s <= last.offset + last.len => {
                last.len = last.len.max(e - last.offset);
            }
            _ => out.push(Range {
                offset: s,
                len: e - s,
            }),
        }
    }
    out
}

/// Plans wiping `p` with `method`.
///
/// Errors: [`WipeError::Refused`] (mounted, swap, held, backs `/`, size 0),
/// [`WipeError::Unsupported`] (`discard` on a device with `discard_max_bytes` 0),
/// [`WipeError::Usage`] (`random` without a seed, `--verify` with `discard` or a streamed source).
pub fn plan(p: &Probe, method: Method, opts: &Options) -> Result<Plan, WipeError> {
    if let Some(reason) = refusal(p) {
        return Err(WipeError::Refused {
            device: p.path.clone(),
            reason,
        });
    }
    let mut reasons = Vec::new();
    let block = block_size(p, opts.block_hint, &mut reasons);
    let whole = vec![Range {
        offset: 0,
        len: p.size_bytes,
    }];
    let zero_data = opts.data.clone().unwrap_or(Data::Zero);
    let is_md = p.array.is_some();
    let (op, ranges) = match method {
        Method::Zero if opts.data.is_some() => {
            reasons.push(format!("writing {}", zero_data.describe()));
            (Op::Write(zero_data.clone()), whole)
        }
        Method::Zero if opts.prefer_writes => {
            reasons.push("zero: O_DIRECT writes of an aligned zero buffer, as asked".into());
            (Op::Write(Data::Zero), whole)
        }
        Method::Zero => {
            let why = if p.write_zeroes_max_bytes > 0 {
                format!(
                    "the device offloads zeroing (write_zeroes_max_bytes {})",
                    p.write_zeroes_max_bytes
                )
            } else if is_md {
                "md raid1/5/10 report write_zeroes_max_bytes 0: the kernel writes zero pages \
                 itself with many requests in flight, faster than one O_DIRECT stream"
                    .to_string()
            } else {
                "no offload, but the kernel's zero-page writes (no user buffers, many requests \
                 in flight) are faster than O_DIRECT writes"
                    .to_string()
            };
            reasons.push(format!("zero: BLKZEROOUT in steps: {why}"));
            (Op::ZeroOut, whole)
        }
        Method::Random => {
            let seed = opts
                .seed
                .clone()
                .ok_or_else(|| WipeError::Usage("random: no seed given".into()))?;
            reasons.push(
                "random: O_DIRECT writes of a ChaCha8 stream keyed from getrandom, generated \
                 by each writer thread"
                    .into(),
            );
            (Op::Write(Data::Random(seed)), whole)
        }
        Method::Zeroout => {
            reasons.push("zeroout: BLKZEROOUT only, as asked".into());
            (Op::ZeroOut, whole)
        }
        Method::Discard => {
            if p.discard_max_bytes == 0 {
                return Err(WipeError::Unsupported {
                    device: p.path.clone(),
                    op: "discard",
                    detail: "queue/discard_max_bytes is 0".into(),
                });
            }
            reasons.push(format!(
                "discard: BLKDISCARD (discard_max_bytes {}); contents afterwards are device-defined",
                p.discard_max_bytes
            ));
            (Op::Discard, whole)
        }
        Method::Signatures => {
            let r = signature_ranges(p.size_bytes, p.logical_block_size.max(1));
            reasons.push(
                "signatures: zeroes over the first and last MiB and the md superblock offsets \
                 of metadata 0.90, 1.0, 1.1 and 1.2"
                    .into(),
            );
            (Op::Write(zero_data.clone()), r)
        }
    };
    if opts.verify && (op == Op::Discard || matches!(op, Op::Write(Data::Stream(_)))) {
        return Err(WipeError::Usage(format!(
            "{}: --verify is not possible with {}",
            p.path.display(),
            if op == Op::Discard {
                "discard (contents are device-defined)"
            } else {
                "a streamed data source"
            }
        )));
    }
    let queue_depth = match op {
        Op::Write(Data::Stream(_)) => 1,
        _ => opts.queue_depth.unwrap_or(QUEUE_DEPTH).clamp(1, 64),
    };
    reasons.push(if matches!(op, Op::Write(_)) || opts.verify {
        format!(
            "{queue_depth} requests in flight; memory bounded by {} of buffers",
            bytes_exact(queue_depth as u64 * block)
        )
    } else {
        format!("{queue_depth} requests in flight; no data buffers (the kernel does the work)")
    });
    let full = ranges.len() == 1 && ranges[0].len == p.size_bytes;

    let mut resync = ResyncAction::Leave;
    let mut leases = Vec::new();
    let holder = format!("wipe:{}", p.path.display());
    let owner = opts.owner.clone().unwrap_or(Owner::None);
    if let Some(a) = &p.array {
        match a.sync_action.as_str() {
            "resync" => {
                let writes_all = full && matches!(op, Op::Write(_) | Op::ZeroOut);
                if opts.keep_resync {
                    reasons.push(format!(
                        "{} is resyncing: left alone (--keep-resync)",
                        a.name
                    ));
                } else if writes_all {
                    reasons.push(format!(
                        "{} is resyncing and every sector is written: freeze the resync, and \
                         skip it (resync_start none) once the last block is durable",
                        a.name
                    ));
                    resync = ResyncAction::FreezeAndSkip {
                        array: a.name.clone(),
                    };
                } else {
                    reasons.push(format!(
                        "{} is resyncing, but this method does not write every sector: resync \
                         left alone",
                        a.name
                    ));
                }
            }
            "recover" | "reshape" | "check" | "repair" => {
                reasons.push(format!(
                    "{} is in {}: action left alone; lease lowers its sync_speed_min to 1 KiB/s \
                     for the job's life",
                    a.name, a.sync_action
                ));
                let mut arrays = BTreeMap::new();
                arrays.insert(
                    a.name.clone(),
                    Limits {
                        min: Some(1),
                        max: None,
                    },
                );
                leases.push(LeaseRequest {
                    holder: holder.clone(),
                    kind: LeaseKind::WipeJob,
                    owner: owner.clone(),
                    global: Limits::default(),
                    arrays,
                });
            }
            _ => {}
        }
    }
    if !p.resyncing_neighbours.is_empty() {
        reasons.push(format!(
            "shares a disk with resyncing array(s) {}: global lease speed_limit_min 0",
            p.resyncing_neighbours.join(", ")
        ));
        let global = Limits {
            min: Some(0),
            max: None,
        };
        if let Some(l) = leases.first_mut() {
            l.global = global;
        } else {
            leases.push(LeaseRequest {
                holder: holder.clone(),
                kind: LeaseKind::WipeJob,
                owner,
                global,
                arrays: BTreeMap::new(),
            });
        }
    }
    if opts.verify {
        reasons.push("verify: read back with O_DIRECT and compare".into());
    }
    Ok(Plan {
        device: p.path.clone(),
        name: p.name.clone(),
        size_bytes: p.size_bytes,
        method,
        op,
        open: OpenFlags {
            direct: true,
            exclusive: true,
            read: opts.verify,
        },
        block_bytes: block,
        step_bytes: round_up(RANGE_STEP.max(block), block),
        queue_depth,
        ranges,
        resync,
        leases,
        verify: opts.verify,
        reasons,
    })
}
