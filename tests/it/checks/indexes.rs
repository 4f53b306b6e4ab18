//! Declarative indexes: duplicates refused with nothing stored, values
//! freed by changes and deletes, lookups by value and range, concurrent
//! registrations, error paths that change nothing, and verify/rebuild of
//! index rows broken by a writer outside leasehold.

use super::lock_many::process;
use std::sync::Arc;

use futures_util::TryStreamExt as _;
use leasehold::backend::WriteOptions;
use leasehold::backend::{Precondition, TableOp};
use leasehold::entity::Entity as _;
use leasehold::key::TableName;
use leasehold::{Entity, EntityData, ErrorKind, PartitionKey, RowKey, Store};

crate::checks::checks! {

/// A customer whose e-mail is unique, whose phone (when given) is unique,
/// and who is looked up by city and age.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "IxCustomers")]
struct Customer {
    #[entity(partition_key)]
    region: String,
    #[entity(row_key)]
    id: String,
    #[entity(unique)]
    email: String,
    #[entity(unique)]
    phone: Option<String>,
    #[entity(index)]
    city: Option<String>,
    #[entity(index)]
    age: i64,
    note: String,
}

fn customer(region: &str, id: &str, email: &str) -> Customer {
    Customer {
        region: region.into(),
        id: id.into(),
        email: email.into(),
        phone: None,
        city: None,
        age: 30,
        note: String::new(),
    }
}

/// Every customer of the test, by (region, id).
async fn all(store: &Store) -> Vec<Customer> {
    let mut out: Vec<Customer> = store
        .table::<Customer>()
        .query()
        .all()
        .await
        .expect("query")
        .into_iter()
        .map(|v| v.into_inner())
        .collect();
    out.sort_by(|a, b| (&a.region, &a.id).cmp(&(&b.region, &b.id)));
    out
}

/// The index is exactly what the entities say: nothing missing, orphaned
/// or duplicated.
async fn consistent(store: &Store) {
    let report = store
        .table::<Customer>()
        .verify_indexes()
        .await
        .expect("verify");
    assert!(report.is_consistent(), "{report:?}");
}

fn email_of(v: &Option<leasehold::Versioned<Customer>>) -> Option<String> {
    v.as_ref().map(|c| c.id.clone())
}

/// A duplicate unique value is refused with `ValueTaken` naming the
/// type, field and value, through every write of `Table` and through a
/// unit, and nothing of the refused write is stored.
plain async fn duplicates_are_refused_with_nothing_stored(ctx) {
    let store = &ctx.store;
    let t = store.table::<Customer>();
    t.insert(customer("eu", "1", "ann@x.org"))
        .await
        .expect("first");
    let before = all(store).await;

    let e = t
        .insert(customer("us", "2", "ann@x.org"))
        .await
        .expect_err("duplicate e-mail");
    assert_eq!(e.kind(), ErrorKind::ValueTaken, "{e}");
    let text = e.to_string();
    for part in ["Customer", "email", "ann@x.org"] {
        assert!(text.contains(part), "{text} names {part}");
    }
    assert_eq!(all(store).await, before, "nothing stored");

    // An upsert and a replace onto the taken value are refused too.
    let e = t
        .upsert(customer("us", "2", "ann@x.org"))
        .await
        .expect_err("upsert");
    assert_eq!(e.kind(), ErrorKind::ValueTaken, "{e}");
    let mut bob = t
        .insert(customer("us", "2", "bob@x.org"))
        .await
        .expect("bob");
    let before = all(store).await;
    bob.email = "ann@x.org".into();
    let e = t.replace(&bob).await.expect_err("replace");
    assert_eq!(e.kind(), ErrorKind::ValueTaken, "{e}");
    let e = t.merge(&bob).await.expect_err("merge");
    assert_eq!(e.kind(), ErrorKind::ValueTaken, "{e}");
    assert_eq!(all(store).await, before, "nothing changed");

    // Through a unit holding the entity's partition only: no lock on the
    // value's index partition is needed.
    let carl = customer("eu", "3", "ann@x.org");
    let mut unit = store.lock("eu").await.expect("lock");
    unit.insert(&carl).expect("staged");
    let e = unit.commit().await.expect_err("duplicate in a unit");
    assert_eq!(e.kind(), ErrorKind::ValueTaken, "{e}");
    assert_eq!(all(store).await, before, "nothing stored by the unit");

    // Two writes of one unit claiming one value.
    let d1 = customer("eu", "4", "dup@x.org");
    let d2 = customer("us", "5", "dup@x.org");
    let mut unit = store.lock_many(["eu", "us"]).await.expect("lock");
    unit.insert(&d1).expect("staged");
    unit.insert(&d2).expect("staged");
    let e = unit.commit().await.expect_err("two claims");
    assert_eq!(e.kind(), ErrorKind::ValueTaken, "{e}");
    assert_eq!(all(store).await, before, "nothing stored");

    // Absent values are not indexed: any number may leave them empty.
    assert!(before.iter().all(|c| c.phone.is_none()));
    consistent(store).await;
}

/// A taken unique value and an existing row are told apart by kind: an
/// insert, a replace changing the value, and `update_with` changing it are
/// refused with `ValueTaken` (code `UniqueValueTaken`, naming the index,
/// the value, the entity table and the holder's keys) when another entity
/// holds the value (an insert onto existing keys too), and with
/// `AlreadyExists` (an insert onto existing keys with a free value) or
/// `Conflict` (a stale replace) for the row itself; nothing is stored.
plain async fn a_taken_value_and_an_existing_row_are_told_apart(ctx) {
    let store = &ctx.store;
    let t = store.table::<Customer>();
    let ann = t
        .insert(customer("eu", "1", "ann@x.org"))
        .await
        .expect("ann");
    let bob = t
        .insert(customer("us", "2", "bob@x.org"))
        .await
        .expect("bob");
    let before = all(store).await;
    let taken = |e: &leasehold::Error, what: &str| {
        assert_eq!(e.kind(), ErrorKind::ValueTaken, "{what}: {e}");
        assert_eq!(e.code(), Some("UniqueValueTaken"), "{what}: {e}");
        match e {
            leasehold::Error::ValueTaken {
                index,
                value,
                table,
                holder,
            } => {
                assert_eq!(index, "Customer.email", "{what}");
                assert_eq!(value, "\"ann@x.org\"", "{what}");
                assert_eq!(table, &format!("{}IxCustomers", ctx.prefix()), "{what}");
                let (pk, rk) = holder.as_deref().expect("the holder is named");
                assert_eq!((pk.as_str(), rk.as_str()), ("eu", "1"), "{what}");
            }
            other => panic!("{what}: {other:?}"),
        }
        let (pk, rk) = e.row().expect("row");
        assert_eq!((pk.as_str(), rk.as_str()), ("eu", "1"), "{what}");
    };

    // Insert: a new row with a taken value, then existing keys.
    let e = t
        .insert(customer("ap", "3", "ann@x.org"))
        .await
        .expect_err("value taken");
    taken(&e, "insert");
    let e = t
        .insert(customer("us", "2", "carl@x.org"))
        .await
        .expect_err("row exists");
    assert_eq!(e.kind(), ErrorKind::AlreadyExists, "{e}");
    assert_eq!(e.code(), Some("EntityAlreadyExists"), "{e}");
    // Both at once: the taken value is what is refused, naming its holder
    // (telling that the row exists too would cost a read).
    let e = t
        .insert(customer("us", "2", "ann@x.org"))
        .await
        .expect_err("row exists, value taken");
    taken(&e, "insert onto existing keys");

    // Replace changing the value: to a taken one, then a stale version.
    let mut onto = bob.clone();
    onto.email = "ann@x.org".into();
    let e = t.replace(&onto).await.expect_err("value taken");
    taken(&e, "replace");
    let mut newer = bob.clone();
    newer.note = "newer".into();
    let newer = t.replace(&newer).await.expect("plain replace");
    let mut stale = bob.clone();
    stale.email = "bob2@x.org".into();
    let e = t.replace(&stale).await.expect_err("stale");
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");

    // update_with: a taken value is refused at once, not retried.
    let e = t
        .update_with("us", "2", |c| c.email = "ann@x.org".into())
        .await
        .expect_err("value taken");
    taken(&e, "update_with");
    let e = t
        .update_with("zz", "none", |c| c.email = "zed@x.org".into())
        .await
        .expect_err("no row");
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");

    let mut after = before.clone();
    for c in &mut after {
        if c.id == "2" {
            c.note = "newer".into();
        }
    }
    assert_eq!(
        all(store).await,
        after,
        "nothing of a refused write is stored"
    );
    assert_eq!(newer.email, "bob@x.org");
    assert_eq!(ann.email, "ann@x.org");
    consistent(store).await;
}

/// Changing a value frees the old one and deleting the entity frees its
/// values; lookups follow every change; a unit can re-key an entity
/// keeping its value; writes that leave indexed values alone stay plain.
plain async fn value_changes_and_deletes_free_values(ctx) {
    let store = &ctx.store;
    let t = store.table::<Customer>();
    let c = Customer::columns();
    let mut ann = t
        .insert(customer("eu", "1", "ann@x.org"))
        .await
        .expect("ann");
    ann.email = "ann@y.org".into();
    let ann = t.replace(&ann).await.expect("change e-mail");
    assert_eq!(ann.email, "ann@y.org");
    // The old value is free again.
    t.insert(customer("us", "2", "ann@x.org"))
        .await
        .expect("old value reused");
    assert_eq!(
        email_of(&t.get_by(c.email, "ann@x.org").await.unwrap()),
        Some("2".into())
    );
    assert_eq!(
        email_of(&t.get_by(c.email, "ann@y.org").await.unwrap()),
        Some("1".into())
    );

    // A merge changing the value.
    let mut ann = t.get("eu", "1").await.unwrap().expect("ann");
    ann.email = "ann@z.org".into();
    let ann = t.merge(&ann).await.expect("merge");
    assert!(t.get_by(c.email, "ann@y.org").await.unwrap().is_none());
    t.insert(customer("us", "3", "ann@y.org"))
        .await
        .expect("freed by merge");

    // A write leaving the indexed values alone.
    let mut ann = ann;
    ann.note = "vip".into();
    let ann = t.replace(&ann).await.expect("plain replace");

    // Deleting frees the value.
    t.delete(&ann).await.expect("delete");
    assert!(t.get_by(c.email, "ann@z.org").await.unwrap().is_none());
    t.insert(customer("eu", "4", "ann@z.org"))
        .await
        .expect("freed by delete");
    t.delete_unconditionally("eu", "4").await.expect("delete");
    t.upsert(customer("eu", "5", "ann@z.org"))
        .await
        .expect("freed again");

    // A read-modify-write moving a value.
    let moved = t
        .update_with("eu", "5", |c| c.email = "eve@y.org".into())
        .await
        .expect("update_with");
    assert_eq!(moved.email, "eve@y.org");
    assert_eq!(
        email_of(&t.get_by(c.email, "eve@y.org").await.unwrap()),
        Some("5".into())
    );
    t.insert(customer("eu", "9", "ann@z.org"))
        .await
        .expect("freed by update_with");

    // Upserts move values too.
    t.upsert(customer("eu", "5", "eve@x.org"))
        .await
        .expect("upsert moves");
    t.insert(customer("eu", "6", "eve@y.org"))
        .await
        .expect("freed by upsert");

    // Optional unique values: absent for many, present for one.
    let mut p = customer("eu", "7", "p7@x.org");
    p.phone = Some("555".into());
    t.insert(p.clone()).await.expect("phone");
    let mut q = customer("eu", "8", "p8@x.org");
    q.phone = Some("555".into());
    let e = t.insert(q.clone()).await.expect_err("phone taken");
    assert_eq!(e.kind(), ErrorKind::ValueTaken, "{e}");
    assert!(e.to_string().contains("phone"), "{e}");
    let mut p = t.get("eu", "7").await.unwrap().expect("p");
    p.phone = None;
    t.replace(&p).await.expect("phone dropped");
    t.insert(q).await.expect("phone freed");

    // A unit re-keying an entity, keeping its e-mail: the delete frees the
    // value, the insert of the new row claims it.
    let old = t.get("us", "2").await.unwrap().expect("customer 2");
    let moved = Customer {
        region: "ap".into(),
        ..old.entity().clone()
    };
    let mut unit = store.lock_many(["us", "ap"]).await.expect("lock");
    unit.get_in::<Customer>("us", "2").await.expect("read");
    unit.delete(&old).expect("delete staged");
    unit.insert(&moved).expect("insert staged");
    unit.commit().await.expect("re-key");
    let holder = t.get_by(c.email, "ann@x.org").await.unwrap().expect("held");
    assert_eq!(holder.region, "ap");
    consistent(store).await;
}

/// Lookups by non-unique value and by range, in value order; lookups
/// through a column that is not indexed (or not unique, for `get_by`) are
/// refused before any request.
plain async fn lookups_by_value_and_range(ctx) {
    let store = &ctx.store;
    let t = store.table::<Customer>();
    let c = Customer::columns();
    for (i, (city, age)) in [
        (Some("Oslo"), 40),
        (Some("Rome"), -2),
        (Some("Oslo"), 7),
        (None, 12),
        (Some("Lima"), 7),
    ]
    .into_iter()
    .enumerate()
    {
        let mut x = customer("eu", &format!("c{i}"), &format!("c{i}@x.org"));
        x.city = city.map(Into::into);
        x.age = age;
        t.insert(x).await.expect("insert");
    }
    let mut oslo: Vec<String> = t
        .find_by(c.city, "Oslo")
        .map_ok(|v| v.id.clone())
        .try_collect()
        .await
        .expect("find");
    oslo.sort();
    assert_eq!(oslo, ["c0", "c2"]);
    let ages: Vec<i64> = t
        .find_range(c.age, -5..=12)
        .map_ok(|v| v.age)
        .try_collect()
        .await
        .expect("range");
    assert_eq!(ages.len(), 4);
    assert_eq!(ages[0], -2);
    assert!(ages.windows(2).all(|w| w[0] <= w[1]), "{ages:?}");
    let above: Vec<i64> = t
        .find_range(c.age, 8..)
        .map_ok(|v| v.age)
        .try_collect()
        .await
        .expect("range");
    assert_eq!(above, [12, 40]);
    let cities: Vec<Option<String>> = t
        .find_range(c.city, .."Oslo".to_owned())
        .map_ok(|v| v.city.clone())
        .try_collect()
        .await
        .expect("range");
    assert_eq!(cities, [Some("Lima".to_owned())]);

    let e = t.get_by(c.city, "Oslo").await.expect_err("not unique");
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    let e = t.get_by(c.note, "").await.expect_err("not indexed");
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert!(e.to_string().contains("note"), "{e}");
    let found: Vec<_> = t
        .find_by(c.email, "nobody@x.org")
        .try_collect()
        .await
        .expect("none");
    assert!(found.is_empty());
}

/// Refused calls change nothing: a stale replace, a unit not holding an
/// index partition (refused when staged, the staged writes unchanged), a
/// batch of an indexed type.
plain async fn error_paths_leave_state_unchanged(ctx) {
    let store = &ctx.store;
    let t = store.table::<Customer>();
    let ann = t
        .insert(customer("eu", "1", "ann@x.org"))
        .await
        .expect("ann");
    let mut newer = ann.clone();
    newer.note = "newer".into();
    t.replace(&newer).await.expect("newer");
    let before = all(store).await;
    let mut stale = ann.clone();
    stale.email = "other@x.org".into();
    let e = t.replace(&stale).await.expect_err("stale");
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    let e = t.delete(&ann).await.expect_err("stale delete");
    assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
    assert_eq!(all(store).await, before);
    assert!(
        t.get_by(Customer::columns().email, "other@x.org")
            .await
            .unwrap()
            .is_none()
    );

    // A unit needs no lock beyond the entity's partition; a taken value
    // fails its commit with nothing stored.
    let mut unit = store.lock("eu").await.expect("lock");
    unit.insert(&customer("eu", "9", "other@x.org"))
        .expect("staged");
    unit.insert(&customer("eu", "8", "ann@x.org"))
        .expect("staged");
    let e = unit.commit().await.expect_err("value taken");
    assert_eq!(e.kind(), ErrorKind::ValueTaken, "{e}");
    assert_eq!(all(store).await, before);
    // Two writes of one unit claiming one value; an upsert claiming a
    // taken one: refused at the commit, nothing stored.
    let mut unit = store.lock("eu").await.expect("lock");
    unit.insert(&customer("eu", "11", "twice@x.org"))
        .expect("staged");
    unit.insert(&customer("eu", "12", "twice@x.org"))
        .expect("staged");
    let e = unit.commit().await.expect_err("claimed twice");
    assert_eq!(e.kind(), ErrorKind::ValueTaken, "{e}");
    let mut unit = store.lock("eu").await.expect("lock");
    unit.upsert(&customer("eu", "13", "ann@x.org"))
        .expect("staged");
    let e = unit.commit().await.expect_err("upsert of a taken value");
    assert_eq!(e.kind(), ErrorKind::ValueTaken, "{e}");
    assert_eq!(all(store).await, before);
    assert!(
        t.get_by(Customer::columns().email, "twice@x.org")
            .await
            .unwrap()
            .is_none()
    );

    let e = t
        .batch()
        .insert(customer("eu", "10", "ten@x.org"))
        .commit()
        .await
        .expect_err("batch");
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    let e = t
        .insert(customer("eu", "1", "again@x.org"))
        .await
        .expect_err("row exists");
    assert_eq!(e.kind(), ErrorKind::AlreadyExists, "{e}");
    assert_eq!(all(store).await, before);
    consistent(store).await;
}

/// An indexed type written through a fenced table: the entity's write is
/// fenced (refused once a later epoch of the lease wrote the partition),
/// its claims are not; the index follows every fenced write.
plain async fn fenced_writes_of_an_indexed_type_are_fenced(ctx) {
    let store = &ctx.store;
    let t = store.table::<Customer>();
    let c = Customer::columns();
    let guard = store
        .leases()
        .acquire(
            &format!("{}/ix-fence", ctx.prefix()),
            std::time::Duration::from_secs(60),
        )
        .await
        .expect("lease");
    let fence = guard.fence().await.expect("fence");
    let fenced = t.fenced(&fence);
    let ann = fenced
        .insert(customer("eu", "1", "ann@x.org"))
        .await
        .expect("fenced insert");
    let mut changed = ann.clone();
    changed.email = "ann2@x.org".into();
    let changed = fenced.replace(&changed).await.expect("fenced replace");
    assert_eq!(
        email_of(&t.get_by(c.email, "ann2@x.org").await.unwrap()),
        Some("1".into())
    );
    assert!(t.get_by(c.email, "ann@x.org").await.unwrap().is_none());
    let e = fenced
        .insert(customer("eu", "2", "ann2@x.org"))
        .await
        .expect_err("taken");
    assert_eq!(e.kind(), ErrorKind::ValueTaken, "{e}");
    fenced.delete(&changed).await.expect("fenced delete");
    assert!(fenced.get("eu", "1").await.expect("read").is_none());
    assert!(t.get_by(c.email, "ann2@x.org").await.unwrap().is_none());
    t.insert(customer("us", "3", "ann2@x.org"))
        .await
        .expect("freed by the delete");
    guard.release().await.expect("release");
    consistent(store).await;
}

/// Sixteen concurrent registrations over four e-mails: exactly four
/// customers, one per e-mail, and the index matches.
timed async fn sixteen_concurrent_registrations_over_four_values_give_four(ctx) {
    let _turn = ctx.contention_turn().await;
    let store = &ctx.store;
    let mut tasks = Vec::new();
    for i in 0..16 {
        let t = store.table::<Customer>();
        tasks.push(tokio::spawn(async move {
            t.insert(customer(
                &format!("r{}", i % 3),
                &format!("c{i}"),
                &format!("v{}@x.org", i % 4),
            ))
            .await
        }));
    }
    let mut ok = 0;
    for task in tasks {
        match task.await.expect("task") {
            Ok(_) => ok += 1,
            Err(e) => assert_eq!(e.kind(), ErrorKind::ValueTaken, "{e}"),
        }
    }
    assert_eq!(ok, 4);
    let stored = all(store).await;
    assert_eq!(stored.len(), 4);
    let mut emails: Vec<&str> = stored.iter().map(|c| c.email.as_str()).collect();
    emails.sort();
    assert_eq!(emails, ["v0@x.org", "v1@x.org", "v2@x.org", "v3@x.org"]);
    consistent(store).await;
}

/// A writer outside leasehold breaks the index (an entity written without
/// its index row, an index row deleted, an orphan row, a row pointing at
/// the wrong entity); verify finds each, rebuild fixes them, and verify
/// then finds nothing. The operator's form (by table name) agrees.
plain async fn verify_and_rebuild_fix_orphans_and_missing_rows(ctx) {
    let store = &ctx.store;
    let t = store.table::<Customer>();
    let c = Customer::columns();
    for i in 0..4 {
        let mut x = customer("eu", &format!("c{i}"), &format!("c{i}@x.org"));
        x.city = Some("Oslo".into());
        t.insert(x).await.expect("insert");
    }
    let backend = store.backend();
    let table = TableName::new(format!("{}IxCustomers", ctx.prefix())).expect("name");
    let index = TableName::new(format!("{}IxCustomersIdx", ctx.prefix())).expect("name");
    // An entity written directly: its two index rows are missing.
    let outside = customer("us", "x", "outside@x.org");
    backend
        .execute(
            &table,
            TableOp::Insert(outside.encode().expect("encode")),
            &WriteOptions::new(),
        )
        .await
        .expect("outside write");
    // An e-mail changed directly: its row is an orphan, the new one missing.
    let mut c1 = t.get("eu", "c1").await.unwrap().expect("c1").into_inner();
    c1.email = "changed@x.org".into();
    backend
        .execute(
            &table,
            TableOp::Replace(c1.encode().expect("encode"), Precondition::Upsert),
            &WriteOptions::new(),
        )
        .await
        .expect("outside change");
    // A deleted index row.
    let rows = backend
        .query(&index, &Default::default())
        .await
        .expect("index rows");
    let c2_city = rows
        .entities
        .iter()
        .find(|r| {
            r.data.row_key.as_str().ends_with("c2")
                && r.data.partition_key.as_str().starts_with("city")
        })
        .expect("c2's city row")
        .data
        .clone();
    backend
        .execute(
            &index,
            TableOp::Delete {
                partition_key: c2_city.partition_key.clone(),
                row_key: c2_city.row_key.clone(),
                condition: Precondition::IfExists,
            },
            &WriteOptions::new(),
        )
        .await
        .expect("delete index row");
    // An orphan pointing at nothing.
    let mut props = leasehold::entity::Properties::new();
    props.insert(
        "EntityPartitionKey",
        leasehold::entity::Value::String("zz".into()),
    );
    props.insert(
        "EntityRowKey",
        leasehold::entity::Value::String("gone".into()),
    );
    backend
        .execute(
            &index,
            TableOp::Insert(EntityData {
                partition_key: PartitionKey::new("city Paris").expect("key"),
                row_key: RowKey::new("zz gone").expect("key"),
                properties: props,
            }),
            &WriteOptions::new(),
        )
        .await
        .expect("orphan");

    let report = t.verify_indexes().await.expect("verify");
    // outside: its e-mail and age (no city); c1: its new e-mail; c2: its
    // city.
    assert_eq!(report.missing.len(), 4, "{report:?}");
    // c1's old e-mail row and the Paris row name entities that do not
    // hold their values: stale, not inconsistent.
    assert!(report.orphans.is_empty(), "{report:?}");
    assert_eq!(report.stale, 2, "{report:?}");
    assert!(report.duplicates.is_empty(), "{report:?}");
    assert_eq!(report.entities, 5);
    let by_name = store
        .verify_indexes("IxCustomers", |_| {})
        .await
        .expect("verify by name");
    assert_eq!(by_name.missing.len(), report.missing.len());
    assert_eq!(by_name.orphans, report.orphans);
    assert_eq!(by_name.stale, report.stale);

    let mut seen = 0;
    let fixed = store
        .rebuild_indexes("IxCustomers", |n| seen = n)
        .await
        .expect("rebuild");
    assert_eq!(fixed.repaired, 6, "{fixed:?}");
    assert!(seen > 0);
    consistent(store).await;
    let again = t.rebuild_indexes().await.expect("again");
    assert_eq!(again.repaired, 0);
    assert_eq!(again.stale, 0, "{again:?}");
    assert_eq!(
        email_of(&t.get_by(c.email, "changed@x.org").await.unwrap()),
        Some("c1".into())
    );
    assert!(t.get_by(c.email, "c1@x.org").await.unwrap().is_none());
    // The freed value can be taken again.
    t.insert(customer("eu", "c9", "c1@x.org"))
        .await
        .expect("freed");
    let e = store
        .verify_indexes("NoSuchTable", |_| {})
        .await
        .expect_err("no definitions");
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    let _ = Arc::clone(backend);
}

/// No row of an index table has an empty partition or row key (Azure
/// Cosmos DB for Table refuses them): a unique value's claim has a
/// reserved row key, which `get_by` and `verify_indexes` find.
plain async fn index_rows_have_no_empty_keys(ctx) {
    let store = &ctx.store;
    let t = store.table::<Customer>();
    let mut ann = t
        .insert(customer("eu", "1", "ann@x.org"))
        .await
        .expect("ann");
    ann.phone = Some("555".into());
    let ann = t.replace(&ann).await.expect("phone");
    t.delete(&ann).await.expect("delete");
    t.insert(customer("eu", "2", "ann@x.org"))
        .await
        .expect("the claim taken over");
    let index_table = TableName::new(format!("{}IxCustomersIdx", ctx.prefix())).expect("name");
    let rows = leasehold::backend::TableBackend::query(
        &**store.backend(),
        &index_table,
        &leasehold::backend::QuerySpec::default(),
    )
    .await
    .expect("index rows");
    assert!(rows.entities.len() >= 3, "{:?}", rows.entities);
    for row in &rows.entities {
        assert!(
            !row.data.partition_key.as_str().is_empty() && !row.data.row_key.as_str().is_empty(),
            "an index row with an empty key: {:?}",
            row.data
        );
    }
    let c = Customer::columns();
    let found = t.get_by(c.email, "ann@x.org").await.expect("get_by");
    assert_eq!(email_of(&found), Some("2".into()));
    consistent(store).await;
}

/// A member whose e-mail is unique: one index, for the request budget.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "IxMembers")]
struct Member {
    #[entity(partition_key)]
    region: String,
    #[entity(row_key)]
    id: String,
    #[entity(unique)]
    email: String,
    note: String,
}

/// A member without a note.
fn member(region: &str, id: &str, email: &str) -> Member {
    Member {
        region: region.into(),
        id: id.into(),
        email: email.into(),
        note: String::new(),
    }
}

/// The request budget of indexed writes: claims first, then the entity's
/// row, no lock. An insert claiming a fresh value costs 2 requests, a
/// replace moving it 4 (the claim, the old claim's read, the write, the old
/// claim's removal), a replace or `update_with` leaving it alone the plain
/// write, a delete 1 (it leaves a tombstone, and its claim to the next
/// writer of the value), `get_by` 2. Taking over the claim a delete left
/// costs 4 more than a fresh claim.
plain async fn indexed_writes_cost_their_budget(ctx) {
    use leasehold::backend::Op;
    use leasehold::testing::{CountingBackend, RequestCounter};
    let counting = CountingBackend::new(ctx.backend().clone());
    let counter = counting.counter();
    let store = Store::builder_shared(Arc::new(counting))
        .table_prefix(ctx.prefix())
        .expect("valid prefix")
        .build()
        .expect("valid store");
    let t = store.table::<Member>();
    let c = Member::columns();
    let member = |id: &str, email: &str| member("eu", id, email);
    // Warm: the tables and the definitions.
    let w = t.insert(member("w1", "w@x.org")).await.expect("warm");
    t.delete(&w).await.expect("warm");
    let counts = |counter: &RequestCounter| -> (u64, Vec<(Op, u64)>) {
        let c: Vec<(Op, u64)> = counter
            .snapshot()
            .into_iter()
            .filter(|(op, _)| !op.is_setup())
            .collect();
        (c.iter().map(|(_, n)| n).sum(), c)
    };
    super::behind_the_answer(&counter).await;
    counter.reset();
    let ann = t.insert(member("1", "a@x.org")).await.expect("insert");
    assert_eq!(counts(&counter), (2, vec![(Op::Write, 2)]), "insert");
    super::behind_the_answer(&counter).await;
    counter.reset();
    let mut moved = ann.clone();
    moved.email = "b@x.org".into();
    let moved = t.replace(&moved).await.expect("move");
    assert_eq!(
        counts(&counter),
        (4, vec![(Op::Get, 1), (Op::Write, 3)]),
        "replace moving the value"
    );
    super::behind_the_answer(&counter).await;
    counter.reset();
    let mut same = moved.clone();
    same.note = "n".into();
    t.replace(&same).await.expect("same");
    assert_eq!(counts(&counter), (1, vec![(Op::Write, 1)]), "plain replace");
    // A read-modify-write leaving the value alone: its read and the plain
    // write.
    super::behind_the_answer(&counter).await;
    counter.reset();
    let same = t
        .update_with("eu", "1", |m| m.note = "m".into())
        .await
        .expect("update_with");
    assert_eq!(
        counts(&counter),
        (2, vec![(Op::Get, 1), (Op::Write, 1)]),
        "update_with"
    );
    super::behind_the_answer(&counter).await;
    counter.reset();
    let found = t.get_by(c.email, "b@x.org").await.expect("get_by");
    assert_eq!(found.map(|m| m.id.clone()), Some("1".into()));
    assert_eq!(counts(&counter), (2, vec![(Op::Get, 2)]), "get_by");
    super::behind_the_answer(&counter).await;
    counter.reset();
    t.delete(&same).await.expect("delete");
    assert_eq!(counts(&counter), (1, vec![(Op::Write, 1)]), "delete");
    // The value the delete left claimed: the claim's insert is refused,
    // the claim and its owner's tombstone are read, the tombstone touched,
    // the claim taken over, the entity inserted.
    super::behind_the_answer(&counter).await;
    counter.reset();
    t.insert(member("2", "b@x.org")).await.expect("reuse");
    assert_eq!(
        counts(&counter),
        (6, vec![(Op::Get, 2), (Op::Write, 4)]),
        "insert taking over a deleted entity's claim"
    );
    // The old value, freed by the move, is a fresh claim again.
    super::behind_the_answer(&counter).await;
    counter.reset();
    t.insert(member("3", "a@x.org")).await.expect("freed");
    assert_eq!(counts(&counter), (2, vec![(Op::Write, 2)]), "freed value");
    // An insert refused for a value another entity holds: the claim's
    // insert is refused, the claim and its holder are read, and the
    // refusal names the holder; nothing else is asked.
    super::behind_the_answer(&counter).await;
    counter.reset();
    let e = t
        .insert(member("4", "a@x.org"))
        .await
        .expect_err("value taken");
    assert_eq!(e.kind(), ErrorKind::ValueTaken, "{e}");
    assert_eq!(
        counts(&counter),
        (3, vec![(Op::Get, 2), (Op::Write, 1)]),
        "insert refused for a taken value"
    );
    consistent(&store).await;
}

/// A process dies at every request of an indexed write moving a value:
/// afterwards, once the entity's partition is locked again, the entity holds the old or the new value, lookups agree, and
/// the index has no orphan and no missing row.
timed async fn a_crash_at_every_step_of_an_indexed_write_leaves_a_consistent_index(ctx) {
    use leasehold::testing::FaultyBackend;
    let member = |email: &str| member("eu", "ann", email);
    let mut runs = Vec::new();
    for nth in 1..=24u64 {
        let prefix = format!("{}c{nth}", ctx.prefix());
        runs.push(async move {
            let healthy = process(ctx, ctx.backend().clone(), &prefix);
            let t = healthy.table::<Member>();
            t.insert(member("a@x.org")).await.expect("ann");
            // The lock blob exists before the crash run.
            healthy
                .lock("eu")
                .await
                .expect("lock")
                .abandon()
                .await
                .expect("abandon");
            let faulty = FaultyBackend::new(ctx.backend().clone());
            let injector = faulty.injector();
            let dying = process(ctx, Arc::new(faulty), &prefix);
            let mut ann = dying
                .table::<Member>()
                .get("eu", "ann")
                .await
                .expect("read before dying")
                .expect("ann");
            ann.email = "b@x.org".into();
            injector.die_at_nth(None, nth);
            let outcome = dying.table::<Member>().replace(&ann).await;
            tokio::time::sleep(ctx.lease_duration() * 2 + std::time::Duration::from_secs(1)).await;
            // Recovery: the entity's partition locked again.
            healthy
                .lock("eu")
                .await
                .expect("lock")
                .abandon()
                .await
                .expect("abandon");
            let now = t.get("eu", "ann").await.expect("read").expect("ann");
            let c = Member::columns();
            let (held, free) = if now.email == "a@x.org" {
                ("a@x.org", "b@x.org")
            } else {
                ("b@x.org", "a@x.org")
            };
            assert_eq!(
                t.get_by(c.email, held)
                    .await
                    .expect("lookup")
                    .map(|v| v.id.clone()),
                Some("ann".into()),
                "die at request {nth}"
            );
            assert!(
                t.get_by(c.email, free).await.expect("lookup").is_none(),
                "die at request {nth}"
            );
            let report = t.verify_indexes().await.expect("verify");
            assert!(report.is_consistent(), "die at request {nth}: {report:?}");
            if outcome.is_ok() {
                assert_eq!(now.email, "b@x.org", "die at request {nth}: reported done");
            }
            now.email == "b@x.org"
        });
    }
    let moved = futures_util::future::join_all(runs).await;
    assert!(moved.iter().any(|m| *m), "some crashes roll forward");
    assert!(moved.iter().any(|m| !*m), "some end before");
}

/// The write a fault run makes: through a `Table` or a `Unit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    Table,
    Unit,
}

