//! Turns between processes: a process that takes a lease back to back
//! cannot keep another process waiting past the stated bound (see
//! "Turns between processes" in [`leasehold::lease`]), and the turns cost no
//! request.
//!
//! Each "process" is a store or lease manager of its own over the context's
//! backend. On [`Clock::Paused`] the checks run for many seconds of paused
//! time; on [`Clock::Real`] (a service) they are shorter.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::time::{Instant, sleep};

use leasehold::backend::Op;
use leasehold::lease::{LeaseManager, LeaseOptions};
use leasehold::testing::{CountingBackend, FaultyBackend};
use leasehold::{ErrorKind, Store};

use super::{Clock, Ctx};

crate::checks::checks! {

/// The default poll interval, tenure bounds and unit length of the checks.
const POLL: Duration = LeaseOptions::DEFAULT_POLL_INTERVAL;
const MAX_HOLD: Duration = Duration::from_millis(500);
const UNIT: Duration = Duration::from_millis(10);

/// The documented bound on a wait with `p` processes wanting the lease:
/// one turn for the holder and for each of the `p - 2` processes queued
/// ahead, a turn being a tenure (`max_hold`), the unit under way when it
/// ends and up to two poll intervals until the next waiter's poll; plus,
/// once, up to 2 s for the holder's first tenure when it is a short run and
/// it has not yet seen anyone else want it.
fn bound(p: u32) -> Duration {
    (MAX_HOLD + UNIT + POLL * 2) * (p - 1) + (Duration::from_secs(2) - MAX_HOLD)
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

/// `p` processes each lock one partition, work 10 ms and abandon, back to
/// back, for a while. No lock call waits longer than the bound, and every
/// process gets a share of the units (more than a quarter of 1/p).
async fn relocking_processes(ctx: &Ctx, p: u32) {
    let run = match ctx.clock() {
        Clock::Paused => Duration::from_secs(20),
        Clock::Real => Duration::from_secs(4),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..p {
        let store = process(ctx);
        let stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            let (mut units, mut longest) = (0usize, Duration::ZERO);
            while !stop.load(Ordering::SeqCst) {
                let started = Instant::now();
                let unit = match store
                    .lock_with_timeout("hot", Duration::from_secs(30))
                    .await
                {
                    Ok(unit) => unit,
                    Err(e) if e.kind() == ErrorKind::Timeout => panic!("timed out"),
                    Err(e) => panic!("{e}"),
                };
                longest = longest.max(started.elapsed());
                sleep(UNIT).await;
                unit.abandon().await.expect("abandons");
                units += 1;
            }
            (units, longest)
        }));
    }
    sleep(run).await;
    stop.store(true, Ordering::SeqCst);
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.expect("process loop"));
    }
    let bound = bound(p);
    println!("{p} processes: (units, longest wait) {results:?}; bound {bound:?}");
    // On a real service the times are the benchmark's to measure (it
    // checks the same bound); here every process gets its turns.
    if ctx.clock() == Clock::Paused {
        assert!(
            results.iter().all(|(_, longest)| *longest <= bound),
            "longest waits {results:?}, bound {bound:?}"
        );
    }
    let total: usize = results.iter().map(|(u, _)| u).sum();
    let floor = total / (4 * p as usize);
    assert!(
        results.iter().all(|(u, _)| *u > floor),
        "units per process {results:?}"
    );
}

/// Two processes relocking back to back: neither keeps the other waiting
/// past the bound.
timed async fn two_processes_relocking_back_to_back_wait_within_the_bound(ctx) {
    relocking_processes(ctx, 2).await;
}

/// Four processes (on a real service: skipped, the benchmark measures it).
timed async fn four_processes_relocking_back_to_back_wait_within_the_bound(ctx) {
    if ctx.clock() == Clock::Paused {
        relocking_processes(ctx, 4).await;
    }
}

/// Eight processes (on a real service: skipped, the benchmark measures it).
timed async fn eight_processes_relocking_back_to_back_wait_within_the_bound(ctx) {
    if ctx.clock() == Clock::Paused {
        relocking_processes(ctx, 8).await;
    }
}

