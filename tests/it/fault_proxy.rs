//! The Azure backend through a TCP fault proxy in front of Azurite:
//! connections reset at random, latency, a blackhole. Optimistic
//! read-modify-write loops must neither lose nor repeat an increment.
//!
//! A conditional write whose reply is lost while its content now stands
//! under a new ETag has an unknown outcome (another writer may have written
//! the same content from the same version), and by default the backend says
//! so instead of reporting success: the default-mode increment test counts
//! those unknown outcomes and checks that no increment was lost or repeated
//! (the final count lies between the confirmed increments and the confirmed
//! plus the unknown ones). With a write log (`Table::with_write_log`) every
//! lost reply is settled, and the count is exact.
//!
//! The leader tests put one candidate's blob and table traffic behind
//! proxies and blackhole it: the cut-off leader's token fires before its
//! lease can expire at the service, the next leader's term does not overlap
//! it, and a stale leader's fenced (epoch-checked, ETag-conditional) write is
//! refused.
//!
//! Run with `scripts/with-azurite.sh cargo test --test it fault_proxy::`.
#![cfg(feature = "azure")]

use crate::support::{azurite, fault_proxy};
use leasehold::backend::WriteOptions;

use std::net::SocketAddr;
use std::time::Duration;

use leasehold::backend::azure::{AzureBackend, ConnectionSettings, TransportRetry as AzureRetry};
use leasehold::backend::{Precondition, TableBackend, TableOp};
use leasehold::entity::{EntityData, Value};
use leasehold::lease::{LeaderContext, LeaderOptions, LeaseOptions};
use leasehold::testing::{Fault, FaultInjector};
use leasehold::{ConflictRetry, Entity, ErrorKind, Store, Table, Versioned};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep, timeout};
use tokio_util::sync::CancellationToken;

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
    let proxy = FaultProxy::start(loopback(&settings.table_endpoint), 0x5eed)
        .await
        .expect("proxy");
    let via_proxy = rewrite_endpoint(&conn, "TableEndpoint", proxy.addr(), &settings.account);
    let backend = AzureBackend::builder()
        .connection_string(&via_proxy)
        .expect("parses")
        .transport_retry(retry)
        .build()
        .expect("builds");
    let names = azurite::unique_names(test);
    let store = Store::builder(backend)
        .table_prefix(names.prefix())
        .expect("prefix")
        // Four writers on one row conflict often: allow many attempts.
        .conflict_retry(
            ConflictRetry::new(500, Duration::from_millis(1), Duration::from_millis(20))
                .expect("policy"),
        )
        .build()
        .expect("store");
    Some((store, proxy))
}

/// The loopback address of an Azurite endpoint.
fn loopback(url: &azure_core::http::Url) -> SocketAddr {
    format!(
        "{}:{}",
        url.host_str().expect("a host"),
        url.port().expect("a port")
    )
    .parse()
    .expect("a loopback address")
}

