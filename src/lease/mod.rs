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
//! # Reading the lease blob
//!
//! A guard reads its lease blob (document and metadata) when it first
//! needs it ([`LeaseGuard::metadata`], the epoch, the run-once state, a
//! partition lock's record), and keeps that view up to date with its own
//! writes. The manager remembers, for the 1024 lease blobs it used most
//! recently, the blob as it last read, wrote or created it, with the ETag
//! the blob had then. The reply to an acquire carries the blob's current
//! ETag, which taking a lease leaves as it is, so when it is the
//! remembered one (nobody wrote the blob since) the new guard starts from
//! that view and reads nothing. Any write by anybody else changes the
//! ETag, and a write under the lease whose outcome is unknown makes the
//! manager forget the blob: the next guard reads it. A guard handed over
//! inside the process reads nothing either.
//!
//! # Process-local sharing
//!
//! Tasks of one process that want the same lease queue locally instead of
//! polling storage. The process acquires the blob lease once and hands it
//! from guard to guard ([`LeaseGuard::is_handed_over`]) with renewal running
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
//! So waiters across processes queue, and a process holds a lease in
//! **tenures**.
//!
//! * **The wait queue.** A waiting call whose acquire is refused registers
//!   the lease id it proposes in a small unleased blob beside the lease blob
//!   (`<lease blob>.waiters`, one line per waiter, written conditionally on
//!   its ETag) and renews that registration every 5 poll intervals while it
//!   waits. From then on it polls the lease on a fixed schedule, once per
//!   poll interval (10 times a second with the default 100 ms, never more),
//!   and publishes that schedule with its registration.
//! * **Tenures.** A tenure is a process's run of guards held back to back:
//!   hand-overs, and fresh acquires that follow its own release by less
//!   than 1.5 poll intervals. It ends with the first guard that ends after
//!   `max_handovers` guards or `max_hold` of time
//!   ([`LeaseOptions::with_handover_limit`], default 1000 and 500 ms). Two
//!   exceptions keep a few uncontended units at exactly their old cost: a
//!   tenure of a single guard that no local task waits for ends with a
//!   plain release (the lease is free for everyone anyway), and a tenure
//!   of fewer than 16 guards runs to at least 2 s unless this
//!   process has seen another want the lease (an acquire of its own
//!   refused, or a waiter in the queue).
//! * **Hand-over across processes.** At a tenure's end the holder reads the
//!   queue (one request). Nobody there: the tenure simply starts again
//!   (handing over locally, or releasing as usual). A fresh registration of
//!   another process at the head: the holder passes it the lease by
//!   changing the lease to that registration's id (Change Lease: nobody
//!   else can take the lease in between), timed for the waiter's next poll.
//!   Until then the holder's own tasks go on using the lease (or it is kept
//!   for a task that may come back), and the change is sent at the last
//!   guard end before that poll. The waiter's poll (an acquire with the
//!   current id) succeeds, and it changes the id at once to one nobody else
//!   knows. So a turn leaves the lease idle for about a round trip between
//!   the two processes, not half a poll interval. The schedule is wall-clock
//!   time: processes whose clocks differ lose some of that (at most a poll
//!   interval per turn), never safety.
//! * **Waiters that went away.** A registration not renewed for
//!   `stale_after` = 15 poll intervals + 1 s (2.5 s with the defaults; the
//!   second allows for clocks that differ) is skipped and dropped. A lease
//!   passed to a waiter that died just before is taken over (changed from
//!   the dead id to its own) by the next waiter that renews its registration
//!   and finds the dead one stale at the head.
//!
//! With `P` the number of processes waiting for the lease, `p` the poll
//! interval, `T` = `max_hold`, `U` the longest a guard is held (a tenure
//! ends only when a guard ends) and `r` a round trip:
//!
//! * **the bound**: every waiting call gets the lease within
//!   `(P − 1) × (T + U + 2 p + 4 r)` of starting to wait: one turn for the
//!   holder and for each process queued ahead, a turn being a tenure, the
//!   guard under way when it ends and the wait for the next holder's poll
//!   (at most one poll interval, or two when a guard ends too late for the
//!   poll aimed at); plus `2 s − T` once when the holder's tenure is
//!   fewer than 16 guards long and it has not yet seen anyone else want it.
//!   With
//!   the defaults and 10 ms guards: 0.71 s for 2 processes, 2.13 s for 4,
//!   4.97 s for 8 (2.21, 3.63 and 6.47 s with that once), plus round
//!   trips. A waiter that
//!   died while at the head of the queue adds at most
//!   `stale_after + 5 p + p` (3.1 s) once. The order is first come, first
//!   served, except that a waiter whose poll finds the lease free (between
//!   the units of a holder with one task) takes it out of turn.
//! * **what it costs**: an uncontended guard or partition-lock unit sends
//!   exactly what it did; once per `max_hold` of holding in a run of 16
//!   guards or more (2 s at least for shorter runs) the holder reads the
//!   queue (one small GET that finds nothing). A waiting
//!   acquire adds its registration (a read and a write, renewed every 5
//!   `p`), a Change Lease when it is passed the lease and a background
//!   removal of its registration; each turn costs the holder one read and
//!   one Change Lease. Measured on the emulator with 8 processes × 4 tasks
//!   on one partition: every process within 2× of its fair share and the
//!   throughput above 0.8× the single-process floor (section 6 of
//!   `BENCHMARKS.md`).
//! * **the knobs**: [`LeaseOptions::with_handover_limit`] (`max_handovers`,
//!   `max_hold`: shorter turns serve waiters sooner, longer ones lose less
//!   to the turns) and [`LeaseOptions::with_poll_interval`]; partition
//!   locks take them through
//!   [`StoreBuilder::lock_lease_options`](crate::StoreBuilder::lock_lease_options).
//!   The bound assumes every process uses the same options.
//!
//! The queue serves every wait by name: [`LeaseManager::acquire`],
//! partition locks, [`LeaseManager::do_once`] and leader campaigns
//! ([`LeaseManager::run_as_leader`]), whose attempts keep their registration
//! from one attempt to the next. A candidate on standby tries at most once
//! a second and publishes no schedule, so it is passed the lease at once
//! and may leave it idle up to that second (in place of `2 p` in the
//! bound). [`LeaseManager::try_acquire`] and reservations try once and do
//! not queue.
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
mod registry;
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
