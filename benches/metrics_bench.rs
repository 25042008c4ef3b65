//! `cargo bench --bench metrics_bench`: figures for `serve --metrics` (printed, not asserted).
//!
//! With 64 simulated arrays (`MDPILOT_SIM_ARRAYS=64`; md1 resyncing, the rest idle):
//! 1. scrape latency of `GET /metrics` as Prometheus asks it (OpenMetrics `Accept`), median,
//!    p99 and max over 1000 scrapes, on one kept-alive connection and with a new connection
//!    per scrape;
//! 2. the service's RSS (VmRSS, VmHWM) before and after the scrapes;
//! 3. the pure render (`metrics::render`) of the same 64-array model in this process.
//!
//! Needs `dbus-daemon`. Under `cargo test --all-targets` (no `--bench` argument) it does nothing.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ARRAYS: usize = 64;
const SCRAPES: usize = 1000;
const ACCEPT: &str = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5";

struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn bus() -> Option<(tempfile::TempDir, Reaped, String)> {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("bus.conf");
    std::fs::write(
        &conf,
        format!(
            r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/><allow own="*"/><allow send_destination="*"/><allow receive_sender="*"/>
  </policy>
</busconfig>
"#,
            dir.path().join("bus").display()
        ),
    )
    .unwrap();
    let mut child = Command::new("dbus-daemon")
        .arg(format!("--config-file={}", conf.display()))
        .args(["--nofork", "--print-address=1"])
        .stdout(Stdio::piped())
        .spawn()
        .ok()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    Some((dir, Reaped(child), line.trim().to_string()))
}

/// One request on `s`; returns the body length. Reads exactly Content-Length bytes.
fn scrape(s: &mut BufReader<TcpStream>, addr: SocketAddr, close: bool) -> usize {
    let conn = if close { "close" } else { "keep-alive" };
    write!(
        s.get_mut(),
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAccept: {ACCEPT}\r\nConnection: {conn}\r\n\r\n"
    )
    .unwrap();
    let mut len = 0;
    let mut line = String::new();
    loop {
        line.clear();
        s.read_line(&mut line).unwrap();
        if line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; len];
    s.read_exact(&mut body).unwrap();
    len
}

fn percentiles(mut v: Vec<Duration>) -> (Duration, Duration, Duration) {
    v.sort();
    let p = |q: f64| v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1];
    (p(0.5), p(0.99), *v.last().unwrap())
}

fn status_kib(pid: u32, key: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find(|l| l.starts_with(key))
        .map(|l| l[key.len() + 1..].trim().to_string())
        .unwrap_or_default()
}
/// Starts `mdpilot serve --sim` on the bus at `address` with a metrics listener on a free local
/// port; returns the reaped service, its pid, the listener's address and the simulated tree.
fn start_service(address: &str) -> (Reaped, u32, SocketAddr, std::path::PathBuf) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mdpilot"))
        .args([
            "serve",
            "--sim",
            "--bus",
            address,
            "--metrics",
            &addr.to_string(),
        ])
        .env("MDPILOT_SIM_ARRAYS", ARRAYS.to_string())
        .env_remove("NOTIFY_SOCKET")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(p) = line.strip_prefix("mdpilot: simulated tree in ") {
                let _ = tx.send(std::path::PathBuf::from(p));
            }
        }
    });
    let sim_root = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    let pid = child.id();
    let svc = Reaped(child);
    (svc, pid, addr, sim_root)
}

/// A kept-alive connection to the metrics listener at `addr`, retried until `deadline`.
fn connect(addr: SocketAddr, deadline: Instant) -> BufReader<TcpStream> {
    loop {
        match TcpStream::connect(addr) {
            Ok(s) => {
                s.set_nodelay(true).unwrap();
                return BufReader::new(s);
            }
            Err(e) => {
                assert!(Instant::now() < deadline, "no metrics listener: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// Renders the model of the simulated tree at `sim_root` in process (no HTTP, no service)
/// `SCRAPES` times; returns the timings and the number of series.
fn render_timings(sim_root: &std::path::Path) -> (Vec<Duration>, usize) {
    let root = mdpilot::host::Root::new(sim_root);
    let model = mdpilot::sysfs::collect(&root).unwrap();
    let snap = mdpilot::metrics::Snapshot {
        model,
        policy: None,
        install_applied_at: None,
        last_checks: std::collections::BTreeMap::new(),
        io_pressure_pct: None,
        check_throttles: std::collections::BTreeMap::new(),
        resync_throttles: std::collections::BTreeMap::new(),
        wipe_jobs: Some(vec![]),
        hook_events_dropped: Some(0),
        version: "bench".into(),
    };
    let mut render = Vec::with_capacity(SCRAPES);
    let mut series = 0;
    for _ in 0..SCRAPES {
        let t = Instant::now();
        let text = mdpilot::metrics::render(&snap, mdpilot::metrics::Format::OpenMetrics);
        render.push(t.elapsed());
        series = text.lines().filter(|l| !l.starts_with('#')).count();
    }
    (render, series)
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let Some((_dir, _bus, address)) = bus() else {
        eprintln!("skipped: dbus-daemon not installed");
        return;
    };
    let (svc, pid, addr, sim_root) = start_service(&address);
    let deadline = Instant::now() + Duration::from_secs(20);
    let connect = || connect(addr, deadline);
    let mut s = connect();
    let mut size = 0;
    for _ in 0..50 {
        size = scrape(&mut s, addr, false);
    }
    let rss_before = (status_kib(pid, "VmRSS:"), status_kib(pid, "VmHWM:"));
    let mut kept = Vec::with_capacity(SCRAPES);
    for _ in 0..SCRAPES {
        let t = Instant::now();
        scrape(&mut s, addr, false);
        kept.push(t.elapsed());
    }
    drop(s);
    let mut fresh = Vec::with_capacity(SCRAPES);
    for _ in 0..SCRAPES {
        let t = Instant::now();
        let mut s = connect();
        scrape(&mut s, addr, true);
        fresh.push(t.elapsed());
    }
    let rss_after = (status_kib(pid, "VmRSS:"), status_kib(pid, "VmHWM:"));
    // The same model rendered in-process (no HTTP, no service).
    let (render, series) = render_timings(&sim_root);
    drop(svc);
    let _ = std::fs::remove_dir_all(&sim_root);

    let us = |d: Duration| format!("{:.0} µs", d.as_secs_f64() * 1e6);
    println!("metrics_bench: {ARRAYS} simulated arrays, {series} series, {size} bytes per scrape (OpenMetrics)");
    for (what, v) in [
        ("scrape, kept-alive connection", kept),
        ("scrape, new connection each", fresh),
        ("render only, in process", render),
    ] {
        let (m, p99, max) = percentiles(v);
        println!(
            "  {what:<32} median {:>8}  p99 {:>8}  max {:>8}  ({SCRAPES} runs)",
            us(m),
            us(p99),
            us(max)
        );
    }
    println!(
        "  service RSS before scrapes {} (peak {}), after {SCRAPES}x2 scrapes {} (peak {})",
        rss_before.0, rss_before.1, rss_after.0, rss_after.1
    );
}
