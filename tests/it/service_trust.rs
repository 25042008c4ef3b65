//! The service and the CLI hold up against hostile or failing surroundings: planted symlinks
//! beside files root rewrites, connection floods on the metrics listener, hung hooks, a bus
//! that never answers. Each test runs the real binary against a temporary root or a private
//! bus; nothing touches the host.

use crate::support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Command;
use std::time::{Duration, Instant};
use support::bus::acquire;
use support::tree::mdstat_root;
use support::{stderr, Bus, Service, BIN};
use tokio::net::TcpStream;
use zbus::zvariant::Value;

const R1_OK: &str = "Personalities : [raid1]\nmd1 : active raid1 loop4[1] loop3[0]\n      1046528 blocks super 1.2 [2/2] [UU]\n\nunused devices: <none>\n";

#[test]
fn status_output_does_not_follow_a_symlink_at_the_old_temporary_name() {
    let root = mdstat_root(R1_OK);
    let out_dir = tempfile::tempdir().unwrap();
    let secret = out_dir.path().join("secret");
    std::fs::write(&secret, "root's secret\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let target = out_dir.path().join("mdpilot.prom");
    std::fs::write(&target, "old\n").unwrap();
    // `exec` keeps the shell's pid, so the symlink sits at the name the old code would open.
    let script = format!(
        "ln -s {secret} {dir}/.mdpilot.prom.tmp.$$ && exec {BIN} --root {root} status \
         --format prometheus --output {target}",
        secret = secret.display(),
        dir = out_dir.path().display(),
        root = root.path().display(),
        target = target.display(),
    );
    let out = Command::new("sh")
        .args(["-c", &script])
        .env_remove("MDPILOT_ROOT")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root's secret\n");
    assert_eq!(std::fs::metadata(&secret).unwrap().mode() & 0o777, 0o600);
    let text = std::fs::read_to_string(&target).unwrap();
    assert!(text.contains("mdpilot_"), "{text}");
    let meta = std::fs::symlink_metadata(&target).unwrap();
    assert!(meta.file_type().is_file());
    assert_eq!(meta.mode() & 0o777, 0o644);
    // Only the target, the secret and the planted link: no temporary left behind.
    assert_eq!(std::fs::read_dir(out_dir.path()).unwrap().count(), 3);
}

/// Sets the soft `RLIMIT_NOFILE` of this process to `soft` (capped by the hard limit) and
/// returns the previous soft and the hard limit. Children inherit it at fork.
fn set_nofile(soft: u64) -> (u64, u64) {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain getrlimit/setrlimit on a local struct.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) };
    let old = (r.rlim_cur, r.rlim_max);
    r.rlim_cur = soft.min(r.rlim_max);
    // SAFETY: as above.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) };
    old
}

/// `GET /metrics` with `Connection: close`: the status code (0 when the answer is no HTTP).
fn scrape(addr: std::net::SocketAddr) -> std::io::Result<u16> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let raw = String::from_utf8_lossy(&raw);
    Ok(raw
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0))
}

