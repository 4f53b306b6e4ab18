//! Every error the public lock and unit methods document, provoked through
//! the public API on the memory backend (paused Tokio time), with the
//! `ErrorKind` asserted and, where the docs promise it, that nothing was
//! sent or applied and the caller's state (staged writes, other locks) is
//! unchanged. `Auth` needs a service that refuses credentials: it is
//! provoked on the Azure backend, whose transport a `FaultInjector` answers
//! with 403 (nothing reaches the network).
//!
//! The map, method → documented error → the test(s) provoking it. Tests
//! of this file are named bare; others by their path in the `it` binary
//! (`memory::…` are the checks of `tests/it/checks`, also run on Azurite). "Every
//! taker" means a test looping over `lock`, `lock_with_timeout`,
//! `try_lock`, `lock_many`, `lock_many_with_timeout`, `try_lock_many` and
//! `roll_forward` (whose errors are "as `Store::lock`").
//!
//! | method | error | test |
//! |---|---|---|
//! | `Store::lock` and every taker | `Timeout` (`Ok(None)` for the `try_` ones) | `taking_a_held_lock_times_out_or_finds_it_held_and_takes_nothing`; `errors::errors_of_every_variant_say_each_fact_once` (`lock_with_timeout`); `memory::lock_many::taking_several_locks_gives_back_what_it_took_on_a_held_key` |
//! | | `Unavailable` after the lock lease options' bound | `taking_a_lock_on_failing_storage_gives_up_after_the_lock_lease_bound`; `storage_unavailable::store_lock_gives_up_when_storage_keeps_failing`; `azure_backend::lease_waits_on_a_closed_port_give_up_naming_the_blob_endpoint` |
//! | | `Inconsistent`: a journal that cannot be rolled forward | `a_journal_contradicted_by_a_stray_write_stops_every_taker_and_is_kept`; `memory::lock::a_contradicted_journal_stops_roll_forward_and_is_kept` |
//! | | `Inconsistent`: a lock record that does not parse | `a_lock_record_that_does_not_parse_stops_every_taker_and_is_kept` |
//! | | `LeaseLost` while the lock is taken, nothing written, locks given back | `a_lease_lost_while_a_lock_is_taken_is_lease_lost_and_writes_nothing`; `memory::lock_many::a_lock_lost_while_it_is_taken_is_lease_lost` |
//! | | `Invalid`: a bad key, before any request | `bad_keys_and_empty_sets_are_invalid_before_any_request`; `bad_input::catalogue_on_memory` (`try_lock`) |
//! | | `Invalid`: a lock blob that is not a lease document | `a_lock_blob_that_is_not_a_lease_document_is_invalid_everywhere` |
//! | | `Auth` | `storage_refusing_the_credentials_is_auth_for_every_taker` |
//! | `lock_many`, `lock_many_with_timeout`, `try_lock_many` | `Invalid`: an empty set | `bad_keys_and_empty_sets_are_invalid_before_any_request`; `memory::lock_many::a_unit_over_several_partitions_reads_writes_and_commits_them_all` |
//! | `Store::commit_outcome` | `Invalid`: a bad key, before any request | `bad_keys_and_empty_sets_are_invalid_before_any_request` |
//! | | `Inconsistent`: a record that does not parse | `operators_reading_a_lock_record_that_does_not_parse_get_inconsistent` |
//! | | `Invalid`: a lock blob that is not a lease document | `a_lock_blob_that_is_not_a_lease_document_is_invalid_everywhere` |
//! | | backend errors | `operator_reads_pass_storage_failures_on` |
//! | `Store::resolve_commit` | `Invalid`: a bad key, before any request | `bad_keys_and_empty_sets_are_invalid_before_any_request`; `memory::lock::a_kept_journal_is_shown_then_finished_or_undone_by_choice` |
//! | | `Conflict`: a row changed meanwhile, rows written stay, journal kept | `a_row_changed_while_a_commit_is_resolved_is_a_conflict_and_keeps_the_journal` |
//! | | `Timeout`: the primary's lock stays held | `resolving_a_commit_whose_lock_stays_held_times_out_and_writes_nothing` |
//! | | `Invalid`: `Finish` of a commit that was undoing | `memory::lock_many::a_crash_while_undoing_is_finished_by_the_next_holder` |
//! | | `Invalid`: `Undo` of a commit with row marks | `undoing_a_commit_with_row_marks_is_invalid_and_finishing_rolls_it_forward` |
//! | | `Inconsistent`: a journal that does not parse | `operators_reading_a_lock_record_that_does_not_parse_get_inconsistent` |
//! | | `Inconsistent`: undo of a journal without before-images | `undoing_a_journal_without_before_images_is_inconsistent_and_keeps_it` |
//! | | `Unavailable` while taking the primary's lock | `resolving_on_failing_storage_gives_up_unavailable_and_keeps_the_journal` |
//! | | `Invalid`: a lock blob that is not a lease document | `a_lock_blob_that_is_not_a_lease_document_is_invalid_everywhere` |
//! | | backend errors | `operator_reads_pass_storage_failures_on` |
//! | `Store::pending_commit` | `Inconsistent`: a journal that does not parse | `operators_reading_a_lock_record_that_does_not_parse_get_inconsistent`; `errors::errors_of_every_variant_say_each_fact_once` |
//! | | `Invalid`: a bad key | `bad_keys_and_empty_sets_are_invalid_before_any_request`; `bad_input::catalogue_on_memory` |
//! | | `Invalid`: a lock blob that is not a lease document | `a_lock_blob_that_is_not_a_lease_document_is_invalid_everywhere` |
//! | | backend errors | `operator_reads_pass_storage_failures_on` |
//! | `Store::sweep` (its lock blobs) | `Invalid`: `older_than` before any date, before any request | `pruning_further_back_than_any_date_is_invalid_before_any_request`; `memory::lock::pruning_deletes_only_free_clean_old_lock_blobs` |
//! | | `Unavailable` taking a candidate's lease | `pruning_gives_up_unavailable_when_a_candidates_lease_cannot_be_taken` |
//! | | backend errors (the listing) | `operator_reads_pass_storage_failures_on` |
//! | `Store::sweep`, dry run | `Invalid` | `pruning_further_back_than_any_date_is_invalid_before_any_request` |
//! | | backend errors (the listing) | `operator_reads_pass_storage_failures_on` |
//! | | (never `Unavailable`: it takes no lease) | `pruning_gives_up_unavailable_when_a_candidates_lease_cannot_be_taken` |
//! | `Unit::lease` | (never an error: the locks are given up only by `commit` and `abandon`, which consume the unit; a lease that ran out is returned, lost) | `a_units_lease_is_returned_even_after_it_ran_out` |
//! | `Unit::get` | `Invalid`: a bad key; several partitions; a table name the prefix makes too long | `reads_in_a_unit_refuse_bad_input_before_any_request`; `memory::lock_many::a_unit_over_several_partitions_reads_writes_and_commits_them_all` (several) |
//! | | `Decode` | `reads_in_a_unit_of_rows_that_do_not_decode_are_decode_errors` |
//! | | backend errors | `reads_in_a_unit_pass_storage_failures_on_and_record_nothing` |
//! | `Unit::get_in` | `Invalid`: a bad key; a partition not held; a table name too long | `reads_in_a_unit_refuse_bad_input_before_any_request`; `memory::lock_many::a_unit_over_several_partitions_reads_writes_and_commits_them_all` (not held) |
//! | | `Decode` | `reads_in_a_unit_of_rows_that_do_not_decode_are_decode_errors` |
//! | | backend errors | `reads_in_a_unit_pass_storage_failures_on_and_record_nothing` |
//! | `Unit::insert` | `Invalid`: another partition | `staging_refusals_are_invalid_and_change_nothing`; `bad_input::catalogue_on_memory`; `memory::lock_many::a_unit_over_several_partitions_reads_writes_and_commits_them_all` |
//! | | `Invalid`: a service limit | `staging_refusals_are_invalid_and_change_nothing`; `bad_input::catalogue_on_memory` |
//! | | `Invalid`: cannot follow the staged write | `memory::lock::a_refused_insert_keeps_the_staged_insert`; `memory::lock::writing_a_row_twice_follows_the_folding_table` |
//! | `Unit::replace`, `merge`, `delete` | `Invalid`: another partition; a service limit | `staging_refusals_are_invalid_and_change_nothing` |
//! | | `Invalid`: cannot follow the staged write | `memory::lock::writing_a_row_twice_follows_the_folding_table` |
//! | | `Invalid`: a staged view with no staged write | `memory::lock::a_staged_view_from_another_unit_is_refused_without_change` |
//! | `Unit::upsert`, `upsert_merge` | `Invalid`: another partition; a service limit | `staging_refusals_are_invalid_and_change_nothing`; `bad_input::catalogue_on_memory` |
//! | | (never "cannot follow": an upsert follows any staged write) | `memory::lock::writing_a_row_twice_follows_the_folding_table` |
//! | `Unit::commit` | `LeaseLost`: less than the margin left, nothing sent | `memory::lock::commit_without_enough_lease_left_sends_nothing` |
//! | | `LeaseLost`: lost before the journal was stored, nothing applied | `a_commit_whose_lease_runs_out_before_its_journal_is_stored_is_lease_lost_and_applies_nothing` |
//! | | `Invalid`: a service limit, nothing sent | `staging_refusals_are_invalid_and_change_nothing` |
//! | | `Batch` (`Conflict` / `AlreadyExists` inside), nothing applied | `a_commit_of_a_changed_or_existing_row_is_a_batch_error_and_applies_nothing` |
//! | | `ValueTaken`, nothing sent but the refused claim | `a_commit_claiming_a_taken_unique_value_is_value_taken_and_writes_nothing`; `memory::indexes::duplicates_are_refused_with_nothing_stored` |
//! | | `Conflict` naming the row, the applied transactions undone | `memory::lock_many::a_commit_refused_half_way_by_a_stray_writer_is_undone` |
//! | | `Inconsistent`: the undo refused too, journal kept | `an_undo_refused_by_a_stray_writer_is_inconsistent_and_keeps_the_journal` |
//! | | `Inconsistent`: a decided journal that cannot be rolled forward | `a_decided_journal_that_cannot_be_rolled_forward_is_inconsistent_and_kept` |
//! | | `InDoubt` | `memory::lock_many::a_commit_that_cannot_read_its_outcome_is_in_doubt_until_asked_again`; `memory::lock_many::a_crash_while_undoing_is_finished_by_the_next_holder` |
//! | | `Transient` before the journal write, nothing applied | `a_commit_that_cannot_read_a_before_image_is_transient_and_sends_nothing` |
//! | | (never `Unavailable`: storage failing after the commit point is `InDoubt`) | `memory::lock_many::a_commit_that_cannot_read_its_outcome_is_in_doubt_until_asked_again` |
//! | `Unit::abandon` | `LeaseLost`, the other locks released all the same | `abandoning_after_a_lease_ran_out_is_lease_lost_and_releases_the_others` |
//! | | `Transient`, the lease expiring on its own | `an_abandon_that_cannot_release_is_transient_and_the_lease_expires` |
//! | `UnitQuery::all` | `Invalid`: a bad filter or key, a partition not held, before any request | `reads_in_a_unit_refuse_bad_input_before_any_request`; `memory::lock_many::unit_queries_see_staged_writes_and_stale_reads_fail_the_commit` (not held) |
//! | | `Decode` | `reads_in_a_unit_of_rows_that_do_not_decode_are_decode_errors` |
//! | | backend errors | `reads_in_a_unit_pass_storage_failures_on_and_record_nothing` |