/// Turns keep the lease busy: two processes of four tasks each, doing 10 ms
/// units on one partition back to back, get through nearly as many units
/// as one process would (each turn is timed for the next holder's poll, so
/// the lease is idle for a round trip at most, not half a poll interval).
/// On a real service: skipped (the benchmark measures it).
timed async fn turns_keep_the_lease_busy(ctx) {
    if ctx.clock() != Clock::Paused {
        return;
    }
    let run = Duration::from_secs(20);
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let store = process(ctx);
        for _ in 0..4 {
            let (store, stop) = (store.clone(), stop.clone());
            tasks.push(tokio::spawn(async move {
                let mut units = 0u32;
                while !stop.load(Ordering::SeqCst) {
                    let unit = store
                        .lock_with_timeout("busy", Duration::from_secs(30))
                        .await
                        .expect("locks");
                    sleep(UNIT).await;
                    unit.abandon().await.expect("abandons");
                    units += 1;
                }
                units
            }));
        }
    }
    sleep(run).await;
    stop.store(true, Ordering::SeqCst);
    let mut units = Vec::new();
    for t in tasks {
        units.push(t.await.expect("task"));
    }
    let total: u32 = units.iter().sum();
    let most = (run.as_millis() / UNIT.as_millis()) as u32;
    println!("units per task {units:?}: {total} of at most {most}");
    assert!(
        total * 100 >= most * 95,
        "units per task {units:?}: {total} of {most}"
    );
    let per_process = [
        units[..4].iter().sum::<u32>(),
        units[4..].iter().sum::<u32>(),
    ];
    assert!(
        per_process.iter().all(|u| u * 3 >= total),
        "units per process {per_process:?}"
    );
}

/// The same by name, through [`LeaseManager::acquire`] (which leader
/// campaigns, reservations and run-once share): a manager that re-acquires
/// back to back lets another manager's waiting acquire in within the
/// bound.
timed async fn a_manager_reacquiring_by_name_cannot_keep_another_waiting(ctx) {
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
    // On real time B's limit grows with the round trips measured here (a
    // busy machine or emulator); on paused time they take no time.
    let mut round_trip = Duration::ZERO;
    for _ in 0..3 {
        let sent = Instant::now();
        b.describe(&name).await.unwrap();
        round_trip = round_trip.max(sent.elapsed());
    }
    let limit = Duration::from_secs(4).max(bound(2) + round_trip * 40);
    let mut waits = Vec::new();
    for _ in 0..rounds {
        let started = Instant::now();
        let guard = b
            .acquire(&name, limit)
            .await
            .unwrap_or_else(|e| panic!("B: {e} after {waits:?}"));
        waits.push(started.elapsed());
        sleep(UNIT).await;
        guard.release().await.unwrap();
        sleep(Duration::from_millis(500)).await;
    }
    stop.store(true, Ordering::SeqCst);
    hog.await.unwrap();
    // On a real service B's acquires succeeding within their limit is the
    // check; on paused time, the bound.
    let bound = bound(2);
    if ctx.clock() == Clock::Paused {
        assert!(
            waits.iter().all(|w| *w <= bound),
            "B waited {waits:?}, bound {bound:?}"
        );
    }
}

/// A process alone on a lease, taking it back to back for longer than its
/// tenure bound, sends per guard one acquire and one release (owner
/// metadata off), as before turns existed, and once per 2 s (its runs are
/// shorter than 16 guards and it has seen nobody else) one read of the wait
/// queue, which finds nobody.
timed async fn turns_cost_one_queue_read_per_tenure_when_nobody_else_waits(ctx) {
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
    // Start a tenure afresh.
    sleep(Duration::from_secs(1)).await;
    counter.reset();
    let started = Instant::now();
    for _ in 0..guards {
        let guard = leases.acquire(&name, Duration::from_secs(5)).await.unwrap();
        sleep(work).await;
        guard.release().await.unwrap();
    }
    let elapsed = started.elapsed();
    let reads = counter.get(Op::GetBlob);
    match ctx.clock() {
        // 40 guards of 150 ms: tenures end at 2.1 s and 4.2 s.
        Clock::Paused => assert_eq!(reads, 2),
        // On real time the cost is the check: at most one read per 2 s.
        // (A slow round trip between a release and the next acquire, over
        // 1.5 poll intervals, starts a tenure afresh, so fewer tenures may
        // reach their end on a busy machine.)
        Clock::Real => {
            let most = (elapsed.as_millis() / 2000) as u64;
            assert!(reads <= most, "{reads} reads in {elapsed:?}");
        }
    }
    let expected = [
        (Op::AcquireLease, guards),
        (Op::ReleaseLease, guards),
        (Op::GetBlob, reads),
    ]
    .into_iter()
    .collect();
    assert_eq!(counter.snapshot(), expected);
}

