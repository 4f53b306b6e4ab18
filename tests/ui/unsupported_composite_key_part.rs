use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Readings")]
struct Reading {
    #[entity(partition_key)]
    sensor: String,
    #[entity(row_key = 0)]
    day: u32,
    #[entity(row_key = 1)]
    level: f32,
}

fn main() {}
