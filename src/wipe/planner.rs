//! The pure planner: `Probe + Method + Options -> Plan` (or a refusal). No I/O.
//!
//! Decisions and why (each one is also written into [`Plan::reasons`], which the user sees):
//! - block size: at least 4 MiB, a multiple of `optimal_io_size` (full raid5/6 stripes, so md
//!   never reads to compute parity) and of the logical and physical block sizes;
//! - `zero`: `BLKZEROOUT` where the device offloads it (`write_zeroes_max_bytes` > 0) or is an md
//!   array (md raid1/5/10 report 0, but the kernel then writes zero pages itself with many bios in
//!   flight, about three times faster than one O_DIRECT stream on a resyncing raid1); else
//!   O_DIRECT; `BLKDISCARD` instead only where the kernel says discarded blocks read back as
//!   zeroes (`queue/discard_zeroes_data` 1, which only kernels before 4.12 report: since then
//!   the file always reads 0 and the kernel's write-zeroes behind `BLKZEROOUT` is where a
//!   device that zeroes by unmapping does so) — see [`discard_note`];
//! - several requests in flight (queue depth), memory bounded by `queue_depth * block_bytes`;
//! - resync: see [`ResyncAction`] and the leases in [`Plan::leases`].

use super::error::WipeError;
use super::leases::{LeaseKind, LeaseRequest, Limits, Owner};
use super::plan::{Data, Identity, Method, Op, OpenFlags, Options, Plan, Range, ResyncAction};
use super::probe::Probe;
use crate::model::{Level, MemberState, SyncAction};
use crate::units::{bytes_exact, human_bytes};
use std::collections::BTreeMap;

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

pub use super::resume::resume;

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

/// Whether the job re-reads the partition table after the wipe (BLKRRPART, as wipefs(8)
/// does): on a whole device (not a partition) that had partitions when probed, or whose first
/// sector is wiped (where a partition table lives). Reason appended.
pub fn reread_partitions(p: &Probe, ranges: &[Range], reasons: &mut Vec<String>) -> bool {
    if p.is_partition {
        return false;
    }
    let first_sector = ranges.first().is_some_and(|r| r.offset == 0 && r.len > 0);
    if !p.partitions.is_empty() {
        reasons.push(format!(
            "after the wipe: re-read the partition table (BLKRRPART) so the kernel drops \
             partition(s) {}, then a udev change event",
            p.partitions.join(", ")
        ));
        true
    } else if first_sector {
        reasons.push(
            "after the wipe: re-read the partition table (BLKRRPART) and a udev change event, \
             so no stale signature survives in udev's database"
                .into(),
        );
        true
    } else {
        false
    }
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
    let (op, ranges) = choose_op(p, method, opts, &mut reasons)?;
    check_verify(p, method, &op, opts)?;
    let queue_depth = queue_depth(&op, opts, block, &mut reasons);
    let full = ranges.len() == 1 && ranges[0].len == p.size_bytes;
    let (mut resync, leases) = resync_and_leases(p, full, &op, opts, &mut reasons);
    if opts.verify {
        reasons.push("verify: read back with O_DIRECT and compare".into());
    }
    let reread_partitions = reread_partitions(p, &ranges, &mut reasons);
    let offload = offload_regions(p, method, opts, &mut resync, &mut reasons);
    Ok(Plan {
        device: p.path.clone(),
        dev: p.dev,
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
        reread_partitions,
        identity: Identity {
            stable_id: p.stable_id.clone(),
            size_bytes: p.size_bytes,
            logical_block_size: p.logical_block_size,
        },
        checkpoint: None,
        offload,
        reasons,
    })
}

