//! `mdpilot serve`: the one event loop.
//!
//! Start-up: take the single-instance lock (`/run/mdpilot/serve.lock` under the root), read the
//! arrays, start the [`crate::watch::Watcher`] (and the simulator with `--sim`), serve every object
//! on the bus, then request `org.mdpilot.MdPilot1` and tell systemd READY. SIGTERM/SIGINT are
//! handled from the first moment: a stop while connecting exits 0 at once (nothing changed
//! yet), a stop after it goes through the shutdown below. A bus that accepts the connection but
//! never completes it (authentication, `Hello`) is given up after 30 s
//! ([`ServeError::BusTimeout`], exit 1), so systemd's `Restart=` can try again.
//!
//! Loop: watcher/simulator events are drained in batches; each batch re-reads only what it
//! concerns (mdstat/udev → everything; a sysfs attribute → that array's sysfs), and publishes
//! the new model's Array objects ([`crate::dbus::publish`]: PropertiesChanged /
//! InterfacesAdded / InterfacesRemoved for the differences only). While a sync runs, a timer re-reads progress every
//! `progress_interval_ms`; with no sync running there is no timer. A client leaving the bus
//! (`NameOwnerChanged` with an empty new owner) loses its leases. Under a unit with
//! `WatchdogSec=` (`$WATCHDOG_USEC`) the loop sends `WATCHDOG=1` at half that interval.
//! Each model also goes through [`events::EventSink`]: mdadm-style events to the log and the
//! configured `[events] program`.
//!
//! `pid` lease owners are watched with pidfds ([`pidwatch`]): their leases go within a second
//! of the exit. Wipe jobs a previous run left unfinished continue at start-up ([`resume`]).
//! Shutdown (SIGTERM/SIGINT): STOPPING, pause the checks this tool runs (position saved, `idle`
//! written: [`crate::check::run::pause_for_shutdown`]; they resume at the next start, or in the
//! schedule's next window), interrupt wipe jobs (checkpoints kept), release what this
//! instance owns (bus-name leases, its jobs' leases and freezes; named and `pid` leases stay and
//! keep applying), release the name, exit 0. A failed read is logged and the last good state kept: bad input never kills the loop.
//!
//! The state the loop shares with the D-Bus objects (model, published manager properties, lease
//! owners, wipe jobs) is [`crate::shared::State`].
//!
//! Machine shutdown: `logind` holds a *delay* inhibitor (never a block one) and pauses the
//! checks on `PrepareForShutdown`, then lets go.

mod bitmaps;
pub mod events;
pub mod expiry;
mod instance;
mod logind;
pub mod pidwatch;
pub mod resume;
pub mod scheduler;

pub mod metrics_http;

use crate::config::Config;
use crate::dbus::check::CheckView;
use crate::dbus::manager::Manager;
use crate::dbus::objects::ObjectManager;
use crate::dbus::publish::{self, ArrayObjects};
use crate::dbus::shared::Shared;
use crate::dbus::{BusChoice, BUS_NAME, MANAGER_PATH, ROOT_PATH};
use crate::host::Root;
use crate::lock::lock;
use crate::model::MdStat;
use crate::policy::{Owner, Policy};
use crate::shared::{Refresh, State};
use crate::sysfs;
use crate::watch::{Event, Watcher};
use futures_util::StreamExt;
use instance::{lock_instance, notify, watchdog_from_env, watchdog_ping};
use std::collections::BTreeSet;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;
use zbus::object_server::SignalEmitter;

/// Arguments of `mdpilot serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Run against a simulated kernel tree in a temporary directory (ignores --root).
    #[arg(long)]
    pub sim: bool,
    /// Bus to serve on: `system`, `session`, or a D-Bus address (`unix:path=/tmp/bus`).
    #[arg(long, default_value = "system", value_name = "BUS")]
    pub bus: BusChoice,
    /// Serve Prometheus metrics on http://ADDR:PORT/metrics, or on the Unix socket PATH with
    /// `unix:PATH` (overrides `metrics.listen`; the socket's mode and group are the config's).
    #[arg(long, value_name = "ADDR:PORT|unix:PATH")]
    pub metrics: Option<crate::config::MetricsListen>,
    /// How long start-up waits for the bus to complete the connection (authentication and
    /// `Hello`), milliseconds; then it gives up with [`ServeError::BusTimeout`]. Hidden: 30 s
    /// suits every real bus; tests shorten it.
    #[arg(long, hide = true, value_name = "MS", default_value_t = 30_000)]
    pub bus_timeout_ms: u64,
}

