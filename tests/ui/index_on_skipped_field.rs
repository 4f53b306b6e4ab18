use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Customers")]
struct Customer {
    #[entity(partition_key)]
    region: String,
    #[entity(row_key)]
    id: String,
    #[entity(skip, unique)]
    cached_email: String,
    #[entity(index, skip)]
    cached_city: String,
}

fn main() {}
