use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Accounts")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    history: Vec<(i64, bool)>,
    ids: Option<[u8; 4]>,
}

fn main() {}
