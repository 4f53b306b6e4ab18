use leasehold::Entity;

#[derive(Entity)]
#[entity(table = "Sessions")]
struct Session {
    #[entity(partition_key, expires_at)]
    user: String,
    #[entity(row_key)]
    id: String,
    #[entity(time_to_live = "30 days")]
    created: time::OffsetDateTime,
    #[entity(time_to_live = "0s")]
    touched: time::OffsetDateTime,
    #[entity(expires_at, time_to_live = "1h")]
    until: time::OffsetDateTime,
    #[entity(expires_at)]
    again: time::OffsetDateTime,
    #[entity(expires_at, json)]
    later: Option<time::OffsetDateTime>,
}

fn main() {}
