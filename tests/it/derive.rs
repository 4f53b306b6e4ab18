//! `#[derive(Entity)]`: what the generated impl stores, its column set, and
//! that generated code compiles whatever the user's module has in scope.

use leasehold::entity::{Entity, EntityData, Properties, Value};
use leasehold::{Entity, PartitionKey, RowKey};

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Accounts")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    balance: i64,
    #[entity(rename = "Owner")]
    owner: Option<String>,
    #[entity(json)]
    tags: Vec<String>,
    #[entity(skip)]
    cache: u32,
}

fn account() -> Account {
    Account {
        customer: "c1".into(),
        name: "savings".into(),
        balance: 5,
        owner: Some("ann".into()),
        tags: vec!["x".into()],
        cache: 9,
    }
}

#[test]
fn keys_are_not_properties_and_the_rest_is_stored_as_declared() {
    let data = account().encode().unwrap();
    assert_eq!(data.partition_key.as_str(), "c1");
    assert_eq!(data.row_key.as_str(), "savings");
    let mut expected = Properties::new();
    expected.insert("balance", Value::Int64(5));
    expected.insert("Owner", Value::String("ann".into()));
    expected.insert("tags", Value::String(r#"["x"]"#.into()));
    assert_eq!(data.properties, expected);
    assert_eq!(
        Account::decode(data).unwrap(),
        Account {
            cache: 0,
            ..account()
        }
    );
}

#[test]
fn table_and_property_names_are_constants() {
    assert_eq!(Account::TABLE, "Accounts");
    assert_eq!(Account::PROPERTY_NAMES, ["balance", "Owner", "tags"]);
}

#[test]
fn key_methods_give_validated_keys() {
    let a = account();
    assert_eq!(a.partition_key().unwrap(), PartitionKey::new("c1").unwrap());
    assert_eq!(a.row_key().unwrap(), RowKey::new("savings").unwrap());
    let bad = Account {
        name: "a#b".into(),
        ..account()
    };
    let e = bad.row_key().unwrap_err();
    assert!(e.to_string().contains("row key"), "{e}");
    assert!(e.to_string().contains("Accounts"), "{e}");
}

#[test]
fn columns_are_named_after_fields_and_compare_stored_names() {
    let c = Account::columns();
    let f = c.balance.gt(100) & !c.name.eq("savings");
    assert_eq!(
        f.to_odata().unwrap(),
        "(balance gt 100L) and (not (RowKey eq 'savings'))"
    );
    assert_eq!(c.customer.name(), "PartitionKey");
    assert_eq!(c.name.name(), "RowKey");
    // An `Option<T>` field's column compares values of `T`.
    assert_eq!(c.owner.name(), "Owner");
    assert_eq!(
        c.owner.eq("o'brien").to_odata().unwrap(),
        "Owner eq 'o''brien'"
    );
}

#[test]
fn json_and_skipped_fields_and_encoded_keys_have_no_column() {
    assert_eq!(
        format!("{:?}", Account::columns()),
        "AccountColumns { customer: Column(PartitionKey), name: Column(RowKey), \
         balance: Column(balance), owner: Column(Owner) }"
    );
    assert_eq!(
        format!("{:?}", Event::columns()),
        "EventColumns { source: Column(PartitionKey), payload: Column(payload) }"
    );
}

/// Column sets are values: copied, and built in constants.
const ACCOUNT_COLUMNS: AccountColumns = Account::columns();

#[test]
fn column_sets_are_const_and_copy() {
    let c = ACCOUNT_COLUMNS;
    let d = c;
    assert_eq!(c.balance.name(), d.balance.name());
}

/// An entity whose row key is not a single `String`.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Events")]
struct Event {
    #[entity(partition_key)]
    source: String,
    #[entity(row_key)]
    sequence: u64,
    payload: Vec<u8>,
}

#[test]
fn a_typed_row_key_is_stored_in_its_key_form() {
    let e = Event {
        source: "s".into(),
        sequence: 12,
        payload: vec![1],
    };
    let data = e.encode().unwrap();
    assert_eq!(data.row_key.as_str(), "00000000000000000012");
    assert_eq!(Event::decode(data).unwrap(), e);
}

/// Only keys: no properties at all.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Markers")]
struct Marker {
    #[entity(partition_key)]
    scope: String,
    #[entity(row_key)]
    id: uuid::Uuid,
    #[entity(skip)]
    seen: bool,
}

#[test]
fn an_entity_of_keys_only_round_trips() {
    let m = Marker {
        scope: "x".into(),
        id: uuid::Uuid::nil(),
        seen: false,
    };
    let data = m.encode().unwrap();
    assert!(data.properties.is_empty());
    assert!(Marker::PROPERTY_NAMES.is_empty());
    assert_eq!(Marker::decode(data).unwrap(), m);
}

/// Field names that are Rust keywords or not ASCII.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Unusual")]
struct Unusual {
    #[entity(partition_key)]
    r#type: String,
    #[entity(row_key)]
    r#ref: String,
    r#match: bool,
    größe: i32,
}

#[test]
fn raw_and_unicode_field_names_are_stored_as_written() {
    let u = Unusual {
        r#type: "t".into(),
        r#ref: "r".into(),
        r#match: true,
        größe: 3,
    };
    assert_eq!(Unusual::PROPERTY_NAMES, ["match", "größe"]);
    let data = u.encode().unwrap();
    assert_eq!(data.properties.get("match"), Some(&Value::Boolean(true)));
    assert_eq!(data.properties.get("größe"), Some(&Value::Int32(3)));
    assert_eq!(Unusual::columns().r#match.name(), "match");
    assert_eq!(Unusual::columns().r#type.name(), "PartitionKey");
    assert_eq!(Unusual::decode(data).unwrap(), u);
}

/// Column sets have the visibility of their entity.
mod visibility {
    use leasehold::Entity;

    #[derive(Entity, Debug)]
    #[entity(table = "Public")]
    pub struct Public {
        #[entity(partition_key)]
        pub pk: String,
        #[entity(row_key)]
        pub rk: String,
        pub count: i32,
    }

    #[derive(Entity, Debug)]
    #[entity(table = "Crate")]
    pub(crate) struct InCrate {
        #[entity(partition_key)]
        pub pk: String,
        #[entity(row_key)]
        pub rk: String,
    }
}

#[test]
fn column_sets_are_visible_where_their_entity_is() {
    let c: visibility::PublicColumns = visibility::Public::columns();
    assert_eq!(c.count.eq(1).to_odata().unwrap(), "count eq 1");
    let c: visibility::InCrateColumns = visibility::InCrate::columns();
    assert_eq!(c.rk.name(), "RowKey");
}

/// Generated code names everything by absolute path: it compiles in a module
/// where the prelude's names, and the crate's own name, mean something else.
#[allow(
    dead_code,
    non_camel_case_types,
    non_upper_case_globals,
    clippy::upper_case_acronyms
)]
mod shadowed_prelude {
    const value: u8 = 0;
    const props: u8 = 0;
    const data: u8 = 0;
    const pk: u8 = 0;
    const rk: u8 = 0;
    const pk_0: u8 = 0;
    const f: u8 = 0;
    struct str;
    struct usize;
    struct Result;
    struct Ok;
    struct Err;
    struct Option;
    struct Some;
    struct None;
    struct String;
    struct Vec;
    struct Default;
    struct Clone;
    struct Copy;
    struct Debug;
    struct Box;
    struct Send;
    struct Sync;
    struct Sized;
    struct Properties;
    struct PartitionKey;
    struct RowKey;
    struct Column;
    struct Entity;
    struct EntityData;
    mod leasehold {}
    mod std {}
    mod core {}
    trait Into {}
    trait From {}
    trait ToString {}
    fn drop() {}

    #[derive(
        ::leasehold::Entity, ::std::fmt::Debug, ::std::clone::Clone, ::std::cmp::PartialEq,
    )]
    #[entity(table = "Shadowed")]
    pub struct Shadowed {
        #[entity(partition_key = 0)]
        pub a: ::std::string::String,
        #[entity(partition_key = 1)]
        pub b: u32,
        #[entity(row_key)]
        pub c: ::std::string::String,
        pub n: ::std::option::Option<i64>,
        #[entity(default)]
        pub d: ::std::vec::Vec<u8>,
        #[entity(json, default)]
        pub j: ::std::vec::Vec<::std::string::String>,
        #[entity(json)]
        pub k: ::std::option::Option<bool>,
        #[entity(skip)]
        pub s: ::std::option::Option<::std::string::String>,
    }
}

