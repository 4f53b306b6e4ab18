//! Partition-locked units of work on the memory backend: request budgets,
//! crash recovery at every step, stale holders, and the shared lock suite.

mod lock_suite;

use std::sync::Arc;
use std::time::Duration;

use leasehold::backend::Backend;
use leasehold::backend::memory::MemoryBackend;
use leasehold::testing::{CountingBackend, FaultInjector, FaultyBackend, Op, RequestCounter};
use leasehold::{ErrorKind, Store};
use lock_suite::{Account, Entry, open_accounts, process, totals, transfer};

fn memory() -> Arc<dyn Backend> {
    Arc::new(MemoryBackend::new())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_transfers_conserve_money() {
    lock_suite::concurrent_transfers_conserve_money(memory(), "m", 50).await;
}

#[tokio::test]
async fn units_see_their_writes_and_stay_in_their_partition() {
    lock_suite::units_see_their_writes_and_stay_in_their_partition(memory(), "m").await;
}

#[tokio::test]
async fn multi_table_commit_applies_all() {
    lock_suite::multi_table_commit_applies_all(memory(), "m").await;
}

#[tokio::test]
async fn stale_reads_fail_the_whole_commit() {
    lock_suite::stale_reads_fail_the_whole_commit(memory(), "m").await;
}

/// A store counting its requests, warmed up so one-time setup (containers,
/// tables, the lock blob) is out of the counts.
async fn counted() -> (Store, RequestCounter) {
    let counting = CountingBackend::new(MemoryBackend::new());
    let counter = counting.counter();
    let store = process(Arc::new(counting), "b");
    open_accounts(&store, "alice", 2).await;
    assert!(
        transfer(&store, "alice", "acct0", "acct1", 1, "warmup")
            .await
            .unwrap()
    );
    let mut unit = store.lock("alice").await.unwrap();
    let _ = unit.get::<lock_suite::Audit>("warm").await.unwrap();
    unit.abandon().await.unwrap();
    counter.reset();
    (store, counter)
}

fn counts(counter: &RequestCounter) -> Vec<(Op, u64)> {
    counter.snapshot().into_iter().collect()
}

#[tokio::test]
async fn one_table_unit_costs_acquire_read_reads_batch_release() {
    let (store, counter) = counted().await;
    let mut unit = store.lock("alice").await.unwrap();
    let mut a = unit.get::<Account>("acct0").await.unwrap().unwrap();
    let mut b = unit.get::<Account>("acct1").await.unwrap().unwrap();
    a.balance -= 5;
    b.balance += 5;
    unit.replace(&a).unwrap();
    unit.replace(&b).unwrap();
    let report = unit.commit().await.unwrap();
    assert!(!report.journalled);
    // acquire + lock-blob read + R (2) + 1 batch + release = 6
    assert_eq!(
        counts(&counter),
        vec![
            (Op::Get, 2),
            (Op::Batch, 1),
            (Op::GetBlob, 1),
            (Op::AcquireLease, 1),
            (Op::ReleaseLease, 1),
        ]
    );
    assert_eq!(counter.total(), 6);
}

#[tokio::test]
async fn two_table_unit_costs_acquire_read_reads_journal_batches_clear_release() {
    let (store, counter) = counted().await;
    assert!(
        transfer(&store, "alice", "acct0", "acct1", 5, "t1")
            .await
            .unwrap()
    );
    // acquire + lock-blob read + R (2) + journal + T (2) + clear + release = 9
    assert_eq!(
        counts(&counter),
        vec![
            (Op::Get, 2),
            (Op::Batch, 2),
            (Op::PutBlob, 2),
            (Op::GetBlob, 1),
            (Op::AcquireLease, 1),
            (Op::ReleaseLease, 1),
        ]
    );
    assert_eq!(counter.total(), 9);
}

#[tokio::test]
async fn handed_over_unit_skips_acquire_read_and_release() {
    let (store, counter) = counted().await;
    // The first unit holds the lock while the second queues behind it.
    let first = store.lock("alice").await.unwrap();
    let second = {
        let store = store.clone();
        tokio::spawn(async move {
            let mut unit = store.lock("alice").await.unwrap();
            assert!(unit.is_handed_over());
            let mut a = unit.get::<Account>("acct0").await.unwrap().unwrap();
            a.balance += 1;
            unit.replace(&a).unwrap();
            unit.insert(&Entry {
                customer: "alice".into(),
                id: "h".into(),
                from: "x".into(),
                to: "acct0".into(),
                amount: 1,
            })
            .unwrap();
            unit
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    counter.reset();
    first.abandon().await.unwrap();
    let unit = second.await.unwrap();
    let before_commit = counter.total();
    unit.commit().await.unwrap();
    // Hand-over and the read: R (1); commit: journal + T (2) + clear; no
    // acquire, no lock-blob read; the release is real (nobody waits).
    assert_eq!(before_commit, 1, "{:?}", counts(&counter));
    assert_eq!(counter.get(Op::AcquireLease), 0);
    assert_eq!(counter.get(Op::GetBlob), 0);
    assert_eq!(counter.get(Op::Get), 1);
    assert_eq!(counter.get(Op::PutBlob), 2);
    assert_eq!(counter.get(Op::Batch), 2);
    assert_eq!(counter.get(Op::ReleaseLease), 1, "the last unit releases");
}

#[tokio::test]
async fn one_hundred_queued_units_share_one_acquire_and_one_release() {
    let (store, counter) = counted().await;
    let mut tasks = Vec::new();
    let gate = store.lock("alice").await.unwrap();
    for i in 0..100 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut unit = store.lock("alice").await.unwrap();
            let mut a = unit.get::<Account>("acct0").await.unwrap().unwrap();
            a.balance += 1;
            unit.replace(&a).unwrap();
            unit.commit().await.unwrap();
            i
        }));
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    gate.abandon().await.unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(counter.get(Op::AcquireLease), 1, "{:?}", counts(&counter));
    assert_eq!(counter.get(Op::ReleaseLease), 1);
    assert_eq!(counter.get(Op::Batch), 100);
    assert_eq!(counter.get(Op::Get), 100);
    let a = store
        .table::<Account>()
        .get("alice", "acct0")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(a.balance, 99 + 100);
}

/// The state of customer "crash" as (balance0, balance1, ledger entries).
async fn state(store: &Store) -> (i64, i64, usize) {
    let t = store.table::<Account>();
    let a = t.get("crash", "acct0").await.unwrap().unwrap().balance;
    let b = t.get("crash", "acct1").await.unwrap().unwrap().balance;
    let (_, entries) = totals(store, "crash").await;
    (a, b, entries)
}

const BEFORE: (i64, i64, usize) = (100, 100, 0);
const AFTER: (i64, i64, usize) = (70, 130, 1);

/// Runs one transfer in a "process" whose backend misbehaves as `plan` says,
/// then lets the lease run out and has a healthy process take the lock.
/// Returns (what the faulty commit said, what the next lock rolled forward,
/// the final state).
async fn crash_at(
    plan: impl FnOnce(&FaultInjector),
) -> (Result<bool, ErrorKind>, bool, (i64, i64, usize)) {
    let memory = MemoryBackend::new();
    let healthy = process(Arc::new(memory.clone()), "c");
    open_accounts(&healthy, "crash", 2).await;
    let faulty = FaultyBackend::new(memory.clone());
    let injector = faulty.injector();
    let dying = process(Arc::new(faulty), "c");
    // Warm up the dying process (lease blob, tables) before planning faults.
    let unit = dying.lock("crash").await.unwrap();
    unit.abandon().await.unwrap();
    plan(&injector);
    let outcome = transfer(&dying, "crash", "acct0", "acct1", 30, "t1")
        .await
        .map_err(|e| e.kind());
    // The dead process stays dead; its lease runs out.
    injector.die_now();
    tokio::time::sleep(Duration::from_secs(61)).await;
    let unit = healthy
        .lock("crash")
        .await
        .expect("the next holder gets the lock");
    let rolled = unit.rolled_forward().is_some();
    unit.abandon().await.unwrap();
    drop(dying);
    (outcome, rolled, state(&healthy).await)
}

#[tokio::test(start_paused = true)]
async fn crash_before_the_journal_leaves_the_partition_before() {
    let (outcome, rolled, state) = crash_at(|f| {
        f.die_at_nth(Some(Op::PutBlob), 1);
    })
    .await;
    assert!(outcome.is_err());
    assert!(!rolled);
    assert_eq!(state, BEFORE);
}

#[tokio::test(start_paused = true)]
async fn crash_after_the_journal_is_rolled_forward() {
    let (outcome, rolled, state) = crash_at(|f| {
        f.die_at_nth(Some(Op::Batch), 1);
    })
    .await;
    assert!(outcome.is_err());
    assert!(rolled, "the journal was found");
    assert_eq!(state, AFTER);
}

#[tokio::test(start_paused = true)]
async fn crash_after_the_first_batch_is_rolled_forward() {
    let (outcome, rolled, state) = crash_at(|f| {
        f.die_at_nth(Some(Op::Batch), 2);
    })
    .await;
    assert!(outcome.is_err());
    assert!(rolled);
    assert_eq!(state, AFTER);
}

#[tokio::test(start_paused = true)]
async fn crash_before_the_journal_clear_is_rolled_forward() {
    let (outcome, rolled, state) = crash_at(|f| {
        f.die_at_nth(Some(Op::PutBlob), 2);
    })
    .await;
    // Every write was applied before the process died; the commit itself
    // reports success (the clear is best effort).
    assert_eq!(outcome, Ok(true));
    assert!(rolled, "the next holder finds the journal, fully applied");
    assert_eq!(state, AFTER);
}

#[tokio::test(start_paused = true)]
async fn lost_replies_at_each_step_end_fully_before_or_after() {
    // (step, request, which one, whether the transfer must still go through)
    let steps: Vec<(&str, Op, u64, bool)> = vec![
        ("journal write", Op::PutBlob, 1, true),
        ("first batch", Op::Batch, 1, true),
        ("second batch", Op::Batch, 2, true),
        ("journal clear", Op::PutBlob, 2, true),
        ("acquire", Op::AcquireLease, 1, true),
        // A lost read fails the unit before anything is written.
        ("lock-blob read", Op::GetBlob, 1, false),
        ("first read", Op::Get, 1, false),
    ];
    for (name, op, nth, goes_through) in steps {
        let (outcome, _, state) = crash_at(|f| {
            f.lose_reply_nth(Some(op), nth);
        })
        .await;
        assert!(
            state == BEFORE || state == AFTER,
            "{name}: partial state {state:?}"
        );
        if outcome == Ok(true) {
            assert_eq!(state, AFTER, "{name}: reported committed");
        }
        if goes_through {
            // Lost write replies are retried or verified.
            assert_eq!(state, AFTER, "{name}: outcome {outcome:?}");
        } else {
            assert_eq!((outcome.is_err(), state), (true, BEFORE), "{name}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn commit_without_enough_lease_left_sends_nothing() {
    let counting = CountingBackend::new(MemoryBackend::new());
    let counter = counting.counter();
    let inner = counting.inner().clone();
    let store = process(Arc::new(counting), "l");
    open_accounts(&store, "x", 2).await;
    let mut unit = store.lock("x").await.unwrap();
    let mut a = unit.get::<Account>("acct0").await.unwrap().unwrap();
    a.balance = 0;
    unit.replace(&a).unwrap();
    // Someone breaks the lock; the renewer notices at its next renewal.
    let operator = process(Arc::new(inner), "l");
    let locks = leasehold::lease::LeaseManager::new(
        operator.backend().clone(),
        leasehold::lease::LeaseOptions::default()
            .with_container(leasehold::key::ContainerName::new("leasehold-locks").unwrap()),
    )
    .unwrap();
    locks
        .break_lease("l/x", Some(Duration::ZERO))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(11)).await;
    let batches = counter.get(Op::Batch);
    let e = unit.commit().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LeaseLost, "{e}");
    assert_eq!(counter.get(Op::Batch), batches, "nothing sent");
    assert_eq!(
        store
            .table::<Account>()
            .get("x", "acct0")
            .await
            .unwrap()
            .unwrap()
            .balance,
        100
    );
}

#[tokio::test(start_paused = true)]
async fn a_paused_holder_cannot_overwrite_the_next_holder() {
    let memory = MemoryBackend::new();
    let faulty = FaultyBackend::new(memory.clone());
    let pause = faulty.injector();
    let paused = process(Arc::new(faulty), "s");
    let next = process(Arc::new(memory), "s");
    open_accounts(&next, "p", 2).await;
    let mut unit = paused.lock("p").await.unwrap();
    let mut a = unit.get::<Account>("acct0").await.unwrap().unwrap();
    // The holder stalls: its renewals hang, its lease runs out.
    pause.set_latency(Some(Op::RenewLease), Duration::from_secs(3600));
    tokio::time::sleep(Duration::from_secs(40)).await;
    assert!(
        transfer(&next, "p", "acct0", "acct1", 10, "n1")
            .await
            .unwrap()
    );
    a.balance = 0;
    unit.replace(&a).unwrap();
    unit.insert(&Entry {
        customer: "p".into(),
        id: "stale".into(),
        from: "a".into(),
        to: "b".into(),
        amount: 100,
    })
    .unwrap();
    let e = unit.commit().await.unwrap_err();
    let kind = match &e {
        leasehold::Error::Batch { source, .. } => source.kind(),
        other => other.kind(),
    };
    assert!(
        matches!(kind, ErrorKind::LeaseLost | ErrorKind::Conflict),
        "{e}"
    );
    let t = next.table::<Account>();
    assert_eq!(
        t.get("p", "acct0").await.unwrap().unwrap().balance,
        90,
        "the next holder's write stands"
    );
    assert!(
        next.table::<Entry>()
            .get("p", "stale")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test(start_paused = true)]
async fn a_contradicted_journal_stops_roll_forward_and_is_kept() {
    let memory = MemoryBackend::new();
    let faulty = FaultyBackend::new(memory.clone());
    let injector = faulty.injector();
    let dying = process(Arc::new(faulty), "i");
    let healthy = process(Arc::new(memory), "i");
    open_accounts(&healthy, "q", 2).await;
    injector.die_at_nth(Some(Op::Batch), 1);
    assert!(
        transfer(&dying, "q", "acct0", "acct1", 30, "t1")
            .await
            .is_err()
    );
    // Something writes the partition without the lock.
    healthy
        .table::<Account>()
        .update_with("q", "acct0", |a| a.balance = 5)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(61)).await;
    let e = healthy.lock("q").await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Inconsistent, "{e}");
    assert!(e.to_string().contains("acct0"), "{e}");
    let pending = healthy
        .pending_commit("q")
        .await
        .unwrap()
        .expect("journal kept");
    assert_eq!(pending.writes.len(), 3);
    // The operator repairs the row, then rolls forward.
    let mut a = healthy
        .table::<Account>()
        .get("q", "acct0")
        .await
        .unwrap()
        .unwrap();
    a.balance = 70;
    healthy.table::<Account>().replace(&a).await.unwrap();
    let report = healthy
        .roll_forward("q")
        .await
        .unwrap()
        .expect("rolled forward");
    assert_eq!(report.already_applied, 1);
    assert_eq!(report.applied, 2);
    assert!(healthy.pending_commit("q").await.unwrap().is_none());
}

#[tokio::test]
async fn more_than_100_writes_to_one_table_are_journalled() {
    let store = process(memory(), "big");
    let mut unit = store.lock("many").await.unwrap();
    for i in 0..150 {
        unit.insert(&Account {
            customer: "many".into(),
            name: format!("a{i:03}"),
            balance: i,
        })
        .unwrap();
    }
    let report = unit.commit().await.unwrap();
    assert!(report.journalled, "{report:?}");
    assert_eq!(
        (report.tables, report.batches, report.operations),
        (1, 2, 150)
    );
    let all = store
        .table::<Account>()
        .query()
        .partition("many")
        .all()
        .await
        .unwrap();
    assert_eq!(all.len(), 150);
    assert!(store.pending_commit("many").await.unwrap().is_none());
}

#[tokio::test]
async fn a_refused_insert_keeps_the_staged_insert() {
    lock_suite::a_refused_insert_keeps_the_staged_insert(memory(), "m").await;
}

#[tokio::test]
async fn writing_a_row_twice_follows_the_folding_table() {
    lock_suite::writing_a_row_twice_follows_the_folding_table(memory(), "m").await;
}

#[tokio::test]
async fn an_upsert_then_delete_of_an_absent_row_writes_nothing() {
    lock_suite::an_upsert_then_delete_of_an_absent_row_writes_nothing(memory(), "m").await;
}

#[tokio::test]
async fn a_staged_view_from_another_unit_is_refused_without_change() {
    lock_suite::a_staged_view_from_another_unit_is_refused_without_change(memory(), "m").await;
}

#[tokio::test]
async fn breaking_a_free_lock_reports_not_held() {
    lock_suite::breaking_a_free_lock_reports_not_held(memory(), "m").await;
}

#[tokio::test]
async fn a_lock_names_its_holder_even_when_its_unit_is_leaked() {
    lock_suite::a_lock_names_its_holder_even_when_its_unit_is_leaked(memory(), "m").await;
}

#[tokio::test(start_paused = true)]
async fn a_dead_holder_stays_named_until_and_after_its_lease_expires() {
    let memory = MemoryBackend::new();
    let faulty = FaultyBackend::new(memory.clone());
    let injector = faulty.injector();
    let dying = process(Arc::new(faulty), "k");
    let operator = process(Arc::new(memory), "k");
    let name = operator.lock_lease_name("kim").unwrap();
    let unit = dying.lock("kim").await.unwrap();
    // The process dies holding the lock: nothing it sends arrives, not
    // even the release of its dropped unit.
    injector.die_now();
    drop(unit);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let d = operator.locks().describe(name.as_str()).await.unwrap();
    assert!(d.is_held(), "{d:?}");
    assert_eq!(d.owner.as_deref(), Some(dying.locks().owner()));
    tokio::time::sleep(Duration::from_secs(60)).await;
    let d = operator.locks().describe(name.as_str()).await.unwrap();
    assert!(!d.is_held(), "expired: {d:?}");
    assert_eq!(
        d.owner.as_deref(),
        Some(dying.locks().owner()),
        "last holder"
    );
}

#[tokio::test]
async fn recording_the_holder_costs_a_write_only_when_the_lock_changes_hands() {
    let counting = CountingBackend::new(MemoryBackend::new());
    let counter = counting.counter();
    let shared: Arc<dyn Backend> = Arc::new(counting);
    let a = process(shared.clone(), "h");
    let b = process(shared, "h");
    a.lock("x").await.unwrap().abandon().await.unwrap();
    // (acquire, lock-blob read, holder write, release) for each unit.
    let cold = |store: &Store| {
        let store = store.clone();
        let counter = counter.clone();
        async move {
            counter.reset();
            store.lock("x").await.unwrap().abandon().await.unwrap();
            (
                counter.get(Op::AcquireLease),
                counter.get(Op::GetBlob),
                counter.get(Op::SetBlobMetadata),
                counter.get(Op::ReleaseLease),
            )
        }
    };
    assert_eq!(cold(&a).await, (1, 1, 0, 1), "a takes back its own lock");
    assert_eq!(cold(&b).await, (1, 1, 1, 1), "b takes it from a");
    assert_eq!(cold(&b).await, (1, 1, 0, 1), "b takes back its own lock");
    assert_eq!(cold(&a).await, (1, 1, 1, 1), "a takes it from b");
    assert_eq!(counter.total(), 4);
}
