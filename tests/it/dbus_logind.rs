//! The machine's shutdown through systemd-logind, against a stand-in `org.freedesktop.login1`
//! on the test's private bus ([`support::logind`]; the service finds it as its system bus
//! through `DBUS_SYSTEM_BUS_ADDRESS`) and the real `mdpilot serve` on a simulated tree whose
//! `md/sync_completed` is md's 1/16 checkpoint ([`mdpilot::sim::Sim::set_checkpoint`]). Every
//! wait is on a signal the test can see (an `Inhibit` call, the end of file on the stand-in's
//! end of the inhibitor); the bounds are hang guards only.

use crate::support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::logind::FakeLogind;
use support::tree::{read_trim, Sim};
use support::{describe, Bus, Service, BIN};

/// A hang guard, never a measurement.
const BOUND: Duration = Duration::from_secs(60);

fn check(root: &Path, args: &[&str]) {
    let o = Command::new(BIN)
        .arg("--root")
        .arg(root)
        .arg("check")
        .args(args)
        .env_remove("MDPILOT_ROOT")
        .env_remove("MDPILOT_BUS")
        .output()
        .unwrap();
    assert!(o.status.success(), "check {args:?}: {}", describe(&o));
}

fn md0(root: &Path, f: &str) -> String {
    read_trim(root.join("sys/block/md0/md").join(f))
}

fn record(root: &Path) -> mdpilot::check::ArrayRecord {
    let text = std::fs::read_to_string(root.join("var/lib/mdpilot/checks.toml")).unwrap();
    let st = mdpilot::check::CheckState::parse(&text).unwrap();
    st.array
        .into_values()
        .find(|r| r.name == "md0")
        .expect("md0's record")
}

/// The service asks logind for a *delay* inhibitor on `shutdown` (never `block`); on
/// `PrepareForShutdown(true)` it pauses the running check (the record says `shutdown`, with the
/// point mdstat showed, and `sync_action` reads idle) and only THEN lets go of the inhibitor;
/// on `PrepareForShutdown(false)` (a cancelled shutdown) it resumes the check from there and
/// takes a new delay inhibitor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_pauses_the_check_then_releases_the_delay_inhibitor() {
    let Some(bus) = Bus::start() else { return };
    let mut logind = FakeLogind::serve(&bus).await;
    let mut sim = Sim::create().unwrap();
    sim.set_checkpoint(Some(16));
    let r = sim.path().to_path_buf();
    check(&r, &["start", "md0"]);
    sim.absorb_writes().unwrap();
    // 200000 sectors reached (mdstat: 100000 KiB); md's checkpoint says 131072.
    sim.step(Duration::from_millis(500)).unwrap();
    assert_eq!(md0(&r, "sync_completed"), "131072 / 2097152");
    let env = [("DBUS_SYSTEM_BUS_ADDRESS", bus.address.as_str())];
    let mut svc = Service::on_root(&bus, &r, &env).await;

    let first = logind.next_inhibit(BOUND).await;
    assert_eq!(first.mode, "delay", "{first:?}");
    assert!(first.what.split(':').any(|w| w == "shutdown"), "{first:?}");
    assert_eq!(first.who, "mdpilot");
    assert!(!first.why.is_empty());
    assert!(first.held());
    assert_eq!(md0(&r, "sync_action"), "check");

    logind.prepare_for_shutdown(true).await;
    // The end of file on our end is the release: by then the check is paused and recorded.
    first.released(BOUND).await;
    let rec = record(&r);
    assert_eq!(rec.paused_for.as_deref(), Some("shutdown"), "{rec:?}");
    assert_eq!(rec.running, None, "{rec:?}");
    assert_eq!(rec.position.as_ref().map(|p| p.sectors), Some(200_000));
    assert_eq!(md0(&r, "sync_action"), "idle");

    // Cancelled: the check resumes from its position, then a new delay inhibitor.
    sim.absorb_writes().unwrap();
    logind.prepare_for_shutdown(false).await;
    let again = logind.next_inhibit(BOUND).await;
    assert_eq!(again.mode, "delay", "{again:?}");
    assert!(again.held());
    assert_eq!(md0(&r, "sync_min"), "200000");
    assert_eq!(md0(&r, "sync_action"), "check");
    assert_eq!(record(&r).paused_for, None);
    assert!(svc.term().success());
    // The stop pauses it again, and the service's exit lets go of the new inhibitor.
    again.released(BOUND).await;
    assert_eq!(record(&r).paused_for.as_deref(), Some("shutdown"));
    assert!(
        !svc.log_lines().iter().any(|l| l.contains("no logind")),
        "with logind on the bus"
    );
}

/// Without logind on the system bus (a container, the installer) the service runs, and says
/// once why it holds no inhibitor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_logind_the_service_runs_and_says_why_once() {
    let Some(bus) = Bus::start() else { return };
    let sim = Sim::create().unwrap();
    let env = [("DBUS_SYSTEM_BUS_ADDRESS", bus.address.as_str())];
    let mut svc = Service::on_root(&bus, sim.path(), &env).await;
    let said = |lines: &[String]| {
        lines
            .iter()
            .filter(|l| l.contains("no logind shutdown inhibitor"))
            .count()
    };
    let deadline = tokio::time::Instant::now() + BOUND;
    while said(&svc.log_lines()) == 0 {
        assert!(tokio::time::Instant::now() < deadline, "never said why");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Still serving.
    let c = bus.connect().await;
    assert!(support::bus::name_owned(&c).await);
    assert!(svc.term().success());
    let lines = svc.log_lines();
    assert_eq!(said(&lines), 1, "{lines:#?}");
    assert!(
        lines.iter().any(|l| l.contains("paused on SIGTERM only")),
        "{lines:#?}"
    );
}
