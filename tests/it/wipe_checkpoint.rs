//! A corrupt wipe checkpoint (a torn or edited file under the checkpoint directory) is kept
//! aside as `NAME.corrupt-<unix seconds>` with a warning naming both paths, and every front end
//! goes on as if there were none: `mdpilot wipe` with and without `--restart` (root: a loop
//! device the test attaches), and the service's auto-resume at start-up (one log line).

use crate::support;

use mdpilot::wipe::checkpoint;
use mdpilot::wipe::plan::{Method, Options};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::bus::name_owned;
use support::tree::job_root;
use support::{Bus, LoopDev, BIN, MIB};

/// The files in `dir` whose names start with `prefix`.
fn named(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .collect()
}

/// Garbage at the path of `dev`'s checkpoint in `dir`; returns that path.
fn garbage_checkpoint(dev: &Path, dir: &Path) -> PathBuf {
    let req = mdpilot::wipe::Request {
        device: dev.to_path_buf(),
        method: Method::Zero,
        options: Options {
            checkpoint_dir: Some(dir.to_path_buf()),
            ..Options::default()
        },
    };
    let plan = mdpilot::wipe::plan_for(&mdpilot::host::Root::system(), &req).unwrap();
    let path = plan.checkpoint.unwrap().path;
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(&path, b"{\"version\": 1, \"device\": tor").unwrap();
    path
}

#[test]
fn loop_cli_wipe_sets_a_corrupt_checkpoint_aside_with_and_without_restart() {
    need_root!();
    let d = LoopDev::filled(16 * MIB, 0x3c);
    for extra in [&["--restart"][..], &[][..]] {
        let state = tempfile::tempdir().unwrap();
        let path = garbage_checkpoint(&d.path, state.path());
        let o = Command::new(BIN)
            .arg("wipe")
            .arg(&d.path)
            .args(["--yes", "--progress", "none", "--state-dir"])
            .arg(state.path())
            .args(extra)
            .output()
            .unwrap();
        let err = support::stderr(&o);
        assert!(o.status.success(), "{extra:?}: {err}");
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let aside = named(state.path(), &format!("{name}.corrupt-"));
        assert_eq!(aside.len(), 1, "{extra:?}: {err}");
        assert!(
            err.contains(&*path.to_string_lossy()) && err.contains(&*aside[0].to_string_lossy()),
            "the warning names both paths ({extra:?}): {err}"
        );
        assert!(!path.exists(), "the completed job leaves no checkpoint");
        assert!(d.read_all().iter().all(|&b| b == 0), "{extra:?}");
        std::fs::write(&d.path, vec![0x3c; (16 * MIB) as usize]).unwrap();
    }
}

/// `mdpilot serve --bus ADDR --root ROOT` with its stderr lines collected.
struct Serve {
    child: std::process::Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serve {
    async fn start(bus: &Bus, root: &Path) -> Serve {
        let mut child = Command::new(BIN)
            .arg("serve")
            .arg("--bus")
            .arg(&bus.address)
            .arg("--root")
            .arg(root)
            .env_remove("NOTIFY_SOCKET")
            .env_remove("RUST_LOG")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let l = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[serve] {line}");
                l.lock().unwrap().push(line);
            }
        });
        let conn = bus.connect().await;
        let deadline = Instant::now() + Duration::from_secs(20);
        while !name_owned(&conn).await {
            assert!(child.try_wait().unwrap().is_none(), "serve exited early");
            assert!(Instant::now() < deadline, "serve did not own the name");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Serve { child, lines }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_start_sets_a_corrupt_checkpoint_aside_with_one_log_line() {
    let Some(bus) = Bus::start() else {
        return;
    };
    let root = job_root();
    let dir = root.path().join(checkpoint::DIR.trim_start_matches('/'));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("by-id_virtio-gone.json");
    std::fs::write(&path, b"\0\0\0 torn").unwrap();
    let svc = Serve::start(&bus, root.path()).await;
    let aside = named(&dir, "by-id_virtio-gone.json.corrupt-");
    assert_eq!(aside.len(), 1, "{:?}", named(&dir, ""));
    assert!(!path.exists());
    let lines = svc.lines.lock().unwrap().clone();
    let about: Vec<_> = lines
        .iter()
        .filter(|l| l.contains("by-id_virtio-gone.json"))
        .collect();
    assert_eq!(
        about.len(),
        1,
        "one line about the corrupt checkpoint: {lines:?}"
    );
    assert!(
        about[0].contains(&*aside[0].to_string_lossy()) && about[0].contains("corrupt"),
        "{about:?}"
    );
}
