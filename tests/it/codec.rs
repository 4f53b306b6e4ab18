//! Round trips through derived entities: every supported field type at its
//! edges, and the errors for values the service cannot hold or that do not
//! decode.

use leasehold::entity::{Entity, EntityData, Properties, Value};
use leasehold::{Entity, Error, PartitionKey, RowKey};

/// The largest string (as UTF-16) or binary value.
const MAX_VALUE_BYTES: usize = Value::MAX_BYTES;
use time::OffsetDateTime;
use time::macros::datetime;
use uuid::Uuid;

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Codecs")]
struct Scalars {
    #[entity(partition_key)]
    pk: String,
    #[entity(row_key)]
    rk: String,
    text: String,
    flag: bool,
    int32: i32,
    int64: i64,
    double: f64,
    guid: Uuid,
    bytes: Vec<u8>,
    at: OffsetDateTime,
    tiny: u8,
    small: u16,
    medium: u32,
    signed_tiny: i8,
    signed_small: i16,
    big: u64,
    maybe: Option<i64>,
}

fn scalars() -> Scalars {
    Scalars {
        pk: "p".into(),
        rk: "r".into(),
        text: "hello".into(),
        flag: true,
        int32: -7,
        int64: 1 << 40,
        double: 1.5,
        guid: Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef),
        bytes: vec![0, 1, 255],
        at: datetime!(2024-02-29 12:34:56.1234567 UTC),
        tiny: 200,
        small: 60_000,
        medium: 4_000_000_000,
        signed_tiny: -100,
        signed_small: -30_000,
        big: 1 << 62,
        maybe: Some(3),
    }
}

fn round_trip<E: Entity>(entity: &E) -> E {
    let data = entity.encode().expect("encodes");
    E::decode(data).expect("decodes")
}

fn stored<E: Entity>(entity: &E) -> Properties {
    entity.encode().expect("encodes").properties
}

fn invalid_what(error: Error) -> String {
    match error {
        Error::Invalid { what, .. } => what,
        other => panic!("expected Error::Invalid, got {other:?}"),
    }
}

#[test]
fn every_scalar_type_round_trips() {
    let s = scalars();
    assert_eq!(round_trip(&s), s);
}

#[test]
fn int64_keeps_its_extremes_and_values_past_2_pow_53_exactly() {
    for v in [i64::MIN, i64::MAX, (1 << 53) + 1, -(1 << 53) - 1, 0] {
        let s = Scalars {
            int64: v,
            ..scalars()
        };
        assert_eq!(stored(&s).get("int64"), Some(&Value::Int64(v)));
        assert_eq!(round_trip(&s).int64, v);
    }
}

#[test]
fn doubles_keep_their_bits_including_nan_infinities_and_negative_zero() {
    for v in [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.0,
        0.0,
        f64::MIN_POSITIVE,
        f64::MAX,
    ] {
        let back = round_trip(&Scalars {
            double: v,
            ..scalars()
        });
        assert_eq!(back.double.to_bits(), v.to_bits(), "{v}");
    }
}

#[test]
fn strings_empty_unicode_and_at_the_64_kib_limit() {
    for text in [
        "",
        "日本語 😀 e\u{301} o'brien \"q\"",
        "\u{0}\u{1f}\u{ffff}",
    ] {
        let s = Scalars {
            text: text.into(),
            ..scalars()
        };
        assert_eq!(round_trip(&s).text, text);
    }
    // 64 KiB is 32768 UTF-16 units.
    let at_limit = "x".repeat(MAX_VALUE_BYTES / 2);
    let s = Scalars {
        text: at_limit.clone(),
        ..scalars()
    };
    assert_eq!(round_trip(&s).text, at_limit);
}

#[test]
fn a_string_one_utf16_unit_over_64_kib_is_invalid_naming_the_property() {
    let one_over = "x".repeat(MAX_VALUE_BYTES / 2 + 1);
    let what = invalid_what(
        Scalars {
            text: one_over,
            ..scalars()
        }
        .encode()
        .unwrap_err(),
    );
    assert!(what.contains("property `text`"), "{what}");
    // An astral character counts as two units.
    let astral = format!("{}😀", "x".repeat(MAX_VALUE_BYTES / 2 - 1));
    let what = invalid_what(
        Scalars {
            text: astral,
            ..scalars()
        }
        .encode()
        .unwrap_err(),
    );
    assert!(what.contains("property `text`"), "{what}");
}

