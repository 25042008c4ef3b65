//! Engine tests on memory buffers and files: data written, durable progress, errors with offsets,
//! cancel, leases, and the resync freeze/skip sequence in a temporary sysfs tree.

use crate::support;

use mdpilot::wipe::leases::{LeaseKind, LeaseRequest, Limits, Owner, RecordingLeases};
use mdpilot::wipe::plan::{
    CheckpointPlan, Data, Method, Op, OpenFlags, Plan, Range, ResyncAction, StartedBy,
};
use mdpilot::wipe::sink::{FileSink, MemSink, Sink};
use mdpilot::wipe::stream::{self, Seed};
use mdpilot::wipe::{verify_plan, Job, Phase, WipeError};
use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use support::tree::{md_root, Root};

const BLOCK: u64 = 64 * 1024;

fn plan(size: u64, op: Op) -> Plan {
    Plan {
        device: PathBuf::from("/dev/test"),
        dev: (0, 0),
        name: "test".into(),
        size_bytes: size,
        method: Method::Zero,
        op,
        open: OpenFlags {
            direct: true,
            exclusive: true,
            read: false,
        },
        block_bytes: BLOCK,
        step_bytes: 2 * BLOCK,
        queue_depth: 3,
        ranges: vec![Range {
            offset: 0,
            len: size,
        }],
        resync: ResyncAction::Leave,
        leases: vec![],
        verify: false,
        reasons: vec![],
        reread_partitions: false,
        identity: Default::default(),
        checkpoint: None,
        offload: vec![],
    }
}

fn root() -> Root {
    Root::new("/nonexistent-root-for-tests")
}

#[test]
fn zero_write_and_zeroout_clear_everything() {
    // A size that is not a multiple of the block: the last request is short.
    let size = 10 * BLOCK + 4096;
    for op in [Op::Write(Data::Zero), Op::ZeroOut, Op::Discard] {
        let sink = Arc::new(MemSink::new(size as usize, 0xAA));
        let o = Job::new(plan(size, op.clone()), root())
            .with_sink(sink.clone())
            .run(&AtomicBool::new(false))
            .unwrap();
        assert_eq!(o.bytes, size, "{op:?}");
        assert!(sink.contents().iter().all(|&b| b == 0), "{op:?}");
    }
}

#[test]
fn random_writes_the_seeded_stream_and_verifies() {
    let size = 7 * BLOCK;
    let seed = Seed([9; 32]);
    let mut p = plan(size, Op::Write(Data::Random(seed.clone())));
    p.verify = true;
    let sink = Arc::new(MemSink::new(size as usize, 0));
    let o = Job::new(p.clone(), root())
        .with_sink(sink.clone())
        .run(&AtomicBool::new(false))
        .unwrap();
    assert!(o.verified);
    let mut want = vec![0u8; size as usize];
    stream::fill(&seed, 0, &mut want);
    assert_eq!(sink.contents(), want);
    // Corrupt one byte: verify reports exactly that offset.
    sink.write_at(&[0x55], 3 * BLOCK + 17).unwrap();
    match verify_plan(&p, &*sink) {
        Err(WipeError::VerifyMismatch { offset, .. }) => assert_eq!(offset, 3 * BLOCK + 17),
        other => panic!("{other:?}"),
    }
}

#[test]
fn pattern_repeats_file_content_across_blocks() {
    let size = 5 * BLOCK;
    let content: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
    let p = plan(size, Op::Write(Data::Pattern(Arc::new(content.clone()))));
    let sink = Arc::new(MemSink::new(size as usize, 0));
    Job::new(p.clone(), root())
        .with_sink(sink.clone())
        .run(&AtomicBool::new(false))
        .unwrap();
    let got = sink.contents();
    for (i, b) in got.iter().enumerate() {
        assert_eq!(*b, content[i % content.len()], "offset {i}");
    }
    verify_plan(&p, &*sink).unwrap();
}

