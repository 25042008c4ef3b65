//! Timed leases end on time: a task of the service releases each lease whose saved end
//! ([`crate::policy::Policy::next_expiry`]) has come, through the policy (so it restores as any
//! release does), and publishes the new view on the manager.
//!
//! The end is read back from the state file before each sleep, so a lease taken (or replaced)
//! meanwhile through D-Bus or the CLI is seen within [`RECHECK`]; a lease that ended while the
//! service was stopped is released at start-up. Releasing up to [`RECHECK`] late is the bound.

use super::state::Shared;
use std::sync::Arc;
use std::time::Duration;
use zbus::object_server::SignalEmitter;

/// The longest sleep between two looks at the state file.
pub const RECHECK: Duration = Duration::from_secs(5);

/// Runs until the task is dropped: sleeps until the next end (at most [`RECHECK`]), then
/// releases what has ended. A failing release is logged and retried on the next round.
pub async fn run(shared: Arc<Shared>, conn: zbus::Connection) {
    let emitter = match SignalEmitter::new(&conn, crate::dbus::MANAGER_PATH) {
        Ok(e) => e,
        Err(e) => {
            tracing::error!("timed leases: no emitter: {e}");
            return;
        }
    };
    loop {
        let now = crate::policy::unix_now_s();
        match shared.policy.expire(now) {
            Ok(Some(view)) => shared.publish(&emitter, Some(view)).await,
            Ok(None) => {}
            Err(e) => tracing::warn!("cannot release ended timed leases: {e}"),
        }
        let wait = match shared.policy.next_expiry() {
            Some(t) => Duration::from_secs(t.saturating_sub(crate::policy::unix_now_s())),
            None => RECHECK,
        };
        tokio::time::sleep(wait.clamp(Duration::from_millis(100), RECHECK)).await;
    }
}