/// Why the service could not start (or stopped abnormally).
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Another `mdpilot serve` holds the lock.
    #[error("another mdpilot serve is running (lock {0} is held)")]
    AlreadyRunning(String),
    /// The lock file could not be created.
    #[error("cannot create the lock file {path}")]
    Lock {
        /// The lock file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The simulated tree could not be created.
    #[error("cannot create the simulated tree")]
    Sim(#[source] std::io::Error),
    /// The bus is unreachable or refused an operation.
    #[error("D-Bus: {what}")]
    Bus {
        /// What we were doing.
        what: String,
        /// Why.
        #[source]
        source: Box<zbus::Error>,
    },
    /// The bus accepted the connection but did not complete it (authentication and `Hello`)
    /// within the connect timeout (`--bus-timeout-ms`, 30 s).
    #[error(
        "D-Bus: the bus did not answer within {} s (authentication and Hello); is dbus-daemon \
         running and responsive?",
        .0.as_secs_f64()
    )]
    BusTimeout(Duration),
    /// The connection to the bus ended while serving.
    #[error("lost the connection to the bus")]
    BusLost,
    /// Another process owns the bus name.
    #[error("the name {BUS_NAME} is already owned on this bus")]
    NameTaken,
    /// Configuration could not be loaded.
    #[error("configuration")]
    Config(#[source] crate::config::ConfigError),
    /// The metrics listener could not be bound.
    #[error(transparent)]
    Metrics(#[from] metrics_http::BindError),
    /// Signal handlers could not be installed.
    #[error("cannot install signal handlers")]
    Signals(#[source] std::io::Error),
}

fn bus_err(what: &str) -> impl FnOnce(zbus::Error) -> ServeError + '_ {
    move |source| ServeError::Bus {
        what: what.to_string(),
        source: Box::new(source),
    }
}

/// Runs the service until SIGTERM/SIGINT. Exit codes: 0 clean stop, 1 failure, 3 already running.
pub fn run(root: &Root, args: ServeArgs) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(&e, 1),
    };
    match rt.block_on(serve(root.clone(), args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ (ServeError::AlreadyRunning(_) | ServeError::NameTaken)) => fail(&e, 3),
        Err(e) => fail(&e, 1),
    }
}

/// `mdpilot: <error chain>` on stderr, and `code`.
fn fail(err: &dyn std::error::Error, code: u8) -> ExitCode {
    eprintln!("mdpilot: {}", crate::error::error_chain(err));
    ExitCode::from(code)
}

/// Reads the whole model; on failure logs and returns `None` (the caller keeps the old one).
fn collect(root: &Root) -> Option<MdStat> {
    match sysfs::collect(root) {
        Ok(m) => Some(m),
        Err(e) => {
            tracing::warn!("cannot read the arrays, keeping the last good state: {e}");
            None
        }
    }
}

/// The model at start: the arrays as read, then the check upkeep and the resume of checks the
/// last stop paused ([`start_checks`]), and the arrays whose `sync_action` that wrote read
/// again. Arrays that cannot be read give an empty model (logged).
fn first_model(root: &Root, config: &Config) -> MdStat {
    let mut model = collect(root).unwrap_or_default();
    let paused = start_checks(root, config, &model);
    reread_arrays(root, &mut model, &paused);
    model
}

/// Builds the bus connection within `limit`: `Ok(None)` when a stop signal comes first.
///
/// Errors: [`ServeError::BusTimeout`] after `limit`; [`ServeError::Bus`] when the bus refuses.
async fn connect(
    signals: &mut Signals,
    builder: zbus::connection::Builder<'_>,
    limit: Duration,
) -> Result<Option<zbus::Connection>, ServeError> {
    let connect = tokio::time::timeout(limit, builder.build());
    let Some(conn) = signals
        .unless_stopped("connecting to the bus", connect)
        .await
    else {
        return Ok(None);
    };
    conn.map_err(|_| ServeError::BusTimeout(limit))?
        .map_err(bus_err("cannot connect to the bus"))
        .map(Some)
}