#[test]
fn stream_source_is_written_in_device_order() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("src");
    let size = 6 * BLOCK;
    let data: Vec<u8> = (0..size).map(|i| (i / 4096) as u8).collect();
    std::fs::write(&src, &data).unwrap();
    let mut p = plan(size, Op::Write(Data::Stream(src)));
    p.queue_depth = 1;
    let sink = Arc::new(MemSink::new(size as usize, 0xFF));
    Job::new(p, root())
        .with_sink(sink.clone())
        .run(&AtomicBool::new(false))
        .unwrap();
    assert_eq!(sink.contents(), data);
}

#[test]
fn only_ranges_are_touched() {
    let size = 16 * BLOCK;
    let mut p = plan(size, Op::Write(Data::Zero));
    p.ranges = vec![
        Range {
            offset: 0,
            len: BLOCK + 512,
        },
        Range {
            offset: size - 4096,
            len: 4096,
        },
    ];
    let sink = Arc::new(MemSink::new(size as usize, 1));
    let o = Job::new(p, root())
        .with_sink(sink.clone())
        .run(&AtomicBool::new(false))
        .unwrap();
    assert_eq!(o.bytes, BLOCK + 512 + 4096);
    let c = sink.contents();
    assert!(c[..(BLOCK + 512) as usize].iter().all(|&b| b == 0));
    assert!(c[(BLOCK + 512) as usize..(size - 4096) as usize]
        .iter()
        .all(|&b| b == 1));
    assert!(c[(size - 4096) as usize..].iter().all(|&b| b == 0));
}

