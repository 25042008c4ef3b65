//! The machine's shutdown, seen through systemd-logind (org.freedesktop.login1(5)): the service
//! holds a *delay* inhibitor for `shutdown` (never a block one: a check is restartable work),
//! and on `PrepareForShutdown(true)` pauses the checks it runs
//! ([`crate::check::run::pause_for_shutdown`]: position saved, `idle` written) before it closes
//! the inhibitor's descriptor, so the shutdown goes on at once. `PrepareForShutdown(false)` (a
//! cancelled shutdown) resumes them and takes the inhibitor again.
//!
//! On the system bus ([`wanted`]). Without logind (containers, the
//! installer) the task logs once at debug and ends: SIGTERM still pauses the checks.

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

async fn take(proxy: &Login1Proxy<'_>) -> Option<OwnedFd> {
    match proxy.inhibit("shutdown", "mdpilot", WHY, "delay").await {
        Ok(fd) => Some(fd),
        Err(e) => {
            tracing::debug!("no logind delay inhibitor: {e}");
            None
        }
    }
}

/// Whether to watch logind: when serving on the system bus, or when `DBUS_SYSTEM_BUS_ADDRESS`
/// names the system bus explicitly (a container, a test's private bus). A service on a
/// session or private bus never takes an inhibitor on the host's logind.
pub fn wanted(bus: &crate::dbus::BusChoice) -> bool {
    matches!(bus, crate::dbus::BusChoice::System)
        || std::env::var_os("DBUS_SYSTEM_BUS_ADDRESS").is_some()
}

/// Runs until the service stops (the task is aborted) or logind is absent.
pub async fn run(core: Arc<State>) {
    let conn = match zbus::Connection::system().await {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!("no system bus for logind: {e}");
            return;
        }
    };
    let Ok(proxy) = Login1Proxy::new(&conn).await else {
        return;
    };
    // Subscribed before the inhibitor is taken: no signal is missed.
    let mut signals = match proxy.receive_prepare_for_shutdown().await {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!("logind: {e}");
            return;
        }
    };
    let mut lock = take(&proxy).await;
    if lock.is_none() {
        return;
    }
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
                lock = take(&proxy).await;
            }
        }
    }
}