#[test]
fn generated_code_compiles_with_shadowed_prelude_names() {
    use shadowed_prelude::Shadowed;
    let s = Shadowed {
        a: "x y".into(),
        b: 3,
        c: "c".into(),
        n: Some(4),
        d: vec![1],
        j: vec!["q".into()],
        k: None,
        s: None,
    };
    let data = s.encode().unwrap();
    assert_eq!(data.partition_key.as_str(), "x!20y 0000000003");
    assert_eq!(Shadowed::decode(data).unwrap(), s);
    assert_eq!(
        Shadowed::columns().n.eq(4_i64).to_odata().unwrap(),
        "n eq 4L"
    );
    let _ = EntityData {
        partition_key: PartitionKey::new("p").unwrap(),
        row_key: RowKey::new("r").unwrap(),
        properties: Properties::new(),
    };
}

/// The column set drives real queries: key columns filter on the key, an
/// `Option` column on its inner type, against the memory backend.
#[tokio::test]
async fn column_filters_select_rows_through_a_store() {
    let accounts = leasehold::Store::memory().table::<Account>();
    for (name, balance, owner) in [
        ("checking", 10, Some("ann")),
        ("savings", 500, None),
        ("spare", 200, Some("bob")),
    ] {
        accounts
            .insert(Account {
                customer: "c1".into(),
                name: name.into(),
                balance,
                owner: owner.map(Into::into),
                tags: vec![],
                cache: 0,
            })
            .await
            .unwrap();
    }
    let c = Account::columns();
    let names = |rows: Vec<leasehold::Versioned<Account>>| {
        let mut names: Vec<String> = rows.into_iter().map(|r| r.into_inner().name).collect();
        names.sort();
        names
    };
    let rich = accounts
        .query()
        .filter(c.balance.gt(100) & !c.name.eq("savings"))
        .all()
        .await
        .unwrap();
    assert_eq!(names(rich), ["spare"]);
    let owned = accounts
        .query()
        .filter(c.customer.eq("c1") & c.owner.ge("ann"))
        .all()
        .await
        .unwrap();
    assert_eq!(names(owned), ["checking", "spare"]);
}