#[test]
fn eio_ends_the_job_with_offset_and_errno() {
    let size = 20 * BLOCK;
    let mut sink = MemSink::new(size as usize, 0xAA);
    sink.fail_at = Some(9 * BLOCK + 100);
    let sink = Arc::new(sink);
    let e = Job::new(plan(size, Op::Write(Data::Zero)), root())
        .with_sink(sink)
        .run(&AtomicBool::new(false))
        .unwrap_err();
    match &e {
        WipeError::Io {
            offset, errno, op, ..
        } => {
            assert_eq!(*offset, 9 * BLOCK);
            assert_eq!(*errno, libc::EIO);
            assert_eq!(*op, "write");
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("/dev/test"));
}

#[test]
fn enospc_past_the_end_is_reported() {
    // The plan claims more than the sink holds (a device that shrank under the job).
    let sink = Arc::new(MemSink::new((4 * BLOCK) as usize, 0));
    let e = Job::new(plan(6 * BLOCK, Op::ZeroOut), root())
        .with_sink(sink)
        .run(&AtomicBool::new(false))
        .unwrap_err();
    assert!(
        matches!(e, WipeError::Io { errno, offset, .. } if errno == libc::ENOSPC && offset == 4 * BLOCK),
        "{e:?}"
    );
}

#[test]
fn discard_unsupported_by_sink_is_a_clear_error() {
    let f = tempfile::tempfile().unwrap();
    f.set_len(4 * BLOCK).unwrap();
    let e = Job::new(plan(4 * BLOCK, Op::Discard), root())
        .with_sink(Arc::new(FileSink(f)))
        .run(&AtomicBool::new(false))
        .unwrap_err();
    assert!(
        matches!(e, WipeError::Unsupported { op: "discard", .. }),
        "{e:?}"
    );
}

#[test]
fn file_sink_random_roundtrip() {
    let f = tempfile::tempfile().unwrap();
    let size = 9 * BLOCK;
    f.set_len(size).unwrap();
    let mut p = plan(size, Op::Write(Data::Random(Seed([1; 32]))));
    p.verify = true;
    let o = Job::new(p, root())
        .with_sink(Arc::new(FileSink(f)))
        .run(&AtomicBool::new(false))
        .unwrap();
    assert!(o.verified);
}

#[test]
fn progress_is_monotonic_and_ends_at_total() {
    let size = 50 * BLOCK;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let h = Job::new(plan(size, Op::Write(Data::Zero)), root())
        .with_sink(Arc::new(MemSink::new(size as usize, 1)))
        .on_progress(move |p| s2.lock().unwrap().push((p.done_bytes, p.phase)))
        .start();
    let o = h.wait().unwrap();
    assert_eq!(o.bytes, size);
    let seen = seen.lock().unwrap();
    assert!(seen.windows(2).all(|w| w[0].0 <= w[1].0));
    assert_eq!(seen.last().unwrap(), &(size, Phase::Done));
    assert!(seen.iter().all(|(d, _)| d % BLOCK == 0));
}

#[test]
fn cancel_half_way_stops_between_blocks() {
    let size = 400 * BLOCK;
    let job = Job::new(plan(size, Op::Write(Data::Random(Seed([5; 32])))), root())
        .with_sink(Arc::new(MemSink::new(size as usize, 0)));
    let token = job.cancel_token();
    let job = job.on_progress(move |p| {
        if p.done_bytes >= p.total_bytes / 2 {
            token.store(true, Ordering::SeqCst);
        }
    });
    let h = job.start();
    match h.wait() {
        Err(WipeError::Cancelled {
            done_bytes,
            total_bytes,
            ..
        }) => {
            assert_eq!(total_bytes, size);
            assert!(done_bytes >= size / 2 && done_bytes < size, "{done_bytes}");
        }
        other => panic!("{other:?}"),
    }
}

fn read(p: &std::path::Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

#[test]
fn resync_freeze_then_skip_after_success() {
    let (d, md) = md_root("md9", "resync");
    let mut p = plan(8 * BLOCK, Op::Write(Data::Zero));
    p.resync = ResyncAction::FreezeAndSkip {
        array: "md9".into(),
    };
    let md2 = md.clone();
    let frozen_during = Arc::new(Mutex::new(Vec::new()));
    let f2 = frozen_during.clone();
    let o = Job::new(p, Root::new(d.path()))
        .with_sink(Arc::new(MemSink::new((8 * BLOCK) as usize, 1)))
        .on_progress(move |pr| {
            if pr.phase == Phase::Wipe {
                f2.lock().unwrap().push(read(&md2.join("sync_action")));
            }
        })
        .run(&AtomicBool::new(false))
        .unwrap();
    assert!(o.resync_skipped);
    assert!(frozen_during.lock().unwrap().iter().all(|s| s == "frozen"));
    assert_eq!(read(&md.join("resync_start")), "none");
    assert_eq!(read(&md.join("sync_action")), "idle");
}

#[test]
fn resync_unfrozen_but_never_marked_clean_on_failure_or_cancel() {
    // Failure.
    let (d, md) = md_root("md9", "resync");
    let mut p = plan(8 * BLOCK, Op::Write(Data::Zero));
    p.resync = ResyncAction::FreezeAndSkip {
        array: "md9".into(),
    };
    let mut sink = MemSink::new((8 * BLOCK) as usize, 1);
    sink.fail_at = Some(5 * BLOCK);
    assert!(Job::new(p.clone(), Root::new(d.path()))
        .with_sink(Arc::new(sink))
        .run(&AtomicBool::new(false))
        .is_err());
    assert_eq!(read(&md.join("resync_start")), "1024");
    assert_eq!(read(&md.join("sync_action")), "idle");
    // Cancel before the first block.
    let (d, md) = md_root("md9", "resync");
    let e = Job::new(p, Root::new(d.path()))
        .with_sink(Arc::new(MemSink::new((8 * BLOCK) as usize, 1)))
        .run(&AtomicBool::new(true))
        .unwrap_err();
    assert!(matches!(e, WipeError::Cancelled { .. }), "{e:?}");
    assert_eq!(read(&md.join("resync_start")), "1024");
    assert_eq!(read(&md.join("sync_action")), "idle");
}

#[test]
fn resync_control_failure_stops_before_writing() {
    let d = tempfile::tempdir().unwrap(); // no md9 directory
    let mut p = plan(4 * BLOCK, Op::Write(Data::Zero));
    p.resync = ResyncAction::FreezeAndSkip {
        array: "md9".into(),
    };
    let sink = Arc::new(MemSink::new((4 * BLOCK) as usize, 1));
    let e = Job::new(p, Root::new(d.path()))
        .with_sink(sink.clone())
        .run(&AtomicBool::new(false))
        .unwrap_err();
    assert!(e.to_string().contains("sync_action"), "{e}");
    assert!(sink.contents().iter().all(|&b| b == 1));
}

fn lease() -> LeaseRequest {
    LeaseRequest {
        holder: "wipe:/dev/test".into(),
        kind: LeaseKind::WipeJob,
        owner: Owner::Pid(1),
        global: Limits {
            min: Some(0),
            max: None,
            io_depth: None,
        },
        arrays: BTreeMap::new(),
    }
}

#[test]
fn leases_are_held_for_the_job_and_released_on_every_end() {
    for fail in [false, true] {
        let leases = Arc::new(RecordingLeases::default());
        let mut p = plan(4 * BLOCK, Op::Write(Data::Zero));
        p.leases = vec![lease()];
        let mut sink = MemSink::new((4 * BLOCK) as usize, 1);
        if fail {
            sink.fail_at = Some(0);
        }
        let r = Job::new(p, root())
            .with_sink(Arc::new(sink))
            .with_leases(leases.clone())
            .run(&AtomicBool::new(false));
        assert_eq!(r.is_err(), fail);
        assert_eq!(
            *leases.calls.lock().unwrap(),
            vec!["acquire:wipe:/dev/test", "release:wipe:/dev/test"]
        );
    }
}

#[test]
fn refused_lease_stops_before_writing() {
    let leases = Arc::new(RecordingLeases {
        refuse: Some("limit conflict".into()),
        ..RecordingLeases::default()
    });
    let mut p = plan(4 * BLOCK, Op::Write(Data::Zero));
    p.leases = vec![lease()];
    let sink = Arc::new(MemSink::new((4 * BLOCK) as usize, 1));
    let e = Job::new(p, root())
        .with_sink(sink.clone())
        .with_leases(leases)
        .run(&AtomicBool::new(false))
        .unwrap_err();
    assert!(e.to_string().contains("limit conflict"), "{e}");
    assert!(sink.contents().iter().all(|&b| b == 1));
}

#[test]
fn random_generator_is_not_the_bottleneck() {
    // Measures ChaCha8 throughput of one thread; the figure goes to the bench report. Debug
    // builds are ~50x slower, so only a release build asserts a floor.
    let mut buf = vec![0u8; 4 << 20];
    let seed = Seed([2; 32]);
    let t = std::time::Instant::now();
    let mut n = 0u64;
    while t.elapsed().as_millis() < 300 {
        stream::fill(&seed, n, &mut buf);
        n += buf.len() as u64;
    }
    let mbs = n as f64 / t.elapsed().as_secs_f64() / 1e6;
    eprintln!("ChaCha8 stream: {mbs:.0} MB/s per thread");
    if !cfg!(debug_assertions) {
        assert!(mbs > 500.0, "{mbs} MB/s");
    }
}

#[test]
fn zero_falls_back_to_writes_when_zeroout_is_unsupported() {
    let size = 6 * BLOCK;
    let mut sink = MemSink::new(size as usize, 0xAA);
    sink.ranges_unsupported = true;
    let sink = Arc::new(sink);
    let o = Job::new(plan(size, Op::ZeroOut), root())
        .with_sink(sink.clone())
        .run(&AtomicBool::new(false))
        .unwrap();
    assert_eq!(o.bytes, size);
    assert!(sink.contents().iter().all(|&b| b == 0));
    // `zeroout` asked explicitly does not fall back.
    let mut p = plan(size, Op::ZeroOut);
    p.method = Method::Zeroout;
    let mut sink = MemSink::new(size as usize, 0xAA);
    sink.ranges_unsupported = true;
    let e = Job::new(p, root())
        .with_sink(Arc::new(sink))
        .run(&AtomicBool::new(false))
        .unwrap_err();
    assert!(
        matches!(e, WipeError::Unsupported { op: "zeroout", .. }),
        "{e:?}"
    );
}

#[test]
fn on_complete_gets_the_result_once() {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g2 = got.clone();
    let h = Job::new(plan(4 * BLOCK, Op::Write(Data::Zero)), root())
        .with_sink(Arc::new(MemSink::new((4 * BLOCK) as usize, 1)))
        .on_complete(move |r| g2.lock().unwrap().push(r.as_ref().map(|o| o.bytes).ok()))
        .start();
    h.wait().unwrap();
    assert_eq!(*got.lock().unwrap(), vec![Some(4 * BLOCK)]);
}

#[test]
fn buffered_block_device_sink_on_a_file_settles_each_block() {
    // BlockDevice over a regular file: buffered writes go through sync_file_range (the O_DIRECT
    // fallback path), and BLKZEROOUT fails with ENOTTY, so `zero` falls back to writes.
    use mdpilot::wipe::sink::BlockDevice;
    let f = tempfile::tempfile().unwrap();
    let size = 12 * BLOCK;
    f.set_len(size).unwrap();
    f.write_all_at(&vec![0xCC; size as usize], 0).unwrap();
    let sink = Arc::new(BlockDevice {
        file: f.try_clone().unwrap(),
        direct: false,
    });
    let mut p = plan(size, Op::ZeroOut).buffered_fallback();
    p.verify = true;
    let o = Job::new(p, root())
        .with_sink(sink)
        .run(&AtomicBool::new(false))
        .unwrap();
    assert!(o.verified);
    let mut back = vec![1u8; size as usize];
    f.read_exact_at(&mut back, 0).unwrap();
    assert!(back.iter().all(|&b| b == 0));
}

#[test]
fn regular_file_of_any_size_repeats_over_the_device_by_pread() {
    // A file larger than a block and not a divisor of it: every wrap lands mid-block.
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("big");
    let len = 3 * BLOCK + 777;
    let content: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&src, &content).unwrap();
    let size = 11 * BLOCK + 4096;
    let mut p = plan(size, Op::Write(Data::RepeatFile { path: src, len }));
    p.verify = true;
    let sink = Arc::new(MemSink::new(size as usize, 0xEE));
    let o = Job::new(p, root())
        .with_sink(sink.clone())
        .run(&AtomicBool::new(false))
        .unwrap();
    assert!(o.verified);
    let got = sink.contents();
    assert!(got
        .iter()
        .enumerate()
        .all(|(i, &b)| b == content[i % content.len()]));
    // A file larger than the device: its first `size` bytes.
    let p2 = d.path().join("huge");
    let huge: Vec<u8> = (0..2 * size).map(|i| (i % 253) as u8).collect();
    std::fs::write(&p2, &huge).unwrap();
    let sink = Arc::new(MemSink::new(size as usize, 0xEE));
    Job::new(
        plan(
            size,
            Op::Write(Data::RepeatFile {
                path: p2,
                len: 2 * size,
            }),
        ),
        root(),
    )
    .with_sink(sink.clone())
    .run(&AtomicBool::new(false))
    .unwrap();
    assert_eq!(sink.contents(), huge[..size as usize]);
}

#[test]
fn stream_source_ending_before_the_device_says_so_without_errno() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("short");
    std::fs::write(&src, vec![9u8; (BLOCK + 100) as usize]).unwrap();
    let size = 4 * BLOCK;
    let mut p = plan(size, Op::Write(Data::Stream(src.clone())));
    p.queue_depth = 1;
    let sink = Arc::new(MemSink::new(size as usize, 0));
    let e = Job::new(p, root())
        .with_sink(sink)
        .run(&AtomicBool::new(false))
        .unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(&e, WipeError::SourceEnded { source_bytes, device_bytes, .. }
            if *source_bytes == BLOCK + 100 && *device_bytes == size),
        "{msg}"
    );
    assert!(
        msg.contains(&format!(
            "data source ended after {} bytes; /dev/test is {size} bytes",
            BLOCK + 100
        )),
        "{msg}"
    );
    assert!(!msg.contains("errno"), "{msg}");
}

