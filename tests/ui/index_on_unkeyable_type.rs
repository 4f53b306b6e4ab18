use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Customers")]
struct Customer {
    #[entity(partition_key)]
    region: String,
    #[entity(row_key)]
    id: String,
    #[entity(index)]
    score: f64,
    #[entity(unique)]
    active: Option<bool>,
    #[entity(index)]
    avatar: Vec<u8>,
}

fn main() {}
