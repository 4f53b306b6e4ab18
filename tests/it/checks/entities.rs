//! Entity types used by the conformance checks.

use leasehold::Entity;
use time::OffsetDateTime;
use uuid::Uuid;

/// One field of every supported type.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "AllTypes")]
pub struct AllTypes {
    #[entity(partition_key)]
    pub pk: String,
    #[entity(row_key)]
    pub rk: String,
    pub text: String,
    pub flag: bool,
    pub int32: i32,
    pub int64: i64,
    pub double: f64,
    pub when: OffsetDateTime,
    pub id: Uuid,
    pub bytes: Vec<u8>,
    pub small: u8,
    pub unsigned: u32,
    pub big: u64,
    pub maybe: Option<String>,
    #[entity(json)]
    pub tags: Vec<String>,
}

impl AllTypes {
    pub fn sample(pk: &str, rk: &str) -> Self {
        AllTypes {
            pk: pk.into(),
            rk: rk.into(),
            text: "héllo 'wörld' 日本".into(),
            flag: true,
            int32: -7,
            int64: (1 << 53) + 1,
            double: 1.5,
            when: time::macros::datetime!(2024-02-29 12:34:56.1234567 UTC),
            id: Uuid::from_u128(0x1234_5678_9abc_def0_1234_5678_9abc_def0),
            bytes: vec![0, 1, 2, 255],
            small: 200,
            unsigned: u32::MAX,
            big: i64::MAX as u64,
            maybe: Some("present".into()),
            tags: vec!["a".into(), "b".into()],
        }
    }
}

/// A counter, for read-modify-write checks.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Counters")]
pub struct Counter {
    #[entity(partition_key)]
    pub pk: String,
    #[entity(row_key)]
    pub rk: String,
    pub n: i64,
    pub note: Option<String>,
}

impl Counter {
    pub fn new(pk: &str, rk: &str, n: i64) -> Self {
        Counter {
            pk: pk.into(),
            rk: rk.into(),
            n,
            note: None,
        }
    }
}

/// The same table as [`Counter`], read with a different shape.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Counters")]
pub struct CounterAsText {
    #[entity(partition_key)]
    pub pk: String,
    #[entity(row_key)]
    pub rk: String,
    pub n: String,
}

/// A projection of [`Counter`] that tolerates missing properties.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Counters")]
pub struct CounterNote {
    #[entity(partition_key)]
    pub pk: String,
    #[entity(row_key)]
    pub rk: String,
    pub note: Option<String>,
    #[entity(default)]
    pub n: i64,
}
