use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Sessions")]
struct Session {
    #[entity(partition_key)]
    user: String,
    #[entity(row_key)]
    id: String,
    #[entity(expires_at)]
    expires: i64,
}

fn main() {}
