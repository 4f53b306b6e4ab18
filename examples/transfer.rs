//! Moving money between two accounts of one customer, atomically, under the
//! customer's partition lock: the balances live in an `Accounts` table and
//! every transfer leaves an entry in a `Ledger` table. The commit touches two
//! tables, so it decides in a row: the ledger entry is marked first, then the
//! accounts and the decision row go in one transaction. If the process died
//! half-way, whoever read the ledger entry next would finish (or withdraw)
//! it, so nobody ever sees half a transfer.
//!
//! Several workers transfer concurrently; at the end the total is unchanged
//! and the ledger holds one entry per transfer.
//!
//! Runs on the embedded memory backend; set `AZURE_STORAGE_CONNECTION_STRING`
//! to run against Azure Storage or Azurite.
//!
//! ```text
//! cargo run --example transfer
//! ```

use leasehold::{Entity, Error, Store};

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Accounts")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    balance: i64,
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Ledger")]
struct LedgerEntry {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    id: String,
    from: String,
    to: String,
    amount: i64,
}

/// Why a transfer did not happen.
#[derive(Debug)]
enum Refused {
    InsufficientFunds { balance: i64, amount: i64 },
}

/// Moves `amount` from one account to another of the same customer.
async fn transfer(
    store: &Store,
    customer: &str,
    from: &str,
    to: &str,
    amount: i64,
    id: &str,
) -> Result<Result<(), Refused>, Error> {
    // Everything of this customer is ours until commit (or drop).
    let mut unit = store.lock(customer).await?;
    let mut source = unit
        .get::<Account>(from)
        .await?
        .expect("source account exists");
    let mut target = unit
        .get::<Account>(to)
        .await?
        .expect("target account exists");
    if source.balance < amount {
        // Dropping the unit sends nothing and frees the lock.
        return Ok(Err(Refused::InsufficientFunds {
            balance: source.balance,
            amount,
        }));
    }
    source.balance -= amount;
    target.balance += amount;
    unit.replace(&source)?;
    unit.replace(&target)?;
    unit.insert(&LedgerEntry {
        customer: customer.into(),
        id: id.into(),
        from: from.into(),
        to: to.into(),
        amount,
    })?;
    let report = unit.commit().await?;
    debug_assert!(report.transaction.is_some(), "two tables decide in a row");
    Ok(Ok(()))
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let store = match std::env::var("AZURE_STORAGE_CONNECTION_STRING") {
        Ok(_) => Store::from_env()?,
        Err(_) => Store::memory(),
    };
    let customer = format!("customer-{}", uuid::Uuid::new_v4().simple());
    let accounts = store.table::<Account>();
    for (name, balance) in [("checking", 500), ("savings", 1_000), ("holiday", 0)] {
        accounts
            .insert(Account {
                customer: customer.clone(),
                name: name.into(),
                balance,
            })
            .await?;
    }

    // Four workers, ten transfers each, all on the same partition: the lock
    // serialises them (handing the lease from one to the next inside this
    // process instead of releasing and re-acquiring it).
    let names = ["checking", "savings", "holiday"];
    let mut workers = Vec::new();
    for w in 0..4usize {
        let store = store.clone();
        let customer = customer.clone();
        workers.push(tokio::spawn(async move {
            let mut done = 0;
            let mut refused = 0;
            for i in 0..10usize {
                let from = names[(w + i) % 3];
                let to = names[(w + i + 1) % 3];
                let amount = 10 + 5 * ((w + i) as i64 % 4);
                match transfer(&store, &customer, from, to, amount, &format!("w{w}-{i}")).await? {
                    Ok(()) => done += 1,
                    Err(Refused::InsufficientFunds { balance, amount }) => {
                        println!("refused: {amount} requested, {balance} available");
                        refused += 1;
                    }
                }
            }
            Ok::<_, Error>((done, refused))
        }));
    }
    let mut done = 0;
    let mut refused = 0;
    for worker in workers {
        let (d, r) = worker.await.expect("worker")?;
        done += d;
        refused += r;
    }

    let balances = accounts.query().partition(&customer).all().await?;
    let total: i64 = balances.iter().map(|a| a.balance).sum();
    let ledger = store
        .table::<LedgerEntry>()
        .query()
        .partition(&customer)
        .all()
        .await?;
    for a in &balances {
        println!("{:>8}: {}", a.name, a.balance);
    }
    println!(
        "{done} transfers committed, {refused} refused, {} ledger entries",
        ledger.len()
    );
    assert_eq!(total, 1_500, "money is conserved");
    assert_eq!(
        ledger.len(),
        done,
        "one ledger entry per committed transfer"
    );
    println!("total is still {total}");
    Ok(())
}