async fn serve(root: Root, args: ServeArgs) -> Result<(), ServeError> {
    // Handlers first: a SIGTERM during start-up must still go through the orderly shutdown.
    let mut signals = Signals::install()?;
    let sim = start_sim(args.sim)?;
    let root = sim.as_ref().map_or(root, |s| s.root().clone());
    let _lock = lock_instance(&root)?;
    let config = Arc::new(Config::load(&root).map_err(ServeError::Config)?);
    let progress = Duration::from_millis(config.service.progress_interval_ms.max(50));
    let policy = Policy::new(root.clone(), config.policy_settings(&root));

    // The one model: the loop's, shared with the objects (replaced whole after each step).
    let model = Arc::new(first_model(&root, &config));
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let (refresh_tx, refresh_rx) = tokio::sync::mpsc::unbounded_channel();
    let _watcher = start_watcher(&root, &tx);
    let core = Arc::new(State::new(
        root.clone(),
        config.clone(),
        policy,
        model.clone(),
        refresh_tx,
        progress,
    ));
    let shared = Arc::new(Shared::new(core.clone(), args.bus.clone()));
    let metrics = Arc::new(metrics_http::MetricsState::new(core.policy.show().ok()));
    let metrics_task =
        start_metrics(args.metrics.clone(), &config.metrics, &core, &metrics).await?;
    let builder = bus_objects(&args.bus, &shared)?;
    // Nothing is changed before the connection: a stop here only drops the listener, the
    // lock and the simulated tree.
    let limit = Duration::from_millis(args.bus_timeout_ms);
    let Some(conn) = connect(&mut signals, builder, limit).await? else {
        return Ok(());
    };
    let mut published = ArrayObjects::default();
    publish_arrays(&conn, &shared, &config, &model, &mut published).await;
    let setup = take_over(&shared, &conn, config.wipe.auto_resume);
    let Some(owners) = signals.unless_stopped("starting", setup).await else {
        // Resumed jobs may hold freezes and leases by now: the orderly shutdown undoes them.
        shutdown(&shared, &conn).await;
        return Ok(());
    };
    let mut owners = owners?;
    notify(&[
        sd_notify::NotifyState::Ready,
        sd_notify::NotifyState::Status("watching md arrays"),
    ]);
    tracing::info!("serving {BUS_NAME} with {} arrays", published.len());
    // The first model is the events' baseline (DegradedArray for arrays already degraded).
    let mut events = events::EventSink::new(config.events.program.clone());
    events.feed(&model);
    let (hook, poke) = crate::sim::LoopHook::new();
    let sim_task = sim.map(|s| tokio::spawn(s.run(tx.clone(), poke)));
    let expiry_task = tokio::spawn(expiry::run(shared.clone(), conn.clone()));
    let schedule_task = tokio::spawn(background(core.clone(), logind::wanted(&args.bus)));
    drop(tx);
    let mut lp = Loop {
        sim: args.sim.then_some(hook),
        root,
        config,
        conn: conn.clone(),
        shared: shared.clone(),
        published,
        model,
        progress,
        events,
        metrics,
        watchdog: watchdog_from_env(),
        bitmaps: Arc::new(bitmaps::Upkeep::default()),
    };
    let result = lp.run(rx, refresh_rx, &mut owners, signals).await;
    // No event program (or a child it left behind) outlives the service.
    lp.events.shutdown();
    expiry_task.abort();
    schedule_task.abort();

    shutdown(&shared, &conn).await;
    stop_side_tasks(sim_task, metrics_task).await;
    result
}

/// After the orderly shutdown: stops the simulation (its tree, a TempDir, is deleted when
/// the task's Sim drops) and the metrics listener.
async fn stop_side_tasks<S>(
    sim_task: Option<tokio::task::JoinHandle<S>>,
    metrics_task: Option<tokio::task::JoinHandle<()>>,
) {
    if let Some(t) = sim_task {
        t.abort();
        let _ = t.await;
    }
    if let Some(t) = metrics_task {
        t.abort();
    }
}

impl Signals {
    /// Installs the SIGTERM, SIGINT and SIGHUP handlers. Errors: [`ServeError::Signals`].
    fn install() -> Result<Self, ServeError> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            term: signal(SignalKind::terminate()).map_err(ServeError::Signals)?,
            int: signal(SignalKind::interrupt()).map_err(ServeError::Signals)?,
            hup: signal(SignalKind::hangup()).map_err(ServeError::Signals)?,
        })
    }
}

/// The metrics listener on `listen` (`--metrics`), else on `config.listen`, with the socket
/// access of `config`; `None` without an address. Errors: the address cannot be bound.
async fn start_metrics(
    listen: Option<crate::config::MetricsListen>,
    config: &crate::config::MetricsConfig,
    core: &Arc<State>,
    metrics: &Arc<metrics_http::MetricsState>,
) -> Result<Option<tokio::task::JoinHandle<()>>, ServeError> {
    let Some(listen) = listen.or_else(|| config.listen.clone()) else {
        return Ok(None);
    };
    let access = metrics_http::SocketAccess {
        mode: config.socket_mode,
        group: config.socket_group.clone(),
    };
    let (_, task) = metrics_http::start(&listen, &access, core.clone(), metrics.clone()).await?;
    Ok(Some(task))
}

/// `--sim`: creates the simulated tree and watches its control signal; `None` without
/// `--sim`. Errors: [`ServeError::Sim`].
fn start_sim(sim: bool) -> Result<Option<crate::sim::Sim>, ServeError> {
    if !sim {
        return Ok(None);
    }
    let mut s = crate::sim::Sim::create().map_err(ServeError::Sim)?;
    s.watch_control_signal().map_err(ServeError::Sim)?;
    eprintln!("mdpilot: simulated tree in {}", s.path().display());
    Ok(Some(s))
}

/// The kernel-notification watcher sending to `tx`; `None` (logged) when it cannot start.
fn start_watcher(root: &Root, tx: &tokio::sync::mpsc::UnboundedSender<Event>) -> Option<Watcher> {
    match Watcher::start(root.clone(), tx.clone()) {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!(
                "no kernel notifications: {e}: {:?}",
                std::error::Error::source(&e)
            );
            None
        }
    }
}

/// The connection builder with the ObjectManager and the Manager served; the arrays follow
/// once connected ([`publish_arrays`]), before the name is asked for: a client that sees the
/// name sees them. Errors: [`ServeError::Bus`].
fn bus_objects(
    bus: &BusChoice,
    shared: &Arc<Shared>,
) -> Result<zbus::connection::Builder<'static>, ServeError> {
    bus.builder()
        .map_err(bus_err("cannot open the bus"))?
        .serve_at(
            ROOT_PATH,
            ObjectManager {
                shared: shared.clone(),
            },
        )
        .map_err(bus_err("serve ObjectManager"))?
        .serve_at(
            MANAGER_PATH,
            Manager {
                shared: shared.clone(),
            },
        )
        .map_err(bus_err("serve Manager"))
}

