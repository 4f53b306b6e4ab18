//! Request budgets of the entity mapping: keeping unknown properties,
//! chunked values, constant keys and prefix filters cost no request beyond
//! the operation itself.

use leasehold::backend::memory::MemoryBackend;
use leasehold::testing::{CountingBackend, RequestCounter};
use leasehold::{Entity, Store};

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Budget", row_key = "profile")]
struct New {
    #[entity(partition_key)]
    id: String,
    name: String,
    email: String,
    #[entity(chunked)]
    bio: String,
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Budget", row_key = "profile")]
struct Old {
    #[entity(partition_key)]
    id: String,
    name: String,
}

fn counted() -> (Store, RequestCounter) {
    let counting = CountingBackend::new(MemoryBackend::new());
    let counter = counting.counter();
    (Store::new(counting), counter)
}

#[tokio::test(start_paused = true)]
async fn keeping_unknown_properties_costs_no_request() {
    let (store, counter) = counted();
    let new = store.table::<New>();
    new.insert(New {
        id: "c".into(),
        name: "Ann".into(),
        email: "a@x".into(),
        bio: "b".repeat(100_000),
    })
    .await
    .unwrap();
    assert_eq!(counter.work(), 1, "{counter:?}");

    counter.reset();
    let old = store.table::<Old>();
    let mut v = old.get("c", Old::row_key_from()).await.unwrap().unwrap();
    v.name = "Anna".into();
    let mut v = old.replace(&v).await.unwrap();
    v.name = "Anne".into();
    old.replace(&v).await.unwrap();
    old.update_with("c", "profile", |o| o.name = "Ada".into())
        .await
        .unwrap();
    // get, replace, replace, and update_with's get and replace: no read
    // back, no extra request for the kept properties or the chunks.
    assert_eq!(counter.work(), 5, "{counter:?}");

    let back = new.get("c", "profile").await.unwrap().unwrap();
    assert_eq!((back.name.as_str(), back.email.as_str()), ("Ada", "a@x"));
    assert_eq!(back.bio.len(), 100_000);
}
