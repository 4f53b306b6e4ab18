//! Blobs, metadata and leases through `azure_storage_blob` 1.x clients on
//! the blob pipeline, except reads: one un-ranged `GET` (the client's
//! download asks for ranges, a 416 on an empty blob, in several requests
//! that can mix two versions of a blob being rewritten).

use std::collections::HashMap;
use std::future::Future;
use std::num::NonZero;
use std::time::Duration;

use async_trait::async_trait;
use azure_core::http::headers::Headers;
use azure_core::http::{Method, Request, RequestContent, Url};
use azure_storage_blob::models::{
    BlobClientAcquireLeaseOptions, BlobClientAcquireLeaseResultHeaders,
    BlobClientBreakLeaseOptions, BlobClientBreakLeaseResultHeaders,
    BlobClientChangeLeaseResultHeaders, BlobClientDeleteOptions, BlobClientReleaseLeaseOptions,
    BlobClientRenewLeaseOptions, BlobClientSetMetadataOptions, BlobContainerClientListBlobsOptions,
    BlockBlobClientUploadOptions, ListBlobsIncludeItem,
};
use azure_storage_blob::{
    BlobClient, BlobClientOptions, BlobContainerClient, BlobContainerClientOptions,
};
use futures_util::StreamExt as _;
use uuid::Uuid;

use super::AzureBackend;
use super::auth::{Service, header_value};
use super::connection::base_uri;
use super::errors::{Failure, bad_reply};
use super::retry::Attempt;
use crate::backend::blob::{validate_break_period, validate_metadata};
use crate::backend::{
    Blob, BlobBackend, BlobConditions, BlobItem, BlobListPage, BlobProperties, BlobWriteMode,
    LeaseAction, LeaseDuration, LeaseId, LeaseInfo, LeaseKind, LeaseReply, LeaseState, Metadata,
};
use crate::error::{Error, Result};
use crate::key::{BlobName, ContainerName, ETag, shorten};

/// A leading `/` would be lost in the blob's URL (so `/a` would address
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

/// A lease id as the service's headers carry it.
fn sdk_lease_id(id: LeaseId) -> String {
    id.as_uuid().hyphenated().to_string()
}

fn lease_id_from_sdk(id: Option<String>) -> std::result::Result<LeaseId, Failure> {
    let bad = || Error::client("the service returned no lease id, or one that is not a GUID");
    match id.as_deref().map(Uuid::parse_str) {
        Some(Ok(id)) => Ok(LeaseId::from_uuid(id)),
        Some(Err(e)) => Err(bad().with_source(e).into()),
        None => Err(bad().into()),
    }
}

/// The seconds a lease is asked for: 15 to 60, or -1 for an infinite one.
fn sdk_duration(d: LeaseDuration) -> Result<i32> {
    Ok(match d.validate()? {
        LeaseDuration::Seconds(s) => i32::from(s),
        LeaseDuration::Infinite => -1,
    })
}

/// Metadata as read back, names lowercased as the HTTP stack gives header
/// names (listings follow suit).
fn metadata_from(pairs: impl IntoIterator<Item = (String, String)>) -> Metadata {
    pairs
        .into_iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect()
}

/// The condition headers of a write: (`If-Match`, `If-None-Match`).
fn conditions_of(c: &BlobConditions) -> (Option<String>, Option<String>) {
    match &c.mode {
        BlobWriteMode::Overwrite => (None, None),
        BlobWriteMode::Create => (None, Some("*".to_owned())),
        BlobWriteMode::IfMatch(etag) => (Some(etag.as_str().to_owned()), None),
    }
}

/// An SDK options struct carrying the lease and conditions of a write.
macro_rules! conditioned {
    ($options:ident, $conditions:expr $(, $field:ident: $value:expr)* $(,)?) => {{
        let (if_match, if_none_match) = conditions_of($conditions);
        $options {
            lease_id: $conditions.lease_id.map(sdk_lease_id),
            if_match: if_match.map(Into::into),
            if_none_match: if_none_match.map(Into::into),
            $($field: $value,)*
            ..$options::default()
        }
    }};
}

