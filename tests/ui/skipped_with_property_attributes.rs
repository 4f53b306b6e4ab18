use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Accounts")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    #[entity(skip, rename = "Cache")]
    cache: u32,
    #[entity(skip)]
    #[entity(skip)]
    twice: u32,
}

fn main() {}
