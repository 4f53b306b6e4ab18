//! Backend wrappers for tests: count requests, inject faults; and, with the
//! `conformance` feature, the conformance suite.
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
//! use leasehold::testing::{CountingBackend, Op};
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
pub(crate) mod delegate;
mod faults;

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};

pub use faults::{Fault, FaultInjector, FaultyBackend};

use crate::error::Result;
use delegate::delegate_backend;

/// The kind of a backend request, as wrappers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// [`TableBackend::create_table`](crate::backend::TableBackend::create_table)
    CreateTable,
    /// [`TableBackend::delete_table`](crate::backend::TableBackend::delete_table)
    DeleteTable,
    /// [`TableBackend::list_tables`](crate::backend::TableBackend::list_tables)
    ListTables,
    /// [`TableBackend::get`](crate::backend::TableBackend::get)
    Get,
    /// [`TableBackend::execute`](crate::backend::TableBackend::execute):
    /// insert, replace, merge, upsert or delete.
    Write,
    /// [`TableBackend::batch`](crate::backend::TableBackend::batch)
    Batch,
    /// [`TableBackend::query`](crate::backend::TableBackend::query)
    Query,
    /// [`BlobBackend::create_container`](crate::backend::BlobBackend::create_container)
    CreateContainer,
    /// [`BlobBackend::put_blob`](crate::backend::BlobBackend::put_blob)
    PutBlob,
    /// [`BlobBackend::get_blob`](crate::backend::BlobBackend::get_blob)
    GetBlob,
    /// [`BlobBackend::blob_properties`](crate::backend::BlobBackend::blob_properties)
    BlobProperties,
    /// [`BlobBackend::set_blob_metadata`](crate::backend::BlobBackend::set_blob_metadata)
    SetBlobMetadata,
    /// [`BlobBackend::delete_blob`](crate::backend::BlobBackend::delete_blob)
    DeleteBlob,
    /// [`BlobBackend::list_blobs`](crate::backend::BlobBackend::list_blobs)
    ListBlobs,
    /// [`BlobBackend::acquire_lease`](crate::backend::BlobBackend::acquire_lease)
    AcquireLease,
    /// [`BlobBackend::renew_lease`](crate::backend::BlobBackend::renew_lease)
    RenewLease,
    /// [`BlobBackend::change_lease`](crate::backend::BlobBackend::change_lease)
    ChangeLease,
    /// [`BlobBackend::release_lease`](crate::backend::BlobBackend::release_lease)
    ReleaseLease,
    /// [`BlobBackend::break_lease`](crate::backend::BlobBackend::break_lease)
    BreakLease,
}

impl Op {
    /// Whether this is one-time setup (creating a table or container) rather
    /// than work.
    pub fn is_setup(self) -> bool {
        matches!(self, Op::CreateTable | Op::CreateContainer)
    }

    /// The request's name in metrics (`db.operation.name`).
    #[cfg_attr(not(feature = "opentelemetry"), allow(dead_code))]
    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::CreateTable => "create_table",
            Op::DeleteTable => "delete_table",
            Op::ListTables => "list_tables",
            Op::Get => "get",
            Op::Write => "write",
            Op::Batch => "batch",
            Op::Query => "query",
            Op::CreateContainer => "create_container",
            Op::PutBlob => "put_blob",
            Op::GetBlob => "get_blob",
            Op::BlobProperties => "blob_properties",
            Op::SetBlobMetadata => "set_blob_metadata",
            Op::DeleteBlob => "delete_blob",
            Op::ListBlobs => "list_blobs",
            Op::AcquireLease => "acquire_lease",
            Op::RenewLease => "renew_lease",
            Op::ChangeLease => "change_lease",
            Op::ReleaseLease => "release_lease",
            Op::BreakLease => "break_lease",
        }
    }
}

/// A shared view of the counts of a [`CountingBackend`].
#[derive(Clone, Default)]
pub struct RequestCounter {
    counts: Arc<Mutex<BTreeMap<Op, u64>>>,
}

impl fmt::Debug for RequestCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.snapshot()).finish()
    }
}

impl RequestCounter {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Op, u64>> {
        // Counts stay meaningful after a panic elsewhere.
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn record(&self, op: Op) {
        *self.lock().entry(op).or_default() += 1;
    }

    /// Requests of one kind so far.
    pub fn get(&self, op: Op) -> u64 {
        self.lock().get(&op).copied().unwrap_or(0)
    }

    /// All requests so far, setup included.
    pub fn total(&self) -> u64 {
        self.lock().values().sum()
    }

    /// All requests so far except one-time setup ([`Op::is_setup`]).
    pub fn work(&self) -> u64 {
        self.lock()
            .iter()
            .filter(|(op, _)| !op.is_setup())
            .map(|(_, n)| n)
            .sum()
    }

    /// The counts by kind.
    pub fn snapshot(&self) -> BTreeMap<Op, u64> {
        self.lock().clone()
    }

    /// Forgets every count.
    pub fn reset(&self) {
        self.lock().clear();
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

    async fn call<T>(&self, op: Op, fut: impl Future<Output = Result<T>>) -> Result<T> {
        self.counter.record(op);
        fut.await
    }
}

delegate_backend!(CountingBackend);
