//! A unit dropped with staged writes it never committed says so in the
//! log; one committed, abandoned, or dropped with nothing staged does not.

use leasehold::{Entity, Store};

use crate::support::secrets::Captured;

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "DropNotes")]
struct Note {
    #[entity(partition_key)]
    pk: String,
    #[entity(row_key)]
    id: String,
    text: String,
}

fn note(pk: &str, id: &str) -> Note {
    Note {
        pk: pk.into(),
        id: id.into(),
        text: "staged".into(),
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_unit_dropped_with_staged_writes_warns_naming_its_partitions_and_writes() {
    let captured = Captured::default();
    let _capture = captured.capture();
    let store = Store::memory();

    let mut unit = store.lock_many(["drop-a", "drop-b"]).await.unwrap();
    unit.insert(&note("drop-a", "1")).unwrap();
    unit.insert(&note("drop-b", "2")).unwrap();
    unit.insert(&note("drop-b", "3")).unwrap();
    drop(unit);
    let log = captured.text();
    let warning = log
        .lines()
        .find(|l| l.contains("dropped with staged writes"))
        .unwrap_or_else(|| panic!("no warning in {log}"));
    assert!(warning.contains("WARN"), "{warning}");
    assert!(
        warning.contains("drop-a") && warning.contains("drop-b"),
        "{warning}"
    );
    assert!(warning.contains("writes=3"), "{warning}");
    assert!(
        store
            .table::<Note>()
            .get("drop-a", "1")
            .await
            .unwrap()
            .is_none(),
        "nothing was sent"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn committed_abandoned_and_empty_units_do_not_warn() {
    let captured = Captured::default();
    let _capture = captured.capture();
    let store = Store::memory();

    let mut unit = store.lock("quiet").await.unwrap();
    unit.insert(&note("quiet", "1")).unwrap();
    unit.commit().await.unwrap();
    let mut unit = store.lock("quiet").await.unwrap();
    unit.insert(&note("quiet", "2")).unwrap();
    unit.abandon().await.unwrap();
    let unit = store.lock("quiet").await.unwrap();
    drop(unit);
    // A commit that fails was asked for all the same.
    let mut unit = store.lock("quiet").await.unwrap();
    unit.insert(&note("quiet", "1")).unwrap();
    assert!(unit.commit().await.is_err(), "the row exists");
    let log = captured.text();
    assert!(!log.contains("dropped with staged writes"), "{log}");
}
