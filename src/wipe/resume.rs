//! The pure resume step of the planner: a plan made afresh for a device, continued from its
//! checkpoint ([`super::checkpoint`]). No I/O; re-exported as [`super::planner::resume`].

use super::checkpoint::{self, Checkpoint};
use super::error::WipeError;
use super::plan::{Data, HeadDigest, Op, Plan, ResyncAction};
use crate::model::SyncAction;
use crate::units::bytes_exact;

/// Continues `plan` (planned afresh for the same device) from checkpoint `ck` (pure): refuses
/// a checkpoint of another device, size, block size, method or ranges; else the plan's ranges
/// become what is left above `ck.durable_offset`, with [`super::plan::CheckpointPlan`] `resumed_bytes` and the
/// first run's resync mark, and a reason. `array_action` is the target array's `sync_action`
/// now: a freeze-and-skip job left the array `frozen` when it was killed, and freezes it again.
///
/// Errors: [`WipeError::Usage`] naming what no longer matches (nothing is written).
pub fn resume(
    mut plan: Plan,
    ck: &Checkpoint,
    ck_path: &std::path::Path,
    array_action: Option<&SyncAction>,
) -> Result<Plan, WipeError> {
    if let Some(what) = mismatch(&plan, ck) {
        return Err(WipeError::Usage(format!(
            "{}: refusing to resume from {}: {what}; `--restart` discards it",
            plan.device.display(),
            ck_path.display()
        )));
    }
    let full = plan.ranges.clone();
    let done = ck.durable_bytes();
    if plan.offload.is_empty() {
        plan.ranges = checkpoint::remaining(&full, ck.durable_offset);
        // O_RDWR: the job reads back samples of the durable part before it writes.
        plan.open.read |= done > 0;
    } else {
        plan.reasons
            .push("resume: member offload zeroes the whole array again (it takes seconds)".into());
    }
    plan.reasons.push(format!(
        "resume: {} of {} durable before the interruption (below offset {}): continuing \
         from there{}",
        bytes_exact(done),
        bytes_exact(ck.total_bytes()),
        ck.durable_offset,
        if matches!(plan.op, Op::Write(Data::Random(_))) {
            " with the same key"
        } else {
            ""
        }
    ));
    if let Some(r) = &ck.resync {
        if matches!(array_action, Some(SyncAction::Frozen | SyncAction::Resync))
            && !plan_keeps_resync(&plan)
        {
            plan.resync = ResyncAction::FreezeAndSkip {
                array: r.array.clone(),
            };
            plan.reasons.push(format!(
                "{} was frozen by the interrupted job: freeze it again; skip the resync only if \
                 resync_start and sync_completed are still {} and {} (else idle)",
                r.array, r.mark.resync_start, r.mark.sync_completed
            ));
        }
    }
    if let Some(c) = plan.checkpoint.as_mut() {
        c.full_ranges = full;
        c.resumed_bytes = done;
        c.resync_mark = ck.resync.as_ref().map(|r| r.mark.clone());
        c.head = ck.head.clone();
    }
    Ok(plan)
}

/// What no longer matches between `ck` and the fresh `plan`: the device's stable identity, size,
/// logical block size, the method or the ranges; `None` when they match.
fn mismatch(plan: &Plan, ck: &Checkpoint) -> Option<String> {
    let (a, b) = (&ck.identity, &plan.identity);
    if a.stable_id != b.stable_id {
        return Some(format!(
            "it is for device {} ({}), this is {}",
            a.stable_id,
            ck.device.display(),
            b.stable_id
        ));
    }
    if a.size_bytes != b.size_bytes {
        return Some(format!(
            "the device was {} bytes, it is {} bytes now",
            a.size_bytes, b.size_bytes
        ));
    }
    if a.logical_block_size != b.logical_block_size {
        return Some(format!(
            "the logical block size was {}, it is {} now",
            a.logical_block_size, b.logical_block_size
        ));
    }
    if ck.method != plan.method.name() {
        return Some(format!(
            "it is a {} wipe, this is {}",
            ck.method, plan.method
        ));
    }
    if ck.ranges != plan.ranges {
        return Some("its ranges are not this device's".into());
    }
    // Where its first bytes are follows from the ranges: a record elsewhere is not this
    // wipe's (and is never read: its length is bounded by what the ranges give).
    let place = |h: &HeadDigest| (h.offset, h.len);
    match (&ck.head, checkpoint::head_digest(&plan.op, &plan.ranges)) {
        (Some(h), want) if Some(place(h)) != want.as_ref().map(place) => {
            Some("its record of the wipe's first bytes does not fit its ranges".into())
        }
        _ => None,
    }
}

