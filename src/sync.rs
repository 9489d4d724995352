//! The one way this worker takes a `std::sync::Mutex`: a poisoned lock (a
//! panic while it was held) is taken anyway. Every such mutex guards
//! in-memory bookkeeping that stays consistent between statements, and is
//! never held across an await.

use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, poisoned or not.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
