//! A lease guard dropped at once releases the lease at once: an error under
//! `deny(unused_must_use)`, a warning by default.
#![deny(unused_must_use)]

use std::time::Duration;

async fn run(store: leasehold::Store) -> leasehold::Result<()> {
    store.leases().acquire("nightly-report", Duration::from_secs(5)).await?;
    let _held = store.leases().acquire("kept", Duration::from_secs(5)).await?;
    Ok(())
}

fn main() {
    let _ = run;
}
