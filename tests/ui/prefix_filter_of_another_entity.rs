use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Orders")]
struct Order {
    #[entity(partition_key)]
    shop: String,
    #[entity(row_key = 0)]
    year: i32,
    #[entity(row_key = 1)]
    number: u32,
}

#[derive(Entity)]
#[entity(table = "Invoices")]
struct Invoice {
    #[entity(partition_key)]
    shop: String,
    #[entity(row_key = 0)]
    year: i32,
    #[entity(row_key = 1)]
    number: u32,
}

fn main() {
    let _: leasehold::query::TypedFilter<Invoice> = Order::row_key_prefix_year(2026);
    let _ = Order::row_key_from(2026);
}