/// Opens `n` TCP connections to `addr` at the same time and keeps those that connected within
/// `patience` (the ones beyond the listen backlog may not).
async fn flood(addr: std::net::SocketAddr, n: usize, patience: Duration) -> Vec<TcpStream> {
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..n {
        set.spawn(async move {
            tokio::time::timeout(patience, TcpStream::connect(addr))
                .await
                .ok()
                .and_then(Result::ok)
        });
    }
    let mut open = Vec::new();
    while let Some(r) = set.join_next().await {
        if let Ok(Some(s)) = r {
            open.push(s);
        }
    }
    open
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metrics_connection_flood_leaves_lease_calls_and_later_scrapes_working() {
    let Some(bus) = Bus::start() else { return };
    let addr: std::net::SocketAddr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    // The service gets the unit's LimitNOFILE=1024, this process room for the flood.
    let (old_soft, hard) = set_nofile(1024);
    let service = Service::start(&bus, &["--sim", "--metrics", &addr.to_string()], &[]).await;
    set_nofile(hard.min(8192));
    let n = 2000.min(usize::try_from(hard).unwrap_or(2000).saturating_sub(200));
    let open = flood(addr, n, Duration::from_secs(3)).await;
    eprintln!("flood: {} of {n} connections open", open.len());
    assert!(
        open.len() > 1024,
        "the flood must exceed the service's 1024 descriptors"
    );

    let conn = bus.connect().await;
    let lease = tokio::time::timeout(
        Duration::from_secs(10),
        acquire(&conn, &[("max", Value::U64(1000))]),
    )
    .await
    .expect("AcquirePriority answered during the flood");
    assert!(lease.is_ok(), "AcquirePriority during the flood: {lease:?}");
    drop(open);

    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = tokio::task::spawn_blocking(move || scrape(addr))
            .await
            .unwrap();
        if matches!(r, Ok(200)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no scrape after the flood: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    set_nofile(old_soft);
    drop(service);
}

/// One hostile local client, for ever (until its task is aborted): connects, sends `prefix`
/// (nothing, or the start of a request it never finishes), holds the connection until the
/// service closes it, and reconnects.
/// `connected` counts the connections it has made.
async fn hostile_client(
    addr: std::net::SocketAddr,
    prefix: &'static [u8],
    connected: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    loop {
        let Ok(Ok(mut s)) =
            tokio::time::timeout(Duration::from_secs(3), TcpStream::connect(addr)).await
        else {
            continue;
        };
        connected.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let _ = s.write_all(prefix).await;
        let mut buf = [0u8; 256];
        while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
    }
}

/// A scrape as Prometheus makes it: `GET /metrics` with a 10 s timeout for all of it
/// (connect, request, answer). The status code, or why there was none.
async fn scrape_10s(addr: std::net::SocketAddr) -> Result<u16, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let scrape = async {
        let mut s = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        let req = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAccept: text/plain\r\n\r\n");
        s.write_all(req.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await.map_err(|e| e.to_string())?;
        let raw = String::from_utf8_lossy(&raw);
        raw.split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| format!("no HTTP answer: {raw:?}"))
    };
    tokio::time::timeout(Duration::from_secs(10), scrape)
        .await
        .map_err(|_| "no answer within 10 s".to_string())?
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrapes_get_200_within_10_s_while_local_clients_hold_and_refill_every_connection() {
    let Some(bus) = Bus::start() else { return };
    let addr: std::net::SocketAddr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let (old_soft, hard) = set_nofile(1024);
    let service = Service::start(&bus, &["--sim", "--metrics", &addr.to_string()], &[]).await;
    set_nofile(hard.min(8192));
    // More than the connections served at once plus the whole listen backlog (1024): idle
    // ones, and ones trickling a request they never finish; each reconnects when closed.
    let connected = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut hostile = tokio::task::JoinSet::new();
    for i in 0..1300 {
        let prefix: &'static [u8] = if i % 4 == 0 {
            b"GET /metrics HTTP/1.1\r\n"
        } else {
            b""
        };
        hostile.spawn(hostile_client(addr, prefix, connected.clone()));
    }
    // The flood is in place before the first scrape: as many connections as the old listener
    // served (32) and kept waiting (its 1024 backlog) at once have been made.
    let deadline = Instant::now() + Duration::from_secs(30);
    while connected.load(std::sync::atomic::Ordering::Relaxed) < 1050 {
        assert!(Instant::now() < deadline, "the flood did not connect");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut results = Vec::new();
    for _ in 0..3 {
        results.push(scrape_10s(addr).await);
    }
    hostile.abort_all();
    while hostile.join_next().await.is_some() {}
    set_nofile(old_soft);
    drop(service);
    assert_eq!(results, [Ok(200), Ok(200), Ok(200)]);
}

const R1_FAILED: &str = "Personalities : [raid1]\nmd1 : active raid1 loop4[1](F) loop3[0]\n      1046528 blocks super 1.2 [2/1] [U_]\n\nunused devices: <none>\n";

/// True when `pid` is gone (no such process, or a zombie waiting for its reaper).
fn pid_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
    }
}

