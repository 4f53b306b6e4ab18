use leasehold::Entity;
use leasehold::uuid::Uuid;

/// Fourteen GUIDs and their separators make 517 characters: no such key
/// fits the 1 KiB (512 UTF-16 units) limit.
#[derive(Entity)]
#[entity(table = "Links")]
struct Link {
    #[entity(partition_key)]
    shop: String,
    #[entity(row_key = 0)]
    a: Uuid,
    #[entity(row_key = 1)]
    b: Uuid,
    #[entity(row_key = 2)]
    c: Uuid,
    #[entity(row_key = 3)]
    d: Uuid,
    #[entity(row_key = 4)]
    e: Uuid,
    #[entity(row_key = 5)]
    f: Uuid,
    #[entity(row_key = 6)]
    g: Uuid,
    #[entity(row_key = 7)]
    h: Uuid,
    #[entity(row_key = 8)]
    i: Uuid,
    #[entity(row_key = 9)]
    j: Uuid,
    #[entity(row_key = 10)]
    k: Uuid,
    #[entity(row_key = 11)]
    l: Uuid,
    #[entity(row_key = 12)]
    m: Uuid,
    #[entity(row_key = 13)]
    n: Uuid,
}

fn main() {}
