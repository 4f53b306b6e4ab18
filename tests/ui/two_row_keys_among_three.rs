use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Orders")]
struct Order {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    year: u16,
    #[entity(row_key)]
    month: u8,
    #[entity(row_key)]
    id: u64,
}

fn main() {}