/// What a fault run's write does to `ann` (region "eu").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    /// Insert ann with b@x.org, the value a deleted entity left claimed.
    Insert,
    /// Move ann from a@x.org to b@x.org (left claimed the same way).
    Move,
    /// Delete ann (holding a@x.org).
    Delete,
}

/// The unique-value invariant, as stored: no two entities (tombstones
/// aside) hold one e-mail; `get_by` answers each e-mail's holder, or
/// nothing when no entity holds it. Returns ann's e-mail, if ann exists.
async fn invariant(store: &Store, what: &str) -> Option<String> {
    let t = store.table::<Member>();
    let c = Member::columns();
    let members: Vec<Member> = t
        .query()
        .all()
        .await
        .expect("query")
        .into_iter()
        .map(|v| v.into_inner())
        .collect();
    for email in ["a@x.org", "b@x.org"] {
        let holders: Vec<&str> = members
            .iter()
            .filter(|m| m.email == email)
            .map(|m| m.id.as_str())
            .collect();
        assert!(holders.len() <= 1, "{what}: {email} held by {holders:?}");
        let found = t.get_by(c.email, email).await.expect("lookup");
        assert_eq!(
            found.map(|m| m.id.clone()),
            holders.first().map(|h| (*h).to_owned()),
            "{what}: get_by({email})"
        );
    }
    members
        .iter()
        .find(|m| m.id == "ann")
        .map(|m| m.email.clone())
}

