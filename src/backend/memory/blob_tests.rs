//! Unit tests of the blob side (containers, blobs, conditions, listing, and
//! the lease checks on writes), through the public trait.

use super::MemoryBackend;
use crate::backend::LeaseKind;
use crate::backend::{BlobBackend, BlobConditions, LeaseDuration, LeaseId, LeaseState, Metadata};
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
async fn every_operation_on_a_missing_container_is_container_not_found() {
    let m = MemoryBackend::new();
    let c = container("nope");
    let b = blob("b");
    let none = BlobConditions::none();
    let id = LeaseId::new_random();
    let errors = vec![
        m.put_blob(&c, &b, vec![], &Metadata::new(), &none)
            .await
            .unwrap_err(),
        m.get_blob(&c, &b).await.unwrap_err(),
        m.blob_properties(&c, &b).await.unwrap_err(),
        m.set_blob_metadata(&c, &b, &Metadata::new(), &none)
            .await
            .unwrap_err(),
        m.delete_blob(&c, &b, &none).await.unwrap_err(),
        m.list_blobs(&c, "", None).await.unwrap_err(),
        m.acquire_lease(&c, &b, SECS_30, id).await.unwrap_err(),
        m.renew_lease(&c, &b, id).await.unwrap_err(),
        m.change_lease(&c, &b, id, id).await.unwrap_err(),
        m.release_lease(&c, &b, id).await.unwrap_err(),
        m.break_lease(&c, &b, None).await.unwrap_err(),
    ];
    for e in errors {
        assert_service_error(&e, ErrorKind::NotFound, "ContainerNotFound");
    }
}

#[tokio::test]
async fn a_missing_blob_reads_as_none_and_other_ops_are_blob_not_found() {
    let m = MemoryBackend::new();
    let c = container("locks");
    m.create_container(&c).await.unwrap();
    let b = blob("missing");
    let none = BlobConditions::none();
    let id = LeaseId::new_random();
    assert!(m.get_blob(&c, &b).await.unwrap().is_none());
    assert!(m.blob_properties(&c, &b).await.unwrap().is_none());
    let errors = vec![
        m.set_blob_metadata(&c, &b, &Metadata::new(), &none)
            .await
            .unwrap_err(),
        m.delete_blob(&c, &b, &none).await.unwrap_err(),
        m.acquire_lease(&c, &b, SECS_30, id).await.unwrap_err(),
        m.renew_lease(&c, &b, id).await.unwrap_err(),
        m.change_lease(&c, &b, id, id).await.unwrap_err(),
        m.release_lease(&c, &b, id).await.unwrap_err(),
        m.break_lease(&c, &b, None).await.unwrap_err(),
    ];
    for e in errors {
        assert_service_error(&e, ErrorKind::NotFound, "BlobNotFound");
    }
}

#[tokio::test]
async fn put_get_and_properties_round_trip() {
    let m = MemoryBackend::new();
    let c = container("data");
    m.create_container(&c).await.unwrap();
    let b = blob("dir/file.json");
    let md = meta(&[("owner", "node-1"), ("epoch", "7")]);
    let etag = m
        .put_blob(&c, &b, b"hello".to_vec(), &md, &BlobConditions::none())
        .await
        .unwrap();
    let s = etag.as_str();
    assert!(s.starts_with("\"0x") && s.ends_with('"'), "{s}");
    assert!(
        s[3..s.len() - 1]
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_lowercase()),
        "{s}"
    );
    let got = m.get_blob(&c, &b).await.unwrap().unwrap();
    assert_eq!(got.body, b"hello");
    assert_eq!(got.properties.etag, etag);
    assert_eq!(got.properties.metadata, md);
    assert_eq!(got.properties.content_length, 5);
    assert_eq!(got.properties.lease.state, LeaseState::Available);
    assert_eq!(got.properties.lease.kind, None);
    assert!(!got.properties.lease.is_locked());
    assert_eq!(
        m.blob_properties(&c, &b).await.unwrap().unwrap(),
        got.properties
    );
}

#[tokio::test]
async fn blob_etags_change_on_every_write() {
    let (m, c, b, e0) = setup().await;
    let e1 = m
        .put_blob(&c, &b, vec![1], &Metadata::new(), &BlobConditions::none())
        .await
        .unwrap();
    let e2 = m
        .set_blob_metadata(&c, &b, &meta(&[("a", "1")]), &BlobConditions::none())
        .await
        .unwrap();
    let e3 = m
        .put_blob(
            &c,
            &b,
            vec![1],
            &meta(&[("a", "1")]),
            &BlobConditions::none(),
        )
        .await
        .unwrap();
    let all = [e0, e1, e2, e3.clone()];
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            assert_ne!(a, b);
        }
    }
    let props = m.blob_properties(&c, &b).await.unwrap().unwrap();
    assert_eq!(props.etag, e3);
}

#[tokio::test]
async fn set_metadata_replaces_metadata_and_keeps_the_body() {
    let (m, c, b, _) = setup().await;
    m.put_blob(
        &c,
        &b,
        b"body".to_vec(),
        &meta(&[("a", "1"), ("b", "2")]),
        &BlobConditions::none(),
    )
    .await
    .unwrap();
    m.set_blob_metadata(&c, &b, &meta(&[("c", "3")]), &BlobConditions::none())
        .await
        .unwrap();
    let got = m.get_blob(&c, &b).await.unwrap().unwrap();
    assert_eq!(got.body, b"body");
    assert_eq!(got.properties.metadata, meta(&[("c", "3")]));
}

