//! The test kit (feature `conformance`): backend wrappers for tests that
//! count requests and inject faults, and the conformance suite.
//!
//! Both wrap any backend and implement the same traits, so a store built on
//! them behaves exactly as on the wrapped backend, except for what the test
//! asks for:
//!
//! * [`CountingBackend`] counts requests by [`Op`], to pin request budgets.
//! * [`FaultyBackend`] fails the n-th request, loses the reply of a request
//!   that was applied, adds latency, hangs a request, or stops sending
//!   altogether as if the process had died.
//!
//! ```
//! use leasehold::backend::memory::MemoryBackend;
//! use leasehold::backend::Op;
//! use leasehold::testing::CountingBackend;
//! use leasehold::{Entity, Store};
//!
//! #[derive(Entity, Clone, Debug)]
//! #[entity(table = "Things")]
//! struct Thing { #[entity(partition_key)] pk: String, #[entity(row_key)] rk: String }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let counting = CountingBackend::new(MemoryBackend::new());
//! let counts = counting.counter();
//! let things = Store::new(counting).table::<Thing>();
//! things.get("a", "b").await?;
//! things.get("a", "c").await?;
//! assert_eq!(counts.get(Op::Get), 2);
//! assert_eq!(counts.get(Op::CreateTable), 1, "created once per store");
//! # Ok::<(), leasehold::Error>(()) }).unwrap();
//! ```

#[cfg(any(feature = "conformance", clippy))]
pub mod conformance;
mod faults;

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};

pub use faults::{Fault, FaultInjector, FaultyBackend};

use crate::backend::delegate::delegate_backend;
use crate::backend::{Layer, Op, Request};
use crate::error::Result;

/// A shared view of the counts of a [`CountingBackend`]: requests by
/// kind, and the round trips they took.
#[derive(Clone, Default)]
pub struct RequestCounter {
    counts: Arc<Mutex<Counts>>,
}

#[derive(Default)]
struct Counts {
    by_op: BTreeMap<Op, u64>,
    in_flight: u64,
    /// The longest chain of requests answered so far, each sent after the
    /// one before it was answered: a request sent now follows all of them.
    deepest: u64,
}

impl fmt::Debug for RequestCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.snapshot()).finish()
    }
}

impl RequestCounter {
    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        // Counts stay meaningful after a panic elsewhere.
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Requests of one kind so far.
    pub fn get(&self, op: Op) -> u64 {
        self.lock().by_op.get(&op).copied().unwrap_or(0)
    }

    /// All requests so far, setup included.
    pub fn total(&self) -> u64 {
        self.lock().by_op.values().sum()
    }

    /// All requests so far except one-time setup ([`Op::is_setup`]).
    pub fn work(&self) -> u64 {
        self.lock()
            .by_op
            .iter()
            .filter(|(op, _)| !op.is_setup())
            .map(|(_, n)| n)
            .sum()
    }

    /// The counts by kind.
    pub fn snapshot(&self) -> BTreeMap<Op, u64> {
        self.lock().by_op.clone()
    }

    /// Round trips since the last [`reset`](Self::reset): the longest chain
    /// of answered requests, each sent after the one before it was
    /// answered. Requests sent together count once, however slow the
    /// machine; lease renewals, which run beside the work, are left out.
    pub fn round_trips(&self) -> u64 {
        self.lock().deepest
    }

    /// Requests sent and not answered yet.
    pub fn in_flight(&self) -> u64 {
        self.lock().in_flight
    }

    /// Forgets every count and round trip (not the requests in flight).
    pub fn reset(&self) {
        let mut counts = self.lock();
        counts.by_op.clear();
        counts.deepest = 0;
    }
}

/// A backend wrapper that counts every request by kind (failed ones too).
#[derive(Debug)]
pub struct CountingBackend<B> {
    inner: B,
    counter: RequestCounter,
}

impl<B: Clone> Clone for CountingBackend<B> {
    fn clone(&self) -> Self {
        CountingBackend {
            inner: self.inner.clone(),
            counter: self.counter.clone(),
        }
    }
}

impl<B> CountingBackend<B> {
    /// Wraps `inner`.
    pub fn new(inner: B) -> Self {
        CountingBackend {
            inner,
            counter: RequestCounter::default(),
        }
    }

    /// A handle on the counts that outlives moving the backend into a store.
    pub fn counter(&self) -> RequestCounter {
        self.counter.clone()
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &B {
        &self.inner
    }
}

/// A counter is a [`Layer`]: it counts every request it sees (see
/// [`StoreBuilder::layer`](crate::StoreBuilder::layer)).
impl Layer for RequestCounter {
    async fn call<T: Send>(
        &self,
        request: &Request<'_>,
        next: impl Future<Output = Result<T>> + Send,
    ) -> Result<T> {
        let sent = {
            let mut counts = self.lock();
            *counts.by_op.entry(request.op()).or_default() += 1;
            counts.in_flight += 1;
            Sent {
                counter: self,
                // Renewals run beside the work: they are no step of it.
                depth: (request.op() != Op::RenewLease).then_some(counts.deepest + 1),
            }
        };
        let answer = next.await;
        sent.answered();
        answer
    }
}

/// A request on its way; dropped unanswered, it is no longer in flight.
struct Sent<'a> {
    counter: &'a RequestCounter,
    depth: Option<u64>,
}

impl Sent<'_> {
    fn answered(mut self) {
        if let Some(depth) = self.depth.take() {
            let mut counts = self.counter.lock();
            counts.deepest = counts.deepest.max(depth);
        }
    }
}

impl Drop for Sent<'_> {
    fn drop(&mut self) {
        self.counter.lock().in_flight -= 1;
    }
}

delegate_backend!(CountingBackend, layer = counter);
