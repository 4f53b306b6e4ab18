//! The live job reservations of a manager (see
//! [`Reservation`](super::reservation::Reservation)).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Mutex as AsyncMutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::guard::{LeaseGuard, LeaseStatus};
use super::name::LeaseName;

/// The live reservations of a manager.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    entries: Mutex<HashMap<LeaseName, Arc<Entry>>>,
}

#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) guard: AsyncMutex<Option<LeaseGuard>>,
    /// Cancelled when the reservation ends early.
    pub(crate) cancel: CancellationToken,
    pub(crate) status: LeaseStatus,
    pub(crate) seq: u64,
    pub(crate) until: Instant,
}

impl Registry {
    pub(crate) fn get(&self, job: &LeaseName) -> Option<Arc<Entry>> {
        self.lock().get(job).cloned()
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<LeaseName, Arc<Entry>>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Removes `entry` if it is still the one registered for `job`.
    pub(crate) fn remove(&self, job: &LeaseName, entry: &Arc<Entry>) -> bool {
        let mut entries = self.lock();
        if entries.get(job).is_some_and(|e| Arc::ptr_eq(e, entry)) {
            entries.remove(job);
            true
        } else {
            false
        }
    }
}
