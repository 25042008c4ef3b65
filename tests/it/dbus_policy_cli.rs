//! `mdpilot policy apply|release|restore` through the running service: a private `dbus-daemon`,
//! `mdpilot serve --root TMP`, and the CLI with `MDPILOT_BUS=<address> mdpilot --root TMP ...`.

use crate::support;

use std::collections::HashMap;
use std::time::Duration;
use support::bus::{leases, next_before, signals, MANAGER_IFACE, MANAGER_PATH};
use support::tree::{read_trim, Sim};
use support::{as_nobody, describe, policy_cli as cli, stderr, stdout, Bus, Service, BIN};
use zbus::zvariant::OwnedValue;

/// Waits (at most 5 s) for a PropertiesChanged of the manager carrying `Leases`.
async fn leases_changed(s: &mut zbus::MessageStream) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let m = next_before(s, deadline, "no PropertiesChanged with Leases").await;
        let Ok((iface, changed, _)) = m
            .body()
            .deserialize::<(String, HashMap<String, OwnedValue>, Vec<String>)>()
        else {
            continue;
        };
        if iface == MANAGER_IFACE && changed.contains_key("Leases") {
            return;
        }
    }
}

/// What the policy CLI steps share: the bus, the simulated root and the manager's watcher.
struct Ctx<'a> {
    bus: &'a Bus,
    sim: &'a Sim,
    root: String,
    knob: std::path::PathBuf,
    watcher: zbus::Connection,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_cli_goes_through_the_running_service() {
    let Some(bus) = Bus::start() else { return };
    let sim = Sim::create().unwrap();
    let root = sim.path().to_str().unwrap().to_string();
    let knob = sim.root().proc("sys/dev/raid/speed_limit_min");
    let mut svc = Service::start(&bus, &["--root", &root], &[]).await;
    let watcher = bus.connect().await;
    let mut sig = signals(
        &watcher,
        "org.freedesktop.DBus.Properties",
        Some(MANAGER_PATH),
        64,
    )
    .await;
    let c = Ctx {
        bus: &bus,
        sim: &sim,
        root,
        knob,
        watcher,
    };
    apply_refuse_and_json(&c, &mut sig).await;
    release_per_array_and_restore(&c).await;

    // Without the service the CLI works on the files.
    assert_eq!(svc.term().code(), Some(0));
    let o = cli(
        &c.bus.address,
        &c.root,
        &["apply", "--holder", "late", "--min", "0"],
    );
    assert!(o.status.success(), "{}", describe(&o));
    assert_eq!(read_trim(&c.knob), "0");
    let o = cli(&c.bus.address, &c.root, &["restore"]);
    assert!(o.status.success(), "{}", describe(&o));
}

