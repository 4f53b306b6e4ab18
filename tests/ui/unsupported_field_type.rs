use leasehold::Entity;

struct Money(i64);

#[derive(Entity)]
#[entity(table = "Accounts")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    balance: Money,
}

fn main() {}
