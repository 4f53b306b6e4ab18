//! The Blob side of the Azure backend: blobs, metadata and leases.

use crate::backend::LeaseKind;
use std::time::Duration;

use azure_core::headers::Headers;
use azure_core::request_options::{
    IfMatchCondition, LeaseBreakPeriod, LeaseDuration as SdkLeaseDuration, LeaseId as SdkLeaseId,
    MaxResults, Metadata as SdkMetadata, NextMarker, ProposedLeaseId,
};
use azure_core::{LeaseDuration as SdkDurationKind, LeaseState as SdkLeaseState};
use azure_storage::clients::ServiceType;
use azure_storage_blobs::prelude::{BlobClient, ContainerClient};
use futures_util::StreamExt as _;
use uuid::Uuid;

use super::AzureBackend;
use super::errors::Failure;
use crate::backend::{
    AcquiredLease, Blob, BlobConditions, BlobItem, BlobListPage, BlobProperties, BlobWriteMode,
    LeaseDuration, LeaseId, LeaseInfo, LeaseState, Metadata,
};
use crate::error::{Error, Result};
use crate::key::{BlobName, ContainerName, ETag, shorten};

fn blob_what(container: &ContainerName, blob: &BlobName) -> String {
    format!("blob {} in container `{container}`", shorten(blob.as_str()))
}

/// The blob client drops leading `/` from names (so `/a` would address
/// `a`): such names are refused rather than silently aliased.
fn check_blob_name(blob: &BlobName) -> Result<()> {
    if blob.as_str().starts_with('/') {
        return Err(Error::invalid(
            format!("blob name {}", shorten(blob.as_str())),
            "must not start with `/` on the Azure backend",
        ));
    }
    Ok(())
}

fn sdk_lease_id(id: LeaseId) -> SdkLeaseId {
    SdkLeaseId::from(id.as_uuid())
}

fn lease_id_from_sdk(id: SdkLeaseId) -> std::result::Result<LeaseId, Failure> {
    id.to_string()
        .parse::<Uuid>()
        .map(LeaseId::from_uuid)
        .map_err(|e| {
            Failure::Fatal(
                Error::client("the service returned a lease id that is not a GUID").with_source(e),
            )
        })
}

/// The header form of a lease duration: `Seconds(n)` or `Infinite`, built
/// directly (the SDK's `From<Duration>` truncates to `u8`).
fn sdk_duration(d: LeaseDuration) -> Result<SdkLeaseDuration> {
    Ok(match d.validate()? {
        LeaseDuration::Seconds(s) => SdkLeaseDuration::Seconds(s),
        LeaseDuration::Infinite => SdkLeaseDuration::Infinite,
    })
}

/// Metadata must travel as HTTP headers: names are C#-style identifiers in
/// ASCII, values printable ASCII.
fn validate_metadata(metadata: &Metadata) -> Result<()> {
    for (name, value) in metadata {
        let mut chars = name.chars();
        let ok_name = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok_name {
            return Err(Error::invalid(
                format!("metadata name {}", shorten(name)),
                "must be an ASCII identifier (a letter or `_`, then letters, digits or `_`)",
            ));
        }
        if !value.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            return Err(Error::invalid(
                format!("metadata value of `{name}`"),
                "must be printable ASCII",
            ));
        }
    }
    Ok(())
}

fn sdk_metadata(metadata: &Metadata) -> SdkMetadata {
    let mut out = SdkMetadata::new();
    for (name, value) in metadata {
        out.insert(name.clone(), value.clone());
    }
    out
}

/// Metadata as read back. Names are lowercased: HTTP header names are
/// case-insensitive and the HTTP stack lowercases them, so reads through
/// headers could not give the written case anyway; listings follow suit.
fn metadata_from(pairs: impl IntoIterator<Item = (String, String)>) -> Metadata {
    pairs
        .into_iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect()
}

fn same_metadata(a: &Metadata, b: &Metadata) -> bool {
    metadata_from(a.clone()) == metadata_from(b.clone())
}

