//! Section 6, declarative indexes: the requests and latency of a write that
//! keeps a unique index (a claim on the value, then the entity's write),
//! next to the same write of a type without indexes, and next to the
//! claim-row pattern written by hand (an insert of a row keyed by the
//! value, then the entity's insert).

use std::collections::BTreeMap;

use leasehold::Entity;
use leasehold::backend::Op;
use uuid::Uuid;

use crate::Res;
use crate::report::Report;
use crate::setup::{Env, abab};
use crate::stats::{median, percentile};

/// A customer whose e-mail is unique.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "BenchIndexed")]
struct Indexed {
    #[entity(partition_key)]
    pk: String,
    #[entity(row_key)]
    rk: String,
    #[entity(unique)]
    email: String,
    note: String,
}

/// The same customer without an index.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "BenchPlain")]
struct Plain {
    #[entity(partition_key)]
    pk: String,
    #[entity(row_key)]
    rk: String,
    email: String,
    note: String,
}

/// A hand-written claim on an e-mail: a row keyed by the value.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "BenchClaims", row_key = "claim")]
struct HandClaim {
    #[entity(partition_key)]
    email: String,
    owner: String,
}

fn work(after: &BTreeMap<Op, u64>, before: &BTreeMap<Op, u64>) -> u64 {
    after
        .iter()
        .filter(|(op, _)| !op.is_setup())
        .map(|(op, n)| n - before.get(op).copied().unwrap_or(0))
        .sum()
}

pub(crate) async fn indexes(env: &Env, report: &mut Report) -> Res<()> {
    const SECTION: &str = "6 indexes";
    let (store, counter) = env.counted_store();
    let indexed = store.table::<Indexed>();
    let plain = store.table::<Plain>();
    let claims = store.table::<HandClaim>();
    let run = Uuid::new_v4().simple().to_string();
    let pk = format!("ix-{run}");
    let make = |i: usize, tag: &str| Indexed {
        pk: pk.clone(),
        rk: format!("{tag}{i}"),
        email: format!("{tag}{i}-{run}@example.com"),
        note: String::new(),
    };
    let flat = |c: Indexed| Plain {
        pk: c.pk,
        rk: c.rk,
        email: c.email,
        note: c.note,
    };
    let claim = |c: &Indexed| HandClaim {
        email: c.email.clone(),
        owner: format!("{} {}", c.pk, c.rk),
    };
    // Warm-up: tables and pools.
    for i in 0..3 {
        indexed.insert(make(i, "w")).await?;
        plain.insert(flat(make(i, "w"))).await?;
        claims.insert(claim(&make(i, "w"))).await?;
    }
    let n = env.n(30);

    // Requests per write, counted on their own.
    let per = |before: &BTreeMap<Op, u64>, counter: &leasehold::testing::RequestCounter| {
        work(&counter.snapshot(), before) as f64 / n as f64
    };
    let before = counter.snapshot();
    for i in 0..n {
        indexed.insert(make(i, "c")).await?;
    }
    let insert_requests = per(&before, &counter);
    let before = counter.snapshot();
    for i in 0..n {
        plain.insert(flat(make(i, "c"))).await?;
    }
    let plain_insert_requests = per(&before, &counter);
    let before = counter.snapshot();
    for i in 0..n {
        let mut c = indexed
            .get(pk.as_str(), format!("c{i}"))
            .await?
            .expect("inserted");
        c.email = format!("moved{i}-{run}@example.com");
        indexed.replace(&c).await?;
    }
    let change_requests = per(&before, &counter) - 1.0; // less the get
    let before = counter.snapshot();
    for i in 0..n {
        let mut c = indexed
            .get(pk.as_str(), format!("c{i}"))
            .await?
            .expect("inserted");
        c.note = "same e-mail".into();
        indexed.replace(&c).await?;
    }
    let same_requests = per(&before, &counter) - 1.0;

    // Latency, interleaved with the plain write.
    let (ix_ms, plain_ms) = abab(
        n,
        |i| {
            let (t, c) = (indexed.clone(), make(i, "t"));
            async move {
                t.insert(c).await.expect("indexed insert");
            }
        },
        |i| {
            let (t, c) = (plain.clone(), flat(make(i, "t")));
            async move {
                t.insert(c).await.expect("plain insert");
            }
        },
    )
    .await;
    let (ix_m, plain_m) = (median(&ix_ms), median(&plain_ms));
    report.row(
        SECTION,
        "insert with a unique index vs plain insert",
        format!(
            "{ix_m:.2} ms (p90 {:.2}), {insert_requests:.1} requests",
            percentile(&ix_ms, 0.9)
        ),
        format!("{plain_m:.2} ms, {plain_insert_requests:.1} request"),
        ix_m / plain_m,
        Some(2.5),
        None,
        "the claim and the entity's insert are two sequential round trips",
    );
    let (ix_ms, hand_ms) = abab(
        n,
        |i| {
            let (t, c) = (indexed.clone(), make(i, "h"));
            async move {
                t.insert(c).await.expect("indexed insert");
            }
        },
        |i| {
            let (claims, t, c) = (claims.clone(), plain.clone(), make(i, "h"));
            let row = claim(&c);
            async move {
                claims.insert(row).await.expect("hand-written claim");
                t.insert(flat(c)).await.expect("plain insert");
            }
        },
    )
    .await;
    let (ix_m, hand_m) = (median(&ix_ms), median(&hand_ms));
    report.row(
        SECTION,
        "insert with a unique index vs hand-written claim row + insert",
        format!("{ix_m:.2} ms, {insert_requests:.1} requests"),
        format!("{hand_m:.2} ms, 2 requests"),
        ix_m / hand_m,
        None,
        None,
        "",
    );
    let (chg_ms, plain_ms) = abab(
        n,
        |i| {
            let (t, pk, run) = (indexed.clone(), pk.clone(), run.clone());
            async move {
                let mut c = t.get(pk.as_str(), format!("t{i}")).await.unwrap().unwrap();
                c.email = format!("t{i}-again-{run}@example.com");
                t.replace(&c).await.expect("indexed change");
            }
        },
        |i| {
            let (t, pk) = (plain.clone(), pk.clone());
            async move {
                let mut c = t.get(pk.as_str(), format!("t{i}")).await.unwrap().unwrap();
                c.email = format!("t{i}-again");
                t.replace(&c).await.expect("plain replace");
            }
        },
    )
    .await;
    let (chg_m, plain_m) = (median(&chg_ms), median(&plain_ms));
    report.row(
        SECTION,
        "get + replace changing the unique value vs plain get + replace",
        format!("{chg_m:.2} ms, {:.1} requests", change_requests + 1.0),
        format!("{plain_m:.2} ms, 2 requests"),
        chg_m / plain_m,
        Some(3.0),
        None,
        "the claim, the entity's write and the old claim's removal are three sequential round trips",
    );
    report.detail(format!(
        "Indexes: an insert claiming one unique value costs {insert_requests:.1} requests \
         (plain: {plain_insert_requests:.1}); a replace changing it {change_requests:.1}; \
         a replace leaving it alone {same_requests:.1} (the plain write). No write takes \
         a lock."
    ));
    Ok(())
}
