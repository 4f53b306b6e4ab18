//! Test helpers of the lease module.

use async_trait::async_trait;

use crate::backend::{
    Blob, BlobBackend, BlobConditions, BlobListPage, BlobProperties, LeaseAction, LeaseReply,
    Metadata,
};
use crate::error::{Error, Result};
use crate::key::{BlobName, ContainerName, ETag};

/// A backend that refuses everything; for tests that must send nothing.
#[derive(Debug)]
pub(crate) struct NoBackend;

fn refuse<T>() -> Result<T> {
    Err(Error::Backend {
        status: Some(500),
        code: None,
        message: "no backend".into(),
        source: None,
    })
}

#[async_trait]
impl BlobBackend for NoBackend {
    async fn create_container(&self, _: &ContainerName) -> Result<()> {
        refuse()
    }
    async fn put_blob(
        &self,
        _: &ContainerName,
        _: &BlobName,
        _: Vec<u8>,
        _: &Metadata,
        _: &BlobConditions,
    ) -> Result<ETag> {
        refuse()
    }
    async fn get_blob(&self, _: &ContainerName, _: &BlobName) -> Result<Option<Blob>> {
        refuse()
    }
    async fn blob_properties(
        &self,
        _: &ContainerName,
        _: &BlobName,
    ) -> Result<Option<BlobProperties>> {
        refuse()
    }
    async fn set_blob_metadata(
        &self,
        _: &ContainerName,
        _: &BlobName,
        _: &Metadata,
        _: &BlobConditions,
    ) -> Result<ETag> {
        refuse()
    }
    async fn delete_blob(&self, _: &ContainerName, _: &BlobName, _: &BlobConditions) -> Result<()> {
        refuse()
    }
    async fn list_blobs(
        &self,
        _: &ContainerName,
        _: &str,
        _: Option<&str>,
    ) -> Result<BlobListPage> {
        refuse()
    }
    async fn lease(&self, _: &ContainerName, _: &BlobName, _: LeaseAction) -> Result<LeaseReply> {
        refuse()
    }
}

/// A memory backend on which every create-only write of a blob is undone
/// right after it succeeds, the first `times` times: somebody deleting a
/// lease blob between its creation and the acquire that follows (a lock
/// blob being pruned).
#[derive(Debug)]
pub(crate) struct Vanishing {
    pub(crate) inner: crate::backend::memory::MemoryBackend,
    pub(crate) times: std::sync::atomic::AtomicU32,
}

impl Vanishing {
    pub(crate) fn new(times: u32) -> Self {
        Vanishing {
            inner: crate::backend::memory::MemoryBackend::new(),
            times: std::sync::atomic::AtomicU32::new(times),
        }
    }
}

#[async_trait]
impl BlobBackend for Vanishing {
    async fn create_container(&self, c: &ContainerName) -> Result<()> {
        self.inner.create_container(c).await
    }
    async fn put_blob(
        &self,
        c: &ContainerName,
        b: &BlobName,
        body: Vec<u8>,
        m: &Metadata,
        conditions: &BlobConditions,
    ) -> Result<ETag> {
        let etag = self.inner.put_blob(c, b, body, m, conditions).await?;
        let create = conditions.mode == crate::backend::BlobWriteMode::Create;
        let vanish = create
            && self
                .times
                .fetch_update(
                    std::sync::atomic::Ordering::SeqCst,
                    std::sync::atomic::Ordering::SeqCst,
                    |n| n.checked_sub(1),
                )
                .is_ok();
        if vanish {
            self.inner
                .delete_blob(c, b, &BlobConditions::none())
                .await?;
        }
        Ok(etag)
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
        conditions: &BlobConditions,
    ) -> Result<ETag> {
        self.inner.set_blob_metadata(c, b, m, conditions).await
    }
    async fn delete_blob(
        &self,
        c: &ContainerName,
        b: &BlobName,
        conditions: &BlobConditions,
    ) -> Result<()> {
        self.inner.delete_blob(c, b, conditions).await
    }
    async fn list_blobs(
        &self,
        c: &ContainerName,
        p: &str,
        m: Option<&str>,
    ) -> Result<BlobListPage> {
        self.inner.list_blobs(c, p, m).await
    }
    async fn lease(
        &self,
        c: &ContainerName,
        b: &BlobName,
        action: LeaseAction,
    ) -> Result<LeaseReply> {
        self.inner.lease(c, b, action).await
    }
}