/// The operation of `method` on `p` and the ranges it covers (the whole device but for
/// `signatures`), each choice with its reason.
fn choose_op(
    p: &Probe,
    method: Method,
    opts: &Options,
    reasons: &mut Vec<String>,
) -> Result<(Op, Vec<Range>), WipeError> {
    let whole = vec![Range {
        offset: 0,
        len: p.size_bytes,
    }];
    let zero_data = opts.data.clone().unwrap_or(Data::Zero);
    let op = match method {
        Method::Zero => zero_op(p, opts, reasons),
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
            Op::Write(Data::Random(seed))
        }
        Method::Zeroout => {
            reasons.push("zeroout: BLKZEROOUT only, as asked".into());
            Op::ZeroOut
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
            Op::Discard
        }
        Method::Signatures => {
            let r = signature_ranges(p.size_bytes, p.logical_block_size.max(1));
            reasons.push(
                "signatures: zeroes over the first and last MiB and the md superblock offsets \
                 of metadata 0.90, 1.0, 1.1 and 1.2"
                    .into(),
            );
            return Ok((Op::Write(zero_data), r));
        }
    };
    Ok((op, whole))
}

/// How `zero` zeroes `p`: the given data, O_DIRECT writes when asked, a discard that reads back
/// as zeroes, else `BLKZEROOUT`.
fn zero_op(p: &Probe, opts: &Options, reasons: &mut Vec<String>) -> Op {
    if let Some(data) = &opts.data {
        reasons.push(format!("writing {}", data.describe()));
        return Op::Write(data.clone());
    }
    if opts.prefer_writes {
        reasons.push("zero: O_DIRECT writes of an aligned zero buffer, as asked".into());
        return Op::Write(Data::Zero);
    }
    if p.discard_max_bytes > 0 && p.discard_zeroes_data {
        reasons.push(format!("zero: BLKDISCARD in steps: {}", discard_note(p)));
        return Op::Discard;
    }
    let why = if p.write_zeroes_max_bytes > 0 {
        format!(
            "the device offloads zeroing (write_zeroes_max_bytes {})",
            p.write_zeroes_max_bytes
        )
    } else if p.array.is_some() {
        "md raid1/5/10 report write_zeroes_max_bytes 0: the kernel writes zero pages \
         itself with many requests in flight, faster than one O_DIRECT stream"
            .to_string()
    } else {
        "no offload, but the kernel's zero-page writes (no user buffers, many requests \
         in flight) are faster than O_DIRECT writes"
            .to_string()
    };
    reasons.push(format!("zero: BLKZEROOUT in steps: {why}"));
    reasons.push(format!("no discard: {}", discard_note(p)));
    Op::ZeroOut
}

/// `--verify` needs contents it can predict: not a discard (device-defined), not a stream.
/// A discard that zeroes (`zero` on discard_zeroes_data 1) reads back as zeroes: verifiable.
fn check_verify(p: &Probe, method: Method, op: &Op, opts: &Options) -> Result<(), WipeError> {
    if opts.verify && (method == Method::Discard || matches!(op, Op::Write(Data::Stream(_)))) {
        return Err(WipeError::Usage(format!(
            "{}: --verify is not possible with {}",
            p.path.display(),
            if method == Method::Discard {
                "discard (contents are device-defined)"
            } else {
                "a streamed data source"
            }
        )));
    }
    Ok(())
}

/// Requests in flight: 1 for a stream (read in order), else the asked or default depth.
fn queue_depth(op: &Op, opts: &Options, block: u64, reasons: &mut Vec<String>) -> usize {
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
    queue_depth
}

