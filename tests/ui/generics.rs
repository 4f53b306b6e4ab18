use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Accounts")]
struct Account<T> {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    balance: T,
}

#[derive(Entity)]
#[entity(table = "Borrowed")]
struct Borrowed<'a> {
    #[entity(partition_key)]
    customer: &'a str,
    #[entity(row_key)]
    name: String,
}

fn main() {}