/// Publishes the Array objects of `model` ([`crate::dbus::publish`]): their properties with
/// the check record's and the bitmap-wanted list's, read now (the check upkeep, when any, was
/// the step before: publishing writes nothing).
async fn publish_arrays(
    conn: &zbus::Connection,
    shared: &Arc<Shared>,
    config: &Config,
    model: &MdStat,
    published: &mut ArrayObjects,
) {
    let root = &shared.core.root;
    let now = crate::host::unix_now_s() as i64;
    let checks = CheckView::read(root, config, model, now);
    let pending = bitmaps::Upkeep::pending(root);
    let objects = ArrayObjects::build(model, &checks, &pending);
    publish::publish(conn, shared, published, objects).await;
}

/// After the connection, before READY: watch clients leaving, continue the previous run's
/// interrupted jobs ([`resume`]), reap its dead leases and freezes, then request the name.
/// Returns the `NameOwnerChanged` stream the loop follows.
///
/// Errors: [`ServeError::Bus`] (a call failed), [`ServeError::NameTaken`].
async fn take_over(
    shared: &Arc<Shared>,
    conn: &zbus::Connection,
    auto_resume: bool,
) -> Result<zbus::fdo::NameOwnerChangedStream, ServeError> {
    let dbus = zbus::fdo::DBusProxy::new(conn)
        .await
        .map_err(bus_err("org.freedesktop.DBus"))?;
    let owners = dbus
        .receive_name_owner_changed()
        .await
        .map_err(bus_err("watch NameOwnerChanged"))?;
    // Interrupted jobs of a previous run continue first: each takes over its run's freeze.
    resume::resume_jobs(shared, conn, auto_resume).await;
    // Leases and journaled changes (freezes) of a previous run whose owners are gone: a
    // bus-name lease was tied to the connection to the previous instance, so every one is
    // dead now (a clean stop released them; only a crash leaves them); pids are checked.
    let reaped = shared.core.policy.reap(&|o: &Owner| match o {
        Owner::BusName(_) => false,
        // pid and start time: a reused pid does not keep a freeze or a lease.
        o => crate::policy::cli_alive(o),
    });
    if let Err(e) = reaped {
        tracing::warn!("cannot reap stale leases: {e}");
    }
    use zbus::fdo::RequestNameFlags as F;
    let reply = conn
        .request_name_with_flags(BUS_NAME, F::DoNotQueue.into())
        .await;
    match reply {
        Ok(
            zbus::fdo::RequestNameReply::PrimaryOwner | zbus::fdo::RequestNameReply::AlreadyOwner,
        ) => Ok(owners),
        Ok(_) | Err(zbus::Error::NameTaken) => Err(ServeError::NameTaken),
        Err(e) => Err(bus_err("request the name")(e)),
    }
}

/// The orderly stop once connected: STOPPING, then jobs first (the engine unfreezes their
/// resync and releases their leases), then what this instance owns, then the name.
async fn shutdown(shared: &Arc<Shared>, conn: &zbus::Connection) {
    notify(&[sd_notify::NotifyState::Stopping]);
    // Checks first: two small writes per array, so the stop never waits for a check.
    let core = shared.core.clone();
    let paused = tokio::task::spawn_blocking(move || {
        crate::check::run::pause_for_shutdown(&core.root, &core.config())
    })
    .await;
    if let Ok(Err(e)) = paused {
        tracing::warn!("pausing checks: {}", crate::error::error_chain(&e));
    }
    // The resync throttle's leases have no owner: released here, so md's own limits return.
    let core = shared.core.clone();
    let released = tokio::task::spawn_blocking(move || {
        crate::resync_throttle::release_all(&core.root, &core.config())
    })
    .await;
    if let Ok(Err(e)) = released {
        tracing::error!(
            "cannot release the resync throttle: {}",
            crate::error::error_chain(&e)
        );
    }
    shared.core.cancel_jobs(Duration::from_secs(30)).await;
    // Restart is not stop: only what this instance owns goes (bus-name leases, the leases and
    // freezes of its own jobs, owned by its pid). Named (`--holder`) and other `pid` leases
    // stay in the state file and keep applying; `policy restore` drops everything.
    let me = std::process::id();
    if let Err(e) = shared.core.policy.reap(&|o: &Owner| match o {
        Owner::BusName(_) => false,
        Owner::Process { pid: p, .. } | Owner::Pid(p) => *p != me,
        Owner::None => true,
    }) {
        tracing::error!("cannot release the service's leases on shutdown: {e}");
    }
    if let Err(e) = conn.release_name(BUS_NAME).await {
        tracing::warn!("cannot release {BUS_NAME}: {e}");
    }
}

