//! Operator tools on a [`LeaseManager`]: describing, listing and breaking
//! leases without holding them.

use std::time::Duration;

use tracing::{Instrument, info, info_span};

use crate::backend::{LeaseCalls as _, LeaseDuration, LeaseInfo, LeaseState, Metadata, notes};
use crate::error::{Error, ErrorKind, Result};

use super::document::{LeaseBlob, LeaseDocument, META_ACQUIRED, OnceState, epoch_of, meta_get};
use super::manager::LeaseManager;
use super::name::LeaseName;

/// What [`LeaseManager::describe`] reports about a lease.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LeaseDescription {
    /// The lease.
    pub name: LeaseName,
    /// Whether the lease blob exists (it is created on first acquire).
    pub exists: bool,
    /// The lease state ([`LeaseState::Available`] when the blob is missing).
    pub state: LeaseState,
    /// The owner identity the last acquire recorded.
    pub owner: Option<String>,
    /// When that owner acquired the lease, as it recorded (RFC 3339).
    pub acquired_at: Option<String>,
    /// The fencing epoch.
    pub epoch: u64,
    /// The blob's metadata, leasehold's own entries (`leasehold_*`)
    /// included.
    pub metadata: Metadata,
    /// The run-once marker.
    pub once: OnceState,
    /// How many reservation records the blob's log holds.
    pub reservation_records: usize,
}

impl LeaseDescription {
    /// Whether somebody holds the lease (leased or breaking).
    pub fn is_held(&self) -> bool {
        matches!(self.state, LeaseState::Leased | LeaseState::Breaking)
    }
}

impl LeaseManager {
    /// Who holds a lease, its state, epoch, metadata, and whether a
    /// partition lock's commit is pending, without acquiring it (one read).
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad name or a body that is not a lease
    /// document; the backend's error when the read fails.
    pub async fn describe(&self, name: &str) -> Result<LeaseDescription> {
        let name = LeaseName::new(name)?;
        let blob = self.inner.read(&name).await?;
        let exists = blob.is_some();
        // A missing blob describes as an empty, free one.
        let blob = blob.unwrap_or_else(|| LeaseBlob {
            document: LeaseDocument::default(),
            metadata: Metadata::new(),
            lease: LeaseInfo {
                state: LeaseState::Available,
                kind: None,
            },
        });
        Ok(LeaseDescription {
            name,
            exists,
            state: blob.lease.state,
            owner: blob.owner().map(str::to_owned),
            acquired_at: meta_get(&blob.metadata, META_ACQUIRED).map(str::to_owned),
            epoch: epoch_of(&blob.metadata),
            once: OnceState::from_metadata(&blob.metadata),
            reservation_records: blob.document.reservations.len(),
            metadata: blob.metadata,
        })
    }

    /// The names of the leases in this manager's container that start with
    /// `prefix` (all for `""`), in blob-name order.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a prefix longer than [`LeaseName::MAX_LEN`];
    /// the backend's error when a listing request fails.
    pub async fn list(&self, prefix: &str) -> Result<Vec<LeaseName>> {
        let env = &self.inner.env;
        let blob_prefix = env.settings.blob_prefix(prefix)?;
        let mut names = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let listed =
                env.backend
                    .list_blobs(&env.settings.container, &blob_prefix, marker.as_deref());
            let page = match notes::expecting(&[ErrorKind::NotFound], listed).await {
                Ok(page) => page,
                Err(Error::NotFound { .. }) => break,
                Err(e) => return Err(e),
            };
            names.extend(
                page.items
                    .iter()
                    .filter_map(|item| env.settings.name_of(&item.name)),
            );
            match page.next_marker {
                Some(next) => marker = Some(next),
                None => break,
            }
        }
        Ok(names)
    }

    /// Breaks a lease, whoever holds it, after `period` (0–60 whole
    /// seconds; `None`: a timed lease runs out, an infinite one breaks at
    /// once). Returns the time until it is broken, `None` when nobody held it.
    ///
    /// ```
    /// # use std::{sync::Arc, time::Duration};
    /// # use leasehold::backend::memory::MemoryBackend;
    /// use leasehold::lease::{LeaseManager, LeaseOptions};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> leasehold::Result<()> {
    /// let leases = LeaseManager::new(Arc::new(MemoryBackend::new()), LeaseOptions::default())?;
    /// let guard = leases.acquire("job", Duration::from_secs(5)).await?;
    /// let left = leases.break_lease("job", Some(Duration::ZERO)).await?;
    /// assert_eq!(left, Some(Duration::ZERO));
    /// drop(guard);
    ///
    /// let free = leases.try_acquire("other").await?.expect("free");
    /// free.release().await?;
    /// assert_eq!(leases.break_lease("other", None).await?, None);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad name or period (before any request);
    /// [`Error::NotFound`] when the lease blob does not exist; the backend's
    /// error otherwise.
    pub async fn break_lease(
        &self,
        name: &str,
        period: Option<Duration>,
    ) -> Result<Option<Duration>> {
        let name = LeaseName::new(name)?;
        if let Some(p) = period
            && (p > LeaseDuration::MAX || p.subsec_nanos() != 0)
        {
            return Err(Error::invalid(
                format!("break period {p:?}"),
                "must be whole seconds from 0 to 60",
            ));
        }
        let env = &self.inner.env;
        let blob = env.settings.blob_of(&name)?;
        let span = info_span!("lease.break", lease = %name);
        async {
            match env
                .backend
                .break_lease(&env.settings.container, &blob, period)
                .await
            {
                Ok(left) => {
                    info!(?left, "lease broken by operator");
                    Ok(Some(left))
                }
                // The service's answer to a break when no lease is present.
                Err(Error::LeaseLost {
                    code: Some(code), ..
                }) if code == "LeaseNotPresentWithLeaseOperation" => {
                    info!("lease not held; nothing to break");
                    Ok(None)
                }
                Err(e) => Err(e),
            }
        }
        .instrument(span)
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::backend::BlobBackend;
    use crate::lease::options::LeaseOptions;

    #[tokio::test]
    async fn list_finds_leases_by_prefix_and_skips_foreign_blobs() {
        use crate::backend::BlobConditions;
        use crate::backend::memory::MemoryBackend;
        use crate::key::BlobName;

        let backend = Arc::new(MemoryBackend::new());
        let leases = LeaseManager::new(backend.clone(), LeaseOptions::default()).unwrap();
        assert!(
            leases.list("").await.unwrap().is_empty(),
            "no container yet"
        );
        for name in ["jobs/a", "jobs/b", "jobs2", "other é"] {
            leases
                .try_acquire(name)
                .await
                .unwrap()
                .unwrap()
                .release()
                .await
                .unwrap();
        }
        backend
            .put_blob(
                leases.container(),
                &BlobName::new("not.a~lease").unwrap(),
                b"x".to_vec(),
                &Default::default(),
                &BlobConditions::none(),
            )
            .await
            .unwrap();
        let names = |v: Vec<LeaseName>| v.iter().map(|n| n.as_str().to_owned()).collect::<Vec<_>>();
        assert_eq!(
            names(leases.list("jobs/").await.unwrap()),
            ["jobs/a", "jobs/b"]
        );
        assert_eq!(names(leases.list("jobs").await.unwrap()).len(), 3);
        assert_eq!(names(leases.list("").await.unwrap()).len(), 4);
        assert!(leases.list(&"x".repeat(300)).await.is_err());
    }
}
