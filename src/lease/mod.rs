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
//! throughout, up to the tenure bound below, then releases it so other
//! processes get their turn. Waiters in other processes poll every
//! [`LeaseOptions::with_poll_interval`] (100 ms by default, jittered).
//! [`LeaseManager::acquire`] waits at most its timeout, even when the
//! service stops answering: an acquire request still in flight then
//! finishes in the background and gives back any lease it took.
//!
//! # Turns between processes
//!
//! A process that takes a lease back to back (tasks handing it over, or one
//! task releasing and acquiring again at once) would otherwise keep it from
//! other processes for good: its next acquire comes before their next poll.
//! So a process holds a lease in **tenures**: its run of guards held back to
//! back, counting hand-overs and fresh acquires that follow its own release
//! by less than 1.5 poll intervals. A tenure ends with the first guard that
//! ends after `max_handovers` guards or `max_hold` of time
//! ([`LeaseOptions::with_handover_limit`], default 1000 and 2 s), or after
//! the shorter contended hold ([`LeaseOptions::with_contended_hold`],
//! default 250 ms) once this process has seen another process hold the
//! lease (one of its own acquires was refused). The process then releases
//! the lease and **stands back**: none of its tasks tries it again for 1.5
//! poll intervals, so a waiter elsewhere, which tries at most 1.1 poll
//! intervals and a reply apart, takes it. A stand-back after which the lease is still
//! free for this process tells it that nobody else waits any more: it goes
//! back to the longer bound.
//!
//! With `p` the poll interval, `H` the tenure bound in force (`max_hold`, or
//! the contended hold once the holder has seen another process), `U` the
//! longest a guard is held (a tenure ends only when a guard ends) and `r`
//! a round trip:
//!
//! * **the bound**: a waiter behind one other process gets the lease within
//!   `H + U + 1.1 p + r` of starting to wait (with the defaults and 10 ms
//!   units: 2.12 s when the holder had not seen it yet, 370 ms once it has).
//!   With `P` processes waiting, every turn goes to one of them within
//!   `H + U + 1.1 p + r` of the previous one, and from the second turn on
//!   every holder knows of the contention, so turns last at most
//!   `250 ms + U + 1.1 p + r`; but which waiting process gets a turn is
//!   decided by whose poll comes first after the release, not by who waited
//!   longest. A process waits `P − 1` turns on average; the chance that it
//!   is passed over `k` turns in a row is about `(1 − 1/(P − 1))^k`, so
//!   for more than two processes the bound is on the mean, not on every
//!   wait.
//! * **what it costs**: no request: the uncontended request count of a
//!   guard or a partition-lock unit is what it was. In time, a process alone
//!   on a lease pauses 1.5 `p` every `max_hold` of continuous holding
//!   (about 7 % with the defaults); under contention each turn leaves the
//!   lease idle until the next holder's poll (at most 1.1 `p`, half `p` on
//!   average).
//! * **the knobs**: [`LeaseOptions::with_handover_limit`] (`max_handovers`,
//!   `max_hold`), [`LeaseOptions::with_contended_hold`] and
//!   [`LeaseOptions::with_poll_interval`]; partition locks take them through
//!   [`StoreBuilder::lock_lease_options`](crate::StoreBuilder::lock_lease_options).
//!   The bound assumes every process polls at the same interval.
//!
//! The same turns apply to every wait by name: [`LeaseManager::acquire`],
//! [`LeaseManager::do_once`], partition locks, and leader campaigns
//! ([`LeaseManager::run_as_leader`]) — during a stand-back a campaign's
//! attempt reports the lease as held without a request. Candidates on
//! standby, though, back off to 1 s between attempts, longer than a
//! stand-back, so a leader that campaigns again at once after its term is
//! not held to the bound. [`LeaseManager::try_acquire`] and reservations
//! try once and do not stand back.
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
mod queue;
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
