//! Shared support for integration tests.
#![allow(dead_code)]

pub mod azurite;
pub mod fault_proxy;
pub mod oauth;
pub mod secrets;

use std::sync::Arc;

use leasehold::backend::Backend;
use leasehold::backend::azure::AzureBackend;

/// The Azurite backend to test against, or `None` (with a notice) when
/// Azurite is not configured and not required. Panics in CI without Azurite.
pub fn azurite_backend() -> Option<Arc<dyn Backend>> {
    let cs = azurite::azurite_connection_string()?;
    let backend =
        AzureBackend::from_connection_string(&cs).expect("the Azurite connection string parses");
    Some(Arc::new(backend))
}
