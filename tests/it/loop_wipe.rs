//! Loop-device tests (root only; each attaches its own loop devices, an RAII guard detaches):
//! every method read back, the refusal table, cancel half-way, failure mid-job, the CLI, and
//! the installer's `blockdev-wipe` drop-in.

use crate::support;

use mdpilot::wipe::plan::{Data, Method, Op, Options};
use mdpilot::wipe::planner::plan;
use mdpilot::wipe::probe::probe;
use mdpilot::wipe::stream::{self, Seed};
use mdpilot::wipe::Job;
use mdpilot::wipe::WipeError;
use nix::sys::signal::Signal;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use support::loopdev::{DmLinear, Mounted, Swap, Tmpfs};
use support::tree::{disk_tree, Root};
use support::{assert_exit, LoopDev, BIN, MIB};

fn opts() -> Options {
    Options {
        seed: Some(Seed::from_os().unwrap()),
        ..Options::default()
    }
}

fn wipe(dev: &LoopDev, method: Method, o: &Options) -> Result<mdpilot::wipe::Outcome, WipeError> {
    let p = probe(&Root::system(), &dev.path)?;
    let pl = plan(&p, method, o)?;
    Job::new(pl, Root::system()).run(&AtomicBool::new(false))
}

#[test]
fn loop_probe_reads_kernel_facts() {
    need_root!();
    let d = LoopDev::new(64 * MIB);
    let p = probe(&Root::system(), &d.path).unwrap();
    assert_eq!(p.size_bytes, 64 * MIB);
    assert_eq!(p.name, d.name());
    assert!(p.logical_block_size >= 512);
    assert!(p.mounts.is_empty() && p.swaps.is_empty() && p.holders.is_empty());
    assert!(!p.backs_root);
    assert!(p.array.is_none());
}

#[test]
fn loop_zero_reads_back_zeroes() {
    need_root!();
    let d = LoopDev::filled(64 * MIB, 0xA5);
    let o = wipe(&d, Method::Zero, &opts()).unwrap();
    assert_eq!(o.bytes, 64 * MIB);
    assert!(d.read_all().iter().all(|&b| b == 0));
}

#[test]
fn loop_zeroout_reads_back_zeroes() {
    need_root!();
    let d = LoopDev::filled(64 * MIB, 0x5A);
    let o = Options {
        verify: true,
        ..opts()
    };
    assert!(wipe(&d, Method::Zeroout, &o).unwrap().verified);
    assert!(d.read_all().iter().all(|&b| b == 0));
}

#[test]
fn loop_random_reads_back_the_stream_and_verifies() {
    need_root!();
    let d = LoopDev::filled(64 * MIB, 0);
    let seed = Seed::from_os().unwrap();
    let o = Options {
        verify: true,
        seed: Some(seed.clone()),
        ..Options::default()
    };
    let out = wipe(&d, Method::Random, &o).unwrap();
    assert!(out.verified);
    let got = d.read_all();
    let mut want = vec![0u8; got.len()];
    stream::fill(&seed, 0, &mut want);
    assert!(got == want, "device content differs from the seeded stream");
}