/// A waiter polls the lease at most once per poll interval (10 times a
/// second with the default 100 ms) while another process holds it, and
/// renews its registration in the wait queue every 5 poll intervals (a read
/// and a write each).
timed async fn a_waiter_polls_at_most_ten_times_a_second(ctx) {
    let wait = match ctx.clock() {
        Clock::Paused => Duration::from_secs(3),
        Clock::Real => Duration::from_secs(1),
    };
    let options = LeaseOptions::new()
        .with_duration(ctx.lease_duration())
        .with_owner_metadata(false);
    let holder = LeaseManager::new(ctx.backend().clone(), options.clone()).unwrap();
    let counting = CountingBackend::new(ctx.backend().clone());
    let counter = counting.counter();
    let waiter = LeaseManager::new(Arc::new(counting), options).unwrap();
    let name = format!("{}-polls", ctx.prefix());
    let held = holder.acquire(&name, Duration::from_secs(5)).await.unwrap();
    counter.reset();
    let started = Instant::now();
    let err = waiter.acquire(&name, wait).await.unwrap_err();
    let waited = started.elapsed();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    let polls = counter.get(Op::AcquireLease);
    let per_second = LeaseOptions::DEFAULT_POLL_INTERVAL.as_millis() as u64;
    let most = waited.as_millis() as u64 / per_second + 1;
    assert!(polls <= most, "{polls} polls in {waited:?}");
    if ctx.clock() == Clock::Paused {
        assert!(polls + 1 >= most, "only {polls} polls in {waited:?}");
    }
    let renewals = waited.as_millis() as u64 / (per_second * 5) + 1;
    assert!(
        counter.get(Op::PutBlob) <= renewals + 1,
        "{:?}",
        counter.snapshot()
    );
    held.release().await.unwrap();
}

/// A waiter whose process dies while it is registered (its registration
/// stays, fresh) is handed the lease at the holder's next tenure end; the
/// holder's next acquire, refused, registers, and once the dead
/// registration is stale takes the lease over from it. The holder loses at
/// most one pause of `stale_after + refresh + poll` (3.1 s with the
/// defaults), once, and otherwise works on.
timed async fn a_waiter_that_dies_while_registered_costs_the_holder_one_bounded_pause(ctx) {
    let run = match ctx.clock() {
        Clock::Paused => Duration::from_secs(12),
        Clock::Real => Duration::from_secs(8),
    };
    let options = LeaseOptions::new().with_duration(ctx.lease_duration());
    let backend = ctx.backend().clone();
    let a = LeaseManager::new(backend.clone(), options.clone().with_owner("a")).unwrap();
    let b = LeaseManager::new(backend, options.with_owner("b")).unwrap();
    let name = format!("{}-dies", ctx.prefix());
    let first = a.acquire(&name, Duration::from_secs(5)).await.unwrap();
    // B waits (and registers), then its process dies.
    let waiter = tokio::spawn({
        let name = name.clone();
        async move {
            let _ = b.acquire(&name, Duration::from_secs(600)).await;
        }
    });
    sleep(POLL * 3).await;
    waiter.abort();
    let _ = waiter.await;
    first.release().await.unwrap();
    // A takes the lease back to back.
    let started = Instant::now();
    let mut last_end: Option<Instant> = None;
    let mut pauses = Vec::new();
    let mut units = 0u32;
    while started.elapsed() < run {
        let guard = a.acquire(&name, Duration::from_secs(30)).await.unwrap();
        if let Some(end) = last_end {
            pauses.push(Instant::now() - end);
        }
        sleep(UNIT).await;
        guard.release().await.unwrap();
        units += 1;
        last_end = Some(Instant::now());
    }
    // stale_after (3 refreshes + 1 s) + a refresh + a poll.
    let refresh = POLL * 5;
    let worst = refresh * 3 + Duration::from_secs(1) + refresh + POLL + POLL / 10;
    // On a real service a pause over a poll interval may be a slow reply;
    // one over a second is the dead waiter's.
    let long_is = match ctx.clock() {
        Clock::Paused => POLL,
        Clock::Real => Duration::from_secs(1),
    };
    let long: Vec<Duration> = pauses.iter().copied().filter(|p| *p > long_is).collect();
    assert!(long.len() <= 1, "pauses over {long_is:?}: {long:?}");
    if ctx.clock() == Clock::Paused {
        assert!(
            long.iter().all(|p| *p <= worst),
            "{long:?}, bound {worst:?}"
        );
        // Everything but the one pause was work.
        let worked = run.saturating_sub(worst);
        let least = (worked.as_millis() / UNIT.as_millis()) as u32 * 9 / 10;
        assert!(units >= least, "{units} units, expected {least}");
    }
}

