//! The blob lease state machine, on the monotonic `tokio::time` clock.
//!
//! Follows the outcome table of Azure's Lease Blob operation. With `A` the
//! lease's id and `B`, `C` other ids:
//!
//! | request | Available | Leased (A) | Breaking (A) | Broken (A) | Expired (A) |
//! |---|---|---|---|---|---|
//! | acquire (A) | Leased (A) | Leased (A), new duration | 409 breaking | Leased (A) | Leased (A) |
//! | acquire (B) | Leased (B) | 409 already present | 409 already present | Leased (B) | Leased (B) |
//! | break, period 0 | 409 not present | Broken (A) | Broken (A) | Broken (A) | Broken (A) |
//! | break, period > 0 | 409 not present | Breaking (A) | Breaking (A), never longer | Broken (A) | Broken (A) |
//! | change (A) to (B) | 409 not present | Leased (B) | 409 breaking | 409 not present | 409 not present |
//! | change (B) to (A) | 409 not present | Leased (A) | 409 mismatch | 409 not present | 409 not present |
//! | change (B) to (C) | 409 not present | 409 mismatch | 409 mismatch | 409 not present | 409 not present |
//! | renew (A) | 409 not present | Leased (A), clock reset | 409 broken | 409 broken | Leased (A) |
//! | renew (B) | 409 not present | 409 mismatch | 409 mismatch | 409 mismatch | 409 mismatch |
//! | release (A) | 409 not present | Available | Available | Available | Available |
//! | release (B) | 409 not present | 409 mismatch | 409 mismatch | 409 mismatch | 409 mismatch |
//! | time passes | Available | Expired (A) at expiry | Broken (A) at break time | Broken (A) | Expired (A) |
//!
//! A write to the blob (which needs no lease id in the unlocked states)
//! forgets an expired or broken lease: the blob becomes Available, so its
//! former holder can no longer renew or release it.

use std::time::Duration;

use tokio::time::Instant;

use crate::backend::{LeaseDuration, LeaseId, LeaseInfo, LeaseState};

/// A refused lease or blob operation: the status and error code the service
/// answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Refusal {
    pub(super) status: u16,
    pub(super) code: &'static str,
}

const fn refuse(status: u16, code: &'static str) -> Refusal {
    Refusal { status, code }
}

const ALREADY_PRESENT: Refusal = refuse(409, "LeaseAlreadyPresent");
const MISMATCH: Refusal = refuse(409, "LeaseIdMismatchWithLeaseOperation");
const NOT_PRESENT: Refusal = refuse(409, "LeaseNotPresentWithLeaseOperation");
const BREAKING_NO_ACQUIRE: Refusal = refuse(409, "LeaseIsBreakingAndCannotBeAcquired");
const BREAKING_NO_CHANGE: Refusal = refuse(409, "LeaseIsBreakingAndCannotBeChanged");
const BROKEN_NO_RENEW: Refusal = refuse(409, "LeaseIsBrokenAndCannotBeRenewed");
const WRITE_ID_MISSING: Refusal = refuse(412, "LeaseIdMissing");
const WRITE_ID_MISMATCH: Refusal = refuse(412, "LeaseIdMismatchWithBlobOperation");
const WRITE_NOT_PRESENT: Refusal = refuse(412, "LeaseNotPresentWithBlobOperation");

/// A blob's lease as stored. Time-driven transitions (expiry, end of a break)
/// are applied lazily by [`Lease::settle`] whenever the lease is looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Lease {
    /// No lease, or released, or forgotten after a write.
    Available,
    /// Held by `id` until `expires` (`None`: infinite).
    Leased {
        id: LeaseId,
        duration: LeaseDuration,
        expires: Option<Instant>,
    },
    /// Being broken: `id` still holds it until `until`.
    Breaking { id: LeaseId, until: Instant },
    /// Broken; `id` is kept so its holder can release it.
    Broken { id: LeaseId },
    /// A timed lease ran out; its holder may renew it while nobody acquires
    /// it and the blob is not written.
    Expired {
        id: LeaseId,
        duration: LeaseDuration,
    },
}

impl Lease {
    /// Applies the transitions that time alone causes.
    pub(super) fn settle(&mut self, now: Instant) {
        match *self {
            Lease::Leased {
                id,
                duration,
                expires: Some(at),
            } if now >= at => *self = Lease::Expired { id, duration },
            Lease::Breaking { id, until } if now >= until => *self = Lease::Broken { id },
            _ => {}
        }
    }

    /// The lease as Get Blob Properties reports it at `now`.
    pub(super) fn info(&self, now: Instant) -> LeaseInfo {
        let mut settled = self.clone();
        settled.settle(now);
        let (state, kind) = match settled {
            Lease::Available => (LeaseState::Available, None),
            Lease::Leased { duration, .. } => (LeaseState::Leased, Some(duration.kind())),
            Lease::Breaking { .. } => (LeaseState::Breaking, None),
            Lease::Broken { .. } => (LeaseState::Broken, None),
            Lease::Expired { .. } => (LeaseState::Expired, None),
        };
        LeaseInfo { state, kind }
    }

    fn leased(id: LeaseId, duration: LeaseDuration, now: Instant) -> Lease {
        Lease::Leased {
            id,
            duration,
            expires: duration.as_duration().map(|d| now + d),
        }
    }