/// A column compares with its own type and the documented lossless
/// widenings (and nothing else: `tests/ui/bool_compared_with_int64_column.rs`);
/// each comparison renders the column's EDM literal.
mod widenings {
    use std::borrow::Cow;

    use leasehold::Entity;

    #[allow(dead_code)]
    #[derive(Entity)]
    #[entity(table = "Things")]
    struct Thing {
        #[entity(partition_key)]
        pk: String,
        #[entity(row_key)]
        rk: String,
        big: i64,
        small: i32,
        tiny: i16,
        unsigned: u32,
        huge: u64,
        ratio: f64,
        note: Option<String>,
        maybe_big: Option<i64>,
        bytes: Vec<u8>,
        flag: bool,
    }

    fn odata(f: leasehold::query::TypedFilter<Thing>) -> String {
        f.to_odata().unwrap()
    }

    // The borrows are what is checked: a column takes references too.
    #[allow(clippy::needless_borrows_for_generic_args)]
    #[test]
    fn columns_take_their_type_and_lossless_widenings() {
        let c = Thing::columns();
        // Integer literals on an i64 column, and every narrower integer.
        assert_eq!(odata(c.big.ge(100)), "big ge 100L");
        assert_eq!(odata(c.big.eq(5_000_000_000_i64)), "big eq 5000000000L");
        assert_eq!(odata(c.big.eq(-3_i8)), "big eq -3L");
        assert_eq!(odata(c.big.eq(3_i16)), "big eq 3L");
        assert_eq!(odata(c.big.eq(3_i32)), "big eq 3L");
        assert_eq!(odata(c.big.eq(3_u8)), "big eq 3L");
        assert_eq!(odata(c.big.eq(3_u16)), "big eq 3L");
        assert_eq!(odata(c.big.eq(u32::MAX)), "big eq 4294967295L");
        assert_eq!(odata(c.small.eq(7)), "small eq 7");
        assert_eq!(odata(c.small.eq(7_u16)), "small eq 7");
        assert_eq!(odata(c.tiny.eq(7_i8)), "tiny eq 7");
        assert_eq!(odata(c.unsigned.eq(7_u16)), "unsigned eq 7L");
        assert_eq!(odata(c.huge.eq(7_u32)), "huge eq 7L");
        // Doubles take f32 and integers, which they hold exactly.
        assert_eq!(odata(c.ratio.gt(0.5)), "ratio gt 0.5");
        assert_eq!(odata(c.ratio.gt(0.5_f32)), "ratio gt 0.5");
        assert_eq!(odata(c.ratio.gt(2)), "ratio gt 2.0");
        // Strings take borrowed and boxed strings.
        assert_eq!(odata(c.pk.eq("p")), "PartitionKey eq 'p'");
        assert_eq!(odata(c.pk.eq(&String::from("p"))), "PartitionKey eq 'p'");
        assert_eq!(odata(c.pk.eq(String::from("p"))), "PartitionKey eq 'p'");
        assert_eq!(odata(c.pk.eq(Box::<str>::from("p"))), "PartitionKey eq 'p'");
        assert_eq!(odata(c.pk.eq(Cow::Borrowed("p"))), "PartitionKey eq 'p'");
        // An Option field's column compares with the inner type.
        assert_eq!(odata(c.note.eq("n")), "note eq 'n'");
        assert_eq!(odata(c.maybe_big.lt(9)), "maybe_big lt 9L");
        // Byte strings.
        assert_eq!(odata(c.bytes.eq(&[1_u8, 2][..])), "bytes eq X'0102'");
        assert_eq!(odata(c.bytes.eq([1_u8, 2])), "bytes eq X'0102'");
        assert_eq!(odata(c.bytes.eq(&vec![1_u8, 2])), "bytes eq X'0102'");
        assert_eq!(odata(c.flag.eq(true)), "flag eq true");
    }
}

