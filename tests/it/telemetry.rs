//! Metrics (feature `opentelemetry`), read through the OpenTelemetry SDK's
//! in-memory exporter: the requests recorded are the requests a
//! `CountingBackend` under the store counts, on memory and on Azurite;
//! conflicts, retries, throttling, lock waits, roll-forwards, undos and
//! renewal lag are recorded where they happen; the backends' Table spans
//! carry the database-client attributes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use leasehold::backend::Backend;
use leasehold::backend::Op;
use leasehold::backend::memory::MemoryBackend;
use leasehold::lease::LeaseOptions;
use leasehold::testing::{CountingBackend, Fault, FaultyBackend};
use leasehold::{Entity, ErrorKind, Store};
use opentelemetry::metrics::{Meter, MeterProvider as _};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};

use crate::support;

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Accounts")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    balance: i64,
}

/// A second table, so that a unit's commit spans two transactions.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Ledger")]
struct Entry {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    id: String,
    amount: i64,
}

fn account(customer: &str, name: &str, balance: i64) -> Account {
    Account {
        customer: customer.into(),
        name: name.into(),
        balance,
    }
}

/// A meter provider of its own (tests run side by side) exporting to
/// memory.
struct Metrics {
    exporter: InMemoryMetricExporter,
    provider: SdkMeterProvider,
}

/// One data point: its attributes, and its count (a counter's value, a
/// histogram's number of recordings) and sum.
struct Point {
    name: String,
    attributes: BTreeMap<String, String>,
    count: u64,
    sum: f64,
}

impl Metrics {
    fn new() -> Self {
        let exporter = InMemoryMetricExporter::default();
        let provider = SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(exporter.clone()).build())
            .build();
        Metrics { exporter, provider }
    }

    fn meter(&self) -> Meter {
        self.provider.meter("leasehold")
    }

    /// Every data point recorded so far (cumulative).
    fn points(&self) -> Vec<Point> {
        self.provider.force_flush().expect("flush");
        let exported = self.exporter.get_finished_metrics().expect("metrics");
        let Some(last) = exported.last() else {
            return Vec::new();
        };
        let mut points = Vec::new();
        for scope in last.scope_metrics() {
            for metric in scope.metrics() {
                let name = metric.name().to_owned();
                let attributes = |kvs: &mut dyn Iterator<Item = &opentelemetry::KeyValue>| {
                    kvs.map(|kv| (kv.key.to_string(), kv.value.to_string()))
                        .collect::<BTreeMap<_, _>>()
                };
                let mut push = |kvs: &mut dyn Iterator<Item = &opentelemetry::KeyValue>,
                                count: u64,
                                sum: f64| {
                    points.push(Point {
                        name: name.clone(),
                        attributes: attributes(kvs),
                        count,
                        sum,
                    })
                };
                match metric.data() {
                    AggregatedMetrics::U64(MetricData::Sum(sum)) => {
                        for p in sum.data_points() {
                            push(&mut p.attributes(), p.value(), p.value() as f64);
                        }
                    }
                    AggregatedMetrics::U64(MetricData::Histogram(h)) => {
                        for p in h.data_points() {
                            push(&mut p.attributes(), p.count(), p.sum() as f64);
                        }
                    }
                    AggregatedMetrics::F64(MetricData::Histogram(h)) => {
                        for p in h.data_points() {
                            push(&mut p.attributes(), p.count(), p.sum());
                        }
                    }
                    other => panic!("{name}: unexpected data {other:?}"),
                }
            }
        }
        points
    }

    /// The points of `name` whose attributes include `with`.
    fn select<'a>(points: &'a [Point], name: &str, with: &[(&str, &str)]) -> Vec<&'a Point> {
        points
            .iter()
            .filter(|p| p.name == name)
            .filter(|p| {
                with.iter()
                    .all(|(k, v)| p.attributes.get(*k).map(String::as_str) == Some(*v))
            })
            .collect()
    }

    /// The summed counts of the points of `name` with `with`.
    fn count(points: &[Point], name: &str, with: &[(&str, &str)]) -> u64 {
        Metrics::select(points, name, with)
            .iter()
            .map(|p| p.count)
            .sum()
    }
}