/// `[check] state_path` is read at start only: the record of a check that runs now is there,
/// and a reload that moved it would orphan that check (its position, its throttle). A reload
/// that changes it keeps the one in effect in `new` and logs that the new path takes effect at
/// the next start.
fn keep_check_state_path(old: &Config, new: &mut Config) {
    if new.check.state_path == old.check.state_path {
        return;
    }
    tracing::warn!(
        "SIGHUP: [check] state_path {} takes effect at the next start (systemctl restart mdpilot); the check record stays {}",
        new.check.state_path.display(),
        old.check.state_path.display()
    );
    new.check.state_path.clone_from(&old.check.state_path);
}

/// SIGTERM and SIGINT, installed first thing in [`serve`] so that a stop during start-up is
/// seen at once, not after it; SIGHUP (reload the configuration), so that one during start-up
/// does not kill the service (it is seen once the loop runs).
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    /// Runs `fut` unless SIGTERM or SIGINT arrives first: `None` then (logged, naming `what`
    /// start-up was doing; `fut` is dropped).
    async fn unless_stopped<T>(
        &mut self,
        what: &str,
        fut: impl std::future::Future<Output = T>,
    ) -> Option<T> {
        tokio::select! {
            r = fut => Some(r),
            _ = self.term.recv() => {
                tracing::info!("SIGTERM while {what}: stopping");
                None
            }
            _ = self.int.recv() => {
                tracing::info!("SIGINT while {what}: stopping");
                None
            }
        }
    }
}

/// What one step of the loop re-reads: kernel notifications, refresh requests and the progress
/// timer each become one.
#[derive(Debug, Default)]
struct Reread {
    /// `/proc/mdstat` and every array's sysfs.
    full: bool,
    /// Else these arrays' sysfs (kernel names).
    arrays: BTreeSet<String>,
    /// A `md/sync_action` changed or was written (the simulator looks at its tree again).
    sync_action: bool,
}

impl Reread {
    fn everything() -> Reread {
        Reread {
            full: true,
            ..Reread::default()
        }
    }

    /// A batch of kernel notifications against `model` (a udev event of a member needs the
    /// whole re-read).
    fn of_events(batch: &[Event], model: &MdStat) -> Reread {
        let members: BTreeSet<String> = model
            .arrays
            .iter()
            .flat_map(|a| a.members.iter().map(|m| m.name.clone()))
            .collect();
        let mut r = Reread {
            full: batch.iter().any(|e| e.needs_full_refresh(&members)),
            ..Reread::default()
        };
        for e in batch {
            if let Event::ArrayAttr { array, attr } = e {
                r.arrays.insert(array.clone());
                r.sync_action |= attr == "sync_action";
            }
        }
        r
    }

    /// A batch of refresh requests (an array's refresh follows a `md/sync_action` write).
    fn of_refreshes(batch: &[Refresh]) -> Reread {
        let mut r = Reread::default();
        for q in batch {
            match q {
                Refresh::All => r.full = true,
                Refresh::Array(a) => {
                    r.arrays.insert(a.clone());
                    r.sync_action = true;
                }
            }
        }
        r
    }
}

/// Re-reads the sysfs of the arrays of `model` named in `names`.
fn reread_arrays(root: &Root, model: &mut MdStat, names: &BTreeSet<String>) {
    for a in &mut model.arrays {
        if names.contains(&a.name) {
            a.sysfs = Some(sysfs::read_array(root, &a.name));
        }
    }
}

/// What the loop's check upkeep did: the arrays it paused (kernel names; their
/// `md/sync_action` was written) and whether the check record changed (a finished check's
/// result, a running one's position) or the resync throttle's notes did, so the Array
/// properties are published again.
#[derive(Debug, Default)]
struct UpkeepDone {
    paused: BTreeSet<String>,
    recorded: bool,
}

/// At start: the check upkeep ([`check_upkeep`]), then the checks paused by the service's
/// last stop resume ([`crate::check::run::resume_after_shutdown`]); the arrays whose
/// `sync_action` was written. Failures are logged.
fn start_checks(root: &Root, config: &Config, model: &MdStat) -> BTreeSet<String> {
    let mut written = check_upkeep(root, config, model).paused;
    match crate::check::run::resume_after_shutdown(root, config) {
        Ok(r) => written.extend(r),
        Err(e) => tracing::warn!("resuming checks: {}", crate::error::error_chain(&e)),
    }
    written
}

/// The loop's helper beside it, when `logind`: the shutdown watcher ([`logind::run`]);
/// aborted at the stop. (The check schedule is a step of the loop: [`Loop::schedule_step`].)
async fn background(core: Arc<State>, logind: bool) {
    if logind {
        logind::run(core).await;
    }
}

/// Waits for the next tick of `t`; forever without a timer.
async fn next_tick(t: Option<&mut tokio::time::Interval>) {
    match t {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending::<()>().await,
    }
}

