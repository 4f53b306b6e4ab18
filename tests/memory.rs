//! The conformance suite on the embedded memory backend.

mod conformance;

use std::sync::Arc;

use leasehold::backend::memory::MemoryBackend;

conformance_suite!(Some(conformance::Ctx::new(Arc::new(MemoryBackend::new()))));

timed_conformance_suite!(
    #[tokio::test(start_paused = true)]
    Some(conformance::Ctx::new(Arc::new(MemoryBackend::new())))
);
