//! A partition lock dropped at once releases it and stages nothing.
#![deny(unused_must_use)]

async fn run(store: leasehold::Store) -> leasehold::Result<()> {
    store.lock("alice").await?;
    let unit = store.lock("bob").await?;
    unit.commit().await?;
    Ok(())
}

fn main() {
    let _ = run;
}