#[tokio::test]
async fn if_match_stale_is_condition_not_met_for_every_write() {
    let (m, c, b, old) = setup().await;
    let new = m
        .put_blob(
            &c,
            &b,
            vec![1],
            &Metadata::new(),
            &BlobConditions::if_match(old.clone()),
        )
        .await
        .unwrap();
    let stale = BlobConditions::if_match(old);
    let errors = vec![
        m.put_blob(&c, &b, vec![2], &Metadata::new(), &stale)
            .await
            .unwrap_err(),
        m.set_blob_metadata(&c, &b, &meta(&[("a", "b")]), &stale)
            .await
            .unwrap_err(),
        m.delete_blob(&c, &b, &stale).await.unwrap_err(),
    ];
    for e in errors {
        assert_service_error(&e, ErrorKind::Conflict, "ConditionNotMet");
    }
    let got = m.get_blob(&c, &b).await.unwrap().unwrap();
    assert_eq!(got.body, vec![1]);
    assert_eq!(got.properties.etag, new.clone());
    // The current ETag matches.
    m.delete_blob(&c, &b, &BlobConditions::if_match(new))
        .await
        .unwrap();
    assert!(m.get_blob(&c, &b).await.unwrap().is_none());
}

#[tokio::test]
async fn if_match_on_a_missing_blob_is_condition_not_met() {
    let m = MemoryBackend::new();
    let c = container("data");
    m.create_container(&c).await.unwrap();
    let e = m
        .put_blob(
            &c,
            &blob("x"),
            vec![],
            &Metadata::new(),
            &BlobConditions::if_match(ETag::new("\"0x1\"")),
        )
        .await
        .unwrap_err();
    assert_service_error(&e, ErrorKind::Conflict, "ConditionNotMet");
    assert!(m.get_blob(&c, &blob("x")).await.unwrap().is_none());
}

#[tokio::test]
async fn create_only_put_is_blob_already_exists_on_an_existing_blob() {
    let m = MemoryBackend::new();
    let c = container("data");
    m.create_container(&c).await.unwrap();
    let b = blob("once");
    let e1 = m
        .put_blob(
            &c,
            &b,
            vec![1],
            &Metadata::new(),
            &BlobConditions::create_only(),
        )
        .await
        .unwrap();
    let e = m
        .put_blob(
            &c,
            &b,
            vec![2],
            &Metadata::new(),
            &BlobConditions::create_only(),
        )
        .await
        .unwrap_err();
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
async fn delete_of_a_missing_blob_is_blob_not_found() {
    let (m, c, b, _) = setup().await;
    m.delete_blob(&c, &b, &BlobConditions::none())
        .await
        .unwrap();
    let e = m
        .delete_blob(&c, &b, &BlobConditions::none())
        .await
        .unwrap_err();
    assert_service_error(&e, ErrorKind::NotFound, "BlobNotFound");
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

// ---------------------------------------------------------------------------
// Writes against leases
// ---------------------------------------------------------------------------

#[tokio::test]
async fn writes_to_a_leased_blob_need_its_lease_id() {
    let (m, c, b, _) = setup().await;
    let id = m
        .acquire_lease(&c, &b, LeaseDuration::Infinite, LeaseId::new_random())
        .await
        .unwrap();
    let md = meta(&[("k", "v")]);
    let without = BlobConditions::none();
    let wrong = BlobConditions::leased(LeaseId::new_random());
    for conditions in [&without, &wrong] {
        let (kind, code) = if conditions.lease_id.is_none() {
            (ErrorKind::LeaseHeld, "LeaseIdMissing")
        } else {
            (ErrorKind::LeaseLost, "LeaseIdMismatchWithBlobOperation")
        };
        let errors = vec![
            m.put_blob(&c, &b, vec![9], &md, conditions)
                .await
                .unwrap_err(),
            m.set_blob_metadata(&c, &b, &md, conditions)
                .await
                .unwrap_err(),
            m.delete_blob(&c, &b, conditions).await.unwrap_err(),
        ];
        for e in errors {
            assert_service_error(&e, kind, code);
        }
    }
    // Reads need no lease id.
    assert!(m.get_blob(&c, &b).await.unwrap().unwrap().body.is_empty());

    // With the id: allowed, and a put keeps the lease.
    let right = BlobConditions::leased(id);
    m.put_blob(&c, &b, vec![1], &md, &right).await.unwrap();
    m.set_blob_metadata(&c, &b, &md, &right).await.unwrap();
    let props = m.blob_properties(&c, &b).await.unwrap().unwrap();
    assert_eq!(props.lease.state, LeaseState::Leased);
    assert_eq!(props.lease.kind, Some(LeaseKind::Infinite));
    m.renew_lease(&c, &b, id).await.unwrap();
    m.delete_blob(&c, &b, &right).await.unwrap();
    assert!(m.get_blob(&c, &b).await.unwrap().is_none());
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
    let id = m
        .acquire_lease(&c, &b, SECS_30, LeaseId::new_random())
        .await
        .unwrap();
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