/// An event program under `dir` that leaves `sleep 60 &` behind (its pid in `dir/bg`) and
/// saves its environment to `dir/env`, configured as `[events] program` under `root`.
fn install_hook(root: &std::path::Path, dir: &std::path::Path) {
    let hook = dir.join("hook.sh");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\nenv > {d}/env.tmp && mv {d}/env.tmp {d}/env\nsleep 60 &\necho $! > {d}/bg\n",
            d = dir.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    support::tree::write(
        root,
        "etc/mdpilot/config.d/50-hook.toml",
        &format!("[events]\nprogram = \"{}\"\n", hook.display()),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_leaving_a_background_child_does_not_delay_sigterm_and_sees_a_clean_environment() {
    let Some(bus) = Bus::start() else { return };
    let root = mdstat_root(R1_FAILED);
    let dir = tempfile::tempdir().unwrap();
    install_hook(root.path(), dir.path());
    let env = [("MDPILOT_TEST_SECRET", "leaked"), ("HOME", "/root/secret")];
    let mut svc = Service::on_root(&bus, root.path(), &env).await;
    // The first model is degraded: the baseline DegradedArray runs the hook.
    let deadline = Instant::now() + Duration::from_secs(10);
    let bg: i32 = loop {
        if let Some(p) = std::fs::read_to_string(dir.path().join("bg"))
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            break p;
        }
        assert!(Instant::now() < deadline, "the hook did not run");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let t0 = Instant::now();
    let st = svc.term();
    let took = t0.elapsed();
    assert!(st.success(), "{st}");
    assert!(took < Duration::from_secs(5), "exit took {took:?}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !pid_gone(bg) {
        assert!(
            Instant::now() < deadline,
            "the hook's background child {bg} is alive"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let env = std::fs::read_to_string(dir.path().join("env")).unwrap();
    let mut keys: Vec<&str> = env
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        // What sh itself sets.
        .filter(|k| !["PWD", "SHLVL", "_", "OLDPWD"].contains(k))
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["LANG", "MDPILOT_EVENT_JSON", "PATH"], "{env}");
    assert!(
        env.contains("PATH=/usr/sbin:/usr/bin:/sbin:/bin\n"),
        "{env}"
    );
    assert!(env.contains("LANG=C.UTF-8\n"), "{env}");
}

/// In a private pid namespace (`unshare --pid --fork --mount-proc`, so pids are handed out by
/// `ns_last_pid` and nobody else forks there), the service runs a hook that exits at once;
/// once the hook is reaped, an unrelated `setsid sleep` is given its pid, hence its process
/// group id; then the service stops. Prints `service=STATUS stranger=STATUS`, the stranger's
/// status after the script's own SIGTERM (143 when it was alive, 137 when the service killed it).
const PIDNS_STRANGER: &str = r#"
d=$1 bin=$2 bus=$3 root=$4
"$bin" serve --bus "$bus" --root "$root" 2>"$d/serve.log" &
svc=$!
i=0
until [ -s "$d/hook" ]; do
  i=$((i+1)); [ $i -lt 600 ] || { echo "the hook did not run"; exit 2; }; sleep 0.05
done
h=$(cat "$d/hook")
until [ "$(cat /proc/$h/comm 2>/dev/null)" != hook.sh ]; do
  i=$((i+1)); [ $i -lt 1200 ] || { echo "the hook $h was not reaped"; exit 2; }; sleep 0.05
done
n=0
while :; do
  echo $((h-1)) > /proc/sys/kernel/ns_last_pid
  setsid sleep 600 &
  s=$!
  [ "$s" = "$h" ] && break
  kill $s; wait $s
  n=$((n+1)); [ $n -lt 50 ] || { echo "pid $h not reused"; exit 2; }
done
until [ "$(cut -d' ' -f5 /proc/$s/stat)" = "$s" ]; do
  i=$((i+1)); [ $i -lt 2000 ] || { echo "the stranger did not lead its group"; exit 2; }; sleep 0.01
done
kill -TERM $svc; wait $svc; st=$?
kill -TERM $s; wait $s; echo "service=$st stranger=$?"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loop_a_stranger_reusing_a_finished_hooks_pid_survives_the_service_stop() {
    need_root!("to hand out pids in a private pid namespace");
    if !support::have("unshare", "util-linux") {
        return;
    }
    let Some(bus) = Bus::start() else { return };
    let root = mdstat_root(R1_FAILED);
    let dir = tempfile::tempdir().unwrap();
    let hook = dir.path().join("hook.sh");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\necho $$ > {d}/hook.tmp && mv {d}/hook.tmp {d}/hook\n",
            d = dir.path().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    support::tree::write(
        root.path(),
        "etc/mdpilot/config.d/50-hook.toml",
        &format!("[events]\nprogram = \"{}\"\n", hook.display()),
    );
    let out = tokio::process::Command::new("unshare")
        .args([
            "--pid",
            "--fork",
            "--mount-proc",
            "sh",
            "-c",
            PIDNS_STRANGER,
            "sh",
        ])
        .arg(dir.path())
        .arg(BIN)
        .arg(&bus.address)
        .arg(root.path())
        .env_remove("NOTIFY_SOCKET")
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap_or_default();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}{}\n{log}", stderr(&out));
    assert_eq!(said.trim(), "service=0 stranger=143", "{log}");
}

#[test]
fn kernel_numbers_near_u64_max_do_not_overflow_the_array_view() {
    let text = "Personalities : [raid1]\nmd1 : active raid1 loop4[1] loop3[0]\n      1046528 blocks super 1.2 [2/2] [UU]\n      [>....................]  resync =  3.1% (32768/1046528) finish=0.5min speed=32768K/sec\n\nunused devices: <none>\n";
    let mut stat = mdpilot::mdstat::parse(text);
    let a = &mut stat.arrays[0];
    a.size_kib = Some(u64::MAX);
    let s = a.sync.as_mut().expect("a running resync");
    s.done_kib = Some(u64::MAX - 1);
    s.total_kib = Some(u64::MAX);
    s.speed_kib_s = Some(u64::MAX);
    let p = mdpilot::dbus::array::ArrayProps::from_model(&stat.arrays[0]);
    assert_eq!(p.size, u64::MAX);
    let events = mdpilot::alerts::views_from_model(&stat);
    assert_eq!(events.len(), 1);
}

/// Counts `IN_OPEN` events on `path` for `span` (libc inotify; the test owns the descriptor).
fn opens_during(path: &std::path::Path, span: Duration) -> usize {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: plain inotify calls on a descriptor this function owns and closes.
    unsafe {
        let fd = libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK);
        assert!(fd >= 0);
        assert!(libc::inotify_add_watch(fd, c.as_ptr(), libc::IN_OPEN) >= 0);
        std::thread::sleep(span);
        let mut buf = [0u8; 4096];
        let mut n = 0;
        loop {
            let r = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
            if r <= 0 {
                break;
            }
            n += usize::try_from(r).unwrap() / std::mem::size_of::<libc::inotify_event>();
        }
        libc::close(fd);
        n
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_service_never_opens_the_policy_lock() {
    let Some(bus) = Bus::start() else { return };
    let root = mdstat_root(R1_OK);
    let svc = Service::on_root(&bus, root.path(), &[]).await;
    let lock = root.path().join("run/mdpilot/policy.toml.lock");
    if !lock.exists() {
        // Start-up's reap creates it; create it so the watch has a file.
        std::fs::write(&lock, "").unwrap();
    }
    let n = tokio::task::spawn_blocking(move || opens_during(&lock, Duration::from_secs(12)))
        .await
        .unwrap();
    assert_eq!(
        n, 0,
        "the lock file was opened {n} times by an idle service"
    );
    drop(svc);
}
