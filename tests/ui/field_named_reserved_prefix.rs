use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Accounts")]
#[allow(non_snake_case)]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    _lhWriteLog: String,
    #[entity(rename = "_lhGone")]
    gone: bool,
}

fn main() {}
