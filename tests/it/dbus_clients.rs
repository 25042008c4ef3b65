//! Clients we did not write, against `mdpilot serve --sim` on a private `dbus-daemon`:
//! `examples/installer_client.py` (GLib through python3-gi, as a GTK installer) and `gdbus`
//! (libglib2.0-bin). Each test prints "skipped: ..." and passes when its tool is missing (fails
//! under `MDPILOT_REQUIRE_ALL=1`); the installer test writes only to a loop device it attached
//! itself (root only).

use crate::support;

use std::path::Path;
use std::process::Command;
use support::bus::{managed_objects, ARRAY_IFACE, BUS_NAME, MANAGER_IFACE, ROOT_PATH};
use support::{Bus, LoopDev, Service, MIB};

/// The distribution's python3 (python3-gi is installed for it, not for a pyenv one).
fn python_with_gi() -> Option<&'static str> {
    ["/usr/bin/python3", "python3"].into_iter().find(|py| {
        Command::new(py)
            .args([
                "-c",
                "import gi; gi.require_version('Gio', '2.0'); from gi.repository import Gio",
            ])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

fn gdbus(bus: &Bus, args: &[&str]) -> String {
    let out = Command::new("gdbus")
        .args([args[0], "--address", &bus.address, "--dest", BUS_NAME])
        .args(&args[1..])
        .output()
        .expect("gdbus");
    assert!(
        out.status.success(),
        "gdbus {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// The property names `dbus/<iface>.xml` documents.
fn documented_properties(iface: &str) -> Vec<String> {
    let xml = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("dbus/{iface}.xml")),
    )
    .unwrap();
    xml.split("<property name=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_installer_client_in_python_gi_wipes_and_leaves_nothing() {
    need_root!();
    let Some(py) = python_with_gi() else {
        skip!("python3-gi not installed (apt-get install python3-gi gir1.2-glib-2.0)")
    };
    let Some(bus) = Bus::start() else { return };
    let dev = LoopDev::filled(64 * MIB, 0x5a);
    // Under --sim only the devices MDPILOT_SIM_DEVICES offers can be wiped (a fake tree never
    // opens a host node it does not hold).
    let offered = dev.path.display().to_string();
    let _svc = Service::sim(&bus, &[("MDPILOT_SIM_DEVICES", offered.as_str())]).await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/installer_client.py");
    let out = tokio::process::Command::new(py)
        .arg(&script)
        .args(["--address", &bus.address, "--device"])
        .arg(&dev.path)
        .args(["--timeout", "60"])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    eprintln!("{stdout}");
    for step in [
        "arrays: ",
        "lease: ",
        "job: /org/mdpilot/MdPilot1/jobs/",
        "completed: True",
        "released",
        "clean: no leases",
    ] {
        assert!(
            stdout.lines().any(|l| l.starts_with(step)),
            "no {step:?} line:\n{stdout}\n{stderr}"
        );
    }
    // Both simulated arrays were listed.
    let arrays = stdout.lines().find(|l| l.starts_with("arrays: ")).unwrap();
    assert_eq!(
        arrays.matches(" (/org/mdpilot/MdPilot1/").count(),
        2,
        "{arrays}"
    );
    assert!(
        dev.read_all().iter().all(|&b| b == 0),
        "the device was not wiped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gdbus_introspect_shows_every_documented_array_property() {
    if !support::have("gdbus", "libglib2.0-bin") {
        return;
    }
    let Some(bus) = Bus::start() else { return };
    let _svc = Service::sim(&bus, &[]).await;
    let text = gdbus(
        &bus,
        &["introspect", "--object-path", ROOT_PATH, "--recurse"],
    );
    let props = documented_properties(ARRAY_IFACE);
    assert!(props.len() > 5, "{props:?}");
    // gdbus prints one "node /path {" block per object, each with its interfaces.
    let nodes: Vec<&str> = text
        .split("node /")
        .filter(|n| n.contains(&format!("interface {ARRAY_IFACE} {{")))
        .collect();
    assert_eq!(nodes.len(), 2, "two simulated arrays:\n{text}");
    for n in nodes {
        let iface = &n[n.find(&format!("interface {ARRAY_IFACE} {{")).unwrap()..];
        let iface = &iface[..iface.find("\n    };").unwrap_or(iface.len())];
        for p in &props {
            assert!(
                iface.contains(&format!(" {p} = ")),
                "{p} missing on node /{}",
                n.lines().next().unwrap_or("")
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gdbus_sees_the_manager_in_get_managed_objects_and_a_min_0_lease_as_0() {
    if !support::have("gdbus", "libglib2.0-bin") {
        return;
    }
    let Some(bus) = Bus::start() else { return };
    let _svc = Service::sim(&bus, &[]).await;
    let objects = gdbus(
        &bus,
        &[
            "call",
            "--object-path",
            ROOT_PATH,
            "--method",
            "org.freedesktop.DBus.ObjectManager.GetManagedObjects",
        ],
    );
    assert!(
        objects.contains(&format!("'{MANAGER_IFACE}': {{")),
        "no Manager in GetManagedObjects:\n{objects}"
    );
    // The Manager's path, from the ObjectManager (not a constant).
    let conn = bus.connect().await;
    let manager = managed_objects(&conn)
        .await
        .into_iter()
        .find(|(_, ifaces)| ifaces.contains_key(MANAGER_IFACE))
        .map(|(p, _)| p.to_string())
        .unwrap();
    let id = gdbus(
        &bus,
        &[
            "call",
            "--object-path",
            &manager,
            "--method",
            &format!("{MANAGER_IFACE}.AcquirePriority"),
            "{'min': <uint64 0>, 'holder': <'gdbus-test'>}",
        ],
    );
    assert!(id.contains("'gdbus-test'"), "{id}");
    let leases = gdbus(
        &bus,
        &[
            "call",
            "--object-path",
            &manager,
            "--method",
            "org.freedesktop.DBus.Properties.Get",
            MANAGER_IFACE,
            "Leases",
        ],
    );
    assert!(leases.contains("'gdbus-test'"), "{leases}");
    assert!(
        leases.contains("'min': <uint64 0>"),
        "a lease taken with min 0 reads back as min 0:\n{leases}"
    );
    assert!(
        !leases.contains("'max':"),
        "an unset max stays absent:\n{leases}"
    );
    gdbus(
        &bus,
        &[
            "call",
            "--object-path",
            &manager,
            "--method",
            &format!("{MANAGER_IFACE}.ReleasePriority"),
            "gdbus-test",
        ],
    );
}