use std::sync::Arc;
use std::time::Duration;

use leasehold::backend::Op;
use leasehold::backend::memory::MemoryBackend;
use leasehold::backend::{Backend, BlobBackend as _, BlobConditions, Metadata};
use leasehold::key::ContainerName;
use leasehold::lease::LeaseOptions;
use leasehold::lock::{CommitOutcome, LockOptions, Unit};
use leasehold::testing::{CountingBackend, Fault, FaultInjector, FaultyBackend, RequestCounter};
use leasehold::{Entity, Error, ErrorKind, Store};
use tokio::time::{Instant, sleep};

/// `store`'s sweep keeping what is younger than `older_than`, for real or
/// as a dry run.
async fn sweep(
    store: &Store,
    older_than: Duration,
    dry_run: bool,
) -> leasehold::Result<leasehold::store::SweepReport> {
    let options = leasehold::store::SweepOptions::new()
        .with_older_than(older_than)
        .with_dry_run(dry_run);
    store.sweep(&options).await
}

/// The lease duration of partition locks (the default).
const LEASE: Duration = LockOptions::DEFAULT_LEASE_DURATION;

/// How long the stores of these tests ride out failing storage.
const BOUND: Duration = Duration::from_secs(10);

/// The second key of the calls that take several locks; it comes after
/// every first key used here in canonical order.
const OTHER: &str = "zz-other";

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "LeAccounts")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    balance: i64,
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "LeLedger")]
struct Entry {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    id: String,
    amount: i64,
}

