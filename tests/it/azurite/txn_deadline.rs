//! A transaction's commit point that the service applied, whose reply is
//! lost shortly before the time-to-live of the transaction's marks runs
//! out, so that the Azure backend's next try (the read-back of the rows, or
//! the batch sent again) falls after the commit's send deadline.
//!
//! The commit point was sent and applied: the decision row says committed
//! and the primary's own writes (riding in the commit point) are stored.
//! The refused next try comes back as `LeaseLost` ("not sent"), which the
//! commit takes for a commit point that never went out: it takes its marks
//! off the other rows and answers a conflict, nothing applied. The primary's
//! writes stay, the other partitions' are dropped: money is not conserved.
//! Found by the `txn` mode of the torture run (a worker stopped with SIGSTOP
//! while its commit point was in flight, its next try after the 5 s request
//! timeout); reduced to this case. The commit now settles a refused next
//! try through its decision row, as it does a lost reply, and its answer
//! agrees with what is stored.

use std::time::Duration;

use leasehold::backend::azure::AzureBackend;
use leasehold::testing::{Fault, FaultInjector};
use leasehold::txn::TransactionOptions;
use leasehold::{Entity, ErrorKind, Store};

use crate::support::azurite::azurite_connection_string;

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "DeadlineAccounts")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    balance: i64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_point_applied_whose_next_try_falls_after_the_deadline_is_not_withdrawn() {
    let Some(cs) = azurite_connection_string() else {
        return;
    };
    let plan = FaultInjector::default();
    let backend = AzureBackend::builder()
        .connection_string(&cs)
        .expect("connection string")
        .policy(plan.transport_policy())
        .build()
        .expect("backend");
    let id = uuid::Uuid::new_v4().simple().to_string();
    let store = Store::builder(backend)
        .table_prefix(format!("d{}", &id[..10]))
        .expect("prefix")
        .build()
        .expect("store");
    let accounts = store.table::<Account>();
    for c in ["a", "b"] {
        accounts
            .insert(Account {
                customer: c.into(),
                name: "main".into(),
                balance: 100,
            })
            .await
            .expect("opening balance");
    }
    let ttl = Duration::from_millis(1_000);
    let mut tx = store.transaction_with(
        &TransactionOptions::new()
            .with_time_to_live(ttl)
            .expect("ttl"),
    );
    let mut a = tx
        .get::<Account>("a", "main")
        .await
        .expect("read")
        .expect("a");
    let mut b = tx
        .get::<Account>("b", "main")
        .await
        .expect("read")
        .expect("b");
    a.balance -= 10;
    b.balance += 10;
    tx.replace(&a).expect("stage");
    tx.replace(&b).expect("stage");
    // The marking batch (b's mark) is signed at once and lands 900 ms
    // later, so 1 s after the marks the commit point still goes out; it is
    // applied and its reply lost; the backend's next try comes after the
    // deadline.
    plan.inject_request("POST", "$batch", Fault::Delay(ttl * 9 / 10));
    plan.inject_request("POST", "$batch", Fault::LoseReply);
    let answer = tx.commit().await;
    assert_eq!(plan.pending(), 0, "both faults fired");
    let balance = |c: &'static str| {
        let accounts = accounts.clone();
        async move {
            accounts
                .get(c, "main")
                .await
                .expect("read")
                .expect("row")
                .balance
        }
    };
    let stored = (balance("a").await, balance("b").await);
    match &answer {
        Ok(_) => assert_eq!(stored, (90, 110), "answered Ok"),
        Err(e) if e.kind() == ErrorKind::InDoubt => {
            assert!(stored == (90, 110) || stored == (100, 100), "{stored:?}")
        }
        Err(e) => assert_eq!(
            stored,
            (100, 100),
            "answered {:?} ({e}), nothing applied, but the balances are {stored:?}",
            e.kind()
        ),
    }
}
