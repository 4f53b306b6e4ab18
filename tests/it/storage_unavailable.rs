//! Every call that waits for a lease gives up when storage keeps failing:
//! after `LeaseOptions::with_unavailable_after` of continuous failure, with
//! `Error::Unavailable` naming the endpoint, and not earlier. A lease held
//! by somebody else is no failure and keeps a waiter waiting.
//!
//! Memory backend behind the fault-injecting wrapper, on paused time. (The
//! Azure side, a store on a closed port, is in `tests/it/azure_backend.rs`.)

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use leasehold::backend::memory::MemoryBackend;
use leasehold::lease::{LeaderOptions, LeaseManager, LeaseOptions, OnceOutcome};
use leasehold::testing::{FaultInjector, FaultyBackend};
use leasehold::{Error, ErrorKind, Store};
use tokio::time::{Instant, sleep};

const BOUND: Duration = Duration::from_secs(10);

fn options() -> LeaseOptions {
    LeaseOptions::new().with_unavailable_after(BOUND)
}

/// A manager whose every request fails transiently from now on.
fn dead_manager() -> (LeaseManager, FaultInjector) {
    let faulty = FaultyBackend::new(MemoryBackend::new());
    let faults = faulty.injector();
    faults.die_now();
    let leases = LeaseManager::new(Arc::new(faulty), options()).unwrap();
    (leases, faults)
}

/// `e` is `Unavailable` naming the memory endpoint, returned after exactly
/// `bound` of failing storage since `started`.
#[track_caller]
fn assert_unavailable_after(e: &Error, started: Instant, bound: Duration) {
    let waited = started.elapsed();
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
    assert!(waited >= bound, "gave up early, after {waited:?}: {e}");
    assert!(
        waited <= bound + Duration::from_millis(1),
        "gave up late, after {waited:?}: {e}"
    );
    assert!(
        e.to_string()
            .starts_with("storage at memory unavailable for "),
        "{e}"
    );
    let Error::Unavailable {
        endpoint,
        after,
        source,
    } = e
    else {
        unreachable!()
    };
    assert_eq!(endpoint, "memory");
    assert_eq!(*after, bound, "{e}");
    assert!(source.is_transient(), "{e}");
    assert!(!e.is_transient(), "leasehold already retried: {e}");
}

#[tokio::test(start_paused = true)]
async fn do_once_gives_up_when_storage_keeps_failing() {
    let (leases, faults) = dead_manager();
    let ran = AtomicBool::new(false);
    let started = Instant::now();
    let e = leases
        .do_once("init", |_| async {
            ran.store(true, Ordering::SeqCst);
            Ok::<_, Error>(())
        })
        .await
        .unwrap_err();
    assert_unavailable_after(&e, started, BOUND);
    assert!(!ran.load(Ordering::SeqCst));
    assert!(faults.injected() > 5, "it kept trying");
}

