//! Keys composed of several fields: always valid keys, parsed back to the same
//! fields, and ordered as the tuples of fields are.

use std::cmp::Ordering;

use leasehold::entity::{Entity, EntityData, Properties};
use leasehold::{Entity, Error, PartitionKey, RowKey};
use proptest::prelude::*;

/// The service's key order: by UTF-16 code unit.
fn compare_keys(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// The characters the service forbids in keys: `/ \ # ?` and control
/// characters.
fn is_forbidden_key_char(c: char) -> bool {
    matches!(c, '/' | '\\' | '#' | '?' | '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Composite")]
struct Order {
    #[entity(partition_key = 0)]
    region: String,
    #[entity(partition_key = 1)]
    customer: String,
    #[entity(row_key = 0)]
    kind: String,
    #[entity(row_key = 1)]
    number: u32,
    #[entity(row_key = 2)]
    suffix: String,
    amount: i64,
}

/// Positions, not declaration order, decide the order of the parts.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Reversed")]
struct Reading {
    #[entity(row_key = 1)]
    sensor: String,
    #[entity(partition_key)]
    site: String,
    #[entity(row_key = 0)]
    offset: i64,
    level: f64,
}

fn order(region: &str, customer: &str, kind: &str, number: u32, suffix: &str) -> Order {
    Order {
        region: region.into(),
        customer: customer.into(),
        kind: kind.into(),
        number,
        suffix: suffix.into(),
        amount: 1,
    }
}

/// Characters that need care in composite keys, and a few that do not.
const SPECIAL: &[char] = &[
    ' ', '!', '"', '#', '.', '/', '>', '?', '[', '\\', '~', '\u{0}', '\u{1}', '\u{1f}', '\u{7f}',
    '\u{80}', '\u{9f}', '\u{a0}', 'a', 'b', 'z', '0', '9', 'A', '\'', '%', 'é', '\u{e000}',
    '\u{ffff}', '😀',
];

/// Short strings over an alphabet of awkward characters, so that generated
/// tuples often share prefixes and parts.
fn part() -> impl Strategy<Value = String> {
    let ch = prop_oneof![
        4 => prop::sample::select(SPECIAL),
        1 => any::<char>(),
    ];
    prop::collection::vec(ch, 0..6).prop_map(String::from_iter)
}

fn number() -> impl Strategy<Value = u32> {
    prop_oneof![0u32..3, Just(9), Just(10), Just(u32::MAX), any::<u32>()]
}

fn orders() -> impl Strategy<Value = Order> {
    (part(), part(), part(), number(), part()).prop_map(|(r, c, k, n, s)| order(&r, &c, &k, n, &s))
}

/// Tuple order, comparing strings as the service compares keys (by UTF-16
/// code unit).
fn tuple_order(a: &Order, b: &Order) -> (Ordering, Ordering) {
    let pk = compare_keys(&a.region, &b.region).then(compare_keys(&a.customer, &b.customer));
    let rk = compare_keys(&a.kind, &b.kind)
        .then(a.number.cmp(&b.number))
        .then(compare_keys(&a.suffix, &b.suffix));
    (pk, rk)
}

fn assert_valid_key(key: &str) {
    assert!(
        !key.chars().any(is_forbidden_key_char),
        "forbidden character in {key:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn composite_keys_are_valid_and_round_trip(o in orders()) {
        let data = o.encode().unwrap();
        assert_valid_key(data.partition_key.as_str());
        assert_valid_key(data.row_key.as_str());
        prop_assert_eq!(Order::decode(data).unwrap(), o);
    }

    #[test]
    fn composite_keys_keep_tuple_order(a in orders(), b in orders()) {
        let (ka, kb) = (a.encode().unwrap(), b.encode().unwrap());
        let (pk, rk) = tuple_order(&a, &b);
        prop_assert_eq!(compare_keys(ka.partition_key.as_str(), kb.partition_key.as_str()), pk);
        prop_assert_eq!(compare_keys(ka.row_key.as_str(), kb.row_key.as_str()), rk);
    }

    #[test]
    fn tuples_sharing_a_prefix_keep_order(
        shared in part(), a in part(), b in part(), n in number(), m in number(),
    ) {
        // (shared, a) against (shared + a, b): prefixes are where a naive
        // join would go wrong.
        let x = order(&shared, &a, &shared, n, &a);
        let y = order(&format!("{shared}{a}"), &b, &format!("{shared}{a}"), m, &b);
        let (kx, ky) = (x.encode().unwrap(), y.encode().unwrap());
        let (pk, rk) = tuple_order(&x, &y);
        prop_assert_eq!(compare_keys(kx.partition_key.as_str(), ky.partition_key.as_str()), pk);
        prop_assert_eq!(compare_keys(kx.row_key.as_str(), ky.row_key.as_str()), rk);
    }

    #[test]
    fn signed_and_string_parts_keep_order(
        a in (any::<i64>(), part()), b in (any::<i64>(), part()),
    ) {
        let r = |(offset, sensor): (i64, String)| Reading {
            sensor,
            site: "s".into(),
            offset,
            level: 0.0,
        };
        let (ra, rb) = (r(a.clone()), r(b.clone()));
        let (ka, kb) = (ra.encode().unwrap(), rb.encode().unwrap());
        assert_valid_key(ka.row_key.as_str());
        let expected = a.0.cmp(&b.0).then(compare_keys(&a.1, &b.1));
        prop_assert_eq!(compare_keys(ka.row_key.as_str(), kb.row_key.as_str()), expected);
        prop_assert_eq!(Reading::decode(ka).unwrap(), ra);
    }
}

#[test]
fn parts_are_escaped_and_joined_with_a_space() {
    let data = order("a b", "c", "x/y", 7, "#?").encode().unwrap();
    assert_eq!(data.partition_key.as_str(), "a!20b c");
    assert_eq!(data.row_key.as_str(), "x.1y 0000000007 \"1>1");
}

#[test]
fn positions_decide_the_order_of_parts() {
    let r = Reading {
        sensor: "t1".into(),
        site: "north".into(),
        offset: -1,
        level: 2.5,
    };
    let data = r.encode().unwrap();
    assert_eq!(data.partition_key.as_str(), "north");
    assert_eq!(data.row_key.as_str(), "09223372036854775807 t1");
    assert_eq!(Reading::decode(data).unwrap(), r);
}

fn decode_key(row_key: &str) -> Error {
    let mut properties = Properties::new();
    properties.insert("amount", leasehold::entity::Value::Int64(1));
    Order::decode(EntityData {
        partition_key: PartitionKey::new("eu c").unwrap(),
        row_key: RowKey::new(row_key).unwrap(),
        properties,
    })
    .unwrap_err()
}

#[test]
fn a_key_with_the_wrong_number_of_parts_is_a_decode_error() {
    match decode_key("x 0000000007") {
        Error::Decode {
            table,
            property,
            expected,
            found,
            ..
        } => {
            assert_eq!(table, "Composite");
            assert_eq!(property, "RowKey");
            assert_eq!(expected, "a composite key of 3 parts");
            assert_eq!(found, "2 parts");
        }
        other => panic!("expected Error::Decode, got {other:?}"),
    }
}

#[test]
fn a_key_with_a_bad_escape_is_a_decode_error() {
    match decode_key("x!7 0000000007 y") {
        Error::Decode {
            property, found, ..
        } => {
            assert_eq!(property, "RowKey");
            assert!(found.contains("bad escape"), "{found}");
        }
        other => panic!("expected Error::Decode, got {other:?}"),
    }
}

#[test]
fn a_part_of_the_wrong_form_is_a_decode_error_naming_its_field() {
    match decode_key("x 7 y") {
        Error::Decode {
            property, expected, ..
        } => {
            assert_eq!(property, "RowKey (field `number`)");
            assert_eq!(expected, "u32");
        }
        other => panic!("expected Error::Decode, got {other:?}"),
    }
}

#[test]
fn a_composite_key_over_1_kib_is_invalid() {
    let long = "x".repeat(300);
    let e = order("eu", "c", &long, 1, &long).encode().unwrap_err();
    assert!(matches!(e, Error::Invalid { .. }), "{e:?}");
    assert!(e.to_string().contains("row key"), "{e}");
}
