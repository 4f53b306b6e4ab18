//! Property tests run by the normal test command: the entity wire codec on
//! random values, the OData rendering of random filters, and a stable smoke
//! run of the fuzz targets (`fuzz/`) on random bytes.
//!
//! Composite-key order and round trips through the derive are in
//! `tests/composite_keys.rs`.

#[path = "../fuzz/src/lib.rs"]
mod fuzz_checks;

use leasehold::entity::wire::{entity_from_json, entity_to_json};
use leasehold::entity::{Properties, RESERVED_NAMES, Value, datetime};
use leasehold::key::key_problem;
use leasehold::query::{CmpOp, Filter};
use proptest::prelude::*;
use time::OffsetDateTime;

/// Any double; NaN always in its canonical form (the wire spells every NaN
/// `"NaN"`, so payload bits are not kept).
fn double() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<u64>().prop_map(f64::from_bits),
        Just(0.0),
        Just(-0.0),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(f64::MIN_POSITIVE),
        Just(f64::MAX),
        Just(5e-324),
    ]
    .prop_map(|d| if d.is_nan() { f64::NAN } else { d })
}

/// A date-time within the service's range, at 100 ns resolution.
fn date_time() -> impl Strategy<Value = OffsetDateTime> {
    let span = datetime::MAX.unix_timestamp() - datetime::MIN.unix_timestamp();
    prop_oneof![
        (0..=span, 0u32..10_000_000).prop_map(|(secs, ticks)| {
            (datetime::MIN + time::Duration::seconds(secs))
                .replace_nanosecond(ticks * 100)
                .expect("ticks below a second")
        }),
        Just(datetime::MIN),
        Just(datetime::MAX),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        ".{0,40}".prop_map(Value::String),
        any::<bool>().prop_map(Value::Boolean),
        any::<i32>().prop_map(Value::Int32),
        prop_oneof![
            any::<i64>(),
            Just(i64::MIN),
            Just(i64::MAX),
            Just((1 << 53) + 1)
        ]
        .prop_map(Value::Int64),
        double().prop_map(Value::Double),
        date_time().prop_map(Value::DateTime),
        any::<u128>().prop_map(|n| Value::Guid(uuid::Uuid::from_u128(n))),
        prop::collection::vec(any::<u8>(), 0..40).prop_map(Value::Binary),
    ]
}

fn property_name() -> impl Strategy<Value = String> {
    "[A-Za-z_][A-Za-z0-9_]{0,12}"
        .prop_filter("not reserved", |n| !RESERVED_NAMES.contains(&n.as_str()))
}

fn valid_key() -> impl Strategy<Value = String> {
    r"[^/\\#?\x00-\x1f\x7f-\x{9f}]{0,30}".prop_filter("a valid key", |k| key_problem(k).is_none())
}

fn properties() -> impl Strategy<Value = Properties> {
    prop::collection::btree_map(property_name(), value(), 0..12)
        .prop_map(|m| m.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Every value survives the wire form and its JSON text: doubles to the
    /// bit (NaN, infinities, -0.0), Int64 past 2^53, date-times at 100 ns.
    #[test]
    fn entities_round_trip_through_the_wire_form(
        pk in valid_key(),
        rk in valid_key(),
        props in properties(),
    ) {
        let json = entity_to_json(&pk, &rk, &props);
        let text = serde_json::to_string(&json).unwrap();
        let parsed: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&text).unwrap();
        let back = entity_from_json("Props", &parsed).unwrap();
        prop_assert_eq!(&back.partition_key, &pk);
        prop_assert_eq!(&back.row_key, &rk);
        prop_assert_eq!(&back.properties, &props);
        prop_assert_eq!(back.timestamp, None);
    }

    /// A single value, written and read alone (so failures shrink to it).
    #[test]
    fn single_values_round_trip(v in value()) {
        let mut props = Properties::new();
        props.insert("v", v.clone());
        let json = entity_to_json("p", "r", &props);
        let back = entity_from_json("Props", &json).unwrap();
        prop_assert_eq!(back.properties.get("v"), Some(&v));
    }
}

// ---------------------------------------------------------------------------
// Filters
// ---------------------------------------------------------------------------

fn cmp_op() -> impl Strategy<Value = CmpOp> {
    prop_oneof![
        Just(CmpOp::Eq),
        Just(CmpOp::Ne),
        Just(CmpOp::Gt),
        Just(CmpOp::Ge),
        Just(CmpOp::Lt),
        Just(CmpOp::Le),
    ]
}

