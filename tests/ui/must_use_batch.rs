//! A batch that is never committed is never sent.
#![deny(unused_must_use)]

use leasehold::Entity;

#[derive(Entity, Clone)]
#[entity(table = "Accounts")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
}

fn stage(table: &leasehold::Table<Account>) {
    table.batch().insert(Account { customer: "alice".into(), name: "checking".into() });
}

fn main() {
    let _ = stage;
}
