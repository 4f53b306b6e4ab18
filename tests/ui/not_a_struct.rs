use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Accounts")]
enum Account {
    Open { customer: String },
}

#[derive(Entity)]
#[entity(table = "Pairs")]
struct Pair(String, String);

fn main() {}
