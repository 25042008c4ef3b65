//! `mdpilot serve --metrics ADDR:PORT` (config `metrics.listen`): `GET /metrics` over HTTP/1.1
//! (hyper 1) on the service's tokio runtime.
//!
//! A scrape renders [`crate::metrics`] from what the service already keeps: the model
//! (`Shared::model`, refreshed by the event loop), the policy view the loop read at its last
//! full refresh ([`MetricsState::set_policy`]) and the running wipe jobs' progress counters, plus
//! one read of the small check record (`[check] state_path`) for the last-check families. It
//! never reads sysfs or the policy state file itself, so a scrape costs a clone and a render.
//!
//! The response is OpenMetrics when the `Accept` header names `application/openmetrics-text`
//! (Prometheus does by default), else the text format 0.0.4. `HEAD` is answered like `GET`
//! without a body; other paths are 404, other methods 405.
//!
//! Listeners ([`MetricsListen`]): TCP (`ADDR:PORT`), which anyone who can reach the address
//! may use (on loopback, every local user), or a Unix socket (`unix:PATH`) whose mode and
//! group ([`SocketAccess`]) name who may scrape; nobody else can even connect. The socket is
//! bound under a temporary name, given its group and mode, then renamed into place, so it is
//! never reachable with other permissions; its directory must belong to root (or the service's
//! user) and be writable by nobody else; an existing file that is not a socket is refused.
//!
//! Bounds (the listener shares the service's descriptors and its one thread): one request per
//! connection (no keep-alive); each connection has [`CONNECTION_BUDGET`] from accept to read
//! its request and write the answer, then it is closed; at most [`MAX_HEADERS`] headers in
//! [`MAX_HEADER_BYTES`]. The listener accepts whenever a connection waits, and with
//! [`MAX_CONNECTIONS`] open it closes the oldest to make room: connections held idle (or
//! trickling a request) cannot keep a scraper out, whose request is read as soon as it is
//! accepted. What a TCP listener cannot bound: a local user who reconnects as fast as they are
//! closed competes with the scraper for the kernel's accept queue ([`BACKLOG`]); where local
//! users are not trusted, use `unix:`. Accept errors (EMFILE under a flood) and closes to make
//! room are logged at most once per [`ACCEPT_LOG_INTERVAL`], with the number left out.

use crate::config::MetricsListen;
use crate::lock::lock;
use crate::metrics::{render, Format, Snapshot, WipeSample};
use crate::model::MdStat;
use crate::policy::PolicyView;
use crate::shared::State as Shared;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the scrape handler needs beyond [`Shared`]: the last policy view of the event loop
/// (the check record is the configuration's in effect, [`Shared::config`]).
#[derive(Debug)]
pub struct MetricsState {
    policy: Mutex<Option<PolicyView>>,
}

impl MetricsState {
    /// A state holding `view` (the service's first `policy.show()`, `None` when it failed).
    pub fn new(view: Option<PolicyView>) -> Self {
        MetricsState {
            policy: Mutex::new(view),
        }
    }

    /// Keeps `view` for the next scrapes (the loop calls it on every full refresh; `None`
    /// keeps the previous view, as the D-Bus properties do when the policy cannot be read).
    pub fn set_policy(&self, view: Option<PolicyView>) {
        if view.is_some() {
            *lock(&self.policy) = view;
        }
    }
}

/// The snapshot of one scrape: clones of the model and the policy view, and the jobs' progress.
pub fn snapshot(shared: &Shared, state: &MetricsState) -> Snapshot {
    let model = MdStat::clone(&lock(&shared.model));
    let policy = lock(&state.policy).clone();
    let wipe_jobs = lock(&shared.jobs)
        .values()
        .filter(|j| !j.handle.is_finished())
        .map(|j| {
            let p = j.handle.progress();
            WipeSample {
                done_bytes: p.done_bytes,
                total_bytes: p.total_bytes,
                rate_bytes_per_s: p.rate_bytes_per_s,
            }
        })
        .collect();
    let last_checks =
        crate::check::store::CheckStore::new(&shared.root, &shared.config()).last_checks(&model);
    Snapshot {
        model,
        install_applied_at: policy.as_ref().and_then(crate::metrics::install_applied_at),
        policy,
        last_checks,
        io_pressure_pct: crate::sysfs::pressure::read_io_pressure(&shared.root)
            .ok()
            .map(|p| (p.some_avg10, p.full_avg10)),
        check_throttles: crate::check::throttle::NOTES.load(&shared.root, &shared.config()),
        resync_throttles: crate::resync_throttle::NOTES.load(&shared.root, &shared.config()),
        wipe_jobs: Some(wipe_jobs),
        hook_events_dropped: Some(
            crate::metrics::HOOK_EVENTS_DROPPED.load(std::sync::atomic::Ordering::Relaxed),
        ),
        version: env!("CARGO_PKG_VERSION").to_string(),
    }
}

