use leasehold::Entity;

enum Status {
    Pending,
    Shipped,
}

#[derive(Entity)]
#[entity(table = "Orders")]
struct Order {
    #[entity(partition_key)]
    shop: String,
    #[entity(row_key)]
    id: String,
    status: Status,
}

fn main() {}
