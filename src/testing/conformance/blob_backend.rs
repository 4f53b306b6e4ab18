//! Blob checks through the [`BlobBackend`] trait on single operations:
//! missing containers and blobs, conditions, metadata, and the lease checks
//! on writes, with the service's error kinds and codes. (The lease state
//! machine is in [`blobs`](super::blobs) and [`timed`](super::timed).)

use leasehold::backend::LeaseAction::{Release, Renew};
use leasehold::backend::{
    BlobBackend, BlobConditions, LeaseDuration, LeaseId, LeaseKind, LeaseReply, LeaseState,
    Metadata,
};
use leasehold::key::{BlobName, ContainerName, ETag};
use leasehold::{Error, ErrorKind};

use super::{Ctx, acquire, break_after, change};

/// A container name private to the check (not created).
fn container(ctx: &Ctx, suffix: &str) -> ContainerName {
    ContainerName::new(format!("{}{suffix}", ctx.container.as_str())).unwrap()
}

fn blob(name: &str) -> BlobName {
    BlobName::new(name).unwrap()
}

fn meta(pairs: &[(&str, &str)]) -> Metadata {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn assert_service_error(e: &Error, kind: ErrorKind, code: &str) {
    assert_eq!(e.kind(), kind, "{e}");
    assert_eq!(e.code(), Some(code), "{e}");
}

/// The context's container holding an empty blob `b`.
async fn setup(
    ctx: &Ctx,
) -> (
    std::sync::Arc<dyn leasehold::backend::Backend>,
    ContainerName,
    BlobName,
    ETag,
) {
    let m = ctx.backend().clone();
    let c = ctx.container.clone();
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

/// Every operation on a missing container is container not found.
pub async fn every_operation_on_a_missing_container_is_container_not_found(ctx: &Ctx) {
    let m = ctx.backend().clone();
    let c = container(ctx, "nope");
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
        m.lease(&c, &b, acquire(SECS_30, id)).await.unwrap_err(),
        m.lease(&c, &b, Renew(id)).await.unwrap_err(),
        m.lease(&c, &b, change(id, id)).await.unwrap_err(),
        m.lease(&c, &b, Release(id)).await.unwrap_err(),
        m.lease(&c, &b, break_after(None)).await.unwrap_err(),
    ];
    for e in errors {
        assert_service_error(&e, ErrorKind::NotFound, "ContainerNotFound");
    }
}

/// A missing blob reads as none and other ops are blob not found.
pub async fn a_missing_blob_reads_as_none_and_other_ops_are_blob_not_found(ctx: &Ctx) {
    let m = ctx.backend().clone();
    let c = ctx.container.clone();
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
        m.lease(&c, &b, acquire(SECS_30, id)).await.unwrap_err(),
        m.lease(&c, &b, Renew(id)).await.unwrap_err(),
        m.lease(&c, &b, change(id, id)).await.unwrap_err(),
        m.lease(&c, &b, Release(id)).await.unwrap_err(),
        m.lease(&c, &b, break_after(None)).await.unwrap_err(),
    ];
    for e in errors {
        assert_service_error(&e, ErrorKind::NotFound, "BlobNotFound");
    }
}