#[test]
fn io_error_without_an_os_errno_prints_no_errno() {
    let e = WipeError::io(
        std::path::Path::new("/dev/test"),
        "write",
        4096,
        std::io::Error::new(std::io::ErrorKind::WriteZero, "short write"),
    );
    assert_eq!(
        e.to_string(),
        "/dev/test: write failed at offset 4096 bytes"
    );
    let e = WipeError::io(
        std::path::Path::new("/dev/test"),
        "write",
        0,
        std::io::Error::from_raw_os_error(libc::EIO),
    );
    assert!(e.to_string().ends_with(&format!("(errno {})", libc::EIO)));
}

#[test]
fn flush_keeps_the_last_wipe_rate_and_verify_eta_follows_verify_progress() {
    let size = 64 * BLOCK;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let mut p = plan(size, Op::Write(Data::Zero));
    p.verify = true;
    Job::new(p, root())
        .with_sink(Arc::new(MemSink::new(size as usize, 1)))
        .on_progress(move |pr| s2.lock().unwrap().push(*pr))
        .run(&AtomicBool::new(false))
        .unwrap();
    let seen = seen.lock().unwrap();
    let flush: Vec<_> = seen.iter().filter(|p| p.phase == Phase::Flush).collect();
    assert!(!flush.is_empty());
    for f in &flush {
        assert!(f.rate_bytes_per_s > 0.0, "{f:?}");
        assert_eq!(f.eta_s(), None, "{f:?}");
    }
    for v in seen.iter().filter(|p| p.phase == Phase::Verify) {
        match v.eta_s() {
            None => assert!(v.rate_bytes_per_s == 0.0, "{v:?}"),
            Some(eta) => {
                let want = (v.total_bytes - v.verified_bytes) as f64 / v.rate_bytes_per_s;
                assert!((eta - want).abs() < 1e-9, "{v:?}");
            }
        }
    }
    let last = seen.last().unwrap();
    assert_eq!(last.phase, Phase::Done);
    assert!(last.rate_bytes_per_s > 0.0, "{last:?}");
}