/// A process dies (and, separately, loses a reply) at each request of an
/// indexed insert, value change and delete, through a `Table` and through
/// a `Unit`: every run is checked against the invariant right after the
/// fault, so the state after every request of each write is checked.
/// Then a healthy process takes the value over where ann does not hold
/// it, every stale claim is finished by that write or lookup, and
/// `verify_indexes` finds nothing missing or orphaned. A write reported
/// done is applied.
timed async fn a_crash_or_lost_reply_at_every_request_keeps_the_index_invariant(ctx) {
    use leasehold::testing::{Fault, FaultyBackend};
    // More than any of the writes sends: a unit's include its lock's.
    let requests = |via: Via| match via {
        Via::Table => 12u64,
        Via::Unit => 20,
    };
    let mut runs = Vec::new();
    let mut groups = Vec::new();
    for via in [Via::Table, Via::Unit] {
        for change in [Change::Insert, Change::Move, Change::Delete] {
            for fault in [Fault::Die, Fault::LoseReply] {
                groups.push((format!("{via:?} {change:?} {fault:?}"), requests(via)));
                for nth in 1..=requests(via) {
                    let prefix = format!(
                        "{}f{}{}{}{nth}",
                        ctx.prefix(),
                        via as u8,
                        change as u8,
                        u8::from(fault == Fault::Die)
                    );
                    let what = format!("{via:?} {change:?}, {fault:?} at request {nth}");
                    runs.push(async move {
                        let healthy = process(ctx, ctx.backend().clone(), &prefix);
                        let t = healthy.table::<Member>();
                        // b@x.org is left claimed by a deleted entity.
                        let old = t.insert(member("us", "old", "b@x.org")).await.expect("old");
                        t.delete(&old).await.expect("delete old");
                        if change != Change::Insert {
                            t.insert(member("eu", "ann", "a@x.org")).await.expect("ann");
                        }
                        let faulty = FaultyBackend::new(ctx.backend().clone());
                        let injector = faulty.injector();
                        let dying = process(ctx, Arc::new(faulty), &prefix);
                        let d = dying.table::<Member>();
                        let current = match change {
                            Change::Insert => None,
                            _ => Some(d.get("eu", "ann").await.expect("read").expect("ann")),
                        };
                        injector.inject(None, nth, fault);
                        let outcome: leasehold::Result<()> = match (via, change, current) {
                            (Via::Table, Change::Insert, _) => {
                                d.insert(member("eu", "ann", "b@x.org")).await.map(|_| ())
                            }
                            (Via::Table, Change::Move, Some(mut ann)) => {
                                ann.email = "b@x.org".into();
                                d.replace(&ann).await.map(|_| ())
                            }
                            (Via::Table, Change::Delete, Some(ann)) => d.delete(&ann).await,
                            (Via::Unit, change, current) => {
                                async {
                                    let mut unit = dying.lock("eu").await?;
                                    match (change, current) {
                                        (Change::Insert, _) => {
                                            unit.insert(&member("eu", "ann", "b@x.org"))?
                                        }
                                        (Change::Move, Some(mut ann)) => {
                                            ann.email = "b@x.org".into();
                                            unit.replace(&ann)?
                                        }
                                        (_, Some(ann)) => unit.delete(&ann)?,
                                        (_, None) => unreachable!("ann is read first"),
                                    }
                                    unit.commit().await.map(|_| ())
                                }
                                .await
                            }
                            _ => unreachable!("ann is read first"),
                        };
                        let fired = injector.injected() > 0;
                        // Right after the fault: the invariant holds.
                        let ann_now = invariant(&healthy, &what).await;
                        if outcome.is_ok() {
                            let want = match change {
                                Change::Delete => None,
                                _ => Some("b@x.org".to_owned()),
                            };
                            assert_eq!(ann_now, want, "{what}: reported done");
                        }
                        // A dead unit's lock runs out before anyone else
                        // may finish its commit.
                        if via == Via::Unit && fault == Fault::Die && fired {
                            tokio::time::sleep(ctx.lease_duration() + ctx.slack()).await;
                        }
                        // Recovery: a healthy writer takes b@x.org unless
                        // ann holds it; a@x.org is free unless ann holds it.
                        let bob = t.insert(member("us", "bob", "b@x.org")).await;
                        match (&ann_now, bob) {
                            (Some(e), Err(err)) if e == "b@x.org" => {
                                assert_eq!(err.kind(), ErrorKind::ValueTaken, "{what}: {err}")
                            }
                            (_, Ok(_)) => {}
                            (_, Err(err)) => panic!("{what}: bob: {err}"),
                        }
                        let ann_after = invariant(&healthy, &what).await;
                        assert_eq!(ann_after, ann_now, "{what}: recovery moved ann");
                        let report = t.verify_indexes().await.expect("verify");
                        assert!(
                            report.missing.is_empty() && report.orphans.is_empty(),
                            "{what}: {report:?}"
                        );
                        assert!(report.is_consistent(), "{what}: {report:?}");
                        (fired, outcome.is_ok())
                    });
                }
            }
        }
    }
    // Side by side (a dead unit's run waits out its lease), a few dozen at
    // a time.
    use futures_util::StreamExt as _;
    let results: Vec<(bool, bool)> = futures_util::stream::iter(runs)
        .buffered(24)
        .collect()
        .await;
    // Every write both failed at some request and finished within the
    // requests tried (the last runs saw no fault).
    let mut results = results.as_slice();
    for (group, n) in groups {
        let (chunk, rest) = results.split_at(n as usize);
        results = rest;
        assert!(chunk.iter().any(|(fired, _)| *fired), "{group}");
        assert!(
            chunk.iter().any(|(fired, ok)| !*fired && *ok),
            "{group}: {chunk:?}"
        );
    }
}