/// A lease's state and kind from the service's words for them.
fn lease_info_from(state: Option<&str>, duration: Option<&str>) -> LeaseInfo {
    let state = match state.map(str::to_ascii_lowercase).as_deref() {
        Some("leased") => LeaseState::Leased,
        Some("expired") => LeaseState::Expired,
        Some("breaking") => LeaseState::Breaking,
        Some("broken") => LeaseState::Broken,
        _ => LeaseState::Available,
    };
    // The service reports a lease as `infinite` or `fixed`, never its
    // seconds.
    let kind = match (state, duration.map(str::to_ascii_lowercase).as_deref()) {
        (LeaseState::Leased, Some("infinite")) => Some(LeaseKind::Infinite),
        (LeaseState::Leased, Some("fixed")) => Some(LeaseKind::Fixed),
        _ => None,
    };
    LeaseInfo { state, kind }
}

fn properties_from_item(
    item: azure_storage_blob::models::BlobItem,
) -> std::result::Result<BlobItem, Failure> {
    let missing = |what: &str| bad_reply(200, format!("a blob in the listing has no {what}"));
    let name = item.name.ok_or_else(|| missing("name"))?;
    let p = item.properties.ok_or_else(|| missing("properties"))?;
    let etag = p.etag.ok_or_else(|| missing("ETag"))?;
    Ok(BlobItem {
        name,
        properties: BlobProperties {
            etag: ETag::new(etag.to_string()),
            metadata: metadata_from(item.metadata.and_then(|m| m.values).unwrap_or_default()),
            lease: lease_info_from(
                p.lease_state.as_ref().map(AsRef::as_ref),
                p.lease_duration.as_ref().map(AsRef::as_ref),
            ),
            content_length: p.content_length.unwrap_or(0),
        },
    })
}

/// Properties from the headers of a `GET` or `HEAD`.
fn properties_from_headers(headers: &Headers) -> std::result::Result<BlobProperties, Failure> {
    let get = |name| header_value(headers, name);
    let missing = |what: &str| bad_reply(200, format!("the blob reply has no valid {what} header"));
    let etag = get("etag").ok_or_else(|| missing("ETag"))?;
    let content_length = get("content-length")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| missing("Content-Length"))?;
    let lease = lease_info_from(get("x-ms-lease-state"), get("x-ms-lease-duration"));
    let metadata = metadata_from(headers.iter().filter_map(|(n, v)| {
        n.as_str()
            .strip_prefix("x-ms-meta-")
            .map(|k| (k.to_owned(), v.as_str().to_owned()))
    }));
    Ok(BlobProperties {
        etag: ETag::new(etag),
        metadata,
        lease,
        content_length,
    })
}

impl AzureBackend {
    fn failure(&self, e: azure_core::Error) -> Failure {
        Failure::from_azure(e, &self.inner.redactor)
    }

    /// `{blob endpoint}/{container}[/{name}]`, each `/` of the name a path
    /// separator (the container client's `blob_client` would write `%2F`).
    fn blob_url(
        &self,
        container: &ContainerName,
        blob: Option<&BlobName>,
    ) -> std::result::Result<Url, Failure> {
        let mut url = self.base_url(Service::Blob).clone();
        url.path_segments_mut()
            .map_err(|()| Failure::Fatal(Error::invalid("blob endpoint", "cannot carry a path")))?
            .push(container.as_str())
            .extend(blob.map(|b| b.as_str().split('/')).into_iter().flatten());
        Ok(url)
    }

    fn container_client(
        &self,
        container: &ContainerName,
    ) -> std::result::Result<BlobContainerClient, Failure> {
        let options = BlobContainerClientOptions {
            client_options: self.inner.pipelines.blob_options.clone(),
            ..BlobContainerClientOptions::default()
        };
        BlobContainerClient::new(self.blob_url(container, None)?, None, Some(options))
            .map_err(|e| self.failure(e))
    }

