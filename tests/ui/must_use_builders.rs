//! Builders and options do nothing until built or given to what uses them.
#![deny(unused_must_use)]

use std::time::Duration;

use leasehold::Store;
use leasehold::backend::memory::MemoryBackend;
use leasehold::lease::{LeaderOptions, LeaseOptions};

fn configure() -> leasehold::Result<()> {
    Store::builder(MemoryBackend::new()).table_prefix("shop")?;
    MemoryBackend::builder().scan_limit(10);
    LeaseOptions::new().with_duration(Duration::from_secs(20));
    LeaderOptions::new().with_campaign_again(false);
    Ok(())
}

fn main() {
    let _ = configure;
}
