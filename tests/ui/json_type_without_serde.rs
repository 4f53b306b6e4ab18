use leasehold::Entity;

struct Tags(Vec<String>);

#[derive(Entity)]
#[entity(table = "Accounts")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    #[entity(json)]
    tags: Tags,
}

fn main() {}
