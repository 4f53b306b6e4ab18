//! Layers: what a store stacks over its backend, in which order, and the
//! fence's layer on a table's writes.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold::backend::memory::MemoryBackend;
use leasehold::backend::{Backend, Layer, Op, Request, TableBackend};
use leasehold::testing::{CountingBackend, FaultInjector, FaultyBackend, RequestCounter};
use leasehold::{Entity, ErrorKind, Store};

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Jobs")]
struct Job {
    #[entity(partition_key)]
    queue: String,
    #[entity(row_key)]
    id: String,
    state: String,
}

/// A memory store counting its requests in the returned counter.
fn counted_store() -> (Store, RequestCounter) {
    let counts = RequestCounter::default();
    let store = Store::builder(MemoryBackend::new())
        .layer(counts.clone())
        .build()
        .unwrap();
    (store, counts)
}

fn job(id: &str, state: &str) -> Job {
    Job {
        queue: "q".into(),
        id: id.into(),
        state: state.into(),
    }
}

/// Layers given to the builder stack in the order given, the first lowest:
/// a counter above the faults counts the requests the faults refuse; one
/// below them never sees those requests.
#[tokio::test]
async fn builder_layers_stack_in_the_order_given() {
    let (below, above) = (RequestCounter::default(), RequestCounter::default());
    let faults = FaultInjector::default();
    let store = Store::builder(MemoryBackend::new())
        .layer(below.clone())
        .layer(faults.clone())
        .layer(above.clone())
        .build()
        .unwrap();
    let jobs = store.table::<Job>();
    jobs.insert(job("1", "new")).await.unwrap();
    faults.fail_nth(Some(Op::Get), 1);
    let e = jobs.get("q", "1").await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transient, "{e}");
    assert_eq!(
        jobs.get("q", "1").await.unwrap().map(|v| v.into_inner()),
        Some(job("1", "new"))
    );
    assert_eq!((above.get(Op::Get), below.get(Op::Get)), (2, 1));
    assert_eq!(above.get(Op::Write), 1);
    assert_eq!(below.get(Op::Write), 1);
}

/// Every request of the store goes through its layers: leases and locks
/// as well as tables.
#[tokio::test]
async fn leases_and_locks_go_through_the_layers() {
    let (store, counts) = counted_store();
    let guard = store
        .leases()
        .acquire("worker", Duration::from_secs(30))
        .await
        .unwrap();
    guard.release().await.unwrap();
    // The first acquire meets no container: it is created, then acquired.
    assert_eq!(counts.get(Op::CreateContainer), 1, "{counts:?}");
    assert_eq!(counts.get(Op::ReleaseLease), 1);
    let leases = counts.get(Op::AcquireLease);
    assert!(leases >= 1, "{counts:?}");
    let mut unit = store.lock("q").await.unwrap();
    unit.insert(&job("1", "new")).unwrap();
    unit.commit().await.unwrap();
    assert!(counts.get(Op::AcquireLease) > leases, "{counts:?}");
    assert!(
        counts.get(Op::Batch) + counts.get(Op::Write) >= 1,
        "{counts:?}"
    );
}

/// A wrapper makes a backend of the same system: wrappers report what
/// they wrap, for spans and metrics.
#[test]
fn a_layered_backend_reports_the_system_below() {
    let memory: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let faulty = FaultyBackend::new(CountingBackend::new(memory.clone()));
    assert_eq!(faulty.system_name(), "leasehold.memory");
    assert_eq!(faulty.system_name(), memory.system_name());
    assert_eq!(faulty.server_address(), None);
}

/// What a [`Recorder`] saw of one request.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    op: Op,
    name: &'static str,
    table: Option<String>,
    keys: Option<(String, String)>,
    blob: Option<String>,
}

/// A user's layer: records every request it sees, and its outcome.
#[derive(Debug, Clone, Default)]
struct Recorder(Arc<Mutex<Vec<(Seen, bool)>>>);