fn prefix() -> String {
    format!("m{}", &uuid::Uuid::new_v4().simple().to_string()[..10])
}

/// The requests recorded match the requests counted under the store, by
/// kind and in all; conflicts, the conflict retry of `update_with`, the
/// requests of each logical operation and a unit's lock wait are recorded.
async fn requests_match_the_counted_requests(raw: Arc<dyn Backend>, system: &str) {
    let metrics = Metrics::new();
    let counting = CountingBackend::new(raw.clone());
    let counter = counting.counter();
    let prefix = prefix();
    let store = Store::builder(counting)
        .table_prefix(prefix.clone())
        .unwrap()
        .meter(metrics.meter())
        .build()
        .unwrap();
    // A second writer, through neither the counter nor these metrics.
    let other = Store::builder_shared(raw)
        .table_prefix(prefix)
        .unwrap()
        .build()
        .unwrap();
    store.create_table("Accounts").await.unwrap();
    let t = store.table::<Account>();

    // The requests counted during each logical operation, by its name.
    let mut made: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    let mut note = |name: &'static str, before: u64| {
        let entry = made.entry(name).or_default();
        entry.0 += 1;
        entry.1 += counter.total() - before;
    };
    let before = counter.total();
    let v1 = t.insert(account("c", "a", 10)).await.unwrap();
    note("insert", before);
    let before = counter.total();
    assert_eq!(
        t.insert(account("c", "a", 10)).await.unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );
    note("insert", before);
    let mut v2 = v1.clone();
    v2.balance = 11;
    let before = counter.total();
    let v2 = t.replace(&v2).await.unwrap();
    note("replace", before);
    let mut stale = v1.clone();
    stale.balance = 12;
    let before = counter.total();
    assert_eq!(
        t.replace(&stale).await.unwrap_err().kind(),
        ErrorKind::Conflict
    );
    note("replace", before);
    let before = counter.total();
    assert_eq!(t.get("c", "a").await.unwrap().unwrap().etag(), v2.etag());
    note("get", before);

    // update_with meets a write of the other writer once: get, refused
    // replace, get, replace.
    let mut interfered = false;
    let before = counter.total();
    let updated = t
        .update_with("c", "a", |a| {
            if !interfered {
                interfered = true;
                let other = other.clone();
                tokio::task::block_in_place(|| {
                    tokio::runtime::Handle::current()
                        .block_on(tokio::spawn(async move {
                            other
                                .table::<Account>()
                                .replace_unconditionally(account("c", "a", 100))
                                .await
                        }))
                        .expect("joined")
                        .expect("other write")
                });
            }
            a.balance += 1;
        })
        .await
        .unwrap();
    assert_eq!(updated.balance, 101);
    assert!(interfered);
    note("update_with", before);

    let before = counter.total();
    let page = t.query().partition("c").page().await.unwrap();
    assert_eq!(page.items.len(), 1);
    note("query", before);
    let before = counter.total();
    t.batch()
        .insert(account("c", "b", 1))
        .insert(account("c", "d", 2))
        .commit()
        .await
        .unwrap();
    note("batch", before);
    // A count and a purge are one operation each, their pages included.
    let before = counter.total();
    assert_eq!(t.count(t.query().partition("c")).await.unwrap(), 3);
    note("count", before);
    let before = counter.total();
    let purged = t
        .purge(t.query().partition("c").row_keys("b"..))
        .await
        .unwrap();
    assert_eq!((purged.deleted, purged.batches), (2, 1));
    note("purge", before);
    assert_eq!((made["count"], made["purge"]), ((1, 1), (1, 2)));

    let before = counter.total();
    let mut unit = store.lock("u").await.unwrap();
    unit.insert(&account("u", "x", 5)).unwrap();
    unit.commit().await.unwrap();
    let unit_requests = counter.total() - before;

    let points = metrics.points();
    // Every request, by kind and in all.
    assert_eq!(
        Metrics::count(&points, "leasehold.requests", &[]),
        counter.total()
    );
    assert_eq!(
        Metrics::count(&points, "db.client.operation.duration", &[]),
        counter.total()
    );
    for (op, name) in [
        (Op::Get, "get"),
        (Op::Write, "write"),
        (Op::Batch, "batch"),
        (Op::Query, "query"),
        (Op::CreateTable, "create_table"),
        (Op::AcquireLease, "acquire_lease"),
    ] {
        assert_eq!(
            Metrics::count(
                &points,
                "leasehold.requests",
                &[("db.operation.name", name)]
            ),
            counter.get(op),
            "{name}"
        );
    }
    assert_eq!(
        Metrics::count(&points, "leasehold.requests", &[("db.system.name", system)]),
        counter.total()
    );
    // Failed requests carry their error's kind.
    assert_eq!(
        Metrics::count(
            &points,
            "db.client.operation.duration",
            &[("error.type", "already_exists")]
        ),
        1
    );
    // The duplicate insert, the stale replace, the update's refused one.
    assert_eq!(Metrics::count(&points, "leasehold.conflicts", &[]), 3);
    assert_eq!(
        Metrics::count(
            &points,
            "leasehold.conflicts",
            &[("error.type", "conflict")]
        ),
        2
    );
    assert_eq!(
        Metrics::count(
            &points,
            "leasehold.retries",
            &[("leasehold.retry.reason", "conflict")]
        ),
        1
    );
    // Requests per logical operation.
    let op = |name: &str| {
        let found = Metrics::select(
            &points,
            "leasehold.operation.requests",
            &[("leasehold.operation", name)],
        );
        assert_eq!(found.len(), 1, "{name}");
        (found[0].count, found[0].sum)
    };
    for (name, (calls, requests)) in &made {
        assert_eq!(op(name), (*calls, *requests as f64), "{name}");
    }
    // get, refused replace, get, replace.
    assert_eq!(made["update_with"], (1, 4));
    let (commits, commit_requests) = op("unit.commit");
    assert_eq!(commits, 1);
    let (locks, lock_requests) = op("lock");
    assert_eq!(locks, 1);
    assert!(commit_requests >= 1.0 && lock_requests >= 1.0);
    // A renewal may run beside the unit; nothing else does.
    assert!(
        commit_requests + lock_requests <= unit_requests as f64,
        "{commit_requests} + {lock_requests} of {unit_requests}"
    );
    assert_eq!(
        Metrics::count(
            &points,
            "leasehold.lock.wait.duration",
            &[("leasehold.outcome", "acquired")]
        ),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_match_the_counted_requests_on_memory() {
    requests_match_the_counted_requests(Arc::new(MemoryBackend::new()), "leasehold.memory").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_match_the_counted_requests_on_azurite() {
    let Some(backend) = support::azurite_backend() else {
        return;
    };
    requests_match_the_counted_requests(backend, "azure.storage").await;
}

/// A busy answer (503) and a server error (500) are retried inside one
/// request: each request is recorded once, with its throttling and its
/// retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_requests_are_retried_and_counted_on_azurite() {
    let Some(cs) = support::azurite::azurite_connection_string() else {
        return;
    };
    let plan = leasehold::testing::FaultInjector::default();
    let backend = leasehold::backend::azure::AzureBackend::builder()
        .connection_string(&cs)
        .unwrap()
        .policy(plan.transport_policy())
        .build()
        .unwrap();
    let metrics = Metrics::new();
    let prefix = prefix();
    let store = Store::builder(backend)
        .table_prefix(prefix.clone())
        .unwrap()
        .meter(metrics.meter())
        .build()
        .unwrap();
    let t = store.table::<Account>();
    t.insert(account("c", "a", 1)).await.unwrap();
    let sent = plan.requests();
    plan.inject_request("GET", &format!("{prefix}Accounts"), Fault::Status(503));
    assert_eq!(t.get("c", "a").await.unwrap().unwrap().balance, 1);
    assert_eq!(plan.requests() - sent, 2, "the get was sent twice");
    plan.inject_request("GET", &format!("{prefix}Accounts"), Fault::Status(500));
    assert_eq!(t.get("c", "a").await.unwrap().unwrap().balance, 1);
    assert_eq!(plan.requests() - sent, 4, "the second get too");

    let points = metrics.points();
    let get = [("db.operation.name", "get")];
    assert_eq!(Metrics::count(&points, "leasehold.requests", &get), 2);
    assert_eq!(Metrics::count(&points, "leasehold.throttled", &get), 1);
    assert_eq!(
        Metrics::count(
            &points,
            "leasehold.retries",
            &[
                ("db.operation.name", "get"),
                ("leasehold.retry.reason", "throttled")
            ]
        ),
        1
    );
    assert_eq!(
        Metrics::count(
            &points,
            "leasehold.retries",
            &[
                ("db.operation.name", "get"),
                ("leasehold.retry.reason", "transport")
            ]
        ),
        1
    );
    assert_eq!(
        Metrics::count(
            &points,
            "leasehold.requests",
            &[("db.operation.name", "get"), ("leasehold.outcome", "ok")]
        ),
        2
    );
}

/// A store on `backend` under `prefix`, with 15 s leases.
fn leasing(backend: Arc<dyn Backend>, prefix: &str, meter: Option<Meter>) -> Store {
    let builder = Store::builder_shared(backend)
        .table_prefix(prefix)
        .unwrap()
        .lease_options(LeaseOptions::new().with_duration(Duration::from_secs(15)));
    match meter {
        Some(meter) => builder.meter(meter),
        None => builder,
    }
    .build()
    .unwrap()
}

/// A commit in partition `pk` over two tables (decided in a row: the
/// accounts ride in its commit point, the ledger row is marked) whose
/// process dies right after its commit point, before finishing the marked
/// ledger row.
async fn die_committing(memory: &Arc<dyn Backend>, prefix: &str, pk: &str) {
    let faulty = FaultyBackend::new(memory.clone());
    let injector = faulty.injector();
    let dying = leasing(Arc::new(faulty), prefix, None);
    dying.create_table("Ledger").await.unwrap();
    let mut unit = dying.lock(pk).await.unwrap();
    let mut a = unit.get::<Account>("a").await.unwrap().unwrap();
    a.balance -= 10;
    unit.replace(&a).unwrap();
    unit.insert(&Entry {
        customer: pk.into(),
        id: "e1".into(),
        amount: -10,
    })
    .unwrap();
    // Marks (1), commit point (2), then the finishing transaction (3).
    injector.inject(Some(Op::Batch), 3, Fault::Die);
    let report = unit.commit().await.expect("decided: committed");
    assert!(report.transaction.is_some(), "{report:?}");
}

/// A committed row left marked by its dead writer, finished by a reader
/// that meets it, is counted as a roll-forward by a reader.
async fn committed_rows_finished_by_readers_are_counted(memory: Arc<dyn Backend>) {
    let prefix = prefix();
    let metrics = Metrics::new();
    let healthy = leasing(memory.clone(), &prefix, Some(metrics.meter()));
    let t = healthy.table::<Account>();
    t.insert(account("p", "a", 100)).await.unwrap();
    die_committing(&memory, &prefix, "p").await;
    assert_eq!(
        Metrics::count(&metrics.points(), "leasehold.commit.roll_forwards", &[]),
        0
    );
    let entry = healthy.table::<Entry>().get("p", "e1").await.unwrap();
    assert_eq!(entry.map(|e| e.amount), Some(-10), "finished by the read");
    assert_eq!(t.get("p", "a").await.unwrap().unwrap().balance, 90);

    let points = metrics.points();
    assert_eq!(
        Metrics::count(
            &points,
            "leasehold.commit.roll_forwards",
            &[("leasehold.resolver", "reader")]
        ),
        1
    );
    assert_eq!(
        Metrics::count(&points, "leasehold.commit.roll_forwards", &[]),
        1
    );
}

#[tokio::test(start_paused = true)]
async fn committed_rows_finished_by_readers_are_counted_on_memory() {
    committed_rows_finished_by_readers_are_counted(Arc::new(MemoryBackend::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_rows_finished_by_readers_are_counted_on_azurite() {
    let Some(backend) = support::azurite_backend() else {
        return;
    };
    committed_rows_finished_by_readers_are_counted(backend).await;
}

/// Each renewal of a held lease records how late it succeeded.
#[tokio::test(start_paused = true)]
async fn lease_renewals_record_their_lag_on_memory() {
    let metrics = Metrics::new();
    let backend = CountingBackend::new(MemoryBackend::new());
    let counter = backend.counter();
    let store = Store::builder(backend)
        .meter(metrics.meter())
        .build()
        .unwrap();
    let guard = store
        .leases()
        .acquire("renewed", Duration::from_secs(1))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    guard.release().await.unwrap();
    let renewals = counter.get(Op::RenewLease);
    assert!(renewals >= 3, "{renewals} renewals in a minute");
    let points = metrics.points();
    assert_eq!(
        Metrics::count(&points, "leasehold.lease.renewal.lag", &[]),
        renewals
    );
    assert_eq!(
        Metrics::count(
            &points,
            "leasehold.requests",
            &[("db.operation.name", "renew_lease")]
        ),
        renewals
    );
}

/// A store's request spans carry OpenTelemetry's database-client
/// attributes: the tracing layer writes them for every backend, naming the
/// system the backend reports.
#[tokio::test]
async fn table_spans_carry_database_client_attributes() {
    let captured = support::secrets::Captured::default();
    let store = Store::memory();
    let t = store.table::<Account>();
    {
        let _capture = captured.capture();
        t.insert(account("c", "a", 1)).await.unwrap();
        t.batch()
            .insert(account("c", "b", 1))
            .insert(account("c", "d", 1))
            .commit()
            .await
            .unwrap();
    }
    let text = captured.text();
    // The fields of the first request span of operation `op`:
    // `leasehold.table{fields}`.
    let span = |op: &str| {
        text.match_indices("leasehold.table{")
            .map(|(at, open)| {
                let fields = &text[at + open.len()..];
                fields[..fields.find('}').expect("closed")].to_owned()
            })
            .find(|fields| fields.contains(&format!("db.operation.name=\"{op}\"")))
            .unwrap_or_else(|| panic!("no span of {op} in:\n{text}"))
    };
    let insert = span("insert");
    for field in [
        "otel.name=insert Accounts",
        "otel.kind=\"client\"",
        "db.system.name=\"leasehold.memory\"",
        "db.operation.name=\"insert\"",
        "db.collection.name=Accounts",
    ] {
        assert!(insert.contains(field), "{field} in {insert}");
    }
    let batch = span("batch");
    for field in [
        "otel.name=batch Accounts",
        "db.operation.name=\"batch\"",
        "db.operation.batch.size=2",
    ] {
        assert!(batch.contains(field), "{field} in {batch}");
    }
}

/// A lookup by a unique value is one logical operation, its requests
/// counted together.
#[tokio::test]
async fn a_lookup_by_value_is_one_operation_on_memory() {
    #[derive(Entity, Debug, Clone, PartialEq)]
    #[entity(table = "Customers")]
    struct Customer {
        #[entity(partition_key)]
        region: String,
        #[entity(row_key)]
        id: String,
        #[entity(unique)]
        email: String,
    }
    let metrics = Metrics::new();
    let backend = CountingBackend::new(MemoryBackend::new());
    let counter = backend.counter();
    let store = Store::builder(backend)
        .meter(metrics.meter())
        .build()
        .unwrap();
    let customers = store.table::<Customer>();
    customers
        .insert(Customer {
            region: "eu".into(),
            id: "1".into(),
            email: "ann@example.com".into(),
        })
        .await
        .unwrap();
    let before = counter.total();
    let found = customers
        .get_by(Customer::columns().email, "ann@example.com")
        .await
        .unwrap()
        .expect("indexed");
    assert_eq!(found.id, "1");
    let made = counter.total() - before;
    assert!(made >= 2, "the index row and the entity: {made}");
    let points = metrics.points();
    let found = Metrics::select(
        &points,
        "leasehold.operation.requests",
        &[("leasehold.operation", "get_by")],
    );
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].count, found[0].sum), (1, made as f64));
}

/// Answers the library expects and handles are outcomes, not errors: the
/// first lock of a partition (the acquire of a lock blob not created yet
/// answers 404), a run-once and a reservation in a fresh container, a
/// lease held by another store, and a table deleted without an index
/// table leave no `error.type` on request durations, though
/// `leasehold.outcome` still says what each request met.
async fn expected_answers_are_not_errors(raw: Arc<dyn Backend>) {
    let metrics = Metrics::new();
    let prefix = prefix();
    let container = leasehold::key::ContainerName::new(format!("c{prefix}")).unwrap();
    let lock_container = leasehold::key::ContainerName::new(format!("l{prefix}")).unwrap();
    let store = Store::builder_shared(raw.clone())
        .table_prefix(prefix.clone())
        .unwrap()
        .lease_options(LeaseOptions::new().with_container(container.clone()))
        .lock_lease_options(LeaseOptions::new().with_container(lock_container))
        .meter(metrics.meter())
        .build()
        .unwrap();
    let other = Store::builder_shared(raw)
        .table_prefix(prefix)
        .unwrap()
        .lease_options(LeaseOptions::new().with_container(container))
        .build()
        .unwrap();
    store.create_table("Accounts").await.unwrap();
    let mut unit = store.lock("first").await.unwrap();
    unit.insert(&account("first", "a", 1)).unwrap();
    unit.commit().await.unwrap();
    store
        .leases()
        .do_once("seed", |_| async { Ok::<_, leasehold::Error>(()) })
        .await
        .unwrap();
    let reservation = store
        .leases()
        .try_reserve("nightly", Duration::from_secs(60))
        .await
        .unwrap()
        .expect("free");
    let held = other.leases().try_acquire("leader").await.unwrap().unwrap();
    assert!(
        store
            .leases()
            .try_acquire("leader")
            .await
            .unwrap()
            .is_none()
    );
    held.release().await.unwrap();
    assert!(store.delete_table("Accounts").await.unwrap());
    assert!(
        store
            .leases()
            .cancel_reservation(reservation.job().as_str())
            .await
            .unwrap()
    );

    let points = metrics.points();
    let errors: Vec<String> = Metrics::select(&points, "db.client.operation.duration", &[])
        .iter()
        .filter(|p| p.attributes.contains_key("error.type"))
        .map(|p| format!("{:?}", p.attributes))
        .collect();
    assert!(errors.is_empty(), "recorded as errors: {errors:#?}");
    // What the requests met is still recorded.
    for (op, outcome) in [
        ("acquire_lease", "not_found"),
        ("acquire_lease", "lease_held"),
        ("blob_properties", "not_found"),
        ("query", "not_found"),
    ] {
        assert!(
            Metrics::count(
                &points,
                "leasehold.requests",
                &[("db.operation.name", op), ("leasehold.outcome", outcome)]
            ) >= 1,
            "{op} {outcome}"
        );
    }
    // An error nobody expected still is one.
    let t = store.table::<Account>();
    assert_eq!(
        t.get("first", "a").await.unwrap_err().code(),
        Some("TableNotFound")
    );
    let points = metrics.points();
    assert_eq!(
        Metrics::count(
            &points,
            "db.client.operation.duration",
            &[("db.operation.name", "get"), ("error.type", "not_found")]
        ),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expected_answers_are_not_errors_on_memory() {
    expected_answers_are_not_errors(Arc::new(MemoryBackend::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expected_answers_are_not_errors_on_azurite() {
    let Some(backend) = support::azurite_backend() else {
        return;
    };
    expected_answers_are_not_errors(backend).await;
}
