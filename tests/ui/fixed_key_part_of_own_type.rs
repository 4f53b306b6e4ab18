use leasehold::Entity;
use leasehold::key::KeyPart;

/// A type of its own that shares a name with `uuid::Uuid`.
struct Uuid(String);

impl KeyPart for Uuid {
    fn write_key(&self, out: &mut String) {
        out.push_str(&self.0);
    }
    fn parse_key(s: &str) -> Result<Self, String> {
        Ok(Uuid(s.to_owned()))
    }
}

#[derive(Entity)]
#[entity(table = "Orders")]
struct Order {
    #[entity(partition_key)]
    shop: String,
    #[entity(row_key)]
    id: Uuid,
}

fn main() {}
