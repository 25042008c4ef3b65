//! Threads of their own for the service's blocking work, one [`Pool`] per kind of work: the
//! policy's operations (its `flock` and the speed-limit writes), the check operations (the
//! check record and `md/sync_action` writes), wipe starts (the probe opens the device) and
//! the `WipeCandidates` probes. Nothing runs on tokio's shared blocking pool, whose 512
//! threads one kind of call could take for itself: a kind of work that stalls (a held lock,
//! storage that stopped answering) holds up its own pool only, and the service loop's thread
//! never waits for a lock, an open or a kernel write.
//!
//! The threads are detached: at exit the process ends them wherever they are, so a thread
//! stuck in an `open(2)` that never returns does not hold up a shutdown.

use crate::lock::lock;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};

type Work = Box<dyn FnOnce() + Send>;

/// A fixed number of named threads taking work from one queue, in order.
pub struct Pool {
    name: &'static str,
    queue: Mutex<Sender<Work>>,
}

/// The pool's threads are gone (a thread creation failed, or the work panicked): the work's
/// result will never come.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {0} worker is gone")]
pub struct Gone(pub &'static str);

impl Pool {
    /// A pool of `threads` threads named `mdpilot-<name>` (at least one). A thread that
    /// cannot be created is logged; with none the pool answers [`Gone`].
    pub fn new(name: &'static str, threads: usize) -> Pool {
        let (tx, rx) = channel::<Work>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..threads.max(1) {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("mdpilot-{name}-{i}"))
                .spawn(move || serve(&rx));
            if let Err(e) = spawned {
                tracing::error!("cannot start the {name} worker: {e}");
            }
        }
        Pool {
            name,
            queue: Mutex::new(tx),
        }
    }

    /// Queues `f`; the receiver gets its result when it has run (or an error when the pool
    /// is gone or `f` panicked). For callers that wait with a bound of their own.
    pub fn submit<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> tokio::sync::oneshot::Receiver<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let work: Work = Box::new(move || {
            let _ = tx.send(f());
        });
        let _ = lock(&self.queue).send(work);
        rx
    }

    /// Runs `f` on the pool and waits for its result.
    ///
    /// Errors: [`Gone`] when the pool has no thread left or `f` panicked.
    pub async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Gone> {
        self.submit(f).await.map_err(|_| Gone(self.name))
    }
}

/// A pool thread: runs the queued work until the pool is dropped. A panic in one piece of
/// work ends only that piece (its caller sees [`Gone`]).
fn serve(rx: &Mutex<Receiver<Work>>) {
    loop {
        let Ok(work) = lock(rx).recv() else {
            return;
        };
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_runs_on_the_pool_and_a_stuck_piece_holds_up_only_its_thread() {
        let pool = Pool::new("test", 2);
        let (release, stuck) = std::sync::mpsc::channel::<()>();
        let blocked = pool.submit(move || stuck.recv().is_ok());
        let name = pool
            .run(|| std::thread::current().name().map(str::to_string))
            .await
            .unwrap();
        assert!(name.unwrap().starts_with("mdpilot-test-"));
        release.send(()).unwrap();
        assert!(blocked.await.unwrap());
        assert_eq!(
            pool.run(|| -> u8 { panic!("boom") }).await,
            Err(Gone("test"))
        );
        assert_eq!(pool.run(|| 7).await, Ok(7), "a panic ends only its work");
    }
}