#[test]
fn date_times_keep_100_ns_at_both_ends_of_the_range() {
    for at in [
        datetime!(1601-01-01 00:00:00 UTC),
        datetime!(1601-01-01 00:00:00.0000001 UTC),
        datetime!(9999-12-31 23:59:59.9999999 UTC),
    ] {
        let s = Scalars { at, ..scalars() };
        assert_eq!(round_trip(&s).at, at);
    }
}

#[test]
fn date_times_are_stored_in_utc_truncated_to_100_ns() {
    let s = Scalars {
        at: datetime!(2024-01-01 01:00:00.123456789 +01:00),
        ..scalars()
    };
    let back = round_trip(&s);
    assert_eq!(back.at, datetime!(2024-01-01 00:00:00.1234567 UTC));
    assert_eq!(back.at.offset(), time::UtcOffset::UTC);
}

#[test]
fn a_date_time_before_1601_is_invalid_naming_the_property() {
    let s = Scalars {
        at: datetime!(1600-12-31 23:59:59 UTC),
        ..scalars()
    };
    let what = invalid_what(s.encode().unwrap_err());
    assert!(what.contains("property `at`"), "{what}");
}

#[test]
fn guids_including_nil_and_max() {
    for guid in [Uuid::nil(), Uuid::max(), Uuid::new_v4()] {
        assert_eq!(round_trip(&Scalars { guid, ..scalars() }).guid, guid);
    }
}

#[test]
fn binaries_empty_and_at_the_64_kib_limit() {
    for bytes in [vec![], vec![0xA5; MAX_VALUE_BYTES]] {
        let s = Scalars {
            bytes: bytes.clone(),
            ..scalars()
        };
        assert_eq!(round_trip(&s).bytes, bytes);
    }
    let over = Scalars {
        bytes: vec![0; MAX_VALUE_BYTES + 1],
        ..scalars()
    };
    let what = invalid_what(over.encode().unwrap_err());
    assert!(what.contains("property `bytes`"), "{what}");
}

#[test]
fn small_integers_widen_and_come_back() {
    let s = Scalars {
        tiny: u8::MAX,
        small: u16::MAX,
        medium: u32::MAX,
        signed_tiny: i8::MIN,
        signed_small: i16::MIN,
        ..scalars()
    };
    let props = stored(&s);
    assert_eq!(props.get("tiny"), Some(&Value::Int32(255)));
    assert_eq!(props.get("small"), Some(&Value::Int32(65_535)));
    assert_eq!(props.get("medium"), Some(&Value::Int64(4_294_967_295)));
    assert_eq!(props.get("signed_tiny"), Some(&Value::Int32(-128)));
    assert_eq!(props.get("signed_small"), Some(&Value::Int32(-32_768)));
    assert_eq!(round_trip(&s), s);
}

#[test]
fn u64_up_to_i64_max_round_trips_and_above_is_invalid() {
    let s = Scalars {
        big: i64::MAX as u64,
        ..scalars()
    };
    assert_eq!(round_trip(&s).big, i64::MAX as u64);
    let over = Scalars {
        big: i64::MAX as u64 + 1,
        ..scalars()
    };
    let what = invalid_what(over.encode().unwrap_err());
    assert!(what.contains("property `big`"), "{what}");
    assert!(what.contains("Codecs"), "{what}");
}

#[test]
fn option_none_is_an_absent_property() {
    let s = Scalars {
        maybe: None,
        ..scalars()
    };
    let props = stored(&s);
    assert_eq!(props.get("maybe"), None);
    assert_eq!(round_trip(&s).maybe, None);
    assert_eq!(stored(&scalars()).get("maybe"), Some(&Value::Int64(3)));
}

#[test]
fn property_names_are_the_field_names() {
    assert_eq!(
        Scalars::PROPERTY_NAMES,
        [
            "text",
            "flag",
            "int32",
            "int64",
            "double",
            "guid",
            "bytes",
            "at",
            "tiny",
            "small",
            "medium",
            "signed_tiny",
            "signed_small",
            "big",
            "maybe"
        ]
    );
}

