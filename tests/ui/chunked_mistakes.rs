use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Documents")]
struct Document {
    #[entity(partition_key, chunked)]
    folder: String,
    #[entity(row_key)]
    name: String,
    #[entity(chunked)]
    body: String,
    body_count: i32,
    #[entity(rename = "body_2")]
    extra: String,
    #[entity(skip, chunked)]
    cache: String,
    #[entity(chunked = true)]
    notes: String,
}

fn main() {}
