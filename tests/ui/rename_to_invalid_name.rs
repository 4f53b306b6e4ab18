use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Accounts")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    #[entity(rename = "opening-balance")]
    opening_balance: i64,
    #[entity(rename = "2fa")]
    two_factor: bool,
    #[entity(rename = "")]
    nothing: bool,
}

fn main() {}
