//! One text per error on every backend: the same failing operations, run on
//! a memory store and on an Azurite store with the same table prefix and
//! container, render the same `to_string()`. An error names the operation
//! the caller called, the table as stored (with its prefix) and the keys
//! in one form (`("us", "u07")`), whichever layer raised it: an indexed
//! type's write as well as a plain one.

use std::sync::Arc;

use leasehold::backend::memory::MemoryBackend;
use leasehold::backend::{Backend, BlobConditions, LeaseDuration, LeaseId, Metadata};
use leasehold::key::{BlobName, ContainerName};
use leasehold::{Entity, Store, Versioned};

use crate::support;

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "TxtPlain")]
struct Plain {
    #[entity(partition_key)]
    region: String,
    #[entity(row_key)]
    id: String,
    n: i64,
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "TxtUsers")]
struct User {
    #[entity(partition_key)]
    region: String,
    #[entity(row_key)]
    id: String,
    #[entity(unique)]
    email: String,
    n: i64,
}

fn plain(id: &str, n: i64) -> Plain {
    Plain {
        region: "us".into(),
        id: id.into(),
        n,
    }
}

fn user(id: &str, email: &str) -> User {
    User {
        region: "us".into(),
        id: id.into(),
        email: email.into(),
        n: 0,
    }
}

/// The error of `r`, by label.
fn failed<T: std::fmt::Debug>(label: &str, r: leasehold::Result<T>) -> (String, String) {
    match r {
        Err(e) => (label.to_owned(), e.to_string()),
        Ok(v) => panic!("{label}: expected an error, got {v:?}"),
    }
}

/// A value of `v`'s entity at a version that is no longer stored.
fn stale<E: Clone>(v: &Versioned<E>, _later: &Versioned<E>) -> Versioned<E> {
    Versioned::new((**v).clone(), v.etag().clone(), v.timestamp())
}