    fn blob_client(
        &self,
        container: &ContainerName,
        blob: &BlobName,
    ) -> std::result::Result<BlobClient, Failure> {
        let options = BlobClientOptions {
            client_options: self.inner.pipelines.blob_options.clone(),
            ..BlobClientOptions::default()
        };
        BlobClient::new(self.blob_url(container, Some(blob))?, None, Some(options))
            .map_err(|e| self.failure(e))
    }

    /// One request on a blob under the retry policy, a fresh client for
    /// each attempt.
    async fn on_blob<T, F, Fut>(
        &self,
        operation: &'static str,
        container: &ContainerName,
        blob: &BlobName,
        what: &(dyn Fn() -> String + Sync),
        mut attempt: F,
    ) -> Result<T>
    where
        F: FnMut(BlobClient, Attempt) -> Fut,
        Fut: Future<Output = std::result::Result<T, Failure>>,
    {
        self.inner
            .retry
            .run(operation, |earlier| {
                let next = self
                    .blob_client(container, blob)
                    .map(|client| attempt(client, earlier));
                async move { next?.await }
            })
            .await
            .map_err(|f| f.into_error(what()))
    }

    /// A blob write (`put_blob` with its body, `set_blob_metadata` without).
    /// A condition failing after a lost reply reads the blob back: the
    /// write succeeded if it holds what was written.
    async fn write_blob<F, Fut>(
        &self,
        operation: &'static str,
        container: &ContainerName,
        blob: &BlobName,
        body: Option<&[u8]>,
        metadata: &Metadata,
        send: F,
    ) -> Result<ETag>
    where
        F: Fn(BlobClient) -> Fut,
        Fut: Future<Output = std::result::Result<ETag, Failure>>,
    {
        check_blob_name(blob)?;
        validate_metadata(metadata)?;
        let what = &|| crate::error::what::blob(container, blob);
        let send = &send;
        self.on_blob(
            operation,
            container,
            blob,
            what,
            |client, earlier| async move {
                let f = match send(client).await {
                    Err(f)
                        if earlier.may_have_applied
                            && matches!(
                                f.status(),
                                Some(
                                    (412, Some("ConditionNotMet"))
                                        | (409, Some("BlobAlreadyExists"))
                                )
                            ) =>
                    {
                        f
                    }
                    sent => return sent,
                };
                match self.read_blob(container, blob, body.is_some()).await? {
                    Some(s)
                        if body.is_none_or(|b| b == s.body.as_slice())
                            && s.properties.metadata == metadata_from(metadata.clone()) =>
                    {
                        tracing::debug!(
                            "blob write retried after a lost reply: the stored blob is ours"
                        );
                        Ok(s.properties.etag)
                    }
                    _ => Err(Failure::Fatal(f.into_error(what()))),
                }
            },
        )
        .await
    }

    /// A blob through one un-ranged `GET` (see the module doc), or its
    /// properties alone (and an empty body) through a `HEAD`.
    async fn read_blob(
        &self,
        container: &ContainerName,
        blob: &BlobName,
        with_body: bool,
    ) -> Result<Option<Blob>> {
        check_blob_name(blob)?;
        let (operation, method) = match with_body {
            true => ("get_blob", Method::Get),
            false => ("blob_properties", Method::Head),
        };
        self.inner
            .retry
            .run(operation, |_| async move {
                let request = Request::new(self.blob_url(container, Some(blob))?, method);
                match self.send_raw(Service::Blob, request).await {
                    Ok(r) => Ok(Some(Blob {
                        properties: properties_from_headers(r.headers())?,
                        body: r.body().as_ref().to_vec(),
                    })),
                    // A HEAD has no body: the code comes from x-ms-error-code.
                    Err(f) if matches!(f.status(), Some((404, Some("BlobNotFound")))) => Ok(None),
                    Err(f) => Err(f),
                }
            })
            .await
            .map_err(|f| f.into_error(crate::error::what::blob(container, blob)))
    }

