//! Policy adapter and CLI on temporary roots (never the host's /proc/sys or /sys).

use crate::support;

use mdpilot::policy::knobs::{FsKnobs, KnobError, KnobIo};
use mdpilot::policy::{
    KnobId, LeaseKind, LeaseRequest, Limits, Owner, Policy, PolicyError, Setting, SpeedLimit,
};
use std::collections::BTreeMap;
use std::process::Command;
use support::loopdev::Tmpfs;
use support::{as_nobody, error_chain, global, have, stderr, stdout, FakeTree, BIN};

fn array(holder: &str, name: &str, min: Option<u64>, max: Option<u64>) -> LeaseRequest {
    LeaseRequest {
        holder: holder.into(),
        kind: LeaseKind::WipeJob,
        owner: Owner::None,
        global: Limits::default(),
        arrays: BTreeMap::from([(
            name.to_string(),
            Limits {
                min,
                max,
                io_depth: None,
            },
        )]),
    }
}

#[test]
fn round_trip_restores_originals_on_last_release() {
    let t = FakeTree::new();
    let p = t.policy();
    let v = p.acquire(global("installer", Some(0), None)).unwrap();
    assert_eq!(t.gmin(), "0");
    assert_eq!(v.speed_limit_min, Some(0));
    assert_eq!(v.originals.speed_limit_min, Some(1000));
    assert_eq!(v.leases.len(), 1);
    let text = std::fs::read_to_string(t.state_path()).unwrap();
    assert!(text.contains("[knob.original]\nkibs = 1000\n"), "{text}");
    let v = p.release("installer").unwrap();
    assert_eq!(t.gmin(), "1000");
    assert_eq!(t.gmax(), "200000");
    assert!(v.leases.is_empty());
    assert_eq!(v.originals.speed_limit_min, None);
    assert!(v.warnings.is_empty(), "{:?}", v.warnings);
}

#[test]
fn apply_twice_keeps_the_real_original() {
    let t = FakeTree::new();
    let p = t.policy();
    p.acquire(global("installer", Some(0), None)).unwrap();
    let v = p.acquire(global("installer", Some(0), None)).unwrap();
    assert_eq!(v.originals.speed_limit_min, Some(1000));
    // A second policy object (another process) sees the same.
    let v = t
        .policy()
        .acquire(global("installer", Some(0), None))
        .unwrap();
    assert_eq!(v.originals.speed_limit_min, Some(1000));
    p.restore(false).unwrap();
    assert_eq!(t.gmin(), "1000");
}

#[test]
fn two_leases_released_in_both_orders() {
    for (first, second) in [("a", "b"), ("b", "a")] {
        let t = FakeTree::new();
        let p = t.policy();
        p.acquire(global("a", Some(0), None)).unwrap();
        p.acquire(global("b", Some(500), Some(9000))).unwrap();
        assert_eq!((t.gmin(), t.gmax()), ("0".into(), "9000".into()));
        p.release(first).unwrap();
        if first == "a" {
            assert_eq!((t.gmin(), t.gmax()), ("500".into(), "9000".into()));
        } else {
            assert_eq!((t.gmin(), t.gmax()), ("0".into(), "200000".into()));
        }
        let v = p.release(second).unwrap();
        assert_eq!((t.gmin(), t.gmax()), ("1000".into(), "200000".into()));
        assert!(v.warnings.is_empty(), "{:?}", v.warnings);
        assert!(v.leases.is_empty());
    }
}

#[test]
fn per_array_lease_restores_system() {
    let t = FakeTree::new();
    let p = t.policy();
    // A per-array min of 0 is written as 1: the kernel rejects 0 with EINVAL.
    let v = p.acquire(array("job", "md0", Some(0), Some(777))).unwrap();
    assert_eq!(t.amin(), "1");
    assert_eq!(t.amax(), "777");
    assert_eq!(t.gmin(), "1000", "global untouched");
    let a = &v.arrays["md0"];
    assert_eq!(a.sync_speed_min, Some(SpeedLimit::local(1)));
    assert_eq!(
        a.original_min,
        Some(SpeedLimit {
            kib_s: 1000,
            system: true
        })
    );
    p.release("job").unwrap();
    assert_eq!(t.amin(), "system");
    assert_eq!(t.amax(), "system");
}

