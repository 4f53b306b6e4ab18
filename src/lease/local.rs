//! Process-local sharing of a blob lease.
//!
//! Tasks of one process that want the same lease queue on a local async lock
//! (one per lease name, FIFO) instead of polling storage. The process takes
//! the blob lease once; when a guard ends while other local tasks are queued,
//! the lease (with its running renewal) is handed to the next task without a
//! release or an acquire. After [`LeaseOptions::with_handover_limit`]'s bound
//! (hand-overs in a row, or time since the blob lease was taken) the lease is
//! released even though tasks are waiting, and the next local task waits one
//! poll interval and a quarter before acquiring again, so pollers in other
//! processes (whose next attempt comes within one poll interval) get a turn.
//!
//! [`LeaseOptions::with_handover_limit`]: super::LeaseOptions::with_handover_limit

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};
use tokio::time::Instant;

use super::core::LeaseCore;
use super::name::LeaseName;

/// The per-name local locks of one manager.
#[derive(Debug, Default)]
pub(crate) struct LocalLeases {
    slots: Mutex<SlotMap>,
}

#[derive(Debug, Default)]
struct SlotMap {
    slots: HashMap<LeaseName, Weak<LocalSlot>>,
    /// Size after the last sweep of dead entries.
    swept_len: usize,
}

impl LocalLeases {
    /// The slot for `name`, created when no task uses it.
    pub(crate) fn slot(&self, name: &LeaseName) -> Arc<LocalSlot> {
        let mut map = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = map.slots.get(name).and_then(Weak::upgrade) {
            return slot;
        }
        let slot = Arc::new(LocalSlot::default());
        map.slots.insert(name.clone(), Arc::downgrade(&slot));
        if map.slots.len() > 2 * map.swept_len.max(32) {
            map.slots.retain(|_, s| s.strong_count() > 0);
            map.swept_len = map.slots.len();
        }
        slot
    }
}

/// One lease name's local lock and queue.
#[derive(Debug, Default)]
pub(crate) struct LocalSlot {
    /// Tasks queued on `state` right now.
    waiters: AtomicUsize,
    pub(crate) state: Arc<AsyncMutex<SlotState>>,
}

/// What the holder of a slot's lock owns.
#[derive(Debug, Default)]
pub(crate) struct SlotState {
    /// The blob lease this process holds for the name, kept between guards
    /// while it is being handed over.
    pub(crate) held: Option<Arc<LeaseCore>>,
    /// Hand-overs since the blob lease was acquired.
    pub(crate) handovers: u32,
    /// When the blob lease was acquired.
    pub(crate) held_since: Option<Instant>,
    /// After a fairness release: local acquirers wait until then.
    pub(crate) yield_until: Option<Instant>,
}

/// What a guard's end does with the blob lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Keep it for the next local task.
    HandOver,
    /// Release it (nobody waits, the lease is lost, or the fairness bound
    /// was reached).
    Release,
}

impl LocalSlot {
    /// Waits for the slot's lock, counted as a waiter meanwhile.
    pub(crate) async fn lock(&self) -> OwnedMutexGuard<SlotState> {
        let _ticket = Waiting::new(&self.waiters);
        self.state.clone().lock_owned().await
    }

    /// Takes the slot's lock if it is free.
    pub(crate) fn try_lock(&self) -> Option<OwnedMutexGuard<SlotState>> {
        self.state.clone().try_lock_owned().ok()
    }

    /// Decides what the end of a guard does, and records the decision in
    /// `state`: hand over while tasks wait and the lease is healthy, up to
    /// `max_handovers` hand-overs and `max_hold` of holding.
    pub(crate) fn ending(
        &self,
        state: &mut SlotState,
        lost: bool,
        max_handovers: u32,
        max_hold: Duration,
        yield_for: Duration,
    ) -> Ending {
        let waiting = self.waiters.load(Ordering::SeqCst) > 0;
        if !waiting || lost {
            return Ending::Release;
        }
        let held_for = state.held_since.map_or(Duration::ZERO, |t| t.elapsed());
        if state.handovers < max_handovers && held_for < max_hold {
            Ending::HandOver
        } else {
            // A poller elsewhere tries again within one poll interval; waiting a
            // quarter longer lets it in first.
            state.yield_until = Some(Instant::now() + yield_for + yield_for / 4);
            Ending::Release
        }
    }
}

/// Counts a task as waiting while it exists (also when its future is
/// dropped mid-wait).
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(counter: &'a AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::SeqCst);
        Waiting(counter)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