/// The derives of the entity mapping (enums, constant keys, key builders,
/// prefix filters, chunked fields, the unknown-properties opt-out) compile
/// with prelude names shadowed too.
#[allow(
    dead_code,
    non_camel_case_types,
    non_upper_case_globals,
    clippy::upper_case_acronyms
)]
mod shadowed_mapping {
    const value: u8 = 0;
    const name: u8 = 0;
    const a: u8 = 0;
    const b: u8 = 0;
    struct bool;
    struct i32;
    struct str;
    struct Result;
    struct Ok;
    struct Err;
    struct Option;
    struct Some;
    struct None;
    struct String;
    struct Value;
    struct EdmType;
    struct TypedFilter;
    struct PropertyCodec;
    struct Entity;
    mod leasehold {}
    mod std {}
    mod core {}
    trait Into {}

    #[derive(
        ::leasehold::PropertyCodec, ::std::fmt::Debug, ::std::clone::Clone, ::std::cmp::PartialEq,
    )]
    #[entity(rename_all = "kebab-case")]
    pub enum Mood {
        VeryHappy,
        Sad,
    }

    #[derive(
        ::leasehold::PropertyCodec, ::std::fmt::Debug, ::std::clone::Clone, ::std::cmp::PartialEq,
    )]
    #[entity(int32)]
    pub enum Level {
        Low = -1,
        High = 2,
    }

    #[derive(
        ::leasehold::Entity, ::std::fmt::Debug, ::std::clone::Clone, ::std::cmp::PartialEq,
    )]
    #[entity(table = "ShadowedMap", row_key = "one", drop_unknown_properties)]
    pub struct Mapped {
        #[entity(partition_key = 0)]
        pub a: ::std::string::String,
        #[entity(partition_key = 1)]
        pub b: u32,
        pub mood: Mood,
        pub level: ::std::option::Option<Level>,
        #[entity(chunked)]
        pub body: ::std::string::String,
        #[entity(json, chunked)]
        pub list: ::std::vec::Vec<u32>,
    }
}

#[test]
fn mapping_derives_compile_with_shadowed_prelude_names() {
    use shadowed_mapping::{Level, Mapped, Mood};
    let m = Mapped {
        a: "x".into(),
        b: 1,
        mood: Mood::VeryHappy,
        level: Some(Level::Low),
        body: "é".repeat(40_000),
        list: vec![1, 2],
    };
    let data = m.encode().unwrap();
    assert_eq!(data.row_key.as_str(), "one");
    assert_eq!(
        data.properties.get("mood"),
        Some(&Value::String("very-happy".into()))
    );
    assert_eq!(data.properties.get("body_count"), Some(&Value::Int32(2)));
    assert_eq!(Mapped::decode(data.clone()).unwrap(), m);
    assert_eq!(
        Mapped::partition_key_from("x", 1u32).unwrap(),
        data.partition_key
    );
    assert_eq!(
        Mapped::partition_key_prefix_a("x").to_odata().unwrap(),
        "(PartitionKey ge 'x ') and (PartitionKey lt 'x!')"
    );
    const { assert!(!Mapped::KEEP_UNKNOWN_PROPERTIES) };
    assert!(Mapped::is_own_property("body_7"));
    assert!(!Mapped::is_own_property("other"));
    assert_eq!(
        Mapped::columns().level.ge(Level::High).to_odata().unwrap(),
        "level ge 2"
    );
}