/// `conn` with its `key` endpoint (`TableEndpoint`, `BlobEndpoint`) pointed
/// at `addr`.
fn rewrite_endpoint(conn: &str, key: &str, addr: SocketAddr, account: &str) -> String {
    let prefix = format!("{key}=");
    conn.split(';')
        .filter(|part| !part.is_empty())
        .map(|part| {
            if part.starts_with(&prefix) {
                format!("{key}=http://{addr}/{account}")
            } else {
                part.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(";")
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

/// `tasks` tasks × `each` increments through `update_with`, with or without
/// a write log.
async fn increments(
    store: &Store,
    rk: &str,
    tasks_n: usize,
    each: usize,
    write_log: bool,
) -> Increments {
    let counters = if write_log {
        store.table::<Counter>().with_write_log()
    } else {
        store.table::<Counter>()
    };
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

/// A proxied store with fast retries whose counter table exists and whose
/// connection is open before any fault is switched on.
async fn warm_proxied_store(test: &str) -> Option<(Store, FaultProxy)> {
    let (store, proxy) = proxied_store(test, fast_retries()).await?;
    store
        .table::<Counter>()
        .get("p", "warm")
        .await
        .expect("warm up");
    Some((store, proxy))
}

/// Sets both reset probabilities: requests reset before they reach the
/// service, and replies reset after it applied the request.
fn resets(proxy: &FaultProxy, p: f64) {
    proxy.set_reset_probability(p);
    proxy.set_reply_reset_probability(p);
}

/// With 5 % of requests and 5 % of replies lost to connection resets, the
/// backend retries the transient failures and `update_with` its conflicts;
/// by default a lost reply it cannot settle is reported as unknown: no
/// increment is lost or repeated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_with_loses_no_increment_when_connections_reset() {
    let Some((store, proxy)) = warm_proxied_store("resets").await else {
        return;
    };
    resets(&proxy, 0.05);
    let n = increments(&store, "c", 4, 25, false).await;
    resets(&proxy, 0.0);
    n.assert_exact();
    assert_eq!(
        n.confirmed + n.unknown,
        100,
        "after {} resets",
        proxy.resets()
    );
    assert!(proxy.resets() > 0, "the proxy reset no connection");
}

/// The same with a write log, from 4 tasks and from a single one: every
/// lost reply is settled, every `update_with` succeeds, and the count is
/// exactly N × M.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_with_is_exact_under_connection_resets_with_a_write_log() {
    let Some((store, proxy)) = warm_proxied_store("exact").await else {
        return;
    };
    for (rk, tasks, each) in [("x4", 4, 25), ("x1", 1, 100)] {
        let before = proxy.resets();
        resets(&proxy, 0.05);
        let n = increments(&store, rk, tasks, each, true).await;
        resets(&proxy, 0.0);
        let resets = proxy.resets() - before;
        assert_eq!(n.unknown, 0, "{rk}: {n:?} after {resets} resets");
        assert_eq!(n.confirmed, 100, "{rk}: {n:?} after {resets} resets");
        assert_eq!(n.total, 100, "{rk}: {n:?} after {resets} resets");
        assert!(resets > 0, "{rk}: the proxy reset no connection");
    }
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
    let plan = FaultInjector::default();
    let a = AzureBackend::builder()
        .connection_string(&conn)
        .expect("parses")
        .transport_retry(fast_retries())
        .policy(plan.transport_policy())
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
        .execute(&t, TableOp::Insert(data(0)), &WriteOptions::new())
        .await
        .expect("insert")
        .expect("a version");
    // Both read n = 0 at v0; B writes n = 1 first.
    b.execute(
        &t,
        TableOp::Replace(data(1), Precondition::IfMatch(v0.etag.clone())),
        &WriteOptions::new(),
    )
    .await
    .expect("B's replace");
    // Without a fault, A's stale write is a conflict.
    let stale = TableOp::Replace(data(1), Precondition::IfMatch(v0.etag.clone()));
    let e = a
        .execute(&t, stale.clone(), &WriteOptions::new())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e:?}");
    // With its request failing unsent (a 500 may mean "applied"), it must
    // not turn into a success.
    plan.inject_request("PUT", "RowKey='r'", Fault::Status(500));
    let r = a.execute(&t, stale.clone(), &WriteOptions::new()).await;
    assert!(
        r.is_err(),
        "a stale write that never reached the service was reported as applied: {r:?}"
    );
}

// ---- Leader election with one candidate behind the proxy ----------------

/// The lease duration of the leader tests: the shortest the service allows.
const LEASE: Duration = Duration::from_secs(15);
/// The drift margin of the leader tests: a guard counts its lease lost this
/// long before the earliest moment the service could expire it.
const DRIFT: Duration = Duration::from_secs(2);

/// Two candidates for one leadership: `a` reaches Azurite (blobs and tables)
/// only through `blob_proxy` and `table_proxy`, `b` directly. Both share a
/// lease container and a table prefix of their own.
struct Candidates {
    a: Store,
    b: Store,
    blob_proxy: FaultProxy,
    table_proxy: FaultProxy,
    lease: String,
}

impl Candidates {
    /// Cuts candidate A off (requests and replies swallowed) or restores it.
    fn set_blackhole(&self, on: bool) {
        self.blob_proxy.set_blackhole(on);
        self.table_proxy.set_blackhole(on);
    }
}

/// `None`: no Azurite.
async fn candidates(test: &str) -> Option<Candidates> {
    let conn = azurite::azurite_connection_string()?;
    let settings = ConnectionSettings::parse(&conn).expect("parses");
    let blob_proxy = FaultProxy::start(loopback(&settings.blob_endpoint), 0xb10b)
        .await
        .expect("blob proxy");
    let table_proxy = FaultProxy::start(loopback(&settings.table_endpoint), 0x7ab1e)
        .await
        .expect("table proxy");
    let via_proxy = rewrite_endpoint(&conn, "BlobEndpoint", blob_proxy.addr(), &settings.account);
    let via_proxy = rewrite_endpoint(
        &via_proxy,
        "TableEndpoint",
        table_proxy.addr(),
        &settings.account,
    );
    let names = azurite::unique_names(test);
    let store = |conn: &str, owner: &str| {
        // Short request timeouts and few retries, so that requests into the
        // blackhole (the release after the loss, campaigning) give up soon.
        let retry = AzureRetry::new()
            .with_max_retries(2)
            .with_initial_delay(Duration::from_millis(5))
            .with_max_delay(Duration::from_millis(50))
            .with_request_timeout(Duration::from_secs(1));
        let backend = AzureBackend::builder()
            .connection_string(conn)
            .expect("parses")
            .transport_retry(retry)
            .build()
            .expect("builds");
        let leases = LeaseOptions::new()
            .with_duration(LEASE)
            .with_renew_interval(Duration::from_secs(5))
            .with_drift_margin(DRIFT)
            .with_poll_interval(Duration::from_millis(500))
            .with_container(names.container("leases"))
            .with_owner(owner);
        Store::builder(backend)
            .table_prefix(names.prefix())
            .expect("prefix")
            .lease_options(leases)
            .build()
            .expect("store")
    };
    Some(Candidates {
        a: store(&via_proxy, "candidate-a"),
        b: store(&conn, "candidate-b"),
        blob_proxy,
        table_proxy,
        lease: format!("{}-leader", names.prefix()),
    })
}

/// What the candidates' leader tasks report.
#[derive(Debug)]
enum Event {
    /// A term began: the leader's task runs.
    Leading {
        who: &'static str,
        at: Instant,
        epoch: u64,
    },
    /// A term's token fired. `deadline`: the latest local validity deadline
    /// seen during the term (send time of the last successful acquire or
    /// renew + duration − drift margin); the service cannot expire the lease
    /// before `deadline + DRIFT`.
    TokenFired {
        who: &'static str,
        at: Instant,
        deadline: Instant,
    },
    /// A fenced write was attempted.
    Wrote {
        who: &'static str,
        epoch: u64,
        outcome: leasehold::Result<Fence>,
    },
    /// Candidate A read the fenced entity and now holds its ETag.
    ReadFenced { epoch: u64 },
}

/// Runs one term of `who`: reports its start, then, until its token fires,
/// tracks the lease's local deadline, and reports the token firing.
async fn lead_until_lost(
    who: &'static str,
    ctx: LeaderContext,
    events: mpsc::UnboundedSender<Event>,
) {
    let start = Instant::now();
    let _ = events.send(Event::Leading {
        who,
        at: start,
        epoch: ctx.epoch(),
    });
    let mut deadline = start;
    loop {
        // `now` before the read: `now + remaining` never overstates the
        // deadline.
        let now = Instant::now();
        let remaining = ctx.lease().remaining();
        if ctx.cancellation_token().is_cancelled() {
            break;
        }
        deadline = deadline.max(now + remaining);
        tokio::select! {
            () = ctx.cancelled() => break,
            () = sleep(Duration::from_millis(20)) => {}
        }
    }
    let _ = events.send(Event::TokenFired {
        who,
        at: Instant::now(),
        deadline,
    });
}

/// Waits for the next event (up to `within`).
async fn next_event(rx: &mut mpsc::UnboundedReceiver<Event>, within: Duration) -> Event {
    timeout(within, rx.recv())
        .await
        .expect("an event in time")
        .expect("the channel is open")
}

/// Leader A's store is cut off by a blackhole: A's leadership token fires
/// before A's lease could have expired at the service, then B is elected,
/// and the two terms do not overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blackholed_leader_steps_down_before_its_lease_expires_and_another_is_elected() {
    let Some(c) = candidates("stepdown").await else {
        return;
    };
    let (tx, mut rx) = mpsc::unbounded_channel();

    let a = c.a.clone();
    let (lease, events) = (c.lease.clone(), tx.clone());
    let a_task = tokio::spawn(async move {
        let once = LeaderOptions::new().with_campaign_again(false);
        a.leases()
            .run_as_leader(&lease, once, |ctx| {
                lead_until_lost("A", ctx, events.clone())
            })
            .await
    });
    let Event::Leading {
        who: "A",
        epoch: a_epoch,
        ..
    } = next_event(&mut rx, Duration::from_secs(10)).await
    else {
        panic!("A did not become leader first");
    };

    let b = c.b.clone();
    let stop_b = CancellationToken::new();
    let (lease, events) = (c.lease.clone(), tx.clone());
    let b_options = LeaderOptions::new()
        .with_campaign_again(false)
        .with_stop(stop_b.clone());
    let b_task = tokio::spawn(async move {
        b.leases()
            .run_as_leader(&lease, b_options, |ctx| {
                lead_until_lost("B", ctx, events.clone())
            })
            .await
    });
    // Let B campaign against A's lease for a moment.
    sleep(Duration::from_millis(500)).await;

    c.set_blackhole(true);
    let blackhole_at = Instant::now();

    let Event::TokenFired {
        who: "A",
        at: a_end,
        deadline: a_deadline,
    } = next_event(&mut rx, LEASE + Duration::from_secs(5)).await
    else {
        panic!("A's token did not fire first");
    };
    let Event::Leading {
        who: "B",
        at: b_start,
        epoch: b_epoch,
    } = next_event(&mut rx, LEASE + Duration::from_secs(10)).await
    else {
        panic!("B did not become leader");
    };

    eprintln!(
        "blackhole +0; A's deadline {:?}, A's token {:?}, B leads {:?}",
        a_deadline - blackhole_at,
        a_end - blackhole_at,
        b_start - blackhole_at
    );
    // A stepped down within the lease duration of the blackhole's start...
    let a_lag = a_end - blackhole_at;
    assert!(
        a_lag < LEASE,
        "A's token fired {a_lag:?} after the blackhole"
    );
    // ... and before the earliest moment the service could expire its lease
    // (the send time of its last successful acquire or renew + duration).
    let service_expiry = a_deadline + DRIFT;
    assert!(
        a_end < service_expiry,
        "A's token fired {:?} after the service may have expired its lease",
        a_end - service_expiry
    );
    // The terms do not overlap, and B's epoch fences A's.
    assert!(
        a_end < b_start,
        "A led until {:?} after B began",
        a_end - b_start
    );
    assert!(b_epoch > a_epoch, "epochs A {a_epoch}, B {b_epoch}");

    stop_b.cancel();
    timeout(Duration::from_secs(10), b_task)
        .await
        .expect("B steps down")
        .expect("B's task")
        .expect("B's campaign");
    let Event::TokenFired { who: "B", .. } = next_event(&mut rx, Duration::from_secs(1)).await
    else {
        panic!("B's token did not fire when stopped");
    };
    c.set_blackhole(false);
    timeout(Duration::from_secs(15), a_task)
        .await
        .expect("A's campaign ends")
        .expect("A's task")
        .expect("A's campaign");
}

// ---- Fencing epochs checked by conditional writes ------------------------

/// An entity written only by leaders, stamped with their fencing epoch.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "ProxyFenced")]
struct Fenced {
    #[entity(partition_key)]
    pk: String,
    #[entity(row_key)]
    rk: String,
    epoch: i64,
    writer: String,
}

/// What a fenced write did.
#[derive(Debug)]
enum Fence {
    /// Written with the leader's epoch.
    Written,
    /// The stored epoch is newer: a later leader wrote; this one stops.
    Superseded { stored: i64 },
}

/// Reads the fenced entity and checks that its epoch is not newer than
/// `epoch`; `None` (superseded) when it is.
async fn fenced_read(
    table: &Table<Fenced>,
    epoch: u64,
) -> leasehold::Result<Result<Versioned<Fenced>, Fence>> {
    let current = table
        .get("p", "r")
        .await?
        .expect("the fenced entity exists");
    let stored = current.entity().epoch;
    if stored > i64::try_from(epoch).expect("a small epoch") {
        return Ok(Err(Fence::Superseded { stored }));
    }
    Ok(Ok(current))
}

/// Writes `epoch` and `who` over `read` with its ETag: a conflict when the
/// entity changed since.
async fn fenced_replace(
    table: &Table<Fenced>,
    read: &Versioned<Fenced>,
    epoch: u64,
    who: &str,
) -> leasehold::Result<Fence> {
    let mine = Fenced {
        epoch: i64::try_from(epoch).expect("a small epoch"),
        writer: who.to_owned(),
        ..read.entity().clone()
    };
    table
        .replace(&Versioned::new(mine, read.etag().clone(), read.timestamp()))
        .await?;
    Ok(Fence::Written)
}

/// A fenced write: read, check the epoch, replace with the ETag read;
/// conflicts are retried from the read.
async fn fenced_write(table: &Table<Fenced>, epoch: u64, who: &str) -> leasehold::Result<Fence> {
    loop {
        let read = match fenced_read(table, epoch).await? {
            Ok(read) => read,
            Err(superseded) => return Ok(superseded),
        };
        match fenced_replace(table, &read, epoch, who).await {
            Err(e) if e.kind() == ErrorKind::Conflict => continue,
            outcome => return outcome,
        }
    }
}

/// Leader A reads the fenced entity, is cut off, and (like a paused process
/// that did not look at its token) writes only after B has taken over and
/// written with its newer epoch: A's write is refused and B's stands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_leaders_fenced_write_is_refused_after_a_new_leader_wrote() {
    let Some(c) = candidates("fencing").await else {
        return;
    };
    c.b.table::<Fenced>()
        .insert(Fenced {
            pk: "p".into(),
            rk: "r".into(),
            epoch: 0,
            writer: "nobody".into(),
        })
        .await
        .expect("insert");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let go_a = CancellationToken::new();

    let a = c.a.clone();
    let (lease, events, go) = (c.lease.clone(), tx.clone(), go_a.clone());
    let a_task = tokio::spawn(async move {
        let once = LeaderOptions::new().with_campaign_again(false);
        let table = a.table::<Fenced>();
        a.leases()
            .run_as_leader(&lease, once, |ctx| {
                let (table, events, go) = (table.clone(), events.clone(), go.clone());
                async move {
                    let epoch = ctx.epoch();
                    let read = fenced_read(&table, epoch)
                        .await
                        .expect("A reads")
                        .expect("nothing newer than A's first term");
                    let _ = events.send(Event::ReadFenced { epoch });
                    go.cancelled().await;
                    let outcome = fenced_replace(&table, &read, epoch, "A").await;
                    let _ = events.send(Event::Wrote {
                        who: "A",
                        epoch,
                        outcome,
                    });
                    // Now A looks again: it sees the newer epoch and stops.
                    let again = fenced_write(&table, epoch, "A").await;
                    let _ = events.send(Event::Wrote {
                        who: "A",
                        epoch,
                        outcome: again,
                    });
                }
            })
            .await
    });
    let Event::ReadFenced { epoch: a_epoch } = next_event(&mut rx, Duration::from_secs(10)).await
    else {
        panic!("A did not become leader and read first");
    };

    // A holds a stale ETag and epoch from here on.
    c.set_blackhole(true);
    let b = c.b.clone();
    let stop_b = CancellationToken::new();
    let (lease, events) = (c.lease.clone(), tx.clone());
    let b_options = LeaderOptions::new()
        .with_campaign_again(false)
        .with_stop(stop_b.clone());
    let b_task = tokio::spawn(async move {
        let table = b.table::<Fenced>();
        b.leases()
            .run_as_leader(&lease, b_options, |ctx| {
                let (table, events) = (table.clone(), events.clone());
                async move {
                    let epoch = ctx.epoch();
                    let outcome = fenced_write(&table, epoch, "B").await;
                    let _ = events.send(Event::Wrote {
                        who: "B",
                        epoch,
                        outcome,
                    });
                    ctx.cancelled().await;
                }
            })
            .await
    });
    let Event::Wrote {
        who: "B",
        epoch: b_epoch,
        outcome: b_outcome,
    } = next_event(&mut rx, LEASE + Duration::from_secs(10)).await
    else {
        panic!("B did not write next");
    };
    assert!(
        matches!(b_outcome, Ok(Fence::Written)),
        "B's write: {b_outcome:?}"
    );
    assert!(b_epoch > a_epoch, "epochs A {a_epoch}, B {b_epoch}");

    // A comes back and writes with what it read before the blackhole.
    c.set_blackhole(false);
    go_a.cancel();
    let Event::Wrote {
        who: "A",
        outcome: a_outcome,
        ..
    } = next_event(&mut rx, Duration::from_secs(10)).await
    else {
        panic!("A did not write");
    };
    let e = a_outcome.expect_err("A's stale write was accepted");
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e:?}");
    let Event::Wrote {
        who: "A",
        outcome: a_again,
        ..
    } = next_event(&mut rx, Duration::from_secs(10)).await
    else {
        panic!("A did not look again");
    };
    let b_stored = i64::try_from(b_epoch).expect("a small epoch");
    assert!(
        matches!(a_again, Ok(Fence::Superseded { stored }) if stored == b_stored),
        "A's second attempt: {a_again:?}"
    );

    let stored =
        c.b.table::<Fenced>()
            .get("p", "r")
            .await
            .expect("get")
            .expect("exists")
            .into_inner();
    assert_eq!(
        stored,
        Fenced {
            pk: "p".into(),
            rk: "r".into(),
            epoch: b_stored,
            writer: "B".into(),
        }
    );

    stop_b.cancel();
    timeout(Duration::from_secs(10), b_task)
        .await
        .expect("B steps down")
        .expect("B's task")
        .expect("B's campaign");
    timeout(Duration::from_secs(10), a_task)
        .await
        .expect("A's campaign ends")
        .expect("A's task")
        .expect("A's campaign");
}