#[test]
fn per_array_local_original_is_written_back_as_number() {
    let t = FakeTree::new();
    t.set("/sys/block/md0/md/sync_speed_min", "3000 (local)\n");
    let p = t.policy();
    p.acquire(array("job", "md0", Some(5), None)).unwrap();
    assert_eq!(t.amin(), "5");
    p.restore(false).unwrap();
    assert_eq!(t.amin(), "3000");
}

#[test]
fn invalid_array_name_is_rejected_before_any_io() {
    let t = FakeTree::new();
    let e = t
        .policy()
        .acquire(array("x", "../../etc", Some(0), None))
        .unwrap_err();
    assert!(matches!(e, PolicyError::Invalid(_)), "{e}");
    assert!(!t.state_path().exists());
}

#[test]
fn admin_change_during_lease_is_left_and_reported() {
    let t = FakeTree::new();
    let p = t.policy();
    p.acquire(global("installer", Some(0), None)).unwrap();
    t.set("/proc/sys/dev/raid/speed_limit_min", "5000\n");
    let v = p.show().unwrap();
    assert!(
        v.warnings.iter().any(|w| w.contains("behind our back")),
        "{:?}",
        v.warnings
    );
    let v = p.restore(false).unwrap();
    assert_eq!(t.gmin(), "5000");
    assert!(v
        .warnings
        .contains(&"speed_limit_min changed behind our back: left at 5000".to_string()));
    // Still reported by a later show, until the next lease cycle starts.
    let v = p.show().unwrap();
    assert!(v.warnings.iter().any(|w| w.contains("left at 5000")));
    p.acquire(global("installer", Some(0), None)).unwrap();
    let v = p.show().unwrap();
    assert!(v.warnings.is_empty(), "{:?}", v.warnings);
}

#[test]
fn corrupt_state_is_moved_aside_and_only_defaults_restore_it() {
    let t = FakeTree::new();
    let p = t.policy();
    p.acquire(global("installer", Some(0), Some(10))).unwrap();
    std::fs::write(t.state_path(), "this is [not toml").unwrap();
    let e = p.restore(false).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("policy.toml is corrupt"), "{msg}");
    assert!(msg.contains("policy.toml.corrupt-"), "{msg}");
    // Replaced by a fresh state that records "originals unknown" (never a missing file).
    let text = std::fs::read_to_string(t.state_path()).unwrap();
    assert!(text.contains("originals_unknown = "), "{text}");
    let moved: Vec<_> = t
        .state_dir_names()
        .into_iter()
        .filter(|n| n.starts_with("policy.toml.corrupt-"))
        .collect();
    assert_eq!(moved.len(), 1);
    // Nothing guessed: the knobs keep our values.
    assert_eq!((t.gmin(), t.gmax()), ("0".into(), "10".into()));
    // Defaults when asked.
    std::fs::write(t.state_path(), "version = 1\n[[knob]]\nknob = 3\n").unwrap();
    t.set("/sys/block/md0/md/sync_speed_min", "1 (local)\n");
    let v = p.restore(true).unwrap();
    assert_eq!(t.amin(), "system");
    // Odd content in a per-array file does not stop the defaults either.
    t.set("/sys/block/md0/md/sync_speed_min", "???\n");
    t.set("/proc/sys/dev/raid/speed_limit_min", "0\n");
    p.restore(true).unwrap();
    assert_eq!((t.gmin(), t.gmax()), ("1000".into(), "200000".into()));
    assert_eq!(t.amin(), "system");
    assert_eq!(t.amax(), "200000 (system)", "already system: not written");
    assert!(v.warnings.iter().any(|w| w.contains("corrupt")));
}

#[test]
fn missing_state_file_means_nothing_to_restore() {
    let t = FakeTree::new();
    t.set("/proc/sys/dev/raid/speed_limit_min", "0\n");
    let v = t.policy().restore(false).unwrap();
    assert_eq!(t.gmin(), "0", "no state: nothing to guess from");
    assert!(v.leases.is_empty());
    // Losing the state file mid-lease: restore does nothing, defaults fix it.
    let p = t.policy();
    t.set("/proc/sys/dev/raid/speed_limit_min", "1000\n");
    p.acquire(global("i", Some(0), None)).unwrap();
    std::fs::remove_file(t.state_path()).unwrap();
    p.restore(false).unwrap();
    assert_eq!(t.gmin(), "0");
    p.restore(true).unwrap();
    assert_eq!(t.gmin(), "1000");
}

