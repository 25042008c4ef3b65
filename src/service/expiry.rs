//! Timed leases end on time: a task of the service releases each lease whose saved end
//! ([`crate::policy::Policy::next_expiry`]) has come, through the policy (so it restores as any
//! release does), and publishes the new view on the manager.
//!
//! The task sleeps until the earliest end of the timed leases (read from the state file,
//! without the lock), or for ever when there is none, and is woken early by
//! [`crate::shared::State::lease_changed`] (every lease change through the service notifies it). The policy
//! lock is taken only when a lease has ended, so an idle service never touches it. A lease
//! that ended while the service was stopped is released at start-up. The release runs on
//! tokio's blocking pool: the lock and the knob writes never stall the event loop.

use crate::dbus::shared::Shared;
use std::sync::Arc;
use std::time::Duration;
use zbus::object_server::SignalEmitter;

/// What the task does next, given the earliest end `next` (Unix seconds) and `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A lease has ended: release it now.
    Expire,
    /// Sleep this long (or until woken).
    Sleep(Duration),
    /// No timed lease: sleep until woken.
    Idle,
}

/// The next [`Step`]. Pure.
pub fn step(next: Option<u64>, now: u64) -> Step {
    match next {
        Some(t) if t <= now => Step::Expire,
        Some(t) => Step::Sleep(Duration::from_secs(t - now)),
        None => Step::Idle,
    }
}

/// Runs until the task is dropped. A failing release is logged and retried after a second.
pub async fn run(shared: Arc<Shared>, conn: zbus::Connection) {
    let emitter = match SignalEmitter::new(&conn, crate::dbus::MANAGER_PATH) {
        Ok(e) => e,
        Err(e) => {
            tracing::error!("timed leases: no emitter: {e}");
            return;
        }
    };
    loop {
        let now = crate::host::unix_now_s();
        let wait = match step(shared.core.policy.next_expiry(), now) {
            Step::Expire => {
                let s = shared.clone();
                match shared
                    .core
                    .policy_worker
                    .run(move || s.core.policy.expire(now))
                    .await
                {
                    Ok(Ok(Some(view))) => {
                        shared.publish(&emitter, Some(view)).await;
                        continue;
                    }
                    Ok(Ok(None)) => continue,
                    Ok(Err(e)) => tracing::warn!("cannot release ended timed leases: {e}"),
                    Err(e) => tracing::warn!("timed leases: {e}"),
                }
                Some(Duration::from_secs(1))
            }
            Step::Sleep(d) => Some(d),
            Step::Idle => None,
        };
        let sleep = async {
            match wait {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = sleep => {}
            () = shared.core.lease_changed.notified() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_task_sleeps_until_the_next_end_and_expires_only_when_due() {
        assert_eq!(step(None, 100), Step::Idle);
        assert_eq!(step(Some(160), 100), Step::Sleep(Duration::from_secs(60)));
        assert_eq!(step(Some(100), 100), Step::Expire);
        assert_eq!(step(Some(5), 100), Step::Expire);
        assert_eq!(
            step(Some(u64::MAX), 0),
            Step::Sleep(Duration::from_secs(u64::MAX))
        );
    }
}
