//! Every error says each fact once: real errors of every variant, produced
//! through the public API on the memory backend, rendered with `Display`
//! and checked for repeated phrases, repeated error codes and repeated
//! kinds (`lease lost: … lease lost`).

use leasehold::backend::WriteOptions;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use leasehold::backend::Op;
use leasehold::backend::memory::MemoryBackend;
use leasehold::backend::{BlobBackend, BlobConditions, LeaseDuration, LeaseId, Metadata};
use leasehold::backend::{Precondition, TableBackend, TableOp};
use leasehold::entity::{EntityData, Properties, Value};
use leasehold::lease::{LeaseManager, LeaseName, LeaseOptions};
use leasehold::testing::FaultyBackend;
use leasehold::{Entity, Error, ErrorKind, PartitionKey, RowKey, Store, TableName};
use tokio::time::sleep;

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Orders")]
struct Order {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    id: String,
    status: String,
}

/// The same table read with another type for `status`.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Orders")]
struct OrderWithCode {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    id: String,
    status: i64,
}

fn order(id: &str, status: &str) -> Order {
    Order {
        customer: "alice".into(),
        id: id.into(),
        status: status.into(),
    }
}

/// The words of `text` (lower case, outer punctuation trimmed).
fn words(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// What `text` says more than once: a phrase of three words or more, a
/// service error code (`LeaseIsBrokenAndCannotBeRenewed`), or the name of
/// an error kind.
fn repeats(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let words = words(text);
    let mut phrases: HashMap<String, usize> = HashMap::new();
    for (at, phrase) in words.windows(3).enumerate() {
        let phrase = phrase.join(" ");
        match phrases.get(&phrase) {
            // Overlapping windows of one run of a repeated word are no
            // repeat of a phrase.
            Some(first) if at >= first + 3 => found.push(format!("phrase {phrase:?}")),
            Some(_) => {}
            None => {
                phrases.insert(phrase, at);
            }
        }
    }
    let mut codes: BTreeMap<&str, usize> = BTreeMap::new();
    for token in text.split(|c: char| !c.is_ascii_alphanumeric()) {
        let capitals = token.chars().filter(char::is_ascii_uppercase).count();
        if capitals >= 2 && token.starts_with(|c: char| c.is_ascii_uppercase()) {
            *codes.entry(token).or_default() += 1;
        }
    }
    found.extend(
        codes
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .map(|(code, n)| format!("code {code} {n} times")),
    );
    let lower = text.to_lowercase();
    for kind in [
        "not found",
        "already exists",
        "conflict",
        "lease held",
        "lease lost",
        "timed out",
        "invalid",
        "cannot decode",
        "inconsistent",
        "transient",
        "storage service error",
        "unavailable",
    ] {
        let n = lower.matches(kind).count();
        if n > 1 {
            found.push(format!("kind {kind:?} {n} times"));
        }
    }
    found
}

#[test]
fn the_repeat_checker_finds_what_the_issue_quoted() {
    let quoted = "lease lost: lease nightly-report: renewal refused: lease lost: lease on blob \
                  leasehold-leases/nightly-report (LeaseIsBrokenAndCannotBeRenewed) \
                  (LeaseIsBrokenAndCannotBeRenewed)";
    let found = repeats(quoted);
    assert!(
        found.iter().any(|f| f.starts_with("code LeaseIsBroken")),
        "{found:?}"
    );
    assert!(found.iter().any(|f| f.contains("lease lost")), "{found:?}");
    assert!(repeats("a b c d a b c").iter().any(|f| f.contains("a b c")));
    assert!(repeats("lease lost: lease x (LeaseLost)").is_empty());
}

#[tokio::test(start_paused = true)]
async fn errors_of_every_variant_say_each_fact_once() {
    let faulty = FaultyBackend::new(MemoryBackend::new());
    let faults = faulty.injector();
    let backend: Arc<FaultyBackend<MemoryBackend>> = Arc::new(faulty);
    let store = Store::builder_shared(backend.clone()).build().unwrap();
    let orders = store.table::<Order>();
    let mut errors: Vec<(&str, Error)> = Vec::new();

    // Table errors.
    let placed = orders.insert(order("o1", "placed")).await.unwrap();
    errors.push((
        "AlreadyExists",
        orders.insert(order("o1", "placed")).await.unwrap_err(),
    ));
    orders.upsert(order("o1", "paid")).await.unwrap();
    errors.push(("Conflict", orders.replace(&placed).await.unwrap_err()));
    let gone = orders.get("alice", "o1").await.unwrap().unwrap();
    orders.delete(&gone).await.unwrap();
    errors.push(("NotFound", orders.delete(&gone).await.unwrap_err()));
    let existing = orders.insert(order("o2", "placed")).await.unwrap();
    let _ = existing;
    errors.push((
        "Batch",
        orders
            .batch()
            .insert(order("o3", "placed"))
            .insert(order("o2", "placed"))
            .commit()
            .await
            .unwrap_err(),
    ));
    errors.push(("Invalid", orders.get("alice/bob", "o1").await.unwrap_err()));
    errors.push((
        "Decode",
        store
            .table::<OrderWithCode>()
            .get("alice", "o2")
            .await
            .unwrap_err(),
    ));
    let table = TableName::new("Orders").unwrap();
    let many = |prefix: &str, n: i32| EntityData {
        partition_key: PartitionKey::new("alice").unwrap(),
        row_key: RowKey::new("o2").unwrap(),
        properties: (0..n)
            .map(|i| (format!("{prefix}{i}"), Value::Int32(i)))
            .collect::<Properties>(),
    };
    backend
        .execute(
            &table,
            TableOp::Merge(many("a", 200), Precondition::IfExists),
            &WriteOptions::new(),
        )
        .await
        .unwrap();
    errors.push((
        "Backend",
        backend
            .execute(
                &table,
                TableOp::Merge(many("b", 100), Precondition::IfExists),
                &WriteOptions::new(),
            )
            .await
            .unwrap_err(),
    ));
    faults.fail_nth(Some(Op::Get), 1);
    errors.push(("Transient", orders.get("alice", "o2").await.unwrap_err()));

    // Lease errors.
    let leases = store.leases();
    let guard = leases
        .acquire("nightly-report", Duration::from_secs(1))
        .await
        .unwrap();
    errors.push((
        "Timeout",
        leases
            .acquire("nightly-report", Duration::from_secs(1))
            .await
            .unwrap_err(),
    ));
    let unit = store.lock("alice").await.unwrap();
    errors.push((
        "Timeout",
        store
            .lock_with_timeout("alice", Duration::from_secs(1))
            .await
            .map(drop)
            .unwrap_err(),
    ));
    drop(unit);
    let blob = LeaseName::new("nightly-report")
        .unwrap()
        .blob_name()
        .unwrap();
    errors.push((
        "LeaseHeld",
        backend
            .lease(
                leases.container(),
                &blob,
                leasehold::backend::LeaseAction::Acquire {
                    duration: LeaseDuration::Seconds(30),
                    proposed: LeaseId::new_random(),
                },
            )
            .await
            .unwrap_err(),
    ));
    errors.push((
        "LeaseHeld",
        backend
            .put_blob(
                leases.container(),
                &blob,
                Vec::new(),
                &Metadata::new(),
                &BlobConditions::none(),
            )
            .await
            .unwrap_err(),
    ));
    // An operator breaks the lease; the holder's renewal is refused.
    backend
        .lease(
            leases.container(),
            &blob,
            leasehold::backend::LeaseAction::Break {
                period: Some(Duration::ZERO),
            },
        )
        .await
        .unwrap();
    sleep(Duration::from_secs(11)).await;
    assert!(guard.is_lost());
    errors.push(("LeaseLost", guard.ensure_valid(Duration::ZERO).unwrap_err()));
    errors.push(("LeaseLost", guard.release().await.unwrap_err()));
    // A write under a lease broken since the last renewal.
    let guard = leases
        .acquire("weekly-report", Duration::from_secs(1))
        .await
        .unwrap();
    let blob = LeaseName::new("weekly-report")
        .unwrap()
        .blob_name()
        .unwrap();
    backend
        .lease(
            leases.container(),
            &blob,
            leasehold::backend::LeaseAction::Break {
                period: Some(Duration::ZERO),
            },
        )
        .await
        .unwrap();
    errors.push(("LeaseLost", guard.advance_epoch().await.unwrap_err()));
    errors.push(("LeaseLost", guard.release().await.unwrap_err()));

    // A decision row that does not say committed or withdrawn (written by
    // something other than leasehold).
    store.create_table("Decided").await.unwrap();
    let decided = TableName::new(format!("{}Decided", store.table_prefix())).unwrap();
    let mut properties = Properties::new();
    properties.insert("_lhDecision", Value::String("maybe".into()));
    backend
        .execute(
            &decided,
            TableOp::Insert(EntityData {
                partition_key: PartitionKey::new("bob").unwrap(),
                row_key: RowKey::new("_lhCommit.0f1e").unwrap(),
                properties,
            }),
            &WriteOptions::new(),
        )
        .await
        .unwrap();
    errors.push((
        "Inconsistent",
        store
            .commit_outcome("bob", &format!("0f1e.{}", decided.as_str()))
            .await
            .unwrap_err(),
    ));

    // Storage that keeps failing.
    let dead = FaultyBackend::new(MemoryBackend::new());
    dead.injector().die_now();
    let dead = LeaseManager::new(
        Arc::new(dead),
        LeaseOptions::new().with_unavailable_after(Duration::from_secs(5)),
    )
    .unwrap();
    errors.push((
        "Unavailable",
        dead.try_acquire("nightly-report").await.unwrap_err(),
    ));

    let mut kinds: Vec<ErrorKind> = Vec::new();
    let mut failures = Vec::new();
    for (expected, e) in &errors {
        assert_eq!(format!("{:?}", e.kind()), *expected, "{e}");
        kinds.push(e.kind());
        let text = e.to_string();
        println!("{expected}: {text}");
        let found = repeats(&text);
        if !found.is_empty() {
            failures.push(format!("{text}\n    repeats {found:?}"));
        }
    }
    for kind in [
        ErrorKind::NotFound,
        ErrorKind::AlreadyExists,
        ErrorKind::Conflict,
        ErrorKind::LeaseHeld,
        ErrorKind::LeaseLost,
        ErrorKind::Timeout,
        ErrorKind::Batch,
        ErrorKind::Invalid,
        ErrorKind::Decode,
        ErrorKind::Inconsistent,
        ErrorKind::Transient,
        ErrorKind::Backend,
        ErrorKind::Unavailable,
    ] {
        assert!(kinds.contains(&kind), "no {kind:?} error was produced");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Errors about one row carry the table and the row's keys as fields, also
/// through a batch; a status error keeps its status and code; `source()`
/// chains to the failure beneath.
#[tokio::test(start_paused = true)]
async fn errors_name_their_row_and_keep_their_cause() {
    use leasehold::testing::Fault;
    use std::error::Error as _;

    let faulty = FaultyBackend::new(MemoryBackend::new());
    let faults = faulty.injector();
    let store = Store::new(faulty);
    let orders = store.table::<Order>();
    let keys = |e: &Error| {
        e.row()
            .map(|(pk, rk)| (pk.as_str().to_owned(), rk.as_str().to_owned()))
    };
    let at = |id: &str| Some(("alice".to_owned(), id.to_owned()));

    let placed = orders.insert(order("o1", "placed")).await.unwrap();
    let e = orders.insert(order("o1", "placed")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AlreadyExists);
    assert_eq!((e.table(), keys(&e)), (Some("Orders"), at("o1")), "{e:?}");
    assert!(
        matches!(&e, Error::AlreadyExists { table: Some(t), row: Some(_), .. } if t == "Orders")
    );

    orders.upsert(order("o1", "paid")).await.unwrap();
    let e = orders.replace(&placed).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict);
    assert_eq!((e.table(), keys(&e)), (Some("Orders"), at("o1")), "{e:?}");

    let gone = orders.get("alice", "o1").await.unwrap().unwrap();
    orders.delete(&gone).await.unwrap();
    let e = orders.delete(&gone).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert_eq!((e.table(), keys(&e)), (Some("Orders"), at("o1")), "{e:?}");
    let e = orders
        .update_with("alice", "o9", |o| o.status = "x".into())
        .await
        .unwrap_err();
    assert_eq!((e.table(), keys(&e)), (Some("Orders"), at("o9")), "{e:?}");

    // Through a batch: the failing operation's row, and source() is it.
    orders.insert(order("o2", "placed")).await.unwrap();
    let e = orders
        .batch()
        .insert(order("o3", "placed"))
        .insert(order("o2", "placed"))
        .commit()
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Batch);
    assert_eq!(keys(&e), at("o2"), "{e:?}");
    let inner = e.source().expect("a batch error has a source");
    let inner = inner
        .downcast_ref::<Error>()
        .expect("the operation's error");
    assert_eq!(inner.kind(), ErrorKind::AlreadyExists);
    assert_eq!(inner.code(), Some("EntityAlreadyExists"));

    // A missing table is about the table, not a row.
    let missing = TableName::new("NoSuchTable").unwrap();
    let e = store
        .backend()
        .get(&missing, &"p".parse().unwrap(), &"r".parse().unwrap())
        .await
        .unwrap_err();
    assert_eq!((e.table(), e.row()), (Some("NoSuchTable"), None), "{e:?}");

    // A throttled read: transient, with the status kept.
    faults.inject(Some(Op::Get), 1, Fault::Status(503));
    let e = orders.get("alice", "o2").await.unwrap_err();
    assert!(e.is_transient(), "{e:?}");
    assert_eq!(e.status(), Some(503));
    assert!(matches!(
        e,
        Error::Transient {
            status: Some(503),
            ..
        }
    ));
    // A request that got no reply has no status.
    faults.fail_nth(Some(Op::Get), 1);
    let e = orders.get("alice", "o2").await.unwrap_err();
    assert!(matches!(e, Error::Transient { status: None, .. }), "{e:?}");
    assert_eq!((e.status(), e.table()), (None, None));
}

/// A failure found on the client side has no HTTP status (no `0`
/// stand-in) and says so; a status error says its status.
#[test]
fn backend_errors_without_a_status_read_well() {
    let e = Error::Backend {
        status: None,
        code: None,
        message: "the reply makes no sense".into(),
        source: Some("underlying".into()),
    };
    assert_eq!(e.to_string(), "storage error: the reply makes no sense");
    assert_eq!(e.status(), None);
    assert_eq!(
        std::error::Error::source(&e).map(|s| s.to_string()),
        Some("underlying".to_owned())
    );
    let e = Error::Backend {
        status: Some(400),
        code: Some("InvalidInput".into()),
        message: "x".into(),
        source: None,
    };
    assert_eq!(e.to_string(), "storage service error 400 (InvalidInput): x");
    assert_eq!(e.status(), Some(400));
}

/// An application error holding leasehold's errors, as a program built on
/// leasehold would have.
#[derive(Debug)]
enum ShopError {
    AlreadyShipped(String),
    Storage(Error),
}

impl From<Error> for ShopError {
    fn from(e: Error) -> Self {
        ShopError::Storage(e)
    }
}

/// `UpdateError::flatten` gives the function's own error whichever way the
/// update ended, so one `map_err(…)?` returns it.
async fn cancel_order(orders: &leasehold::Table<Order>, id: &str) -> Result<(), ShopError> {
    orders
        .try_update_with("alice", id, |o| {
            if o.status == "shipped" {
                return Err(ShopError::AlreadyShipped(o.id.clone()));
            }
            o.status = "cancelled".into();
            Ok(())
        })
        .await
        .map_err(leasehold::table::UpdateError::flatten)?;
    Ok(())
}

/// With leasehold's own error as the function's error, `flatten` works the
/// same.
async fn ship_order(orders: &leasehold::Table<Order>, id: &str) -> leasehold::Result<()> {
    orders
        .try_update_with("alice", id, |o| {
            if o.status == "cancelled" {
                return Err(Error::invalid(
                    format!("shipping order {:?}", o.id),
                    "it was cancelled",
                ));
            }
            o.status = "shipped".into();
            Ok(())
        })
        .await
        .map_err(leasehold::table::UpdateError::flatten)?;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn update_errors_convert_into_the_callers_error_with_one_question_mark() {
    let orders = Store::memory().table::<Order>();
    orders.insert(order("o1", "new")).await.unwrap();
    orders.insert(order("o2", "new")).await.unwrap();

    // The caller's own error type: refusals come back as themselves,
    // failures through `From<leasehold::Error>`.
    ship_order(&orders, "o1").await.unwrap();
    match cancel_order(&orders, "o1").await {
        Err(ShopError::AlreadyShipped(id)) => assert_eq!(id, "o1"),
        other => panic!("{other:?}"),
    }
    match cancel_order(&orders, "missing").await {
        Err(ShopError::Storage(e)) => assert_eq!(e.kind(), ErrorKind::NotFound, "{e}"),
        other => panic!("{other:?}"),
    }
    cancel_order(&orders, "o2").await.unwrap();
    assert_eq!(
        orders.get("alice", "o2").await.unwrap().unwrap().status,
        "cancelled"
    );

    // leasehold's own error type: the refusal is the error the update
    // function made, and nothing was written.
    let e = ship_order(&orders, "o2").await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);
    assert_eq!(
        e.to_string(),
        "invalid shipping order \"o2\": it was cancelled"
    );
    assert_eq!(
        orders.get("alice", "o2").await.unwrap().unwrap().status,
        "cancelled"
    );
    let e = ship_order(&orders, "missing").await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Members")]
struct Member {
    #[entity(partition_key)]
    club: String,
    #[entity(row_key)]
    id: String,
    #[entity(unique)]
    email: String,
}

/// A layer on a memory backend: a member's row is read 5 ms late, and its
/// e-mail changes just before each write of it (written straight to
/// storage, as a writer ignoring the locks would).
#[derive(Debug)]
struct MovingEmails {
    storage: MemoryBackend,
    moves: std::sync::atomic::AtomicU64,
}

impl leasehold::backend::Layer for MovingEmails {
    async fn call<T: Send>(
        &self,
        request: &leasehold::backend::Request<'_>,
        next: impl std::future::Future<Output = leasehold::Result<T>> + Send,
    ) -> leasehold::Result<T> {
        let member = request.table().filter(|t| t.as_str().ends_with("Members"));
        let row = request.partition_key().zip(request.row_key());
        if let (Some(table), Some((pk, rk))) = (member, row)
            && rk.as_str() == "m1"
        {
            match request.op() {
                Op::Get => sleep(Duration::from_millis(5)).await,
                Op::Write => {
                    let n = self.moves.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let mut properties = Properties::new();
                    properties.insert("email", Value::String(format!("moved{n}@x")));
                    let data = EntityData {
                        partition_key: pk.clone(),
                        row_key: rk.clone(),
                        properties,
                    };
                    let upsert = TableOp::Replace(data, Precondition::Upsert);
                    self.storage
                        .execute(table, upsert, &WriteOptions::new())
                        .await?;
                }
                _ => {}
            }
        }
        next.await
    }
}

/// An unconditional indexed write whose row changes under every attempt
/// gives up after its attempts and says how long they took: the reads
/// alone took 5 ms each, so not "timed out after 0ns".
#[tokio::test(start_paused = true)]
async fn an_indexed_write_that_runs_out_of_attempts_reports_the_time_they_took() {
    let storage = MemoryBackend::new();
    let moving = MovingEmails {
        storage: storage.clone(),
        moves: std::sync::atomic::AtomicU64::new(0),
    };
    let store = Store::builder(storage).layer(moving).build().unwrap();
    let members = store.table::<Member>();
    let started = tokio::time::Instant::now();
    let e = members
        .upsert(Member {
            club: "chess".into(),
            id: "m1".into(),
            email: "mine@x".into(),
        })
        .await
        .unwrap_err();
    let took = started.elapsed();
    let Error::Timeout { after, .. } = &e else {
        panic!("{e:?}");
    };
    // Eight attempts, each reading the row once at least.
    assert!(
        *after >= Duration::from_millis(40) && *after <= took,
        "{after:?} of {took:?}"
    );
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "timed out after {after:?}: upsert of entity (\"chess\", \"m1\") in table `Members`"
        )),
        "{text}"
    );
    assert!(
        text.ends_with("its row kept changing under it (8 attempts)"),
        "{text}"
    );
}