#[test]
fn missing_or_non_numeric_knob_writes_nothing() {
    let t = FakeTree::new();
    std::fs::remove_file(t.path("/proc/sys/dev/raid/speed_limit_max")).unwrap();
    let p = t.policy();
    let e = p.acquire(global("i", Some(0), Some(5))).unwrap_err();
    let msg = error_chain(&e);
    assert!(msg.contains("speed_limit_max does not exist"), "{msg}");
    assert_eq!(t.gmin(), "1000");
    assert!(!t.state_path().exists());
    assert!(!t.path("/proc/sys/dev/raid/speed_limit_max").exists());

    let t = FakeTree::new();
    t.set("/proc/sys/dev/raid/speed_limit_min", "fast\n");
    let e = t.policy().acquire(global("i", Some(0), None)).unwrap_err();
    let msg = error_chain(&e);
    assert!(
        msg.contains("speed_limit_min holds \"fast\", not a speed limit"),
        "{msg}"
    );
    assert_eq!(t.gmin(), "fast");
    assert!(!t.state_path().exists());

    let t = FakeTree::new();
    let e = t
        .policy()
        .acquire(array("j", "md9", Some(0), None))
        .unwrap_err();
    assert!(error_chain(&e).contains("/sys/block/md9/md/sync_speed_min does not exist"));
}

/// Real knobs whose writes to one knob fail with EACCES, as for a non-root caller (root ignores
/// permission bits, so chmod cannot produce this in a test).
struct FailingWrites {
    inner: FsKnobs,
    fail: KnobId,
}

impl KnobIo for FailingWrites {
    fn read(&self, knob: &KnobId) -> Result<SpeedLimit, KnobError> {
        self.inner.read(knob)
    }
    fn write(&self, knob: &KnobId, setting: Setting) -> Result<(), KnobError> {
        if *knob == self.fail {
            return Err(KnobError::Write {
                path: self.inner.path(knob),
                value: setting.to_text(),
                source: std::io::Error::from_raw_os_error(libc::EACCES),
            });
        }
        self.inner.write(knob, setting)
    }
    fn arrays(&self) -> Vec<String> {
        self.inner.arrays()
    }
}

#[test]
fn failed_write_undoes_earlier_writes_and_keeps_state() {
    let t = FakeTree::new();
    let failing = || {
        Policy::with_io(
            t.settings(),
            Box::new(FailingWrites {
                inner: FsKnobs::new(t.root()),
                fail: KnobId::Global(mdpilot::policy::Bound::Max),
            }),
        )
    };
    // No state yet: min is written first, max fails; min is undone and no state file remains.
    let e = failing()
        .acquire(global("i", Some(0), Some(5)))
        .unwrap_err();
    let msg = error_chain(&e);
    assert!(msg.contains("earlier writes undone"), "{msg}");
    assert!(msg.contains("speed_limit_max"), "{msg}");
    assert!(msg.contains("Permission denied"), "{msg}");
    assert_eq!((t.gmin(), t.gmax()), ("1000".into(), "200000".into()));
    assert!(!t.state_path().exists());
    // With a state file: it is byte-for-byte unchanged.
    t.policy()
        .acquire(array("job", "md0", Some(1), None))
        .unwrap();
    let before = std::fs::read(t.state_path()).unwrap();
    failing()
        .acquire(global("i", Some(0), Some(5)))
        .unwrap_err();
    assert_eq!(std::fs::read(t.state_path()).unwrap(), before);
    assert_eq!((t.gmin(), t.gmax()), ("1000".into(), "200000".into()));
    assert_eq!(t.amin(), "1");
}

