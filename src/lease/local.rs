//! Process-local sharing of a blob lease (one FIFO async lock per name)
//! and the tenures that bound it (see the [module docs](super#turns-between-processes)).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};
use tokio::time::Instant;

use crate::backend::LeaseId;

use super::core::LeaseCore;
use super::name::LeaseName;
use super::options::Settings;

/// The per-name local locks of one manager.
#[derive(Debug, Default)]
pub(crate) struct LocalLeases {
    slots: Mutex<SlotMap>,
}

#[derive(Debug, Default)]
struct SlotMap {
    /// Kept while idle (a tenure survives between guards), swept when long
    /// idle.
    slots: HashMap<LeaseName, Arc<LocalSlot>>,
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
    /// The blob lease this process holds, kept between guards.
    pub(crate) held: Option<Arc<LeaseCore>>,
    /// Guards after the first in the current tenure.
    pub(crate) handovers: u32,
    pub(crate) held_since: Option<Instant>,
    /// When this process last released the blob lease within a tenure.
    pub(crate) released_at: Option<Instant>,
    /// The registration that calls trying once keep between calls.
    pub(crate) queued: Option<super::queue::Queued>,
    /// A pass to a remote waiter decided at a tenure's end.
    pub(crate) pending: Option<Pending>,
    /// Another process wanted the lease since the queue was last empty.
    pub(crate) contended: bool,
    /// When the last guard ended, and about how long a guard lasts.
    pub(crate) last_end: Option<Instant>,
    pub(crate) last_unit: Duration,
}

/// A pass of the lease to a remote waiter, timed for its next poll.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pending {
    pub(crate) to: LeaseId,
    /// The waiter's next poll, on this process's clock.
    pub(crate) poll: Instant,
    pub(crate) every: Duration,
    /// How long before its poll the change is to be sent.
    pub(crate) lead: Duration,
}

impl Pending {
    /// Whether a guard end at `now` passes the lease (the next, about `unit`
    /// later, may be too late for the waiter's poll); a poll already too
    /// close is given up for the next.
    pub(crate) fn due(&mut self, now: Instant, unit: Duration) -> bool {
        if now + self.lead > self.poll {
            self.poll = super::queue::poll_after(self.poll, self.every, now + self.lead);
        }
        // Twice the last guard's length: guards vary.
        now + unit.saturating_mul(2) + self.lead >= self.poll
    }
}

/// Tenures shorter than `LONG_RUN` guards, of a process that has seen
/// nobody else want the lease, last at least `SHORT_RUN_HOLD`.
const LONG_RUN: u32 = 16;
const SHORT_RUN_HOLD: Duration = Duration::from_secs(2);

/// How long an idle slot is kept before a sweep may drop it.
const FORGET_AFTER: Duration = Duration::from_secs(60);

impl SlotState {
    /// Records a fresh acquire at `now` (it may continue the tenure).
    pub(crate) fn acquired(&mut self, now: Instant, poll_interval: Duration) {
        let continue_within = poll_interval + poll_interval / 2;
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

    pub(crate) fn attempted(&mut self, held_seen: bool) {
        if held_seen {
            self.released_at = None;
            self.contended = true;
        }
    }

    /// Forgets the tenure of a lease this process no longer holds.
    pub(crate) fn passed(&mut self) {
        self.held = None;
        self.held_since = None;
        self.handovers = 0;
        self.released_at = None;
        self.pending = None;
    }
}

/// What a guard's end does with the blob lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Keep it for the next local task.
    HandOver,
    Release,
    /// The tenure reached its bound: read the wait queue.
    TenureEnd,
    /// Pass the lease to the waiter a tenure's end chose, now.
    Pass(LeaseId),
    /// Keep the lease for a local task until the pass is due.
    Linger(Instant),
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

    pub(crate) fn has_waiters(&self) -> bool {
        self.waiters.load(Ordering::SeqCst) > 0
    }

    pub(crate) fn try_lock(&self) -> Option<OwnedMutexGuard<SlotState>> {
        self.state.clone().try_lock_owned().ok()
    }

    /// What a guard end at `now` does with a pass pending, if there is one:
    /// pass now, keep the lease for a local task, or linger until it is due.
    pub(crate) fn pending_ending(&self, state: &mut SlotState, now: Instant) -> Option<Ending> {
        let unit = state.last_unit;
        let pending = state.pending.as_mut()?;
        Some(if pending.due(now, unit) {
            Ending::Pass(pending.to)
        } else if self.has_waiters() {
            Ending::HandOver
        } else {
            let at = pending.poll.checked_sub(pending.lead);
            Ending::Linger(at.unwrap_or(pending.poll))
        })
    }

    /// Decides what the end of a guard does, and records it in `state`.
    pub(crate) fn ending(&self, state: &mut SlotState, lost: bool, settings: &Settings) -> Ending {
        let now = Instant::now();
        if let Some(last) = state.last_end {
            state.last_unit = now.saturating_duration_since(last);
        }
        state.last_end = Some(now);
        if lost {
            state.released_at = None;
            state.held_since = None;
            state.pending = None;
            return Ending::Release;
        }
        if let Some(ending) = self.pending_ending(state, now) {
            return ending;
        }
        let waiters = self.has_waiters();
        let held_for = state
            .held_since
            .map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        let chain = state.handovers > 0 || waiters;
        let hold = if state.contended || state.handovers >= LONG_RUN {
            settings.options.max_hold
        } else {
            settings.options.max_hold.max(SHORT_RUN_HOLD)
        };
        if chain && (state.handovers >= settings.options.max_handovers || held_for >= hold) {
            state.released_at = None;
            state.held_since = None;
            return Ending::TenureEnd;
        }
        if waiters {
            Ending::HandOver
        } else {
            state.released_at = Some(now);
            Ending::Release
        }
    }
}

/// Counts a task as waiting while it exists.
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
