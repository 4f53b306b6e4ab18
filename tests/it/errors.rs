//! Every error says each fact once: real errors of every variant, produced
//! through the public API on the memory backend, rendered with `Display`
//! and checked for repeated phrases, repeated error codes and repeated
//! kinds (`lease lost: … lease lost`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use leasehold::backend::memory::MemoryBackend;
use leasehold::backend::{BlobBackend, BlobConditions, LeaseDuration, LeaseId, Metadata};
use leasehold::backend::{Precondition, TableBackend, TableOp};
use leasehold::entity::{EntityData, Properties, Value};
use leasehold::lease::{LeaseManager, LeaseName, LeaseOptions};
use leasehold::testing::{FaultyBackend, Op};
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
            &TableOp::Merge(many("a", 200), Precondition::IfExists),
        )
        .await
        .unwrap();
    errors.push((
        "Backend",
        backend
            .execute(
                &table,
                &TableOp::Merge(many("b", 100), Precondition::IfExists),
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
            .acquire_lease(
                leases.container(),
                &blob,
                LeaseDuration::Seconds(30),
                LeaseId::new_random(),
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
        .break_lease(leases.container(), &blob, Some(Duration::ZERO))
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
        .break_lease(leases.container(), &blob, Some(Duration::ZERO))
        .await
        .unwrap();
    errors.push(("LeaseLost", guard.advance_epoch().await.unwrap_err()));
    errors.push(("LeaseLost", guard.release().await.unwrap_err()));

    // A lock blob whose journal does not parse (written by something else
    // under the lock's lease).
    let lock = store.lock_lease_name("bob").unwrap();
    let guard = store
        .locks()
        .acquire(lock.as_str(), Duration::from_secs(1))
        .await
        .unwrap();
    backend
        .put_blob(
            store.locks().container(),
            &lock.blob_name().unwrap(),
            br#"{"v":1,"journal":{"not":"a journal"}}"#.to_vec(),
            &Metadata::new(),
            &BlobConditions::leased(guard.lease_id()),
        )
        .await
        .unwrap();
    guard.release().await.unwrap();
    errors.push((
        "Inconsistent",
        store.pending_commit("bob").await.unwrap_err(),
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
