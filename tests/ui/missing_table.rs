use leasehold::Entity;

#[derive(Entity)]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
}

fn main() {}
