//! A private `dbus-daemon` per test and the real `mdpilot serve` on it, both killed on drop; the
//! calls the D-Bus tests make, by the crate's own names.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};

pub use mdpilot::dbus::client::{JobProxy, ManagerProxy};
pub use mdpilot::dbus::manager::{LeaseDict, LeaseEntry};
pub use mdpilot::dbus::{
    array_path, BusChoice, ARRAY_IFACE, BUS_NAME, MANAGER_IFACE, MANAGER_PATH, ROOT_PATH,
};

/// What `org.freedesktop.DBus.ObjectManager.GetManagedObjects` returns: object path →
/// interface → property → value.
pub type Managed = HashMap<OwnedObjectPath, HashMap<String, HashMap<String, OwnedValue>>>;

/// `org.mdpilot.MdPilot1.Job`, as the crate's [`JobProxy`] names it (the crate has no constant).
pub fn job_iface() -> &'static str {
    <JobProxy as zbus::proxy::Defaults>::INTERFACE
        .as_ref()
        .expect("JobProxy names its interface")
        .as_str()
}

/// `<ROOT_PATH>/jobs`, the parent of every job object (the crate's
/// [`mdpilot::dbus::job::job_path`] names each one).
pub fn jobs_path() -> String {
    format!("{ROOT_PATH}/jobs")
}

/// Every signal under `<ROOT_PATH>/jobs` (subscribe before the job starts, so a fast job's
/// signals are not missed); 256 queued at most.
pub async fn job_signals(conn: &zbus::Connection) -> zbus::MessageStream {
    let rule = zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .path_namespace(jobs_path())
        .unwrap()
        .build();
    zbus::MessageStream::for_match_rule(rule, conn, Some(256))
        .await
        .unwrap()
}

/// A private bus: `dbus-daemon --config-file` listening on a socket in a temp dir that any user
/// may reach (so a test can call it as `nobody`). Killed on drop.
pub struct Bus {
    /// The temp dir of the socket and the config (removed on drop).
    #[allow(dead_code)] // held for its drop; the benches read it
    pub dir: tempfile::TempDir,
    pub address: String,
    child: Child,
}

impl Bus {
    /// Starts the daemon; `None` (having printed "skipped") when `dbus-daemon` is missing.
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
    /// shipped `dist/usr/share/dbus-1/system.d/org.mdpilot.MdPilot1.conf`.
    pub fn start_system_like() -> Option<Bus> {
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("dist/usr/share/dbus-1/system.d/{BUS_NAME}.conf"));
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
            super::skipped("dbus-daemon not installed (apt-get install dbus-daemon)");
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
        connect_to(&self.address).await
    }

    /// Kills the daemon now (every connection drops).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        self.kill();
    }
}

/// An async connection to the bus at `address`.
pub async fn connect_to(address: &str) -> zbus::Connection {
    zbus::connection::Builder::address(address)
        .unwrap()
        .build()
        .await
        .unwrap()
}

