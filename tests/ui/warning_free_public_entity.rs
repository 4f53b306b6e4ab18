//! A public entity in a crate that denies warnings and missing docs: the
//! generated column set and `columns()` are documented and warning-free.
//!
//! The case is checked, not built (a passing case would make trybuild build
//! every dependency), so it ends with one deliberate lint error, an
//! undocumented public item: the expected output is that error alone, and
//! any warning from the derive (lints run together) fails the case.
#![deny(missing_docs, warnings)]

use leasehold::Entity;

/// An account.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Accounts")]
pub struct Account {
    /// The customer.
    #[entity(partition_key)]
    pub customer: String,
    /// The account's name.
    #[entity(row_key)]
    pub name: String,
    /// The balance in cents.
    pub balance: i64,
    /// Free-form tags.
    #[entity(json, default)]
    pub tags: Vec<String>,
}

/// Keys only, composed of several fields.
#[derive(Entity)]
#[entity(table = "Markers")]
pub struct Marker {
    /// The scope.
    #[entity(partition_key = 0)]
    pub scope: String,
    /// The shard.
    #[entity(partition_key = 1)]
    pub shard: u8,
    /// The id.
    #[entity(row_key)]
    pub id: uuid::Uuid,
}

fn main() {
    let _ = Account::columns().balance.gt(0);
    let _ = Marker::columns();
}

pub struct TheOnlyUndocumentedItem;
