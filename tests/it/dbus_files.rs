//! The shipped service files agree with the code: bus name, polkit actions and their defaults,
//! unit type, the errors documented in the introspection XML.

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
    let unit = read("dist/usr/lib/systemd/system/mdpilot.service");
    let k = keys(&unit);
    let get = |name: &str| k.iter().find(|(a, _)| a == name).map(|(_, v)| v.as_str());
    assert_eq!(get("Type"), Some("notify"));
    assert_eq!(get("BusName"), Some(mdpilot::dbus::BUS_NAME));
    assert_eq!(get("KillSignal"), Some("SIGTERM"));
    // The loop's keep-alives (half the interval) and a restart when they stop coming.
    assert_eq!(get("WatchdogSec"), Some("60"));
    assert_eq!(get("Restart"), Some("on-failure"));
    assert_eq!(get("NotifyAccess"), Some("main"));
    assert!(
        unit.lines()
            .take_while(|l| !l.starts_with("WatchdogSec="))
            .last()
            .is_some_and(|l| l.starts_with('#')),
        "WatchdogSec= carries its reason in a comment"
    );
    // /proc/sys and /sys must stay writable: ProtectKernelTunables=yes would forbid it.
    assert_ne!(get("ProtectKernelTunables"), Some("yes"));
    let rw = get("ReadWritePaths").unwrap_or("");
    for p in ["/proc/sys/dev/raid", "/sys/block", "/run/mdpilot"] {
        assert!(rw.contains(p), "ReadWritePaths lacks {p}: {rw}");
    }
    // ProtectSystem=strict makes /var read-only: the check records and the wipe checkpoints
    // need the state directory, private (checkpoints hold random keys).
    assert_eq!(get("ProtectSystem"), Some("strict"));
    assert_eq!(get("StateDirectory"), Some("mdpilot"));
    assert_eq!(get("StateDirectoryMode"), Some("0700"));
    for dir in [
        mdpilot::config::DEFAULT_CHECK_STATE_PATH,
        mdpilot::wipe::checkpoint::DIR,
    ] {
        assert!(
            dir.starts_with("/var/lib/mdpilot/"),
            "{dir} is outside StateDirectory=mdpilot (read-only under ProtectSystem=strict)"
        );
    }
    // The unit verifies where systemd-analyze exists (a skip line without it).
    if !crate::support::have("systemd-analyze", "systemd") {
        return;
    }
    if let Ok(out) = std::process::Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("dist/usr/lib/systemd/system/mdpilot.service"),
        )
        .output()
    {
        let err = String::from_utf8_lossy(&out.stderr);
        // Only complaints about the unit itself count: systemd-analyze also looks for the
        // unit's programs on this host, where ExecStart's binary is not installed and a minimal
        // root may lack ExecReload's /bin/kill (procps).
        let missing_here = |l: &str| {
            l.split_once("Command ")
                .and_then(|(_, rest)| rest.split_once(" is not executable"))
                .is_some_and(|(cmd, _)| !Path::new(cmd).exists())
        };
        let bad: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("mdpilot.service") && !missing_here(l))
            .collect();
        assert!(bad.is_empty(), "{err}");
    }
}

