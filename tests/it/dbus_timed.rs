//! Timed leases through the running service: `policy apply --for` goes as AcquirePriority's
//! `duration`, the service releases the lease on time, also after it was killed and restarted.

use crate::support;

use std::time::{Duration, Instant};
use support::tree::{read_trim, Sim};
use support::{describe, policy_cli as cli, Bus, Service};

async fn wait_for(path: &std::path::Path, want: &str, within: Duration) {
    let deadline = Instant::now() + within;
    while read_trim(path) != want {
        assert!(
            Instant::now() < deadline,
            "{} is {} after {within:?}, want {want}",
            path.display(),
            read_trim(path)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timed_lease_ends_on_time_also_across_a_killed_service() {
    let Some(bus) = Bus::start() else { return };
    let sim = Sim::create().unwrap();
    let root = sim.path().to_str().unwrap().to_string();
    let knob = sim.root().proc("sys/dev/raid/speed_limit_max");
    let mut svc = Service::start(&bus, &["--root", &root], &[]).await;

    let o = cli(
        &bus.address,
        &root,
        &["apply", "--max", "5000", "--for", "2s", "--json"],
    );
    assert!(o.status.success(), "{}", describe(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["leases"][0]["expires_unix_s"].as_u64().is_some(), "{v}");
    assert_eq!(read_trim(&knob), "5000");
    wait_for(&knob, "200000", Duration::from_secs(9)).await;

    // SIGKILL: nothing restores on the way out; the restarted service ends the lease on time.
    let o = cli(
        &bus.address,
        &root,
        &["apply", "--max", "6000", "--for", "3s"],
    );
    assert!(o.status.success(), "{}", describe(&o));
    assert_eq!(read_trim(&knob), "6000");
    let pid = nix::unistd::Pid::from_raw(svc.pid() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
    let _ = svc.child.take().unwrap().wait();
    assert_eq!(read_trim(&knob), "6000");
    let _svc = Service::start(&bus, &["--root", &root], &[]).await;
    wait_for(&knob, "200000", Duration::from_secs(10)).await;
}

/// `Leases` shows when each lease was taken (`taken`) and when a timed one ends (`expires`),
/// both in µs since the epoch; a lease without `duration` has no `expires`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_show_when_a_lease_was_taken_and_when_a_timed_one_ends() {
    use support::bus::{acquire, leases};
    use zbus::zvariant::Value;
    let Some(bus) = Bus::start() else { return };
    let _svc = Service::sim(&bus, &[]).await;
    let conn = bus.connect().await;
    let now_us = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros() as u64
    };
    let before = now_us() / 1_000_000 * 1_000_000;
    let timed = acquire(
        &conn,
        &[("max", Value::U64(5000)), ("duration", Value::U64(3600))],
    )
    .await
    .unwrap();
    let plain = acquire(&conn, &[("min", Value::U64(0))]).await.unwrap();
    let after = now_us();
    let l = leases(&conn).await;
    let t = l.iter().find(|l| l.id == timed).unwrap();
    let taken = t.taken.expect("taken on a timed lease");
    assert!((before..=after).contains(&taken), "{t:?}");
    let expires = t.expires.expect("expires on a timed lease");
    // Both are whole seconds, read from the clock a moment apart.
    let ends_in = expires.saturating_sub(taken);
    assert!((3_599_000_000..=3_601_000_000).contains(&ends_in), "{t:?}");
    let p = l.iter().find(|l| l.id == plain).unwrap();
    assert_eq!(p.expires, None, "{p:?}");
    assert!(p.taken.is_some(), "{p:?}");
}
