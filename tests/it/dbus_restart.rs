//! Restart is not stop, and pid leases end with their process: `mdpilot serve` on a
//! private bus over a simulated tree the test owns, so the state file survives the restart.

use crate::support;

use std::time::{Duration, Instant};
use support::bus::{acquire, leases, Bus};
use support::tree::{read_trim, Sim};
use support::Service;
use zbus::zvariant::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_and_start_keep_the_named_lease_and_drop_the_bus_lease() {
    let Some(bus) = Bus::start() else { return };
    let sim = Sim::create().unwrap();
    let min = sim.root().proc("sys/dev/raid/speed_limit_min");
    let max = sim.root().proc("sys/dev/raid/speed_limit_max");
    let (orig_min, orig_max) = (read_trim(&min), read_trim(&max));
    let mut svc = Service::on_root(&bus, sim.path(), &[]).await;
    let installer = bus.connect().await;
    acquire(
        &installer,
        &[
            ("holder", Value::from("installer")),
            ("kind", Value::from("installer")),
            ("min", Value::U64(0)),
        ],
    )
    .await
    .unwrap();
    let client = bus.connect().await;
    acquire(&client, &[("max", Value::U64(5000))])
        .await
        .unwrap();
    assert_eq!(
        (read_trim(&min), read_trim(&max)),
        ("0".into(), "5000".into())
    );
    assert_eq!(svc.term().code(), Some(0));
    // Stopped: the named lease still applies, the bus lease is gone with its limit.
    assert_eq!(read_trim(&min), "0", "named lease dropped by SIGTERM");
    assert_eq!(read_trim(&max), orig_max, "bus lease kept after SIGTERM");
    let _svc = Service::on_root(&bus, sim.path(), &[]).await;
    let watcher = bus.connect().await;
    let l = leases(&watcher).await;
    assert_eq!(l.len(), 1, "{l:?}");
    assert_eq!(l[0].id, "installer");
    assert_eq!(read_trim(&min), "0", "named lease dropped by the restart");
    assert_eq!(read_trim(&max), orig_max);
    assert_ne!(orig_min, "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pid_lease_is_released_within_a_second_of_the_exit() {
    let Some(bus) = Bus::start() else { return };
    let svc = Service::sim(&bus, &[]).await;
    let knob = svc.sim_path("proc/sys/dev/raid/speed_limit_min");
    let orig = read_trim(&knob);
    let conn = bus.connect().await;
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    acquire(
        &conn,
        &[("pid", Value::U32(child.id())), ("min", Value::U64(5))],
    )
    .await
    .unwrap();
    assert_eq!(read_trim(&knob), "5");
    // Let the service's loop handle the lease change (it then watches the pid), then end the
    // process. It is not reaped by us yet: a zombie, which kill(pid, 0) would still call alive.
    tokio::time::sleep(Duration::from_millis(300)).await;
    child.kill().unwrap();
    let t0 = Instant::now();
    while read_trim(&knob) != orig || !leases(&conn).await.is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "pid lease not released within 1 s of the exit"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("pid lease released {:?} after the exit", t0.elapsed());
    child.wait().unwrap();
}