/// The ledger read with another type for `amount`.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "LeLedger")]
struct EntryText {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    id: String,
    amount: String,
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "LeDocs")]
struct Doc {
    #[entity(partition_key)]
    part: String,
    #[entity(row_key)]
    id: String,
    data: Vec<u8>,
    score: f64,
}

/// A member whose e-mail is unique (its index rows live in index
/// partitions of their own).
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "LeMembers")]
struct Member {
    #[entity(partition_key)]
    club: String,
    #[entity(row_key)]
    id: String,
    #[entity(unique)]
    email: String,
}

/// An entity of almost 1 MiB: four of them make a transaction over the
/// service's 4 MiB payload limit.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "LeBig")]
struct Big {
    #[entity(partition_key)]
    part: String,
    #[entity(row_key)]
    id: String,
    p0: Vec<u8>,
    p1: Vec<u8>,
    p2: Vec<u8>,
    p3: Vec<u8>,
    p4: Vec<u8>,
    p5: Vec<u8>,
    p6: Vec<u8>,
    p7: Vec<u8>,
    p8: Vec<u8>,
    p9: Vec<u8>,
    p10: Vec<u8>,
    p11: Vec<u8>,
    p12: Vec<u8>,
    p13: Vec<u8>,
    p14: Vec<u8>,
}

fn big(part: &str, id: &str) -> Big {
    let v = || vec![7u8; 65_000];
    Big {
        part: part.into(),
        id: id.into(),
        p0: v(),
        p1: v(),
        p2: v(),
        p3: v(),
        p4: v(),
        p5: v(),
        p6: v(),
        p7: v(),
        p8: v(),
        p9: v(),
        p10: v(),
        p11: v(),
        p12: v(),
        p13: v(),
        p14: v(),
    }
}

fn account(customer: &str, name: &str, balance: i64) -> Account {
    Account {
        customer: customer.into(),
        name: name.into(),
        balance,
    }
}

fn entry(customer: &str, id: &str, amount: i64) -> Entry {
    Entry {
        customer: customer.into(),
        id: id.into(),
        amount,
    }
}

fn doc(part: &str, id: &str) -> Doc {
    Doc {
        part: part.into(),
        id: id.into(),
        data: vec![1, 2, 3],
        score: 1.0,
    }
}

fn member(club: &str, id: &str, email: &str) -> Member {
    Member {
        club: club.into(),
        id: id.into(),
        email: email.into(),
    }
}

fn memory() -> Arc<dyn Backend> {
    Arc::new(MemoryBackend::new())
}

/// A store ("process") with default options on `backend`.
fn store_on(backend: Arc<dyn Backend>) -> Store {
    Store::builder_shared(backend).build().expect("store")
}

/// A store on `backend` behind a fault injector.
fn faulty_store(backend: &Arc<dyn Backend>) -> (Store, FaultInjector) {
    let faulty = FaultyBackend::new(backend.clone());
    let faults = faulty.injector();
    (store_on(Arc::new(faulty)), faults)
}

/// A store on `backend` counting its requests.
fn counted_store(backend: &Arc<dyn Backend>) -> (Store, RequestCounter) {
    let counting = CountingBackend::new(backend.clone());
    let counter = counting.counter();
    (store_on(Arc::new(counting)), counter)
}

/// A store whose partition locks (only) give up on failing storage after
/// [`BOUND`]; its other leases keep the default 30 s.
fn lock_bound_store(backend: Arc<dyn Backend>) -> Store {
    Store::builder_shared(backend)
        .lock_lease_options(
            LeaseOptions::new()
                .with_duration(LockOptions::DEFAULT_LEASE_DURATION)
                .with_container(ContainerName::new(LockOptions::DEFAULT_CONTAINER).unwrap())
                .with_owner_metadata(false)
                .with_unavailable_after(BOUND),
        )
        .build()
        .expect("store")
}

/// Fails the next `n` requests of kind `op`.
fn fail_next(faults: &FaultInjector, op: Op, n: u64) {
    for nth in 1..=n {
        faults.fail_nth(Some(op), nth);
    }
}

/// Opens account `main` with 100 for each customer.
async fn open(store: &Store, customers: &[&str]) {
    for c in customers {
        store
            .table::<Account>()
            .insert(account(c, "main", 100))
            .await
            .expect("open");
    }
}

async fn balance(store: &Store, customer: &str) -> i64 {
    store
        .table::<Account>()
        .get(customer, "main")
        .await
        .unwrap()
        .expect("account")
        .balance
}

/// Whether anybody holds the lock of `key` now: the lease state of its
/// blob as storage reports it (whatever the blob holds).
async fn is_held(store: &Store, key: &str) -> bool {
    let name = store.lock_lease_name(key).unwrap();
    store
        .backend()
        .blob_properties(store.locks().container(), &name.blob_name().unwrap())
        .await
        .unwrap()
        .is_some_and(|p| p.lease.state == leasehold::backend::LeaseState::Leased)
}

/// Writes `body` into the lock blob of `key`, under its lease, as
/// something other than this leasehold would.
async fn write_lock_blob(store: &Store, key: &str, body: &[u8]) {
    let name = store.lock_lease_name(key).unwrap();
    let guard = store
        .locks()
        .acquire(name.as_str(), Duration::from_secs(1))
        .await
        .unwrap();
    store
        .backend()
        .put_blob(
            store.locks().container(),
            &name.blob_name().unwrap(),
            body.to_vec(),
            &Metadata::new(),
            &BlobConditions::leased(guard.lease_id()),
        )
        .await
        .unwrap();
    guard.release().await.unwrap();
}

/// The calls that take partition locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Taker {
    Lock,
    LockWithTimeout,
    TryLock,
    LockMany,
    LockManyWithTimeout,
    TryLockMany,
}

const TAKERS: [Taker; 6] = [
    Taker::Lock,
    Taker::LockWithTimeout,
    Taker::TryLock,
    Taker::LockMany,
    Taker::LockManyWithTimeout,
    Taker::TryLockMany,
];

