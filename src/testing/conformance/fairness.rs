//! Turns between processes: a process that takes a lease back to back
//! cannot keep another process waiting past the stated bound (see
//! "Turns between processes" in [`crate::lease`]), and the turns cost no
//! request.
//!
//! Each "process" is a store or lease manager of its own over the context's
//! backend. On [`Clock::Paused`] the checks run for many seconds of paused
//! time; on [`Clock::Real`] (a service) they are shorter.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::{Instant, sleep};

use crate::lease::{LeaseManager, LeaseOptions};
use crate::testing::{CountingBackend, Op};
use crate::{ErrorKind, Store};

use super::{Clock, Ctx};

/// The default poll interval, tenure bound and unit length of the checks.
const POLL: Duration = LeaseOptions::DEFAULT_POLL_INTERVAL;
const MAX_HOLD: Duration = Duration::from_secs(2);
const UNIT: Duration = Duration::from_millis(10);

/// The documented bound on a wait behind one other process: its tenure
/// (`max_hold` plus the unit under way), then the waiter's next poll (1.1
/// poll intervals), plus `slack` for the requests on a real service.
fn bound(slack: Duration) -> Duration {
    MAX_HOLD + UNIT + POLL + POLL / 10 + slack
}

/// What the round trips of a real service may add to a wait.
fn slack(ctx: &Ctx) -> Duration {
    match ctx.clock() {
        Clock::Paused => Duration::ZERO,
        Clock::Real => Duration::from_millis(500),
    }
}

/// A store ("process") with default lock options and the context's lease
/// duration.
fn process(ctx: &Ctx) -> Store {
    Store::builder_shared(ctx.backend().clone())
        .table_prefix(ctx.prefix())
        .expect("valid prefix")
        .lease_options(LeaseOptions::new().with_duration(ctx.lease_duration()))
        .build()
        .expect("valid store")
}

