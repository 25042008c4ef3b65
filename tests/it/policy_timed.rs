//! Timed leases and named profiles (`policy apply --for`, `--profile`) on temporary roots:
//! the adapter, the state file and the CLI's file path (never the host's /proc/sys or /sys).

use crate::support;

use mdpilot::host::unix_now_s;
use mdpilot::policy::LeaseKind;
use std::collections::BTreeMap;
use support::tree::write;
use support::{global, stderr, FakeTree};

#[test]
fn timed_lease_expires_and_restores_as_a_release_even_after_a_restart() {
    let t = FakeTree::new();
    let p = t.policy();
    let v = p
        .acquire_until(global("boost", Some(50_000), None), Some(2_000))
        .unwrap();
    assert_eq!(t.gmin(), "50000");
    assert_eq!(v.leases[0].expires_unix_s, Some(2_000));
    let text = std::fs::read_to_string(t.state_path()).unwrap();
    assert!(text.contains("[expires]\nboost = 2000\n"), "{text}");
    // Another lease keeps its own limits when the timed one ends.
    p.acquire(global("installer", None, Some(100_000))).unwrap();
    assert_eq!(p.next_expiry(), Some(2_000));
    assert!(p.expire(1_999).unwrap().is_none());
    // "Restart": a new adapter on the same state file still knows the end.
    let p2 = t.policy();
    let v = p2.expire(2_000).unwrap().expect("released");
    assert_eq!(t.gmin(), "1000");
    assert_eq!(t.gmax(), "100000");
    assert_eq!(v.leases.len(), 1);
    assert_eq!(v.leases[0].holder, "installer");
    assert_eq!(p2.next_expiry(), None);
    p2.release("installer").unwrap();
    assert_eq!(t.gmax(), "200000");
}

#[test]
fn replacing_a_timed_lease_without_duration_drops_the_end() {
    let t = FakeTree::new();
    let p = t.policy();
    p.acquire_until(global("q", None, Some(5000)), Some(10))
        .unwrap();
    let v = p.acquire(global("q", None, Some(6000))).unwrap();
    assert_eq!(v.leases[0].expires_unix_s, None);
    assert!(p.expire(u64::MAX).unwrap().is_none());
    assert_eq!(t.gmax(), "6000");
    // release and restore forget the end with the lease.
    p.acquire_until(global("q", None, Some(5000)), Some(10))
        .unwrap();
    p.restore(false).unwrap();
    assert_eq!(p.next_expiry(), None);
}

#[test]
fn state_file_without_expires_still_parses() {
    let t = FakeTree::new();
    let p = t.policy();
    p.acquire(global("installer", Some(0), None)).unwrap();
    let text = std::fs::read_to_string(t.state_path()).unwrap();
    assert!(!text.contains("expires"), "{text}");
    assert_eq!(t.policy().show().unwrap().leases.len(), 1);
}

