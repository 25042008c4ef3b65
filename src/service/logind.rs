//! The machine's shutdown, seen through systemd-logind (org.freedesktop.login1(5)): the service
//! holds a *delay* inhibitor for `shutdown` (never a block one: a check is restartable work),
//! and on `PrepareForShutdown(true)` pauses the checks it runs
//! ([`crate::check::run::pause_for_shutdown`]: position saved, `idle` written) before it closes
//! the inhibitor's descriptor, so the shutdown goes on at once. `PrepareForShutdown(false)` (a
//! cancelled shutdown) resumes them and takes the inhibitor again.
//!
//! On the system bus ([`wanted`]). Without logind (containers, the installer) the task says
//! why once, at info ([`without`]), and ends: SIGTERM still pauses the checks.

use crate::shared::State;
use futures_util::StreamExt;
use std::sync::Arc;
use zbus::zvariant::OwnedFd;

#[zbus::proxy(
    interface = "org.freedesktop.login1.Manager",
    default_service = "org.freedesktop.login1",
    default_path = "/org/freedesktop/login1"
)]
trait Login1 {
    /// `Inhibit(what, who, why, mode)`: a descriptor that holds the lock while open.
    fn inhibit(&self, what: &str, who: &str, why: &str, mode: &str) -> zbus::Result<OwnedFd>;

    /// Sent before (`true`) a shutdown, and (`false`) when one is cancelled.
    #[zbus(signal)]
    fn prepare_for_shutdown(&self, start: bool) -> zbus::Result<()>;
}

/// The `why` of the inhibitor, as `systemd-inhibit --list` shows it.
pub const WHY: &str = "Pausing running md checks (their position is kept)";

/// The one line the service logs when it goes without logind (`why`: the bus's error): at
/// info, once per start, since a container or the installer has no logind by design.
fn without(why: &dyn std::fmt::Display) {
    tracing::info!(
        "no logind shutdown inhibitor ({why}): running checks are paused on SIGTERM only"
    );
}

/// `Inhibit("shutdown", "mdpilot", WHY, "delay")`: the descriptor that holds the lock while
/// open. Errors: logind's (absent, refused), as `Err` for the caller to say once.
async fn take(proxy: &Login1Proxy<'_>) -> zbus::Result<OwnedFd> {
    proxy.inhibit("shutdown", "mdpilot", WHY, "delay").await
}

/// Whether to watch logind: when serving on the system bus, or when `DBUS_SYSTEM_BUS_ADDRESS`
/// names the system bus explicitly (a container, a test's private bus). A service on a
/// session or private bus never takes an inhibitor on the host's logind.
pub fn wanted(bus: &crate::dbus::BusChoice) -> bool {
    matches!(bus, crate::dbus::BusChoice::System)
        || std::env::var_os("DBUS_SYSTEM_BUS_ADDRESS").is_some()
}

/// Runs until the service stops (the task is aborted) or logind is absent (said once:
/// [`without`]). A delay inhibitor taken again after a cancelled shutdown that logind refuses
/// is logged at warn; the watch goes on (the next `PrepareForShutdown` still pauses).
pub async fn run(core: Arc<State>) {
    let conn = match zbus::Connection::system().await {
        Ok(c) => c,
        Err(e) => return without(&format_args!("no system bus: {e}")),
    };
    let proxy = match Login1Proxy::new(&conn).await {
        Ok(p) => p,
        Err(e) => return without(&e),
    };
    // Subscribed before the inhibitor is taken: no signal is missed.
    let mut signals = match proxy.receive_prepare_for_shutdown().await {
        Ok(s) => s,
        Err(e) => return without(&e),
    };
    let mut lock = match take(&proxy).await {
        Ok(fd) => Some(fd),
        Err(e) => return without(&e),
    };
    while let Some(sig) = signals.next().await {
        let Ok(args) = sig.args() else {
            continue;
        };
        let c = core.clone();
        if args.start {
            let r = tokio::task::spawn_blocking(move || {
                crate::check::run::pause_for_shutdown(&c.root, &c.config())
            })
            .await;
            if let Ok(Err(e)) = r {
                tracing::warn!(
                    "pausing checks for the shutdown: {}",
                    crate::error::error_chain(&e)
                );
            }
            // Closing the descriptor lets the shutdown go on.
            drop(lock.take());
        } else {
            let r = tokio::task::spawn_blocking(move || {
                crate::check::run::resume_after_shutdown(&c.root, &c.config())
            })
            .await;
            if let Ok(Err(e)) = r {
                tracing::warn!("resuming checks: {}", crate::error::error_chain(&e));
            }
            if lock.is_none() {
                lock = take(&proxy)
                    .await
                    .inspect_err(|e| tracing::warn!("logind delay inhibitor not taken again: {e}"))
                    .ok();
            }
        }
    }
}
