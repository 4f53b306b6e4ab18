//! Unit tests of the blob side that are the memory backend's own (its
//! container count, listing pages of a configured size, metadata checked
//! before writing), where it follows Azure against Azurite (create-only
//! metadata writes, a lease id on a blob without a lease, the code for a
//! lease of a deleted blob), and helpers for the lease tests. The service's
//! semantics are checked for every backend by the conformance suite
//! (`testing::conformance::blob_backend`, `blobs` and `timed`).

use super::MemoryBackend;
use crate::backend::{
    BlobBackend, BlobConditions, LeaseCalls as _, LeaseDuration, LeaseId, LeaseState, Metadata,
};
use crate::error::{Error, ErrorKind};
use crate::key::{BlobName, ContainerName, ETag};

pub(super) fn container(name: &str) -> ContainerName {
    ContainerName::new(name).unwrap()
}

pub(super) fn blob(name: &str) -> BlobName {
    BlobName::new(name).unwrap()
}

pub(super) fn meta(pairs: &[(&str, &str)]) -> Metadata {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

pub(super) fn assert_service_error(e: &Error, kind: ErrorKind, code: &str) {
    assert_eq!(e.kind(), kind, "{e}");
    assert_eq!(e.code(), Some(code), "{e}");
}

/// A backend with container `locks` holding an empty blob `b`.
pub(super) async fn setup() -> (MemoryBackend, ContainerName, BlobName, ETag) {
    let m = MemoryBackend::new();
    let c = container("locks");
    m.create_container(&c).await.unwrap();
    let b = blob("b");
    let etag = m
        .put_blob(
            &c,
            &b,
            Vec::new(),
            &Metadata::new(),
            &BlobConditions::none(),
        )
        .await
        .unwrap();
    (m, c, b, etag)
}

const SECS_30: LeaseDuration = LeaseDuration::Seconds(30);

#[tokio::test]
async fn create_container_is_idempotent() {
    let m = MemoryBackend::new();
    let c = container("locks");
    m.create_container(&c).await.unwrap();
    m.create_container(&c).await.unwrap();
    assert!(format!("{m:?}").contains("containers: 1"));
}

#[tokio::test]
async fn create_only_put_is_blob_already_exists_on_an_existing_blob() {
    let m = MemoryBackend::new();
    let c = container("data");
    m.create_container(&c).await.unwrap();
    let (b, md, once) = (blob("once"), Metadata::new(), BlobConditions::create_only());
    let put = |n: u8| m.put_blob(&c, &b, vec![n], &md, &once);
    let e1 = put(1).await.unwrap();
    let e = put(2).await.unwrap_err();
    assert_service_error(&e, ErrorKind::AlreadyExists, "BlobAlreadyExists");
    let got = m.get_blob(&c, &b).await.unwrap().unwrap();
    assert_eq!((got.body, got.properties.etag), (vec![1], e1));
    // On a write that is not a create, If-None-Match: * is a failed condition.
    let e = m
        .set_blob_metadata(&c, &b, &Metadata::new(), &BlobConditions::create_only())
        .await
        .unwrap_err();
    assert_service_error(&e, ErrorKind::Conflict, "ConditionNotMet");
}

#[tokio::test]
async fn invalid_metadata_is_rejected_before_writing() {
    let (m, c, b, etag) = setup().await;
    let bad = [
        meta(&[("1abc", "v")]),
        meta(&[("has-dash", "v")]),
        meta(&[("", "v")]),
        meta(&[("Owner", "a"), ("owner", "b")]),
        meta(&[("k", "new\nline")]),
        meta(&[("k", "é")]),
        meta(&[("k", &"x".repeat(8 * 1024))]),
    ];
    for md in bad {
        let e = m
            .put_blob(&c, &b, vec![], &md, &BlobConditions::none())
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid, "{md:?}: {e}");
        let e = m
            .set_blob_metadata(&c, &b, &md, &BlobConditions::none())
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid, "{md:?}: {e}");
    }
    assert_eq!(m.blob_properties(&c, &b).await.unwrap().unwrap().etag, etag);
}

#[tokio::test]
async fn list_blobs_by_prefix_in_name_order_with_markers() {
    let m = MemoryBackend::builder().blob_page_size(2).build();
    let c = container("data");
    m.create_container(&c).await.unwrap();
    for name in ["b/3", "a/1", "b/1", "b/2", "c", "b/4", "b/5", "ba"] {
        m.put_blob(
            &c,
            &blob(name),
            name.as_bytes().to_vec(),
            &Metadata::new(),
            &BlobConditions::none(),
        )
        .await
        .unwrap();
    }
    let mut names = Vec::new();
    let mut pages = 0;
    let mut marker: Option<String> = None;
    loop {
        let page = m.list_blobs(&c, "b/", marker.as_deref()).await.unwrap();
        pages += 1;
        assert!(page.items.len() <= 2);
        for item in &page.items {
            assert_eq!(item.properties.content_length, item.name.len() as u64);
        }
        names.extend(page.items.into_iter().map(|i| i.name));
        match page.next_marker {
            Some(m) => marker = Some(m),
            None => break,
        }
    }
    assert_eq!(names, ["b/1", "b/2", "b/3", "b/4", "b/5"]);
    assert_eq!(pages, 3);
    let all = m.list_blobs(&c, "", None).await.unwrap();
    assert_eq!(all.items.len(), 2);
    let none = m.list_blobs(&c, "zzz", None).await.unwrap();
    assert!(none.items.is_empty() && none.next_marker.is_none());
}

#[tokio::test]
async fn a_lease_id_on_a_blob_without_a_lease_is_lease_not_present() {
    let (m, c, b, _) = setup().await;
    let cond = BlobConditions::leased(LeaseId::new_random());
    let errors = vec![
        m.put_blob(&c, &b, vec![], &Metadata::new(), &cond)
            .await
            .unwrap_err(),
        m.set_blob_metadata(&c, &b, &Metadata::new(), &cond)
            .await
            .unwrap_err(),
        m.delete_blob(&c, &b, &cond).await.unwrap_err(),
        // Creating a blob under a lease: there is no lease to write under.
        m.put_blob(&c, &blob("new"), vec![], &Metadata::new(), &cond)
            .await
            .unwrap_err(),
    ];
    for e in errors {
        assert_service_error(&e, ErrorKind::LeaseLost, "LeaseNotPresentWithBlobOperation");
    }
    assert!(m.get_blob(&c, &blob("new")).await.unwrap().is_none());
}

#[tokio::test]
async fn a_deleted_blob_loses_its_lease() {
    let (m, c, b, _) = setup().await;
    let id = LeaseId::new_random();
    m.acquire_lease(&c, &b, SECS_30, id).await.unwrap();
    m.delete_blob(&c, &b, &BlobConditions::leased(id))
        .await
        .unwrap();
    m.put_blob(&c, &b, vec![], &Metadata::new(), &BlobConditions::none())
        .await
        .unwrap();
    let props = m.blob_properties(&c, &b).await.unwrap().unwrap();
    assert_eq!(props.lease.state, LeaseState::Available);
    let e = m.renew_lease(&c, &b, id).await.unwrap_err();
    assert_service_error(
        &e,
        ErrorKind::LeaseLost,
        "LeaseNotPresentWithLeaseOperation",
    );
}
