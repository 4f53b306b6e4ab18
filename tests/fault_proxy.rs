//! The Azure backend through a TCP fault proxy in front of Azurite:
//! connections reset at random, latency, a blackhole. Optimistic
//! read-modify-write loops must neither lose nor repeat an increment.
//!
//! A conditional write whose reply is lost while its content now stands
//! under a new ETag has an unknown outcome (another writer may have written
//! the same content from the same version), and the backend says so instead
//! of reporting success. The increment tests therefore count those unknown
//! outcomes and check that no increment was lost or repeated: the final
//! count lies between the confirmed increments and the confirmed plus the
//! unknown ones.
//!
//! Run with `scripts/with-azurite.sh cargo test --test fault_proxy`.
#![cfg(feature = "azure")]

#[path = "support/azurite.rs"]
mod azurite;
#[path = "support/fault_proxy.rs"]
mod fault_proxy;

use std::net::SocketAddr;
use std::time::Duration;

use leasehold::backend::azure::{
    AzureBackend, ConnectionSettings, Fault, FaultPlan, RetryPolicy as AzureRetry,
};
use leasehold::backend::{Precondition, TableBackend, TableOp};
use leasehold::entity::{EntityData, Value};
use leasehold::{Entity, ErrorKind, RetryPolicy, Store};

use fault_proxy::FaultProxy;

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "ProxyCounters")]
struct Counter {
    #[entity(partition_key)]
    pk: String,
    #[entity(row_key)]
    rk: String,
    n: i64,
}

/// A store whose table traffic goes through a fresh proxy in front of the
/// test Azurite (blob traffic goes straight to Azurite). `None`: no Azurite.
async fn proxied_store(test: &str, retry: AzureRetry) -> Option<(Store, FaultProxy)> {
    let conn = azurite::azurite_connection_string()?;
    let settings = ConnectionSettings::parse(&conn).expect("parses");
    let table_url = settings.table_endpoint.url();
    let target: SocketAddr = format!(
        "{}:{}",
        table_url.host_str().expect("a host"),
        table_url.port().expect("a port")
    )
    .parse()
    .expect("a loopback address");
    let proxy = FaultProxy::start(target, 0x5eed).await.expect("proxy");
    let via_proxy = conn
        .split(';')
        .filter(|part| !part.is_empty())
        .map(|part| {
            if part.starts_with("TableEndpoint=") {
                format!("TableEndpoint=http://{}/{}", proxy.addr(), settings.account)
            } else {
                part.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(";");
    let backend = AzureBackend::builder()
        .connection_string(&via_proxy)
        .expect("parses")
        .retry_policy(retry)
        .build()
        .expect("builds");
    let names = azurite::unique_names(test);
    let store = Store::builder(backend)
        .table_prefix(names.prefix())
        .expect("prefix")
        // Four writers on one row conflict often: allow many attempts.
        .conflict_retry(
            RetryPolicy::new(500, Duration::from_millis(1), Duration::from_millis(20))
                .expect("policy"),
        )
        .build()
        .expect("store");
    Some((store, proxy))
}

fn fast_retries() -> AzureRetry {
    AzureRetry::new()
        .with_max_retries(10)
        .with_initial_delay(Duration::from_millis(5))
        .with_max_delay(Duration::from_millis(50))
        .with_request_timeout(Duration::from_secs(5))
}

/// What a run of increments produced.
#[derive(Debug)]
struct Increments {
    /// The stored count at the end.
    total: i64,
    /// Increments confirmed applied.
    confirmed: i64,
    /// Increments whose outcome is unknown (reported as such).
    unknown: i64,
}

impl Increments {
    /// No increment lost (all confirmed ones are there) and none repeated
    /// (nothing beyond the confirmed and the unknown ones).
    fn assert_exact(&self) {
        assert!(
            self.confirmed <= self.total && self.total <= self.confirmed + self.unknown,
            "{self:?}"
        );
    }
}

/// `tasks` tasks × `each` increments through `update_with`.
async fn increments(store: &Store, rk: &str, tasks_n: usize, each: usize) -> Increments {
    let counters = store.table::<Counter>();
    counters
        .insert(Counter {
            pk: "p".into(),
            rk: rk.into(),
            n: 0,
        })
        .await
        .expect("insert");
    let mut tasks = Vec::new();
    for _ in 0..tasks_n {
        let counters = counters.clone();
        let rk = rk.to_owned();
        tasks.push(tokio::spawn(async move {
            let (mut confirmed, mut unknown) = (0, 0);
            for _ in 0..each {
                match counters.update_with("p", rk.as_str(), |c| c.n += 1).await {
                    Ok(_) => confirmed += 1,
                    Err(e) if e.is_transient() && e.to_string().contains("unknown") => unknown += 1,
                    Err(e) => panic!("increment: {e}"),
                }
            }
            (confirmed, unknown)
        }));
    }
    let (mut confirmed, mut unknown) = (0, 0);
    for t in tasks {
        let (c, u) = t.await.expect("task");
        confirmed += c;
        unknown += u;
    }
    let total = counters.get("p", rk).await.expect("get").expect("exists").n;
    Increments {
        total,
        confirmed,
        unknown,
    }
}

/// With 5 % of requests lost to connection resets, the backend retries the
/// transient failures and `update_with` its conflicts: no increment is lost
/// or repeated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_with_loses_no_increment_when_connections_reset() {
    let Some((store, proxy)) = proxied_store("resets", fast_retries()).await else {
        return;
    };
    store
        .table::<Counter>()
        .get("p", "warm")
        .await
        .expect("warm up");
    proxy.set_reset_probability(0.05);
    let n = increments(&store, "c", 4, 25).await;
    proxy.set_reset_probability(0.0);
    n.assert_exact();
    assert_eq!(
        n.confirmed + n.unknown,
        100,
        "after {} resets",
        proxy.resets()
    );
    assert!(proxy.resets() > 0, "the proxy reset no connection");
}

/// One writer, 5 % of requests and 5 % of replies lost to resets: every
/// lost reply is settled by reading back; none is lost or repeated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_writer_loses_and_repeats_nothing_when_requests_and_replies_reset() {
    let Some((store, proxy)) = proxied_store("single", fast_retries()).await else {
        return;
    };
    store
        .table::<Counter>()
        .get("p", "warm")
        .await
        .expect("warm up");
    proxy.set_reset_probability(0.05);
    proxy.set_reply_reset_probability(0.05);
    let n = increments(&store, "s", 1, 100).await;
    proxy.set_reset_probability(0.0);
    proxy.set_reply_reset_probability(0.0);
    n.assert_exact();
    assert_eq!(
        n.confirmed + n.unknown,
        100,
        "after {} resets",
        proxy.resets()
    );
    assert!(proxy.resets() > 0, "the proxy reset no connection");
}

/// Latency and a blackhole: a request into the blackhole times out per
/// attempt and is reported as transient; once traffic flows again the same
/// store works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blackhole_is_transient_and_latency_only_slows() {
    let retry = AzureRetry::new()
        .with_max_retries(1)
        .with_initial_delay(Duration::from_millis(5))
        .with_request_timeout(Duration::from_millis(300));
    let Some((store, proxy)) = proxied_store("blackhole", retry).await else {
        return;
    };
    let counters = store.table::<Counter>();
    counters
        .insert(Counter {
            pk: "p".into(),
            rk: "b".into(),
            n: 0,
        })
        .await
        .expect("insert");

    proxy.set_latency(Duration::from_millis(20));
    let started = tokio::time::Instant::now();
    counters
        .update_with("p", "b", |c| c.n += 1)
        .await
        .expect("slow but fine");
    assert!(started.elapsed() >= Duration::from_millis(40));
    proxy.set_latency(Duration::ZERO);

    proxy.set_blackhole(true);
    let e = counters.get("p", "b").await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transient, "{e:?}");
    proxy.set_blackhole(false);
    assert_eq!(counters.get("p", "b").await.unwrap().unwrap().n, 1);
}

