//! What a wipe job is: the [`Plan`] the planner makes and the engine runs, its parts ([`Method`],
//! [`Op`], [`Data`], [`OpenFlags`], [`Range`], [`ResyncAction`]), the [`Options`] a front end
//! passes, and their text for people (`--dry-run`, the D-Bus job's `Plan` property).
//!
//! Types only, no decisions and no I/O: the decisions are [`super::planner::plan`]'s.

use super::leases::{LeaseRequest, Limits, Owner};
pub use super::resync::ResyncMark;
use super::stream::Seed;
use crate::units::{bytes_exact, human_bytes};
use std::path::PathBuf;
use std::sync::Arc;

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
    /// Every method, in `--help` order.
    pub const ALL: [Method; 5] = [
        Method::Zero,
        Method::Random,
        Method::Discard,
        Method::Zeroout,
        Method::Signatures,
    ];

    /// The method named `name` as [`Method::name`] spells it (`zero`, ...); `None` otherwise.
    /// For front ends that take the name as text (D-Bus `StartWipe`'s `method` option).
    pub fn from_name(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The one word for the method: as the CLI spells it (`zero`, `random`, `discard`, `zeroout`,
    /// `signatures`), the JSON form, and the D-Bus job's `wipe-<method>` operation.
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
    /// What is written, for people: `zeroes`, `repeated content of FILE (2 MiB)`, ...
    pub fn describe(&self) -> String {
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
    /// Overrides [`super::planner::QUEUE_DEPTH`] (1..=64; benchmarks).
    pub queue_depth: Option<usize>,
    /// `--resume`: continue the device's checkpoint (its method, key and ranges).
    pub resume: bool,
    /// The device the front end showed for approval ([`super::target::resolve_trusted`]):
    /// [`super::plan_for`] refuses a probe of another device number or size.
    pub bound: Option<super::target::Bound>,
    /// Refuse a fresh start over the device's checkpoint of an interrupted wipe (`mdpilot
    /// wipe` sets it unless `--restart`); when false a fresh job replaces the checkpoint (the
    /// installer's `blockdev-wipe`, which cannot say `--restart`).
    pub checkpoint_guard: bool,
    /// Where checkpoints live (default [`super::checkpoint::DIR`] under the root).
    pub checkpoint_dir: Option<PathBuf>,
    /// Which front end runs the job, and for whom (recorded in the checkpoint: the service
    /// continues its own interrupted jobs when it starts again, never the CLI's).
    pub started_by: StartedBy,
    /// Plan without any side effect (`WipeCandidates`, which any caller may call): a corrupt
    /// checkpoint of the device is read as none and left where it is, not set aside.
    pub read_only: bool,
}

/// Who started a wipe job, as its checkpoint records it (JSON `"cli"` or `{"service":{"uid":0}}`;
/// a checkpoint written before this field existed reads as `cli`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StartedBy {
    /// `mdpilot wipe`, `blockdev-wipe` or a library caller: resumed only by `--resume`.
    #[default]
    Cli,
    /// `mdpilot serve` (D-Bus `StartWipe`): resumed by the service when it starts again
    /// (config `wipe.auto_resume`).
    Service {
        /// The uid of the StartWipe caller (the resumed job's `StartedByUID`).
        uid: u32,
    },
}

/// Everything the engine needs, and the reasons for each choice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The resolved device.
    pub device: PathBuf,
    /// Its device number when probed `(major, minor)`: the open device's `st_rdev` must be this
    /// (and its size `size_bytes`) before anything is written ([`super::target::check_opened`]).
    pub dev: super::probe::DevNum,
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
    /// After the wipe, re-read the partition table (BLKRRPART) so the kernel drops partitions
    /// whose table was wiped ([`super::rescan`]).
    pub reread_partitions: bool,
    /// Who the device is, for resume checkpoints.
    pub identity: Identity,
    /// The job's durable checkpoint (`None`: the job keeps none, e.g. engine tests).
    pub checkpoint: Option<CheckpointPlan>,
    /// Member offload: each member's data region is zeroed on the member itself instead of
    /// through the array (empty: no offload). See [`super::offload`].
    pub offload: Vec<MemberRegion>,
}

/// A device's identity as a checkpoint records it (from the probe).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Identity {
    /// [`super::probe::Probe::stable_id`]: `md-uuid-…`, `by-id:…`, `loop:…` or `name:…`.
    pub stable_id: String,
    /// Size, bytes (BLKGETSIZE64).
    pub size_bytes: u64,
    /// Logical block size, bytes (BLKSSZGET).
    pub logical_block_size: u64,
}

/// The first bytes of a wipe as the device holds them once they are durable: what a resume
/// reads back and hashes before it writes, so that a different disk answering to the same
/// name (two USB enclosures with one serial share a `by-id` link) is not written. Of the wipe's
/// own data, not of what was there before: once the first run's first request is durable
/// those bytes hold the wipe's zeroes or random stream, and nothing else is verifiable then.
/// Recorded by [`super::checkpoint::head_digest`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HeadDigest {
    /// Device offset, bytes: where the first range starts.
    pub offset: u64,
    /// Length, bytes: [`super::checkpoint::HEAD_BYTES`] or the first range, whichever is
    /// shorter (inside the first request, so durable once any byte of the wipe is).
    pub len: u64,
    /// SHA-256 of the wipe's data there, 64 lower-case hex digits.
    pub sha256: String,
}

/// Where a job keeps its checkpoint and what it continues from ([`super::checkpoint`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointPlan {
    /// The checkpoint file (`/var/lib/mdpilot/wipe/<escaped id>.json` under the root, [`super::checkpoint::path_for`]).
    pub path: PathBuf,
    /// Every range of the whole wipe (the plan's `ranges` are what is left of them).
    pub full_ranges: Vec<Range>,
    /// Bytes of `full_ranges` durable before this run (0 for a fresh job).
    pub resumed_bytes: u64,
    /// For a resumed freeze-and-skip job: the resync position recorded by the first run.
    pub resync_mark: Option<ResyncMark>,
    /// Who runs the job ([`Options::started_by`]), recorded in the checkpoint.
    pub started_by: StartedBy,
    /// For a resumed job: the first bytes its checkpoint recorded, read back and hashed before
    /// the first write ([`HeadDigest`]); `None` for a fresh job or a checkpoint written
    /// before mdpilot recorded them.
    pub head: Option<HeadDigest>,
}

/// One member's data region for member offload (md.rst `dev-*/offset`, `dev-*/size`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MemberRegion {
    /// Kernel name of the member (`vdb`).
    pub name: String,
    /// Its device node.
    pub path: PathBuf,
    /// Its device number when probed (`/sys/class/block/<name>/dev`); `None` when sysfs did not
    /// say (then the member is refused at open).
    pub dev: Option<super::probe::DevNum>,
    /// Its size when probed, bytes (`size` in 512-byte sectors).
    pub size_bytes: u64,
    /// Start of the data region on the member, bytes (`offset` sectors * 512).
    pub offset_bytes: u64,
    /// Length of the data region, bytes (`size` KiB * 1024).
    pub len_bytes: u64,
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
