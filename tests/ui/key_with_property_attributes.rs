use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Accounts")]
struct Account {
    #[entity(partition_key, rename = "Customer")]
    customer: String,
    #[entity(row_key, json)]
    name: String,
    #[entity(partition_key, row_key)]
    both: String,
}

fn main() {}
