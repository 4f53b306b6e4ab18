use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Orders")]
struct Order {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    id: String,
    total: i64,
    paid: bool,
    note: Option<String>,
}

fn main() {
    let c = Order::columns();
    // A bool is not a number, a number not a bool, a number not a string.
    let _ = c.total.ge(true);
    let _ = c.paid.eq(1);
    let _ = c.note.eq(7_i32);
    // Narrowing is not widening.
    let _ = c.total.eq(1_u64);
}
