//! Process owners are pinned by (pid, start time): a recorded owner whose pid is alive but
//! belongs to another process now (a different `/proc/PID/stat` start time) is dead, for leases
//! and journaled freezes alike; records without a start time (older state files) keep the bare
//! pid rule.

use crate::support;

use mdpilot::host::process_start_time;
use mdpilot::policy::journal::{ArrayRef, Change};
use mdpilot::policy::{cli_alive, process_owner, state, Owner};
use mdpilot::policy::{LeaseKind, LeaseRequest, Limits};
use std::collections::BTreeMap;
use support::FakeTree;

/// This process as an owner whose pid is alive but whose start time is not its own: what a
/// record of an exited process looks like once the kernel has reused its pid.
fn reused_pid_owner() -> Owner {
    let pid = std::process::id();
    let start_time = process_start_time(pid).expect("own /proc/PID/stat") + 1;
    Owner::Process { pid, start_time }
}

fn lease(holder: &str, owner: Owner, min: u64) -> LeaseRequest {
    LeaseRequest {
        holder: holder.into(),
        kind: LeaseKind::Admin,
        owner,
        global: Limits {
            min: Some(min),
            max: None,
            io_depth: None,
        },
        arrays: BTreeMap::new(),
    }
}

#[test]
fn a_lease_of_a_reused_pid_is_released() {
    let t = FakeTree::new();
    let p = t.policy();
    p.acquire(lease("reused", reused_pid_owner(), 0)).unwrap();
    p.acquire(lease("me", process_owner(std::process::id()), 10))
        .unwrap();
    assert_eq!(t.gmin(), "0");
    let v = p.show().unwrap();
    let reused = v.leases.iter().find(|l| l.holder == "reused").unwrap();
    assert!(reused.dead, "shown dead: {reused:?}");
    let v = p.reap(&cli_alive).unwrap();
    let holders: Vec<_> = v.leases.iter().map(|l| l.holder.as_str()).collect();
    assert_eq!(holders, ["me"]);
    assert_eq!(t.gmin(), "10");
}

#[test]
fn a_freeze_of_a_reused_pid_is_repaired() {
    let t = FakeTree::new();
    std::fs::create_dir_all(t.root().sys("block/md0/md")).unwrap();
    t.set("/sys/block/md0/md/sync_action", "resync\n");
    let p = t.policy();
    let freeze = Change::freeze(
        ArrayRef {
            name: "md0".into(),
            uuid: None,
        },
        reused_pid_owner(),
    );
    p.hold(freeze).unwrap();
    assert_eq!(t.get("/sys/block/md0/md/sync_action"), "frozen");
    p.reap(&cli_alive).unwrap();
    assert_eq!(t.get("/sys/block/md0/md/sync_action"), "idle");
    assert!(state::read(&t.state_path()).unwrap().changes.is_empty());
}

#[test]
fn the_own_process_is_alive_with_its_start_time() {
    let me = process_owner(std::process::id());
    assert!(matches!(me, Owner::Process { .. }), "{me:?}");
    assert!(cli_alive(&me));
    // A record without a start time (older state files) keeps the bare pid rule.
    assert!(cli_alive(&Owner::Pid(std::process::id())));
}

#[test]
fn state_files_without_start_times_stay_readable() {
    let t = FakeTree::new();
    let p = t.policy();
    p.acquire(lease("new", process_owner(std::process::id()), 5))
        .unwrap();
    let text = std::fs::read_to_string(t.state_path()).unwrap();
    assert!(text.contains("start-time"), "{text}");
    // The same file as an older mdpilot wrote it: `[lease.owner]` `pid = N`, no start time.
    let old: String = text
        .lines()
        .filter(|l| !l.starts_with("start-time"))
        .map(|l| l.replace("[lease.owner.process]", "[lease.owner]") + "\n")
        .collect();
    let st = state::from_toml(&old).unwrap_or_else(|e| panic!("{e}\n{old}"));
    assert_eq!(st.leases["new"].owner, Owner::Pid(std::process::id()));
}