    /// Acquire with a proposed id. `duration` must already be validated.
    pub(super) fn acquire(
        &mut self,
        now: Instant,
        duration: LeaseDuration,
        proposed: LeaseId,
    ) -> Result<LeaseId, Refusal> {
        self.settle(now);
        match *self {
            Lease::Available | Lease::Broken { .. } | Lease::Expired { .. } => {}
            Lease::Leased { id, .. } if id == proposed => {}
            Lease::Leased { .. } => return Err(ALREADY_PRESENT),
            Lease::Breaking { id, .. } if id == proposed => return Err(BREAKING_NO_ACQUIRE),
            Lease::Breaking { .. } => return Err(ALREADY_PRESENT),
        }
        *self = Lease::leased(proposed, duration, now);
        Ok(proposed)
    }

    /// Renew: restarts the duration of a held or expired lease.
    pub(super) fn renew(&mut self, now: Instant, by: LeaseId) -> Result<(), Refusal> {
        self.settle(now);
        match *self {
            Lease::Available => Err(NOT_PRESENT),
            Lease::Leased { id, duration, .. } | Lease::Expired { id, duration } if id == by => {
                *self = Lease::leased(id, duration, now);
                Ok(())
            }
            Lease::Breaking { id, .. } | Lease::Broken { id } if id == by => Err(BROKEN_NO_RENEW),
            _ => Err(MISMATCH),
        }
    }

    /// Change the id of a held lease. Changing to the id it already has is
    /// an idempotent retry and succeeds.
    pub(super) fn change(
        &mut self,
        now: Instant,
        by: LeaseId,
        proposed: LeaseId,
    ) -> Result<LeaseId, Refusal> {
        self.settle(now);
        match *self {
            Lease::Leased {
                id,
                duration,
                expires,
            } if id == by || id == proposed => {
                *self = Lease::Leased {
                    id: proposed,
                    duration,
                    expires,
                };
                Ok(proposed)
            }
            Lease::Leased { .. } => Err(MISMATCH),
            Lease::Breaking { id, .. } if id == by => Err(BREAKING_NO_CHANGE),
            Lease::Breaking { .. } => Err(MISMATCH),
            Lease::Available | Lease::Broken { .. } | Lease::Expired { .. } => Err(NOT_PRESENT),
        }
    }

    /// Release: the blob is Available at once.
    pub(super) fn release(&mut self, now: Instant, by: LeaseId) -> Result<(), Refusal> {
        self.settle(now);
        match *self {
            Lease::Available => Err(NOT_PRESENT),
            Lease::Leased { id, .. }
            | Lease::Breaking { id, .. }
            | Lease::Broken { id }
            | Lease::Expired { id, .. }
                if id == by =>
            {
                *self = Lease::Available;
                Ok(())
            }
            _ => Err(MISMATCH),
        }
    }

    /// Break, with a checked `period`, as
    /// [`LeaseAction::Break`](crate::backend::LeaseAction::Break) says (a
    /// period never extends the time the lease has left): the time until the
    /// lease is broken. A breaking lease keeps its break time without one.
    pub(super) fn break_lease(
        &mut self,
        now: Instant,
        period: Option<Duration>,
    ) -> Result<Duration, Refusal> {
        self.settle(now);
        let (id, left) = match *self {
            Lease::Available => return Err(NOT_PRESENT),
            Lease::Broken { .. } => return Ok(Duration::ZERO),
            Lease::Expired { id, .. } => {
                *self = Lease::Broken { id };
                return Ok(Duration::ZERO);
            }
            Lease::Leased { id, expires, .. } => (id, expires.map(|at| at - now)),
            Lease::Breaking { id, until } => (id, Some(until - now)),
        };
        let wait = match period {
            Some(p) => left.map_or(p, |left| p.min(left)),
            None => left.unwrap_or_default(),
        };
        *self = if wait.is_zero() {
            Lease::Broken { id }
        } else {
            Lease::Breaking {
                id,
                until: now + wait,
            }
        };
        Ok(wait)
    }

    /// Checks a write (put, set metadata, delete) made with `lease_id`.
    pub(super) fn check_write(
        &mut self,
        now: Instant,
        lease_id: Option<LeaseId>,
    ) -> Result<(), Refusal> {
        self.settle(now);
        match (&*self, lease_id) {
            (Lease::Leased { id, .. } | Lease::Breaking { id, .. }, Some(given))
                if *id == given =>
            {
                Ok(())
            }
            (Lease::Leased { .. } | Lease::Breaking { .. }, Some(_)) => Err(WRITE_ID_MISMATCH),
            (Lease::Leased { .. } | Lease::Breaking { .. }, None) => Err(WRITE_ID_MISSING),
            (_, Some(_)) => Err(WRITE_NOT_PRESENT),
            (_, None) => Ok(()),
        }
    }

    /// Records that the blob was written: an expired or broken lease is
    /// forgotten. A held or breaking lease is kept as it is.
    pub(super) fn after_write(&mut self, now: Instant) {
        self.settle(now);
        if matches!(self, Lease::Expired { .. } | Lease::Broken { .. }) {
            *self = Lease::Available;
        }
    }
}
