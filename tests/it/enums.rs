//! `#[derive(PropertyCodec)]` on fieldless enums: stored names and numbers,
//! typed columns, and the error for a value no variant stands for.

use leasehold::entity::{EdmType, Entity, EntityData, Properties, Value};
use leasehold::{Entity, Error, PartitionKey, PropertyCodec, RowKey, Store};

#[derive(PropertyCodec, Debug, Clone, Copy, PartialEq)]
enum Plain {
    Pending,
    Shipped,
}

#[derive(PropertyCodec, Debug, Clone, Copy, PartialEq)]
#[entity(rename_all = "SCREAMING-KEBAB-CASE")]
enum Renamed {
    OutForDelivery,
    #[entity(rename = "gone")]
    Lost,
}

#[derive(PropertyCodec, Debug, Clone, Copy, PartialEq)]
#[entity(int32)]
enum Level {
    Low = -1,
    Mid = 0,
    High = 7,
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Parcels")]
struct Parcel {
    #[entity(partition_key)]
    shop: String,
    #[entity(row_key)]
    id: String,
    plain: Plain,
    renamed: Renamed,
    level: Level,
    maybe: Option<Level>,
}

fn parcel() -> Parcel {
    Parcel {
        shop: "s".into(),
        id: "p1".into(),
        plain: Plain::Shipped,
        renamed: Renamed::OutForDelivery,
        level: Level::Low,
        maybe: None,
    }
}

#[test]
fn variants_are_stored_by_name_or_number() {
    assert_eq!(Plain::EDM_TYPE, EdmType::String);
    assert_eq!(Level::EDM_TYPE, EdmType::Int32);
    assert_eq!(
        Plain::Pending.encode().unwrap(),
        Some(Value::String("Pending".into()))
    );
    assert_eq!(
        Renamed::OutForDelivery.encode().unwrap(),
        Some(Value::String("OUT-FOR-DELIVERY".into()))
    );
    assert_eq!(
        Renamed::Lost.encode().unwrap(),
        Some(Value::String("gone".into()))
    );
    assert_eq!(Level::High.encode().unwrap(), Some(Value::Int32(7)));
    assert_eq!(Level::decode(Some(Value::Int32(-1))).unwrap(), Level::Low);
    assert_eq!(
        Renamed::decode(Some(Value::String("gone".into()))).unwrap(),
        Renamed::Lost
    );

    let data = parcel().encode().unwrap();
    assert_eq!(
        data.properties.get("plain"),
        Some(&Value::String("Shipped".into()))
    );
    assert_eq!(data.properties.get("level"), Some(&Value::Int32(-1)));
    assert_eq!(data.properties.get("maybe"), None);
    assert_eq!(Parcel::decode(data).unwrap(), parcel());
}

#[test]
fn an_unknown_stored_value_names_the_value_and_the_row() {
    let mut data = parcel().encode().unwrap();
    data.properties
        .insert("plain", Value::String("Returned".into()));
    let e = Parcel::decode(data).unwrap_err();
    let Error::Decode {
        property,
        expected,
        found,
        ..
    } = &e
    else {
        panic!("expected Error::Decode, got {e:?}");
    };
    assert_eq!(property, "plain");
    assert_eq!(expected, r#"Plain, one of "Pending", "Shipped""#);
    assert_eq!(
        found,
        r#"Edm.String "Returned", which is no variant of Plain"#
    );
    assert_eq!(
        e.row().map(|(pk, rk)| (pk.as_str(), rk.as_str())),
        Some(("s", "p1"))
    );

    let mut properties = Properties::new();
    properties.insert("plain", Value::String("Pending".into()));
    properties.insert("renamed", Value::String("gone".into()));
    properties.insert("level", Value::Int32(3));
    let e = Parcel::decode(EntityData {
        partition_key: PartitionKey::new("s").unwrap(),
        row_key: RowKey::new("p2").unwrap(),
        properties,
    })
    .unwrap_err();
    let text = e.to_string();
    assert!(text.contains("`level`"), "{text}");
    assert!(
        text.contains("Edm.Int32 3, which is no variant of Level"),
        "{text}"
    );
    assert!(text.contains("-1 (Low), 0 (Mid), 7 (High)"), "{text}");
    assert!(text.contains(r#""p2""#), "{text}");
}

#[test]
fn a_value_of_another_type_is_a_decode_error() {
    let e = Level::decode(Some(Value::String("High".into()))).unwrap_err();
    assert_eq!(
        e.expected,
        "Edm.Int32: Level, one of -1 (Low), 0 (Mid), 7 (High)"
    );
    assert_eq!(e.found, r#"Edm.String "High""#);
    assert_eq!(Plain::decode(None).unwrap_err().found, "absent");
}

#[test]
fn enum_fields_have_typed_columns() {
    let c = Parcel::columns();
    let f = c.plain.eq(Plain::Shipped) & c.renamed.ne(Renamed::Lost) & c.maybe.gt(Level::Mid);
    assert_eq!(
        f.to_odata().unwrap(),
        "((plain eq 'Shipped') and (renamed ne 'gone')) and (maybe gt 0)"
    );
}

#[tokio::test(start_paused = true)]
async fn enums_round_trip_and_filter_on_the_memory_backend() {
    let store = Store::memory();
    let parcels = store.table::<Parcel>();
    parcels.insert(parcel()).await.unwrap();
    parcels
        .insert(Parcel {
            id: "p2".into(),
            plain: Plain::Pending,
            maybe: Some(Level::High),
            ..parcel()
        })
        .await
        .unwrap();
    let c = Parcel::columns();
    let shipped = parcels
        .query()
        .partition("s")
        .filter(c.plain.eq(Plain::Shipped))
        .all()
        .await
        .unwrap();
    assert_eq!(shipped.len(), 1);
    assert_eq!(*shipped[0], parcel());
    let high = parcels
        .query()
        .filter(c.maybe.ge(Level::High))
        .all()
        .await
        .unwrap();
    assert_eq!(high.len(), 1);
    assert_eq!(high[0].id, "p2");
}
