use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Customers", row_key = "profile", row_key = "other")]
struct Profile {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    kind: String,
    name: String,
}

#[derive(Entity)]
#[entity(table = "Settings", partition_key = "a/b", row_key = 7)]
struct Settings {
    #[entity(row_key)]
    key: String,
}

#[derive(Entity)]
#[entity(table = "Strict", drop_unknown_properties = true, rowkey = "x")]
struct Strict {
    #[entity(partition_key)]
    pk: String,
    #[entity(row_key)]
    rk: String,
}

fn main() {}