/// The loop's check upkeep, a step of its own after publishing
/// ([`crate::check::run::upkeep_all`]: a finished check's result, the position of a running
/// one, a window's end, which pauses the check: `md/sync_action` is written), after the
/// resync throttle's look ([`crate::resync_throttle::upkeep`]). Failures are logged and count
/// as nothing done.
fn check_upkeep(root: &Root, config: &Config, model: &MdStat) -> UpkeepDone {
    let now = crate::host::unix_now_s();
    // The resync throttle beside the checks' (their syncs never run at once on one array).
    let throttled = crate::resync_throttle::upkeep(root, config, model, now);
    match crate::check::run::upkeep_all(root, config, model, now) {
        Ok((paused, recorded)) => UpkeepDone {
            paused: paused.into_iter().collect(),
            recorded: recorded || throttled,
        },
        Err(e) => {
            tracing::warn!("check record: {}", crate::error::error_chain(&e));
            UpkeepDone {
                recorded: throttled,
                ..UpkeepDone::default()
            }
        }
    }
}

struct Loop {
    root: Root,
    /// The configuration in effect: the one copy, also handed out by [`State::config`];
    /// replaced whole on SIGHUP ([`Loop::reload`]).
    config: Arc<Config>,
    /// With `--sim`: the simulator's side of each read ([`crate::sim::LoopHook`]).
    sim: Option<crate::sim::LoopHook>,
    conn: zbus::Connection,
    shared: Arc<Shared>,
    /// The Array objects as published, by object path (their paths also in `shared.arrays`).
    published: ArrayObjects,
    /// The model: the last good read, with `shared.model` pointing at the same one.
    model: Arc<MdStat>,
    progress: Duration,
    events: events::EventSink,
    metrics: Arc<metrics_http::MetricsState>,
    /// Half of systemd's `WatchdogSec=` (`$WATCHDOG_USEC`): how often the loop sends
    /// `WATCHDOG=1`; `None` without a watchdog.
    watchdog: Option<Duration>,
    /// The arrays of `bitmap-wanted` whose bitmap is being added.
    bitmaps: Arc<bitmaps::Upkeep>,
}

/// `first` and every message already queued behind it in `rx` (a batch: one step for all).
fn drain<T>(first: T, rx: &mut UnboundedReceiver<T>) -> Vec<T> {
    let mut batch = vec![first];
    while let Ok(m) = rx.try_recv() {
        batch.push(m);
    }
    batch
}

impl Loop {
    async fn run(
        &mut self,
        mut rx: UnboundedReceiver<Event>,
        mut refreshes: UnboundedReceiver<Refresh>,
        owners: &mut zbus::fdo::NameOwnerChangedStream,
        signals: Signals,
    ) -> Result<(), ServeError> {
        let Signals {
            mut term,
            mut int,
            mut hup,
        } = signals;
        let mut ticker = self.ticker(None);
        let mut schedule = tokio::time::interval(scheduler::TICK);
        schedule.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut held = Vec::new();
        let mut watchdog = self.watchdog_timer();
        let mut watchdog_warned = false;
        // `pid` lease owners: the set is re-read from the state file after every batch of
        // events (every lease change publishes one: AcquirePriority, and the CLI's
        // `policy apply --pid`, which goes through the service while it runs), so an idle
        // service has no timer; exits are seen through the pidfds at once.
        let mut pids = pidwatch::PidWatch::new();
        let manager_emitter =
            SignalEmitter::new(&self.conn, MANAGER_PATH).map_err(bus_err("emitter"))?;
        self.sync_pids(&mut pids, &manager_emitter).await;
        self.bitmaps.step(&self.shared.core, &self.model);
        self.sim_history();
        loop {
            tokio::select! {
                _ = term.recv() => { tracing::info!("SIGTERM: stopping"); return Ok(()); }
                _ = int.recv() => { tracing::info!("SIGINT: stopping"); return Ok(()); }
                _ = hup.recv() => {
                    if self.reload() {
                        // NextCheckStart and the check upkeep follow the new `[check]`.
                        self.step(&Reread::everything(), &manager_emitter).await;
                    }
                }
                ev = rx.recv() => {
                    let Some(ev) = ev else {
                        // Every sender is gone (no watcher, no sim): keep serving the last state.
                        std::future::pending::<()>().await;
                        continue;
                    };
                    let r = Reread::of_events(&drain(ev, &mut rx), &self.model);
                    ticker = self.after_batch(&r, ticker, &mut pids, &manager_emitter).await;
                }
                _ = next_tick(ticker.as_mut()) => {
                    let r = self.syncing_reread();
                    self.step(&r, &manager_emitter).await;
                    ticker = self.ticker(ticker);
                }
                _ = schedule.tick() => {
                    self.schedule_step(&mut held, &manager_emitter).await;
                    ticker = self.ticker(ticker);
                }
                Some(first) = refreshes.recv() => {
                    let r = Reread::of_refreshes(&drain(first, &mut refreshes));
                    ticker = self.after_batch(&r, ticker, &mut pids, &manager_emitter).await;
                }
                _ = next_tick(watchdog.as_mut()) => watchdog_ping(&mut watchdog_warned),
                pid = pids.exited() => {
                    self.reap_exited(&manager_emitter, &[pid]).await;
                }
                sig = owners.next() => {
                    let Some(sig) = sig else {
                        // The bus connection is gone: without it leases cannot follow their
                        // owners. Stop (limits are restored) and let systemd restart us.
                        return Err(ServeError::BusLost);
                    };
                    self.owner_changed(&sig, &manager_emitter).await;
                }
            }
        }
    }