/// Connections open at once; a new one closes the oldest (a Prometheus server scrapes over one
/// connection at a time, and a scrape takes milliseconds).
pub const MAX_CONNECTIONS: usize = 128;
/// Connections the kernel keeps waiting for an accept (capped by `net.core.somaxconn`).
pub const BACKLOG: u32 = 1024;
/// From accept, how long a connection may take to send its request and take the answer
/// (Prometheus' default scrape timeout is 10 s).
pub const CONNECTION_BUDGET: Duration = Duration::from_secs(5);
/// Headers per request (a scrape sends about five).
pub const MAX_HEADERS: usize = 32;
/// Bytes of request line plus headers (a larger head is answered 431 and closed).
pub const MAX_HEADER_BYTES: usize = 8192;
/// At most one accept-error record per interval.
pub const ACCEPT_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// A log rate limit: [`LogLimit::allow`] says whether to log now and how many records were
/// left out since the last one. Pure (the caller passes the time).
#[derive(Debug, Default)]
pub struct LogLimit {
    last: Option<std::time::Instant>,
    suppressed: u64,
}

impl LogLimit {
    /// `Some(n)` when a record may be written at `now` (`n` records were left out before it),
    /// `None` when this one is left out (less than `every` since the last written one).
    pub fn allow(&mut self, now: std::time::Instant, every: Duration) -> Option<u64> {
        match self.last {
            Some(t) if now.saturating_duration_since(t) < every => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }
}

/// The listener could not be bound.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen for metrics on {addr}")]
pub struct BindError {
    /// The address asked for.
    pub addr: MetricsListen,
    /// Why (EADDRINUSE, EACCES, a group that does not exist, an unsafe directory...).
    #[source]
    pub source: std::io::Error,
}

/// Who may connect to a `unix:` listener ([`crate::config::MetricsConfig`]'s `socket_mode`
/// and `socket_group`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketAccess {
    /// Permission bits of the socket file (`0o660`: its owner, root, and its group).
    pub mode: u32,
    /// Its group, a name or a number (`None`: the service's own group).
    pub group: Option<String>,
}

/// Binds `listen` and serves `/metrics` from `shared` and `state` in a task of the current
/// runtime, until the returned handle is aborted or dropped with the runtime. `access` applies
/// to a `unix:` listener. Returns the bound address (useful with port 0). Errors:
/// [`BindError`].
pub async fn start(
    listen: &MetricsListen,
    access: &SocketAccess,
    shared: Arc<Shared>,
    state: Arc<MetricsState>,
) -> Result<(MetricsListen, tokio::task::JoinHandle<()>), BindError> {
    let err = |source| BindError {
        addr: listen.clone(),
        source,
    };
    let listener = match listen {
        MetricsListen::Tcp(addr) => Listener::Tcp(listen_tcp(*addr).map_err(err)?),
        MetricsListen::Unix(path) => Listener::Unix(listen_unix(path, access).map_err(err)?),
    };
    let bound = match &listener {
        Listener::Tcp(l) => MetricsListen::Tcp(l.local_addr().map_err(err)?),
        Listener::Unix(_) => listen.clone(),
    };
    match &bound {
        MetricsListen::Tcp(a) => tracing::info!("serving metrics on http://{a}/metrics"),
        MetricsListen::Unix(p) => tracing::info!(
            "serving metrics on {} (mode {:04o}, group {})",
            p.display(),
            access.mode,
            access.group.as_deref().unwrap_or("of the service")
        ),
    }
    let task = tokio::spawn(accept_loop(listener, shared, state));
    Ok((bound, task))
}