fn if_match(c: &BlobConditions) -> Option<IfMatchCondition> {
    match &c.mode {
        BlobWriteMode::Overwrite => None,
        BlobWriteMode::Create => Some(IfMatchCondition::NotMatch("*".to_owned())),
        BlobWriteMode::IfMatch(etag) => Some(IfMatchCondition::Match(etag.as_str().to_owned())),
    }
}

fn lease_state(s: Option<&SdkLeaseState>) -> LeaseState {
    match s {
        None | Some(SdkLeaseState::Available) => LeaseState::Available,
        Some(SdkLeaseState::Leased) => LeaseState::Leased,
        Some(SdkLeaseState::Expired) => LeaseState::Expired,
        Some(SdkLeaseState::Breaking) => LeaseState::Breaking,
        Some(SdkLeaseState::Broken) => LeaseState::Broken,
    }
}

/// The service reports a lease as `infinite` or `fixed`, never its seconds.
fn lease_info(state: Option<&SdkLeaseState>, duration: Option<&SdkDurationKind>) -> LeaseInfo {
    let state = lease_state(state);
    let kind = match (state, duration) {
        (LeaseState::Leased, Some(SdkDurationKind::Infinite)) => Some(LeaseKind::Infinite),
        (LeaseState::Leased, Some(SdkDurationKind::Fixed)) => Some(LeaseKind::Fixed),
        _ => None,
    };
    LeaseInfo { state, kind }
}

fn properties_from_sdk(blob: &azure_storage_blobs::prelude::Blob) -> BlobProperties {
    let p = &blob.properties;
    BlobProperties {
        etag: ETag::new(p.etag.to_string()),
        metadata: metadata_from(blob.metadata.clone().unwrap_or_default()),
        lease: lease_info(p.lease_state.as_ref(), p.lease_duration.as_ref()),
        content_length: p.content_length,
    }
}

/// Properties from the headers of a `GET` (leasehold reads bodies without the
/// client, see `get_blob_once`).
fn properties_from_headers(headers: &Headers) -> std::result::Result<BlobProperties, Failure> {
    let get = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.as_str() == name)
            .map(|(_, v)| v.as_str())
    };
    let missing = |what: &str| {
        Failure::Fatal(Error::Backend {
            status: Some(200),
            code: None,
            message: format!("the blob reply has no valid {what} header"),
            source: None,
        })
    };
    let etag = get("etag").ok_or_else(|| missing("ETag"))?;
    let content_length = get("content-length")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| missing("Content-Length"))?;
    let state = get("x-ms-lease-state").and_then(|v| v.parse::<SdkLeaseState>().ok());
    let duration = get("x-ms-lease-duration").and_then(|v| v.parse::<SdkDurationKind>().ok());
    let metadata = metadata_from(headers.iter().filter_map(|(n, v)| {
        n.as_str()
            .strip_prefix("x-ms-meta-")
            .map(|k| (k.to_owned(), v.as_str().to_owned()))
    }));
    Ok(BlobProperties {
        etag: ETag::new(etag),
        metadata,
        lease: lease_info(state.as_ref(), duration.as_ref()),
        content_length,
    })
}

impl AzureBackend {
    fn container_client(&self, container: &ContainerName) -> ContainerClient {
        self.inner.blobs.container_client(container.as_str())
    }

    fn blob_client(&self, container: &ContainerName, blob: &BlobName) -> BlobClient {
        self.container_client(container).blob_client(blob.as_str())
    }

    pub(super) async fn create_container_impl(&self, container: &ContainerName) -> Result<()> {
        self.retrying("create_container", |_| async move {
            match self
                .attempt(self.container_client(container).create().into_future())
                .await
            {
                Ok(_) => Ok(()),
                Err(f) if matches!(f.status(), Some((409, Some("ContainerAlreadyExists")))) => {
                    Ok(())
                }
                Err(f) => Err(f),
            }
        })
        .await
        .map_err(|f| f.into_error(format!("container `{container}`")))
    }