    /// The systemd watchdog timer, every [`Loop::watchdog`]; `None` without a watchdog.
    /// Pinged from this loop, between batches: a loop wedged in a step is what the watchdog
    /// is for (systemd kills and restarts the service after WatchdogSec=).
    fn watchdog_timer(&self) -> Option<tokio::time::Interval> {
        self.watchdog.map(|every| {
            tracing::info!("systemd watchdog: WATCHDOG=1 every {every:?}");
            let mut t = tokio::time::interval(every);
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            t
        })
    }

    /// Re-syncs the `pid` lease owners from the state file and releases the leases of those
    /// already gone.
    async fn sync_pids(&self, pids: &mut pidwatch::PidWatch, emitter: &SignalEmitter<'_>) {
        let gone = pids.sync(&self.pid_owners());
        if !gone.is_empty() {
            self.reap_exited(emitter, &gone).await;
        }
    }

    /// A batch of kernel events or refresh requests: one step for `r`, the progress ticker
    /// re-armed, then the `pid` owners re-synced. Returns the new ticker.
    async fn after_batch(
        &mut self,
        r: &Reread,
        ticker: Option<tokio::time::Interval>,
        pids: &mut pidwatch::PidWatch,
        emitter: &SignalEmitter<'_>,
    ) -> Option<tokio::time::Interval> {
        self.step(r, emitter).await;
        let ticker = self.ticker(ticker);
        self.sync_pids(pids, emitter).await;
        ticker
    }

    /// The progress tick's re-read: the arrays syncing ([`crate::model::Array::is_syncing`]),
    /// nothing else.
    fn syncing_reread(&self) -> Reread {
        Reread {
            arrays: self
                .model
                .arrays
                .iter()
                .filter(|a| a.is_syncing())
                .map(|a| a.name.clone())
                .collect(),
            ..Reread::default()
        }
    }

    /// A `NameOwnerChanged` signal: a unique name (":1.42") that lost its owner is a client
    /// gone, whose leases are released.
    async fn owner_changed(&self, sig: &zbus::fdo::NameOwnerChanged, emitter: &SignalEmitter<'_>) {
        let Ok(a) = sig.args() else { return };
        if a.new_owner().is_none() && a.name().starts_with(':') {
            let name = a.name().to_string();
            self.shared.release_owner(emitter, &name).await;
        }
    }

