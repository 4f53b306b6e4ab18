//! The blob side: containers, block blobs with metadata, conditional writes
//! and the lease checks on writes.

use std::collections::BTreeMap;

use tokio::time::Instant;

use super::clock::{WriteClock, blob_etag};
use super::leases::{Lease, Refusal};
use crate::backend::blob::{validate_break_period, validate_metadata};
use crate::backend::{
    BlobConditions, BlobItem, BlobListPage, BlobProperties, BlobWriteMode, LeaseAction, LeaseReply,
    Metadata,
};
use crate::error::{Error, Result, what};
use crate::key::{BlobName, ContainerName, ETag};

#[derive(Debug, Clone)]
struct StoredBlob {
    body: Vec<u8>,
    metadata: Metadata,
    etag: ETag,
    lease: Lease,
}

impl StoredBlob {
    fn properties(&self, now: Instant) -> BlobProperties {
        BlobProperties {
            etag: self.etag.clone(),
            metadata: self.metadata.clone(),
            lease: self.lease.info(now),
            content_length: self.body.len() as u64,
        }
    }
}

#[derive(Debug, Default)]
struct Container {
    /// By name; `String` order is the service's listing order (UTF-8 bytes).
    blobs: BTreeMap<String, StoredBlob>,
}

/// A write to one blob. The conditions mean slightly different things to a
/// put, which may create the blob, than to the others.
#[derive(Debug)]
pub(super) enum BlobWrite<'a> {
    Put(Vec<u8>, &'a Metadata),
    SetMetadata(&'a Metadata),
    Delete,
}

/// Every container of one backend.
#[derive(Debug, Default)]
pub(super) struct BlobStore {
    containers: BTreeMap<ContainerName, Container>,
}

fn refusal_error(refusal: Refusal, what: String) -> Error {
    Error::from_service(refusal.status, Some(refusal.code), what)
}

fn container_not_found(what: String) -> Error {
    Error::from_service(404, Some("ContainerNotFound"), what)
}

fn blob_not_found(what: String) -> Error {
    Error::from_service(404, Some("BlobNotFound"), what)
}

impl BlobStore {
    pub(super) fn create_container(&mut self, container: &ContainerName) {
        self.containers.entry(container.clone()).or_default();
    }

    /// `container`, or the error of a request on `what` in it (also `_mut`).
    fn container(
        &self,
        container: &ContainerName,
        what: impl FnOnce() -> String,
    ) -> Result<&Container> {
        self.containers
            .get(container)
            .ok_or_else(|| container_not_found(what()))
    }

    fn container_mut(
        &mut self,
        container: &ContainerName,
        what: impl FnOnce() -> String,
    ) -> Result<&mut Container> {
        self.containers
            .get_mut(container)
            .ok_or_else(|| container_not_found(what()))
    }

    /// Checks `conditions` against the blob as it is (`None`: absent).
    fn check_conditions(
        existing: Option<&mut StoredBlob>,
        conditions: &BlobConditions,
        put: bool,
        now: Instant,
        what: impl Fn() -> String,
    ) -> Result<()> {
        let not_met = || Error::from_service(412, Some("ConditionNotMet"), what());
        match (&conditions.mode, &existing) {
            // If-Match names a version of something that is not there.
            (BlobWriteMode::IfMatch(_), None) => return Err(not_met()),
            (BlobWriteMode::IfMatch(etag), Some(b)) if etag.as_str() != "*" && *etag != b.etag => {
                return Err(not_met());
            }
            (BlobWriteMode::Create, Some(_)) if put => {
                return Err(Error::from_service(409, Some("BlobAlreadyExists"), what()));
            }
            (BlobWriteMode::Create, Some(_)) => return Err(not_met()),
            _ => {}
        }
        // A lease id on a blob that is not there finds no lease.
        let mut absent = Lease::Available;
        (existing.map_or(&mut absent, |b| &mut b.lease))
            .check_write(now, conditions.lease_id)
            .map_err(|r| refusal_error(r, what()))
    }

    /// Applies `write` under `conditions`: the ETag it leaves (for a
    /// delete, the one it removed).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn write(
        &mut self,
        clock: &WriteClock,
        now: Instant,
        container: &ContainerName,
        blob: &BlobName,
        conditions: &BlobConditions,
        write: BlobWrite<'_>,
    ) -> Result<ETag> {
        let what = || what::blob(container, blob);
        if let BlobWrite::Put(_, metadata) | BlobWrite::SetMetadata(metadata) = &write {
            validate_metadata(metadata)?;
        }
        let c = self.container_mut(container, what)?;
        let existing = c.blobs.get_mut(blob.as_str());
        let put = matches!(write, BlobWrite::Put(..));
        if existing.is_none() && !put {
            return Err(blob_not_found(what()));
        }
        Self::check_conditions(existing, conditions, put, now, what)?;
        let (body, metadata) = match write {
            BlobWrite::Put(body, metadata) => (Some(body), metadata),
            BlobWrite::SetMetadata(metadata) => (None, metadata),
            BlobWrite::Delete => {
                let removed = c.blobs.remove(blob.as_str());
                return removed
                    .map(|b| b.etag)
                    .ok_or_else(|| blob_not_found(what()));
            }
        };
        let etag = blob_etag(clock.tick());
        let stored = c
            .blobs
            .entry(blob.as_str().to_owned())
            .or_insert_with(|| StoredBlob {
                body: Vec::new(),
                metadata: Metadata::new(),
                etag: etag.clone(),
                lease: Lease::Available,
            });
        if let Some(body) = body {
            stored.body = body;
        }
        stored.metadata = metadata.clone();
        stored.etag = etag.clone();
        stored.lease.after_write(now);
        Ok(etag)
    }

    /// A blob's body and properties; `None` when it does not exist.
    pub(super) fn read(
        &self,
        now: Instant,
        container: &ContainerName,
        blob: &BlobName,
    ) -> Result<Option<(&[u8], BlobProperties)>> {
        let c = self.container(container, || what::blob(container, blob))?;
        Ok(c.blobs
            .get(blob.as_str())
            .map(|b| (b.body.as_slice(), b.properties(now))))
    }

    pub(super) fn list_blobs(
        &self,
        now: Instant,
        container: &ContainerName,
        prefix: &str,
        marker: Option<&str>,
        page_size: usize,
    ) -> Result<BlobListPage> {
        let c = self.container(container, || what::listing(container))?;
        let start = marker.map_or(prefix, |m| m.max(prefix));
        let mut matching = c
            .blobs
            .range::<str, _>((std::ops::Bound::Included(start), std::ops::Bound::Unbounded))
            .take_while(|(name, _)| name.starts_with(prefix));
        let items: Vec<BlobItem> = matching
            .by_ref()
            .take(page_size.max(1))
            .map(|(name, b)| BlobItem {
                name: name.clone(),
                properties: b.properties(now),
            })
            .collect();
        let next_marker = matching.next().map(|(name, _)| name.clone());
        Ok(BlobListPage { items, next_marker })
    }

    /// Runs a lease action on an existing blob. Lease actions never change
    /// the blob's ETag.
    pub(super) fn lease(
        &mut self,
        now: Instant,
        container: &ContainerName,
        blob: &BlobName,
        action: LeaseAction,
    ) -> Result<LeaseReply> {
        match action {
            LeaseAction::Acquire { duration, .. } => {
                duration.validate()?;
            }
            LeaseAction::Break { period } => validate_break_period(period)?,
            _ => {}
        }
        let what = || what::lease(container, blob);
        let c = self.container_mut(container, what)?;
        let stored = c
            .blobs
            .get_mut(blob.as_str())
            .ok_or_else(|| blob_not_found(what()))?;
        let lease = &mut stored.lease;
        match action {
            // As the service: the reply carries the blob's ETag.
            LeaseAction::Acquire { duration, proposed } => lease
                .acquire(now, duration, proposed)
                .map(|id| LeaseReply::Acquired {
                    id,
                    etag: Some(stored.etag.clone()),
                }),
            LeaseAction::Renew(id) => lease.renew(now, id).map(|()| LeaseReply::Renewed),
            LeaseAction::Change { id, proposed } => {
                lease.change(now, id, proposed).map(LeaseReply::Changed)
            }
            LeaseAction::Release(id) => lease.release(now, id).map(|()| LeaseReply::Released),
            LeaseAction::Break { period } => lease.break_lease(now, period).map(LeaseReply::Broken),
        }
        .map_err(|r| refusal_error(r, what()))
    }

    /// The number of containers, for `Debug`.
    pub(super) fn container_count(&self) -> usize {
        self.containers.len()
    }
}
