//! `chrono::DateTime<Utc>` fields and key parts (feature `chrono`).

use chrono::{DateTime, Utc};
use leasehold::entity::{Entity, Value};
use leasehold::{Entity, Store};

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Shipments")]
struct Shipment {
    #[entity(partition_key)]
    shop: String,
    #[entity(row_key)]
    at: DateTime<Utc>,
    delivered: Option<DateTime<Utc>>,
}

fn at(secs: i64, nanos: u32) -> DateTime<Utc> {
    DateTime::from_timestamp(secs, nanos).unwrap()
}

#[test]
fn chrono_fields_are_edm_datetimes_at_100_ns() {
    let s = Shipment {
        shop: "s".into(),
        at: at(1_700_000_000, 5),
        delivered: Some(at(1_700_000_100, 123_456_789)),
    };
    let data = s.encode().unwrap();
    assert_eq!(data.row_key.as_str(), "2023-11-14T22:13:20.0000000Z");
    assert!(matches!(
        data.properties.get("delivered"),
        Some(Value::DateTime(_))
    ));
    let back = Shipment::decode(data).unwrap();
    assert_eq!(back.at, at(1_700_000_000, 0));
    assert_eq!(back.delivered, Some(at(1_700_000_100, 123_456_700)));
}

/// Inserts three shipments, filters on the chrono column, and reads one
/// back by a key built from a chrono key part.
async fn chrono_columns_filter(store: &Store) {
    let t = store.table::<Shipment>();
    for (i, delivered) in [None, Some(at(1_000, 0)), Some(at(2_000, 0))]
        .into_iter()
        .enumerate()
    {
        t.insert(Shipment {
            shop: "s".into(),
            at: at(i64::try_from(i).unwrap(), 0),
            delivered,
        })
        .await
        .unwrap();
    }
    let c = Shipment::columns();
    let late = t
        .query()
        .filter(c.delivered.gt(at(1_500, 0)))
        .all()
        .await
        .unwrap();
    assert_eq!(late.len(), 1);
    assert_eq!(late[0].delivered, Some(at(2_000, 0)));
    let key = Shipment::row_key_from(at(1, 0));
    let one = t
        .get("s", key)
        .await
        .unwrap()
        .expect("stored under its chrono key");
    assert_eq!(one.delivered, Some(at(1_000, 0)));
    let precise = Shipment {
        shop: "p".into(),
        at: at(1_700_000_000, 123_456_789),
        delivered: Some(at(1_700_000_100, 987_654_321)),
    };
    t.insert(precise).await.unwrap();
    let back = t
        .get("p", Shipment::row_key_from(at(1_700_000_000, 123_456_700)))
        .await
        .unwrap()
        .expect("100 ns key");
    assert_eq!(back.delivered, Some(at(1_700_000_100, 987_654_300)));
}

#[tokio::test(start_paused = true)]
async fn chrono_columns_filter_on_the_memory_backend() {
    chrono_columns_filter(&Store::memory()).await;
}

/// The same on Azurite: the service stores and compares what the memory
/// backend does (required when `CI` is set).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chrono_columns_filter_on_azurite() {
    let Some(backend) = crate::support::azurite_backend() else {
        return;
    };
    let prefix = format!("c{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
    let store = Store::builder(backend)
        .table_prefix(prefix)
        .unwrap()
        .build()
        .unwrap();
    chrono_columns_filter(&store).await;
}
