//! What operators see of a partition's commits
//! ([`Store::list_commits`](leasehold::Store::list_commits)): the decided
//! and undecided commits whose writers stopped half-way, with the rows
//! each still marks, as reads and `commit_outcome` settle them.

use std::sync::Arc;
use std::time::Duration;

use leasehold::backend::Backend;
use leasehold::backend::Op;
use leasehold::lease::LeaseOptions;
use leasehold::lock::{CommitOutcome, CommitSummary};
use leasehold::testing::{CountingBackend, FaultInjector, FaultyBackend};
use leasehold::{Entity, Error, PartitionKey, Store};

use super::Ctx;

crate::checks::checks! {

/// A customer's account.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "CommitAccounts")]
struct Account {
    #[entity(partition_key)]
    pub customer: String,
    #[entity(row_key)]
    pub name: String,
    pub balance: i64,
}

/// A ledger entry: a second table, so that a unit writing both decides
/// in a row (its account rides in the commit point, its entries are
/// marked first).
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "CommitLedger")]
struct Entry {
    #[entity(partition_key)]
    pub customer: String,
    #[entity(row_key)]
    pub id: String,
    pub amount: i64,
}

/// A store ("process") on `backend` with the given table prefix, its locks
/// lasting the context's lease duration.
fn process(ctx: &Ctx, backend: Arc<dyn Backend>, prefix: &str) -> Store {
    Store::builder_shared(backend)
        .table_prefix(prefix)
        .expect("valid prefix")
        .lease_options(LeaseOptions::new().with_duration(ctx.lease_duration()))
        .build()
        .expect("valid store")
}

/// A process on the context's backend that can be made to die.
fn dying(ctx: &Ctx, prefix: &str) -> (Store, FaultInjector) {
    let faulty = FaultyBackend::new(ctx.backend().clone());
    let injector = faulty.injector();
    (process(ctx, Arc::new(faulty), prefix), injector)
}

/// Adds 1 to `customer`'s account and inserts ledger entries `ids` of
/// partition `p` in one unit of `store` (over both partitions), its
/// process dying just before its `die_at`-th transaction. Answers whether
/// the commit said it applied, its transaction id (from the report or the
/// error) and its primary partition.
async fn stopped(
    store: &Store,
    injector: &FaultInjector,
    customer: &str,
    ids: &[&str],
    die_at: u64,
) -> (bool, String, PartitionKey) {
    let keys = if customer == "p" {
        vec!["p"]
    } else {
        vec![customer, "p"]
    };
    let mut unit = store.lock_many(keys).await.expect("lock");
    let mut account = unit
        .get_in::<Account>(customer, "main")
        .await
        .expect("read")
        .expect("account");
    account.balance += 1;
    unit.replace(&account).expect("staged");
    for id in ids {
        unit.insert(&Entry {
            customer: "p".into(),
            id: (*id).into(),
            amount: 1,
        })
        .expect("staged");
    }
    injector.die_at_nth(Some(Op::Batch), die_at);
    match unit.commit().await {
        Ok(report) => {
            let txn = report.transaction.expect("decided in a row");
            (true, txn, PartitionKey::new(customer).expect("key"))
        }
        Err(Error::InDoubt {
            primary,
            transaction: Some(txn),
            ..
        }) => (false, txn, primary),
        Err(e) => panic!("the writer died before its commit point was known: {e:?}"),
    }
}

/// The summary of transaction `txn` in `listed`.
fn of<'a>(listed: &'a [CommitSummary], txn: &str) -> &'a CommitSummary {
    listed
        .iter()
        .find(|c| c.transaction == txn)
        .unwrap_or_else(|| panic!("{txn} is listed: {listed:#?}"))
}

/// The marked rows of `commit`, by table name without `prefix`.
fn marks(commit: &CommitSummary, prefix: &str) -> Vec<(String, usize)> {
    commit
        .marked_rows
        .iter()
        .map(|(t, n)| (t.as_str().trim_start_matches(prefix).to_owned(), *n))
        .collect()
}