/// Put get and properties round trip.
pub async fn put_get_and_properties_round_trip(ctx: &Ctx) {
    let m = ctx.backend().clone();
    let c = ctx.container.clone();
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

/// Blob etags change on every write.
pub async fn blob_etags_change_on_every_write(ctx: &Ctx) {
    let (m, c, b, e0) = setup(ctx).await;
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

/// An acquire replies with the blob's ETag, and no lease operation changes
/// it (renew, change, release, break, acquiring again); a write under the
/// lease does, and the next acquire reports the new one.
pub async fn an_acquire_replies_with_the_blob_etag_and_leasing_keeps_it(ctx: &Ctx) {
    let (m, c, b, created) = setup(ctx).await;
    let m = m.as_ref();
    let etag_now = || async { m.blob_properties(&c, &b).await.unwrap().unwrap().etag };
    let reply = |id, etag: &ETag| LeaseReply::Acquired {
        id,
        etag: Some(etag.clone()),
    };
    let a = LeaseId::new_random();
    let acquired = m.lease(&c, &b, acquire(SECS_30, a)).await.unwrap();
    assert_eq!(acquired, reply(a, &created), "the acquire's reply");
    assert_eq!(etag_now().await, created, "leasing keeps the ETag");
    // Acquiring again with the current id (a retry) reports it too.
    let again = m.lease(&c, &b, acquire(SECS_30, a)).await.unwrap();
    assert_eq!(again, reply(a, &created));
    m.lease(&c, &b, Renew(a)).await.unwrap();
    let a2 = LeaseId::new_random();
    m.lease(&c, &b, change(a, a2)).await.unwrap();
    assert_eq!(etag_now().await, created, "renew and change keep it");
    let written = m
        .set_blob_metadata(
            &c,
            &b,
            &meta(&[("owner", "a")]),
            &BlobConditions::leased(a2),
        )
        .await
        .unwrap();
    assert_ne!(written, created);
    m.lease(&c, &b, Release(a2)).await.unwrap();
    assert_eq!(etag_now().await, written, "release keeps it");
    let b1 = LeaseId::new_random();
    let acquired = m.lease(&c, &b, acquire(SECS_30, b1)).await.unwrap();
    assert_eq!(acquired, reply(b1, &written), "the write's ETag");
    m.lease(&c, &b, break_after(Some(std::time::Duration::ZERO)))
        .await
        .unwrap();
    assert_eq!(etag_now().await, written, "break keeps it");
    let b2 = LeaseId::new_random();
    let acquired = m.lease(&c, &b, acquire(SECS_30, b2)).await.unwrap();
    assert_eq!(acquired, reply(b2, &written), "after a break");
    m.lease(&c, &b, Release(b2)).await.unwrap();
}

/// Set metadata replaces metadata and keeps the body.
pub async fn set_metadata_replaces_metadata_and_keeps_the_body(ctx: &Ctx) {
    let (m, c, b, _) = setup(ctx).await;
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

/// If match stale is condition not met for every write.
pub async fn if_match_stale_is_condition_not_met_for_every_write(ctx: &Ctx) {
    let (m, c, b, old) = setup(ctx).await;
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

/// If match on a missing blob is condition not met.
pub async fn if_match_on_a_missing_blob_is_condition_not_met(ctx: &Ctx) {
    let m = ctx.backend().clone();
    let c = ctx.container.clone();
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

/// Delete of a missing blob is blob not found.
pub async fn delete_of_a_missing_blob_is_blob_not_found(ctx: &Ctx) {
    let (m, c, b, _) = setup(ctx).await;
    m.delete_blob(&c, &b, &BlobConditions::none())
        .await
        .unwrap();
    let e = m
        .delete_blob(&c, &b, &BlobConditions::none())
        .await
        .unwrap_err();
    assert_service_error(&e, ErrorKind::NotFound, "BlobNotFound");
}

/// Writes to a leased blob need its lease id.
pub async fn writes_to_a_leased_blob_need_its_lease_id(ctx: &Ctx) {
    let (m, c, b, _) = setup(ctx).await;
    let id = m
        .lease(
            &c,
            &b,
            acquire(LeaseDuration::Infinite, LeaseId::new_random()),
        )
        .await
        .unwrap()
        .lease_id()
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
    m.lease(&c, &b, Renew(id)).await.unwrap();
    m.delete_blob(&c, &b, &right).await.unwrap();
    assert!(m.get_blob(&c, &b).await.unwrap().is_none());
}

/// Blobs put get properties metadata delete with conditions.
pub async fn blobs_put_get_properties_metadata_delete_with_conditions(ctx: &Ctx) {
    let b = ctx.backend().clone();
    let c = ctx.container.clone();
    b.create_container(&c).await.unwrap();
    let x = blob("dir/x.json");

    assert!(b.get_blob(&c, &x).await.unwrap().is_none());
    assert!(b.blob_properties(&c, &x).await.unwrap().is_none());

    // Create-only.
    let e1 = b
        .put_blob(
            &c,
            &x,
            b"one".to_vec(),
            &meta(&[("owner", "n1")]),
            &BlobConditions::create_only(),
        )
        .await
        .unwrap();
    let e = b
        .put_blob(
            &c,
            &x,
            b"two".to_vec(),
            &Metadata::new(),
            &BlobConditions::create_only(),
        )
        .await
        .unwrap_err();
    assert_service_error(&e, ErrorKind::AlreadyExists, "BlobAlreadyExists");

    let got = b.get_blob(&c, &x).await.unwrap().unwrap();
    assert_eq!(got.body, b"one");
    assert_eq!(got.properties.etag, e1);
    assert_eq!(got.properties.metadata, meta(&[("owner", "n1")]));
    assert_eq!(got.properties.content_length, 3);
    assert_eq!(got.properties.lease.state, LeaseState::Available);
    let props = b.blob_properties(&c, &x).await.unwrap().unwrap();
    assert_eq!(props, got.properties);

    // If-Match.
    let e2 = b
        .put_blob(
            &c,
            &x,
            b"two".to_vec(),
            &Metadata::new(),
            &BlobConditions::if_match(e1.clone()),
        )
        .await
        .unwrap();
    assert_ne!(e1, e2);
    let e = b
        .put_blob(
            &c,
            &x,
            b"three".to_vec(),
            &Metadata::new(),
            &BlobConditions::if_match(e1.clone()),
        )
        .await
        .unwrap_err();
    assert_service_error(&e, ErrorKind::Conflict, "ConditionNotMet");

    // Metadata.
    let e3 = b
        .set_blob_metadata(
            &c,
            &x,
            &meta(&[("epoch", "7"), ("Mixed_Case", "v")]),
            &BlobConditions::if_match(e2.clone()),
        )
        .await
        .unwrap();
    let e = b
        .set_blob_metadata(
            &c,
            &x,
            &Metadata::new(),
            &BlobConditions::if_match(e2.clone()),
        )
        .await
        .unwrap_err();
    assert_service_error(&e, ErrorKind::Conflict, "ConditionNotMet");
    let props = b.blob_properties(&c, &x).await.unwrap().unwrap();
    assert_eq!(props.etag, e3);
    // Names compare without case (HTTP headers are case-insensitive; the
    // Azure backend reads them back lowercased, which its own tests pin).
    let lowercased: Metadata = props
        .metadata
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
        .collect();
    assert_eq!(lowercased, meta(&[("epoch", "7"), ("mixed_case", "v")]));
    let got = b.get_blob(&c, &x).await.unwrap().unwrap();
    assert_eq!(got.body, b"two", "metadata writes keep the body");

    // Invalid metadata is rejected before sending.
    let e = b
        .set_blob_metadata(&c, &x, &meta(&[("bad-name", "v")]), &BlobConditions::none())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");

    // Delete.
    let e = b
        .delete_blob(&c, &x, &BlobConditions::if_match(e2))
        .await
        .unwrap_err();
    assert_service_error(&e, ErrorKind::Conflict, "ConditionNotMet");
    b.delete_blob(&c, &x, &BlobConditions::if_match(e3))
        .await
        .unwrap();
    assert!(b.get_blob(&c, &x).await.unwrap().is_none());
    let e = b
        .delete_blob(&c, &x, &BlobConditions::none())
        .await
        .unwrap_err();
    assert_service_error(&e, ErrorKind::NotFound, "BlobNotFound");

    // An empty blob reads back (a ranged read would fail on it).
    b.put_blob(
        &c,
        &x,
        Vec::new(),
        &Metadata::new(),
        &BlobConditions::none(),
    )
    .await
    .unwrap();
    let got = b.get_blob(&c, &x).await.unwrap().unwrap();
    assert!(got.body.is_empty());
    assert_eq!(got.properties.content_length, 0);

    // A missing container is an error, not an absent blob.
    let none = container(ctx, "absent");
    let e = b.get_blob(&none, &x).await.unwrap_err();
    assert_service_error(&e, ErrorKind::NotFound, "ContainerNotFound");
}

/// A large blob reads back in one piece.
pub async fn a_large_blob_reads_back_in_one_piece(ctx: &Ctx) {
    let b = ctx.backend().clone();
    let c = ctx.container.clone();
    b.create_container(&c).await.unwrap();
    let body: Vec<u8> = (0..(5 * 1024 * 1024 + 3))
        .map(|i| (i % 251) as u8)
        .collect();
    b.put_blob(
        &c,
        &blob("big"),
        body.clone(),
        &Metadata::new(),
        &BlobConditions::none(),
    )
    .await
    .unwrap();
    let got = b.get_blob(&c, &blob("big")).await.unwrap().unwrap();
    assert_eq!(got.body.len(), body.len());
    assert!(got.body == body);
}

/// Names with `/` (lock blobs are named after partition keys, which may hold
/// it) address one blob each: `a/b`, `a//b` and `a/b/c` are three blobs,
/// each leased, read, listed and deleted by its own name.
pub async fn slashes_in_names_are_path_separators_and_each_name_one_blob(ctx: &Ctx) {
    let b = ctx.backend().clone();
    let c = ctx.container.clone();
    b.create_container(&c).await.unwrap();
    let names = ["a/b", "a//b", "a/b/c", "a b/%2F"];
    for (i, name) in names.iter().enumerate() {
        b.put_blob(
            &c,
            &blob(name),
            vec![i as u8],
            &meta(&[("n", &i.to_string())]),
            &BlobConditions::create_only(),
        )
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    for (i, name) in names.iter().enumerate() {
        let got = b.get_blob(&c, &blob(name)).await.unwrap().unwrap();
        assert_eq!(got.body, vec![i as u8], "{name}");
        let id = LeaseId::new_random();
        b.lease(&c, &blob(name), acquire(LeaseDuration::Seconds(15), id))
            .await
            .unwrap();
        let p = b.blob_properties(&c, &blob(name)).await.unwrap().unwrap();
        assert_eq!(p.lease.state, LeaseState::Leased, "{name}");
        assert_eq!(
            p.metadata.get("n").map(String::as_str),
            Some(&*i.to_string())
        );
        b.lease(&c, &blob(name), Release(id)).await.unwrap();
    }
    let mut listed: Vec<String> = b
        .list_blobs(&c, "a", None)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|item| item.name)
        .collect();
    listed.sort();
    let mut expected: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    expected.sort();
    assert_eq!(listed, expected);
    b.delete_blob(&c, &blob("a//b"), &BlobConditions::none())
        .await
        .unwrap();
    assert!(b.get_blob(&c, &blob("a//b")).await.unwrap().is_none());
    assert!(b.get_blob(&c, &blob("a/b")).await.unwrap().is_some());
}

/// Metadata values travel as headers, which the request is signed over:
/// inner runs of spaces come back as written, and the write, a lease on
/// the blob and the read all pass the service's checks.
pub async fn metadata_values_with_inner_spaces_round_trip_and_leases_on_them_hold(ctx: &Ctx) {
    let (b, c, name, _) = setup(ctx).await;
    let m = meta(&[("owner", "node 1  of  3"), ("note", "a ,b=c;  d")]);
    let id = LeaseId::new_random();
    b.lease(&c, &name, acquire(LeaseDuration::Seconds(15), id))
        .await
        .unwrap();
    b.set_blob_metadata(&c, &name, &m, &BlobConditions::leased(id))
        .await
        .unwrap();
    let p = b.blob_properties(&c, &name).await.unwrap().unwrap();
    assert_eq!(
        p.metadata.get("owner").map(String::as_str),
        Some("node 1  of  3")
    );
    let got = b.get_blob(&c, &name).await.unwrap().unwrap();
    assert_eq!(got.properties.metadata, p.metadata);
    b.lease(&c, &name, Release(id)).await.unwrap();
}
