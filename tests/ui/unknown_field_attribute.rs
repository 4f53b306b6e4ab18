use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Accounts")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    #[entity(renamed = "Balance", primary)]
    balance: i64,
}

fn main() {}
