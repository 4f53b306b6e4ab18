use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Customers")]
struct Customer {
    #[entity(partition_key, index)]
    region: String,
    #[entity(row_key, unique)]
    id: String,
    #[entity(unique, index)]
    email: String,
}

fn main() {}