/// A waiter that takes the lease under its registered id but is slow to
/// change the id (its change takes longer than the registration's
/// staleness bound) has the lease taken over by the next waiter, which
/// finds its registration stale. Its change is then refused; it waits on
/// and gets the lease once the other waiter is done, well within its
/// timeout, instead of ending the wait at once with a timeout.
timed async fn a_waiter_whose_lease_is_taken_over_while_it_changes_the_id_waits_on(ctx) {
    let options = LeaseOptions::new().with_duration(ctx.lease_duration());
    let backend = ctx.backend().clone();
    let slow = FaultyBackend::new(backend.clone());
    let faults = slow.injector();
    let holder = LeaseManager::new(backend.clone(), options.clone()).unwrap();
    let waiter = LeaseManager::new(Arc::new(slow), options.clone()).unwrap();
    let next = LeaseManager::new(backend, options).unwrap();
    let name = format!("{}-taken-over", ctx.prefix());
    let held = holder.acquire(&name, Duration::from_secs(5)).await.unwrap();
    let timeout = Duration::from_secs(60);
    let slow_waiter = tokio::spawn({
        let name = name.clone();
        async move {
            let got = waiter.acquire(&name, timeout).await;
            let done = Instant::now();
            (got.map(|g| (g.is_handed_over(), g)), done)
        }
    });
    sleep(POLL * 3).await;
    // Registers behind the slow waiter, and renews its registration every
    // refresh: the first renewal after the slow waiter's registration went
    // stale takes the lease over.
    let next_waiter = tokio::spawn({
        let name = name.clone();
        async move {
            let guard = next.acquire(&name, timeout).await.unwrap();
            sleep(UNIT).await;
            guard.release().await.unwrap();
            Instant::now()
        }
    });
    sleep(POLL * 3).await;
    // stale_after (3 refreshes + 1 s, 2.5 s) and room for a renewal.
    let change_takes = POLL * 5 * 3 + Duration::from_secs(1) + Duration::from_millis(2500);
    faults.set_latency(Some(Op::ChangeLease), change_takes);
    let released = Instant::now();
    held.release().await.unwrap();
    let (got, slow_done) = slow_waiter.await.unwrap();
    let next_done = next_waiter.await.unwrap();
    let (_, guard) = got.unwrap_or_else(|e| {
        panic!(
            "the slow waiter gave up after {:?} of its {timeout:?}: {e}",
            released.elapsed()
        )
    });
    assert!(
        next_done <= slow_done,
        "the next waiter took the lease over first"
    );
    assert!(
        slow_done.duration_since(released) < timeout / 2,
        "{:?}",
        slow_done.duration_since(released)
    );
    faults.set_latency(Some(Op::ChangeLease), Duration::ZERO);
    guard.release().await.unwrap();
}

/// Leader campaigns queue too: two candidates whose terms are short (a
/// leader steps down after 10 ms and campaigns again at once) both lead,
/// and neither waits between its terms longer than the bound with the
/// standby pace (1 s) in place of a poll interval: `max_hold + unit + 1 s +
/// the pause after a term`. (The pause a leader takes after its term gives
/// the other candidate its turn already; this pins that queued campaigns
/// keep it so.) On a real service: skipped (timing).
timed async fn leader_candidates_that_step_down_at_once_take_turns(ctx) {
    if ctx.clock() != Clock::Paused {
        return;
    }
    let run = Duration::from_secs(20);
    let options = LeaseOptions::new().with_duration(ctx.lease_duration());
    let backend = ctx.backend().clone();
    let name = format!("{}-leader", ctx.prefix());
    let stop = tokio_util::sync::CancellationToken::new();
    let mut tasks = Vec::new();
    for c in 0..2 {
        let leases = LeaseManager::new(backend.clone(), options.clone()).unwrap();
        let (name, stop) = (name.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let terms = Arc::new(std::sync::Mutex::new(Vec::<Instant>::new()));
            let leader_options = leasehold::lease::LeaderOptions::new().with_stop(stop);
            leases
                .run_as_leader(&name, leader_options, |_| {
                    let terms = terms.clone();
                    async move {
                        terms.lock().unwrap().push(Instant::now());
                        sleep(UNIT).await;
                    }
                })
                .await
                .unwrap_or_else(|e| panic!("candidate {c}: {e}"));
            terms.lock().unwrap().clone()
        }));
    }
    let started = Instant::now();
    sleep(run).await;
    stop.cancel();
    let bound = MAX_HOLD + UNIT + Duration::from_secs(1) + POLL + POLL / 10;
    for t in tasks {
        let mut terms = t.await.unwrap();
        terms.insert(0, started);
        let longest = terms.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(run);
        println!(
            "{} terms, longest gap {longest:?}, bound {bound:?}",
            terms.len() - 1
        );
        assert!(terms.len() > 10, "{} terms", terms.len() - 1);
        assert!(longest <= bound, "longest gap {longest:?}, bound {bound:?}");
    }
}
}