#[test]
fn verify_eta_counts_bytes_left_to_read_back_not_to_write() {
    use mdpilot::wipe::Progress;
    let p = Progress {
        done_bytes: 1000,
        total_bytes: 1000,
        verified_bytes: 400,
        rate_bytes_per_s: 100.0,
        elapsed_s: 9.0,
        phase: Phase::Verify,
    };
    assert_eq!(p.eta_s(), Some(6.0));
    let w = Progress {
        phase: Phase::Wipe,
        done_bytes: 500,
        ..p
    };
    assert_eq!(w.eta_s(), Some(5.0));
    let s = Progress {
        phase: Phase::Starting,
        rate_bytes_per_s: 0.0,
        ..p
    };
    assert_eq!(s.eta_s(), None);
    let json = serde_json::to_value(p).unwrap();
    assert_eq!(json["phase"], "verify");
}

/// A sink whose writes panic: a bug in a worker thread.
struct PanickingSink;

impl Sink for PanickingSink {
    fn write_at(&self, _: &[u8], _: u64) -> std::io::Result<()> {
        panic!("injected worker panic (expected by this test)")
    }
    fn read_at(&self, _: &mut [u8], _: u64) -> std::io::Result<()> {
        Ok(())
    }
    fn zeroout(&self, _: u64, _: u64) -> std::io::Result<()> {
        Ok(())
    }
    fn discard(&self, _: u64, _: u64) -> std::io::Result<()> {
        Ok(())
    }
    fn settle(&self, _: u64, _: u64) -> std::io::Result<()> {
        Ok(())
    }
    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn worker_panic_is_an_internal_failure_with_exit_1_not_a_refusal() {
    let p = plan(4 * BLOCK, Op::Write(Data::Zero));
    let e = Job::new(p.clone(), root())
        .with_sink(Arc::new(PanickingSink))
        .run(&AtomicBool::new(false))
        .unwrap_err();
    assert!(matches!(e, WipeError::Internal(_)), "{e:?}");
    assert_eq!(e.to_string(), "wipe job thread panicked");
    // Exit 2 means "refused, nothing written": a panic may have written part of the device.
    assert_eq!(mdpilot::cli::wipe::exit_code(&e), 1);
    // The same through a started job's handle.
    let e = Job::new(p, root())
        .with_sink(Arc::new(PanickingSink))
        .start()
        .wait()
        .unwrap_err();
    assert!(matches!(e, WipeError::Internal(_)), "{e:?}");
}

#[test]
fn start_stops_before_approval_when_the_probe_fails() {
    use mdpilot::wipe::{leases::NoLeases, Hooks, Options, Request};
    let d = tempfile::tempdir().unwrap();
    let req = Request {
        device: d.path().join("no-such-device"),
        method: Method::Random,
        options: Options::default(),
    };
    let mut asked = false;
    let r = mdpilot::wipe::start(&Root::new(d.path()), &req, |_| {
        asked = true;
        Ok::<_, WipeError>(Hooks::new(Arc::new(NoLeases)))
    });
    assert!(matches!(r, Err(WipeError::Probe { .. })), "{:?}", r.err());
    assert!(!asked, "approve must not see a plan that was never made");
}

/// A plan whose checkpoint file cannot be written: its directory would be below a regular file
/// (ENOTDIR even for root, as EROFS is under a read-only /var/lib/mdpilot).
fn plan_with_unwritable_checkpoint(
    started_by: StartedBy,
) -> (tempfile::TempDir, Plan, std::path::PathBuf) {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("file"), b"").unwrap();
    let path = d.path().join("file/wipe/test.json");
    let mut p = plan(4 * BLOCK, Op::Write(Data::Zero));
    p.checkpoint = Some(CheckpointPlan {
        path: path.clone(),
        full_ranges: p.ranges.clone(),
        resumed_bytes: 0,
        resync_mark: None,
        started_by,
        head: None,
    });
    (d, p, path)
}

