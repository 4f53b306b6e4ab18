use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Accounts")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    #[entity(rename = "Timestamp")]
    updated: i64,
    #[entity(rename = "RowKey")]
    row: String,
}

fn main() {}
