use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Accounts")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    balance: i64,
    #[entity(rename = "balance")]
    old_balance: i64,
}

fn main() {}