impl Taker {
    fn tries_once(self) -> bool {
        matches!(self, Taker::TryLock | Taker::TryLockMany)
    }

    fn has_timeout(self) -> bool {
        matches!(self, Taker::LockWithTimeout | Taker::LockManyWithTimeout)
    }

    /// Takes the lock of `key` (and [`OTHER`]'s, for the calls taking
    /// several; the `_with_timeout` calls waiting up to `wait`) and gives
    /// it back: `Ok(true)` when taken, `Ok(false)` when a `try_` call found
    /// it held.
    async fn run(self, store: &Store, key: &str, wait: Duration) -> leasehold::Result<bool> {
        let keys = [key, OTHER];
        let unit: Option<Unit> = match self {
            Taker::Lock => Some(store.lock(key).await?),
            Taker::LockWithTimeout => Some(store.lock_with_timeout(key, wait).await?),
            Taker::TryLock => store.try_lock(key).await?,
            Taker::LockMany => Some(store.lock_many(keys).await?),
            Taker::LockManyWithTimeout => Some(store.lock_many_with_timeout(keys, wait).await?),
            Taker::TryLockMany => store.try_lock_many(keys).await?,
        };
        match unit {
            Some(unit) => {
                unit.abandon().await?;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

// ---------------------------------------------------------------------------
// Taking locks
// ---------------------------------------------------------------------------

/// A lock another process holds: the waiting calls give up with `Timeout`
/// after their wait (the configured one, or the one passed), the `try_`
/// calls return at once with nothing; every lock a call took is given
/// back, and the holder's unit (its lease, its staged write) is untouched.
#[tokio::test(start_paused = true)]
async fn taking_a_held_lock_times_out_or_finds_it_held_and_takes_nothing() {
    let backend = memory();
    let holder = store_on(backend.clone());
    let configured = Duration::from_secs(3);
    let passed = Duration::from_secs(2);
    let waiter = Store::builder_shared(backend)
        .lock_options(LockOptions::new().with_acquire_timeout(configured))
        .build()
        .unwrap();
    open(&holder, &["held"]).await;
    let mut unit = holder.lock("held").await.unwrap();
    let mut a = unit.get::<Account>("main").await.unwrap().unwrap();
    a.balance = 1;
    unit.replace(&a).unwrap();

    for taker in TAKERS {
        let started = Instant::now();
        let outcome = taker.run(&waiter, "held", passed).await;
        let waited = started.elapsed();
        if taker.tries_once() {
            assert!(!outcome.expect("no error"), "{taker:?} found it held");
            assert!(
                waited < Duration::from_secs(1),
                "{taker:?} waited {waited:?}"
            );
        } else {
            let e = outcome.expect_err("held");
            assert_eq!(e.kind(), ErrorKind::Timeout, "{taker:?}: {e}");
            let wait = if taker.has_timeout() {
                passed
            } else {
                configured
            };
            assert!(
                waited >= wait && waited <= wait + Duration::from_secs(1),
                "{taker:?} waited {waited:?}, not {wait:?}"
            );
        }
        assert!(
            !is_held(&waiter, OTHER).await,
            "{taker:?} gave the other lock back"
        );
        assert!(is_held(&waiter, "held").await);
    }
    assert!(!unit.lease().unwrap().is_lost());
    assert_eq!(unit.staged(), 1, "the holder's staged write is untouched");
    unit.commit().await.unwrap();
    assert_eq!(balance(&holder, "held").await, 1);
}

/// A bad key (anywhere in the set) and an empty set are `Invalid` before
/// any request, from every taker and every operator call taking a key.
#[tokio::test(start_paused = true)]
async fn bad_keys_and_empty_sets_are_invalid_before_any_request() {
    let (store, counter) = counted_store(&memory());
    let bad = "a/b";
    let wait = Duration::from_secs(5);
    for taker in TAKERS {
        let e = taker.run(&store, bad, wait).await.expect_err("bad key");
        assert_eq!(e.kind(), ErrorKind::Invalid, "{taker:?}: {e}");
        assert!(
            e.to_string().contains("a/b"),
            "{taker:?} names the key: {e}"
        );
    }
    let none = Vec::<&str>::new;
    let empty = [
        store.lock_many(none()).await.map(drop).unwrap_err(),
        store
            .lock_many_with_timeout(none(), wait)
            .await
            .map(drop)
            .unwrap_err(),
        store.try_lock_many(none()).await.map(drop).unwrap_err(),
    ];
    for e in empty {
        assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
        assert!(e.to_string().contains("empty"), "{e}");
    }
    let e = store.commit_outcome(bad, "t.Accounts").await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert_eq!(counter.total(), 0, "{counter:?}");
}

/// Storage failing at every request: every taker gives up with
/// `Unavailable` naming the endpoint after the bound of the *lock* lease
/// options (the store's other leases would wait 30 s), also when its own
/// wait is longer.
#[tokio::test(start_paused = true)]
async fn taking_a_lock_on_failing_storage_gives_up_after_the_lock_lease_bound() {
    for taker in TAKERS {
        let faulty = FaultyBackend::new(memory());
        let faults = faulty.injector();
        let store = lock_bound_store(Arc::new(faulty));
        faults.die_now();
        let started = Instant::now();
        let e = taker
            .run(&store, "u", Duration::from_secs(600))
            .await
            .expect_err("storage fails");
        let waited = started.elapsed();
        assert_eq!(e.kind(), ErrorKind::Unavailable, "{taker:?}: {e}");
        assert!(
            waited >= BOUND && waited <= BOUND + Duration::from_secs(3),
            "{taker:?} gave up after {waited:?}"
        );
        let Error::Unavailable {
            endpoint, source, ..
        } = &e
        else {
            unreachable!()
        };
        assert_eq!(endpoint, "memory");
        assert!(source.is_transient(), "{taker:?}: {e}");
    }
}

/// A lock blob whose body is not a lease document at all (written by
/// something else) is `Invalid` for every taker and every operator read;
/// the locks taken are given back.
#[tokio::test(start_paused = true)]
async fn a_lock_blob_that_is_not_a_lease_document_is_invalid_everywhere() {
    let store = store_on(memory());
    write_lock_blob(&store, "junk", b"not a lease document").await;
    for taker in TAKERS {
        let e = taker
            .run(&store, "junk", Duration::from_secs(5))
            .await
            .expect_err("not a lease document");
        assert_eq!(e.kind(), ErrorKind::Invalid, "{taker:?}: {e}");
        assert!(!is_held(&store, "junk").await, "{taker:?}");
        assert!(!is_held(&store, OTHER).await, "{taker:?}");
    }
}

/// A process stalls past its lease while it records itself as the lock's
/// holder, and the next process takes the lock and commits meanwhile:
/// every taker returns `LeaseLost`, nothing of its own is written, the
/// next holder's commit stands, and calling again succeeds.
#[tokio::test(start_paused = true)]
async fn a_lease_lost_while_a_lock_is_taken_is_lease_lost_and_writes_nothing() {
    for taker in TAKERS {
        let backend = memory();
        let next = store_on(backend.clone());
        open(&next, &["a"]).await;
        let (stalled, faults) = faulty_store(&backend);
        faults.inject(Some(Op::SetBlobMetadata), 1, Fault::Delay(LEASE * 3));
        faults.set_latency(Some(Op::RenewLease), Duration::from_secs(3600));
        let wait = Duration::from_secs(600);
        let (taken, ()) = tokio::join!(taker.run(&stalled, "a", wait), async {
            sleep(LEASE + Duration::from_secs(2)).await;
            let mut unit = next.lock("a").await.unwrap();
            let mut a = unit.get::<Account>("main").await.unwrap().unwrap();
            a.balance -= 1;
            unit.replace(&a).unwrap();
            unit.commit().await.unwrap();
        });
        let e = taken.expect_err("the lease ran out while the lock was taken");
        assert_eq!(e.kind(), ErrorKind::LeaseLost, "{taker:?}: {e}");
        assert_eq!(balance(&next, "a").await, 99, "{taker:?}");
        faults.set_latency(Some(Op::RenewLease), Duration::ZERO);
        assert!(
            taker.run(&stalled, "a", wait).await.unwrap(),
            "{taker:?}: calling again is safe"
        );
        assert_eq!(balance(&next, "a").await, 99, "{taker:?}");
    }
}

/// Storage refusing the credentials (HTTP 403) is `Auth`, at once, for
/// every taker.
#[cfg(feature = "azure")]
#[tokio::test(start_paused = true)]
async fn storage_refusing_the_credentials_is_auth_for_every_taker() {
    use leasehold::backend::azure::{AzureBackend, TransportRetry};
    // Nothing listens there: a request that slipped past the injector
    // would fail as unreachable, never as refused credentials.
    let closed = "http://127.0.0.1:1/devstoreaccount1";
    for taker in TAKERS {
        let faults = FaultInjector::default();
        for method in ["GET", "HEAD", "PUT", "DELETE"] {
            for _ in 0..20 {
                faults.inject_request(method, "", Fault::Status(403));
            }
        }
        let backend = AzureBackend::builder()
            .emulator()
            .unwrap()
            .table_endpoint(closed)
            .blob_endpoint(closed)
            .transport_retry(TransportRetry::none())
            .policy(faults.transport_policy())
            .build()
            .unwrap();
        let store = Store::builder(backend).build().unwrap();
        let started = Instant::now();
        let e = taker
            .run(&store, "a", Duration::from_secs(600))
            .await
            .expect_err("refused");
        assert_eq!(
            (e.kind(), e.status()),
            (ErrorKind::Auth, Some(403)),
            "{taker:?}: {e}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{taker:?}: not retried"
        );
    }
}

// ---------------------------------------------------------------------------
// Operator calls
// ---------------------------------------------------------------------------

/// The reads of the operator calls pass a storage failure on as it is
/// (`Transient`), and answer again once storage does.
#[tokio::test(start_paused = true)]
async fn operator_reads_pass_storage_failures_on() {
    let (store, faults) = faulty_store(&memory());
    store.lock("o").await.unwrap().abandon().await.unwrap();
    let transient = |e: Error, what: &str| {
        assert_eq!(e.kind(), ErrorKind::Transient, "{what}: {e}");
    };
    let accounts = store.table::<Account>();
    accounts.insert(account("o", "main", 1)).await.unwrap();
    let txn = format!("0f1e.{}", accounts.name().unwrap().as_str());
    faults.fail_nth(Some(Op::Get), 1);
    transient(
        store.commit_outcome("o", &txn).await.unwrap_err(),
        "commit_outcome",
    );
    assert_eq!(
        store.commit_outcome("o", &txn).await.unwrap(),
        CommitOutcome::NotApplied
    );
    faults.fail_nth(Some(Op::ListBlobs), 1);
    transient(
        sweep(&store, Duration::ZERO, false).await.unwrap_err(),
        "sweep",
    );
    faults.fail_nth(Some(Op::ListBlobs), 1);
    transient(
        sweep(&store, Duration::ZERO, true).await.unwrap_err(),
        "sweep, dry run",
    );
    assert_eq!(
        sweep(&store, Duration::ZERO, true)
            .await
            .unwrap()
            .lock_blobs,
        1
    );
}

/// `older_than` reaching back before any date is `Invalid` before any
/// request, for a sweep and a dry run.
#[tokio::test(start_paused = true)]
async fn pruning_further_back_than_any_date_is_invalid_before_any_request() {
    let (store, counter) = counted_store(&memory());
    let forever = Duration::from_secs(u64::MAX);
    for e in [
        sweep(&store, forever, false).await.unwrap_err(),
        sweep(&store, forever, true).await.unwrap_err(),
    ] {
        assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
        assert!(e.to_string().contains("older_than"), "{e}");
    }
    assert_eq!(counter.total(), 0);
}

/// A sweep that cannot take a candidate lock blob's lease (storage failing every
/// acquire) gives up with `Unavailable` after the lock lease options'
/// bound, deleting nothing. A dry run takes no lease: on the same storage
/// it answers.
#[tokio::test(start_paused = true)]
async fn pruning_gives_up_unavailable_when_a_candidates_lease_cannot_be_taken() {
    let faulty = FaultyBackend::new(memory());
    let faults = faulty.injector();
    let store = lock_bound_store(Arc::new(faulty));
    store.lock("p").await.unwrap().abandon().await.unwrap();
    fail_next(&faults, Op::AcquireLease, 2000);
    let plan = sweep(&store, Duration::ZERO, true).await.unwrap();
    assert_eq!(plan.lock_blobs, 1, "{plan:?}");
    let started = Instant::now();
    let e = sweep(&store, Duration::ZERO, false).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
    assert!(
        started.elapsed() >= BOUND,
        "gave up after {:?}",
        started.elapsed()
    );
    let name = store.lock_lease_name("p").unwrap();
    assert!(
        store.locks().describe(name.as_str()).await.unwrap().exists,
        "nothing deleted"
    );
}

// ---------------------------------------------------------------------------
// Units: reads and staging
// ---------------------------------------------------------------------------

/// `Unit::lease` never fails: a unit's locks are given up only by
/// `commit` and `abandon`, which consume it. A lease that ran out is
/// returned, saying so.
#[tokio::test(start_paused = true)]
async fn a_units_lease_is_returned_even_after_it_ran_out() {
    let store = store_on(memory());
    let unit = store.lock("l").await.unwrap();
    let name = store.lock_lease_name("l").unwrap();
    store
        .locks()
        .break_lease(name.as_str(), Some(Duration::ZERO))
        .await
        .unwrap();
    sleep(LEASE / 3 + Duration::from_secs(1)).await;
    let lease = unit.lease().expect("the unit's lease, lost or not");
    assert!(lease.is_lost());
    let e = lease.ensure_valid(Duration::ZERO).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LeaseLost, "{e}");
    drop(unit);
}

/// Bad input to a unit's reads is `Invalid` before any request: bad keys,
/// a partition the unit does not hold, `get` on a unit of several
/// partitions, a filter that cannot be sent, and a table name that the
/// store's prefix makes too long.
#[tokio::test(start_paused = true)]
async fn reads_in_a_unit_refuse_bad_input_before_any_request() {
    let (store, counter) = counted_store(&memory());
    open(&store, &["a", "b"]).await;
    let mut one = store.lock("a").await.unwrap();
    let mut two = store.lock_many(["b", "c"]).await.unwrap();
    let before = counter.total();
    let mut errors: Vec<(&str, Error)> = Vec::new();
    errors.push((
        "get: bad row key",
        one.get::<Account>("r/s").await.unwrap_err(),
    ));
    errors.push((
        "get: several partitions",
        two.get::<Account>("main").await.unwrap_err(),
    ));
    errors.push((
        "get_in: bad row key",
        one.get_in::<Account>("a", "r/s").await.unwrap_err(),
    ));
    errors.push((
        "get_in: bad partition key",
        one.get_in::<Account>("x/y", "main").await.unwrap_err(),
    ));
    errors.push((
        "get_in: not held",
        one.get_in::<Account>("z", "main").await.unwrap_err(),
    ));
    errors.push((
        "query: bad partition key",
        one.query::<Account>()
            .partition("x/y")
            .all()
            .await
            .unwrap_err(),
    ));
    errors.push((
        "query: not held",
        two.query::<Account>()
            .partition("a")
            .all()
            .await
            .unwrap_err(),
    ));
    errors.push((
        "query: bad filter",
        one.query::<Doc>()
            .filter(Doc::columns().score.eq(f64::NAN))
            .all()
            .await
            .unwrap_err(),
    ));
    for (what, e) in &errors {
        assert_eq!(e.kind(), ErrorKind::Invalid, "{what}: {e}");
    }
    assert_eq!(counter.total(), before, "no request");
    assert_eq!((one.staged(), two.staged()), (0, 0));
    one.abandon().await.unwrap();
    two.abandon().await.unwrap();

    // Table names over 63 characters once prefixed.
    let counting = CountingBackend::new(memory());
    let counter = counting.counter();
    let long = Store::builder(counting)
        .table_prefix("t".repeat(60))
        .unwrap()
        .build()
        .unwrap();
    let mut unit = long.lock("p").await.unwrap();
    let before = counter.total();
    for e in [
        unit.get::<Account>("main").await.unwrap_err(),
        unit.get_in::<Account>("p", "main").await.unwrap_err(),
        unit.query::<Account>().all().await.unwrap_err(),
    ] {
        assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
        assert!(e.to_string().contains("table name"), "{e}");
    }
    assert_eq!(counter.total(), before, "no request");
    unit.abandon().await.unwrap();
}

/// A stored row that does not decode as the type read is `Decode` from
/// `get`, `get_in` and a unit query, and the unit stays usable.
#[tokio::test(start_paused = true)]
async fn reads_in_a_unit_of_rows_that_do_not_decode_are_decode_errors() {
    let store = store_on(memory());
    store
        .table::<EntryText>()
        .insert(EntryText {
            customer: "x".into(),
            id: "e".into(),
            amount: "ten".into(),
        })
        .await
        .unwrap();
    let mut unit = store.lock("x").await.unwrap();
    unit.insert(&entry("x", "kept", 1)).unwrap();
    for e in [
        unit.get::<Entry>("e").await.unwrap_err(),
        unit.get_in::<Entry>("x", "e").await.unwrap_err(),
        unit.query::<Entry>().all().await.unwrap_err(),
    ] {
        assert_eq!(e.kind(), ErrorKind::Decode, "{e}");
        assert!(e.to_string().contains("amount"), "{e}");
    }
    assert_eq!(unit.staged(), 1);
    unit.commit().await.unwrap();
    assert!(
        store
            .table::<Entry>()
            .get("x", "kept")
            .await
            .unwrap()
            .is_some()
    );
}

/// A failing read in a unit passes the storage error on (`Transient`) and
/// records nothing: reading again asks storage again.
#[tokio::test(start_paused = true)]
async fn reads_in_a_unit_pass_storage_failures_on_and_record_nothing() {
    let (store, faults) = faulty_store(&memory());
    open(&store, &["f"]).await;
    let mut unit = store.lock("f").await.unwrap();
    faults.fail_nth(Some(Op::Get), 1);
    let e = unit.get::<Account>("main").await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transient, "get: {e}");
    assert_eq!(
        unit.get::<Account>("main").await.unwrap().unwrap().balance,
        100
    );
    faults.fail_nth(Some(Op::Get), 1);
    let e = unit.get_in::<Account>("f", "spare").await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transient, "get_in: {e}");
    store
        .table::<Account>()
        .insert(account("f", "spare", 1))
        .await
        .unwrap();
    assert!(
        unit.get_in::<Account>("f", "spare")
            .await
            .unwrap()
            .is_some(),
        "the failed read was not recorded as absent"
    );
    faults.fail_nth(Some(Op::Query), 1);
    let e = unit.query::<Account>().all().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transient, "query: {e}");
    assert_eq!(unit.query::<Account>().all().await.unwrap().len(), 2);
    unit.abandon().await.unwrap();
}