#[test]
fn service_wipe_whose_checkpoint_cannot_be_saved_fails_before_writing() {
    let (d, md) = md_root("md9", "resync");
    let (_ck, mut p, path) = plan_with_unwritable_checkpoint(StartedBy::Service { uid: 0 });
    p.leases = vec![lease()];
    p.resync = ResyncAction::FreezeAndSkip {
        array: "md9".into(),
    };
    let leases = Arc::new(RecordingLeases::default());
    let sink = Arc::new(MemSink::new((4 * BLOCK) as usize, 1));
    let e = Job::new(p, Root::new(d.path()))
        .with_sink(sink.clone())
        .with_leases(leases.clone())
        .run(&AtomicBool::new(false))
        .unwrap_err();
    assert!(matches!(e, WipeError::Checkpoint { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("/dev/test") && msg.contains(&path.display().to_string()),
        "{msg}"
    );
    assert!(msg.contains("could not resume"), "{msg}");
    // Nothing written, the lease released, the resync unfrozen and not marked clean.
    assert!(sink.contents().iter().all(|&b| b == 1));
    assert_eq!(
        *leases.calls.lock().unwrap(),
        vec!["acquire:wipe:/dev/test", "release:wipe:/dev/test"]
    );
    assert_eq!(read(&md.join("sync_action")), "idle");
    assert_eq!(read(&md.join("resync_start")), "1024");
}

#[test]
fn cli_wipe_whose_checkpoint_cannot_be_saved_goes_on() {
    let (_ck, p, _path) = plan_with_unwritable_checkpoint(StartedBy::Cli);
    let sink = Arc::new(MemSink::new((4 * BLOCK) as usize, 1));
    let o = Job::new(p, root())
        .with_sink(sink.clone())
        .run(&AtomicBool::new(false))
        .unwrap();
    assert_eq!(o.bytes, 4 * BLOCK);
    assert!(sink.contents().iter().all(|&b| b == 0));
}