/// Writer A claims a value for its entity and stalls before writing the
/// entity; writers B and C race for the same value meanwhile. Exactly one
/// of them gets it (the stalled owner is neutralized), and A's entity
/// write, sent when it wakes, is refused: never two holders.
timed async fn writers_racing_for_a_stalled_owners_value_leave_one_holder(ctx) {
    use leasehold::backend::Op;
    use leasehold::testing::{Fault, FaultyBackend};
    let prefix = format!("{}st", ctx.prefix());
    let healthy = Store::builder_shared(ctx.backend().clone())
        .table_prefix(prefix.as_str())
        .expect("prefix")
        .build()
        .expect("store");
    let t = healthy.table::<Member>();
    // Tables and definitions exist, so A's first write is its claim.
    let w = t.insert(member("eu", "w", "w@x.org")).await.expect("warm");
    t.delete(&w).await.expect("warm");
    let faulty = FaultyBackend::new(ctx.backend().clone());
    let injector = faulty.injector();
    let a_store = Store::builder_shared(Arc::new(faulty))
        .table_prefix(prefix.as_str())
        .expect("prefix")
        .build()
        .expect("store");
    // A's second write (its entity's insert) waits.
    let stall = ctx.lease_duration();
    injector.inject(Some(Op::Write), 2, Fault::Delay(stall));
    let a = a_store.table::<Member>();
    let a_write = tokio::spawn(async move { a.insert(member("eu", "a", "v@x.org")).await });
    // Let A's claim land.
    tokio::time::sleep(stall / 4).await;
    let (b, c) = tokio::join!(
        t.insert(member("eu", "b", "v@x.org")),
        t.insert(member("eu", "c", "v@x.org"))
    );
    let a = a_write.await.expect("joined");
    let won: Vec<&str> = [("a", a.is_ok()), ("b", b.is_ok()), ("c", c.is_ok())]
        .into_iter()
        .filter(|(_, ok)| *ok)
        .map(|(w, _)| w)
        .collect();
    assert_eq!(won.len(), 1, "a: {a:?}, b: {b:?}, c: {c:?}");
    assert_ne!(won[0], "a", "the stalled owner was neutralized: {a:?}");
    let e = a.expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::ValueTaken, "{e}");
    let holders: Vec<String> = t
        .query()
        .all()
        .await
        .expect("query")
        .into_iter()
        .filter(|m| m.email == "v@x.org")
        .map(|m| m.id.clone())
        .collect();
    assert_eq!(holders, [won[0]]);
    let found = t
        .get_by(Member::columns().email, "v@x.org")
        .await
        .expect("lookup");
    assert_eq!(found.map(|m| m.id.clone()), Some(won[0].to_owned()));
    let report = t.verify_indexes().await.expect("verify");
    assert!(report.is_consistent(), "{report:?}");
}