/// True when the plan leaves the resync alone on purpose (`--keep-resync` said so).
fn plan_keeps_resync(plan: &Plan) -> bool {
    plan.reasons.iter().any(|r| r.contains("--keep-resync"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wipe::checkpoint::ResyncRecord;
    use crate::wipe::plan::{
        CheckpointPlan, Identity, Method, Options, Range, ResyncMark, StartedBy,
    };
    use crate::wipe::probe::{ArrayFacts, Probe};
    use std::path::Path;

    fn fresh() -> Plan {
        let p = Probe {
            path: "/dev/md0".into(),
            name: "md0".into(),
            size_bytes: 1 << 30,
            logical_block_size: 512,
            physical_block_size: 512,
            stable_id: "md-uuid-x".into(),
            array: Some(ArrayFacts {
                name: "md0".into(),
                level: "raid1".into(),
                sync_action: "frozen".into(),
                ..ArrayFacts::default()
            }),
            ..Probe::default()
        };
        let mut plan = crate::wipe::planner::plan(&p, Method::Zero, &Options::default()).unwrap();
        plan.checkpoint = Some(CheckpointPlan {
            path: "/c.json".into(),
            full_ranges: plan.ranges.clone(),
            resumed_bytes: 0,
            resync_mark: None,
            started_by: StartedBy::Service { uid: 0 },
            head: None,
        });
        plan
    }

    fn ck(plan: &Plan) -> Checkpoint {
        Checkpoint {
            version: 1,
            device: plan.device.clone(),
            name: plan.name.clone(),
            identity: Identity {
                stable_id: "md-uuid-x".into(),
                size_bytes: 1 << 30,
                logical_block_size: 512,
            },
            method: "zero".into(),
            seed_hex: None,
            verify: false,
            ranges: plan.ranges.clone(),
            durable_offset: 1 << 29,
            resync: Some(ResyncRecord {
                array: "md0".into(),
                mark: ResyncMark {
                    resync_start: "1024".into(),
                    sync_completed: "none".into(),
                },
            }),
            started_by: StartedBy::Cli,
            head: checkpoint::head_digest(&plan.op, &plan.ranges),
        }
    }

    #[test]
    fn a_frozen_array_is_frozen_again_and_the_rest_is_planned() {
        let plan = fresh();
        let c = ck(&plan);
        let r = resume(plan, &c, Path::new("/c.json"), Some(&SyncAction::Frozen)).unwrap();
        assert_eq!(
            r.ranges,
            vec![Range {
                offset: 1 << 29,
                len: 1 << 29
            }]
        );
        assert!(matches!(r.resync, ResyncAction::FreezeAndSkip { .. }));
        let cp = r.checkpoint.unwrap();
        assert_eq!(cp.resumed_bytes, 1 << 29);
        assert_eq!(cp.resync_mark.unwrap().resync_start, "1024");
        // The array finished its resync meanwhile: nothing to freeze.
        let plan = fresh();
        let r = resume(plan, &c, Path::new("/c.json"), Some(&SyncAction::Idle)).unwrap();
        assert_eq!(r.resync, ResyncAction::Leave);
    }

    #[test]
    fn another_method_or_block_size_is_refused() {
        let plan = fresh();
        let mut c = ck(&plan);
        c.method = "random".into();
        let e = resume(plan.clone(), &c, Path::new("/c.json"), None).unwrap_err();
        assert!(
            e.to_string().contains("it is a random wipe, this is zero"),
            "{e}"
        );
        let mut c = ck(&plan);
        c.identity.logical_block_size = 4096;
        let e = resume(plan, &c, Path::new("/c.json"), None).unwrap_err();
        assert!(e.to_string().contains("logical block size was 4096"), "{e}");
    }

    /// A 16 MiB "disk" in a file: a fresh zero plan of it with a checkpoint half durable, as
    /// the first run saved it (its first bytes' digest included).
    fn half_done_on_a_file() -> (tempfile::TempDir, std::fs::File, Plan, Checkpoint) {
        let d = tempfile::tempdir().unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(d.path().join("disk.img"))
            .unwrap();
        f.set_len(16 << 20).unwrap();
        let p = Probe {
            path: "/dev/sdz".into(),
            name: "sdz".into(),
            size_bytes: 16 << 20,
            logical_block_size: 512,
            physical_block_size: 512,
            stable_id: "by-id:usb-Enclosure_SAME-0:0".into(),
            ..Probe::default()
        };
        let opts = Options {
            prefer_writes: true,
            ..Options::default()
        };
        let mut plan = crate::wipe::planner::plan(&p, Method::Zero, &opts).unwrap();
        plan.checkpoint = Some(CheckpointPlan {
            path: d.path().join("ck.json"),
            full_ranges: plan.ranges.clone(),
            resumed_bytes: 0,
            resync_mark: None,
            started_by: StartedBy::Service { uid: 0 },
            head: None,
        });
        plan.open.direct = false;
        let mut c = ck(&plan);
        c.identity = plan.identity.clone();
        c.durable_offset = 8 << 20;
        c.resync = None;
        (d, f, plan, c)
    }

    fn run_on(plan: Plan, f: &std::fs::File) -> Result<crate::wipe::Outcome, WipeError> {
        let sink = std::sync::Arc::new(crate::wipe::sink::FileSink(f.try_clone().unwrap()));
        crate::wipe::Job::new(plan, crate::host::Root::new("/nonexistent"))
            .with_sink(sink)
            .run(&std::sync::atomic::AtomicBool::new(false))
    }

    #[test]
    fn a_resume_onto_a_disk_whose_first_bytes_differ_from_the_recorded_digest_writes_nothing() {
        use std::os::unix::fs::FileExt;
        let (d, f, plan, c) = half_done_on_a_file();
        assert_eq!(
            c.head.as_ref().map(|h| (h.offset, h.len)),
            Some((0, 64 << 10))
        );
        // Another disk under the name: zeroes where the samples look (its first 4 KiB
        // included), an md 1.2 superblock at 4 KiB (a whole-disk member, no partition table).
        f.write_all_at(&0xa92b_4efc_u32.to_le_bytes(), 4096)
            .unwrap();
        let before = std::fs::read(d.path().join("disk.img")).unwrap();
        let r = resume(plan.clone(), &c, Path::new("/c.json"), None).unwrap();
        assert_eq!(r.checkpoint.as_ref().unwrap().head, c.head);
        let e = run_on(r, &f).unwrap_err();
        assert!(
            matches!(
                e,
                WipeError::ResumeHeadMismatch {
                    offset: 0,
                    len: 65536,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("nothing was written"), "{e}");
        assert_eq!(std::fs::read(d.path().join("disk.img")).unwrap(), before);
        // The disk the checkpoint is of (zeroes there): resumed and completed.
        f.write_all_at(&[0; 4], 4096).unwrap();
        let r = resume(plan, &c, Path::new("/c.json"), None).unwrap();
        let o = run_on(r, &f).unwrap();
        assert_eq!((o.bytes, o.resumed_bytes), (8 << 20, 8 << 20));
    }

    #[test]
    fn a_resume_onto_a_disk_of_another_size_or_with_a_misplaced_digest_is_refused() {
        let (_d, _f, plan, c) = half_done_on_a_file();
        let mut other = c.clone();
        other.identity.size_bytes = 32 << 20;
        let e = resume(plan.clone(), &other, Path::new("/c.json"), None).unwrap_err();
        assert!(
            e.to_string()
                .contains("was 33554432 bytes, it is 16777216 bytes now"),
            "{e}"
        );
        // A record that names other bytes than the ranges' first (never read: its length
        // could be anything in a damaged file).
        let mut other = c;
        other.head.as_mut().unwrap().len = u64::MAX;
        let e = resume(plan, &other, Path::new("/c.json"), None).unwrap_err();
        assert!(e.to_string().contains("first bytes does not fit"), "{e}");
    }
}
