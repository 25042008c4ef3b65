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
//! Bounds (the listener shares the service's descriptors and its one thread): at most
//! [`MAX_CONNECTIONS`] connections are served at once; further ones wait in the kernel's listen
//! backlog, costing the service no descriptor, until one closes. A client has
//! [`HEADER_TIMEOUT`] to send its headers (also between keep-alive requests), at most
//! [`MAX_HEADERS`] headers in [`MAX_HEADER_BYTES`], and a connection lives at most
//! [`CONNECTION_LIFETIME`]. Accept errors (EMFILE under a flood) are logged at most once per
//! [`ACCEPT_LOG_INTERVAL`], with the number left out.

use crate::metrics::{render, Format, Snapshot, WipeSample};
use crate::model::MdStat;
use crate::policy::PolicyView;
use crate::shared::{lock, State as Shared};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use std::convert::Infallible;
use std::net::SocketAddr;
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
    let last_checks = crate::check::last_checks(&shared.root, &shared.config(), &model);
    Snapshot {
        model,
        install_applied_at: policy.as_ref().and_then(crate::metrics::install_applied_at),
        policy,
        last_checks,
        wipe_jobs: Some(wipe_jobs),
        hook_events_dropped: Some(
            crate::metrics::HOOK_EVENTS_DROPPED.load(std::sync::atomic::Ordering::Relaxed),
        ),
        version: env!("CARGO_PKG_VERSION").to_string(),
    }
}

/// Connections served at once; the rest wait in the listen backlog (a Prometheus server
/// scrapes over one connection, so 32 leaves room for several scrapers and `curl`).
pub const MAX_CONNECTIONS: usize = 32;
/// Connections the kernel keeps waiting for an accept (capped by `net.core.somaxconn`):
/// under a flood they wait there, costing the service no descriptor, instead of retrying SYNs.
pub const BACKLOG: u32 = 1024;
/// How long a client may take to send a request's headers, and to start the next request on
/// a kept-alive connection.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest a connection is kept, however active (a scraper reconnects).
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(120);
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
    pub addr: SocketAddr,
    /// Why (EADDRINUSE, EACCES...).
    #[source]
    pub source: std::io::Error,
}

/// Binds `addr` and serves `/metrics` from `shared` and `state` in a task of the current
/// runtime, until the returned handle is aborted or dropped with the runtime. Returns the bound
/// address (useful with port 0). Errors: [`BindError`].
pub async fn start(
    addr: SocketAddr,
    shared: Arc<Shared>,
    state: Arc<MetricsState>,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), BindError> {
    let listener = listen(addr).map_err(|source| BindError { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| BindError { addr, source })?;
    tracing::info!("serving metrics on http://{bound}/metrics");
    let task = tokio::spawn(accept_loop(listener, shared, state));
    Ok((bound, task))
}

/// Binds `addr` (`SO_REUSEADDR`, as std does) with a [`BACKLOG`] of pending connections.
fn listen(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

/// Accepts while fewer than [`MAX_CONNECTIONS`] are open; each connection is served in its
/// own task holding one permit.
async fn accept_loop(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    state: Arc<MetricsState>,
) {
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let mut errors = LogLimit::default();
    loop {
        // Wait for a free slot before accepting: the rest stay in the kernel's backlog.
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
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
        let (shared, state) = (shared.clone(), state.clone());
        tokio::spawn(async move {
            serve_connection(stream, shared, state).await;
            drop(permit);
        });
    }
}

/// Serves one connection with the header limits and timeouts above.
async fn serve_connection(
    stream: tokio::net::TcpStream,
    shared: Arc<Shared>,
    state: Arc<MetricsState>,
) {
    let svc = hyper::service::service_fn(move |req| {
        let (shared, state) = (shared.clone(), state.clone());
        async move { Ok::<_, Infallible>(respond(&req, || snapshot(&shared, &state))) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_headers(MAX_HEADERS)
        .max_header_size(MAX_HEADER_BYTES)
        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc);
    match tokio::time::timeout(CONNECTION_LIFETIME, conn).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!("metrics connection: {e}"),
        Err(_) => tracing::debug!("metrics connection: open over {CONNECTION_LIFETIME:?}, closed"),
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