/// Literals a filter can hold: finite doubles, in-range date-times, and
/// strings full of quotes, parentheses and operator words.
fn literal() -> impl Strategy<Value = Value> {
    prop_oneof![
        "[a-z' ()]{0,12}".prop_map(Value::String),
        prop::sample::select(vec![
            "'",
            "''",
            "it's",
            ") or (x eq 1",
            " and ",
            "not (",
            "eq",
            "X'00'"
        ])
        .prop_map(|s| Value::String(s.to_owned())),
        value().prop_filter("the service can spell it", |v| match v {
            Value::Double(d) => d.is_finite(),
            _ => true,
        }),
    ]
}

fn comparison() -> impl Strategy<Value = Filter> {
    (
        prop::sample::select(fuzz_checks::NAMES.to_vec()),
        cmp_op(),
        literal(),
    )
        .prop_map(|(name, op, value)| Filter::compare(name, op, value))
}

fn filter() -> impl Strategy<Value = Filter> {
    comparison().prop_recursive(4, 24, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| a.and(b)),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| a.or(b)),
            inner.prop_map(Filter::not),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The rendered OData has balanced parentheses, every quote inside a
    /// string doubled, one operator per comparison, and parses back to the
    /// same filter.
    #[test]
    fn rendered_filters_are_well_formed_and_parse_back(f in filter()) {
        fuzz_checks::check_rendering(&f);
        let text = f.to_odata();
        prop_assert_eq!(
            f.validate().is_ok(),
            f.comparisons() <= leasehold::query::MAX_COMPARISONS,
            "{}", text
        );
    }

    /// Stable smoke runs of the fuzz targets on random bytes.
    #[test]
    fn fuzz_target_wire_codec(data in prop::collection::vec(any::<u8>(), 0..256)) {
        fuzz_checks::wire_codec(&data);
    }

    #[test]
    fn fuzz_target_composite_key(data in prop::collection::vec(any::<u8>(), 0..128)) {
        fuzz_checks::composite_key(&data);
    }

    #[test]
    fn fuzz_target_composite_key_on_escape_heavy_text(text in r##"[ !"#.>\[~0-9A-Fa-f/\\?\x00-\x1f\x7f-\u{9f}]{0,24}"##) {
        fuzz_checks::composite_key(text.as_bytes());
    }

    #[test]
    fn fuzz_target_filter_rendering(data in prop::collection::vec(any::<u8>(), 0..256)) {
        fuzz_checks::filter_rendering(&data);
    }

    /// Random bytes seldom make JSON objects: feed the codec objects of
    /// random, sometimes wrongly annotated, properties.
    #[test]
    fn fuzz_target_wire_codec_on_json_objects(
        entries in prop::collection::vec((
            prop::sample::select(vec![
                "PartitionKey", "RowKey", "Timestamp", "odata.etag", "a", "a@odata.type",
                "b", "b@odata.type", "c@odata.type",
            ]),
            json_leaf(),
        ), 0..10)
    ) {
        let map: serde_json::Map<String, serde_json::Value> = entries
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        fuzz_checks::wire_codec_json(&map);
    }
}

fn json_leaf() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::{Value as Json, json};
    prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        any::<u64>().prop_map(|i| json!(i)),
        any::<f64>().prop_map(|d| json!(d)),
        prop::sample::select(vec![
            "Edm.Int64",
            "Edm.Int32",
            "Edm.Double",
            "Edm.DateTime",
            "Edm.Guid",
            "Edm.Binary",
            "Edm.String",
            "Edm.Boolean",
            "Edm.Nope",
            "NaN",
            "-Infinity",
            "12",
            "1e400",
            "2024-01-02T03:04:05.123456789Z",
            "1600-12-31T23:59:59Z",
            "AAEC",
            "00000000-0000-0000-0000-000000000001",
            "",
        ])
        .prop_map(|s| Json::String(s.to_owned())),
        ".{0,8}".prop_map(Json::String),
        Just(json!({"nested": 1})),
        Just(json!([1, 2])),
    ]
}

/// Found by `entities_round_trip_through_the_wire_form`: without serde_json's
/// `float_roundtrip` feature this double was read back one ULP off.
#[test]
fn a_double_read_from_json_text_keeps_its_bits() {
    for d in [
        9.095032895894422e-197,
        2.2250738585072014e-308,
        1.7976931348623157e308,
    ] {
        let mut props = Properties::new();
        props.insert("d", Value::Double(d));
        let text = serde_json::to_string(&entity_to_json("p", "r", &props)).unwrap();
        let parsed = serde_json::from_str(&text).unwrap();
        let back = entity_from_json("Props", &parsed).unwrap();
        assert_eq!(back.properties.get("d"), Some(&Value::Double(d)), "{text}");
    }
}
