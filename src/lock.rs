//! The one way to take a `std::sync::Mutex`: a poisoned lock is taken as it is.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `m`, taking the data of a poisoned mutex as it is. Every value kept under the
/// crate's mutexes is replaced whole or changed in one step (a model, a property set, a job
/// table entry, a queue end, a progress callback), so a panic in another holder never leaves
/// it half-written, and one panicking thread does not take the service down with it.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