    pub(super) async fn put_blob_impl(
        &self,
        container: &ContainerName,
        blob: &BlobName,
        body: Vec<u8>,
        metadata: &Metadata,
        conditions: &BlobConditions,
    ) -> Result<ETag> {
        check_blob_name(blob)?;
        let what = blob_what(container, blob);
        validate_metadata(metadata)?;
        let (body, what) = (&body, &what);
        self.retrying("put_blob", |earlier| async move {
            let mut builder = self
                .blob_client(container, blob)
                .put_block_blob(body.clone())
                .metadata(sdk_metadata(metadata));
            if let Some(id) = conditions.lease_id {
                builder = builder.lease_id(sdk_lease_id(id));
            }
            if let Some(c) = if_match(conditions) {
                builder = builder.if_match(c);
            }
            match self.attempt(builder.into_future()).await {
                Ok(r) => Ok(ETag::new(r.etag)),
                Err(f) => {
                    let precondition_failed = matches!(
                        f.status(),
                        Some((412, Some("ConditionNotMet")) | (409, Some("BlobAlreadyExists")))
                    );
                    if precondition_failed && earlier.may_have_applied {
                        return self
                            .blob_after_lost_reply(container, blob, Some(body), metadata, f, what)
                            .await
                            .map_err(Failure::Fatal);
                    }
                    Err(f)
                }
            }
        })
        .await
        .map_err(|f| f.into_error(what))
    }

    /// A conditional blob write whose earlier attempt may have been applied
    /// failed its condition: it succeeded if the blob now holds what was
    /// written (body when given, and metadata).
    async fn blob_after_lost_reply(
        &self,
        container: &ContainerName,
        blob: &BlobName,
        body: Option<&[u8]>,
        metadata: &Metadata,
        failure: Failure,
        what: &str,
    ) -> Result<ETag> {
        let stored = match body {
            Some(_) => self.get_blob_impl(container, blob).await?,
            None => self
                .blob_properties_impl(container, blob)
                .await?
                .map(|properties| Blob {
                    body: Vec::new(),
                    properties,
                }),
        };
        match stored {
            Some(s)
                if body.is_none_or(|b| b == s.body.as_slice())
                    && same_metadata(&s.properties.metadata, metadata) =>
            {
                tracing::debug!("blob write retried after a lost reply: the stored blob is ours");
                Ok(s.properties.etag)
            }
            _ => Err(failure.into_error(what)),
        }
    }

    pub(super) async fn get_blob_impl(
        &self,
        container: &ContainerName,
        blob: &BlobName,
    ) -> Result<Option<Blob>> {
        check_blob_name(blob)?;
        let what = blob_what(container, blob);
        self.retrying("get_blob", |_| self.get_blob_once(container, blob))
            .await
            .map_err(|f| f.into_error(&what))
    }

    /// One un-ranged `GET` on the pipeline: the client's reader asks for
    /// byte ranges (a 416 on an empty blob) in several requests (which can
    /// mix two versions of a blob being rewritten).
    async fn get_blob_once(
        &self,
        container: &ContainerName,
        blob: &BlobName,
    ) -> std::result::Result<Option<Blob>, Failure> {
        let url = self
            .blob_client(container, blob)
            .url()
            .map_err(|e| Failure::from_azure(e, &self.inner.redactor))?;
        let reply = self
            .send_raw(
                ServiceType::Blob,
                azure_core::Method::Get,
                url,
                Headers::new(),
                None,
            )
            .await;
        match reply {
            Ok(r) => {
                let properties = properties_from_headers(r.headers())?;
                Ok(Some(Blob {
                    body: r.body().to_vec(),
                    properties,
                }))
            }
            Err(f) if matches!(f.status(), Some((404, Some("BlobNotFound")))) => Ok(None),
            Err(f) => Err(f),
        }
    }

    pub(super) async fn blob_properties_impl(
        &self,
        container: &ContainerName,
        blob: &BlobName,
    ) -> Result<Option<BlobProperties>> {
        check_blob_name(blob)?;
        let what = blob_what(container, blob);
        self.retrying("blob_properties", |_| async move {
            let reply = self
                .attempt(
                    self.blob_client(container, blob)
                        .get_properties()
                        .into_future(),
                )
                .await;
            match reply {
                Ok(r) => Ok(Some(properties_from_sdk(&r.blob))),
                // HEAD has no body: the code comes from x-ms-error-code.
                Err(f) if matches!(f.status(), Some((404, Some("BlobNotFound")))) => Ok(None),
                Err(f) => Err(f),
            }
        })
        .await
        .map_err(|f| f.into_error(&what))
    }