/// Three writers stop half-way in partition `p`: one after its commit
/// point (committed, its ledger entry left marked), one that a reader
/// withdrew once its lease ran out (one of its two entries still marked),
/// one before its commit point whose primary is another partition
/// (undecided). `list_commits("p")` names all three with their state,
/// decision row and marks left, in one query per table and one read for
/// the commit decided elsewhere, writing nothing; once `commit_outcome`
/// and reads settle them it shows no marks, and after a prune only the
/// withdrawal kept for a late commit point.
timed async fn a_partitions_decided_and_undecided_commits_are_listed(ctx) {
    let prefix = format!("{}cl", ctx.prefix());
    let healthy = process(ctx, ctx.backend().clone(), &prefix);
    for c in ["a", "p"] {
        healthy
            .table::<Account>()
            .upsert(Account {
                customer: c.into(),
                name: "main".into(),
                balance: 0,
            })
            .await
            .expect("open account");
    }
    healthy.create_table("CommitLedger").await.expect("table");
    assert!(healthy.list_commits("p").await.unwrap().is_empty());

    // Withdrawn: dies at its commit point (entries w1 and w2 marked); a
    // read of w1 waits for the lease to run out and withdraws it.
    let (store, injector) = dying(ctx, &prefix);
    let (said, withdrawn, primary) = stopped(&store, &injector, "p", &["w1", "w2"], 2).await;
    assert!(
        !said && primary.as_str() == "p",
        "in doubt, primary {primary:?}"
    );
    drop(store);
    let ledger = healthy.table::<Entry>();
    assert_eq!(ledger.get("p", "w1").await.expect("withdrawn"), None);
    // Committed: dies after its commit point, entry c1 left marked.
    let (store, injector) = dying(ctx, &prefix);
    let (said, committed, _) = stopped(&store, &injector, "p", &["c1"], 3).await;
    assert!(said, "applied at its commit point");
    drop(store);
    // Undecided: primary `a`, dies at its commit point, u1 left marked.
    let (store, injector) = dying(ctx, &prefix);
    let (said, undecided, primary) = stopped(&store, &injector, "a", &["u1"], 2).await;
    assert!(
        !said && primary.as_str() == "a",
        "in doubt, primary {primary:?}"
    );
    drop(store);

    let counting = CountingBackend::new(ctx.backend().clone());
    let counter = counting.counter();
    let counted = process(ctx, Arc::new(counting), &prefix);
    let listed = counted.list_commits("p").await.expect("listed");
    assert_eq!(listed.len(), 3, "{listed:#?}");
    let accounts = format!("{prefix}CommitAccounts");
    for (txn, state, primary) in [
        (&withdrawn, Some(CommitOutcome::NotApplied), "p"),
        (&committed, Some(CommitOutcome::Applied), "p"),
        (&undecided, None, "a"),
    ] {
        let c = of(&listed, txn);
        assert_eq!(
            (c.outcome, c.primary.as_str(), c.decision_table.as_str()),
            (state, primary, accounts.as_str()),
            "{c:#?}"
        );
        assert_eq!(
            marks(c, &prefix),
            [("CommitLedger".to_owned(), 1)],
            "{c:#?}"
        );
    }
    assert!(
        listed.windows(2).all(|w| w[0].since <= w[1].since),
        "oldest first: {listed:#?}"
    );
    // Two tables: one query each, and the undecided commit's decision row
    // looked for in `a`. Nothing written.
    let sent = counter.snapshot().into_iter().collect::<Vec<_>>();
    assert_eq!(
        sent,
        [(Op::ListTables, 1), (Op::Get, 1), (Op::Query, 2)],
        "{sent:?}"
    );

    // `locks decide` withdraws the undecided commit; its mark stays.
    assert_eq!(
        healthy.commit_outcome("a", &undecided).await.unwrap(),
        CommitOutcome::NotApplied
    );
    let listed = healthy.list_commits("p").await.unwrap();
    let c = of(&listed, &undecided);
    assert_eq!(c.outcome, Some(CommitOutcome::NotApplied), "{c:#?}");
    assert_eq!(marks(c, &prefix), [("CommitLedger".to_owned(), 1)]);

    // Reads finish or take off every mark left.
    assert_eq!(
        ledger.get("p", "c1").await.unwrap().map(|e| e.amount),
        Some(1)
    );
    assert_eq!(ledger.get("p", "w2").await.unwrap(), None);
    assert_eq!(ledger.get("p", "u1").await.unwrap(), None);
    let listed = healthy.list_commits("p").await.unwrap();
    assert_eq!(listed.len(), 2, "u1's commit decides in `a`: {listed:#?}");
    assert!(
        listed.iter().all(|c| c.marked_rows.is_empty()),
        "{listed:#?}"
    );
    assert_eq!(
        of(&listed, &committed).outcome,
        Some(CommitOutcome::Applied)
    );
    assert_eq!(
        of(&listed, &withdrawn).outcome,
        Some(CommitOutcome::NotApplied)
    );
    let in_a = healthy.list_commits("a").await.unwrap();
    assert_eq!(
        of(&in_a, &undecided).outcome,
        Some(CommitOutcome::NotApplied)
    );

    // The sweep keeps both while they are young: the finished commit's
    // for `commit_outcome`, the withdrawal while a late commit point could
    // land; an hour on, it removes both (and the withdrawal of the commit
    // undecided in `a`).
    let report = super::sweep(&healthy, Duration::ZERO, false).await.unwrap();
    assert_eq!(report.decision_rows, 0, "{report:?}");
    assert_eq!(healthy.list_commits("p").await.unwrap().len(), 2);
    let later = super::PAST_DECISIONS_KEPT;
    let report = super::sweep_later(&healthy, Duration::ZERO, later, false)
        .await
        .unwrap();
    assert_eq!(report.decision_rows, 3, "{report:?}");
    let listed = healthy.list_commits("p").await.unwrap();
    assert!(listed.is_empty(), "{listed:#?}");
}

