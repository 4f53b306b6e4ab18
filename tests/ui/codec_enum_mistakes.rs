use leasehold::PropertyCodec;

#[derive(PropertyCodec)]
#[entity(rename_all = "snakecase", renameall = "x")]
enum Status {
    Pending,
    Shipped(u32),
    #[entity(rename = "Pending")]
    Waiting,
    #[entity(renam = "x")]
    Lost,
}

#[derive(PropertyCodec)]
enum Never {}

#[derive(PropertyCodec)]
struct NotAnEnum {
    status: String,
}

fn main() {}
