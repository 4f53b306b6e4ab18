use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Documents")]
struct Document {
    #[entity(partition_key)]
    folder: String,
    #[entity(row_key)]
    name: String,
    #[entity(chunked)]
    size: i64,
}

fn main() {}
