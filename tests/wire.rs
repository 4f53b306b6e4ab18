//! The JSON wire form of derived entities: what is sent (annotations, Int64 as
//! a string) and what is accepted back.

use leasehold::entity::EntityData;
use leasehold::entity::wire::{entity_from_json, entity_to_json};
use leasehold::{Entity, EntityTrait, Error, PartitionKey, Result, RowKey};
use serde_json::{Value as Json, json};
use time::OffsetDateTime;
use time::macros::datetime;
use uuid::Uuid;

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Wire")]
struct Typed {
    #[entity(partition_key)]
    pk: String,
    #[entity(row_key)]
    rk: u32,
    name: String,
    active: bool,
    count: i32,
    total: i64,
    ratio: f64,
    at: OffsetDateTime,
    id: Uuid,
    blob: Vec<u8>,
    note: Option<String>,
    #[entity(json)]
    tags: Vec<String>,
}

fn typed() -> Typed {
    Typed {
        pk: "p'1".into(),
        rk: 7,
        name: "Ann".into(),
        active: true,
        count: -3,
        total: (1 << 53) + 1,
        ratio: 0.25,
        at: datetime!(2024-02-29 12:34:56.1234567 UTC),
        id: Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef),
        blob: vec![0, 1, 255],
        note: None,
        tags: vec!["x".into()],
    }
}

fn to_wire<E: EntityTrait>(entity: &E) -> Json {
    let data = entity.encode().expect("encodes");
    Json::Object(entity_to_json(
        data.partition_key.as_str(),
        data.row_key.as_str(),
        &data.properties,
    ))
}

fn from_wire<E: EntityTrait>(json: Json) -> Result<E> {
    let Json::Object(map) = json else {
        panic!("not an object: {json}")
    };
    let wire = entity_from_json(E::TABLE, &map)?;
    E::decode(EntityData {
        partition_key: PartitionKey::new(wire.partition_key)?,
        row_key: RowKey::new(wire.row_key)?,
        properties: wire.properties,
    })
}

#[test]
fn the_wire_form_annotates_int64_double_datetime_guid_and_binary() {
    assert_eq!(
        to_wire(&typed()),
        json!({
            "PartitionKey": "p'1",
            "RowKey": "0000000007",
            "name": "Ann",
            "active": true,
            "count": -3,
            "total": "9007199254740993",
            "total@odata.type": "Edm.Int64",
            "ratio": 0.25,
            "ratio@odata.type": "Edm.Double",
            "at": "2024-02-29T12:34:56.1234567Z",
            "at@odata.type": "Edm.DateTime",
            "id": "01234567-89ab-cdef-0123-456789abcdef",
            "id@odata.type": "Edm.Guid",
            "blob": "AAH/",
            "blob@odata.type": "Edm.Binary",
            "tags": "[\"x\"]",
        })
    );
}

#[test]
fn doubles_json_cannot_spell_travel_as_annotated_strings() {
    for (v, text) in [
        (f64::NAN, "NaN"),
        (f64::INFINITY, "Infinity"),
        (f64::NEG_INFINITY, "-Infinity"),
    ] {
        let wire = to_wire(&Typed {
            ratio: v,
            ..typed()
        });
        assert_eq!(wire["ratio"], json!(text));
        assert_eq!(wire["ratio@odata.type"], json!("Edm.Double"));
    }
}

#[test]
fn the_wire_form_reads_back_to_the_same_entity() {
    let t = Typed {
        note: Some("n".into()),
        ..typed()
    };
    assert_eq!(from_wire::<Typed>(to_wire(&t)).unwrap(), t);
    assert_eq!(from_wire::<Typed>(to_wire(&typed())).unwrap(), typed());
}

fn wire_with(edit: impl FnOnce(&mut serde_json::Map<String, Json>)) -> Json {
    let Json::Object(mut map) = to_wire(&typed()) else {
        unreachable!()
    };
    edit(&mut map);
    Json::Object(map)
}

#[test]
fn int64_is_accepted_as_a_string_or_a_number() {
    for total in [json!("-9223372036854775808"), json!(i64::MIN)] {
        let wire = wire_with(|m| {
            m.insert("total".into(), total);
        });
        assert_eq!(from_wire::<Typed>(wire).unwrap().total, i64::MIN);
    }
    // Written by another client without an annotation: a number the service
    // types as Int32 or Int64 by its size.
    for total in [json!(5), json!(1_i64 << 40)] {
        let expected = total.as_i64().unwrap();
        let wire = wire_with(|m| {
            m.remove("total@odata.type");
            m.insert("total".into(), total);
        });
        assert_eq!(from_wire::<Typed>(wire).unwrap().total, expected);
    }
}

#[test]
fn doubles_accept_nan_and_the_infinities_as_strings() {
    for (text, expected) in [
        ("NaN", f64::NAN),
        ("Infinity", f64::INFINITY),
        ("-Infinity", f64::NEG_INFINITY),
    ] {
        let wire = wire_with(|m| {
            m.insert("ratio".into(), json!(text));
        });
        let back = from_wire::<Typed>(wire).unwrap();
        assert_eq!(back.ratio.to_bits(), expected.to_bits(), "{text}");
    }
}

fn decode_error(e: Error) -> (String, String, String, String) {
    match e {
        Error::Decode {
            table,
            property,
            expected,
            found,
            ..
        } => (table, property, expected, found),
        other => panic!("expected Error::Decode, got {other:?}"),
    }
}

#[test]
fn an_annotated_value_that_does_not_parse_is_a_decode_error() {
    let wire = wire_with(|m| {
        m.insert("total".into(), json!("12x"));
    });
    let (table, property, expected, found) = decode_error(from_wire::<Typed>(wire).unwrap_err());
    assert_eq!(table, "Wire");
    assert_eq!(property, "total");
    assert_eq!(expected, "Edm.Int64");
    assert_eq!(found, "\"12x\"");
}

#[test]
fn a_value_of_the_wrong_type_is_a_decode_error() {
    let wire = wire_with(|m| {
        m.remove("total@odata.type");
        m.insert("total".into(), json!(true));
    });
    let (table, property, expected, found) = decode_error(from_wire::<Typed>(wire).unwrap_err());
    assert_eq!(table, "Wire");
    assert_eq!(property, "total");
    assert_eq!(expected, "Edm.Int64");
    assert_eq!(found, "Edm.Boolean true");

    let wire = wire_with(|m| {
        m.remove("at@odata.type");
    });
    let (_, property, expected, found) = decode_error(from_wire::<Typed>(wire).unwrap_err());
    assert_eq!(property, "at");
    assert_eq!(expected, "Edm.DateTime");
    assert_eq!(found, "Edm.String \"2024-02-29T12:34:56.1234567Z\"");
}

#[test]
fn a_null_reads_as_an_absent_property() {
    let wire = wire_with(|m| {
        m.insert("note".into(), Json::Null);
    });
    assert_eq!(from_wire::<Typed>(wire).unwrap().note, None);
    let wire = wire_with(|m| {
        m.insert("name".into(), Json::Null);
    });
    let (_, property, _, found) = decode_error(from_wire::<Typed>(wire).unwrap_err());
    assert_eq!((property.as_str(), found.as_str()), ("name", "absent"));
}
