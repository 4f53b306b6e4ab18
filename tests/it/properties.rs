//! Property tests run by the normal test command: the OData rendering of
//! random filters, and a stable smoke run of the fuzz targets (`fuzz/`) on
//! random bytes.
//!
//! Composite-key order and round trips through the derive are in
//! `tests/it/composite_keys.rs`; the entity wire codec's property tests are
//! unit tests of `src/backend/wire`.

#[path = "../../fuzz/src/lib.rs"]
mod fuzz_checks;

use leasehold::entity::Value;
use leasehold::query::{CmpOp, Filter};
use proptest::prelude::*;
use time::OffsetDateTime;
use time::macros::datetime;

/// The earliest and latest `Edm.DateTime` the service stores.
const MIN_DATE_TIME: OffsetDateTime = datetime!(1601-01-01 00:00:00 UTC);
const MAX_DATE_TIME: OffsetDateTime = datetime!(9999-12-31 23:59:59.9999999 UTC);

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
    let span = MAX_DATE_TIME.unix_timestamp() - MIN_DATE_TIME.unix_timestamp();
    prop_oneof![
        (0..=span, 0u32..10_000_000).prop_map(|(secs, ticks)| {
            (MIN_DATE_TIME + time::Duration::seconds(secs))
                .replace_nanosecond(ticks * 100)
                .expect("ticks below a second")
        }),
        Just(MIN_DATE_TIME),
        Just(MAX_DATE_TIME),
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
            f.comparisons() <= Filter::MAX_COMPARISONS,
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