#[tokio::test(start_paused = true)]
async fn tasks_queued_behind_each_other_all_give_up_at_the_bound() {
    let (leases, _faults) = dead_manager();
    let started = Instant::now();
    let calls = (0..5).map(|_| {
        let leases = leases.clone();
        tokio::spawn(async move {
            let e = leases
                .do_once("init", |_| async { Ok::<_, Error>(()) })
                .await
                .unwrap_err();
            (e, Instant::now())
        })
    });
    for call in calls.collect::<Vec<_>>() {
        let (e, ended) = call.await.unwrap();
        assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
        let waited = ended - started;
        assert!(
            waited >= BOUND && waited <= BOUND + Duration::from_millis(1),
            "a queued task gave up after {waited:?}: {e}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn acquire_gives_up_at_the_bound_even_with_a_longer_timeout() {
    let (leases, _faults) = dead_manager();
    let started = Instant::now();
    let e = leases
        .acquire("job", Duration::from_secs(600))
        .await
        .unwrap_err();
    assert_unavailable_after(&e, started, BOUND);
}

#[tokio::test(start_paused = true)]
async fn acquire_with_a_shorter_timeout_reports_failing_storage_not_a_holder() {
    let (leases, _faults) = dead_manager();
    let started = Instant::now();
    let timeout = Duration::from_secs(3);
    let e = leases.acquire("job", timeout).await.unwrap_err();
    assert_unavailable_after(&e, started, timeout);
}

#[tokio::test(start_paused = true)]
async fn try_acquire_and_try_reserve_give_up_at_the_bound() {
    let (leases, _faults) = dead_manager();
    let started = Instant::now();
    let e = leases.try_acquire("job").await.unwrap_err();
    assert_unavailable_after(&e, started, BOUND);

    let (leases, _faults) = dead_manager();
    let started = Instant::now();
    let e = leases
        .try_reserve("job", Duration::from_secs(60))
        .await
        .unwrap_err();
    assert_unavailable_after(&e, started, BOUND);
    assert!(!leases.has_reservation("job"));
}

#[tokio::test(start_paused = true)]
async fn a_call_right_after_a_give_up_joins_the_run_of_failures() {
    let (leases, faults) = dead_manager();
    leases.try_acquire("job").await.unwrap_err();
    // Storage has failed for the whole bound already: one more attempt.
    let before = faults.injected();
    let started = Instant::now();
    let e = leases.try_acquire("other").await.unwrap_err();
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(faults.injected(), before + 1);
    let Error::Unavailable { after, .. } = e else {
        panic!("{e}")
    };
    assert_eq!(after, BOUND);
    // After a quiet spell, a call counts afresh.
    sleep(Duration::from_secs(5)).await;
    let started = Instant::now();
    let e = leases.try_acquire("job").await.unwrap_err();
    assert_unavailable_after(&e, started, BOUND);
}

#[tokio::test(start_paused = true)]
async fn a_leader_campaign_ends_when_storage_keeps_failing() {
    let (leases, _faults) = dead_manager();
    let led = AtomicBool::new(false);
    let started = Instant::now();
    let e = leases
        .run_as_leader("leader", LeaderOptions::new(), |_| async {
            led.store(true, Ordering::SeqCst);
        })
        .await
        .unwrap_err();
    assert_unavailable_after(&e, started, BOUND);
    assert!(!led.load(Ordering::SeqCst));
}

#[tokio::test(start_paused = true)]
async fn store_lock_gives_up_when_storage_keeps_failing() {
    let faulty = FaultyBackend::new(MemoryBackend::new());
    let faults = faulty.injector();
    let store = Store::builder(faulty)
        .lease_options(options())
        .build()
        .unwrap();
    faults.die_now();
    let started = Instant::now();
    let e = store.lock("alice").await.unwrap_err();
    assert_unavailable_after(&e, started, BOUND);
}

#[tokio::test(start_paused = true)]
async fn a_wait_rides_out_failures_shorter_than_the_bound() {
    let (leases, faults) = dead_manager();
    tokio::spawn(async move {
        sleep(BOUND - Duration::from_secs(1)).await;
        faults.revive();
    });
    let started = Instant::now();
    let outcome = leases
        .do_once("init", |_| async { Ok::<_, Error>(7) })
        .await
        .unwrap();
    assert!(matches!(outcome, OnceOutcome::Ran { output: 7, .. }));
    assert!(started.elapsed() >= BOUND - Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn a_lease_held_elsewhere_keeps_waiters_waiting_past_the_bound() {
    let backend = Arc::new(MemoryBackend::new());
    let holder = LeaseManager::new(backend.clone(), options()).unwrap();
    let waiter = LeaseManager::new(backend, options()).unwrap();
    let guard = holder.acquire("init", BOUND).await.unwrap();
    let held_for = 3 * BOUND;
    tokio::spawn(async move {
        sleep(held_for).await;
        guard.release().await.unwrap();
    });
    let started = Instant::now();
    let outcome = waiter
        .do_once("init", |_| async { Ok::<_, Error>(()) })
        .await
        .unwrap();
    assert!(matches!(outcome, OnceOutcome::Ran { .. }));
    assert!(started.elapsed() >= held_for);

    // Storage answering "held" is no failure either: the caller's timeout
    // decides.
    let _guard = holder.acquire("job", BOUND).await.unwrap();
    let e = waiter.acquire("job", 2 * BOUND).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
}

#[test]
fn a_zero_bound_is_refused_naming_the_option() {
    let e = LeaseManager::new(
        Arc::new(MemoryBackend::new()),
        LeaseOptions::new().with_unavailable_after(Duration::ZERO),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);
    assert!(e.to_string().contains("unavailable-after bound"), "{e}");
}