    /// SIGHUP: re-reads the configuration and puts it in effect, logging which sections
    /// changed (sections read only at start-up are named as such). A configuration that does
    /// not load (a parse error, an invalid value, an unreadable file) is logged and the one in
    /// effect kept. Returns true when a changed configuration was put in effect.
    fn reload(&mut self) -> bool {
        let mut new = match Config::load(&self.root) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(
                    "SIGHUP: configuration not reloaded, keeping the one in effect: {}",
                    crate::error::error_chain(&e)
                );
                return false;
            }
        };
        keep_check_state_path(&self.config, &mut new);
        let changed = self.config.changed_sections(&new);
        if changed.is_empty() {
            tracing::info!("SIGHUP: configuration reloaded, unchanged");
            return false;
        }
        let at_start: Vec<&str> = changed
            .iter()
            .copied()
            .filter(|s| crate::config::READ_AT_START.contains(s))
            .collect();
        tracing::info!(
            changed = ?changed,
            "SIGHUP: configuration reloaded; changed: {}",
            changed.join(", ")
        );
        if !at_start.is_empty() {
            tracing::warn!(
                "SIGHUP: {} take effect at the next start (systemctl restart mdpilot)",
                at_start.join(", ")
            );
        }
        self.config = Arc::new(new);
        self.shared.core.set_config(self.config.clone());
        true
    }

    /// The pids owning leases in the state file, except this process (its jobs' leases).
    fn pid_owners(&self) -> BTreeSet<u32> {
        let me = std::process::id();
        match crate::policy::state::read(&self.shared.core.policy.settings().state_path) {
            Ok(st) => st
                .leases
                .values()
                .filter_map(|l| l.owner.pid().filter(|p| *p != me))
                .collect(),
            Err(_) => BTreeSet::new(),
        }
    }

    /// Drops the leases of the processes `exited` (and of any other dead pid) and publishes.
    async fn reap_exited(&self, emitter: &SignalEmitter<'_>, exited: &[u32]) {
        for p in exited {
            tracing::info!("pid {p} exited: releasing its leases");
        }
        let r = self.shared.core.policy.reap(&|o: &Owner| match o {
            Owner::Process { pid: p, .. } | Owner::Pid(p) if exited.contains(p) => false,
            o => crate::policy::cli_alive(o),
        });
        match r {
            Ok(v) => self.shared.publish(emitter, Some(v)).await,
            Err(e) => tracing::warn!("cannot release the leases of exited processes: {e}"),
        }
    }

    /// The progress timer exists only while some array syncs.
    fn ticker(&self, cur: Option<tokio::time::Interval>) -> Option<tokio::time::Interval> {
        if !self
            .model
            .arrays
            .iter()
            .any(crate::model::Array::is_syncing)
        {
            return None;
        }
        cur.or_else(|| {
            let mut t = tokio::time::interval_at(
                tokio::time::Instant::now() + self.progress,
                self.progress,
            );
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            Some(t)
        })
    }

    /// One step: re-reads what `r` names and publishes the differences
    /// ([`Loop::read_and_publish`]), then does the check upkeep, a step of its own (publishing
    /// writes nothing) run on the check worker and awaited; the arrays it paused are re-read
    /// and published at once, and a record it changed (a check that just ended: md sends no
    /// further event) is published at once too.
    async fn step(&mut self, r: &Reread, manager_emitter: &SignalEmitter<'_>) {
        self.read_and_publish(r, manager_emitter).await;
        // On the check worker (the record's lock, kernel writes), awaited: the loop's step.
        let (root, config, model) = (self.root.clone(), self.config.clone(), self.model.clone());
        let upkeep = move || check_upkeep(&root, &config, &model);
        let done = self.shared.core.check_worker.run(upkeep).await;
        let done = done.unwrap_or_default();
        if !done.paused.is_empty() {
            let r = Reread {
                arrays: done.paused,
                sync_action: true,
                ..Reread::default()
            };
            self.read_and_publish(&r, manager_emitter).await;
        } else if done.recorded {
            self.publish_arrays().await;
        }
        // The bitmaps waiting for a sync's end: each worker asks for its array's re-read.
        self.bitmaps.step(&self.shared.core, &self.model);
    }

    /// The check schedule's step, every [`scheduler::TICK`] with a `[check] schedule` in the
    /// configuration in effect (a SIGHUP that adds or changes it applies from the next tick):
    /// [`scheduler::tick`] on the loop's model, on the check worker (it writes kernel files and
    /// the record under its lock), awaited, so that the loop stays the record's one writer.
    /// The arrays it started or paused are re-read and published at once. A held scheduled
    /// check is logged when its reason appears or changes (`held`: the last tick's).
    async fn schedule_step(
        &mut self,
        held: &mut Vec<(String, String)>,
        manager_emitter: &SignalEmitter<'_>,
    ) {
        if self.config.check.schedule.is_none() {
            return;
        }
        let (root, config, model) = (self.root.clone(), self.config.clone(), self.model.clone());
        let ticked = self.shared.core.check_worker.run(move || {
            let now = crate::host::unix_now_s() as i64;
            scheduler::tick(&root, &config, &model, now, crate::host::utc_offset_s(now))
        });
        let Ok(ticked) = ticked.await else {
            return;
        };
        for (array, reason) in scheduler::newly_held(&ticked.held, held) {
            tracing::info!(%array, "scheduled check not started: {reason}");
        }
        *held = ticked.held;
        let written: BTreeSet<String> = ticked.started.into_iter().chain(ticked.paused).collect();
        if !written.is_empty() {
            let r = Reread {
                arrays: written,
                sync_action: true,
                ..Reread::default()
            };
            self.read_and_publish(&r, manager_emitter).await;
        }
    }

    /// Re-reads what `r` names, feeds the events, then publishes the differences.
    async fn read_and_publish(&mut self, r: &Reread, manager_emitter: &SignalEmitter<'_>) {
        if let Some(sim) = &self.sim {
            sim.before_read(&self.root, r.sync_action);
        }
        let model = match r.full.then(|| collect(&self.root)).flatten() {
            Some(m) => m,
            None => {
                let mut m = MdStat::clone(&self.model);
                reread_arrays(&self.root, &mut m, &r.arrays);
                m
            }
        };
        self.model = Arc::new(model);
        self.events.feed(&self.model);
        *lock(&self.shared.core.model) = self.model.clone();
        self.sample_history();
        self.publish_arrays().await;
        if r.full {
            // The CLI may have changed the state file itself: the timed-lease task re-reads
            // the next end (without the lock).
            self.shared.core.lease_changed.notify_one();
            // Global limits are re-read with the model; the manager shows them.
            let view = self.shared.core.policy.show().ok();
            self.metrics.set_policy(view.clone());
            if let Some(view) = view {
                self.shared.emit_props(manager_emitter, &view).await;
            }
        }
    }

    /// With `--sim`: the sync history's slots are the simulator's ([`crate::sim::sync_history`]),
    /// set before the loop's first sample.
    fn sim_history(&self) {
        if self.sim.is_some() {
            *lock(&self.shared.core.sync_history) = crate::sim::sync_history();
        }
    }

    /// The sync history's look at the new model ([`crate::sync_history::SyncHistory::observe`]);
    /// `/proc/pressure/io` is read only when a sample is taken (a sync runs or just stopped).
    fn sample_history(&self) {
        let root = &self.root;
        lock(&self.shared.core.sync_history).observe(
            &self.model,
            crate::host::unix_now_s(),
            || {
                sysfs::pressure::read_io_pressure(root)
                    .ok()
                    .map(|p| p.full_avg10)
            },
        );
    }

    async fn publish_arrays(&mut self) {
        publish_arrays(
            &self.conn,
            &self.shared,
            &self.config,
            &self.model,
            &mut self.published,
        )
        .await;
    }
}
