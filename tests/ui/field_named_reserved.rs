use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Accounts")]
#[allow(non_snake_case)]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    Timestamp: i64,
}

fn main() {}