/// The lease name of a partition lock reads as the partition key in a store
/// without a table prefix (`{prefix}/{key}` with one), in the lock's
/// description and in the error of a lock that stays held: no leading `/`.
#[tokio::test(start_paused = true)]
async fn lock_lease_names_read_without_a_leading_slash() {
    let backend = Arc::new(MemoryBackend::new());
    let store = Store::builder_shared(backend.clone()).build().unwrap();
    let other = Store::builder_shared(backend.clone()).build().unwrap();
    assert_eq!(store.lock_lease_name("c-375a").unwrap().as_str(), "c-375a");
    let unit = store.lock("c-375a").await.unwrap();
    let d = store.locks().describe("c-375a").await.unwrap();
    assert!(d.exists && d.is_held(), "{d:?}");
    assert_eq!(d.name.as_str(), "c-375a");
    let e = other
        .lock_with_timeout("c-375a", Duration::from_millis(300))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    let text = e.to_string();
    assert!(text.contains("c-375a"), "{text}");
    assert!(!text.contains("/c-375a"), "{text}");
    unit.abandon().await.unwrap();
    let listed = store.locks().list("").await.unwrap();
    assert_eq!(listed, [LeaseName::new("c-375a").unwrap()]);
    let prefixed = Store::builder_shared(backend)
        .table_prefix("shop")
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(
        prefixed.lock_lease_name("c-375a").unwrap().as_str(),
        "shop/c-375a"
    );
}
