//! The timing hooks of the per-operation section, both through public
//! extension points as a user's would: [`Stopwatch`], a `Layer` that times
//! the backend requests below it, and [`Exchange`], an `azure_core` pipeline
//! policy that times each HTTP exchange. Together they tell leasehold's own
//! time around a request from the request's. [`cpu_time`] reads the
//! processor time the whole process has used, to tell work done here from
//! time spent waiting for the emulator.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasehold::Result;
use leasehold::backend::*;
use leasehold::key::{BlobName, ContainerName, ETag, PartitionKey, RowKey, TableName};

/// The duration of the last thing timed, shared between the hook that
/// times it and the code that reads it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Last(Arc<Mutex<Duration>>);

impl Last {
    /// How long the last timed thing took.
    pub(crate) fn get(&self) -> Duration {
        *self.0.lock().expect("not poisoned")
    }

    /// Records the time since `started`.
    fn since(&self, started: Instant) {
        *self.0.lock().expect("not poisoned") = started.elapsed();
    }
}

/// Times the gets of the backend it wraps.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stopwatch(pub(crate) Last);

impl Layer for Stopwatch {
    fn layer(&self, inner: Arc<dyn Backend>) -> Arc<dyn Backend> {
        Arc::new(Timed {
            inner,
            last: self.0.clone(),
        })
    }
}

#[derive(Debug)]
struct Timed {
    inner: Arc<dyn Backend>,
    last: Last,
}

#[async_trait::async_trait]
impl TableBackend for Timed {
    fn system_name(&self) -> &'static str {
        self.inner.system_name()
    }
    async fn create_table(&self, t: &TableName) -> Result<TableCreation> {
        self.inner.create_table(t).await
    }
    async fn delete_table(&self, t: &TableName) -> Result<bool> {
        self.inner.delete_table(t).await
    }
    async fn list_tables(&self) -> Result<Vec<TableName>> {
        self.inner.list_tables().await
    }
    async fn get(
        &self,
        t: &TableName,
        pk: &PartitionKey,
        rk: &RowKey,
    ) -> Result<Option<StoredEntity>> {
        let started = Instant::now();
        let got = self.inner.get(t, pk, rk).await;
        self.last.since(started);
        got
    }
    async fn execute(
        &self,
        t: &TableName,
        op: TableOp,
        o: &WriteOptions,
    ) -> Result<Option<Version>> {
        self.inner.execute(t, op, o).await
    }
    async fn batch(&self, t: &TableName, ops: &[TableOp]) -> Result<Vec<Option<Version>>> {
        self.inner.batch(t, ops).await
    }
    async fn query(&self, t: &TableName, q: &QuerySpec) -> Result<QueryPage> {
        self.inner.query(t, q).await
    }
}

#[async_trait::async_trait]
impl BlobBackend for Timed {
    fn endpoint(&self) -> String {
        self.inner.endpoint()
    }
    async fn create_container(&self, c: &ContainerName) -> Result<()> {
        self.inner.create_container(c).await
    }
    async fn put_blob(
        &self,
        c: &ContainerName,
        b: &BlobName,
        body: Vec<u8>,
        m: &Metadata,
        w: &BlobConditions,
    ) -> Result<ETag> {
        self.inner.put_blob(c, b, body, m, w).await
    }
    async fn get_blob(&self, c: &ContainerName, b: &BlobName) -> Result<Option<Blob>> {
        self.inner.get_blob(c, b).await
    }
    async fn blob_properties(
        &self,
        c: &ContainerName,
        b: &BlobName,
    ) -> Result<Option<BlobProperties>> {
        self.inner.blob_properties(c, b).await
    }
    async fn set_blob_metadata(
        &self,
        c: &ContainerName,
        b: &BlobName,
        m: &Metadata,
        w: &BlobConditions,
    ) -> Result<ETag> {
        self.inner.set_blob_metadata(c, b, m, w).await
    }
    async fn delete_blob(&self, c: &ContainerName, b: &BlobName, w: &BlobConditions) -> Result<()> {
        self.inner.delete_blob(c, b, w).await
    }
    async fn list_blobs(
        &self,
        c: &ContainerName,
        prefix: &str,
        marker: Option<&str>,
    ) -> Result<BlobListPage> {
        self.inner.list_blobs(c, prefix, marker).await
    }
    async fn lease(
        &self,
        c: &leasehold::key::ContainerName,
        b: &leasehold::key::BlobName,
        action: leasehold::backend::LeaseAction,
    ) -> leasehold::Result<leasehold::backend::LeaseReply> {
        self.inner.lease(c, b, action).await
    }
}

/// A pipeline policy, placed last before the transport, that times each
/// HTTP exchange (request sent, reply read).
#[derive(Debug, Clone, Default)]
pub(crate) struct Exchange(pub(crate) Last);

#[async_trait::async_trait]
impl azure_core::http::policies::Policy for Exchange {
    async fn send(
        &self,
        ctx: &azure_core::http::Context,
        request: &mut azure_core::http::Request,
        next: &[Arc<dyn azure_core::http::policies::Policy>],
    ) -> azure_core::http::policies::PolicyResult {
        let started = Instant::now();
        let reply = match next.split_first() {
            Some((first, rest)) => first.send(ctx, request, rest).await,
            None => Err(azure_core::Error::with_message(
                azure_core::error::ErrorKind::Other,
                "no transport after the timing policy",
            )),
        };
        self.0.since(started);
        reply
    }
}

/// The processor time this process has used so far, every thread of it
/// (the scheduler's per-thread totals on Linux, in nanoseconds); `None`
/// where they cannot be read.
pub(crate) fn cpu_time() -> Option<Duration> {
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let text = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        total += text.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(Duration::from_nanos(total))
}