/// Every staging call refuses an entity of a partition the unit does not
/// hold, one breaking a service limit (a forbidden key character, an
/// oversized property), and a value claiming an index partition the unit
/// does not hold, with `Invalid`, sending nothing and leaving the staged
/// writes as they were.
#[tokio::test(start_paused = true)]
async fn staging_refusals_are_invalid_and_change_nothing() {
    let (store, counter) = counted_store(&memory());
    store.table::<Doc>().insert(doc("p", "d1")).await.unwrap();
    store
        .table::<Member>()
        .insert(member("p", "m1", "m1@example.com"))
        .await
        .unwrap();
    let mut unit = store.lock("p").await.unwrap();
    let current = unit.get::<Doc>("d1").await.unwrap().unwrap();
    unit.insert(&doc("p", "kept")).unwrap();
    let kept = unit
        .get::<Doc>("kept")
        .await
        .unwrap()
        .map(|v| v.into_inner());
    let before = counter.total();

    let mut other = current.clone();
    other.part = "q".into();
    let mut oversized = current.clone();
    oversized.data = vec![0; 64 * 1024 + 1];
    let mut bad_key = current.clone();
    bad_key.id = "a/b".into();
    let mut refused = 0;
    for (case, v) in [
        ("another partition", &other),
        ("oversized property", &oversized),
        ("forbidden key character", &bad_key),
    ] {
        let plain = v.clone().into_inner();
        for (call, result) in [
            ("insert", unit.insert(&plain)),
            ("replace", unit.replace(v)),
            ("merge", unit.merge(v)),
            ("delete", unit.delete(v)),
            ("upsert", unit.upsert(&plain)),
            ("upsert_merge", unit.upsert_merge(&plain)),
        ] {
            let e = result.expect_err(call);
            assert_eq!(e.kind(), ErrorKind::Invalid, "{call}, {case}: {e}");
            refused += 1;
        }
    }
    assert_eq!(refused, 18);
    assert_eq!(counter.total(), before, "nothing sent");
    assert_eq!(unit.staged(), 1, "the staged writes are as they were");
    assert_eq!(
        unit.get::<Doc>("kept")
            .await
            .unwrap()
            .map(|v| v.into_inner()),
        kept
    );
    unit.commit().await.unwrap();
    let docs = store.table::<Doc>();
    assert!(docs.get("p", "kept").await.unwrap().is_some());
    assert_eq!(
        docs.get("p", "d1").await.unwrap().unwrap().data,
        vec![1, 2, 3]
    );
    assert!(docs.get("q", "d1").await.unwrap().is_none());
}

