//! The conformance suite on the embedded memory backend.

mod conformance;

use std::sync::Arc;

use leasehold::backend::memory::MemoryBackend;

conformance_suite!(Some(conformance::Ctx::new(Arc::new(MemoryBackend::new()))));