/// A unit re-keys ann (deletes her, inserts ann2 with her e-mail) beside an
/// insert over an existing row, so its commit fails after it claimed the
/// e-mail for ann2: the claim names ann2, and ann, who still holds the
/// e-mail, as the entity the unit frees. A plain write at ann2 with that
/// e-mail finds the claim naming itself; it is refused because ann holds
/// the value, not handed the claim, and ann keeps it.
plain async fn a_failed_units_claim_naming_the_writer_still_guards_its_freed_holder(ctx) {
    let prefix = format!("{}fu", ctx.prefix());
    let store = process(ctx, ctx.backend().clone(), &prefix);
    let t = store.table::<Member>();
    let ann = t.insert(member("eu", "ann", "a@x.org")).await.expect("ann");
    t.insert(member("eu", "zed", "z@x.org")).await.expect("zed");
    let mut unit = store.lock("eu").await.expect("lock");
    unit.delete(&ann).expect("staged");
    unit.insert(&member("eu", "ann2", "a@x.org"))
        .expect("staged");
    unit.insert(&member("eu", "zed", "z@x.org"))
        .expect("staged");
    let e = unit.commit().await.expect_err("zed exists");
    match &e {
        leasehold::Error::Batch { source, .. } => {
            assert_eq!(source.kind(), ErrorKind::AlreadyExists, "{e}");
        }
        _ => assert_eq!(e.kind(), ErrorKind::AlreadyExists, "{e}"),
    }
    let stored = t.get("eu", "ann").await.expect("read");
    assert_eq!(stored.map(|m| m.email.clone()).as_deref(), Some("a@x.org"));
    assert!(t.get("eu", "ann2").await.expect("read").is_none());
    let e = t
        .insert(member("eu", "ann2", "a@x.org"))
        .await
        .expect_err("ann holds the e-mail");
    assert_eq!(e.kind(), ErrorKind::ValueTaken, "{e}");
    assert!(t.get("eu", "ann2").await.expect("read").is_none());
    let c = Member::columns();
    let holder = t.get_by(c.email, "a@x.org").await.expect("lookup");
    assert_eq!(holder.map(|m| m.id.clone()), Some("ann".into()));
    // Once the unit's re-keying is done for real, ann2 holds it.
    let mut unit = store.lock("eu").await.expect("lock");
    unit.delete(&ann).expect("staged");
    unit.insert(&member("eu", "ann2", "a@x.org"))
        .expect("staged");
    unit.commit().await.expect("re-keyed");
    let holder = t.get_by(c.email, "a@x.org").await.expect("lookup");
    assert_eq!(holder.map(|m| m.id.clone()), Some("ann2".into()));
    let report = t.verify_indexes().await.expect("verify");
    assert!(report.is_consistent(), "{report:?}");
}