#[test]
fn activation_bus_policy_and_polkit_files_name_the_service() {
    let act = read("dist/usr/share/dbus-1/system-services/org.mdpilot.MdPilot1.service");
    assert!(act.contains("Name=org.mdpilot.MdPilot1"));
    assert!(act.contains("SystemdService=mdpilot.service"));
    assert!(act.contains("User=root"));
    let conf = read("dist/usr/share/dbus-1/system.d/org.mdpilot.MdPilot1.conf");
    assert!(conf.contains(r#"<policy user="root">"#));
    assert!(conf.contains(r#"<allow own="org.mdpilot.MdPilot1"/>"#));
    assert!(conf.contains(r#"<deny own="org.mdpilot.MdPilot1"/>"#));
}

/// The `<action id="ID">...</action>` element of a polkit policy file.
fn action<'a>(pk: &'a str, id: &str) -> &'a str {
    let start = pk
        .find(&format!(r#"<action id="{id}">"#))
        .unwrap_or_else(|| panic!("no action {id}"));
    let end = pk[start..].find("</action>").unwrap() + start;
    &pk[start..end]
}

fn defaults(a: &str) -> [&str; 3] {
    ["allow_any", "allow_inactive", "allow_active"].map(|k| {
        let open = format!("<{k}>");
        let s = a.find(&open).unwrap_or_else(|| panic!("no {k}")) + open.len();
        let e = a[s..].find('<').unwrap() + s;
        &a[s..e]
    })
}

#[test]
fn polkit_actions_keep_for_priority_and_ask_every_time_for_wiping() {
    use mdpilot::dbus::auth::{BITMAP_ACTION, PRIORITY_ACTION, REPAIR_ACTION, WIPE_ACTION};
    let pk = read("dist/usr/share/polkit-1/actions/org.mdpilot.MdPilot1.policy");
    assert_eq!(
        defaults(action(&pk, PRIORITY_ACTION)),
        ["auth_admin", "auth_admin", "auth_admin_keep"]
    );
    // Destroying data never rides on a keep from a speed change.
    assert_eq!(
        defaults(action(&pk, WIPE_ACTION)),
        ["auth_admin", "auth_admin", "auth_admin"]
    );
    // A bitmap add rewrites superblocks: its own action, kept like a priority change.
    assert_eq!(
        defaults(action(&pk, BITMAP_ACTION)),
        ["auth_admin", "auth_admin", "auth_admin_keep"]
    );
    // A repair rewrites data: its own action, so an admin can allow checks and not repairs.
    assert_eq!(
        defaults(action(&pk, REPAIR_ACTION)),
        ["auth_admin", "auth_admin", "auth_admin_keep"]
    );
    assert_eq!(
        pk.matches("<action id=").count(),
        4,
        "only the four actions"
    );
    for id in [PRIORITY_ACTION, WIPE_ACTION, BITMAP_ACTION, REPAIR_ACTION] {
        let a = action(&pk, id);
        assert!(
            a.contains("<description>") && a.contains("<message>"),
            "{a}"
        );
    }
    // Well-formed XML (xmllint; a skip line without it).
    if !crate::support::have("xmllint", "libxml2-utils") {
        return;
    }
    if let Ok(out) = std::process::Command::new("xmllint")
        .args(["--noout"])
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("dist/usr/share/polkit-1/actions/org.mdpilot.MdPilot1.policy"),
        )
        .output()
    {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn every_introspection_file_documents_every_error_name() {
    let doc = mdpilot::dbus::errors::xml_doc();
    for iface in ["Manager", "Array", "Job"] {
        let rel = format!("dbus/org.mdpilot.MdPilot1.{iface}.xml");
        let xml = read(&rel);
        assert!(
            xml.contains(&doc),
            "{rel} lacks the errors block (mdpilot::dbus::errors::xml_doc()); regenerate with \
             MDPILOT_UPDATE_XML=1"
        );
        for (name, _) in mdpilot::dbus::errors::ERRORS {
            assert!(
                xml.contains(&format!("org.mdpilot.MdPilot1.Error.{name}:")),
                "{rel}: {name}"
            );
        }
    }
}

#[test]
fn unit_is_hardened_and_started_on_demand() {
    let unit = read("dist/usr/lib/systemd/system/mdpilot.service");
    let k = keys(&unit);
    let get = |name: &str| k.iter().find(|(a, _)| a == name).map(|(_, v)| v.as_str());
    assert!(get("Documentation")
        .unwrap_or("")
        .contains("man:mdpilot(8)"));
    assert_eq!(get("UMask"), Some("0077"));
    assert_eq!(get("IPAddressDeny"), Some("any"));
    assert_eq!(
        get("RestrictAddressFamilies"),
        Some("AF_UNIX AF_NETLINK AF_INET AF_INET6")
    );
    assert_eq!(get("IPAddressAllow"), Some("localhost"));
    assert_eq!(get("DevicePolicy"), Some("closed"));
    assert_eq!(get("DeviceAllow"), Some("block-* rw"));
    // Started by D-Bus activation or the udev rule, not on every boot.
    assert_eq!(get("WantedBy"), None);
    assert_eq!(get("Alias"), Some("dbus-org.mdpilot.MdPilot1.service"));
    // The activation file starts the same command line (when the bus starts it without systemd).
    let act = read("dist/usr/share/dbus-1/system-services/org.mdpilot.MdPilot1.service");
    let exec = get("ExecStart").unwrap();
    assert!(act.contains(&format!("Exec={exec}")), "{act}");
    let rule = read("dist/usr/lib/udev/rules.d/69-mdpilot.rules");
    assert!(rule.contains(r#"ENV{SYSTEMD_WANTS}+="mdpilot.service""#));
    assert!(rule.contains(r#"KERNEL!="md*""#));
}

/// The committed interface files are well-formed XML for strict parsers (expat, as
/// gdbus-codegen uses; xmllint): no `--` inside a comment, which docstrings with CLI options
/// (`--holder`) would put there.
#[test]
fn interface_comments_are_well_formed() {
    for iface in ["Manager", "Array", "Job"] {
        let rel = format!("dbus/org.mdpilot.MdPilot1.{iface}.xml");
        let xml = read(&rel);
        let mut rest = xml.as_str();
        while let Some(start) = rest.find("<!--") {
            let body = &rest[start + 4..];
            let end = body
                .find("-->")
                .unwrap_or_else(|| panic!("{rel}: unterminated comment"));
            let comment = &body[..end];
            assert!(
                !comment.contains("--"),
                "{rel}: `--` inside a comment is not XML: {comment:?}"
            );
            rest = &body[end + 3..];
        }
    }
}