// ---------------------------------------------------------------------------
// Units: commit and abandon
// ---------------------------------------------------------------------------

/// Writes too large for one transaction (4 MiB) are no error: the commit
/// decides in a row, the rows' after-images in hidden rows, applied whole,
/// no lock-blob write, and the lock is free after.
#[tokio::test(start_paused = true)]
async fn a_commit_over_the_batch_size_limit_decides_in_a_row_and_applies_whole() {
    let (store, counter) = counted_store(&memory());
    let mut unit = store.lock("big").await.unwrap();
    for i in 0..4 {
        unit.insert(&big("big", &format!("b{i}"))).unwrap();
    }
    counter.reset();
    let report = unit.commit().await.unwrap();
    assert!(report.transaction.is_some(), "{report:?}");
    assert_eq!(counter.get(Op::PutBlob), 0, "{counter:?}");
    assert!(!is_held(&store, "big").await);
    let stored = store
        .table::<Big>()
        .query()
        .partition("big")
        .all()
        .await
        .unwrap();
    assert_eq!(stored.len(), 4);
    assert!(stored.iter().all(|b| b.entity() == &big("big", &b.id)));
}

/// A single-transaction commit over a row changed since it was read, or
/// inserting a row that exists, is `Batch` with `Conflict` or
/// `AlreadyExists` inside at the operation's index; nothing of the commit
/// is applied.
#[tokio::test(start_paused = true)]
async fn a_commit_of_a_changed_or_existing_row_is_a_batch_error_and_applies_nothing() {
    let store = store_on(memory());
    open(&store, &["s"]).await;
    let accounts = store.table::<Account>();

    let mut unit = store.lock("s").await.unwrap();
    let mut a = unit.get::<Account>("main").await.unwrap().unwrap();
    accounts
        .update_with("s", "main", |a| a.balance = 1)
        .await
        .unwrap();
    a.balance = 50;
    unit.replace(&a).unwrap();
    unit.insert(&account("s", "second", 2)).unwrap();
    let e = unit.commit().await.unwrap_err();
    let Error::Batch { index, source } = &e else {
        panic!("{e:?}")
    };
    assert_eq!((*index, source.kind()), (0, ErrorKind::Conflict), "{e}");
    assert_eq!(balance(&store, "s").await, 1);
    assert!(accounts.get("s", "second").await.unwrap().is_none());

    let mut unit = store.lock("s").await.unwrap();
    unit.insert(&account("s", "another", 3)).unwrap();
    unit.insert(&account("s", "main", 7)).unwrap();
    let e = unit.commit().await.unwrap_err();
    let Error::Batch { index, source } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(
        (*index, source.kind()),
        (1, ErrorKind::AlreadyExists),
        "{e}"
    );
    assert_eq!(balance(&store, "s").await, 1);
    assert!(accounts.get("s", "another").await.unwrap().is_none());
    assert!(!is_held(&store, "s").await);
}

