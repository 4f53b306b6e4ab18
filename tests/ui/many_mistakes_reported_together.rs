use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "my_table")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(rename = "PartitionKey")]
    region: String,
    #[entity(primary)]
    balance: i64,
}

fn main() {}
