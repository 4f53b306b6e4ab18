//! The conformance suite (the backend contract and the library check) and
//! the library's own checks (`checks`: tables, leases, locks, indexes...)
//! on the embedded memory backend, timed checks on paused Tokio time; the
//! emulator checks as the memory backend answers them.

use std::sync::Arc;

use leasehold::backend::memory::MemoryBackend;
use leasehold::testing::conformance;

leasehold::conformance_suite!(paused: Some(Arc::new(MemoryBackend::new())));
crate::checks::all!(memory);

fn memory_ctx() -> Option<conformance::Ctx> {
    Some(conformance::Ctx::new(
        Arc::new(MemoryBackend::new()),
        conformance::Clock::Paused,
    ))
}

crate::emulator_suite!(memory_ctx(), crate::emulator::Target::Memory);
crate::transfer_suite!(memory_ctx(), crate::emulator::Target::Memory);

/// An over-long filter is refused before any request is counted.
#[tokio::test]
async fn over_long_filters_send_no_request_on_memory() {
    let backend = leasehold::testing::CountingBackend::new(MemoryBackend::new());
    let counter = backend.counter();
    let store = leasehold::Store::new(backend);
    crate::emulator::over_long_filters_send_no_request(&store, || counter.total()).await;
}

crate::emulator_timed_suite!(
    #[tokio::test(start_paused = true)]
    memory_ctx(),
    crate::emulator::Target::Memory
);

/// The service may end a page early, even with no entity in it, and still
/// hand out a continuation; the memory backend does so when a page has
/// scanned `scan_limit` rows. Typed queries follow such pages to the end.
#[tokio::test]
async fn typed_queries_follow_empty_pages_with_continuations() {
    #[derive(leasehold::Entity, Debug, Clone, PartialEq)]
    #[entity(table = "Counters")]
    struct Counter {
        #[entity(partition_key)]
        pk: String,
        #[entity(row_key)]
        rk: String,
        n: i64,
    }
    let backend = MemoryBackend::builder().scan_limit(3).build();
    let store = leasehold::Store::new(backend);
    let t = store.table::<Counter>();
    for i in 0..12 {
        t.insert(Counter {
            pk: "p".into(),
            rk: format!("r{i:02}"),
            n: i,
        })
        .await
        .unwrap();
    }
    // Only the last row matches: the first pages scan 3 rows each and come
    // back empty, each with a continuation.
    let c = Counter::columns();
    let first = t.query().filter(c.n.eq(11i64)).page().await.unwrap();
    assert!(first.items.is_empty());
    assert!(
        first.continuation.is_some(),
        "an empty page still continues"
    );
    let found = t.query().filter(c.n.eq(11i64)).all().await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].rk, "r11");
}