/// A unit dies at its commit point, leaving an undecided mark on the row
/// of an entity whose value it had claimed. The next unit to hold the dead
/// commit's primary partition claims that value: it takes the mark off at
/// once (it holds the primary) rather than waiting for a lock it holds
/// itself, takes the claim over and commits.
timed async fn a_unit_holding_a_dead_commits_primary_claims_its_marked_value(ctx) {
    use leasehold::backend::Op;
    use leasehold::testing::{Fault, FaultyBackend};
    let prefix = format!("{}dm", ctx.prefix());
    let healthy = process(ctx, ctx.backend().clone(), &prefix);
    let t = healthy.table::<Member>();
    let w = t.insert(member("r9", "w", "w@x.org")).await.expect("warm");
    t.delete(&w).await.expect("warm");
    let faulty = FaultyBackend::new(ctx.backend().clone());
    let injector = faulty.injector();
    let dying = process(ctx, Arc::new(faulty), &prefix);
    let mut unit = dying.lock_many(["r2", "r5"]).await.expect("lock");
    unit.insert(&member("r2", "y", "v2@x.org")).expect("staged");
    unit.insert(&member("r5", "y", "v5@x.org")).expect("staged");
    // The first transaction writes the index descriptions (once per
    // store), the second marks the other group's row; the third is the
    // commit point, never sent.
    injector.inject(Some(Op::Batch), 3, Fault::Die);
    unit.commit().await.expect_err("died at the commit point");
    // Which row carries the undecided mark: the other partition is the
    // dead commit's primary.
    let table = TableName::new(format!("{prefix}IxMembers")).expect("name");
    let rk = RowKey::new("y").expect("key");
    let mut marked = None;
    for (region, email) in [("r2", "v2@x.org"), ("r5", "v5@x.org")] {
        let pk = PartitionKey::new(region).expect("key");
        let row = ctx.backend().get(&table, &pk, &rk).await.expect("read");
        if row.is_some_and(|r| r.data.properties.get("_lhTxn").is_some()) {
            marked = Some((region, email));
        }
    }
    let (marked_region, value) = marked.expect("one row carries the mark");
    let primary = if marked_region == "r2" { "r5" } else { "r2" };
    tokio::time::sleep(ctx.lease_duration() + ctx.slack()).await;
    let mut unit = healthy
        .lock_many([primary, "r9"])
        .await
        .expect("the dead unit's locks ran out");
    unit.insert(&member("r9", "z", value)).expect("staged");
    unit.commit()
        .await
        .expect("claims the marked value and commits");
    let c = Member::columns();
    let holder = t.get_by(c.email, value).await.expect("lookup");
    assert_eq!(holder.map(|m| m.id.clone()), Some("z".into()));
    assert!(t.get(marked_region, "y").await.expect("read").is_none());
    let report = t.verify_indexes().await.expect("verify");
    assert!(report.is_consistent(), "{report:?}");
}
}