#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
struct Address {
    street: String,
    zip: Option<String>,
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Customers")]
struct Customer {
    #[entity(partition_key)]
    region: String,
    #[entity(row_key)]
    id: u32,
    #[entity(rename = "DisplayName")]
    name: String,
    #[entity(json)]
    tags: Vec<String>,
    #[entity(json)]
    address: Address,
    #[entity(json, default)]
    previous: Vec<Address>,
    #[entity(json)]
    nickname: Option<String>,
    #[entity(default)]
    visits: i32,
    #[entity(default, rename = "Score")]
    score: f64,
    #[entity(skip)]
    cache: Option<String>,
    #[entity(skip)]
    hits: u64,
}

fn customer() -> Customer {
    Customer {
        region: "eu".into(),
        id: 42,
        name: "Ann".into(),
        tags: vec!["a".into(), "b c".into()],
        address: Address {
            street: "Main 1".into(),
            zip: None,
        },
        previous: vec![Address::default()],
        nickname: None,
        visits: 3,
        score: 0.5,
        cache: Some("warm".into()),
        hits: 9,
    }
}

#[test]
fn json_rename_default_and_skip_fields_are_stored_as_declared() {
    let c = customer();
    let data = c.encode().unwrap();
    assert_eq!(data.row_key.as_str(), "0000000042");
    let p = &data.properties;
    assert_eq!(p.get("DisplayName"), Some(&Value::String("Ann".into())));
    assert_eq!(p.get("name"), None);
    assert_eq!(p.get("tags"), Some(&Value::String(r#"["a","b c"]"#.into())));
    assert_eq!(
        p.get("address"),
        Some(&Value::String(r#"{"street":"Main 1","zip":null}"#.into()))
    );
    assert_eq!(p.get("Score"), Some(&Value::Double(0.5)));
    assert_eq!(p.get("cache"), None);
    assert_eq!(p.get("hits"), None);
    assert_eq!(
        Customer::PROPERTY_NAMES,
        [
            "DisplayName",
            "tags",
            "address",
            "previous",
            "nickname",
            "visits",
            "Score"
        ]
    );
    // JSON null is an absent property, like `None` of a plain field.
    assert_eq!(p.get("nickname"), None);
    assert_eq!(p.len(), Customer::PROPERTY_NAMES.len() - 1);

    let back = Customer::decode(data).unwrap();
    assert_eq!(
        back,
        Customer {
            cache: None,
            hits: 0,
            ..c
        }
    );
}

fn customer_data(edit: impl FnOnce(&mut Properties)) -> EntityData {
    let mut data = customer().encode().unwrap();
    edit(&mut data.properties);
    data
}

#[test]
fn json_options_store_some_as_json_and_none_as_absent() {
    let c = Customer {
        nickname: Some("annie".into()),
        ..customer()
    };
    let data = c.encode().unwrap();
    assert_eq!(
        data.properties.get("nickname"),
        Some(&Value::String("\"annie\"".into()))
    );
    assert_eq!(
        Customer::decode(data).unwrap().nickname.as_deref(),
        Some("annie")
    );
}

#[test]
fn default_fields_read_a_missing_property_as_the_default() {
    let data = customer_data(|p| {
        p.remove("visits");
        p.remove("Score");
        p.remove("previous");
    });
    let back = Customer::decode(data).unwrap();
    assert_eq!(back.visits, 0);
    assert_eq!(back.score, 0.0);
    assert_eq!(back.previous, Vec::<Address>::new());
}

#[test]
fn default_fields_still_reject_a_wrong_type() {
    let data = customer_data(|p| {
        p.insert("visits", Value::String("3".into()));
    });
    let e = Customer::decode(data).unwrap_err();
    assert_decode(e, "Customers", "visits", "Edm.Int32", "Edm.String \"3\"");
}

fn assert_decode(e: Error, table: &str, property: &str, expected: &str, found: &str) {
    match e {
        Error::Decode {
            table: t,
            property: p,
            expected: x,
            found: f,
            ..
        } => {
            assert_eq!(t, table);
            assert_eq!(p, property);
            assert_eq!(x, expected);
            assert_eq!(f, found);
        }
        other => panic!("expected Error::Decode, got {other:?}"),
    }
}

#[test]
fn a_missing_property_is_a_decode_error_naming_it() {
    let data = customer_data(|p| {
        p.remove("DisplayName");
    });
    let e = Customer::decode(data).unwrap_err();
    assert_decode(e, "Customers", "DisplayName", "Edm.String", "absent");
}

#[test]
fn a_wrong_type_is_a_decode_error_naming_expected_and_found() {
    let mut data = scalars().encode().unwrap();
    data.properties.insert("int64", Value::String("abc".into()));
    let e = Scalars::decode(data).unwrap_err();
    assert_decode(e, "Codecs", "int64", "Edm.Int64", "Edm.String \"abc\"");

    let mut data = scalars().encode().unwrap();
    data.properties.insert("tiny", Value::Int32(300));
    let e = Scalars::decode(data).unwrap_err();
    assert_decode(
        e,
        "Codecs",
        "tiny",
        "Edm.Int32 in the range of u8",
        "Edm.Int32 300",
    );

    let mut data = scalars().encode().unwrap();
    data.properties.insert("flag", Value::Int32(1));
    let e = Scalars::decode(data).unwrap_err();
    assert_decode(e, "Codecs", "flag", "Edm.Boolean", "Edm.Int32 1");
}

#[test]
fn a_missing_json_property_is_a_decode_error_unless_default() {
    let data = customer_data(|p| {
        p.remove("tags");
    });
    match Customer::decode(data).unwrap_err() {
        Error::Decode {
            table,
            property,
            expected,
            found,
            ..
        } => {
            assert_eq!(table, "Customers");
            assert_eq!(property, "tags");
            assert!(expected.contains("JSON"), "{expected}");
            assert_eq!(found, "absent");
        }
        other => panic!("expected Error::Decode, got {other:?}"),
    }
}

#[test]
fn a_json_field_error_names_the_short_rust_type_and_the_row() {
    let data = customer_data(|p| {
        p.insert("tags", Value::String("not json".into()));
    });
    let e = Customer::decode(data).unwrap_err();
    let text = e.to_string();
    match e {
        Error::Decode {
            property,
            expected,
            row,
            ..
        } => {
            assert_eq!(property, "tags");
            assert_eq!(expected, "Edm.String holding JSON for Vec<String>");
            let (partition_key, row_key) = row.as_deref().expect("the row is named");
            assert_eq!(
                (partition_key.as_str(), row_key.as_str()),
                ("eu", "0000000042")
            );
        }
        other => panic!("expected Error::Decode, got {other:?}"),
    }
    assert!(!text.contains("alloc::"), "{text}");
    assert!(
        text.contains(
            r#"of table `Customers` at PartitionKey "eu", RowKey "0000000042": expected"#
        ),
        "{text}"
    );
}

#[test]
fn malformed_json_is_a_decode_error() {
    let data = customer_data(|p| {
        p.insert("address", Value::String("{not json".into()));
    });
    match Customer::decode(data).unwrap_err() {
        Error::Decode {
            property, found, ..
        } => {
            assert_eq!(property, "address");
            assert!(found.contains("does not parse"), "{found}");
        }
        other => panic!("expected Error::Decode, got {other:?}"),
    }
}

#[test]
fn unknown_properties_are_ignored_on_read() {
    let data = customer_data(|p| {
        p.insert("added_later", Value::Boolean(true));
    });
    assert_eq!(Customer::decode(data).unwrap().name, "Ann");
}

#[test]
fn a_key_that_does_not_parse_is_a_decode_error_naming_the_key_and_field() {
    let data = EntityData {
        partition_key: PartitionKey::new("eu").unwrap(),
        row_key: RowKey::new("forty-two").unwrap(),
        properties: customer().encode().unwrap().properties,
    };
    match Customer::decode(data).unwrap_err() {
        Error::Decode {
            table,
            property,
            expected,
            found,
            ..
        } => {
            assert_eq!(table, "Customers");
            assert_eq!(property, "RowKey (field `id`)");
            assert_eq!(expected, "u32");
            assert!(found.contains("forty-two"), "{found}");
        }
        other => panic!("expected Error::Decode, got {other:?}"),
    }
}

#[test]
fn a_single_string_key_with_a_forbidden_character_is_invalid() {
    let s = Scalars {
        pk: "a/b".into(),
        ..scalars()
    };
    let what = invalid_what(s.encode().unwrap_err());
    assert!(what.contains("partition key"), "{what}");
    assert!(what.contains("Codecs"), "{what}");
}
