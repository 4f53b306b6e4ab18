use leasehold::{Entity, Store};

#[derive(Entity)]
#[entity(table = "Orders")]
struct Order {
    #[entity(partition_key)]
    shop: String,
    #[entity(row_key)]
    id: String,
}

async fn read(store: &Store) {
    // The row key comes from a field: one partition holds many rows.
    let _ = store.table::<Order>().get_one("s1").await;
}

fn main() {
    let _ = read;
}