    /// [`BlobBackend::list_blobs`] with a page size of `max_results`
    /// (`None`: the service's 5000).
    ///
    /// # Errors
    /// As [`BlobBackend::list_blobs`].
    pub async fn list_blobs_page(
        &self,
        container: &ContainerName,
        prefix: &str,
        marker: Option<&str>,
        max_results: Option<u32>,
    ) -> Result<BlobListPage> {
        let what = || crate::error::what::listing(container);
        if max_results == Some(0) {
            return Err(Error::invalid("page size", "0 must be at least 1"));
        }
        let max_results = max_results.map(|n| i32::try_from(n).unwrap_or(i32::MAX));
        self.inner
            .retry
            .run("list_blobs", |_| async move {
                let client = self.container_client(container)?;
                let options = BlobContainerClientListBlobsOptions {
                    include: Some(vec![ListBlobsIncludeItem::Metadata]),
                    prefix: (!prefix.is_empty()).then(|| prefix.to_owned()),
                    marker: marker.map(str::to_owned),
                    maxresults: max_results,
                    ..BlobContainerClientListBlobsOptions::default()
                };
                let reply = self
                    .attempt(async move {
                        let mut pages = client.list_blobs(Some(options))?.into_pages();
                        match pages.next().await {
                            Some(page) => page?.into_model(),
                            None => Err(azure_core::Error::with_message(
                                azure_core::error::ErrorKind::Other,
                                "the listing reply held no page",
                            )),
                        }
                    })
                    .await;
                let page = reply?;
                let items = page
                    .blob_items
                    .into_iter()
                    .map(properties_from_item)
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                Ok(BlobListPage {
                    items,
                    next_marker: page.next_marker.filter(|m| !m.is_empty()),
                })
            })
            .await
            .map_err(|f| f.into_error(what()))
    }
}

#[async_trait]
impl BlobBackend for AzureBackend {
    /// The Blob service URL (never with credentials: a SAS travels apart).
    fn endpoint(&self) -> String {
        base_uri(&self.inner.settings.blob_endpoint)
    }

    async fn create_container(&self, container: &ContainerName) -> Result<()> {
        self.inner
            .retry
            .run("create_container", |_| async move {
                let client = self.container_client(container)?;
                match self.attempt(client.create(None)).await {
                    Ok(_) => Ok(()),
                    Err(f) if matches!(f.status(), Some((409, Some("ContainerAlreadyExists")))) => {
                        Ok(())
                    }
                    Err(f) => Err(f),
                }
            })
            .await
            .map_err(|f| f.into_error(crate::error::what::container(container)))
    }

    async fn put_blob(
        &self,
        container: &ContainerName,
        blob: &BlobName,
        body: Vec<u8>,
        metadata: &Metadata,
        conditions: &BlobConditions,
    ) -> Result<ETag> {
        let body = &body;
        self.write_blob(
            "put_blob",
            container,
            blob,
            Some(body),
            metadata,
            |client| async move {
                // One Put Blob whatever the size (above this the client stages
                // blocks: several requests, not atomic).
                let options = conditioned!(
                    BlockBlobClientUploadOptions,
                    conditions,
                    metadata: Some(HashMap::from_iter(metadata.clone())),
                    partition_size: NonZero::new(u64::MAX),
                );
                let client = client.block_blob_client();
                let upload = client.upload(RequestContent::from(body.clone()), Some(options));
                let etag = self.attempt(upload).await?.etag;
                let etag = etag
                    .ok_or_else(|| bad_reply(200, "the Put Blob reply has no ETag".to_owned()))?;
                Ok(ETag::new(etag.to_string()))
            },
        )
        .await
    }

    async fn get_blob(&self, container: &ContainerName, blob: &BlobName) -> Result<Option<Blob>> {
        self.read_blob(container, blob, true).await
    }

