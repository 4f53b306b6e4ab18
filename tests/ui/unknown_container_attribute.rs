use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Accounts", tabel = "Acounts")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
}

fn main() {}