#[test]
fn loop_discard_leaves_zeroes_on_a_sparse_backing_file() {
    need_root!();
    let d = LoopDev::filled(64 * MIB, 0x77);
    let p = probe(&Root::system(), &d.path).unwrap();
    match wipe(&d, Method::Discard, &opts()) {
        Ok(o) => {
            assert_eq!(o.bytes, 64 * MIB);
            // A loop device punches holes in its backing file: discarded ranges read as zeroes.
            assert!(d.read_all().iter().all(|&b| b == 0));
        }
        Err(e @ WipeError::Unsupported { .. }) => {
            assert_eq!(p.discard_max_bytes, 0, "{e}");
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn loop_signatures_clear_superblocks_and_edges_only() {
    need_root!();
    let size = 64 * MIB;
    let d = LoopDev::filled(size, 0xEE);
    wipe(&d, Method::Signatures, &opts()).unwrap();
    let c = d.read_all();
    let zero = |a: u64, b: u64| c[a as usize..b as usize].iter().all(|&x| x == 0);
    assert!(zero(0, MIB));
    assert!(zero(size - MIB, size));
    assert!(zero((size & !65535) - 65536, size & !65535)); // 0.90
    assert!(zero((size - 8192) & !4095, ((size - 8192) & !4095) + 4096)); // 1.0
    assert!(c[(2 * MIB) as usize..(size - 2 * MIB) as usize]
        .iter()
        .all(|&x| x == 0xEE));
}

#[test]
fn loop_refuses_mounted_ext4() {
    need_root!();
    let d = LoopDev::new(64 * MIB);
    let m = Mounted::new(&d.path);
    let e = wipe(&d, Method::Zero, &opts()).unwrap_err();
    let s = e.to_string();
    assert!(matches!(e, WipeError::Refused { .. }), "{s}");
    assert!(
        s.contains(d.path.to_str().unwrap()) && s.contains("mounted on"),
        "{s}"
    );
    assert!(s.contains(m.dir.path().to_str().unwrap()), "{s}");
    // Nothing was written: the filesystem is intact.
    drop(m);
    let out = Command::new("fsck.ext4")
        .args(["-n", d.path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn loop_refuses_active_swap() {
    need_root!();
    let d = LoopDev::new(64 * MIB);
    let Some(_s) = Swap::new(&d.path) else {
        skip!("swapon not permitted here");
    };
    let e = wipe(&d, Method::Zero, &opts()).unwrap_err();
    assert!(e.to_string().contains("swap"), "{e}");
}

#[test]
fn loop_refuses_device_held_by_dm() {
    need_root!();
    if !support::have("dmsetup", "dmsetup") {
        return;
    }
    let d = LoopDev::new(64 * MIB);
    if !support::loopdev::dm_in_kernel() {
        return support::kernel_lacks("device-mapper", "VM scenario 13-fault-target-vanishes");
    }
    let Some(dm) = DmLinear::new(&d.path, 64 * MIB / 512) else {
        skip!("device-mapper unavailable (modprobe dm_mod)");
    };
    let e = wipe(&d, Method::Zero, &opts()).unwrap_err();
    assert!(e.to_string().contains("held by device-mapper"), "{e}");
    drop(dm);
}

#[test]
fn loop_o_excl_refuses_a_second_exclusive_opener() {
    need_root!();
    use std::os::unix::fs::OpenOptionsExt;
    let d = LoopDev::new(64 * MIB);
    let p = probe(&Root::system(), &d.path).unwrap();
    let pl = plan(&p, Method::Zero, &opts()).unwrap();
    let _holder = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL)
        .open(&d.path)
        .unwrap();
    let e = Job::new(pl, Root::system())
        .run(&AtomicBool::new(false))
        .unwrap_err();
    assert!(
        matches!(&e, WipeError::Open { source, .. } if source.raw_os_error() == Some(libc::EBUSY)),
        "{e:?}"
    );
}

#[test]
fn loop_cancel_half_way() {
    need_root!();
    let size = 128 * MIB;
    let d = LoopDev::filled(size, 0x11);
    let p = probe(&Root::system(), &d.path).unwrap();
    let pl = plan(&p, Method::Random, &opts()).unwrap();
    let job = Job::new(pl, Root::system());
    let token = job.cancel_token();
    let h = job
        .on_progress(move |pr| {
            if pr.done_bytes >= pr.total_bytes / 2 {
                token.store(true, Ordering::SeqCst);
            }
        })
        .start();
    match h.wait() {
        Err(WipeError::Cancelled { done_bytes, .. }) => {
            assert!(done_bytes >= size / 2 && done_bytes < size, "{done_bytes}");
            // The tail was never written.
            let c = d.read_all();
            assert!(c[(size - 8 * MIB) as usize..].iter().all(|&b| b == 0x11));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn loop_failure_mid_job_reports_offset_and_errno() {
    need_root!();
    // A loop device over a file on a 24 MiB tmpfs: real writes past ~24 MiB fail (ENOSPC in
    // the backing file, EIO on the loop device) half-way through a 64 MiB device.
    let mnt = tempfile::tempdir().unwrap();
    let Some(_tmpfs) = Tmpfs::mount(mnt.path(), "24m") else {
        skip!("cannot mount tmpfs");
    };
    let file = mnt.path().join("disk.img");
    std::fs::File::create(&file)
        .unwrap()
        .set_len(64 * MIB)
        .unwrap();
    // Detached before the tmpfs is unmounted (drop order).
    let loopdev = LoopDev::attach(&file);
    let dev = loopdev.path.to_str().unwrap().to_string();
    let p = probe(&Root::system(), std::path::Path::new(&dev)).unwrap();
    let pl = plan(&p, Method::Random, &opts()).unwrap();
    let e = Job::new(pl, Root::system())
        .run(&AtomicBool::new(false))
        .unwrap_err();
    match &e {
        WipeError::Io {
            offset, errno, op, ..
        } => {
            assert!(*offset > 0 && *offset < 64 * MIB, "{e}");
            assert!(*errno != 0, "{e}");
            assert_eq!(*op, "write");
            assert!(e.to_string().contains(&dev));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn loop_cli_dry_run_writes_nothing_and_shows_reasons() {
    need_root!();
    let d = LoopDev::filled(64 * MIB, 0x42);
    let out = Command::new(BIN)
        .args(["wipe", "--dry-run", "--method", "random"])
        .arg(&d.path)
        .output()
        .unwrap();
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("reasons:") && s.contains("O_DIRECT"), "{s}");
    assert!(d.read_all().iter().all(|&b| b == 0x42));
}

#[test]
fn loop_cli_confirmation_required_without_yes_and_declining_exits_2() {
    need_root!();
    let d = LoopDev::filled(64 * MIB, 0x42);
    let mut c = Command::new(BIN)
        .arg("wipe")
        .arg(&d.path)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(b"no\n").unwrap();
    let out = c.wait_with_output().unwrap();
    // Declining is "nothing written" (2), not a signal's 130.
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not confirmed; nothing written"));
    assert!(d.read_all().iter().all(|&b| b == 0x42));
    // Typing the device name confirms.
    let mut c = Command::new(BIN)
        .arg("wipe")
        .arg(&d.path)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    c.stdin
        .take()
        .unwrap()
        .write_all(format!("{}\n", d.path.display()).as_bytes())
        .unwrap();
    assert!(c.wait().unwrap().success());
    assert!(d.read_all().iter().all(|&b| b == 0));
}

#[test]
fn loop_cli_json_progress_and_completion() {
    need_root!();
    let d = LoopDev::filled(64 * MIB, 0x42);
    let out = Command::new(BIN)
        .args([
            "wipe",
            "--yes",
            "--verify",
            "--progress",
            "json",
            "--method",
            "random",
        ])
        .arg(&d.path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let plan = lines.first().unwrap();
    assert_eq!(plan["event"], "plan");
    assert_eq!(plan["method"], "random");
    assert_eq!(plan["resync"], "leave");
    assert_eq!(plan["open_flags"], "O_RDWR|O_EXCL|O_DIRECT");
    for l in &lines {
        if l["event"] == "progress" {
            match l["phase"].as_str().unwrap() {
                // A cache flush keeps the wipe's rate; verify's ETA is its own (or unknown).
                "flush" => assert!(l["rate_bytes_per_s"].as_f64().unwrap() > 0.0, "{l}"),
                "verify" if l["verified_bytes"] != l["total_bytes"] => {
                    assert!(
                        l["eta_s"].is_null() || l["eta_s"].as_f64().unwrap() > 0.0,
                        "{l}"
                    );
                }
                _ => {}
            }
        }
    }
    let last = lines.last().unwrap();
    assert_eq!(last["event"], "completed");
    assert_eq!(last["success"], true);
    assert_eq!(last["outcome"]["bytes"], 64 * MIB);
    assert_eq!(last["outcome"]["verified"], true);
}

#[test]
fn loop_cli_sigint_cancels_and_exits_nonzero() {
    need_root!();
    let d = LoopDev::filled(256 * MIB, 0x42);
    let (c, mut r) = spawn_piped(
        &["wipe", "--yes", "--progress", "json", "--method", "random"],
        &d.path,
    );
    let mut line = String::new();
    // Wait for the first progress line: the job has started.
    loop {
        line.clear();
        assert!(r.read_line(&mut line).unwrap() > 0, "no progress line");
        if line.contains("\"progress\"") {
            break;
        }
    }
    let (rest, out) = signal_and_wait(c, r, Signal::SIGINT);
    assert_eq!(out.status.code(), Some(130), "{rest}");
    assert!(rest.contains("cancelled"), "{rest}");
}

/// `mdpilot ARGS DEV` with stdout (returned, buffered) and stderr piped.
fn spawn_piped(args: &[&str], dev: &Path) -> (Child, BufReader<ChildStdout>) {
    let mut c = Command::new(BIN)
        .args(args)
        .arg(dev)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let r = BufReader::new(c.stdout.take().unwrap());
    (c, r)
}

/// Sends `sig` to `c`, then reads the rest of its stdout and waits for it.
fn signal_and_wait(c: Child, mut r: BufReader<ChildStdout>, sig: Signal) -> (String, Output) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(c.id() as i32), sig).unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut r, &mut rest).unwrap();
    (rest, c.wait_with_output().unwrap())
}

/// `mdpilot blockdev-wipe -f SRC DEV`, waited for.
fn blockdev_wipe_from(src: &Path, dev: &Path) -> Output {
    Command::new(BIN)
        .arg("blockdev-wipe")
        .arg("-f")
        .arg(src)
        .arg(dev)
        .output()
        .unwrap()
}

fn star_lines(stdout: &[u8]) -> usize {
    let s = String::from_utf8_lossy(stdout);
    assert!(s.lines().all(|l| l == "*"), "unexpected output: {s:.200}");
    s.lines().count()
}

#[test]
fn loop_blockdev_wipe_prints_exactly_1000_stars() {
    need_root!();
    for size in [64 * MIB, MIB + 512 * 3] {
        let d = LoopDev::filled(size, 0x33);
        let out = Command::new(BIN)
            .args(["blockdev-wipe", "-s", "65536"])
            .arg(&d.path)
            .output()
            .unwrap();
        assert_exit(&out, 0);
        assert_eq!(star_lines(&out.stdout), 1000);
        assert!(d.read_all().iter().all(|&b| b == 0));
    }
}

#[test]
fn loop_blockdev_wipe_via_argv0_name() {
    need_root!();
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("blockdev-wipe");
    std::os::unix::fs::symlink(BIN, &link).unwrap();
    let d = LoopDev::filled(16 * MIB, 0x33);
    let out = Command::new(&link).arg(&d.path).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(star_lines(&out.stdout), 1000);
}

#[test]
fn loop_blockdev_wipe_exit_1_on_errors() {
    need_root!();
    let out = Command::new(BIN)
        .args(["blockdev-wipe", "/dev/does-not-exist"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/dev/does-not-exist"));
    let d = LoopDev::new(64 * MIB);
    let _m = Mounted::new(&d.path);
    let out = Command::new(BIN)
        .arg("blockdev-wipe")
        .arg(&d.path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("mounted"));
    assert!(star_lines(&out.stdout) < 1000);
}

#[test]
fn loop_blockdev_wipe_f_repeats_a_regular_file() {
    need_root!();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("pattern");
    let content: Vec<u8> = (0..7777u32).map(|i| (i * 31 % 256) as u8).collect();
    std::fs::write(&src, &content).unwrap();
    let d = LoopDev::filled(16 * MIB, 0);
    let out = blockdev_wipe_from(&src, &d.path);
    assert_exit(&out, 0);
    assert_eq!(star_lines(&out.stdout), 1000);
    let got = d.read_all();
    assert!(got
        .iter()
        .enumerate()
        .all(|(i, &b)| b == content[i % content.len()]));
}

#[test]
fn loop_blockdev_wipe_f_streams_a_device() {
    need_root!();
    let d = LoopDev::filled(16 * MIB, 0);
    let out = Command::new(BIN)
        .args(["blockdev-wipe", "-f", "/dev/urandom"])
        .arg(&d.path)
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert_eq!(star_lines(&out.stdout), 1000);
    let got = d.read_all();
    let zeros = got.iter().filter(|&&b| b == 0).count();
    assert!(zeros < got.len() / 100, "{zeros} zero bytes");
    // And an empty file is an error.
    let e = tempfile::NamedTempFile::new().unwrap();
    let out = blockdev_wipe_from(e.path(), &d.path);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn loop_zero_by_forced_writes_reads_back_zeroes() {
    need_root!();
    let d = LoopDev::filled(32 * MIB, 0x99);
    let p = probe(&Root::system(), &d.path).unwrap();
    let o = Options {
        prefer_writes: true,
        verify: true,
        ..opts()
    };
    let pl = plan(&p, Method::Zero, &o).unwrap();
    assert_eq!(pl.op, Op::Write(Data::Zero));
    assert!(
        Job::new(pl, Root::system())
            .run(&AtomicBool::new(false))
            .unwrap()
            .verified
    );
    assert!(d.read_all().iter().all(|&b| b == 0));
}

#[test]
fn loop_probe_reads_sysfs_and_proc_under_the_root() {
    need_root!();
    let d = LoopDev::new(16 * MIB);
    let t = disk_tree(&d, "clean");
    let p = probe(&Root::new(t.path()), &d.path).unwrap();
    assert_eq!(p.name, d.name());
    assert_eq!(p.size_bytes, 16 * MIB); // from the ioctl, not sysfs
    assert_eq!(p.optimal_io_size, 1_572_864);
    assert_eq!(p.minimum_io_size, 524_288);
    assert_eq!(p.discard_max_bytes, 4096);
    assert!(p.rotational);
    assert_eq!(p.mounts.len(), 1, "{:?}", p.mounts);
    assert_eq!(p.mounts[0].mount_point, "/srv/data");
    assert_eq!(p.mounts[0].device, format!("{}p1", d.name()));
    assert_eq!(p.holders.len(), 1);
    assert_eq!(p.holders[0].name, "md5");
    let state = p.holders[0].md_array_state.as_ref();
    assert_eq!(state.map(mdpilot::model::ArrayState::as_str), Some("clean"));
    assert_eq!(p.resyncing_neighbours, vec!["md7".to_string()]);
    assert!(!p.backs_root);
    let e = plan(&p, Method::Zero, &opts()).unwrap_err();
    assert!(e.to_string().contains("mounted on /srv/data"), "{e}");
}

#[test]
fn loop_member_of_inactive_array_may_be_wiped_with_a_global_lease() {
    need_root!();
    let d = LoopDev::new(16 * MIB);
    let t = disk_tree(&d, "inactive");
    std::fs::write(
        t.path().join("proc/self/mountinfo"),
        "22 1 8:2 / / rw - ext4 /dev/sda2 rw\n",
    )
    .unwrap();
    let p = probe(&Root::new(t.path()), &d.path).unwrap();
    let pl = plan(&p, Method::Random, &opts()).unwrap();
    assert_eq!(pl.block_bytes, 3 * 1_572_864);
    assert_eq!(pl.leases.len(), 1);
    assert_eq!(pl.leases[0].global.min, Some(0));
}

#[test]
fn loop_blockdev_wipe_sigterm_cancels_with_exit_1() {
    // partman-crypto cancels by killing blockdev-wipe (SIGTERM).
    need_root!();
    let d = LoopDev::filled(256 * MIB, 0x42);
    let (c, mut r) = spawn_piped(&["blockdev-wipe", "-f", "/dev/urandom"], &d.path);
    let mut line = String::new();
    assert!(
        r.read_line(&mut line).unwrap() > 0,
        "no star before the end"
    );
    let (rest, out) = signal_and_wait(c, r, Signal::SIGTERM);
    assert_eq!(out.status.code(), Some(1));
    assert!(1 + rest.lines().count() < 1000);
    assert!(String::from_utf8_lossy(&out.stderr).contains("cancelled"));
}

#[test]
fn loop_blockdev_wipe_f_repeats_a_regular_file_larger_than_64_mib() {
    need_root!();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("big");
    // Larger than the old in-memory limit (64 MiB) and than the device, odd length.
    let len = 65 * MIB + 4099;
    let content: Vec<u8> = (0..len).map(|i| (i * 13 % 241) as u8).collect();
    std::fs::write(&src, &content).unwrap();
    let d = LoopDev::filled(48 * MIB, 0);
    let out = blockdev_wipe_from(&src, &d.path);
    assert_exit(&out, 0);
    assert_eq!(star_lines(&out.stdout), 1000);
    assert!(d.read_all() == content[..(48 * MIB) as usize]);
    // And one smaller than the device but larger than 1 MiB: it wraps around.
    let len = 5 * MIB + 333;
    std::fs::write(&src, &content[..len as usize]).unwrap();
    let out = blockdev_wipe_from(&src, &d.path);
    assert_eq!(out.status.code(), Some(0));
    let got = d.read_all();
    assert!(got
        .iter()
        .enumerate()
        .all(|(i, &b)| b == content[i % len as usize]));
}

#[test]
fn loop_blockdev_wipe_f_pipe_ending_early_says_how_much_and_exits_1() {
    need_root!();
    let d = LoopDev::filled(16 * MIB, 0);
    let mut c = Command::new(BIN)
        .args(["blockdev-wipe", "-f", "/dev/stdin"])
        .arg(&d.path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut i = c.stdin.take().unwrap();
        i.write_all(&vec![7u8; MIB as usize]).unwrap();
    }
    let out = c.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "data source ended after {MIB} bytes; {} is {} bytes",
            std::fs::canonicalize(&d.path).unwrap().display(),
            16 * MIB
        )),
        "{err}"
    );
    assert!(!err.contains("errno 0"), "{err}");
}

#[test]
fn loop_cli_refusal_with_progress_json_prints_an_error_event_and_exits_2() {
    need_root!();
    let d = LoopDev::new(64 * MIB);
    let _m = Mounted::new(&d.path);
    let out = Command::new(BIN)
        .args(["wipe", "--yes", "--progress", "json"])
        .arg(&d.path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("refusing") && err.contains("mounted"), "{err}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    assert_eq!(lines[0]["event"], "error");
    assert_eq!(lines[0]["exit_code"], 2);
    assert!(lines[0]["message"].as_str().unwrap().contains("mounted"));
}

/// The loop devices `losetup` lists over `file` (`losetup -j`), one line each.
fn attached_over(file: &Path) -> String {
    support::loopdev::run("losetup", &["-j", file.to_str().unwrap()])
}

#[test]
fn loop_a_dropped_loop_device_guard_detaches_the_device() {
    need_root!();
    let d = LoopDev::filled(16 * MIB, 0x42);
    let file = d.file.clone();
    assert!(attached_over(&file).contains(d.path.to_str().unwrap()));
    drop(d);
    assert_eq!(
        attached_over(&file),
        "",
        "still attached over {}",
        file.display()
    );
}

/// A dm table left behind kept the loop device attached to a deleted
/// /var/tmp/mdpilot-wipe-*/disk.img after the run: the guard removes its table, and then the
/// loop device goes too.
#[test]
fn loop_a_dropped_dm_guard_removes_its_table_and_frees_the_loop_device() {
    need_root!();
    if !support::have("dmsetup", "dmsetup") {
        return;
    }
    let d = LoopDev::new(64 * MIB);
    let file = d.file.clone();
    if !support::loopdev::dm_in_kernel() {
        return support::kernel_lacks("device-mapper", "VM scenario 13-fault-target-vanishes");
    }
    let Some(dm) = DmLinear::new(&d.path, 64 * MIB / 512) else {
        skip!("device-mapper unavailable (modprobe dm_mod)");
    };
    let name = dm.name.clone();
    drop(dm);
    assert!(!DmLinear::exists(&name), "{name} left behind");
    drop(d);
    assert_eq!(
        attached_over(&file),
        "",
        "still attached over {}",
        file.display()
    );
}
