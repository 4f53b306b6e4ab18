use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Orders")]
struct Order {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key = -1)]
    year: u16,
    #[entity(row_key = "one")]
    id: u64,
}

fn main() {}