/// Runs the failing operations on `backend` and returns each one's text.
async fn texts(backend: Arc<dyn Backend>, prefix: &str, container: &str) -> Vec<(String, String)> {
    let store = Store::builder_shared(backend.clone())
        .table_prefix(prefix)
        .unwrap()
        .build()
        .unwrap();
    let mut out = Vec::new();

    // A plain type.
    let t = store.table::<Plain>();
    let v1 = t.insert(plain("u01", 1)).await.unwrap();
    out.push(failed(
        "insert of existing keys",
        t.insert(plain("u01", 9)).await,
    ));
    let mut next = v1.clone();
    next.n = 2;
    let v2 = t.replace(&next).await.unwrap();
    out.push(failed(
        "replace at a stale version",
        t.replace(&stale(&v1, &v2)).await,
    ));
    out.push(failed(
        "merge at a stale version",
        t.merge(&stale(&v1, &v2)).await,
    ));
    out.push(failed(
        "delete at a stale version",
        t.delete(&stale(&v1, &v2)).await,
    ));
    out.push(failed(
        "replace_unconditionally of a missing row",
        t.replace_unconditionally(plain("u07", 1)).await,
    ));
    out.push(failed(
        "delete_unconditionally of a missing row",
        t.delete_unconditionally("us", "u07").await,
    ));
    out.push(failed(
        "update_with of a missing row",
        t.update_with("us", "u07", |p| p.n += 1).await,
    ));
    t.delete(&v2).await.unwrap();
    out.push(failed("replace of a deleted row", t.replace(&v2).await));

    // A type with a unique field: its writes go through the index layer.
    let u = store.table::<User>();
    let a1 = u.insert(user("u02", "ann@x.org")).await.unwrap();
    out.push(failed(
        "indexed insert of existing keys",
        u.insert(user("u02", "bob@x.org")).await,
    ));
    out.push(failed(
        "indexed insert of a taken value",
        u.insert(user("u03", "ann@x.org")).await,
    ));
    let mut next = a1.clone();
    next.n = 2;
    let a2 = u.replace(&next).await.unwrap();
    out.push(failed(
        "indexed replace at a stale version",
        u.replace(&stale(&a1, &a2)).await,
    ));
    let mut moved = stale(&a1, &a2);
    moved.email = "carl@x.org".into();
    out.push(failed(
        "indexed replace moving the value at a stale version",
        u.replace(&moved).await,
    ));
    out.push(failed(
        "indexed merge at a stale version",
        u.merge(&stale(&a1, &a2)).await,
    ));
    out.push(failed(
        "indexed delete at a stale version",
        u.delete(&stale(&a1, &a2)).await,
    ));
    out.push(failed(
        "indexed replace_unconditionally of a missing row",
        u.replace_unconditionally(user("u07", "dan@x.org")).await,
    ));
    out.push(failed(
        "indexed delete_unconditionally of a missing row",
        u.delete_unconditionally("us", "u07").await,
    ));
    out.push(failed(
        "indexed update_with of a missing row",
        u.update_with("us", "u07", |p| p.n += 1).await,
    ));
    u.delete(&a2).await.unwrap();
    out.push(failed(
        "indexed replace of a deleted row",
        u.replace(&a2).await,
    ));

    // Blobs and leases, on the backend itself.
    let c = ContainerName::new(container).unwrap();
    let missing = BlobName::new("missing").unwrap();
    let leased = BlobName::new("leased").unwrap();
    let free = BlobName::new("free").unwrap();
    backend.create_container(&c).await.unwrap();
    let put = |name: &BlobName| {
        let backend = backend.clone();
        let (c, name) = (c.clone(), name.clone());
        async move {
            backend
                .put_blob(
                    &c,
                    &name,
                    b"x".to_vec(),
                    &Metadata::new(),
                    &BlobConditions::none(),
                )
                .await
                .unwrap()
        }
    };
    let free_etag = put(&free).await;
    put(&leased).await;
    let d = LeaseDuration::Seconds(60);
    let holder = LeaseId::new_random();
    backend
        .lease(
            &c,
            &leased,
            leasehold::backend::LeaseAction::Acquire {
                duration: d,
                proposed: holder,
            },
        )
        .await
        .unwrap();
    let other = LeaseId::new_random();
    out.push(failed(
        "acquire of a lease on a missing blob",
        backend
            .lease(
                &c,
                &missing,
                leasehold::backend::LeaseAction::Acquire {
                    duration: d,
                    proposed: other,
                },
            )
            .await,
    ));
    out.push(failed(
        "renew of a lease on a missing blob",
        backend
            .lease(&c, &missing, leasehold::backend::LeaseAction::Renew(other))
            .await,
    ));
    out.push(failed(
        "acquire of a held lease",
        backend
            .lease(
                &c,
                &leased,
                leasehold::backend::LeaseAction::Acquire {
                    duration: d,
                    proposed: other,
                },
            )
            .await,
    ));
    out.push(failed(
        "renew by another id",
        backend
            .lease(&c, &leased, leasehold::backend::LeaseAction::Renew(other))
            .await,
    ));
    out.push(failed(
        "change by another id",
        backend
            .lease(
                &c,
                &leased,
                leasehold::backend::LeaseAction::Change {
                    id: other,
                    proposed: LeaseId::new_random(),
                },
            )
            .await,
    ));
    out.push(failed(
        "put onto a leased blob without its lease",
        backend
            .put_blob(
                &c,
                &leased,
                b"y".to_vec(),
                &Metadata::new(),
                &BlobConditions::none(),
            )
            .await,
    ));
    out.push(failed(
        "delete of a missing blob",
        backend
            .delete_blob(&c, &missing, &BlobConditions::none())
            .await,
    ));
    put(&free).await;
    out.push(failed(
        "put at a stale ETag",
        backend
            .put_blob(
                &c,
                &free,
                b"z".to_vec(),
                &Metadata::new(),
                &BlobConditions::if_match(free_etag),
            )
            .await,
    ));
    out.push(failed(
        "create-only put of an existing blob",
        backend
            .put_blob(
                &c,
                &free,
                b"z".to_vec(),
                &Metadata::new(),
                &BlobConditions::create_only(),
            )
            .await,
    ));
    backend
        .lease(
            &c,
            &leased,
            leasehold::backend::LeaseAction::Release(holder),
        )
        .await
        .unwrap();

    // A container and a table that do not exist.
    let gone = ContainerName::new(format!("{container}x")).unwrap();
    out.push(failed(
        "put into a missing container",
        backend
            .put_blob(
                &gone,
                &free,
                b"z".to_vec(),
                &Metadata::new(),
                &BlobConditions::none(),
            )
            .await,
    ));
    out.push(failed(
        "acquire in a missing container",
        backend
            .lease(
                &gone,
                &free,
                leasehold::backend::LeaseAction::Acquire {
                    duration: d,
                    proposed: other,
                },
            )
            .await,
    ));
    let no_table = leasehold::TableName::new(format!("{prefix}NoSuchTable")).unwrap();
    let row = leasehold::EntityData {
        partition_key: leasehold::PartitionKey::new("us").unwrap(),
        row_key: leasehold::RowKey::new("u01").unwrap(),
        properties: leasehold::entity::Properties::new(),
    };
    out.push(failed(
        "insert into a missing table",
        backend
            .execute(
                &no_table,
                leasehold::backend::TableOp::Insert(row),
                &leasehold::backend::WriteOptions::new(),
            )
            .await,
    ));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_failures_read_the_same_on_memory_and_azurite() {
    let Some(azurite) = support::azurite_backend() else {
        return;
    };
    let id = &uuid::Uuid::new_v4().simple().to_string()[..10];
    let prefix = format!("t{id}");
    let container = format!("texts{id}");
    let memory = texts(Arc::new(MemoryBackend::new()), &prefix, &container).await;
    let azure = texts(azurite, &prefix, &container).await;
    let mut differ = Vec::new();
    for ((label, m), (_, a)) in memory.iter().zip(&azure) {
        if m != a {
            differ.push(format!("{label}:\n  memory: {m}\n  azure:  {a}"));
        }
    }
    assert!(differ.is_empty(), "texts differ:\n{}", differ.join("\n"));
}

/// On one backend: errors about a row name it as `("us", "u07")`, never
/// `PartitionKey("us")`, and the table with its prefix; an indexed
/// type's delete that conflicts is a delete (its tombstone is sent as a
/// replace).
#[tokio::test]
async fn errors_about_a_row_name_the_call_the_stored_table_and_plain_keys() {
    let texts = texts(Arc::new(MemoryBackend::new()), "pfx", "texts").await;
    for (label, text) in &texts {
        assert!(!text.contains("PartitionKey(\""), "{label}: {text}");
        if text.contains(" of entity (") {
            assert!(text.contains("in table `pfx"), "{label}: {text}");
        }
    }
    let text = |label: &str| -> &str { &texts.iter().find(|(l, _)| l == label).expect(label).1 };
    assert_eq!(
        text("indexed delete at a stale version"),
        "conflict: delete of entity (\"us\", \"u02\") in table `pfxTxtUsers` (UpdateConditionNotSatisfied)"
    );
    assert_eq!(
        text("indexed replace_unconditionally of a missing row"),
        text("replace_unconditionally of a missing row").replace("pfxTxtPlain", "pfxTxtUsers")
    );
    // A replace of an indexed type whose entity was deleted is not found,
    // as for a plain type (it was a conflict with its tombstone).
    assert_eq!(
        text("indexed replace of a deleted row"),
        text("replace of a deleted row")
            .replace("pfxTxtPlain", "pfxTxtUsers")
            .replace("u01", "u02")
    );
    assert_eq!(
        text("delete at a stale version"),
        "conflict: delete of entity (\"us\", \"u01\") in table `pfxTxtPlain` (UpdateConditionNotSatisfied)"
    );
}
