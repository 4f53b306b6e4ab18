//! Blob leases: an auto-renewing lease guard, and the patterns built on it.
//!
//! A [`LeaseManager`] hands out [`LeaseGuard`]s for named leases. Each name is
//! one blob in the manager's container (see [`LeaseName`] for the encoding);
//! the blob is created on first use. A guard:
//!
//! * was acquired with a lease id chosen here ([`LeaseId::new_random`](crate::backend::LeaseId::new_random)), so a
//!   retried acquire is idempotent;
//! * is renewed in the background (default: 30 s lease, renewed every 10 s);
//! * counts its validity from the **send time** of the last successful
//!   acquire or renew, minus a drift margin, on `tokio::time`'s clock, and
//!   reports the lease lost when that deadline passes even if a renew request
//!   hangs (see [`LeaseGuard::lost`], [`LeaseGuard::remaining`],
//!   [`LeaseGuard::ensure_valid`]);
//! * carries the lease id on every write it makes to the lease blob, so the
//!   service refuses those writes once the lease is gone;
//! * ends with [`LeaseGuard::release`]; dropping it releases in the
//!   background, best effort.
//!
//! Built on guards: run-once initialisation ([`LeaseManager::do_once`]),
//! leader election ([`LeaseManager::run_as_leader`]), job reservations with a
//! holder log ([`LeaseManager::try_reserve`]), and operator tools
//! ([`LeaseManager::describe`], [`LeaseManager::break_lease`]).
//!
//! # Renewal and loss
//!
//! The renewal task races every request against the guard's local deadline
//! (send time of the last success + duration − drift margin): the service
//! starts a new lease period when it processes a request, never earlier, so
//! the service's expiry cannot come before that deadline. Failures are sorted:
//!
//! * **definitive loss**: the service says the lease is not ours
//!   (`LeaseIdMismatch*`, `LeaseNotPresent*`, `LeaseIsBroken*`,
//!   `LeaseIsBreaking*`, another holder, the blob gone): lost at once;
//! * **transient** ([`Error::Transient`](crate::Error::Transient)): retried quickly (250 ms doubling
//!   to 2 s) while the deadline allows;
//! * **ambiguous** (anything else, such as a reply that never came):
//!   verified with a properties read. Still leased: the renew is retried
//!   (only our id can renew it, so a success proves we still hold it); not
//!   leased: lost at once.
//!
//! A loss cancels the guard's token and completes [`LeaseGuard::lost`]; the
//! guard then refuses to send writes under the lease.
//!
//! # Process-local sharing
//!
//! Tasks of one process that want the same lease queue locally instead of
//! polling storage. The process acquires the blob lease once and hands it
//! from guard to guard ([`Acquisition::HandedOver`]) with renewal running
//! throughout, up to a fairness bound ([`LeaseOptions::with_handover_limit`]),
//! then releases it so other processes get their turn. Waiters in other
//! processes poll every [`LeaseOptions::with_poll_interval`] (100 ms by
//! default, jittered). [`LeaseManager::acquire`] waits at most its timeout,
//! even when the service stops answering: an acquire request still in
//! flight then finishes in the background and gives back any lease it took.
//!
//! # Failing storage
//!
//! Waiting for a lease that somebody else holds is bounded by the caller's
//! timeout where the call has one. Storage that keeps failing (transient
//! errors, no reply, an unreachable endpoint) is different: every call that
//! waits for a lease (acquire, run-once, leader campaigns, reservations,
//! partition locks) retries it, and gives up with [`Error::Unavailable`](crate::Error::Unavailable)
//! naming the endpoint once requests have failed without a single answer
//! for [`LeaseOptions::with_unavailable_after`] (30 s by default).
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use leasehold::backend::memory::MemoryBackend;
//! use leasehold::lease::{Acquisition, LeaseManager, LeaseOptions, OnceOutcome};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> leasehold::Result<()> {
//! let backend = Arc::new(MemoryBackend::new());
//! let leases = LeaseManager::new(backend.clone(), LeaseOptions::default())?;
//!
//! // An exclusive section: held (and renewed) until released.
//! let guard = leases.acquire("nightly-report", Duration::from_secs(30)).await?;
//! assert_eq!(guard.acquisition(), Acquisition::Fresh);
//! let epoch = guard.advance_epoch().await?; // a fencing number for this holder
//! guard.ensure_valid(Duration::from_secs(5))?; // before a side effect
//! // ... work; `guard.lost()` completes if the lease is lost ...
//!
//! // Another process (another manager) cannot take it meanwhile.
//! let other = LeaseManager::new(backend, LeaseOptions::default())?;
//! assert!(other.try_acquire("nightly-report").await?.is_none());
//! let seen = other.describe("nightly-report").await?;
//! assert_eq!((seen.owner.as_deref(), seen.epoch), (Some(leases.owner()), epoch));
//! guard.release().await?;
//!
//! // Run-once initialisation, whoever gets there first.
//! let outcome = other
//!     .do_once("schema-v2", |_ctx| async { Ok::<_, leasehold::Error>("migrated") })
//!     .await?;
//! assert!(matches!(outcome, OnceOutcome::Ran { output: "migrated", .. }));
//! let again = leases.do_once("schema-v2", |_| async { Ok::<_, leasehold::Error>("") }).await?;
//! assert_eq!(again, OnceOutcome::AlreadyDone);
//! # Ok(())
//! # }
//! ```

mod acquire;
mod core;
mod do_once;
mod document;
mod env;
mod guard;
mod leader;
mod local;
mod manager;
mod name;
mod operator;
mod options;
mod outage;
mod registry;
mod renew;
mod reservation;
#[cfg(test)]
mod test_support;

pub use do_once::{OnceContext, OnceOutcome};
pub(crate) use document::{LOCK_SECTION, META_ACQUIRED, META_OWNER};
pub use document::{OnceState, ReservationRecord};
pub use guard::{Acquisition, LeaseGuard, LeaseStatus};
pub use leader::{LeaderContext, LeaderOptions};
pub use manager::LeaseManager;
pub use name::LeaseName;
pub use operator::{BreakOutcome, LeaseDescription};
pub use options::LeaseOptions;
pub(crate) use options::Settings;
pub use reservation::Reservation;
