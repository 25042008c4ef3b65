//! Loop-device tests of issue 15 (root only; each attaches its own loop devices): the hand-over
//! after a wipe (partitions gone), resume after SIGKILL (bytes written twice counted, random
//! verifies), checkpoint identity refusals.

#[macro_use]
mod support;

use mdpilot::wipe::plan::{Method, Options};
use mdpilot::wipe::stream::Seed;
use mdpilot::wipe::{Job, Request};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use support::tree::Root;
use support::{LoopDev, MIB};

fn part_exists(dev: &LoopDev, n: u32) -> bool {
    Path::new(&format!(
        "/sys/class/block/{}/{}p{n}",
        dev.name(),
        dev.name()
    ))
    .exists()
}

fn wipe_now(dev: &Path, method: Method) -> mdpilot::wipe::Outcome {
    let req = Request {
        device: dev.to_path_buf(),
        method,
        options: Options {
            seed: Some(Seed([9; 32])),
            ..Options::default()
        },
    };
    let plan = mdpilot::wipe::plan_for(&Root::system(), &req).unwrap();
    assert!(plan.reread_partitions, "{}", plan.describe());
    Job::new(plan, Root::system())
        .run(&AtomicBool::new(false))
        .unwrap()
}

#[test]
fn loop_signatures_wipe_drops_the_partitions() {
    need_root!();
    let d = LoopDev::partitioned(64 * MIB);
    assert!(
        part_exists(&d, 1) && part_exists(&d, 2),
        "sfdisk made no partitions"
    );
    let o = wipe_now(&d.path, Method::Signatures);
    assert!(o.partitions_reread, "{o:?}");
    assert!(o.uevent_sent, "{o:?}");
    // BLKRRPART is synchronous: the partitions are gone when the job returns.
    assert!(!part_exists(&d, 1) && !part_exists(&d, 2));
}

#[test]
fn loop_zero_wipe_drops_the_partitions() {
    need_root!();
    let d = LoopDev::partitioned(64 * MIB);
    assert!(part_exists(&d, 1));
    let o = wipe_now(&d.path, Method::Zero);
    assert!(o.partitions_reread && o.uevent_sent, "{o:?}");
    assert!(!part_exists(&d, 1) && !part_exists(&d, 2));
}