/// `commit_outcome` never guesses: a transaction begun (by its id) longer
/// ago than a committed decision row is kept, whose decision row is gone,
/// is `NotFound` — a sweep may have removed its decision — and nothing is
/// written; a young one without a decision is withdrawn
/// (`NotApplied`), its decision row written so.
timed async fn commit_outcome_does_not_guess_once_a_decision_may_be_swept(ctx) {
    use leasehold::ErrorKind;
    let prefix = format!("{}co", ctx.prefix());
    let store = process(ctx, ctx.backend().clone(), &prefix);
    store.create_table("CommitsOld").await.unwrap();
    let v7 = |ago: Duration| {
        let at = std::time::SystemTime::now() - ago;
        let since = at.duration_since(std::time::UNIX_EPOCH).unwrap();
        let ts = uuid::Timestamp::from_unix(uuid::NoContext, since.as_secs(), since.subsec_nanos());
        format!("{}.{prefix}CommitsOld", uuid::Uuid::new_v7(ts).simple())
    };
    let old = v7(Duration::from_secs(2 * 3600));
    let e = store.commit_outcome("p", &old).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    assert!(e.to_string().contains(&old), "{e}");
    assert!(
        store.list_commits("p").await.unwrap().is_empty(),
        "nothing written"
    );
    let young = v7(Duration::from_secs(60));
    assert_eq!(
        store.commit_outcome("p", &young).await.unwrap(),
        CommitOutcome::NotApplied
    );
    let listed = store.list_commits("p").await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:#?}");
    assert_eq!(listed[0].transaction, young);
    assert_eq!(listed[0].outcome, Some(CommitOutcome::NotApplied));
}
}