/// Why an ambiguous conditional write is never reported as applied: writer B replaces
/// an entity with content C; writer A, still holding the old ETag, replaces
/// it with the same content C, and its request fails before being sent with
/// a status that may mean "applied" (500). A's verification reads C under
/// a new ETag and reports success, although A's write was never applied and
/// its ETag was stale: it must be a conflict (or an unknown outcome), never
/// a success.
#[tokio::test]
async fn a_stale_write_that_was_never_sent_is_not_reported_as_applied() {
    let Some(conn) = azurite::azurite_connection_string() else {
        return;
    };
    let plan = FaultPlan::new();
    let a = AzureBackend::builder()
        .connection_string(&conn)
        .expect("parses")
        .retry_policy(fast_retries())
        .fault_plan(plan.clone())
        .build()
        .expect("builds");
    let b = AzureBackend::from_connection_string(&conn).expect("parses");
    let names = azurite::unique_names("staleapplied");
    let t = names.table("t");
    a.create_table(&t).await.expect("table");
    let data = |n: i64| EntityData {
        partition_key: "p".parse().expect("key"),
        row_key: "r".parse().expect("key"),
        properties: [("n".to_owned(), Value::Int64(n))].into_iter().collect(),
    };
    let v0 = a
        .execute(&t, &TableOp::Insert(data(0)))
        .await
        .expect("insert")
        .expect("a version");
    // Both read n = 0 at v0; B writes n = 1 first.
    b.execute(
        &t,
        &TableOp::Replace(data(1), Precondition::IfMatch(v0.etag.clone())),
    )
    .await
    .expect("B's replace");
    // Without a fault, A's stale write is a conflict.
    let stale = TableOp::Replace(data(1), Precondition::IfMatch(v0.etag.clone()));
    let e = a.execute(&t, &stale).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e:?}");
    // With its request failing unsent (a 500 may mean "applied"), it must
    // not turn into a success.
    plan.push("PUT", "RowKey='r'", Fault::Status(500));
    let r = a.execute(&t, &stale).await;
    assert!(
        r.is_err(),
        "a stale write that never reached the service was reported as applied: {r:?}"
    );
}
