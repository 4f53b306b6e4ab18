use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Documents")]
struct Document {
    #[entity(partition_key)]
    folder: String,
    #[entity(row_key)]
    id: String,
    #[entity(chunked, unique)]
    body: String,
    #[entity(index, chunked)]
    attachment: Vec<u8>,
}

fn main() {}