impl Layer for Recorder {
    async fn call<T: Send>(
        &self,
        request: &Request<'_>,
        next: impl Future<Output = leasehold::Result<T>> + Send,
    ) -> leasehold::Result<T> {
        let seen = Seen {
            op: request.op(),
            name: request.name(),
            table: request.table().map(|t| t.to_string()),
            keys: request
                .partition_key()
                .zip(request.row_key())
                .map(|(p, r)| (p.as_str().to_owned(), r.as_str().to_owned())),
            blob: request.blob().map(|b| b.as_str().to_owned()),
        };
        let answer = next.await;
        self.0.lock().unwrap().push((seen, answer.is_ok()));
        answer
    }
}

impl Recorder {
    fn take(&self) -> Vec<(Seen, bool)> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// A user's layer sees each request once, with its kind and keys, and
/// answers for it: a table's reads and writes, a lease's actions.
#[tokio::test]
async fn a_users_layer_sees_each_request_once_with_its_op_and_keys() {
    let recorder = Recorder::default();
    let store = Store::builder(MemoryBackend::new())
        .layer(recorder.clone())
        .build()
        .unwrap();
    let jobs = store.table::<Job>();
    let row = |op, name| Seen {
        op,
        name,
        table: Some("Jobs".into()),
        keys: Some(("q".into(), "1".into())),
        blob: None,
    };
    jobs.insert(job("1", "new")).await.unwrap();
    let stored = jobs.get("q", "1").await.unwrap().unwrap();
    jobs.delete(&stored).await.unwrap();
    let seen = recorder.take();
    let work: Vec<_> = seen
        .iter()
        .filter(|(s, _)| !s.op.is_setup())
        .cloned()
        .collect();
    assert_eq!(
        work,
        vec![
            (row(Op::Write, "insert"), true),
            (row(Op::Get, "get"), true),
            (row(Op::Write, "delete"), true),
        ],
        "{seen:?}"
    );

    let guard = store
        .leases()
        .acquire("worker", Duration::from_secs(30))
        .await
        .unwrap();
    guard.release().await.unwrap();
    let leases: Vec<_> = recorder
        .take()
        .into_iter()
        .filter(|(s, _)| matches!(s.op, Op::AcquireLease | Op::ReleaseLease))
        .collect();
    assert_eq!(
        leases.last().map(|(s, ok)| (s.op, *ok)),
        Some((Op::ReleaseLease, true))
    );
    for (s, _) in &leases {
        assert_eq!(s.blob.as_deref(), Some("worker"), "{leases:?}");
        assert_eq!((s.table.as_ref(), s.keys.as_ref()), (None, None));
    }
    assert_eq!(
        leases
            .iter()
            .filter(|(s, _)| s.op == Op::ReleaseLease)
            .count(),
        1
    );
}

/// A layer that refuses a request answers for it: the backend below
/// never sees it.
#[tokio::test]
async fn a_layer_refusing_a_request_keeps_it_from_the_backend() {
    #[derive(Debug)]
    struct NoDeletes;
    impl Layer for NoDeletes {
        async fn call<T: Send>(
            &self,
            request: &Request<'_>,
            next: impl Future<Output = leasehold::Result<T>> + Send,
        ) -> leasehold::Result<T> {
            match request.name() {
                "delete" => Err(leasehold::Error::invalid("delete", "refused here")),
                _ => next.await,
            }
        }
    }
    let below = RequestCounter::default();
    let store = Store::builder(MemoryBackend::new())
        .layer(below.clone())
        .layer(NoDeletes)
        .build()
        .unwrap();
    let jobs = store.table::<Job>();
    let stored = jobs.insert(job("1", "new")).await.unwrap();
    below.reset();
    let e = jobs.delete(&stored).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert_eq!(below.total(), 0, "{below:?}");
    assert!(jobs.get("q", "1").await.unwrap().is_some());
}

/// A fenced table fenced again writes with the later fence alone: one
/// transaction of the fence row and the write, as with one fence.
#[tokio::test]
async fn a_table_fenced_again_has_the_later_fence_only() {
    let (store, counts) = counted_store();
    let guard = store
        .leases()
        .acquire("scheduler", Duration::from_secs(30))
        .await
        .unwrap();
    let older = guard.fence().await.unwrap();
    let newer = guard.fence().await.unwrap();
    let jobs = store.table::<Job>();
    jobs.insert(job("0", "seed")).await.unwrap();
    counts.reset();
    let twice = jobs.fenced(&older).fenced(&newer);
    twice.insert(job("1", "new")).await.unwrap();
    // The fence row's read, then one transaction of two operations.
    assert_eq!(counts.get(Op::Get), 1, "{counts:?}");
    assert_eq!(counts.get(Op::Batch), 1, "{counts:?}");
    assert_eq!(counts.get(Op::Write), 0, "{counts:?}");
    // The newer epoch wrote the partition: the older fence is refused.
    let e = jobs
        .fenced(&older)
        .insert(job("2", "new"))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LeaseLost, "{e}");
    // Reads of a fenced table are the store's.
    assert_eq!(
        twice.get("q", "0").await.unwrap().map(|v| v.into_inner()),
        Some(job("0", "seed"))
    );
    guard.release().await.unwrap();
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Members")]
struct Member {
    #[entity(partition_key)]
    region: String,
    #[entity(row_key)]
    id: String,
    #[entity(unique)]
    email: String,
}

fn member(id: &str, email: &str) -> Member {
    Member {
        region: "eu".into(),
        id: id.into(),
        email: email.into(),
    }
}

/// The index layer sits above the store's layers: a layer given to the
/// builder sees the claim and the entity's write of an indexed insert, and
/// a replace of a value known as read sends its claims without reading
/// the entity's row.
#[tokio::test]
async fn the_index_layer_writes_claims_through_the_store_layers() {
    let (store, counts) = counted_store();
    let members = store.table::<Member>();
    members
        .insert(member("1", "ann@example.com"))
        .await
        .unwrap();
    counts.reset();
    members
        .insert(member("2", "bob@example.com"))
        .await
        .unwrap();
    assert_eq!(
        counts.get(Op::Write),
        2,
        "the claim, the entity: {counts:?}"
    );
    assert_eq!(counts.work(), 2, "{counts:?}");

    let taken = members.insert(member("3", "ann@example.com")).await;
    assert_eq!(taken.unwrap_err().kind(), ErrorKind::ValueTaken);

    let mut bob = members.get("eu", "2").await.unwrap().unwrap();
    counts.reset();
    bob.email = "robert@example.com".into();
    let bob = members.replace(&bob).await.unwrap();
    assert_eq!(counts.get(Op::Get), 1, "only the old claim: {counts:?}");
    assert_eq!(counts.work(), 4, "{counts:?}");
    let found = members.get_by(Member::columns().email, "robert@example.com");
    assert_eq!(
        found.await.unwrap().map(|v| v.into_inner()),
        Some(bob.into_inner())
    );
}

/// A conditional delete of an indexed type sends its tombstone at the
/// version given, without reading the row first, even from a value that
/// knows nothing of the stored properties.
#[tokio::test]
async fn an_indexed_delete_sends_one_request_from_any_value() {
    let (store, counts) = counted_store();
    let members = store.table::<Member>();
    let ann = members
        .insert(member("1", "ann@example.com"))
        .await
        .unwrap();
    let bare = leasehold::Versioned::new(ann.entity().clone(), ann.etag().clone(), ann.timestamp());
    counts.reset();
    members.delete(&bare).await.unwrap();
    assert_eq!(counts.work(), 1, "{counts:?}");
    assert!(members.get("eu", "1").await.unwrap().is_none());
    // Deleted again, from the same version: the row is gone.
    let e = members.delete(&bare).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    // Its value is free again.
    members
        .insert(member("2", "ann@example.com"))
        .await
        .unwrap();
}