/// Process A locks a partition, works 10 ms and abandons, back to back;
/// process B locks it with a 4 s timeout several times, working 10 ms and
/// pausing a little between its units. B never times out, and never waits
/// longer than the bound, while A keeps taking the lock between B's turns.
pub async fn a_process_relocking_back_to_back_cannot_keep_another_waiting(ctx: &Ctx) {
    let (rounds, pause) = match ctx.clock() {
        Clock::Paused => (5, Duration::from_millis(700)),
        Clock::Real => (3, Duration::from_millis(300)),
    };
    let a = process(ctx);
    let b = process(ctx);
    let stop = Arc::new(AtomicBool::new(false));
    let a_units = Arc::new(AtomicUsize::new(0));
    let hog = tokio::spawn({
        let (stop, a_units) = (stop.clone(), a_units.clone());
        async move {
            while !stop.load(Ordering::SeqCst) {
                let unit = a.lock("hot").await.expect("A locks");
                sleep(UNIT).await;
                unit.abandon().await.expect("A abandons");
                a_units.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    // Let A settle into its loop.
    sleep(Duration::from_millis(300)).await;
    let mut waits = Vec::new();
    for _ in 0..rounds {
        let started = Instant::now();
        let unit = match b.lock_with_timeout("hot", Duration::from_secs(4)).await {
            Ok(unit) => unit,
            Err(e) if e.kind() == ErrorKind::Timeout => panic!("B timed out after {waits:?}"),
            Err(e) => panic!("B: {e}"),
        };
        waits.push(started.elapsed());
        sleep(UNIT).await;
        unit.abandon().await.expect("B abandons");
        sleep(pause).await;
    }
    stop.store(true, Ordering::SeqCst);
    hog.await.expect("A's loop");
    let bound = bound(slack(ctx));
    assert!(
        waits.iter().all(|w| *w <= bound),
        "B waited {waits:?}, bound {bound:?}"
    );
    // A was not stopped either: it worked between B's turns.
    assert!(
        a_units.load(Ordering::SeqCst) > 10 * rounds,
        "A took the lock {} times",
        a_units.load(Ordering::SeqCst)
    );
}

/// The same by name, through [`LeaseManager::acquire`] (which leader
/// campaigns, reservations and run-once share): a manager that re-acquires
/// back to back lets another manager's waiting acquire in within the
/// bound.
pub async fn a_manager_reacquiring_by_name_cannot_keep_another_waiting(ctx: &Ctx) {
    let rounds = match ctx.clock() {
        Clock::Paused => 5,
        Clock::Real => 2,
    };
    let options = LeaseOptions::new().with_duration(ctx.lease_duration());
    let backend = ctx.backend().clone();
    let a = LeaseManager::new(backend.clone(), options.clone().with_owner("a")).unwrap();
    let b = LeaseManager::new(backend, options.with_owner("b")).unwrap();
    let name = format!("{}-by-name", ctx.prefix());
    let stop = Arc::new(AtomicBool::new(false));
    let hog = tokio::spawn({
        let (stop, name) = (stop.clone(), name.clone());
        async move {
            while !stop.load(Ordering::SeqCst) {
                let guard = a.acquire(&name, Duration::from_secs(60)).await.unwrap();
                sleep(UNIT).await;
                guard.release().await.unwrap();
            }
        }
    });
    sleep(Duration::from_millis(300)).await;
    let mut waits = Vec::new();
    for _ in 0..rounds {
        let started = Instant::now();
        let guard = b
            .acquire(&name, Duration::from_secs(4))
            .await
            .unwrap_or_else(|e| panic!("B: {e} after {waits:?}"));
        waits.push(started.elapsed());
        sleep(UNIT).await;
        guard.release().await.unwrap();
        sleep(Duration::from_millis(500)).await;
    }
    stop.store(true, Ordering::SeqCst);
    hog.await.unwrap();
    let bound = bound(slack(ctx));
    assert!(
        waits.iter().all(|w| *w <= bound),
        "B waited {waits:?}, bound {bound:?}"
    );
}

/// A process alone on a lease, taking it back to back for longer than its
/// tenure bound, sends exactly what it sent before turns existed: per
/// guard one acquire and one release (owner metadata off), nothing more;
/// its stand-backs cost time, not requests.
pub async fn turns_cost_no_request_when_nobody_else_waits(ctx: &Ctx) {
    let (guards, work) = match ctx.clock() {
        Clock::Paused => (40, Duration::from_millis(150)),
        Clock::Real => (16, Duration::from_millis(300)),
    };
    let counting = CountingBackend::new(ctx.backend().clone());
    let counter = counting.counter();
    let options = LeaseOptions::new()
        .with_duration(Duration::from_secs(60))
        .with_owner_metadata(false);
    let leases = LeaseManager::new(Arc::new(counting), options).unwrap();
    let name = format!("{}-alone", ctx.prefix());
    leases
        .acquire(&name, Duration::from_secs(5))
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    counter.reset();
    let started = Instant::now();
    for _ in 0..guards {
        let guard = leases.acquire(&name, Duration::from_secs(5)).await.unwrap();
        sleep(work).await;
        guard.release().await.unwrap();
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed > MAX_HOLD * 2,
        "ran {elapsed:?}: long enough for stand-backs"
    );
    let expected = [(Op::AcquireLease, guards), (Op::ReleaseLease, guards)]
        .into_iter()
        .collect();
    assert_eq!(counter.snapshot(), expected);
}

/// A waiter that goes away (its process dies while it waits) does not slow
/// the holder past the bound: after it is gone the holder stands back at
/// most once more than it would alone (1.5 poll intervals), then goes
/// back to its longer tenure.
pub async fn a_waiter_that_goes_away_costs_the_holder_at_most_one_stand_back(ctx: &Ctx) {
    let run = match ctx.clock() {
        Clock::Paused => Duration::from_secs(10),
        Clock::Real => Duration::from_secs(5),
    };
    let options = LeaseOptions::new().with_duration(ctx.lease_duration());
    let backend = ctx.backend().clone();
    let a = LeaseManager::new(backend.clone(), options.clone().with_owner("a")).unwrap();
    let b = LeaseManager::new(backend, options.with_owner("b")).unwrap();
    let name = format!("{}-dies", ctx.prefix());
    // B keeps wanting the lease until its process dies.
    let first = a.acquire(&name, Duration::from_secs(5)).await.unwrap();
    let waiter = tokio::spawn({
        let name = name.clone();
        async move {
            loop {
                let guard = b.acquire(&name, Duration::from_secs(600)).await.unwrap();
                sleep(UNIT).await;
                guard.release().await.unwrap();
            }
        }
    });
    sleep(Duration::from_millis(200)).await;
    first.release().await.unwrap();
    // A takes the lease back to back; B dies after half a second.
    let started = Instant::now();
    let mut died_at = None;
    let mut last_end: Option<Instant> = None;
    let mut pauses = Vec::new();
    while started.elapsed() < run {
        let guard = a.acquire(&name, Duration::from_secs(5)).await.unwrap();
        let now = Instant::now();
        if let Some(end) = last_end {
            pauses.push((end, now - end));
        }
        if died_at.is_none() && started.elapsed() > Duration::from_millis(500) {
            waiter.abort();
            died_at = Some(Instant::now());
        }
        sleep(UNIT).await;
        guard.release().await.unwrap();
        last_end = Some(Instant::now());
    }
    let died_at = died_at.expect("B died");
    let _ = waiter.await;
    let slack = slack(ctx);
    // While B lived, A paused at most for a stand-back and B's turn.
    let longest = POLL + POLL / 2 + POLL + POLL / 10 + UNIT + slack;
    assert!(
        pauses.iter().all(|(_, p)| *p <= longest),
        "pauses {pauses:?}"
    );
    // After B (and a turn it may have been in) is gone: one stand-back
    // that finds nobody, then one per tenure bound.
    let after = died_at + Duration::from_millis(300);
    let long: Vec<Duration> = pauses
        .iter()
        .filter(|(at, p)| *at >= after && *p > POLL / 2)
        .map(|(_, p)| *p)
        .collect();
    let window = (started + run).saturating_duration_since(after);
    let allowed = (window.as_millis() / MAX_HOLD.as_millis()) as usize + 1;
    assert!(
        long.len() <= allowed,
        "{} pauses in {window:?} after B died: {long:?}",
        long.len()
    );
    assert!(
        long.iter().all(|p| *p <= POLL + POLL / 2 + slack),
        "{long:?}"
    );
}
