//! A query that is never run does nothing; neither does a filter left unused.
#![deny(unused_must_use)]

use leasehold::Entity;

#[derive(Entity, Clone)]
#[entity(table = "Accounts")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    balance: i64,
}

fn build(table: &leasehold::Table<Account>) {
    table.query().partition("alice").page_size(10);
    Account::columns().balance.gt(100);
}

fn main() {
    let _ = build;
}
