//! A test-side backend wrapper: [`AmbiguousRenews`] (renew requests whose
//! reply never comes, applied or not, as switched).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use leasehold::backend::{
    Blob, BlobBackend, BlobConditions, BlobListPage, BlobProperties, LeaseDuration, LeaseId,
    Metadata,
};
use leasehold::key::{BlobName, ContainerName, ETag};
use leasehold::{Error, Result};

/// What happens to renew requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renews {
    /// Passed through.
    Normal,
    /// Applied, but the caller gets `Error::Timeout`.
    AppliedNoReply,
    /// Not applied; the caller gets `Error::Timeout`.
    LostNoReply,
}

#[derive(Debug, Clone)]
pub struct AmbiguousRenews<B> {
    inner: B,
    mode: Arc<Mutex<Renews>>,
}

impl<B> AmbiguousRenews<B> {
    pub fn new(inner: B) -> Self {
        AmbiguousRenews {
            inner,
            mode: Arc::new(Mutex::new(Renews::Normal)),
        }
    }

    pub fn switch(&self) -> Arc<Mutex<Renews>> {
        self.mode.clone()
    }
}

fn no_reply() -> Error {
    Error::Timeout {
        what: "renew reply".into(),
        after: Duration::from_secs(5),
    }
}

#[async_trait]
impl<B: BlobBackend> BlobBackend for AmbiguousRenews<B> {
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
        k: &BlobConditions,
    ) -> Result<ETag> {
        self.inner.put_blob(c, b, body, m, k).await
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
        k: &BlobConditions,
    ) -> Result<ETag> {
        self.inner.set_blob_metadata(c, b, m, k).await
    }
    async fn delete_blob(&self, c: &ContainerName, b: &BlobName, k: &BlobConditions) -> Result<()> {
        self.inner.delete_blob(c, b, k).await
    }
    async fn list_blobs(
        &self,
        c: &ContainerName,
        prefix: &str,
        marker: Option<&str>,
    ) -> Result<BlobListPage> {
        self.inner.list_blobs(c, prefix, marker).await
    }
    async fn acquire_lease(
        &self,
        c: &ContainerName,
        b: &BlobName,
        d: LeaseDuration,
        id: LeaseId,
    ) -> Result<LeaseId> {
        self.inner.acquire_lease(c, b, d, id).await
    }
    async fn renew_lease(&self, c: &ContainerName, b: &BlobName, id: LeaseId) -> Result<()> {
        let mode = *self.mode.lock().unwrap();
        match mode {
            Renews::Normal => self.inner.renew_lease(c, b, id).await,
            Renews::AppliedNoReply => {
                let _ = self.inner.renew_lease(c, b, id).await;
                Err(no_reply())
            }
            Renews::LostNoReply => Err(no_reply()),
        }
    }
    async fn change_lease(
        &self,
        c: &ContainerName,
        b: &BlobName,
        id: LeaseId,
        proposed: LeaseId,
    ) -> Result<LeaseId> {
        self.inner.change_lease(c, b, id, proposed).await
    }
    async fn release_lease(&self, c: &ContainerName, b: &BlobName, id: LeaseId) -> Result<()> {
        self.inner.release_lease(c, b, id).await
    }
    async fn break_lease(
        &self,
        c: &ContainerName,
        b: &BlobName,
        period: Option<Duration>,
    ) -> Result<Duration> {
        self.inner.break_lease(c, b, period).await
    }
}