/// Binds `addr` (`SO_REUSEADDR`, as std does) with a [`BACKLOG`] of pending connections.
fn listen_tcp(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

/// Binds a Unix socket at `path` with `access` (see the module doc: temporary name, group and
/// mode, rename). Errors: an unsafe directory (not root's or ours, or writable by others), a
/// file at `path` that is not a socket, an unknown group, and the bind's own.
fn listen_unix(path: &Path, access: &SocketAccess) -> std::io::Result<tokio::net::UnixListener> {
    use std::io::{Error, ErrorKind};
    use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(Error::new(ErrorKind::InvalidInput, "no directory or name"));
    };
    let d = std::fs::metadata(dir)?;
    if (d.uid() != 0 && d.uid() != nix::unistd::geteuid().as_raw()) || d.mode() & 0o022 != 0 {
        return Err(Error::new(
            ErrorKind::PermissionDenied,
            format!(
                "{} must belong to root and be writable by its owner only",
                dir.display()
            ),
        ));
    }
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !m.file_type().is_socket() {
            return Err(Error::new(
                ErrorKind::AlreadyExists,
                "a file that is not a socket is there",
            ));
        }
    }
    let gid = access.group.as_deref().map(group_id).transpose()?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let _ = std::fs::remove_file(&tmp);
    let listener = std::os::unix::net::UnixListener::bind(&tmp)?;
    let placed = (|| {
        std::os::unix::fs::lchown(&tmp, None, gid)?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(access.mode))?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    listener.set_nonblocking(true)?;
    tokio::net::UnixListener::from_std(listener)
}

/// The gid of `group`, a name (`/etc/group`, NSS) or a number. Errors: NotFound.
fn group_id(group: &str) -> std::io::Result<u32> {
    if let Ok(n) = group.parse() {
        return Ok(n);
    }
    match nix::unistd::Group::from_name(group) {
        Ok(Some(g)) => Ok(g.gid.as_raw()),
        Ok(None) => Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no group {group:?}"),
        )),
        Err(e) => Err(e.into()),
    }
}

/// A bound listener of either kind.
enum Listener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener),
}

/// A connection of either kind, as hyper reads it.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static> Io for T {}

impl Listener {
    async fn accept(&self) -> std::io::Result<Box<dyn Io>> {
        Ok(match self {
            Listener::Tcp(l) => Box::new(l.accept().await?.0),
            Listener::Unix(l) => Box::new(l.accept().await?.0),
        })
    }
}

/// The open connections' tasks, oldest first.
#[derive(Debug, Default)]
struct Slots {
    open: VecDeque<tokio::task::AbortHandle>,
}

impl Slots {
    /// Forgets the finished connections, then closes (aborts) the oldest ones until fewer than
    /// `max` are open. Returns how many it closed.
    fn make_room(&mut self, max: usize) -> usize {
        self.open.retain(|h| !h.is_finished());
        let mut closed = 0;
        while self.open.len() >= max.max(1) {
            if let Some(h) = self.open.pop_front() {
                h.abort();
                closed += 1;
            }
        }
        closed
    }
}

/// Accepts every connection as it comes, each served in its own task; with
/// [`MAX_CONNECTIONS`] open, the oldest is closed first.
async fn accept_loop(listener: Listener, shared: Arc<Shared>, state: Arc<MetricsState>) {
    let mut slots = Slots::default();
    let mut errors = LogLimit::default();
    let mut evictions = LogLimit::default();
    loop {
        let stream = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                if let Some(left_out) = errors.allow(std::time::Instant::now(), ACCEPT_LOG_INTERVAL)
                {
                    tracing::warn!("metrics: accept failed: {e} ({left_out} more left out)");
                }
                // EMFILE and friends: back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        for _ in 0..slots.make_room(MAX_CONNECTIONS) {
            if let Some(left_out) = evictions.allow(std::time::Instant::now(), ACCEPT_LOG_INTERVAL)
            {
                tracing::warn!("metrics: {MAX_CONNECTIONS} connections open, the oldest closed for a new one ({left_out} more left out)");
            }
        }
        let task = tokio::spawn(serve_connection(stream, shared.clone(), state.clone()));
        slots.open.push_back(task.abort_handle());
        // The connections just accepted read their requests before the next accept: a burst
        // of connections cannot push out one whose request is already there.
        tokio::task::yield_now().await;
    }
}

