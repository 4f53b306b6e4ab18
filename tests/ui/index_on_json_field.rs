use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Customers")]
struct Customer {
    #[entity(partition_key)]
    region: String,
    #[entity(row_key)]
    id: String,
    #[entity(json, unique)]
    tags: Vec<String>,
    #[entity(index, json)]
    address: Option<String>,
}

fn main() {}