    pub(super) async fn set_blob_metadata_impl(
        &self,
        container: &ContainerName,
        blob: &BlobName,
        metadata: &Metadata,
        conditions: &BlobConditions,
    ) -> Result<ETag> {
        check_blob_name(blob)?;
        let what = blob_what(container, blob);
        validate_metadata(metadata)?;
        let what = &what;
        self.retrying("set_blob_metadata", |earlier| async move {
            let mut builder = self
                .blob_client(container, blob)
                .set_metadata()
                .metadata(sdk_metadata(metadata));
            if let Some(id) = conditions.lease_id {
                builder = builder.lease_id(sdk_lease_id(id));
            }
            if let Some(c) = if_match(conditions) {
                builder = builder.if_match(c);
            }
            match self.attempt(builder.into_future()).await {
                Ok(r) => Ok(ETag::new(r.etag)),
                Err(f) => {
                    let precondition_failed =
                        matches!(f.status(), Some((412, Some("ConditionNotMet"))));
                    if precondition_failed && earlier.may_have_applied {
                        return self
                            .blob_after_lost_reply(container, blob, None, metadata, f, what)
                            .await
                            .map_err(Failure::Fatal);
                    }
                    Err(f)
                }
            }
        })
        .await
        .map_err(|f| f.into_error(what))
    }

    pub(super) async fn delete_blob_impl(
        &self,
        container: &ContainerName,
        blob: &BlobName,
        conditions: &BlobConditions,
    ) -> Result<()> {
        check_blob_name(blob)?;
        let what = blob_what(container, blob);
        let what = &what;
        self.retrying("delete_blob", |earlier| async move {
            let mut builder = self.blob_client(container, blob).delete();
            if let Some(id) = conditions.lease_id {
                builder = builder.lease_id(sdk_lease_id(id));
            }
            if let Some(c) = if_match(conditions) {
                builder = builder.if_match(c);
            }
            match self.attempt(builder.into_future()).await {
                Ok(_) => Ok(()),
                Err(f)
                    if earlier.may_have_applied
                        && matches!(
                            f.status(),
                            Some((404, Some("BlobNotFound")) | (412, Some("ConditionNotMet")))
                        ) =>
                {
                    // An earlier attempt may have deleted it (an `If-Match`
                    // on a missing blob fails with 412): gone means done.
                    match self.blob_properties_impl(container, blob).await? {
                        None => Ok(()),
                        Some(_) => Err(Failure::Fatal(f.into_error(what))),
                    }
                }
                Err(f) => Err(f),
            }
        })
        .await
        .map_err(|f| f.into_error(what))
    }

    /// Lists blobs whose names start with `prefix`, one page at a time, with
    /// a page size of `max_results` (the service default, 5000, when `None`).
    ///
    /// [`BlobBackend::list_blobs`](crate::backend::BlobBackend::list_blobs)
    /// is this with the service's page size.
    ///
    /// # Errors
    /// [`Error::NotFound`] for a missing container; [`Error::Transient`]
    /// after retries; [`Error::Backend`] for other service errors.
    pub async fn list_blobs_page(
        &self,
        container: &ContainerName,
        prefix: &str,
        marker: Option<&str>,
        max_results: Option<u32>,
    ) -> Result<BlobListPage> {
        let what = format!("listing of container `{container}`");
        let max_results = match max_results {
            None => None,
            Some(n) => Some(
                MaxResults::try_from(n)
                    .map_err(|_| Error::invalid("page size", format!("{n} must be at least 1")))?,
            ),
        };
        self.retrying("list_blobs", |_| async move {
            let mut builder = self
                .container_client(container)
                .list_blobs()
                .include_metadata(true);
            if !prefix.is_empty() {
                builder = builder.prefix(prefix.to_owned());
            }
            if let Some(m) = marker {
                builder = builder.marker(NextMarker::new(m.to_owned()));
            }
            if let Some(n) = max_results {
                builder = builder.max_results(n);
            }
            let mut pages = builder.into_stream();
            let reply = self
                .attempt(async move {
                    match pages.next().await {
                        Some(page) => page,
                        None => Err(azure_core::Error::message(
                            azure_core::error::ErrorKind::Other,
                            "the listing reply held no page",
                        )),
                    }
                })
                .await;
            let page = reply?;
            let items = page
                .blobs
                .blobs()
                .map(|b| BlobItem {
                    name: b.name.clone(),
                    properties: properties_from_sdk(b),
                })
                .collect();
            Ok(BlobListPage {
                items,
                next_marker: page.next_marker.map(|m| m.as_str().to_owned()),
            })
        })
        .await
        .map_err(|f| f.into_error(&what))
    }