#[test]
fn knob_that_cannot_be_opened_names_the_file_and_keeps_state() {
    // A directory where the knob should be: opening it for writing fails even for root.
    let t = FakeTree::new();
    let p = t.policy();
    p.acquire(global("i", Some(0), None)).unwrap();
    let before = std::fs::read(t.state_path()).unwrap();
    let f = t.path("/proc/sys/dev/raid/speed_limit_max");
    std::fs::remove_file(&f).unwrap();
    std::fs::create_dir(&f).unwrap();
    let e = p.acquire(global("j", None, Some(5))).unwrap_err();
    assert!(error_chain(&e).contains("speed_limit_max"));
    assert_eq!(std::fs::read(t.state_path()).unwrap(), before);
}

#[test]
fn unwritable_state_dir_writes_nothing() {
    let t = FakeTree::new();
    // A file where the state directory should be: the state cannot be saved, so no knob moves.
    std::fs::create_dir_all(t.path("/run")).unwrap();
    std::fs::write(t.path("/run/mdpilot"), "").unwrap();
    let e = t.policy().acquire(global("i", Some(0), None)).unwrap_err();
    assert!(error_chain(&e).contains("run/mdpilot"), "{e}");
    assert_eq!(t.gmin(), "1000");
}

#[test]
fn loop_readonly_proc_sys_mount() {
    need_root!("to mount a tmpfs");
    let t = FakeTree::new();
    let dir = t.path("/proc/sys/dev/raid");
    let Some(_m) = Tmpfs::mount(&dir, "64k") else {
        skip!("cannot mount tmpfs here");
    };
    t.set("/proc/sys/dev/raid/speed_limit_min", "1000\n");
    t.set("/proc/sys/dev/raid/speed_limit_max", "200000\n");
    let remount = Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(&dir)
        .status()
        .unwrap();
    assert!(remount.success());
    let p = t.policy();
    p.acquire(array("job", "md0", Some(1), None)).unwrap();
    let before = std::fs::read(t.state_path()).unwrap();
    let e = p.acquire(global("i", Some(0), None)).unwrap_err();
    let msg = error_chain(&e);
    assert!(msg.contains("speed_limit_min"), "{msg}");
    assert!(msg.contains("Read-only file system"), "{msg}");
    assert_eq!(std::fs::read(t.state_path()).unwrap(), before);
    assert_eq!(t.gmin(), "1000");
}

#[test]
fn reap_drops_dead_owners_and_restores_when_none_left() {
    let t = FakeTree::new();
    let p = t.policy();
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let mut l = global("dead", Some(0), None);
    l.owner = Owner::Pid(dead);
    p.acquire(l).unwrap();
    let mut l = global("me", Some(10), None);
    l.owner = Owner::Pid(std::process::id());
    p.acquire(l).unwrap();
    let mut l = global(":1.9", None, Some(50));
    l.owner = Owner::BusName(":1.9".into());
    p.acquire(l).unwrap();
    assert_eq!((t.gmin(), t.gmax()), ("0".into(), "50".into()));
    // The CLI's view of liveness: dead pid dropped, bus name kept.
    let v = p.reap(&mdpilot::policy::cli_alive).unwrap();
    let holders: Vec<_> = v.leases.iter().map(|l| l.holder.as_str()).collect();
    assert_eq!(holders, vec![":1.9", "me"]);
    assert_eq!((t.gmin(), t.gmax()), ("10".into(), "50".into()));
    // The service's view: the bus name is gone too.
    p.reap(&|o| !matches!(o, Owner::BusName(_)) && mdpilot::policy::cli_alive(o))
        .unwrap();
    assert_eq!(t.gmax(), "200000");
    p.reap(&|_| false).unwrap();
    assert_eq!((t.gmin(), t.gmax()), ("1000".into(), "200000".into()));
    assert!(!mdpilot::host::pid_alive(dead));
    assert!(!mdpilot::host::pid_alive(0));
}

#[test]
fn release_of_unknown_holder_is_a_warning() {
    let t = FakeTree::new();
    let v = t.policy().release("nobody").unwrap();
    assert!(v.warnings.iter().any(|w| w.contains("held no lease")));
}

#[test]
fn stopped_array_is_dropped_on_restore() {
    let t = FakeTree::new();
    let p = t.policy();
    p.acquire(array("job", "md0", Some(1), None)).unwrap();
    std::fs::remove_dir_all(t.path("/sys/block/md0")).unwrap();
    let v = p.restore(false).unwrap();
    assert!(v.warnings.iter().any(|w| w.contains("is gone")), "{v:?}");
    assert!(p.show().unwrap().leases.is_empty());
}

