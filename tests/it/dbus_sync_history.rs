//! `Array.GetSyncHistory` (API 1.5): the service's last hour of each array's sync (speed,
//! limit, io pressure), against `mdpilot serve --sim` with one-second slots
//! (`MDPILOT_SIM_HISTORY_S=1`) on a private bus; the check is md0's, throttled by the io
//! pressure the test writes to the simulated `/proc/pressure/io`.

use crate::support;

use std::time::Duration;
use support::bus::{call, opts, sim_array_path, ARRAY_IFACE};
use support::tree::write;
use support::{Bus, Service};

type Sample = (u64, u64, u64, f64);

async fn history(c: &zbus::Connection, path: &str) -> Vec<Sample> {
    let m = call(c, path, ARRAY_IFACE, "GetSyncHistory", &())
        .await
        .unwrap();
    assert_eq!(m.body().signature().to_string(), "a(tttd)");
    m.body().deserialize().unwrap()
}

/// Polls the history of `path` every 100 ms for at most `secs` seconds until `f` holds.
async fn until<F>(c: &zbus::Connection, path: &str, secs: u64, what: &str, f: F) -> Vec<Sample>
where
    F: Fn(&[Sample]) -> bool,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let h = history(c, path).await;
        if f(&h) {
            return h;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out: {what}: {h:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `/proc/pressure/io` with both `avg10` at `full` percent and both stall counters at
/// `total_us` (the throttle decides on the counters' growth between its looks).
fn pressure(full: f64, total_us: u64) -> String {
    format!(
        "some avg10={full:.2} avg60=0.00 avg300=0.00 total={total_us}\nfull avg10={full:.2} avg60=0.00 avg300=0.00 total={total_us}\n"
    )
}

/// md0's check under the pressure throttle: samples while it runs, oldest first, one per
/// slot; the pressure series rises when the machine gets busy and the limit (and then the
/// speed) falls with it; cancelled, a closing sample at speed 0 ends the series. md1's resync,
/// running since the start, has its own history; an idle array has none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sync_history_shows_the_check_slowing_down_under_pressure() {
    let Some(bus) = Bus::start() else { return };
    let svc = Service::sim(
        &bus,
        &[
            ("MDPILOT_SIM_TICK_MS", "100"),
            ("MDPILOT_SIM_HISTORY_S", "1"),
        ],
    )
    .await;
    let tree = svc.sim_path("");
    write(
        &tree,
        "etc/mdpilot/config.d/50-p.toml",
        "[check]\npressure_target = \"full 5%..10%\"\npressure_floor = 2000\npressure_ceiling = 20000\n",
    );
    write(&tree, "proc/pressure/io", &pressure(0.5, 1));
    // The configuration in effect: the service says when the reload is done.
    svc.reload();
    let c = bus.connect().await;
    let (md0, md1) = (sim_array_path("md0"), sim_array_path("md1"));
    assert_eq!(history(&c, &md0).await, vec![], "md0 has not synced");
    until(&c, &md1, 10, "md1's resync sampled", |h| {
        h.iter().any(|s| s.1 > 0)
    })
    .await;

    call(&c, &md0, ARRAY_IFACE, "StartCheck", &(opts(&[]),))
        .await
        .unwrap();
    let quiet = until(&c, &md0, 20, "three samples at the ceiling", |h| {
        h.iter()
            .filter(|s| s.2 == 20_000 && s.1 > 0 && s.3 == 0.5)
            .count()
            >= 3
    })
    .await;
    // md runs at the limit (the simulated disks are otherwise idle).
    assert!(
        quiet.iter().filter(|s| s.2 == 20_000).all(|s| s.1 <= s.2),
        "{quiet:?}"
    );

    // A busy machine: avg10 at 30 %, the counters growing by a second every 50 ms (replaced
    // by rename: no look reads half a file).
    let psi = tree.join("proc/pressure/io");
    let writer = tokio::spawn(async move {
        let tmp = psi.with_file_name(".io");
        for i in 1u64.. {
            std::fs::write(&tmp, pressure(30.0, 1 + i * 1_000_000)).unwrap();
            std::fs::rename(&tmp, &psi).unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let busy = until(&c, &md0, 20, "the limit down with the pressure up", |h| {
        h.last().is_some_and(|s| s.3 == 30.0 && s.2 < 20_000)
    })
    .await;
    assert!(
        busy.windows(2).all(|w| w[0].0 < w[1].0),
        "times increase: {busy:?}"
    );
    assert!(busy.len() <= 360, "bounded");
    writer.abort();

    call(&c, &md0, ARRAY_IFACE, "CancelCheck", &())
        .await
        .unwrap();
    let end = until(&c, &md0, 10, "a closing sample at speed 0", |h| {
        h.last().is_some_and(|s| s.1 == 0)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(history(&c, &md0).await.len(), end.len(), "idle: no sample");

    // The impatient caller: a flood of reads (100: the test bus allows 128 pending replies a
    // connection) is answered whole, each reply bounded.
    let flood: Vec<_> = (0..100)
        .map(|_| {
            let (c, md1) = (c.clone(), md1.clone());
            tokio::spawn(async move { history(&c, &md1).await.len() })
        })
        .collect();
    for task in flood {
        let n = task.await.unwrap();
        assert!((1..=360).contains(&n), "{n}");
    }
}