/// Serves one request on `stream` within [`CONNECTION_BUDGET`], then closes it.
async fn serve_connection(stream: Box<dyn Io>, shared: Arc<Shared>, state: Arc<MetricsState>) {
    let svc = hyper::service::service_fn(move |req| {
        let (shared, state) = (shared.clone(), state.clone());
        async move { Ok::<_, Infallible>(respond(&req, || snapshot(&shared, &state))) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .keep_alive(false)
        .header_read_timeout(CONNECTION_BUDGET)
        .max_headers(MAX_HEADERS)
        .max_header_size(MAX_HEADER_BYTES)
        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc);
    match tokio::time::timeout(CONNECTION_BUDGET, conn).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!("metrics connection: {e}"),
        Err(_) => tracing::debug!("metrics connection: over {CONNECTION_BUDGET:?}, closed"),
    }
}

/// The response to `req`; `snap` is called only for a scrape. Pure apart from `snap`.
pub fn respond(req: &Request<Incoming>, snap: impl FnOnce() -> Snapshot) -> Response<Full<Bytes>> {
    let plain = |status: StatusCode, text: &'static str| {
        let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
        *r.status_mut() = status;
        r.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        r
    };
    if req.uri().path() != "/metrics" {
        return plain(StatusCode::NOT_FOUND, "mdpilot serves /metrics only\n");
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "GET or HEAD\n");
        r.headers_mut().insert(
            hyper::header::ALLOW,
            hyper::header::HeaderValue::from_static("GET, HEAD"),
        );
        return r;
    }
    let accept = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let format = Format::from_accept(accept);
    let body = render(&snap(), format);
    let len = body.len();
    let mut r = Response::new(Full::new(if req.method() == Method::HEAD {
        Bytes::new()
    } else {
        Bytes::from(body)
    }));
    let h = r.headers_mut();
    h.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(format.content_type()),
    );
    if req.method() == Method::HEAD {
        h.insert(hyper::header::CONTENT_LENGTH, len.into());
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[tokio::test]
    async fn a_new_connection_closes_the_oldest_open_one_at_the_limit() {
        let mut slots = Slots::default();
        let mut tasks = Vec::new();
        for _ in 0..3 {
            assert_eq!(slots.make_room(3), 0);
            let t = tokio::spawn(std::future::pending::<()>());
            slots.open.push_back(t.abort_handle());
            tasks.push(t);
        }
        assert_eq!(slots.make_room(3), 1);
        let first = tasks.remove(0);
        assert!(first.await.unwrap_err().is_cancelled());
        // A finished connection frees its slot: nothing else is closed.
        tasks.remove(0).abort();
        tokio::task::yield_now().await;
        assert_eq!(slots.make_room(3), 0);
        assert_eq!(slots.open.len(), 1);
    }

    fn access(mode: u32) -> SocketAccess {
        SocketAccess {
            mode,
            group: Some(nix::unistd::getegid().as_raw().to_string()),
        }
    }

    #[tokio::test]
    async fn a_unix_socket_appears_with_its_mode_and_replaces_a_stale_one_only() {
        use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = d.path().join("metrics.sock");
        let stale = std::os::unix::net::UnixListener::bind(&path).unwrap();
        drop(stale);
        let l = listen_unix(&path, &access(0o640)).unwrap();
        let m = std::fs::symlink_metadata(&path).unwrap();
        assert!(m.file_type().is_socket());
        assert_eq!(m.mode() & 0o7777, 0o640);
        assert_eq!(m.gid(), nix::unistd::getegid().as_raw());
        assert_eq!(
            std::fs::read_dir(d.path()).unwrap().count(),
            1,
            "no temporary left"
        );
        drop(l);
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "not a socket").unwrap();
        assert!(listen_unix(&path, &access(0o660)).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "not a socket");
        std::fs::remove_file(&path).unwrap();
        // A directory others may write to: they could swap the socket.
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(listen_unix(&path, &access(0o660)).is_err());
        assert!(std::fs::symlink_metadata(&path).is_err());
        let nobody = SocketAccess {
            mode: 0o660,
            group: Some("no-such-group-mdpilot".into()),
        };
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let e = listen_unix(&path, &nobody).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}");
    }

    #[test]
    fn accept_errors_are_logged_once_per_interval_with_the_count_left_out() {
        let mut l = LogLimit::default();
        let t = Instant::now();
        let every = Duration::from_secs(10);
        assert_eq!(l.allow(t, every), Some(0));
        for i in 1..=1000 {
            assert_eq!(l.allow(t + Duration::from_millis(i), every), None);
        }
        assert_eq!(l.allow(t + every, every), Some(1000));
        assert_eq!(l.allow(t + every, every), None);
    }
}
