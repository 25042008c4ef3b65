//! `mdpilot serve --sim --metrics 127.0.0.1:PORT` on a private bus, scraped over HTTP and by a
//! real Prometheus (Debian's `prometheus`, on loopback, temporary storage), whose query API must
//! give the values `mdpilot status --json --root <sim root>` gives, before and after the
//! simulated arrays change; and `mdpilot status --format prometheus --output FILE`.
//!
//! Needs `dbus-daemon` (and `prometheus`/`promtool` for those parts): prints "skipped: ..."
//! without them. The bus and the service come from tests/it/support.

use crate::support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::bus::acquire;
use support::{Bus, Service, BIN};
use zbus::zvariant::Value;

/// Kills and reaps a child on drop.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `mdpilot serve --sim --metrics 127.0.0.1:PORT` (plus `env`) on `bus`, and the address. The
/// listener is bound before the service asks for its bus name, so /metrics answers once
/// [`Service::start`] returns.
async fn serve(bus: &Bus, env: &[(&str, &str)]) -> (Service, SocketAddr) {
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let s = Service::start(bus, &["--sim", "--metrics", &addr.to_string()], env).await;
    (s, addr)
}

/// A minimal HTTP/1.1 client: (status, lower-cased headers, body).
fn http(
    addr: SocketAddr,
    method: &str,
    target: &str,
    accept: Option<&str>,
) -> std::io::Result<(u16, String, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
    write!(
        s,
        "{method} {target} HTTP/1.1\r\nHost: {addr}\r\n{accept}Connection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((status, head.to_ascii_lowercase(), body.to_string()))
}

fn status_json(root: &Path) -> serde_json::Value {
    let out = Command::new(BIN)
        .args(["status", "--json", "--root"])
        .arg(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_endpoint_negotiates_the_format_and_refuses_other_requests() {
    let Some(bus) = Bus::start() else { return };
    let (_s, addr) = serve(&bus, &[]).await;
    let (code, head, text) = http(addr, "GET", "/metrics", None).unwrap();
    assert_eq!(code, 200);
    assert!(
        head.contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    assert!(
        text.contains("mdpilot_array_info{array=\"md1\",level=\"raid5\""),
        "{text}"
    );
    assert!(!text.contains("# EOF"));
    support::promtool_check_metrics("the /metrics page", &text);
    let (code, head, om) = http(
        addr,
        "GET",
        "/metrics",
        Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"),
    )
    .unwrap();
    assert_eq!(code, 200);
    assert!(
        head.contains("content-type: application/openmetrics-text; version=1.0.0"),
        "{head}"
    );
    assert!(om.ends_with("# EOF\n"), "{om}");
    let (code, head, body) = http(addr, "HEAD", "/metrics", None).unwrap();
    assert_eq!(code, 200);
    assert!(
        body.is_empty() && head.contains("content-length: "),
        "{head}"
    );
    assert_eq!(http(addr, "GET", "/", None).unwrap().0, 404);
    assert_eq!(http(addr, "POST", "/metrics", None).unwrap().0, 405);
}

#[test]
fn status_format_prometheus_writes_the_file_atomically() {
    let sim = mdpilot::sim::Sim::create().unwrap();
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("mdpilot.prom");
    let run = |extra: &[&str]| {
        Command::new(BIN)
            .args(["status", "--format", "prometheus", "--root"])
            .arg(sim.path())
            .args(extra)
            .output()
            .unwrap()
    };
    let o = run(&["--output", file.to_str().unwrap()]);
    assert!(o.status.success(), "{o:?}");
    assert!(o.stdout.is_empty());
    let text = std::fs::read_to_string(&file).unwrap();
    let stdout = String::from_utf8(run(&[]).stdout).unwrap();
    assert_eq!(
        text, stdout,
        "the file and stdout carry the same exposition"
    );
    assert!(text.contains("mdpilot_array_sync_action{array=\"md1\",action=\"resync\"} 1\n"));
    assert!(
        text.contains("mdpilot_policy_leases{kind=\"installer\"} 0\n"),
        "{text}"
    );
    assert!(
        !text.contains("\nmdpilot_wipe_jobs_running "),
        "the CLI cannot see jobs"
    );
    let entries = std::fs::read_dir(out.path()).unwrap().count();
    assert_eq!(entries, 1, "no temporary file is left behind");
    support::promtool_check_metrics("the /metrics page", &text);
    let o = run(&["--output", "/nonexistent/dir/mdpilot.prom"]);
    assert_eq!(o.status.code(), Some(1));
}

// ---- a real Prometheus ----

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

struct Prometheus {
    _child: Reaped,
    _dir: tempfile::TempDir,
    addr: SocketAddr,
}

fn prometheus(target: SocketAddr) -> Option<Prometheus> {
    if !support::have("prometheus", "prometheus") {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/prometheus/mdpilot-alerts.yml");
    let conf = dir.path().join("prometheus.yml");
    std::fs::write(
        &conf,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: mdpilot\n    static_configs:\n      - targets: ['{target}']\n",
            rules.display()
        ),
    )
    .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", conf.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address={addr}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let p = Prometheus {
        _child: Reaped(child),
        _dir: dir,
        addr,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !matches!(http(addr, "GET", "/-/ready", None), Ok((200, _, _))) {
        assert!(Instant::now() < deadline, "prometheus not ready");
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(p)
}

impl Prometheus {
    /// The value of the single series `expr` selects now; `None` while it has none.
    fn value(&self, expr: &str) -> Option<f64> {
        let (code, _, body) = http(
            self.addr,
            "GET",
            &format!("/api/v1/query?query={}", urlencode(expr)),
            None,
        )
        .ok()?;
        assert_eq!(code, 200, "{expr}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let result = v["data"]["result"].as_array()?;
        assert!(result.len() <= 1, "{expr} selects several series: {body}");
        result.first()?["value"][1].as_str()?.parse().ok()
    }

    /// Waits (at most 30 s) until `expr` has a value satisfying `ok`; returns it.
    fn wait(&self, expr: &str, ok: impl Fn(f64) -> bool) -> f64 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(v) = self.value(expr).filter(|v| ok(*v)) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {expr} (now {:?})",
                self.value(expr)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// The values Prometheus holds equal `status --json` for every array: degraded, sync progress
/// (within `tolerance`: the simulator keeps syncing between the scrape and the read) and the
/// global and per-array limits (bytes/s = KiB/s × 1024).
fn compare(p: &Prometheus, root: &Path, tolerance: f64) {
    let j = status_json(root);
    let kib = |v: &serde_json::Value| v.as_f64().unwrap() * 1024.0;
    for (bound, key) in [("min", "speed_limit_min"), ("max", "speed_limit_max")] {
        let q = format!("mdpilot_speed_limit_bytes_per_second{{bound=\"{bound}\"}}");
        assert_eq!(p.value(&q), Some(kib(&j[key])), "{q}");
    }
    let arrays = j["arrays"].as_array().unwrap();
    assert_eq!(arrays.len(), 2);
    for a in arrays {
        let name = a["name"].as_str().unwrap();
        let sys = &a["sysfs"];
        let q = format!("mdpilot_array_degraded{{array=\"{name}\"}}");
        assert_eq!(p.value(&q), sys["degraded"].as_f64(), "{q}");
        for bound in ["min", "max"] {
            let q = format!(
                "mdpilot_array_sync_speed_limit_bytes_per_second{{array=\"{name}\",bound=\"{bound}\"}}"
            );
            let want = kib(&sys[format!("sync_speed_{bound}")]["kib_s"]);
            assert_eq!(p.value(&q), Some(want), "{q}");
        }
        let q = format!("mdpilot_array_sync_completed_ratio{{array=\"{name}\"}}");
        match &sys["sync_completed"]["sectors"] {
            serde_json::Value::Null => assert_eq!(p.value(&q), None, "{q}: idle"),
            s => {
                let want = s["done"].as_f64().unwrap() / s["total"].as_f64().unwrap();
                let got = p.value(&q).unwrap();
                assert!(
                    (got - want).abs() <= tolerance && got <= want + 1e-12,
                    "{q}: prometheus {got}, status --json {want}"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_prometheus_scrapes_the_values_status_json_shows() {
    let Some(bus) = Bus::start() else { return };
    if !support::have("prometheus", "prometheus") {
        return;
    }
    let (s, addr) = serve(&bus, &[("MDPILOT_SIM_TICK_MS", "200")]).await;
    let sim_root = s.sim_path("");
    let Some(p) = prometheus(addr) else { return };
    p.wait("up{job=\"mdpilot\"}", |v| v == 1.0);
    p.wait("mdpilot_array_sync_completed_ratio{array=\"md1\"}", |v| {
        v > 0.0
    });
    // The rules loaded and evaluate (nothing fires on the healthy simulation).
    let (_, _, rules) = http(p.addr, "GET", "/api/v1/rules", None).unwrap();
    assert!(
        rules.contains("MdSyncStalled") && rules.contains("\"health\":\"ok\""),
        "{rules}"
    );
    // 200 MiB/s over 64 GiB: 0.3 % per second; a sample is at most ~2 s old.
    compare(&p, &sim_root, 0.02);

    // The simulator changes: md0 loses a member, and a lease slows every resync to 1000 KiB/s
    // (the service re-reads the whole model after a lease).
    std::fs::write(s.sim_path("sys/block/md0/md/degraded"), "1\n").unwrap();
    let conn = bus.connect().await;
    acquire(&conn, &[("max", Value::U64(1000))]).await.unwrap();
    p.wait("mdpilot_speed_limit_bytes_per_second{bound=\"max\"}", |v| {
        v == 1_024_000.0
    });
    p.wait("mdpilot_array_degraded{array=\"md0\"}", |v| v == 1.0);
    p.wait(
        "mdpilot_array_sync_speed_bytes_per_second{array=\"md1\"}",
        |v| v == 1_024_000.0,
    );
    p.wait("mdpilot_policy_leases{kind=\"dbus-client\"}", |v| v == 1.0);
    // 1000 KiB/s over 64 GiB: 1.5e-5 per second.
    compare(&p, &sim_root, 1e-4);
    drop(conn);
}

// ---- a Unix socket listener ----

/// `GET /metrics` over the Unix socket at `path`: the status code and the body.
fn http_unix(path: &Path) -> std::io::Result<(u16, String)> {
    let mut s = std::os::unix::net::UnixStream::connect(path)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((status, body.to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_on_a_unix_socket_answer_one_request_per_connection() {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let Some(bus) = Bus::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("metrics.sock");
    let listen = format!("unix:{}", sock.display());
    let _s = Service::start(&bus, &["--sim", "--metrics", &listen], &[]).await;
    let m = std::fs::symlink_metadata(&sock).unwrap();
    assert!(m.file_type().is_socket());
    assert_eq!(m.mode() & 0o7777, 0o660, "the default socket_mode");
    // SAFETY: getegid has no preconditions.
    assert_eq!(m.gid(), unsafe { libc::getegid() }, "the service's group");
    let (code, body) = http_unix(&sock).unwrap();
    assert_eq!(code, 200);
    assert!(body.contains("mdpilot_array_info{array=\"md1\""), "{body}");
    // No keep-alive: the connection closes after the answer (read_to_end returned).
    assert_eq!(http_unix(&sock).unwrap().0, 200);
}

/// `curl` as uid 65534 with only group `gid`: the HTTP status of `GET /metrics` on `sock`
/// (`000` when it could not connect) and curl's exit status.
fn curl_as_nobody(sock: &Path, gid: u32) -> (String, Option<i32>) {
    let out = Command::new("setpriv")
        .args(["--reuid=65534", &format!("--regid={gid}"), "--clear-groups"])
        .args([
            "curl",
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--unix-socket",
        ])
        .arg(sock)
        .arg("http://localhost/metrics")
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_a_unix_socket_admits_its_group_and_no_other_local_user() {
    use std::os::unix::fs::PermissionsExt;
    need_root!("to connect as other users");
    if !support::have("curl", "curl") || !support::have("setpriv", "util-linux") {
        return;
    }
    let Some(bus) = Bus::start() else { return };
    let root = support::tree::mdstat_root(
        "Personalities : [raid1]\nmd1 : active raid1 loop4[1] loop3[0]\n      1046528 blocks super 1.2 [2/2] [UU]\n\nunused devices: <none>\n",
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let sock = dir.path().join("metrics.sock");
    support::tree::write(
        root.path(),
        "etc/mdpilot/config.d/50-metrics.toml",
        &format!(
            "[metrics]\nlisten = \"unix:{}\"\nsocket_group = \"65534\"\n",
            sock.display()
        ),
    );
    let _s = Service::on_root(&bus, root.path(), &[]).await;
    // The scraper: uid 65534 in the socket's group.
    assert_eq!(curl_as_nobody(&sock, 65534), ("200".to_string(), Some(0)));
    // Another local user (the same uid without the group) cannot even connect (curl: 7).
    assert_eq!(curl_as_nobody(&sock, 65533), ("000".to_string(), Some(7)));
    assert_eq!(http_unix(&sock).unwrap().0, 200, "root, the owner");
}