/// The real `mdpilot serve`, stopped with SIGKILL on drop unless [`Service::term`] was called
/// (the simulated tree is removed either way).
pub struct Service {
    pub child: Option<Child>,
    /// The simulated tree printed by `serve --sim` (`None` with `--root`).
    pub sim_root: Option<PathBuf>,
    /// The service's `SIGHUP: configuration …` log lines, one per reload ([`Service::reload`]).
    reloads: std::sync::Mutex<std::sync::mpsc::Receiver<String>>,
    /// Every line of its standard error so far ([`Service::log_lines`]).
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// The thread reading its standard error (ends when the service has exited).
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Service {
    /// Starts `mdpilot serve --bus ADDR` plus `args` and waits until it owns the name.
    pub async fn start(bus: &Bus, args: &[&str], env: &[(&str, &str)]) -> Service {
        let mut cmd = Command::new(super::BIN);
        cmd.arg("serve").arg("--bus").arg(&bus.address).args(args);
        // The service's own records at info (its reload line, for [`Service::reload`]); the rest
        // at warn, as on a terminal. A test's own RUST_LOG in `env` wins.
        cmd.env("RUST_LOG", "warn,mdpilot::service=info");
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
        let (reload_tx, reloads) = std::sync::mpsc::channel();
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let lines = log.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line.clone());
                if let Some(p) = line.strip_prefix("mdpilot: simulated tree in ") {
                    let _ = tx.send(PathBuf::from(p));
                }
                if line.contains("SIGHUP: configuration") {
                    let _ = reload_tx.send(line.clone());
                }
                eprintln!("[serve] {line}");
            }
        });
        let conn = bus.connect().await;
        let deadline = Instant::now() + Duration::from_secs(20);
        // The name owned by this child, not by an instance the test killed a moment ago whose
        // connection the daemon has not dropped yet (that one would make this return at once
        // and the new instance fail with the name taken).
        while name_owner_pid(&conn).await != Some(child.id()) {
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
            reloads: std::sync::Mutex::new(reloads),
            log,
            reader: Some(reader),
        }
    }

    /// `mdpilot serve --sim` (plus `env`): the simulator's own tree.
    pub async fn sim(bus: &Bus, env: &[(&str, &str)]) -> Service {
        Service::start(bus, &["--sim"], env).await
    }

    /// `mdpilot serve --root ROOT` (plus `env`) over a tree the test owns.
    pub async fn on_root(bus: &Bus, root: &Path, env: &[(&str, &str)]) -> Service {
        Service::start(bus, &["--root", root.to_str().unwrap()], env).await
    }

    /// A path inside the simulated tree of `serve --sim`, e.g. `proc/sys/dev/raid/speed_limit_min`.
    pub fn sim_path(&self, rel: &str) -> PathBuf {
        self.sim_root
            .as_ref()
            .expect("started with --sim")
            .join(rel)
    }

    /// `systemctl reload`: sends SIGHUP and waits (at most 60 s) for the service's own log line
    /// that the reload is done (`SIGHUP: configuration reloaded…` or `…not reloaded…`), which
    /// it returns: the configuration is in effect from then on, with no sleep to guess it.
    pub fn reload(&self) -> String {
        let rx = self.reloads.lock().unwrap();
        while rx.try_recv().is_ok() {}
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.pid() as i32, libc::SIGHUP) };
        rx.recv_timeout(Duration::from_secs(60))
            .expect("no `SIGHUP: configuration` line from mdpilot serve within 60 s")
    }

    /// Every line the service has written to its standard error so far; after [`Service::term`]
    /// all of them (it waits for the end of the stream).
    pub fn log_lines(&mut self) -> Vec<String> {
        if self.child.is_none() {
            if let Some(r) = self.reader.take() {
                let _ = r.join();
            }
        }
        self.log.lock().unwrap().clone()
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

/// The pid of the connection that owns `org.mdpilot.MdPilot1` on `conn`'s bus (the daemon's
/// `GetConnectionUnixProcessID`), `None` while the name has no owner.
pub async fn name_owner_pid(conn: &zbus::Connection) -> Option<u32> {
    let dbus = zbus::fdo::DBusProxy::new(conn).await.ok()?;
    let name = zbus::names::BusName::try_from(BUS_NAME).ok()?;
    dbus.get_connection_unix_process_id(name).await.ok()
}

/// True when `org.mdpilot.MdPilot1` has an owner on `conn`'s bus; panics when the bus cannot
/// say (unlike the crate's `mdpilot::dbus::client::service_running`, which answers false).
pub async fn name_owned(conn: &zbus::Connection) -> bool {
    let dbus = zbus::fdo::DBusProxy::new(conn).await.unwrap();
    let name = zbus::names::BusName::try_from(BUS_NAME).unwrap();
    dbus.name_has_owner(name).await.unwrap()
}

/// The `a{sv}` options argument of the Manager and Job methods.
pub fn opts(kv: &[(&str, Value<'static>)]) -> HashMap<String, Value<'static>> {
    kv.iter()
        .map(|(k, v)| ((*k).to_string(), v.clone()))
        .collect()
}

/// Calls `iface.method(body)` on the object at `path` of the service.
pub async fn call<B>(
    conn: &zbus::Connection,
    path: &str,
    iface: &str,
    method: &str,
    body: &B,
) -> zbus::Result<zbus::Message>
where
    B: serde::Serialize + zbus::zvariant::DynamicType,
{
    conn.call_method(Some(BUS_NAME), path, Some(iface), method, body)
        .await
}

/// Calls a Manager method.
pub async fn call_manager<B>(
    conn: &zbus::Connection,
    method: &str,
    body: &B,
) -> zbus::Result<zbus::Message>
where
    B: serde::Serialize + zbus::zvariant::DynamicType,
{
    call(conn, MANAGER_PATH, MANAGER_IFACE, method, body).await
}

/// `Manager.AcquirePriority` with the options `kv`: the lease id.
pub async fn acquire(
    conn: &zbus::Connection,
    kv: &[(&str, Value<'static>)],
) -> zbus::Result<String> {
    call_manager(conn, "AcquirePriority", &(opts(kv),))
        .await?
        .body()
        .deserialize()
}

/// The D-Bus error name of a failed call, `success`, or `other error: ...`.
pub fn error_name<T>(r: zbus::Result<T>) -> String {
    match r {
        Err(zbus::Error::MethodError(name, _, _)) => name.to_string(),
        Err(e) => format!("other error: {e}"),
        Ok(_) => "success".into(),
    }
}

/// `org.freedesktop.DBus.Properties.Get` on the service; the call's own result.
pub async fn try_get(
    conn: &zbus::Connection,
    path: &str,
    iface: &str,
    prop: &str,
) -> zbus::Result<zbus::Message> {
    call(
        conn,
        path,
        "org.freedesktop.DBus.Properties",
        "Get",
        &(iface, prop),
    )
    .await
}

/// A property of an object of the service (panics when the call fails).
pub async fn get(conn: &zbus::Connection, path: &str, iface: &str, prop: &str) -> OwnedValue {
    try_get(conn, path, iface, prop)
        .await
        .unwrap()
        .body()
        .deserialize::<OwnedValue>()
        .unwrap()
}

/// The Manager's `Leases` property (checked to be `aa{sv}`), each entry read back by the
/// crate's [`LeaseEntry::from_dict`].
pub async fn leases(conn: &zbus::Connection) -> Vec<LeaseEntry> {
    let v = get(conn, MANAGER_PATH, MANAGER_IFACE, "Leases").await;
    assert_eq!(v.value_signature().to_string(), "aa{sv}", "Leases");
    let dicts: Vec<LeaseDict> = v.try_into().unwrap();
    dicts.iter().map(LeaseEntry::from_dict).collect()
}

/// `GetManagedObjects` of the ObjectManager at [`ROOT_PATH`].
pub async fn managed_objects(conn: &zbus::Connection) -> Managed {
    call(
        conn,
        ROOT_PATH,
        "org.freedesktop.DBus.ObjectManager",
        "GetManagedObjects",
        &(),
    )
    .await
    .unwrap()
    .body()
    .deserialize()
    .unwrap()
}

/// The object path the running service gives array `kernel` (`md0`): the object of
/// [`managed_objects`] whose `KernelName` is `kernel`; panics when there is none.
pub async fn find_array_path(conn: &zbus::Connection, kernel: &str) -> String {
    let objs = managed_objects(conn).await;
    objs.iter()
        .find(|(_, ifaces)| {
            ifaces
                .get(ARRAY_IFACE)
                .and_then(|p| p.get("KernelName"))
                .and_then(|v| String::try_from(v.try_clone().ok()?).ok())
                .is_some_and(|k| k == kernel)
        })
        .map_or_else(
            || panic!("no array {kernel} among {:?}", objs.keys()),
            |(p, _)| p.to_string(),
        )
}

/// The object path of the simulator's array `kernel` (`md0`, `md1`), keyed by the UUID the
/// simulator gives it ([`mdpilot::sim::Sim`], read back by [`mdpilot::array_names::array_uuid`] as the
/// service does), known before any service runs.
pub fn sim_array_path(kernel: &str) -> String {
    let sim = mdpilot::sim::Sim::create().unwrap();
    let uuid = mdpilot::array_names::array_uuid(sim.root(), kernel)
        .unwrap_or_else(|| panic!("the simulator has no array {kernel}"));
    array_path(&uuid, kernel)
}

/// Waits until `f` holds (at most 10 s).
pub async fn eventually<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !f().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The signals of `interface` (from the object at `path` only, when given), up to `max_queued`
/// waiting.
pub async fn signals(
    conn: &zbus::Connection,
    interface: &str,
    path: Option<&str>,
    max_queued: usize,
) -> zbus::MessageStream {
    let mut rule = zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .interface(interface.to_string())
        .unwrap();
    if let Some(p) = path {
        rule = rule.path(p.to_string()).unwrap();
    }
    zbus::MessageStream::for_match_rule(rule.build(), conn, Some(max_queued))
        .await
        .unwrap()
}

/// The next message of `s` before `deadline`; panics with `what` when none comes.
pub async fn next_before(
    s: &mut zbus::MessageStream,
    deadline: tokio::time::Instant,
    what: &str,
) -> zbus::Message {
    use futures_util::StreamExt;
    tokio::time::timeout_at(deadline, s.next())
        .await
        .unwrap_or_else(|_| panic!("{what}"))
        .unwrap()
        .unwrap()
}

/// The next message of `s` within `limit`; panics with `what` when none comes.
pub async fn next_within(
    s: &mut zbus::MessageStream,
    limit: Duration,
    what: &str,
) -> zbus::Message {
    next_before(s, tokio::time::Instant::now() + limit, what).await
}

/// `Introspect` of the object at `path` served by `dest` (the service when `None`).
pub async fn introspect(conn: &zbus::Connection, dest: Option<&str>, path: &str) -> String {
    conn.call_method(
        Some(dest.unwrap_or(BUS_NAME)),
        path,
        Some("org.freedesktop.DBus.Introspectable"),
        "Introspect",
        &(),
    )
    .await
    .unwrap()
    .body()
    .deserialize::<String>()
    .unwrap()
}

/// The `<interface name="...">...</interface>` element of an introspection document, with
/// trailing blanks trimmed.
pub fn interface_xml(doc: &str, iface: &str) -> String {
    let start = doc
        .find(&format!("<interface name=\"{iface}\">"))
        .unwrap_or_else(|| panic!("{iface} not in introspection:\n{doc}"));
    let end = doc[start..].find("</interface>").unwrap() + start + "</interface>".len();
    doc[start..end]
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Asserts that the interface `iface` of the live introspection `live_doc` is the one committed
/// in `dbus/<iface>.xml`. With `MDPILOT_UPDATE_XML` set it rewrites that file instead, with a
/// comment `Generated from the <generated_from>` and, after the interface, the crate's errors
/// block ([`mdpilot::dbus::errors::xml_doc`]: every error name and the authorization rule).
pub fn assert_committed_xml(iface: &str, live_doc: &str, generated_from: &str) {
    let live = interface_xml(live_doc, iface);
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("dbus/{iface}.xml"));
    if std::env::var_os("MDPILOT_UPDATE_XML").is_some() {
        let doc = format!(
            "<!DOCTYPE node PUBLIC \"-//freedesktop//DTD D-BUS Object Introspection 1.0//EN\"\n \"http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd\">\n<!-- Generated from the {generated_from} -->\n<node>\n  {live}\n{}</node>\n",
            mdpilot::dbus::errors::xml_doc()
        );
        std::fs::write(&file, doc).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&file).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (regenerate with MDPILOT_UPDATE_XML=1)",
            file.display()
        )
    });
    pretty_assertions::assert_eq!(
        interface_xml(&committed, iface),
        live,
        "{} drifted from the live object; regenerate with MDPILOT_UPDATE_XML=1",
        file.display()
    );
}

/// Re-runs this test binary's `#[ignore]`d `helper` test (its full name, `module::fn`) as nobody
/// (`setpriv`) with `env` set, `MDPILOT_TEST_BUS` among them; asserts it succeeded as uid 65534 and returns its stdout.
pub async fn run_helper_as_nobody(helper: &str, env: &[(&str, &str)]) -> String {
    let mut cmd = super::as_nobody(std::env::current_exe().unwrap());
    cmd.args(["--exact", helper, "--ignored", "--nocapture"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out: Output = tokio::process::Command::from(cmd)
        .output()
        .await
        .expect("setpriv");
    let stdout = super::stdout(&out);
    assert!(
        out.status.success(),
        "helper failed: {stdout}\n{}",
        super::stderr(&out)
    );
    assert!(
        stdout.contains("UID 65534"),
        "helper did not run as nobody: {stdout}"
    );
    stdout
}

/// In a helper run by [`run_helper_as_nobody`]: the connection to `MDPILOT_TEST_BUS` (after
/// printing `UID <euid>`), or `None` when run by hand (having said "skipped").
pub async fn helper_connection(run_by: &str) -> Option<zbus::Connection> {
    let Ok(addr) = std::env::var("MDPILOT_TEST_BUS") else {
        // Not a skip (the test that needs it runs it): nothing to do when run by hand.
        eprintln!("helper: run by {run_by} as nobody; nothing to do by hand");
        return None;
    };
    let c = connect_to(&addr).await;
    // SAFETY: geteuid has no preconditions.
    println!("UID {}", unsafe { libc::geteuid() });
    Some(c)
}