#[test]
fn cli_apply_profile_for_and_show() {
    let t = FakeTree::new();
    write(
        t.dir.path(),
        "etc/mdpilot/config.d/50-profiles.toml",
        "[profiles.boost]\nmin = 50000\n[profiles.quiet]\nmax = 5000\nduration = \"30min\"\n",
    );
    let out = t
        .policy_cmd()
        .args([
            "apply",
            "--profile",
            "boost",
            "--for",
            "2h",
            "--holder",
            "admin",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(t.gmin(), "50000");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let end = v["leases"][0]["expires_unix_s"].as_u64().unwrap();
    let now = unix_now_s();
    assert!((now + 7_190..=now + 7_200).contains(&end), "{end} vs {now}");
    // The profile's own duration applies without --for.
    let out = t
        .policy_cmd()
        .args(["apply", "--profile", "quiet", "--holder", "q"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(t.gmax(), "5000");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains("q: kind installer") && text.contains("(ends in 1"),
        "{text}"
    );
    for (args, msg) in [
        (vec!["apply", "--profile", "loud"], "no profile \"loud\""),
        (vec!["apply", "--for", "soon"], "duration"),
        (vec!["apply", "--for", "0"], "0"),
        (
            vec!["apply", "--profile", "boost", "--min", "1"],
            "cannot be used",
        ),
    ] {
        let out = t.policy_cmd().args(&args).output().unwrap();
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        assert!(stderr(&out).contains(msg), "{args:?}: {}", stderr(&out));
    }
    // An ended lease is dropped by the next mutating command (no service running).
    let p = t.policy();
    p.acquire_until(global("gone", None, Some(4000)), Some(1))
        .unwrap();
    assert_eq!(t.gmax(), "4000");
    let out = t
        .policy_cmd()
        .args(["release", "--holder", "q"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(t.gmax(), "200000");
}

#[test]
fn a_lease_keeps_when_it_was_first_taken_and_metrics_show_the_installers() {
    let t = FakeTree::new();
    let p = t.policy();
    let mut installer = global("installer", Some(0), None);
    installer.kind = LeaseKind::Installer;
    let before = unix_now_s();
    let v = p.acquire(installer.clone()).unwrap();
    let taken = v.leases[0].taken_unix_s.expect("taken time recorded");
    assert!(taken >= before && taken <= unix_now_s(), "{taken}");
    let text = std::fs::read_to_string(t.state_path()).unwrap();
    assert!(
        text.contains(&format!("[taken]\ninstaller = {taken}\n")),
        "{text}"
    );
    // Replacing the lease (the hook run again) keeps the first time, also in a new adapter.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let v = t.policy().acquire(installer.clone()).unwrap();
    assert_eq!(v.leases[0].taken_unix_s, Some(taken));
    assert_eq!(mdpilot::metrics::install_applied_at(&v), Some(taken as f64));
    // An admin lease is not the install policy.
    let v = p.acquire(global("boost", Some(5), None)).unwrap();
    assert_eq!(mdpilot::metrics::install_applied_at(&v), Some(taken as f64));
    // Released: the time goes with it; taken again, it is new.
    let v = p.release("installer").unwrap();
    assert_eq!(mdpilot::metrics::install_applied_at(&v), None);
    let v = p.acquire(installer).unwrap();
    let l = v.leases.iter().find(|l| l.holder == "installer").unwrap();
    assert!(l.taken_unix_s.unwrap() > taken);
}

/// A timed or profile lease taken without `--holder` never replaces the installer's lease (the
/// udeb's partman hook takes `installer`): it gets its own holder (`timed`, the profile's name)
/// and kind admin, and when it ends the installer's min 0 still applies.
#[test]
fn timed_and_profile_leases_do_not_replace_the_installers() {
    let t = FakeTree::new();
    write(
        t.dir.path(),
        "etc/mdpilot/config.d/50-profiles.toml",
        "[profiles.boost]\nmin = 50000\n",
    );
    let apply = |args: &[&str]| {
        let out = t.policy_cmd().arg("apply").args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    };
    apply(&[]); // the install policy, as the installer takes it
    assert_eq!(t.gmin(), "0");
    apply(&["--max", "5000", "--for", "1s"]);
    apply(&["--profile", "boost"]);
    let p = t.policy();
    let v = p.show().unwrap();
    let kinds: BTreeMap<String, LeaseKind> = v
        .leases
        .iter()
        .map(|l| (l.holder.clone(), l.kind))
        .collect();
    assert_eq!(
        kinds,
        BTreeMap::from([
            ("boost".to_string(), LeaseKind::Admin),
            ("installer".to_string(), LeaseKind::Installer),
            ("timed".to_string(), LeaseKind::Admin),
        ])
    );
    // The lowest min wins: the installer's 0, whatever boost asks.
    assert_eq!(t.gmin(), "0");
    assert_eq!(t.gmax(), "5000");
    // The timed lease ends; the installer's lease still applies.
    p.expire(unix_now_s() + 5)
        .unwrap()
        .expect("the timed lease ended");
    assert_eq!(t.gmin(), "0");
    assert_eq!(t.gmax(), "200000");
    // D-Bus's name for the kind is accepted too.
    apply(&["--holder", "gui", "--kind", "client", "--min", "7"]);
}
