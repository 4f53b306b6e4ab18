//! Test helpers of the lease module.

use std::time::Duration;

use async_trait::async_trait;

use crate::backend::{
    Blob, BlobBackend, BlobConditions, BlobListPage, BlobProperties, LeaseDuration, LeaseId,
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
    async fn acquire_lease(
        &self,
        _: &ContainerName,
        _: &BlobName,
        _: LeaseDuration,
        _: LeaseId,
    ) -> Result<LeaseId> {
        refuse()
    }
    async fn renew_lease(&self, _: &ContainerName, _: &BlobName, _: LeaseId) -> Result<()> {
        refuse()
    }
    async fn change_lease(
        &self,
        _: &ContainerName,
        _: &BlobName,
        _: LeaseId,
        _: LeaseId,
    ) -> Result<LeaseId> {
        refuse()
    }
    async fn release_lease(&self, _: &ContainerName, _: &BlobName, _: LeaseId) -> Result<()> {
        refuse()
    }
    async fn break_lease(
        &self,
        _: &ContainerName,
        _: &BlobName,
        _: Option<Duration>,
    ) -> Result<Duration> {
        refuse()
    }
}
