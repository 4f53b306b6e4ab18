//! Blob leases: an auto-renewing lease guard, and the patterns built on it.
//!
//! A [`LeaseManager`] hands out [`LeaseGuard`]s for named leases, one blob
//! each in the manager's container (see [`LeaseName`]), created on first
//! use. A guard's lease id is chosen here, so a retried acquire is
//! idempotent; the lease is renewed in the background (default: 30 s,
//! renewed every 10 s); every write to the lease blob carries the lease id.
//! A guard ends with [`LeaseGuard::release`], or, dropped, releases in the
//! background, best effort. Built on guards: [`LeaseManager::do_once`],
//! [`LeaseManager::run_as_leader`], [`LeaseManager::try_reserve`] (with a
//! holder log), and [`LeaseManager::describe`] and
//! [`LeaseManager::break_lease`] for operators.
//!
//! # Renewal and loss
//!
//! Validity counts from the **send time** of the last successful acquire or
//! renew, minus a drift margin, on `tokio::time`'s clock: the service starts
//! a new period when it processes a request, never earlier, so its expiry
//! cannot come before that local deadline. Every renew races the deadline;
//! one left unanswered for a third of the validity left (at least 1 s) gets
//! another sent beside it (three at most; the first answer counts).
//! Failures are sorted:
//!
//! * **definitive loss**: the service says the lease is not ours
//!   (`LeaseIdMismatch*`, `LeaseNotPresent*`, `LeaseIsBroken*`,
//!   `LeaseIsBreaking*`, another holder, the blob gone): lost at once;
//! * **transient** ([`Error::Transient`](crate::Error::Transient)): retried
//!   (250 ms doubling to 2 s) while the deadline allows;
//! * **ambiguous** (anything else, such as a lost reply): verified with a
//!   properties read. Still leased: retried (only our id can renew it); not
//!   leased: lost.
//!
//! A loss cancels the guard's token and completes [`LeaseStatus::lost`]; the
//! guard then sends no more writes under the lease.
//!
//! # Reading the lease blob
//!
//! A guard reads its lease blob (document and metadata) when it first needs
//! it and keeps that view up to date with its own writes. The manager
//! remembers the 1024 lease blobs it used last, with their ETag; an acquire
//! leaves the ETag as it is and its reply carries it, so a new guard whose
//! blob is as remembered reads nothing. Any write by anybody else changes
//! the ETag; a write under the lease whose outcome is unknown makes the
//! manager forget the blob. A guard handed over locally reads nothing.
//!
//! # Process-local sharing
//!
//! Tasks of one process that want the same lease queue locally: the process
//! acquires the blob lease once and hands it from guard to guard
//! ([`LeaseGuard::is_handed_over`]), renewal running throughout, up to the
//! tenure bound below. Waiters in other processes poll every
//! [`LeaseOptions::with_poll_interval`] (100 ms, jittered).
//! [`LeaseManager::acquire`] waits at most its timeout, even when the
//! service stops answering: an acquire still in flight then finishes in the
//! background and gives back any lease it took.
//!
//! # Turns between processes
//!
//! A process taking a lease back to back would keep it from the others for
//! good (its next acquire comes before their next poll), so waiters queue
//! across processes and a process holds a lease in **tenures**.
//!
//! * **The wait queue.** A waiting call whose acquire is refused registers
//!   its proposed lease id in an unleased blob beside the lease blob
//!   (`<lease blob>.waiters`, one line per waiter, written conditionally on
//!   its ETag), renews it every 5 poll intervals, and then polls once per
//!   poll interval on a fixed schedule that it publishes there.
//! * **Tenures.** A tenure is a process's run of guards held back to back:
//!   hand-overs, and fresh acquires less than 1.5 poll intervals after its
//!   own release. It ends with the first guard that ends after
//!   `max_handovers` guards or `max_hold` of time
//!   ([`LeaseOptions::with_handover_limit`], default 1000 and 500 ms),
//!   except that a single-guard tenure no local task waits for ends with a
//!   plain release, and a tenure of fewer than 16 guards runs to at least
//!   2 s unless this process has seen another want the lease.
//! * **Hand-over across processes.** At a tenure's end the holder reads the
//!   queue (one request). Nobody there: a new tenure starts. A fresh
//!   registration of another process at the head: the holder changes the
//!   lease to that registration's id (Change Lease: nobody can take it in
//!   between), timed for the waiter's next poll; until then its own tasks go
//!   on using it. The waiter's poll (an acquire with that id) succeeds and
//!   changes the id at once to one nobody else knows. The schedule is
//!   wall-clock time: clocks that differ cost at most a poll interval per
//!   turn, never safety.
//! * **Waiters that went away.** A registration not renewed for
//!   `stale_after` = 15 poll intervals + 1 s is skipped and dropped. A lease
//!   passed to a waiter that died is taken over (changed from the dead id to
//!   its own) by the next waiter that renews its registration.
//!
//! With `P` processes waiting, `p` the poll interval, `T` = `max_hold`, `U`
//! the longest a guard is held and `r` a round trip, every waiting call gets
//! the lease within `(P − 1) × (T + U + 2 p + 4 r)`, plus `2 s − T` once
//! when the holder's tenure is short and it has not yet seen anyone else
//! want it (defaults, 10 ms guards: 0.71 s for 2 processes, 2.13 s for 4,
//! 4.97 s for 8); a waiter that died at the head adds at most
//! `stale_after + 6 p` once. The order is first come, first served, except
//! that a poll finding the lease free takes it out of turn. An uncontended
//! guard sends what it would without the queue, plus one small queue read
//! per `max_hold` of holding; a waiting acquire adds its registration, a
//! Change Lease when passed the lease and a background removal; each turn
//! costs the holder a read and a Change Lease (`BENCHMARKS.md`, section 6).
//! The bound assumes every process uses the same options (partition locks:
//! [`StoreBuilder::lock_lease_options`](crate::StoreBuilder::lock_lease_options)).
//!
//! Every wait by name queues: [`LeaseManager::acquire`], partition locks,
//! [`LeaseManager::do_once`] and leader campaigns, whose attempts keep their
//! registration from one to the next (a standby candidate tries at most
//! once a second and publishes no schedule). [`LeaseManager::try_acquire`]
//! and reservations do not queue.
//!
//! # Failing storage
//!
//! Every call that waits for a lease (acquire, run-once, leader campaigns,
//! reservations, partition locks) retries failing storage, and gives up with
//! [`Error::Unavailable`](crate::Error::Unavailable) naming the endpoint
//! once requests have failed without a single answer for
//! [`LeaseOptions::with_unavailable_after`] (30 s by default). A lease held
//! by somebody else is no failure: that wait is bounded by the caller's
//! timeout.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use leasehold::backend::memory::MemoryBackend;
//! use leasehold::lease::{LeaseManager, LeaseOptions, OnceOutcome};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> leasehold::Result<()> {
//! let backend = Arc::new(MemoryBackend::new());
//! let leases = LeaseManager::new(backend.clone(), LeaseOptions::default())?;
//!
//! // An exclusive section: held (and renewed) until released.
//! let guard = leases.acquire("nightly-report", Duration::from_secs(30)).await?;
//! assert!(!guard.is_handed_over());
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
pub(crate) mod fence;
mod guard;
mod leader;
mod local;
mod manager;
mod name;
mod operator;
mod options;
mod outage;
pub(crate) mod prune;
mod queue;
mod renew;
mod reservation;
mod seen;
#[cfg(test)]
mod test_support;

pub use do_once::{OnceContext, OnceOutcome};
pub(crate) use document::{LeaseDocument, META_ACQUIRED, META_OWNER};
pub use document::{OnceState, ReservationRecord};
pub(crate) use fence::Fence;
pub use guard::{LeaseGuard, LeaseStatus};
pub use leader::{LeaderContext, LeaderOptions};
pub use manager::LeaseManager;
pub use name::LeaseName;
pub use operator::LeaseDescription;
pub use options::LeaseOptions;
pub(crate) use options::{DEFAULT_DURATION_SECS, Settings};
pub use reservation::Reservation;