/// What happens to the target array's sync (freeze and skip a resync that every sector's write
/// makes moot, a lease on other sync actions) and the global lease for resyncing neighbours.
fn resync_and_leases(
    p: &Probe,
    full: bool,
    op: &Op,
    opts: &Options,
    reasons: &mut Vec<String>,
) -> (ResyncAction, Vec<LeaseRequest>) {
    let holder = crate::policy::Holder::wipe(&p.path).to_string();
    let owner = opts.owner.clone().unwrap_or(Owner::None);
    let lease = |global: Limits, arrays: BTreeMap<String, Limits>| LeaseRequest {
        holder: holder.clone(),
        kind: LeaseKind::WipeJob,
        owner: owner.clone(),
        global,
        arrays,
    };
    let mut resync = ResyncAction::Leave;
    let mut leases = Vec::new();
    if let Some(a) = &p.array {
        match a.sync_action {
            SyncAction::Resync => resync = resync_of_target(a, full, op, opts, reasons),
            SyncAction::Recover | SyncAction::Reshape | SyncAction::Check | SyncAction::Repair => {
                reasons.push(format!(
                    "{} is in {}: action left alone; lease lowers its sync_speed_min to 1 KiB/s \
                     for the job's life",
                    a.name, a.sync_action
                ));
                let limits = Limits {
                    min: Some(1),
                    max: None,
                    io_depth: None,
                };
                let arrays = BTreeMap::from([(a.name.clone(), limits)]);
                leases.push(lease(Limits::default(), arrays));
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
            io_depth: None,
        };
        if let Some(l) = leases.first_mut() {
            l.global = global;
        } else {
            leases.push(lease(global, BTreeMap::new()));
        }
    }
    (resync, leases)
}

/// A resyncing target: frozen and skipped when every sector is written, else left alone.
fn resync_of_target(
    a: &super::probe::ArrayFacts,
    full: bool,
    op: &Op,
    opts: &Options,
    reasons: &mut Vec<String>,
) -> ResyncAction {
    let writes_all = full && matches!(op, Op::Write(_) | Op::ZeroOut);
    if opts.keep_resync {
        reasons.push(format!(
            "{} is resyncing: left alone (--keep-resync)",
            a.name
        ));
        ResyncAction::Leave
    } else if writes_all {
        reasons.push(format!(
            "{} is resyncing and every sector is written: freeze the resync, and \
             skip it (resync_start none) once the last block is durable",
            a.name
        ));
        ResyncAction::FreezeAndSkip {
            array: a.name.clone(),
        }
    } else {
        reasons.push(format!(
            "{} is resyncing, but this method does not write every sector: resync \
             left alone",
            a.name
        ));
        ResyncAction::Leave
    }
}

/// The member regions of a member offload ([`offload`]) with its reason, or why not; an
/// offload freezes and skips the array's resync.
fn offload_regions(
    p: &Probe,
    method: Method,
    opts: &Options,
    resync: &mut ResyncAction,
    reasons: &mut Vec<String>,
) -> Vec<super::plan::MemberRegion> {
    match offload(p, method, opts) {
        Ok(regions) => {
            if let (ResyncAction::Leave, Some(a)) = (&*resync, &p.array) {
                *resync = ResyncAction::FreezeAndSkip {
                    array: a.name.clone(),
                };
            }
            reasons.push(format!(
                "member offload: {} is a {} whose queue reports write_zeroes_max_bytes 0 while \
                 every member zeroes itself: BLKZEROOUT on each member's data region ({}) in \
                 parallel, with the resync frozen and the array held open O_EXCL; then \
                 BLKFLSBUF on the array and the resync skipped (zeroed data regions are a \
                 consistent array at this level)",
                p.name,
                p.array.as_ref().map_or("", |a| a.level.as_str()),
                regions
                    .iter()
                    .map(|r| format!(
                        "{} {} at {}",
                        r.name,
                        bytes_exact(r.len_bytes),
                        r.offset_bytes
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            regions
        }
        Err(Some(why)) => {
            reasons.push(format!("no member offload: {why}"));
            Vec::new()
        }
        Err(None) => Vec::new(),
    }
}

/// md levels where zeroed member data regions are a consistent array: mirrors of zeroes, and
/// parity (P = XOR, Q = the raid6 syndrome) of zero data is zero. That is every redundant level
/// ([`Level::is_redundant`]: raid1, raid10, raid4/5/6).
pub fn offload_level(level: &Level) -> bool {
    level.is_redundant()
}

/// Why `zero` does (or does not) discard on `p` (pure), for [`Plan::reasons`]. Sources:
/// Documentation/ABI/stable/sysfs-block (`discard_zeroes_data`: "Will always return 0. Don't
/// rely on any specific behavior for discards, and don't read this file", since Linux 4.12,
/// commit 48920ff2 "block: remove the discard_zeroes_data flag"); `BLKZEROOUT` is the kernel's
/// `REQ_OP_WRITE_ZEROES`, which drivers may carry out by unmapping where the device guarantees
/// zeroes afterwards (SCSI WRITE SAME with UNMAP, NVMe Write Zeroes with DEAC).
pub fn discard_note(p: &Probe) -> String {
    if p.discard_max_bytes == 0 {
        "the device cannot discard (discard_max_bytes 0)".into()
    } else if p.discard_zeroes_data {
        format!(
            "the device discards (discard_max_bytes {}) and its kernel reports \
             discard_zeroes_data 1: discarded blocks read back as zeroes, without writing them",
            p.discard_max_bytes
        )
    } else {
        format!(
            "the device discards (discard_max_bytes {}), but nothing guarantees that \
             discarded blocks read back as zeroes (discard_zeroes_data reads 0, as it always \
             does since Linux 4.12); BLKZEROOUT is the kernel's write-zeroes, which unmaps \
             where the device guarantees zeroes after unmap",
            p.discard_max_bytes
        )
    }
}

/// The member regions to zero for member offload of `p` (pure), or why not: `Err(None)` when
/// the question does not arise (not a `zero` of an md array, or the array zeroes itself),
/// `Err(Some(reason))` when an md array could not be offloaded. Conditions: method `zero` of
/// zeroes (no `-f` data, no forced writes); the array reports `write_zeroes_max_bytes` 0 and
/// every member more; a level of [`offload_level`]; `array_state` clean, active or
/// active-idle (not write-pending, read-only, ...); no reshape (`reshape_position` none, no
/// `reshape` action) and no recovery, check or repair running; every member `in_sync` with a
/// data region (`offset` sectors, `size` KiB). Mounts and holders are refused before this.
pub fn offload(
    p: &Probe,
    method: Method,
    opts: &Options,
) -> Result<Vec<super::plan::MemberRegion>, Option<String>> {
    let (Some(a), Method::Zero) = (&p.array, method) else {
        return Err(None);
    };
    if opts.data.is_some() || p.write_zeroes_max_bytes > 0 {
        return Err(None);
    }
    if opts.prefer_writes {
        return Err(Some("O_DIRECT writes were asked for".into()));
    }
    if opts.keep_resync {
        return Err(Some(
            "--keep-resync: the resync must be frozen while members are written directly".into(),
        ));
    }
    let Some(md) = &p.md else {
        return Err(Some("no md facts".into()));
    };
    if !offload_level(&Level::from(a.level.as_str())) {
        return Err(Some(format!(
            "level {:?} is not raid1, raid10 or raid4/5/6",
            a.level
        )));
    }
    use crate::model::ArrayState;
    match &md.array_state {
        Some(ArrayState::Clean | ArrayState::Active | ArrayState::ActiveIdle) => {}
        other => {
            return Err(Some(format!(
                "array_state is {}",
                other.as_ref().map_or("unknown", ArrayState::as_str)
            )))
        }
    }
    if !matches!(md.reshape_position.as_str(), "" | crate::vocab::NONE) {
        return Err(Some(format!(
            "a reshape is pending (reshape_position {})",
            md.reshape_position
        )));
    }
    if !matches!(
        a.sync_action,
        SyncAction::Idle | SyncAction::Resync | SyncAction::Frozen
    ) {
        return Err(Some(format!("sync_action is {}", a.sync_action)));
    }
    if md.members.is_empty() {
        return Err(Some("no members listed".into()));
    }
    md.members
        .iter()
        .map(member_region)
        .collect::<Result<_, _>>()
        .map_err(Some)
}

/// The data region of member `m` to zero, or why it cannot be offloaded: not `in_sync` (or
/// faulty, a replacement), no zeroing of its own, no data region size.
fn member_region(m: &crate::sysfs::MdMember) -> Result<super::plan::MemberRegion, String> {
    let name = &m.sysfs.name;
    let state = &m.sysfs.state;
    if !state.contains(&MemberState::InSync)
        || state.contains(&MemberState::Faulty)
        || state.contains(&MemberState::Replacement)
    {
        let words: Vec<&str> = state.iter().map(MemberState::as_str).collect();
        return Err(format!(
            "member {name} is not in_sync (state {})",
            words.join(",")
        ));
    }
    if m.write_zeroes_max_bytes == 0 {
        return Err(format!(
            "member {name} cannot zero itself (write_zeroes_max_bytes 0)"
        ));
    }
    if m.size_kib == 0 {
        return Err(format!("member {name} has no data region size"));
    }
    Ok(super::plan::MemberRegion {
        name: name.clone(),
        path: m.path.clone(),
        dev: m.dev,
        size_bytes: m.size_bytes,
        offset_bytes: m.offset_sectors * 512,
        len_bytes: m.size_kib * 1024,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wipe::stream::Seed;

    /// A disk fixture as the probe reports it: `discard_max_bytes`, `discard_zeroes_data`,
    /// `write_zeroes_max_bytes`.
    fn disk(discard: u64, dzd: bool, wz: u64) -> Probe {
        Probe {
            path: "/dev/sdx".into(),
            name: "sdx".into(),
            size_bytes: 1 << 30,
            logical_block_size: 512,
            physical_block_size: 4096,
            discard_max_bytes: discard,
            discard_zeroes_data: dzd,
            write_zeroes_max_bytes: wz,
            ..Probe::default()
        }
    }

    fn zero(p: &Probe, verify: bool) -> Plan {
        let o = Options {
            verify,
            ..Options::default()
        };
        plan(p, Method::Zero, &o).unwrap()
    }

    #[test]
    fn zero_discards_only_where_the_kernel_says_discard_zeroes_data() {
        // Linux 6.1 on an SSD/NVMe/virtio disk: discard_zeroes_data always 0.
        let p = zero(&disk(1 << 31, false, 1 << 25), false);
        assert_eq!(p.op, Op::ZeroOut);
        let r = p.reasons.join("\n");
        assert!(
            r.contains("no discard:") && r.contains("since Linux 4.12"),
            "{r}"
        );
        // A kernel before 4.12 on a device that guarantees zeroes after discard.
        let p = zero(&disk(1 << 31, true, 0), true);
        assert_eq!(p.op, Op::Discard);
        let r = p.reasons.join("\n");
        assert!(
            r.contains("zero: BLKDISCARD") && r.contains("discard_zeroes_data 1"),
            "{r}"
        );
        assert!(p.verify, "zeroes after discard are verifiable");
        // No discard at all; discard_zeroes_data alone means nothing.
        let p = zero(&disk(0, true, 0), false);
        assert_eq!(p.op, Op::ZeroOut);
        assert!(p.reasons.iter().any(|r| r.contains("discard_max_bytes 0")));
    }

    #[test]
    fn explicit_discard_stays_explicit_and_unverifiable() {
        let d = disk(1 << 31, false, 0);
        assert_eq!(
            plan(&d, Method::Discard, &Options::default()).unwrap().op,
            Op::Discard
        );
        let v = Options {
            verify: true,
            ..Options::default()
        };
        assert!(matches!(
            plan(&d, Method::Discard, &v),
            Err(WipeError::Usage(_))
        ));
        // `random` never discards, whatever the device says.
        let r = Options {
            seed: Some(Seed([1; 32])),
            ..Options::default()
        };
        let p = plan(&disk(1 << 31, true, 0), Method::Random, &r).unwrap();
        assert!(matches!(p.op, Op::Write(Data::Random(_))));
    }
}
