use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Accounts")]
struct Account {
    customer: String,
    #[entity(row_key)]
    name: String,
}

fn main() {}