    pub(super) async fn acquire_lease_impl(
        &self,
        container: &ContainerName,
        blob: &BlobName,
        duration: LeaseDuration,
        proposed_id: LeaseId,
    ) -> Result<AcquiredLease> {
        check_blob_name(blob)?;
        let what = format!("lease on {}", blob_what(container, blob));
        let duration = sdk_duration(duration)?;
        // Retrying is safe: acquiring again with the current id of an active
        // lease succeeds.
        let duration = &duration;
        self.retrying("acquire_lease", |_| async move {
            let builder = self
                .blob_client(container, blob)
                .acquire_lease(duration.clone())
                .proposed_lease_id(ProposedLeaseId::from(sdk_lease_id(proposed_id)));
            let reply = self.attempt(builder.into_future()).await;
            // The reply's ETag is the blob's: leasing does not change it.
            reply.and_then(|r| {
                let id = lease_id_from_sdk(r.lease_id)?;
                Ok(AcquiredLease::new(id, Some(ETag::new(r.etag))))
            })
        })
        .await
        .map_err(|f| f.into_error(&what))
    }

    pub(super) async fn renew_lease_impl(
        &self,
        container: &ContainerName,
        blob: &BlobName,
        id: LeaseId,
    ) -> Result<()> {
        check_blob_name(blob)?;
        let what = format!("lease on {}", blob_what(container, blob));
        self.retrying("renew_lease", |_| async move {
            let builder = self
                .blob_client(container, blob)
                .blob_lease_client(sdk_lease_id(id))
                .renew();
            self.attempt(builder.into_future()).await.map(drop)
        })
        .await
        .map_err(|f| f.into_error(&what))
    }

    pub(super) async fn change_lease_impl(
        &self,
        container: &ContainerName,
        blob: &BlobName,
        id: LeaseId,
        proposed_id: LeaseId,
    ) -> Result<LeaseId> {
        check_blob_name(blob)?;
        let what = format!("lease on {}", blob_what(container, blob));
        let what = &what;
        self.retrying("change_lease", |earlier| async move {
            let builder = self
                .blob_client(container, blob)
                .blob_lease_client(sdk_lease_id(id))
                .change(ProposedLeaseId::from(sdk_lease_id(proposed_id)));
            let reply = self.attempt(builder.into_future()).await;
            match reply.and_then(|r| lease_id_from_sdk(r.lease_id)) {
                Ok(id) => Ok(id),
                Err(f)
                    if earlier.may_have_applied
                        && matches!(
                            f.status(),
                            Some((409, Some("LeaseIdMismatchWithLeaseOperation")))
                        ) =>
                {
                    // The lost attempt may have changed it: if the proposed
                    // id is current now, renewing with it succeeds.
                    match self.renew_lease_impl(container, blob, proposed_id).await {
                        Ok(()) => Ok(proposed_id),
                        Err(_) => Err(Failure::Fatal(f.into_error(what))),
                    }
                }
                Err(f) => Err(f),
            }
        })
        .await
        .map_err(|f| f.into_error(what))
    }

