//! The journal of array changes (freezes) on temporary roots: recorded before the write, undone
//! by the next command when the owner is dead, UUID-aware, never touching a foreign freeze.

use crate::support;

use mdpilot::policy::journal::{ArrayRef, Change};
use mdpilot::policy::{state, Owner};
use support::{stdout, FakeTree};

const U1: &str = "3b6c2a6e-0d0e-4b7a-9d5e-8a7b1c2d3e4f";
const U2: &str = "9f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b";

fn md(t: &FakeTree, name: &str, uuid: &str, action: &str) {
    std::fs::create_dir_all(t.root().sys(format!("block/{name}/md"))).unwrap();
    t.set(&format!("/sys/block/{name}/md/uuid"), &format!("{uuid}\n"));
    t.set(
        &format!("/sys/block/{name}/md/sync_action"),
        &format!("{action}\n"),
    );
    t.set(&format!("/sys/block/{name}/md/resync_start"), "1024\n");
}

fn action(t: &FakeTree, name: &str) -> String {
    t.get(&format!("/sys/block/{name}/md/sync_action"))
}

/// A pid that no longer exists (a child that exited and was reaped).
fn dead_pid() -> u32 {
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

fn freeze_of(name: &str, uuid: Option<&str>, owner: Owner) -> Change {
    Change::freeze(
        ArrayRef {
            name: name.into(),
            uuid: uuid.map(Into::into),
        },
        owner,
    )
}

#[test]
fn freeze_is_recorded_with_uuid_and_let_go_marks_in_sync() {
    let t = FakeTree::new();
    md(&t, "md0", U1, "resync");
    let p = t.policy();
    assert!(p
        .hold(freeze_of("md0", None, Owner::Pid(std::process::id())))
        .unwrap());
    assert_eq!(action(&t, "md0"), "frozen");
    let st = state::read(&t.state_path()).unwrap();
    let c = &st.changes["freeze:md0"];
    assert_eq!(c.array.uuid.as_deref(), Some(U1));
    assert_eq!((c.written.as_str(), c.restore.as_str()), ("frozen", "idle"));
    // Shown by policy show.
    let v = p.show().unwrap();
    assert_eq!(v.changes.len(), 1);
    assert!(v.warnings.is_empty(), "{:?}", v.warnings);
    p.let_go("freeze:md0", Some(("resync_start", "none")))
        .unwrap();
    assert_eq!(action(&t, "md0"), "idle");
    assert_eq!(t.get("/sys/block/md0/md/resync_start"), "none");
    assert!(state::read(&t.state_path()).unwrap().changes.is_empty());
}

#[test]
fn crash_after_record_before_or_after_write_is_repaired_by_the_next_command() {
    for written in [false, true] {
        let t = FakeTree::new();
        md(&t, "md0", U1, "resync");
        let p = t.policy();
        // The journal entry of a process that died (SIGKILL) right after recording, with or
        // without its write having landed.
        p.hold(freeze_of("md0", None, Owner::Pid(dead_pid())))
            .unwrap();
        if !written {
            t.set("/sys/block/md0/md/sync_action", "resync\n");
        }
        // Any locked command repairs: here `policy apply` through the CLI.
        let o = t
            .policy_cmd()
            .args(["apply", "--holder", "x", "--min", "5"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", support::describe(&o));
        let want = if written { "idle" } else { "resync" };
        assert_eq!(action(&t, "md0"), want, "written={written}");
        assert!(state::read(&t.state_path()).unwrap().changes.is_empty());
        assert_eq!(
            t.get("/sys/block/md0/md/resync_start"),
            "1024",
            "never none"
        );
        if written {
            assert!(
                support::stderr(&o).contains("undoing sync_action of frozen"),
                "{}",
                support::stderr(&o)
            );
        }
    }
}

#[test]
fn live_owner_is_kept_and_restore_undoes_all() {
    let t = FakeTree::new();
    md(&t, "md0", U1, "resync");
    let p = t.policy();
    p.hold(freeze_of("md0", None, Owner::Pid(std::process::id())))
        .unwrap();
    p.reap(&mdpilot::policy::cli_alive).unwrap();
    assert_eq!(action(&t, "md0"), "frozen", "owner alive: kept");
    let o = t.policy_cmd().arg("restore").output().unwrap();
    assert!(o.status.success(), "{}", support::describe(&o));
    assert_eq!(action(&t, "md0"), "idle");
    assert!(state::read(&t.state_path()).unwrap().changes.is_empty());
}

#[test]
fn another_array_with_the_same_name_is_not_touched() {
    let t = FakeTree::new();
    md(&t, "md0", U1, "resync");
    let p = t.policy();
    p.hold(freeze_of("md0", None, Owner::Pid(dead_pid())))
        .unwrap();
    // md0 was stopped and another array was assembled as md0, frozen by someone else.
    md(&t, "md0", U2, "frozen");
    p.restore(false).unwrap();
    assert_eq!(action(&t, "md0"), "frozen");
    assert!(state::read(&t.state_path()).unwrap().changes.is_empty());
    let v = p.show().unwrap();
    assert!(
        v.warnings
            .iter()
            .any(|w| w.contains("md0: sync_action is frozen, not by mdpilot")),
        "{:?}",
        v.warnings
    );
}

#[test]
fn renumbered_array_is_found_by_uuid() {
    let t = FakeTree::new();
    md(&t, "md0", U1, "resync");
    let p = t.policy();
    p.hold(freeze_of("md0", None, Owner::Pid(dead_pid())))
        .unwrap();
    // Stopped and assembled again as md127 (still frozen: our freeze).
    std::fs::rename(t.root().sys("block/md0"), t.root().sys("block/md127")).unwrap();
    p.restore(false).unwrap();
    assert_eq!(action(&t, "md127"), "idle");
}

#[test]
fn foreign_freeze_is_left_alone_with_a_warning() {
    let t = FakeTree::new();
    md(&t, "md0", U1, "frozen");
    let p = t.policy();
    // Our own freeze of an already frozen array is refused (not ours to unfreeze later).
    assert!(!p
        .hold(freeze_of("md0", None, Owner::Pid(std::process::id())))
        .unwrap());
    assert!(state::read(&t.state_path()).unwrap().changes.is_empty());
    p.restore(false).unwrap();
    assert_eq!(action(&t, "md0"), "frozen");
    let o = t.policy_cmd().arg("show").output().unwrap();
    assert!(
        stdout(&o).contains("warning: md0: sync_action is frozen, not by mdpilot; left alone"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn old_state_files_without_journal_still_parse() {
    let t = FakeTree::new();
    std::fs::create_dir_all(t.state_path().parent().unwrap()).unwrap();
    std::fs::write(
        t.state_path(),
        "version = 1\nwarnings = []\n\n[[lease]]\nholder = \"installer\"\nkind = \"installer\"\nowner = \"none\"\n[lease.global]\nmin = 0\n\n[[knob]]\nknob = \"md0/sync_speed_min\"\nwritten = 1\n[knob.original]\nkibs = 1000\nsystem = true\n",
    )
    .unwrap();
    let st = state::read(&t.state_path()).unwrap();
    assert!(st.changes.is_empty());
    assert_eq!(st.leases.len(), 1);
}

#[test]
fn status_warns_about_a_foreign_freeze_only() {
    let t = FakeTree::new();
    md(&t, "md0", U1, "frozen");
    std::fs::write(
        t.path("/proc/mdstat"),
        "Personalities : [raid1]\nmd0 : active raid1 vdb[1] vda[0]\n      523264 blocks super 1.2 [2/2] [UU]\n\nunused devices: <none>\n",
    )
    .unwrap();
    let status = |json: bool| {
        let mut c = std::process::Command::new(support::BIN);
        c.arg("--root").arg(t.dir.path()).arg("status");
        if json {
            c.arg("--json");
        }
        c.output().unwrap()
    };
    let o = status(true);
    assert!(o.status.success(), "{}", support::describe(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // Only the freeze warning is looked at (the array also lacks a write-intent bitmap).
    let frozen = |v: &serde_json::Value| -> Vec<String> {
        v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|w| w.as_str())
            .filter(|w| w.contains("frozen"))
            .map(str::to_string)
            .collect()
    };
    let w = frozen(&v);
    assert_eq!(w.len(), 1, "{v}");
    assert!(w[0].starts_with("md0: sync_action is frozen, not by mdpilot"));
    assert!(stdout(&status(false)).contains("Warning: md0: sync_action is frozen"));
    // Our own (journaled) freeze is not a warning.
    md(&t, "md0", U1, "resync");
    t.policy()
        .hold(freeze_of("md0", None, Owner::Pid(std::process::id())))
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&status(true).stdout).unwrap();
    assert!(frozen(&v).is_empty(), "{v}");
}

#[test]
fn per_array_limits_of_a_replaced_array_are_not_written_back() {
    let t = FakeTree::new();
    md(&t, "md0", U1, "idle");
    let p = t.policy();
    let req = mdpilot::policy::LeaseRequest {
        holder: "w".into(),
        kind: mdpilot::policy::LeaseKind::WipeJob,
        owner: Owner::None,
        global: mdpilot::policy::Limits::default(),
        arrays: [(
            "md0".to_string(),
            mdpilot::policy::Limits {
                min: Some(5),
                max: None,
                io_depth: None,
            },
        )]
        .into(),
    };
    p.acquire(req).unwrap();
    assert_eq!(t.amin(), "5");
    let text = std::fs::read_to_string(t.state_path()).unwrap();
    assert!(text.contains(&format!("uuid = \"{U1}\"")), "{text}");
    // md0 stopped; another array assembled as md0 with its own limit.
    md(&t, "md0", U2, "idle");
    t.set("/sys/block/md0/md/sync_speed_min", "5 (local)\n");
    let v = p.release("w").unwrap();
    assert_eq!(t.amin(), "5 (local)", "the other array's knob was written");
    assert!(
        v.warnings.iter().any(|w| w.contains("is gone")),
        "{:?}",
        v.warnings
    );
    // The same array again (same UUID) is restored as usual.
    md(&t, "md0", U1, "idle");
    t.set("/sys/block/md0/md/sync_speed_min", "1000 (system)\n");
    p.acquire(mdpilot::policy::LeaseRequest {
        holder: "w".into(),
        kind: mdpilot::policy::LeaseKind::WipeJob,
        owner: Owner::None,
        global: mdpilot::policy::Limits::default(),
        arrays: [(
            "md0".to_string(),
            mdpilot::policy::Limits {
                min: Some(5),
                max: None,
                io_depth: None,
            },
        )]
        .into(),
    })
    .unwrap();
    p.release("w").unwrap();
    assert_eq!(t.amin(), "system");
}

/// [`FsKnobs`](mdpilot::policy::knobs::FsKnobs) that records every `md/` attribute write.
struct Recording {
    inner: mdpilot::policy::knobs::FsKnobs,
    attrs: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl mdpilot::policy::knobs::KnobIo for Recording {
    fn read(
        &self,
        knob: &mdpilot::policy::KnobId,
    ) -> Result<mdpilot::policy::SpeedLimit, mdpilot::policy::knobs::KnobError> {
        self.inner.read(knob)
    }
    fn write(
        &self,
        knob: &mdpilot::policy::KnobId,
        setting: mdpilot::policy::Setting,
    ) -> Result<(), mdpilot::policy::knobs::KnobError> {
        self.inner.write(knob, setting)
    }
    fn arrays(&self) -> Vec<String> {
        self.inner.arrays()
    }
    fn uuid(&self, name: &str) -> Option<String> {
        self.inner.uuid(name)
    }
    fn arrays_now(
        &self,
        attrs: &[&str],
    ) -> std::collections::BTreeMap<String, mdpilot::policy::journal::ArrayNow> {
        self.inner.arrays_now(attrs)
    }
    fn write_attr(
        &self,
        array: &str,
        attr: &str,
        value: &str,
    ) -> Result<(), mdpilot::policy::knobs::KnobError> {
        self.attrs
            .lock()
            .unwrap()
            .push(format!("{array}/{attr}={value}"));
        self.inner.write_attr(array, attr, value)
    }
}

#[test]
fn a_resumed_job_takes_over_the_freeze_of_its_dead_run_without_unfreezing() {
    let t = FakeTree::new();
    md(&t, "md0", U1, "resync");
    let attrs = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let p = mdpilot::policy::Policy::with_io(
        t.settings(),
        Box::new(Recording {
            inner: mdpilot::policy::knobs::FsKnobs::new(t.root()),
            attrs: attrs.clone(),
        }),
    );
    // The first run froze md0 and was SIGKILLed.
    assert!(p
        .hold(freeze_of("md0", None, Owner::Pid(dead_pid())))
        .unwrap());
    assert_eq!(action(&t, "md0"), "frozen");
    // The resumed run freezes it again: the entry is taken over, nothing is written.
    let me = Owner::Pid(std::process::id());
    assert!(p.hold(freeze_of("md0", None, me.clone())).unwrap());
    assert_eq!(
        *attrs.lock().unwrap(),
        vec!["md0/sync_action=frozen".to_string()],
        "only the first run's freeze was written"
    );
    let st = state::read(&t.state_path()).unwrap();
    assert_eq!(st.changes["freeze:md0"].owner, me);
    assert_eq!(st.changes["freeze:md0"].restore, "idle");
    // Ending the resumed job puts it back as usual.
    p.let_go("freeze:md0", None).unwrap();
    assert_eq!(action(&t, "md0"), "idle");
    assert!(state::read(&t.state_path()).unwrap().changes.is_empty());
}

#[test]
fn a_dead_owners_freeze_that_no_longer_holds_is_not_taken_over() {
    let t = FakeTree::new();
    md(&t, "md0", U1, "resync");
    let p = t.policy();
    p.hold(freeze_of("md0", None, Owner::Pid(dead_pid())))
        .unwrap();
    // Someone un-froze it meanwhile: the dead entry is repaired away, the new freeze written.
    t.set("/sys/block/md0/md/sync_action", "resync\n");
    let me = Owner::Pid(std::process::id());
    assert!(p.hold(freeze_of("md0", None, me.clone())).unwrap());
    assert_eq!(action(&t, "md0"), "frozen");
    assert_eq!(
        state::read(&t.state_path()).unwrap().changes["freeze:md0"].owner,
        me
    );
}

/// [`FsKnobs`](mdpilot::policy::knobs::FsKnobs) whose `frozen` write stalls (md answering a
/// `sync_action` write late on a failing member): it says when the write has begun and waits
/// for the test's go before it writes.
struct Stalling {
    inner: mdpilot::policy::knobs::FsKnobs,
    begun: std::sync::mpsc::SyncSender<()>,
    go: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

impl mdpilot::policy::knobs::KnobIo for Stalling {
    fn read(
        &self,
        knob: &mdpilot::policy::KnobId,
    ) -> Result<mdpilot::policy::SpeedLimit, mdpilot::policy::knobs::KnobError> {
        self.inner.read(knob)
    }
    fn write(
        &self,
        knob: &mdpilot::policy::KnobId,
        setting: mdpilot::policy::Setting,
    ) -> Result<(), mdpilot::policy::knobs::KnobError> {
        self.inner.write(knob, setting)
    }
    fn arrays(&self) -> Vec<String> {
        self.inner.arrays()
    }
    fn uuid(&self, name: &str) -> Option<String> {
        self.inner.uuid(name)
    }
    fn arrays_now(
        &self,
        attrs: &[&str],
    ) -> std::collections::BTreeMap<String, mdpilot::policy::journal::ArrayNow> {
        self.inner.arrays_now(attrs)
    }
    fn write_attr(
        &self,
        array: &str,
        attr: &str,
        value: &str,
    ) -> Result<(), mdpilot::policy::knobs::KnobError> {
        if value == "frozen" {
            self.begun.send(()).unwrap();
            self.go.lock().unwrap().recv().unwrap();
        }
        self.inner.write_attr(array, attr, value)
    }
}

/// A policy on `t` whose freezes stall, the channel that says a freeze began, and the go.
fn stalling_policy(
    t: &FakeTree,
) -> (
    mdpilot::policy::Policy,
    std::sync::mpsc::Receiver<()>,
    std::sync::mpsc::SyncSender<()>,
) {
    let (begun_tx, begun) = std::sync::mpsc::sync_channel(1);
    let (go, go_rx) = std::sync::mpsc::sync_channel(1);
    let p = mdpilot::policy::Policy::with_io(
        t.settings(),
        Box::new(Stalling {
            inner: mdpilot::policy::knobs::FsKnobs::new(t.root()),
            begun: begun_tx,
            go: std::sync::Mutex::new(go_rx),
        }),
    );
    (p, begun, go)
}

#[test]
fn a_stalled_freeze_write_does_not_hold_the_policy_lock() {
    let t = FakeTree::new();
    md(&t, "md0", U1, "resync");
    let (p, begun, go) = stalling_policy(&t);
    let me = Owner::Pid(std::process::id());
    std::thread::scope(|s| {
        let freezer = s.spawn(|| p.hold(freeze_of("md0", None, me.clone())));
        begun.recv().unwrap();
        // The impatient caller: another policy operation while md has not answered. It
        // returns while the freeze is still blocked in the kernel write.
        let other = t.policy();
        let v = other
            .acquire(support::global("other", None, Some(5000)))
            .unwrap();
        assert_eq!(v.speed_limit_max, Some(5000));
        assert!(!freezer.is_finished(), "the freeze is still blocked");
        // The intent is recorded before the write, so a crash now is repaired.
        let st = state::read(&t.state_path()).unwrap();
        assert!(st.changes.contains_key("freeze:md0"));
        go.send(()).unwrap();
        assert!(freezer.join().unwrap().unwrap());
    });
    assert_eq!(action(&t, "md0"), "frozen");
    p.let_go("freeze:md0", None).unwrap();
    assert_eq!(action(&t, "md0"), "idle");
    t.policy().release("other").unwrap();
}

#[test]
fn a_freeze_dropped_by_restore_during_its_stalled_write_is_put_back() {
    let t = FakeTree::new();
    md(&t, "md0", U1, "resync");
    let (p, begun, go) = stalling_policy(&t);
    let me = Owner::Pid(std::process::id());
    std::thread::scope(|s| {
        let freezer = s.spawn(|| p.hold(freeze_of("md0", None, me.clone())));
        begun.recv().unwrap();
        // The hostile caller: `policy restore` undoes every change while the write is under
        // way; md0 does not read frozen yet, so restore drops the entry without a write.
        t.policy().restore(false).unwrap();
        assert!(state::read(&t.state_path()).unwrap().changes.is_empty());
        go.send(()).unwrap();
        let r = freezer.join().unwrap();
        assert!(
            matches!(
                r,
                Err(mdpilot::policy::PolicyError::Write {
                    rolled_back: true,
                    ..
                })
            ),
            "{r:?}"
        );
    });
    // Nothing is left frozen that no entry records.
    assert_eq!(action(&t, "md0"), "idle");
    assert!(state::read(&t.state_path()).unwrap().changes.is_empty());
}

/// RestoreLimits decides "no freeze held" under the state's lock, with the restore: the
/// refusal is asked while the lock is held (another writer, a wipe taking a freeze, waits)
/// with the journal as the file has it, and a refusal undoes and writes nothing.
#[test]
fn a_restore_decides_on_the_freezes_under_the_states_lock() {
    let t = FakeTree::new();
    md(&t, "md0", U1, "resync");
    let p = t.policy();
    assert!(p
        .hold(freeze_of("md0", None, Owner::Pid(std::process::id())))
        .unwrap());
    let before = std::fs::read(t.state_path()).unwrap();
    let lock_path = state::sibling(&t.state_path(), ".lock");
    let asked = std::cell::Cell::new(None);
    let r = p.restore_unless(false, &|changes| {
        let f = std::fs::File::open(&lock_path).unwrap();
        let free = nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).is_ok();
        asked.set(Some((changes.map(<[Change]>::len), free)));
        changes
            .filter(|c| !c.is_empty())
            .map(|_| "a wipe holds md0".to_string())
    });
    assert_eq!(
        asked.get(),
        Some((Some(1), false)),
        "(changes seen, lock free)"
    );
    assert!(
        matches!(&r, Err(mdpilot::policy::PolicyError::Refused(m)) if m == "a wipe holds md0"),
        "{r:?}"
    );
    assert_eq!(action(&t, "md0"), "frozen", "the freeze stays");
    assert_eq!(std::fs::read(t.state_path()).unwrap(), before);
    // Let go: the same question says go on, and the restore runs.
    p.let_go("freeze:md0", None).unwrap();
    let r = p.restore_unless(false, &|changes| {
        changes
            .filter(|c| !c.is_empty())
            .map(|_| "held".to_string())
    });
    assert!(r.is_ok(), "{r:?}");
}
