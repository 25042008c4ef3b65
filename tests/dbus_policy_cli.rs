//! `mdpilot policy apply|release|restore` through the running service: a private `dbus-daemon`,
//! `mdpilot serve --root TMP`, and the CLI with `MDPILOT_BUS=<address> mdpilot --root TMP ...`.

mod common;

use common::{Bus, Service, BIN};
use futures_util::StreamExt;
use std::collections::HashMap;
use std::process::Output;
use std::time::Duration;
use zbus::zvariant::OwnedValue;

const NAME: &str = "org.mdpilot.MdPilot1";
const PATH: &str = "/org/mdpilot/MdPilot1";
const MANAGER: &str = "org.mdpilot.MdPilot1.Manager";

fn cli(bus: &str, root: &str, args: &[&str]) -> Output {
    std::process::Command::new(BIN)
        .args(["--root", root, "policy"])
        .args(args)
        .env("MDPILOT_BUS", bus)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

async fn leases(conn: &zbus::Connection) -> Vec<mdpilot::dbus::manager::LeaseInfo> {
    let v: OwnedValue = conn
        .call_method(
            Some(NAME),
            PATH,
            Some("org.freedesktop.DBus.Properties"),
            "Get",
            &(MANAGER, "Leases"),
        )
        .await
        .unwrap()
        .body()
        .deserialize()
        .unwrap();
    v.try_into().unwrap()
}

/// Waits (at most 5 s) for a PropertiesChanged of the manager carrying `Leases`.
async fn leases_changed(s: &mut zbus::MessageStream) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let m = tokio::time::timeout_at(deadline, s.next())
            .await
            .expect("no PropertiesChanged with Leases")
            .unwrap()
            .unwrap();
        let Ok((iface, changed, _)) = m
            .body()
            .deserialize::<(String, HashMap<String, OwnedValue>, Vec<String>)>()
        else {
            continue;
        };
        if iface == MANAGER && changed.contains_key("Leases") {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_cli_goes_through_the_running_service() {
    let Some(bus) = Bus::start() else { return };
    let sim = mdpilot::sim::Sim::create().unwrap();
    let root = sim.path().to_str().unwrap().to_string();
    let knob = sim.root().proc("sys/dev/raid/speed_limit_min");
    let mut svc = Service::start(&bus, &["--root", &root], &[]).await;
    let watcher = bus.connect().await;
    let rule = zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .interface("org.freedesktop.DBus.Properties")
        .unwrap()
        .path(PATH)
        .unwrap()
        .build();
    let mut sig = zbus::MessageStream::for_match_rule(rule, &watcher, Some(64))
        .await
        .unwrap();

    // apply without limits: the install policy (min 0), a holder lease that outlives the CLI.
    let o = cli(&bus.address, &root, &["apply", "--holder", "d-i"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("d-i: kind installer"), "{}", text(&o));
    assert!(
        out.contains("speed_limit_min: 0 KiB/s (original 1000)"),
        "{}",
        text(&o)
    );
    leases_changed(&mut sig).await;
    let l = leases(&watcher).await;
    assert_eq!(l.len(), 1, "{l:?}");
    assert_eq!((l[0].0.as_str(), l[0].1.as_str()), ("d-i", "installer"));
    assert_eq!(std::fs::read_to_string(&knob).unwrap().trim(), "0");

    // A refusal by the service is printed and exits 1 without touching the files.
    let o = cli(&bus.address, &root, &["apply", "--min", "9", "--max", "3"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("InvalidArgument"),
        "{}",
        text(&o)
    );
    assert_eq!(leases(&watcher).await.len(), 1);

    // --json prints the view.
    let o = cli(
        &bus.address,
        &root,
        &[
            "apply", "--holder", "admin", "--kind", "admin", "--max", "5000", "--json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["speed_limit_max"], 5000, "{v}");
    assert_eq!(leases(&watcher).await.len(), 2);

    // release restores what no other lease wants; releasing again is a warning, exit 0.
    let o = cli(&bus.address, &root, &["release", "--holder", "d-i"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&knob).unwrap().trim(), "1000");
    let o = cli(&bus.address, &root, &["release", "--holder", "d-i"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("held no lease"),
        "{}",
        text(&o)
    );
    let l = leases(&watcher).await;
    assert_eq!(l.len(), 1, "{l:?}");
    assert_eq!(l[0].0, "admin");

    // restore drops every lease through the service.
    let o = cli(&bus.address, &root, &["restore"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(leases(&watcher).await.is_empty());
    assert!(String::from_utf8_lossy(&o.stdout).contains("leases: none"));

    // An unprivileged CLI gets NotAuthorized from the service and exits 1 (no fall-back).
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let o = std::process::Command::new("setpriv")
            .args(["--reuid", "nobody", "--regid", "nogroup", "--clear-groups"])
            .arg(BIN)
            .args(["--root", &root, "policy", "apply", "--min", "5"])
            .env("MDPILOT_BUS", &bus.address)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("NotAuthorized"),
            "{}",
            text(&o)
        );
        // No terminal, so no polkit text agent: the CLI says how to get a prompt.
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("hint: stdin is not a terminal"),
            "{}",
            text(&o)
        );
        assert!(leases(&watcher).await.is_empty());
        assert_eq!(std::fs::read_to_string(&knob).unwrap().trim(), "1000");
    }

    // Without the service the CLI works on the files.
    assert_eq!(svc.term().code(), Some(0));
    let o = cli(
        &bus.address,
        &root,
        &["apply", "--holder", "late", "--min", "0"],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&knob).unwrap().trim(), "0");
    let o = cli(&bus.address, &root, &["restore"]);
    assert!(o.status.success(), "{}", text(&o));
}