    pub(super) async fn release_lease_impl(
        &self,
        container: &ContainerName,
        blob: &BlobName,
        id: LeaseId,
    ) -> Result<()> {
        check_blob_name(blob)?;
        let what = format!("lease on {}", blob_what(container, blob));
        self.retrying("release_lease", |earlier| async move {
            let builder = self
                .blob_client(container, blob)
                .blob_lease_client(sdk_lease_id(id))
                .release();
            match self.attempt(builder.into_future()).await {
                Ok(_) => Ok(()),
                Err(f)
                    if earlier.may_have_applied
                        && matches!(
                            f.status(),
                            Some((
                                409,
                                Some(
                                    "LeaseNotPresentWithLeaseOperation"
                                        | "LeaseIdMismatchWithLeaseOperation"
                                )
                            ))
                        ) =>
                {
                    // The lost attempt released it (and someone may have
                    // acquired it since): either way this caller holds
                    // nothing, which is what release is for.
                    Ok(())
                }
                Err(f) => Err(f),
            }
        })
        .await
        .map_err(|f| f.into_error(&what))
    }

    pub(super) async fn break_lease_impl(
        &self,
        container: &ContainerName,
        blob: &BlobName,
        period: Option<Duration>,
    ) -> Result<Duration> {
        check_blob_name(blob)?;
        let what = format!("lease on {}", blob_what(container, blob));
        if let Some(p) = period
            && (p.subsec_nanos() != 0 || p > LeaseDuration::MAX)
        {
            return Err(Error::invalid(
                format!("break period {p:?}"),
                "must be whole seconds from 0 to 60",
            ));
        }
        self.retrying("break_lease", |_| async move {
            let mut builder = self.blob_client(container, blob).break_lease();
            if let Some(p) = period {
                builder = builder.lease_break_period(LeaseBreakPeriod::from(p));
            }
            let r = self.attempt(builder.into_future()).await?;
            Ok(Duration::from_secs(u64::from(r.lease_time)))
        })
        .await
        .map_err(|f| f.into_error(&what))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_rules() {
        let mut m = Metadata::new();
        m.insert("owner".into(), "node-1".into());
        m.insert("_Epoch2".into(), "".into());
        assert!(validate_metadata(&m).is_ok());
        for bad in ["1x", "a-b", "é", ""] {
            let mut m = Metadata::new();
            m.insert(bad.into(), "v".into());
            assert!(validate_metadata(&m).is_err(), "{bad}");
        }
        let mut m = Metadata::new();
        m.insert("a".into(), "line\nbreak".into());
        assert!(validate_metadata(&m).is_err());
    }

    #[test]
    fn lease_durations_are_not_truncated() {
        assert!(matches!(
            sdk_duration(LeaseDuration::Seconds(60)).unwrap(),
            SdkLeaseDuration::Seconds(60)
        ));
        assert!(matches!(
            sdk_duration(LeaseDuration::Infinite).unwrap(),
            SdkLeaseDuration::Infinite
        ));
        assert!(sdk_duration(LeaseDuration::Seconds(14)).is_err());
        assert!(sdk_duration(LeaseDuration::Seconds(61)).is_err());
    }

    #[test]
    fn leading_slashes_are_refused() {
        assert!(check_blob_name(&BlobName::new("/a").unwrap()).is_err());
        assert!(check_blob_name(&BlobName::new("a//b").unwrap()).is_ok());
    }

    /// One mode per write: each sends one condition header, and none can
    /// contradict another (If-Match with If-None-Match: * is not
    /// expressible).
    #[test]
    fn each_write_mode_sends_one_condition() {
        let etag = ETag::new("\"x\"");
        assert!(if_match(&BlobConditions::none()).is_none());
        assert!(if_match(&BlobConditions::leased(LeaseId::new_random())).is_none());
        assert!(matches!(
            if_match(&BlobConditions::create_only()),
            Some(IfMatchCondition::NotMatch(s)) if s == "*"
        ));
        assert!(matches!(
            if_match(&BlobConditions::if_match(etag).with_lease(LeaseId::new_random())),
            Some(IfMatchCondition::Match(s)) if s == "\"x\""
        ));
    }
}
