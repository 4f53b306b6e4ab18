//! Process-local sharing of a blob lease, and the turns processes take.
//!
//! Tasks of one process that want the same lease queue on a local async lock
//! (one per lease name, FIFO) instead of polling storage. The process takes
//! the blob lease once; when a guard ends while other local tasks are queued,
//! the lease (with its running renewal) is handed to the next task without a
//! release or an acquire.
//!
//! A process's **tenure** is its run of guards on one lease held back to
//! back: hand-overs, and fresh acquires that follow this process's own
//! release of the lease by less than one poll interval and a half. A
//! tenure ends when a guard ends after [`LeaseOptions::with_handover_limit`]'s
//! bound (units in a row, or time since the tenure began), or after the
//! shorter [`LeaseOptions::with_contended_hold`] once this process has seen
//! another one hold the lease (one of its own acquires was refused). At the
//! end of a tenure the guard's end looks at the wait queue across processes
//! (`queue.rs`) once: a fresh remote waiter at its head is handed the lease
//! (Change Lease to its registered id); nobody there, and a new tenure
//! begins (local hand-over or release as usual), with the longer bound.
//!
//! [`LeaseOptions::with_handover_limit`]: super::LeaseOptions::with_handover_limit
//! [`LeaseOptions::with_contended_hold`]: super::LeaseOptions::with_contended_hold

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
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
    /// Kept while idle too, so that a tenure and what this process learnt
    /// of contention survive between guards; swept when long idle.
    slots: HashMap<LeaseName, Arc<LocalSlot>>,
    /// Size after the last sweep of dead entries.
    swept_len: usize,
}

impl LocalLeases {
    /// The slot for `name`, created when no task uses it.
    pub(crate) fn slot(&self, name: &LeaseName) -> Arc<LocalSlot> {
        let mut map = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = map.slots.get(name) {
            return slot.clone();
        }
        let slot = Arc::new(LocalSlot::default());
        map.slots.insert(name.clone(), slot.clone());
        if map.slots.len() > 2 * map.swept_len.max(32) {
            let now = Instant::now();
            map.slots
                .retain(|_, s| Arc::strong_count(s) > 1 || !s.forgettable(now));
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
    /// Guards after the first in the current tenure (hand-overs and
    /// back-to-back re-acquires).
    pub(crate) handovers: u32,
    /// When the current tenure began.
    pub(crate) held_since: Option<Instant>,
    /// When this process last released the blob lease (not at a tenure's
    /// end): a fresh acquire soon after continues the tenure.
    pub(crate) released_at: Option<Instant>,
    /// The registration in the wait queue that calls trying once (leader
    /// campaigns, run-once) keep between calls.
    pub(crate) queued: Option<super::queue::Queued>,
    /// This process has seen another one hold the lease (an acquire of its
    /// own was refused) since its last look at an empty wait queue.
    pub(crate) contended: bool,
}

/// How long an idle slot is kept for what it knows (its tenure, whether
/// others wait) before a sweep may drop it.
const FORGET_AFTER: Duration = Duration::from_secs(60);

/// The bounds that end a tenure, from the manager's settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TenureBounds {
    pub(crate) max_handovers: u32,
    pub(crate) max_hold: Duration,
    pub(crate) contended_hold: Duration,
    /// How soon after this process's own release a fresh acquire of its
    /// continues the tenure.
    pub(crate) continue_within: Duration,
}

impl TenureBounds {
    pub(crate) fn of(settings: &super::Settings) -> Self {
        let poll = settings.poll_interval;
        TenureBounds {
            max_handovers: settings.max_handovers,
            max_hold: settings.max_hold,
            contended_hold: settings.contended_hold,
            continue_within: poll + poll / 2,
        }
    }
}

impl SlotState {
    /// Records a fresh acquire at `now`: it continues the tenure when it
    /// follows this process's own release closely and nobody else was seen
    /// in between; otherwise a tenure begins.
    pub(crate) fn acquired(&mut self, now: Instant, continue_within: Duration) {
        let continued = self
            .released_at
            .is_some_and(|at| now.saturating_duration_since(at) < continue_within)
            && self.held_since.is_some();
        if continued {
            self.handovers = self.handovers.saturating_add(1);
        } else {
            self.handovers = 0;
            self.held_since = Some(now);
        }
        self.released_at = None;
    }

    /// Records what an attempt at the blob found: refused (`held_seen`) or
    /// not.
    pub(crate) fn attempted(&mut self, held_seen: bool) {
        if held_seen {
            self.contended = true;
            self.released_at = None;
        }
    }

    /// Starts a new tenure on a lease this process keeps (nobody waited in
    /// the queue at the end of the last one).
    pub(crate) fn renew_tenure(&mut self, now: Instant) {
        self.held_since = Some(now);
        self.handovers = 0;
        self.contended = false;
    }
}

/// What a guard's end does with the blob lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Keep it for the next local task.
    HandOver,
    /// Release it (nobody waits, or the lease is lost).
    Release,
    /// The tenure reached its bound: pass the lease to the head of the wait
    /// queue across processes, if a fresh one is there; otherwise hand it
    /// over locally (a new tenure) or release it.
    TenureEnd,
}

impl LocalSlot {
    /// Whether an idle slot knows nothing worth keeping any more.
    fn forgettable(&self, now: Instant) -> bool {
        let Ok(state) = self.state.try_lock() else {
            return false;
        };
        let last = [state.released_at, state.held_since]
            .into_iter()
            .flatten()
            .max();
        state.held.is_none() && last.is_none_or(|t| now.saturating_duration_since(t) > FORGET_AFTER)
    }

    /// Waits for the slot's lock, counted as a waiter meanwhile.
    pub(crate) async fn lock(&self) -> OwnedMutexGuard<SlotState> {
        let _ticket = Waiting::new(&self.waiters);
        self.state.clone().lock_owned().await
    }

    /// Whether tasks of this process queue for the lease.
    pub(crate) fn has_waiters(&self) -> bool {
        self.waiters.load(Ordering::SeqCst) > 0
    }

    /// Takes the slot's lock if it is free.
    pub(crate) fn try_lock(&self) -> Option<OwnedMutexGuard<SlotState>> {
        self.state.clone().try_lock_owned().ok()
    }

    /// Decides what the end of a guard does, and records the decision in
    /// `state`: hand over while tasks wait and the lease is healthy, until
    /// the tenure reaches its bound; at the bound, a tenure end (the guard
    /// looks at the wait queue).
    pub(crate) fn ending(&self, state: &mut SlotState, lost: bool, bounds: TenureBounds) -> Ending {
        let now = Instant::now();
        if lost {
            state.released_at = None;
            state.held_since = None;
            return Ending::Release;
        }
        let held_for = state
            .held_since
            .map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        let hold = if state.contended {
            bounds.contended_hold.min(bounds.max_hold)
        } else {
            bounds.max_hold
        };
        if state.handovers >= bounds.max_handovers || held_for >= hold {
            // The tenure's end: the guard's end looks at the wait queue
            // (once) and hands the lease to a remote waiter there, or
            // carries on with a new tenure.
            state.released_at = None;
            state.held_since = None;
            return Ending::TenureEnd;
        }
        if self.waiters.load(Ordering::SeqCst) > 0 {
            Ending::HandOver
        } else {
            state.released_at = Some(now);
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
