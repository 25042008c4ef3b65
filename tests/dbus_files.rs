//! The shipped service files agree with the code: bus name, polkit action, unit type.

use std::path::Path;

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap()
}

fn keys(unit: &str) -> Vec<(String, String)> {
    unit.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('['))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

#[test]
fn systemd_unit_is_notify_owns_the_name_and_can_write_the_knobs() {
    let unit = read("systemd/mdpilot.service");
    let k = keys(&unit);
    let get = |name: &str| k.iter().find(|(a, _)| a == name).map(|(_, v)| v.as_str());
    assert_eq!(get("Type"), Some("notify"));
    assert_eq!(get("BusName"), Some(mdpilot::dbus::BUS_NAME));
    assert_eq!(get("KillSignal"), Some("SIGTERM"));
    // /proc/sys and /sys must stay writable: ProtectKernelTunables=yes would forbid it.
    assert_ne!(get("ProtectKernelTunables"), Some("yes"));
    let rw = get("ReadWritePaths").unwrap_or("");
    for p in ["/proc/sys/dev/raid", "/sys/block", "/run/mdpilot"] {
        assert!(rw.contains(p), "ReadWritePaths lacks {p}: {rw}");
    }
    // The unit verifies where systemd-analyze exists (not in every CI image).
    if let Ok(out) = std::process::Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("systemd/mdpilot.service"))
        .output()
    {
        let err = String::from_utf8_lossy(&out.stderr);
        // Only complaints about the unit itself count (ExecStart's binary is not installed).
        let bad: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("mdpilot.service") && !l.contains("/usr/bin/mdpilot"))
            .collect();
        assert!(bad.is_empty(), "{err}");
    }
}

#[test]
fn activation_bus_policy_and_polkit_files_name_the_service() {
    let act = read("dbus/org.mdpilot.MdPilot1.service");
    assert!(act.contains("Name=org.mdpilot.MdPilot1"));
    assert!(act.contains("SystemdService=mdpilot.service"));
    assert!(act.contains("User=root"));
    let conf = read("dbus/org.mdpilot.MdPilot1.conf");
    assert!(conf.contains(r#"<policy user="root">"#));
    assert!(conf.contains(r#"<allow own="org.mdpilot.MdPilot1"/>"#));
    assert!(conf.contains(r#"<deny own="org.mdpilot.MdPilot1"/>"#));
    let pk = read("dbus/org.mdpilot.MdPilot1.policy");
    assert!(pk.contains(&format!(
        r#"<action id="{}">"#,
        mdpilot::dbus::POLKIT_ACTION
    )));
}

#[test]
fn unit_is_hardened_and_started_on_demand() {
    let unit = read("systemd/mdpilot.service");
    let k = keys(&unit);
    let get = |name: &str| k.iter().find(|(a, _)| a == name).map(|(_, v)| v.as_str());
    assert!(get("Documentation")
        .unwrap_or("")
        .contains("man:mdpilot(8)"));
    assert_eq!(get("UMask"), Some("0077"));
    assert_eq!(get("IPAddressDeny"), Some("any"));
    assert_eq!(get("RestrictAddressFamilies"), Some("AF_UNIX AF_NETLINK"));
    assert_eq!(get("DevicePolicy"), Some("closed"));
    assert_eq!(get("DeviceAllow"), Some("block-* rw"));
    // Started by D-Bus activation or the udev rule, not on every boot.
    assert_eq!(get("WantedBy"), None);
    assert_eq!(get("Alias"), Some("dbus-org.mdpilot.MdPilot1.service"));
    // The activation file starts the same command line (when the bus starts it without systemd).
    let act = read("dbus/org.mdpilot.MdPilot1.service");
    let exec = get("ExecStart").unwrap();
    assert!(act.contains(&format!("Exec={exec}")), "{act}");
    let rule = read("packaging/udev/69-mdpilot.rules");
    assert!(rule.contains(r#"ENV{SYSTEMD_WANTS}+="mdpilot.service""#));
    assert!(rule.contains(r#"KERNEL!="md*""#));
}
