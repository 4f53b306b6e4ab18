use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "customer-accounts")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
}

#[derive(Entity)]
#[entity(table = "Tables")]
struct Reserved {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
}

#[derive(Entity)]
#[entity(table = "ab")]
struct Short {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
}

fn main() {}