    async fn blob_properties(
        &self,
        container: &ContainerName,
        blob: &BlobName,
    ) -> Result<Option<BlobProperties>> {
        let blob = self.read_blob(container, blob, false).await?;
        Ok(blob.map(|b| b.properties))
    }

    async fn set_blob_metadata(
        &self,
        container: &ContainerName,
        blob: &BlobName,
        metadata: &Metadata,
        conditions: &BlobConditions,
    ) -> Result<ETag> {
        self.write_blob(
            "set_blob_metadata",
            container,
            blob,
            None,
            metadata,
            |client| async move {
                let options = conditioned!(BlobClientSetMetadataOptions, conditions);
                let metadata_map = HashMap::from_iter(metadata.clone());
                let r = self
                    .attempt(client.set_metadata(&metadata_map, Some(options)))
                    .await?;
                let etag = header_value(r.headers(), "etag");
                Ok(ETag::new(etag.ok_or_else(|| {
                    bad_reply(200, "the Set Blob Metadata reply has no ETag".to_owned())
                })?))
            },
        )
        .await
    }

    async fn delete_blob(
        &self,
        container: &ContainerName,
        blob: &BlobName,
        conditions: &BlobConditions,
    ) -> Result<()> {
        check_blob_name(blob)?;
        let what = &|| crate::error::what::blob(container, blob);
        self.on_blob(
            "delete_blob",
            container,
            blob,
            what,
            |client, earlier| async move {
                let options = conditioned!(BlobClientDeleteOptions, conditions);
                match self.attempt(client.delete(Some(options))).await {
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
                        match self.blob_properties(container, blob).await? {
                            None => Ok(()),
                            Some(_) => Err(Failure::Fatal(f.into_error(what()))),
                        }
                    }
                    Err(f) => Err(f),
                }
            },
        )
        .await
    }

    async fn list_blobs(
        &self,
        container: &ContainerName,
        prefix: &str,
        marker: Option<&str>,
    ) -> Result<BlobListPage> {
        self.list_blobs_page(container, prefix, marker, None).await
    }

    async fn lease(
        &self,
        container: &ContainerName,
        blob: &BlobName,
        action: LeaseAction,
    ) -> Result<LeaseReply> {
        check_blob_name(blob)?;
        let what = &|| crate::error::what::lease(container, blob);
        let mut seconds = 0;
        match action {
            LeaseAction::Acquire { duration, .. } => seconds = sdk_duration(duration)?,
            LeaseAction::Break { period } => validate_break_period(period)?,
            _ => {}
        }
        let lost = |f: &Failure, earlier: Attempt, codes: &[&str]| {
            earlier.may_have_applied
                && matches!(f.status(), Some((409, Some(code))) if codes.contains(&code))
        };
        self.on_blob(
            action.op().name(),
            container,
            blob,
            what,
            |client, earlier| async move {
                match action {
                    // Retrying is safe: acquiring again with the current id
                    // of an active lease succeeds.
                    LeaseAction::Acquire { proposed, .. } => {
                        let options = BlobClientAcquireLeaseOptions {
                            proposed_lease_id: Some(sdk_lease_id(proposed)),
                            ..BlobClientAcquireLeaseOptions::default()
                        };
                        let r = self
                            .attempt(client.acquire_lease(seconds, Some(options)))
                            .await?;
                        let id = lease_id_from_sdk(r.lease_id().map_err(|e| self.failure(e))?)?;
                        // The reply's ETag is the blob's: leasing does not change it.
                        let etag = r.etag().map_err(|e| self.failure(e))?;
                        Ok(LeaseReply::Acquired {
                            id,
                            etag: etag.map(|e| ETag::new(e.to_string())),
                        })
                    }
                    LeaseAction::Renew(id) => {
                        let renew = client
                            .renew_lease(sdk_lease_id(id), None::<BlobClientRenewLeaseOptions<'_>>);
                        self.attempt(renew).await.map(|_| LeaseReply::Renewed)
                    }
                    LeaseAction::Change { id, proposed } => {
                        let change =
                            client.change_lease(sdk_lease_id(id), sdk_lease_id(proposed), None);
                        let changed = self.attempt(change).await.and_then(|r| {
                            lease_id_from_sdk(r.lease_id().map_err(|e| self.failure(e))?)
                        });
                        match changed {
                            // The lost attempt may have changed it: if the
                            // proposed id is current now, renewing with it
                            // succeeds.
                            Err(f) if lost(&f, earlier, &["LeaseIdMismatchWithLeaseOperation"]) => {
                                match self
                                    .lease(container, blob, LeaseAction::Renew(proposed))
                                    .await
                                {
                                    Ok(_) => Ok(LeaseReply::Changed(proposed)),
                                    Err(_) => Err(Failure::Fatal(f.into_error(what()))),
                                }
                            }
                            changed => changed.map(LeaseReply::Changed),
                        }
                    }
                    LeaseAction::Release(id) => {
                        let release = client.release_lease(
                            sdk_lease_id(id),
                            None::<BlobClientReleaseLeaseOptions<'_>>,
                        );
                        match self.attempt(release).await {
                            Ok(_) => Ok(LeaseReply::Released),
                            // The lost attempt released it (and someone may
                            // have acquired it since): either way this caller
                            // holds nothing, which is what release is for.
                            Err(f)
                                if lost(
                                    &f,
                                    earlier,
                                    &[
                                        "LeaseNotPresentWithLeaseOperation",
                                        "LeaseIdMismatchWithLeaseOperation",
                                    ],
                                ) =>
                            {
                                Ok(LeaseReply::Released)
                            }
                            Err(f) => Err(f),
                        }
                    }
                    LeaseAction::Break { period } => {
                        let options = BlobClientBreakLeaseOptions {
                            // Checked above: whole seconds, 0 to 60.
                            break_period: period.map(|p| i32::try_from(p.as_secs()).unwrap_or(60)),
                            ..BlobClientBreakLeaseOptions::default()
                        };
                        let r = self.attempt(client.break_lease(Some(options))).await?;
                        let seconds = r.lease_time().map_err(|e| self.failure(e))?.unwrap_or(0);
                        Ok(LeaseReply::Broken(Duration::from_secs(
                            u64::try_from(seconds).unwrap_or(0),
                        )))
                    }
                }
            },
        )
        .await
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
        assert_eq!(sdk_duration(LeaseDuration::Seconds(60)).unwrap(), 60);
        assert_eq!(sdk_duration(LeaseDuration::Infinite).unwrap(), -1);
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
        assert_eq!(conditions_of(&BlobConditions::none()), (None, None));
        assert_eq!(
            conditions_of(&BlobConditions::leased(LeaseId::new_random())),
            (None, None)
        );
        assert_eq!(
            conditions_of(&BlobConditions::create_only()),
            (None, Some("*".to_owned()))
        );
        assert_eq!(
            conditions_of(&BlobConditions::if_match(etag).with_lease(LeaseId::new_random())),
            (Some("\"x\"".to_owned()), None)
        );
    }

    #[test]
    fn lease_states_and_kinds_are_read_from_the_services_words() {
        let info = lease_info_from(Some("leased"), Some("infinite"));
        assert_eq!(
            (info.state, info.kind),
            (LeaseState::Leased, Some(LeaseKind::Infinite))
        );
        let info = lease_info_from(Some("broken"), Some("fixed"));
        assert_eq!((info.state, info.kind), (LeaseState::Broken, None));
        let info = lease_info_from(None, None);
        assert_eq!((info.state, info.kind), (LeaseState::Available, None));
        use azure_storage_blob::models::{LeaseDuration as Kind, LeaseState as State};
        let (state, duration) = (State::Leased, Kind::Fixed);
        let info = lease_info_from(Some(state.as_ref()), Some(duration.as_ref()));
        assert_eq!(
            (info.state, info.kind),
            (LeaseState::Leased, Some(LeaseKind::Fixed))
        );
    }
}
