use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Orders")]
struct Order {
    #[entity(partition_key)]
    region: String,
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    id: u64,
}

fn main() {}