/// apply as installer, a refused apply, and an admin apply with --json, checked on the bus.
async fn apply_refuse_and_json(c: &Ctx<'_>, sig: &mut zbus::MessageStream) {
    let (bus, root, knob, watcher) = (c.bus, c.root.as_str(), &c.knob, &c.watcher);
    // apply without limits: the install policy (min 0), a holder lease that outlives the CLI.
    let o = cli(&bus.address, root, &["apply", "--holder", "d-i"]);
    assert!(o.status.success(), "{}", describe(&o));
    let out = stdout(&o);
    assert!(out.contains("d-i: kind installer"), "{}", describe(&o));
    assert!(
        out.contains("speed_limit_min: 0 KiB/s (original 1000)"),
        "{}",
        describe(&o)
    );
    leases_changed(sig).await;
    let l = leases(watcher).await;
    assert_eq!(l.len(), 1, "{l:?}");
    assert_eq!((l[0].id.as_str(), l[0].kind.as_str()), ("d-i", "installer"));
    assert_eq!(
        (l[0].min, l[0].max),
        (Some(0), None),
        "min 0 reads back as 0"
    );
    assert_eq!(read_trim(knob), "0");

    // A refusal by the service is printed and exits 1 without touching the files.
    let o = cli(&bus.address, root, &["apply", "--min", "9", "--max", "3"]);
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(stderr(&o).contains("InvalidArgument"), "{}", describe(&o));
    assert_eq!(leases(watcher).await.len(), 1);

    // --json prints the view.
    let o = cli(
        &bus.address,
        root,
        &[
            "apply", "--holder", "admin", "--kind", "admin", "--max", "5000", "--json",
        ],
    );
    assert!(o.status.success(), "{}", describe(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["speed_limit_max"], 5000, "{v}");
    assert_eq!(leases(watcher).await.len(), 2);
}

/// release (twice), a per-array max 0 lease and restore, checked on the bus and the files.
async fn release_per_array_and_restore(c: &Ctx<'_>) {
    let (bus, root, knob, watcher, sim) = (c.bus, c.root.as_str(), &c.knob, &c.watcher, c.sim);
    // release restores what no other lease wants; releasing again is a warning, exit 0.
    let o = cli(&bus.address, root, &["release", "--holder", "d-i"]);
    assert!(o.status.success(), "{}", describe(&o));
    assert_eq!(read_trim(knob), "1000");
    let o = cli(&bus.address, root, &["release", "--holder", "d-i"]);
    assert!(o.status.success(), "{}", describe(&o));
    assert!(stdout(&o).contains("held no lease"), "{}", describe(&o));
    let l = leases(watcher).await;
    assert_eq!(l.len(), 1, "{l:?}");
    assert_eq!(l[0].id, "admin");

    // A per-array max 0 goes through the service, the array named by its /dev/md/ link.
    let o = cli(
        &bus.address,
        root,
        &[
            "apply",
            "--holder",
            "slow",
            "--array",
            "/dev/md/data",
            "--max",
            "0",
        ],
    );
    assert!(o.status.success(), "{}", describe(&o));
    let l = leases(watcher).await;
    let slow = l.iter().find(|l| l.id == "slow").expect("lease slow");
    assert_eq!(
        (slow.arrays["md1"].min, slow.arrays["md1"].max),
        (None, Some(0)),
        "{slow:?}"
    );
    let max = read_trim(sim.root().sys("block/md1/md/sync_speed_max"));
    assert_eq!(max.split_whitespace().next(), Some("1"), "{max}");
    let o = cli(&bus.address, root, &["release", "--holder", "slow"]);
    assert!(o.status.success(), "{}", describe(&o));

    // restore drops every lease through the service.
    let o = cli(&bus.address, root, &["restore"]);
    assert!(o.status.success(), "{}", describe(&o));
    assert!(leases(watcher).await.is_empty());
    assert!(stdout(&o).contains("leases: none"));
}

/// An unprivileged CLI gets NotAuthorized from the service and exits 1 (no fall-back to the
/// files); without a terminal it says how to get a polkit prompt. Root: switches to nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_unprivileged_policy_cli_gets_not_authorized_and_no_fall_back() {
    need_root!("to switch to nobody");
    let Some(bus) = Bus::start() else { return };
    let sim = Sim::create().unwrap();
    let root = sim.path().to_str().unwrap().to_string();
    let knob = sim.root().proc("sys/dev/raid/speed_limit_min");
    let mut svc = Service::start(&bus, &["--root", &root], &[]).await;
    let watcher = bus.connect().await;
    let o = as_nobody(BIN)
        .args(["--root", &root, "policy", "apply", "--min", "5"])
        .env("MDPILOT_BUS", &bus.address)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", describe(&o));
    assert!(stderr(&o).contains("NotAuthorized"), "{}", describe(&o));
    assert!(
        stderr(&o).contains("hint: stdin is not a terminal"),
        "{}",
        describe(&o)
    );
    assert!(leases(&watcher).await.is_empty());
    assert_eq!(read_trim(&knob), "1000");
    assert_eq!(svc.term().code(), Some(0));
}