/// A unit claiming a unique value another entity holds is `ValueTaken` at
/// commit, with no write sent.
#[tokio::test(start_paused = true)]
async fn a_commit_claiming_a_taken_unique_value_is_value_taken_and_writes_nothing() {
    let (store, counter) = counted_store(&memory());
    let members = store.table::<Member>();
    members
        .insert(member("p", "m1", "ann@example.com"))
        .await
        .unwrap();
    let m2 = member("q", "m2", "ann@example.com");
    let mut unit = store.lock("q").await.unwrap();
    unit.insert(&m2).unwrap();
    counter.reset();
    let e = unit.commit().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ValueTaken, "{e}");
    for op in [Op::Batch, Op::PutBlob] {
        assert_eq!(counter.get(op), 0, "{op:?} sent: {counter:?}");
    }
    // The one write: the claim's insert, refused.
    assert_eq!(counter.get(Op::Write), 1, "{counter:?}");
    assert!(members.get("q", "m2").await.unwrap().is_none());
}

/// `LockOptions::with_commit_margin` reaches the commit: a margin longer
/// than the lock lease refuses every commit as `LeaseLost`, naming the
/// margin, and writes nothing; a store with the default margin commits the
/// same write.
#[tokio::test(start_paused = true)]
async fn a_commit_margin_longer_than_the_lease_refuses_the_commit_and_writes_nothing() {
    let backend = memory();
    let plain = store_on(backend.clone());
    open(&plain, &["margin"]).await;
    let margin = LEASE + Duration::from_secs(1);
    let careful = Store::builder_shared(backend)
        .lock_options(LockOptions::new().with_commit_margin(margin))
        .build()
        .unwrap();
    assert_eq!(careful.lock_options().commit_margin(), margin);
    assert_eq!(
        careful.lock_options().acquire_timeout(),
        LockOptions::DEFAULT_ACQUIRE_TIMEOUT
    );
    for store in [&careful, &plain] {
        let mut unit = store.lock("margin").await.unwrap();
        let mut a = unit.get::<Account>("main").await.unwrap().unwrap();
        a.balance -= 10;
        unit.replace(&a).unwrap();
        let committed = unit.commit().await;
        if std::ptr::eq(store, &careful) {
            let e = committed.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::LeaseLost, "{e}");
            assert!(e.to_string().contains(&format!("{margin:?} needed")), "{e}");
            assert_eq!(balance(&plain, "margin").await, 100, "nothing written");
        } else {
            committed.unwrap();
            assert_eq!(balance(&plain, "margin").await, 90);
        }
    }
}

