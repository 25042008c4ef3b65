//! Shared harness for the D-Bus tests and the bench: a private `dbus-daemon` per test and the real
//! `mdpilot serve` binary, both killed on drop.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A private bus: `dbus-daemon --config-file` listening on a socket in a temp dir that any user
/// may reach (so a test can call it as `nobody`). Killed on drop.
pub struct Bus {
    pub dir: tempfile::TempDir,
    pub address: String,
    child: Child,
}

impl Bus {
    /// Starts the daemon; `None` (with a message) when `dbus-daemon` is missing.
    pub fn start() -> Option<Bus> {
        Bus::start_with(
            "session",
            r#"<policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>"#,
        )
    }

    /// A bus whose default policy is the system bus's (deny owning and calling), plus the
    /// shipped `dbus/org.mdpilot.MdPilot1.conf`.
    pub fn start_system_like() -> Option<Bus> {
        let shipped =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("dbus/org.mdpilot.MdPilot1.conf");
        Bus::start_with(
            "system",
            &format!(
                r#"<policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus"
           send_interface="org.freedesktop.DBus.Introspectable"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
  </policy>
  <include>{}</include>"#,
                shipped.display()
            ),
        )
    }

    fn start_with(kind: &str, policy: &str) -> Option<Bus> {
        if Command::new("dbus-daemon")
            .arg("--version")
            .output()
            .is_err()
        {
            eprintln!("skipping: dbus-daemon not installed");
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("mdpilot-bus.")
            .tempdir()
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let sock = dir.path().join("bus");
        let conf = dir.path().join("bus.conf");
        // Everyone may connect (EXTERNAL auth: the kernel-checked uid) and call; the service
        // itself enforces who may change things, which is what the tests check.
        std::fs::write(
            &conf,
            format!(
                r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>{kind}</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  {policy}
</busconfig>
"#,
                sock.display()
            ),
        )
        .unwrap();
        let mut child = Command::new("dbus-daemon")
            .arg(format!("--config-file={}", conf.display()))
            .args(["--nofork", "--print-address=1"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let address = line.trim().to_string();
        assert!(!address.is_empty(), "dbus-daemon printed no address");
        Some(Bus {
            dir,
            address,
            child,
        })
    }

    /// An async connection to this bus.
    pub async fn connect(&self) -> zbus::Connection {
        zbus::connection::Builder::address(self.address.as_str())
            .unwrap()
            .build()
            .await
            .unwrap()
    }
}

impl Bus {
    /// Kills the daemon now (every connection drops).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The real `mdpilot serve`, stopped with SIGKILL on drop unless [`Service::term`] was called
/// (the simulated tree is removed either way).
pub struct Service {
    pub child: Option<Child>,
    /// The simulated tree printed by `serve --sim` (`None` with `--root`).
    pub sim_root: Option<PathBuf>,
}

pub const BIN: &str = env!("CARGO_BIN_EXE_mdpilot");

impl Service {
    /// Starts `mdpilot serve --bus ADDR` plus `args` and waits until it owns the name.
    pub async fn start(bus: &Bus, args: &[&str], env: &[(&str, &str)]) -> Service {
        let mut cmd = Command::new(BIN);
        cmd.arg("serve").arg("--bus").arg(&bus.address).args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .env_remove("NOTIFY_SOCKET")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(p) = line.strip_prefix("mdpilot: simulated tree in ") {
                    let _ = tx.send(PathBuf::from(p));
                }
                eprintln!("[serve] {line}");
            }
        });
        let conn = bus.connect().await;
        let dbus = zbus::fdo::DBusProxy::new(&conn).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let name = zbus::names::BusName::try_from("org.mdpilot.MdPilot1").unwrap();
            if dbus.name_has_owner(name).await.unwrap_or(false) {
                break;
            }
            if let Some(st) = child.try_wait().unwrap() {
                panic!("mdpilot serve exited early: {st}");
            }
            assert!(
                Instant::now() < deadline,
                "mdpilot serve did not own the name"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let sim_root = if args.contains(&"--sim") {
            Some(rx.recv_timeout(Duration::from_secs(5)).unwrap())
        } else {
            None
        };
        Service {
            child: Some(child),
            sim_root,
        }
    }

    /// The pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Sends SIGTERM and waits for the exit status (at most 20 s).
    pub fn term(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().unwrap();
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                return st;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("mdpilot serve ignored SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        // SIGKILL gives the simulator no chance to remove its tree: do it here.
        if let Some(dir) = &self.sim_root {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// One CheckAuthorization the fake polkit answered.
#[derive(Debug, Clone)]
pub struct Asked {
    /// Subject kind and uid: `unix-process uid=65534`.
    pub subject: String,
    /// The action id.
    pub action: String,
    /// The details (`method`, `device`, `polkit.message`, ...).
    pub details: std::collections::HashMap<String, String>,
    /// CheckAuthorization flags (1 = AllowUserInteraction).
    pub flags: u32,
}

type Subject = (
    String,
    std::collections::HashMap<String, zbus::zvariant::OwnedValue>,
);

/// A stand-in polkit authority on a private bus: answers `allow` and records what it was asked
/// and by which unique names. Point the service at it with
/// `DBUS_SYSTEM_BUS_ADDRESS=<the bus>`.
pub struct FakePolkit {
    allow: bool,
    asked: std::sync::Arc<std::sync::Mutex<Vec<Asked>>>,
    askers: std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>,
}

/// A served [`FakePolkit`]: its connection (owning `org.freedesktop.PolicyKit1`) and records.
pub struct PolkitHandle {
    _conn: zbus::Connection,
    asked: std::sync::Arc<std::sync::Mutex<Vec<Asked>>>,
    askers: std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>,
}

impl PolkitHandle {
    /// Every question so far.
    pub fn asked(&self) -> Vec<Asked> {
        self.asked.lock().unwrap().clone()
    }
    /// The unique names that asked.
    pub fn askers(&self) -> std::collections::BTreeSet<String> {
        self.askers.lock().unwrap().clone()
    }
}

impl FakePolkit {
    /// Serves a fake authority answering `allow` on `bus`.
    pub async fn serve(bus: &Bus, allow: bool) -> PolkitHandle {
        let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let askers = std::sync::Arc::new(std::sync::Mutex::new(Default::default()));
        let conn = zbus::connection::Builder::address(bus.address.as_str())
            .unwrap()
            .serve_at(
                "/org/freedesktop/PolicyKit1/Authority",
                FakePolkit {
                    allow,
                    asked: asked.clone(),
                    askers: askers.clone(),
                },
            )
            .unwrap()
            .name("org.freedesktop.PolicyKit1")
            .unwrap()
            .build()
            .await
            .unwrap();
        PolkitHandle {
            _conn: conn,
            asked,
            askers,
        }
    }
}

#[zbus::interface(name = "org.freedesktop.PolicyKit1.Authority")]
impl FakePolkit {
    fn check_authorization(
        &self,
        subject: Subject,
        action_id: String,
        details: std::collections::HashMap<String, String>,
        flags: u32,
        _cancellation_id: String,
        #[zbus(header)] header: zbus::message::Header<'_>,
    ) -> (bool, bool, std::collections::HashMap<String, String>) {
        if let Some(s) = header.sender() {
            self.askers.lock().unwrap().insert(s.to_string());
        }
        let uid = subject
            .1
            .get("uid")
            .and_then(|v| i32::try_from(v.try_clone().ok()?).ok())
            .unwrap_or(-1);
        self.asked.lock().unwrap().push(Asked {
            subject: format!("{} uid={uid}", subject.0),
            action: action_id,
            details,
            flags,
        });
        (self.allow, false, std::collections::HashMap::new())
    }
}
