use leasehold::Entity;

struct Connection;

#[derive(Entity)]
#[entity(table = "Accounts")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    #[entity(skip)]
    connection: Connection,
}

fn main() {}