/// A commit whose holder stalls past its lease just before its commit
/// point (the marking transaction is slow), while the next holder
/// commits: `LeaseLost`, nothing of it applied; the next holder's write
/// stands.
#[tokio::test(start_paused = true)]
async fn a_commit_whose_lease_runs_out_before_its_commit_point_is_lease_lost_and_applies_nothing() {
    lease_runs_out_before_the_commit_point(Op::Batch).await;
}

async fn lease_runs_out_before_the_commit_point(op: Op) {
    let backend = memory();
    let next = store_on(backend.clone());
    open(&next, &["j"]).await;
    let (stalled, faults) = faulty_store(&backend);
    let mut unit = stalled.lock("j").await.unwrap();
    let mut a = unit.get::<Account>("main").await.unwrap().unwrap();
    a.balance -= 30;
    unit.replace(&a).unwrap();
    assert!(unit.get::<Entry>("t1").await.unwrap().is_none());
    unit.insert(&entry("j", "t1", -30)).unwrap();
    // Two tables: the journal is the commit's first lock-blob write; the
    // marking transaction its first transaction.
    faults.inject(Some(op), 1, Fault::Delay(LEASE * 3));
    faults.set_latency(Some(Op::RenewLease), Duration::from_secs(3600));
    let (committed, ()) = tokio::join!(unit.commit(), async {
        sleep(LEASE + Duration::from_secs(2)).await;
        let mut unit = next.lock("j").await.unwrap();
        let mut a = unit.get::<Account>("main").await.unwrap().unwrap();
        a.balance -= 1;
        unit.replace(&a).unwrap();
        unit.commit().await.unwrap();
    });
    let e = committed.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LeaseLost, "{e}");
    assert_eq!(
        balance(&next, "j").await,
        99,
        "the next holder's write stands"
    );
    assert!(
        next.table::<Entry>()
            .get("j", "t1")
            .await
            .unwrap()
            .is_none()
    );
}

/// A journalled commit that cannot read the before-image of a row it
/// writes without having read it fails with the storage error
/// (`Transient`) before its journal: no lock-blob write, no transaction,
/// nothing applied, the lock free.
#[tokio::test(start_paused = true)]
async fn a_commit_that_cannot_read_a_before_image_is_transient_and_sends_nothing() {
    let counting = CountingBackend::new(memory());
    let counter = counting.counter();
    let faulty = FaultyBackend::new(counting);
    let faults = faulty.injector();
    let store = store_on(Arc::new(faulty));
    open(&store, &["t"]).await;
    let mut unit = store.lock("t").await.unwrap();
    unit.upsert(&account("t", "main", 1)).unwrap();
    unit.insert(&entry("t", "e1", 1)).unwrap();
    faults.fail_nth(Some(Op::Get), 1);
    counter.reset();
    let e = unit.commit().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transient, "{e}");
    for op in [Op::Batch, Op::Write, Op::PutBlob] {
        assert_eq!(counter.get(op), 0, "{op:?} sent: {counter:?}");
    }
    assert_eq!(balance(&store, "t").await, 100);
    assert!(
        store
            .table::<Entry>()
            .get("t", "e1")
            .await
            .unwrap()
            .is_none()
    );
    assert!(!is_held(&store, "t").await);
}

/// Abandoning a unit one of whose leases ran out (broken by an operator)
/// is `LeaseLost`; its other lock is released all the same.
#[tokio::test(start_paused = true)]
async fn abandoning_after_a_lease_ran_out_is_lease_lost_and_releases_the_others() {
    let backend = memory();
    let store = store_on(backend.clone());
    let unit = store.lock_many(["a", "b"]).await.unwrap();
    let name = store.lock_lease_name("a").unwrap();
    store
        .locks()
        .break_lease(name.as_str(), Some(Duration::ZERO))
        .await
        .unwrap();
    sleep(LEASE / 3 + Duration::from_secs(1)).await;
    let e = unit.abandon().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LeaseLost, "{e}");
    assert!(!is_held(&store, "b").await, "released all the same");
    let other = store_on(backend);
    let b = other.try_lock("b").await.unwrap().expect("b is free");
    b.abandon().await.unwrap();
}

/// Abandoning a unit whose release keeps failing is `Transient`; the lock
/// stays taken until its lease expires on its own.
#[tokio::test(start_paused = true)]
async fn an_abandon_that_cannot_release_is_transient_and_the_lease_expires() {
    let (store, faults) = faulty_store(&memory());
    let unit = store.lock("r").await.unwrap();
    fail_next(&faults, Op::ReleaseLease, 3);
    let e = unit.abandon().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transient, "{e}");
    assert!(is_held(&store, "r").await, "not released");
    sleep(LEASE + Duration::from_secs(1)).await;
    assert!(!is_held(&store, "r").await, "expired on its own");
    store.lock("r").await.unwrap().abandon().await.unwrap();
}
