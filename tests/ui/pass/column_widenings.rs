//! A column compares with its own type and the documented lossless
//! widenings; each comparison renders the column's EDM literal.
use std::borrow::Cow;

use leasehold::Entity;

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

fn main() {
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