// ---- the CLI binary ----

fn cli(t: &FakeTree, args: &[&str]) -> (i32, String, String) {
    let out = t.policy_cmd().args(args).output().unwrap();
    (out.status.code().unwrap_or(-1), stdout(&out), stderr(&out))
}

#[test]
fn cli_apply_show_release_restore() {
    let t = FakeTree::new();
    let (code, out, err) = cli(&t, &["apply"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("speed_limit_min: 0 KiB/s (original 1000)"),
        "{out}"
    );
    assert!(
        out.contains("installer: kind installer, owner none"),
        "{out}"
    );
    assert_eq!(t.gmin(), "0");
    let (code, out, _) = cli(&t, &["show", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["speed_limit_min"], 0);
    assert_eq!(v["originals"]["speed_limit_min"], 1000);
    assert_eq!(v["leases"][0]["holder"], "installer");
    assert_eq!(v["leases"][0]["owner"], "none");
    let (code, _, err) = cli(
        &t,
        &[
            "apply", "--array", "md0", "--min", "0", "--holder", "job", "--kind", "wipe-job",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(t.amin(), "1");
    let (code, out, _) = cli(&t, &["show"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("md0: sync_speed_min 1 (original 1000 (system))"),
        "{out}"
    );
    let (code, _, _) = cli(&t, &["release", "--holder", "installer"]);
    assert_eq!(code, 0);
    assert_eq!(t.gmin(), "1000");
    assert_eq!(t.amin(), "1");
    let (code, out, _) = cli(&t, &["restore"]);
    assert_eq!(code, 0);
    assert!(out.contains("leases: none"), "{out}");
    assert_eq!(t.amin(), "system");
}

#[test]
fn cli_pid_lease_is_reaped_by_the_next_command() {
    let t = FakeTree::new();
    let mut child = Command::new("sleep").arg("60").spawn().unwrap();
    let pid = child.id().to_string();
    let (code, _, err) = cli(&t, &["apply", "--pid", &pid, "--holder", "short"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(t.gmin(), "0");
    child.kill().unwrap();
    child.wait().unwrap();
    // show marks it, and changes nothing.
    let (code, out, _) = cli(&t, &["show"]);
    assert_eq!(code, 0);
    assert!(
        out.contains(&format!("owner pid {pid} (dead: will be dropped)")),
        "{out}"
    );
    let (_, out, _) = cli(&t, &["show", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["leases"][0]["dead"], true);
    assert_eq!(t.gmin(), "0");
    let (code, _, _) = cli(&t, &["release", "--holder", "other"]);
    assert_eq!(code, 0);
    assert_eq!(t.gmin(), "1000");
}

#[test]
fn cli_config_drop_in_sets_install_min_and_state_path() {
    let t = FakeTree::new();
    let d = t.path("/etc/mdpilot/config.d");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("50-test.toml"),
        "[policy]\ninstall_min = 7\ninstall_max = 99\nstate_path = \"/run/other/state.toml\"\n",
    )
    .unwrap();
    let (code, _, err) = cli(&t, &["apply"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!((t.gmin(), t.gmax()), ("7".into(), "99".into()));
    assert!(t.path("/run/other/state.toml").exists());
    std::fs::write(d.join("50-test.toml"), "[policy]\ninstal_min = 7\n").unwrap();
    let (code, _, err) = cli(&t, &["show"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("50-test.toml") && err.contains("instal_min"),
        "{err}"
    );
}

#[test]
fn cli_errors_exit_1_and_name_the_file() {
    let t = FakeTree::new();
    std::fs::remove_file(t.path("/proc/sys/dev/raid/speed_limit_min")).unwrap();
    let (code, _, err) = cli(&t, &["apply"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("speed_limit_min does not exist (md driver not loaded?)"),
        "{err}"
    );
    assert!(!err.contains("no such array"), "{err}");
    let (code, _, err) = cli(&t, &["apply", "--array", "sda"]);
    assert_eq!(code, 1);
    assert!(err.contains("invalid array name"), "{err}");
}

/// Runs `mdpilot policy ARGS` on `t` as the unprivileged user nobody (setpriv).
fn cli_as_nobody(t: &FakeTree, args: &[&str]) -> (i32, String) {
    let out = t.policy_cmd_of(as_nobody(BIN)).args(args).output().unwrap();
    (out.status.code().unwrap_or(-1), stderr(&out))
}

#[test]
fn loop_not_root_names_the_file_and_changes_nothing() {
    use std::os::unix::fs::PermissionsExt;
    need_root!("to switch to nobody");
    if !have("setpriv", "util-linux") {
        return;
    }
    let t = FakeTree::new();
    // nobody may traverse the tree and read the knobs (0644, owned by root), not write them.
    std::fs::set_permissions(t.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    t.policy()
        .acquire(array("job", "md0", Some(5), None))
        .unwrap();
    let state = t.state_path();
    let before = std::fs::read(&state).unwrap();

    // (a) The state directory is root's: the state cannot be saved, so no knob is written.
    let (code, err) = cli_as_nobody(&t, &["apply"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("run/mdpilot/policy.toml"), "{err}");
    assert!(err.contains("Permission denied"), "{err}");
    assert_eq!(t.gmin(), "1000");
    assert_eq!(std::fs::read(&state).unwrap(), before);

    // (b) The state directory is writable but the knobs are not: the kernel write fails, the
    // state file is put back as it was.
    let dir = state.parent().unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::set_permissions(
        mdpilot::policy::state::sibling(&state, ".lock"),
        std::fs::Permissions::from_mode(0o666),
    )
    .unwrap();
    let (code, err) = cli_as_nobody(&t, &["apply", "--min", "0", "--max", "5"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("speed_limit_m"), "{err}");
    assert!(err.contains("earlier writes undone"), "{err}");
    assert_eq!((t.gmin(), t.gmax()), ("1000".into(), "200000".into()));
    assert_eq!(std::fs::read(&state).unwrap(), before);
    assert_eq!(t.amin(), "5");
}

#[test]
fn corrupt_state_never_captures_our_value_as_original() {
    let t = FakeTree::new();
    let p = t.policy();
    p.acquire(global("installer", Some(0), None)).unwrap();
    std::fs::write(t.state_path(), "this is [not toml").unwrap();
    // The operation that finds the corruption reports it, on one line.
    let e = p.acquire(global("installer", Some(0), None)).unwrap_err();
    let msg = error_chain(&e);
    assert!(msg.contains("is corrupt") && !msg.contains('\n'), "{msg}");
    let moved = t
        .state_dir_names()
        .into_iter()
        .find(|n| n.starts_with("policy.toml.corrupt-"))
        .unwrap();
    // The next apply takes the lease but captures no original (the kernel holds our own 0).
    let v = p.acquire(global("installer", Some(0), None)).unwrap();
    assert_eq!(v.originals.speed_limit_min, None);
    assert!(
        v.warnings
            .iter()
            .any(|w| w.contains("originals unknown") && w.contains(&moved)),
        "{:?}",
        v.warnings
    );
    assert_eq!(t.gmin(), "0");
    assert!(v
        .originals_unknown
        .as_deref()
        .is_some_and(|m| m.ends_with(&moved)));
    let (_, out, _) = cli(&t, &["show"]);
    assert!(
        out.contains("speed_limit_min: 0 KiB/s (original unknown)"),
        "{out}"
    );
    // Last release: the value is left, with the warning naming the fix.
    let v = p.release("installer").unwrap();
    assert_eq!(t.gmin(), "0", "never write a guessed original");
    let want = format!(
        "originals unknown (state file was corrupt, moved to {}): run `mdpilot policy restore --defaults`",
        t.state_path().parent().unwrap().join(&moved).display()
    );
    assert!(v.warnings.contains(&want), "{:?}", v.warnings);
    // A new cycle, reap and plain restore do not forget it either.
    p.acquire(global("again", Some(3), None)).unwrap();
    p.reap(&|_| false).unwrap();
    assert_eq!(t.gmin(), "3");
    p.restore(false).unwrap();
    assert!(p.show().unwrap().warnings.contains(&want));
    // Only restore --defaults clears it; then originals are captured again.
    let v = p.restore(true).unwrap();
    assert_eq!(t.gmin(), "1000");
    assert!(
        !v.warnings.iter().any(|w| w.contains("originals unknown")),
        "{:?}",
        v.warnings
    );
    let v = p.acquire(global("installer", Some(0), None)).unwrap();
    assert_eq!(v.originals.speed_limit_min, Some(1000));
    p.release("installer").unwrap();
    assert_eq!(t.gmin(), "1000");
}

#[test]
fn show_is_read_only() {
    let t = FakeTree::new();
    // No state dir: show creates neither the dir nor the lock file.
    let (code, out, err) = cli(&t, &["show"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("leases: none"), "{out}");
    assert!(!t.state_path().parent().unwrap().exists());
    // A corrupt state file is reported, not moved.
    std::fs::create_dir_all(t.state_path().parent().unwrap()).unwrap();
    std::fs::write(t.state_path(), "this is [not toml").unwrap();
    let (code, _, err) = cli(&t, &["show"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("is corrupt") && err.contains("restore --defaults"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert_eq!(t.state_dir_names(), vec!["policy.toml".to_string()]);
    assert_eq!(
        std::fs::read_to_string(t.state_path()).unwrap(),
        "this is [not toml"
    );
}

#[test]
fn last_release_after_admin_change_leaves_it_like_restore() {
    let t = FakeTree::new();
    let (code, _, err) = cli(&t, &["apply"]);
    assert_eq!(code, 0, "{err}");
    t.set("/proc/sys/dev/raid/speed_limit_min", "5000\n");
    let (code, out, err) = cli(&t, &["release", "--holder", "installer"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(t.gmin(), "5000");
    assert!(
        out.contains("warning: speed_limit_min changed behind our back: left at 5000"),
        "{out}"
    );
    assert!(!out.contains("write back"), "{out}");
    assert!(!err.contains("write back"), "{err}");
    let (_, out, _) = cli(&t, &["show"]);
    assert!(!out.contains("write back"), "{out}");
}

#[test]
fn stale_write_back_warning_is_gone_after_restore() {
    let t = FakeTree::new();
    let p = t.policy();
    p.acquire(global("installer", Some(0), None)).unwrap();
    t.set("/proc/sys/dev/raid/speed_limit_min", "5000\n");
    // Re-applied while leased: the admin's value becomes the one to write back (true now).
    let v = p.acquire(global("installer", Some(0), None)).unwrap();
    assert!(v.warnings.iter().any(|w| w.contains("write back")));
    let v = p.restore(false).unwrap();
    assert_eq!(t.gmin(), "5000");
    assert!(!v.warnings.iter().any(|w| w.contains("write back")));
    let v = p.show().unwrap();
    assert!(
        !v.warnings.iter().any(|w| w.contains("write back")),
        "{:?}",
        v.warnings
    );
}

#[test]
fn per_array_max_zero_is_written_as_one() {
    let t = FakeTree::new();
    let (code, _, err) = cli(&t, &["apply", "--array", "md0", "--max", "0"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(t.amax(), "1");
    let (code, _, _) = cli(&t, &["restore"]);
    assert_eq!(code, 0);
    assert_eq!(t.amax(), "system");
}

#[test]
fn cli_rejects_dead_pid_and_min_above_max() {
    let t = FakeTree::new();
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id().to_string();
    child.wait().unwrap();
    let (code, _, err) = cli(&t, &["apply", "--pid", &dead]);
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!("--pid {dead}: no such process")),
        "{err}"
    );
    let (code, _, err) = cli(&t, &["apply", "--min", "10", "--max", "5"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("invalid argument: min 10 KiB/s is above max 5 KiB/s"),
        "{err}"
    );
    assert_eq!((t.gmin(), t.gmax()), ("1000".into(), "200000".into()));
    assert!(!t.state_path().exists());
}

#[test]
fn cli_array_accepts_dev_path() {
    let t = FakeTree::new();
    let (code, out, err) = cli(&t, &["apply", "--array", "/dev/md0", "--min", "5"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(t.amin(), "5");
    assert!(out.contains("md0: sync_speed_min 5"), "{out}");
}

/// A boost lease on a 6.16+ kernel (as 7.3 reads): `sync_io_depth` global and per array is saved
/// before the first write, leased, shown with its original, restored on release (the array back
/// to `system`) and by `restore --defaults` (32 and `system`).
#[test]
fn sync_io_depth_is_saved_leased_and_restored() {
    let t = FakeTree::with_io_depth();
    let p = t.policy();
    let mut req = global("boost", Some(50_000), None);
    req.global.io_depth = Some(128);
    req.arrays.insert(
        "md0".into(),
        Limits {
            io_depth: Some(256),
            ..Limits::default()
        },
    );
    let v = p.acquire(req).unwrap();
    assert_eq!((t.gdepth(), t.adepth()), ("128".into(), "256".into()));
    assert_eq!(v.sync_io_depth, Some(128));
    assert_eq!(v.originals.sync_io_depth, Some(32));
    let system32 = SpeedLimit {
        kib_s: 32,
        system: true,
    };
    assert_eq!(v.arrays["md0"].original_io_depth, Some(system32));
    let text = std::fs::read_to_string(t.state_path()).unwrap();
    assert!(text.contains("md0/sync_io_depth"), "{text}");
    // A quiet lease beside it wins while it lives.
    let mut quiet = global("quiet", None, Some(5000));
    quiet.global.io_depth = Some(0);
    p.acquire(quiet).unwrap();
    assert_eq!(t.gdepth(), "1", "0 is written as 1");
    p.release("quiet").unwrap();
    assert_eq!(t.gdepth(), "128");
    let v = p.release("boost").unwrap();
    t.settle();
    assert_eq!(
        (t.gdepth(), t.adepth()),
        ("32".into(), "32 (system)".into())
    );
    assert!(v.warnings.is_empty(), "{:?}", v.warnings);
    // restore --defaults puts the kernel's 32 and `system` back over anything.
    t.set("/proc/sys/dev/raid/sync_io_depth", "7\n");
    t.set("/sys/block/md0/md/sync_io_depth", "9 (local)\n");
    p.restore(true).unwrap();
    t.settle();
    assert_eq!(
        (t.gdepth(), t.adepth()),
        ("32".into(), "32 (system)".into())
    );
}

/// On a kernel without `sync_io_depth` (6.1, 6.12) a lease that asks for it applies the rest,
/// never creates the file, warns nothing, and restores as usual.
#[test]
fn sync_io_depth_absent_is_never_written_nor_an_error() {
    let t = FakeTree::new();
    let p = t.policy();
    let mut req = global("boost", Some(50_000), None);
    req.global.io_depth = Some(128);
    req.arrays.insert(
        "md0".into(),
        Limits {
            io_depth: Some(128),
            ..Limits::default()
        },
    );
    let v = p.acquire(req).unwrap();
    assert_eq!(t.gmin(), "50000");
    assert_eq!(v.sync_io_depth, None);
    assert!(v.warnings.is_empty(), "{:?}", v.warnings);
    assert_eq!((t.gdepth(), t.adepth()), (String::new(), String::new()));
    let v = p.release("boost").unwrap();
    assert_eq!(t.gmin(), "1000");
    assert!(v.warnings.is_empty(), "{:?}", v.warnings);
    p.restore(true).unwrap();
    assert_eq!((t.gdepth(), t.adepth()), (String::new(), String::new()));
}

/// `policy apply --io-depth` and `policy show` on the command line: text and JSON.
#[test]
fn cli_io_depth_apply_and_show() {
    let t = FakeTree::with_io_depth();
    let o = t
        .policy_cmd()
        .args(["apply", "--io-depth", "64", "--holder", "b"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("sync_io_depth: 64 (original 32)"), "{text}");
    assert!(
        text.contains("b: kind installer") && text.contains("io_depth 64"),
        "{text}"
    );
    let o = t.policy_cmd().args(["show", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["sync_io_depth"], 64);
    assert_eq!(v["originals"]["sync_io_depth"], 32);
    assert_eq!(v["leases"][0]["global"]["io_depth"], 64);
    let o = t.policy_cmd().args(["restore"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(t.gdepth(), "32");
    // Without the knob, show has no sync_io_depth line.
    let old = FakeTree::new();
    let o = old.policy_cmd().args(["show"]).output().unwrap();
    assert!(!stdout(&o).contains("sync_io_depth"), "{}", stdout(&o));
}
