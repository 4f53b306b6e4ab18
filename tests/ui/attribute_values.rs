use leasehold::Entity;

#[derive(Entity)]
#[entity(table = Accounts)]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    #[entity(rename = 5)]
    balance: i64,
    #[entity(json = true)]
    tags: Vec<String>,
}

fn main() {}
