//! Blob checks: conditional writes, metadata, listing, and the lease state
//! machine with the service's error codes (transitions that need no waiting;
//! the timed ones are checked with paused time on the memory backend).

use std::time::Duration;

use leasehold::ErrorKind;
use leasehold::backend::LeaseAction::{Release, Renew};
use leasehold::backend::{
    BlobConditions, LeaseDuration, LeaseId, LeaseKind, LeaseReply, LeaseState, Metadata,
};
use leasehold::key::BlobName;

use super::{Ctx, acquire, break_after, change, time_left};

fn blob(name: &str) -> BlobName {
    BlobName::new(name).unwrap()
}

fn err<T: std::fmt::Debug>(r: leasehold::Result<T>) -> (ErrorKind, String) {
    let e = r.expect_err("expected an error");
    (e.kind(), e.code().unwrap_or_default().to_owned())
}

async fn setup(ctx: &Ctx, name: &str) -> BlobName {
    let b = blob(name);
    ctx.backend()
        .create_container(&ctx.container)
        .await
        .unwrap();
    ctx.backend()
        .create_container(&ctx.container)
        .await
        .expect("idempotent");
    ctx.backend()
        .put_blob(
            &ctx.container,
            &b,
            b"x".to_vec(),
            &Metadata::new(),
            &BlobConditions::none(),
        )
        .await
        .unwrap();
    b
}

fn secs(s: u8) -> LeaseDuration {
    LeaseDuration::Seconds(s)
}

/// Put get and conditions.
pub async fn put_get_and_conditions(ctx: &Ctx) {
    let (be, c) = (ctx.backend(), &ctx.container);
    be.create_container(c).await.unwrap();
    let b = blob("doc.json");
    let e1 = be
        .put_blob(
            c,
            &b,
            b"one".to_vec(),
            &Metadata::new(),
            &BlobConditions::create_only(),
        )
        .await
        .expect("create");
    let (k, code) = err(be
        .put_blob(
            c,
            &b,
            b"two".to_vec(),
            &Metadata::new(),
            &BlobConditions::create_only(),
        )
        .await);
    assert_eq!(
        (k, code.as_str()),
        (ErrorKind::AlreadyExists, "BlobAlreadyExists")
    );
    let e2 = be
        .put_blob(
            c,
            &b,
            b"two".to_vec(),
            &Metadata::new(),
            &BlobConditions::if_match(e1.clone()),
        )
        .await
        .expect("if-match current");
    assert_ne!(e1, e2, "ETag changes on write");
    let (k, code) = err(be
        .put_blob(
            c,
            &b,
            b"three".to_vec(),
            &Metadata::new(),
            &BlobConditions::if_match(e1.clone()),
        )
        .await);
    assert_eq!((k, code.as_str()), (ErrorKind::Conflict, "ConditionNotMet"));
    let got = be.get_blob(c, &b).await.unwrap().expect("exists");
    assert_eq!(got.body, b"two");
    assert_eq!(got.properties.etag, e2);
    assert_eq!(got.properties.lease.state, LeaseState::Available);
    let (k, code) = err(be.delete_blob(c, &b, &BlobConditions::if_match(e1)).await);
    assert_eq!((k, code.as_str()), (ErrorKind::Conflict, "ConditionNotMet"));
    be.delete_blob(c, &b, &BlobConditions::if_match(e2))
        .await
        .expect("delete");
    assert!(be.get_blob(c, &b).await.unwrap().is_none());
    assert!(be.blob_properties(c, &b).await.unwrap().is_none());
}

/// Metadata and listing.
pub async fn metadata_and_listing(ctx: &Ctx) {
    let (be, c) = (ctx.backend(), &ctx.container);
    let b = setup(ctx, "lease/a").await;
    let mut md = Metadata::new();
    md.insert("owner".into(), "node1".into());
    md.insert("epoch".into(), "7".into());
    let before = be.blob_properties(c, &b).await.unwrap().unwrap();
    let etag = be
        .set_blob_metadata(c, &b, &md, &BlobConditions::if_match(before.etag.clone()))
        .await
        .expect("set metadata");
    let after = be.blob_properties(c, &b).await.unwrap().unwrap();
    assert_eq!(after.metadata, md);
    assert_eq!(after.etag, etag);
    assert_ne!(before.etag, etag);
    assert_eq!(after.content_length, 1);
    for name in ["lease/b", "lease/c", "other/x"] {
        setup(ctx, name).await;
    }
    let page = be.list_blobs(c, "lease/", None).await.unwrap();
    let names: Vec<_> = page.items.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["lease/a", "lease/b", "lease/c"]);
    assert_eq!(page.items[0].properties.metadata, md);
}

/// Lease acquire renew change release.
pub async fn lease_acquire_renew_change_release(ctx: &Ctx) {
    let (be, c) = (ctx.backend(), &ctx.container);
    let b = setup(ctx, "l1").await;
    let id = LeaseId::new_random();
    assert_eq!(
        be.lease(c, &b, acquire(secs(15), id))
            .await
            .unwrap()
            .lease_id(),
        Some(id)
    );
    let props = be.blob_properties(c, &b).await.unwrap().unwrap();
    assert_eq!(props.lease.state, LeaseState::Leased);
    assert!(props.lease.is_locked());
    assert_eq!(props.lease.kind, Some(LeaseKind::Fixed));
    // Acquiring again with the current id is an idempotent retry.
    assert_eq!(
        be.lease(c, &b, acquire(secs(15), id))
            .await
            .unwrap()
            .lease_id(),
        Some(id)
    );
    be.lease(c, &b, Renew(id)).await.expect("renew");
    let id2 = LeaseId::new_random();
    assert_eq!(
        be.lease(c, &b, change(id, id2)).await.unwrap(),
        LeaseReply::Changed(id2)
    );
    // Changing again to the id it already has succeeds too.
    assert_eq!(
        be.lease(c, &b, change(id, id2)).await.unwrap(),
        LeaseReply::Changed(id2)
    );
    be.lease(c, &b, Renew(id2))
        .await
        .expect("renew under the new id");
    let (k, code) = err(be.lease(c, &b, Renew(id)).await);
    assert_eq!(
        (k, code.as_str()),
        (ErrorKind::LeaseLost, "LeaseIdMismatchWithLeaseOperation")
    );
    be.lease(c, &b, Release(id2)).await.expect("release");
    let props = be.blob_properties(c, &b).await.unwrap().unwrap();
    assert_eq!(props.lease.state, LeaseState::Available);
    let (k, code) = err(be.lease(c, &b, Renew(id2)).await);
    // Known difference: Azure answers LeaseNotPresentWithLeaseOperation (as
    // the memory backend does); Azurite 3.37 answers
    // LeaseIdMismatchWithLeaseOperation. Both mean the lease is gone.
    assert_eq!(k, ErrorKind::LeaseLost);
    assert!(
        code == "LeaseNotPresentWithLeaseOperation" || code == "LeaseIdMismatchWithLeaseOperation",
        "{code}"
    );
    // Infinite leases.
    let id3 = LeaseId::new_random();
    be.lease(c, &b, acquire(LeaseDuration::Infinite, id3))
        .await
        .unwrap();
    let props = be.blob_properties(c, &b).await.unwrap().unwrap();
    assert_eq!(props.lease.kind, Some(LeaseKind::Infinite));
    be.lease(c, &b, Release(id3)).await.unwrap();
    // Invalid durations are refused before sending.
    for bad in [secs(0), secs(14), secs(61)] {
        let (k, _) = err(be.lease(c, &b, acquire(bad, LeaseId::new_random())).await);
        assert_eq!(k, ErrorKind::Invalid, "{bad:?}");
    }
}

/// Lease contention codes.
pub async fn lease_contention_codes(ctx: &Ctx) {
    let (be, c) = (ctx.backend(), &ctx.container);
    let b = setup(ctx, "l2").await;
    let holder = LeaseId::new_random();
    let other = LeaseId::new_random();
    be.lease(c, &b, acquire(secs(60), holder)).await.unwrap();
    let (k, code) = err(be.lease(c, &b, acquire(secs(60), other)).await);
    assert_eq!(
        (k, code.as_str()),
        (ErrorKind::LeaseHeld, "LeaseAlreadyPresent")
    );
    for action in [Renew(other), Release(other), change(other, other)] {
        let (k, code) = err(be.lease(c, &b, action).await);
        assert_eq!(
            (k, code.as_str()),
            (ErrorKind::LeaseLost, "LeaseIdMismatchWithLeaseOperation"),
            "{action:?}"
        );
    }
    be.lease(c, &b, Release(holder)).await.unwrap();
}

/// Lease break and broken states.
pub async fn lease_break_and_broken_states(ctx: &Ctx) {
    let (be, c) = (ctx.backend(), &ctx.container);
    let b = setup(ctx, "l3").await;
    // Breaking an available blob fails.
    let (k, code) = err(be.lease(c, &b, break_after(Some(Duration::ZERO))).await);
    assert_eq!(
        (k, code.as_str()),
        (ErrorKind::LeaseLost, "LeaseNotPresentWithLeaseOperation")
    );
    let id = LeaseId::new_random();
    be.lease(c, &b, acquire(secs(60), id)).await.unwrap();
    // A break with a period leaves it breaking.
    let left = time_left(
        be.lease(c, &b, break_after(Some(Duration::from_secs(30))))
            .await
            .unwrap(),
    );
    assert!(
        left > Duration::from_secs(25) && left <= Duration::from_secs(30),
        "{left:?}"
    );
    let props = be.blob_properties(c, &b).await.unwrap().unwrap();
    assert_eq!(props.lease.state, LeaseState::Breaking);
    let (k, code) = err(be
        .lease(c, &b, acquire(secs(15), LeaseId::new_random()))
        .await);
    assert_eq!(
        (k, code.as_str()),
        (ErrorKind::LeaseHeld, "LeaseAlreadyPresent"),
        "another id"
    );
    let (k, code) = err(be.lease(c, &b, acquire(secs(15), id)).await);
    assert_eq!(
        (k, code.as_str()),
        (ErrorKind::LeaseHeld, "LeaseIsBreakingAndCannotBeAcquired"),
        "the holder's id"
    );
    let (k, code) = err(be.lease(c, &b, Renew(id)).await);
    assert_eq!(
        (k, code.as_str()),
        (ErrorKind::LeaseLost, "LeaseIsBrokenAndCannotBeRenewed")
    );
    // Breaking again with period 0 breaks it at once.
    let left = be
        .lease(c, &b, break_after(Some(Duration::ZERO)))
        .await
        .unwrap();
    assert_eq!(left, LeaseReply::Broken(Duration::ZERO));
    let props = be.blob_properties(c, &b).await.unwrap().unwrap();
    assert_eq!(props.lease.state, LeaseState::Broken);
    let (k, code) = err(be.lease(c, &b, Renew(id)).await);
    assert_eq!(
        (k, code.as_str()),
        (ErrorKind::LeaseLost, "LeaseIsBrokenAndCannotBeRenewed")
    );
    // The holder may release a broken lease; anyone may acquire it.
    let id2 = LeaseId::new_random();
    be.lease(c, &b, acquire(secs(15), id2))
        .await
        .expect("acquire broken");
    be.lease(c, &b, Release(id2)).await.unwrap();
    // An infinite lease broken without a period breaks at once.
    let id3 = LeaseId::new_random();
    be.lease(c, &b, acquire(LeaseDuration::Infinite, id3))
        .await
        .unwrap();
    assert_eq!(
        be.lease(c, &b, break_after(None)).await.unwrap(),
        LeaseReply::Broken(Duration::ZERO)
    );
    let props = be.blob_properties(c, &b).await.unwrap().unwrap();
    assert_eq!(props.lease.state, LeaseState::Broken);
}

/// Writes to leased blobs need the lease.
pub async fn writes_to_leased_blobs_need_the_lease(ctx: &Ctx) {
    let (be, c) = (ctx.backend(), &ctx.container);
    let b = setup(ctx, "l4").await;
    let id = LeaseId::new_random();
    be.lease(c, &b, acquire(secs(60), id)).await.unwrap();
    let md = Metadata::new();
    let (k, code) = err(be
        .put_blob(c, &b, vec![], &md, &BlobConditions::none())
        .await);
    assert_eq!((k, code.as_str()), (ErrorKind::LeaseHeld, "LeaseIdMissing"));
    let (k, code) = err(be
        .put_blob(
            c,
            &b,
            vec![],
            &md,
            &BlobConditions::leased(LeaseId::new_random()),
        )
        .await);
    assert_eq!(
        (k, code.as_str()),
        (ErrorKind::LeaseLost, "LeaseIdMismatchWithBlobOperation")
    );
    let (k, code) = err(be
        .set_blob_metadata(c, &b, &md, &BlobConditions::none())
        .await);
    assert_eq!((k, code.as_str()), (ErrorKind::LeaseHeld, "LeaseIdMissing"));
    let (k, code) = err(be.delete_blob(c, &b, &BlobConditions::none()).await);
    assert_eq!((k, code.as_str()), (ErrorKind::LeaseHeld, "LeaseIdMissing"));
    // With the lease id, writes go through and keep the lease.
    be.put_blob(c, &b, b"journal".to_vec(), &md, &BlobConditions::leased(id))
        .await
        .expect("write under lease");
    be.set_blob_metadata(c, &b, &md, &BlobConditions::leased(id))
        .await
        .unwrap();
    let props = be.blob_properties(c, &b).await.unwrap().unwrap();
    assert_eq!(props.lease.state, LeaseState::Leased);
    be.lease(c, &b, Renew(id))
        .await
        .expect("lease kept across writes");
    // Reads need no lease.
    assert_eq!(be.get_blob(c, &b).await.unwrap().unwrap().body, b"journal");
    // Once released, a lease id on a write is refused.
    be.lease(c, &b, Release(id)).await.unwrap();
    let (k, code) = err(be
        .put_blob(c, &b, vec![], &md, &BlobConditions::leased(id))
        .await);
    assert_eq!(
        (k, code.as_str()),
        (ErrorKind::LeaseLost, "LeaseNotPresentWithBlobOperation")
    );
    // A broken lease fences its former holder.
    let id2 = LeaseId::new_random();
    be.lease(c, &b, acquire(secs(60), id2)).await.unwrap();
    be.lease(c, &b, break_after(Some(Duration::ZERO)))
        .await
        .unwrap();
    let (k, _) = err(be
        .put_blob(c, &b, vec![], &md, &BlobConditions::leased(id2))
        .await);
    assert_eq!(k, ErrorKind::LeaseLost);
}

/// Missing blob and container codes.
pub async fn missing_blob_and_container_codes(ctx: &Ctx) {
    let (be, c) = (ctx.backend(), &ctx.container);
    let missing_container =
        leasehold::key::ContainerName::new(format!("{}x", ctx.container)).unwrap();
    let b = blob("nothing");
    let (k, code) = err(be
        .put_blob(
            &missing_container,
            &b,
            vec![],
            &Metadata::new(),
            &BlobConditions::none(),
        )
        .await);
    assert_eq!(
        (k, code.as_str()),
        (ErrorKind::NotFound, "ContainerNotFound")
    );
    be.create_container(c).await.unwrap();
    let (k, code) = err(be
        .lease(c, &b, acquire(secs(15), LeaseId::new_random()))
        .await);
    assert_eq!((k, code.as_str()), (ErrorKind::NotFound, "BlobNotFound"));
    let (k, code) = err(be
        .set_blob_metadata(c, &b, &Metadata::new(), &BlobConditions::none())
        .await);
    assert_eq!((k, code.as_str()), (ErrorKind::NotFound, "BlobNotFound"));
    let (k, _) = err(be.delete_blob(c, &b, &BlobConditions::none()).await);
    assert_eq!(k, ErrorKind::NotFound);
    assert!(be.get_blob(c, &b).await.unwrap().is_none());
}

/// Azure answers a renew or release of a blob without a lease with 409
/// `LeaseNotPresentWithLeaseOperation` (as the memory backend does);
/// Azurite 3.37 with `LeaseIdMismatchWithLeaseOperation`. Both are
/// `LeaseLost`.
fn assert_no_lease_for_lease_op(e: &leasehold::Error) {
    assert_eq!(e.kind(), ErrorKind::LeaseLost, "{e:?}");
    assert!(
        matches!(
            e.code(),
            Some("LeaseNotPresentWithLeaseOperation" | "LeaseIdMismatchWithLeaseOperation")
        ),
        "{e:?}"
    );
}

fn assert_kind(e: &leasehold::Error, kind: ErrorKind, code: Option<&str>) {
    assert_eq!(e.kind(), kind, "{e:?}");
    if let Some(code) = code {
        assert_eq!(e.code(), Some(code), "{e:?}");
    }
}

/// A blob `name` in the context's container (created), to lease.
async fn leased_blob(ctx: &Ctx, name: &str) -> BlobName {
    let x = BlobName::new(name).unwrap();
    let (be, c) = (ctx.backend(), &ctx.container);
    be.create_container(c).await.unwrap();
    be.put_blob(
        c,
        &x,
        b"lock".to_vec(),
        &Metadata::new(),
        &BlobConditions::none(),
    )
    .await
    .unwrap();
    x
}

/// Every lease error code, through every state: no lease, leased, breaking,
/// broken.
pub async fn every_lease_error_code(ctx: &Ctx) {
    let b = ctx.backend().clone();
    let c = ctx.container.clone();
    let x = leased_blob(ctx, "x").await;
    let holder = LeaseId::new_random();
    let other = LeaseId::new_random();
    let none = BlobConditions::none();
    let body = || b"w".to_vec();

    // No lease yet.
    let e = b.lease(&c, &x, Renew(holder)).await.unwrap_err();
    assert_no_lease_for_lease_op(&e);
    let e = b.lease(&c, &x, Release(holder)).await.unwrap_err();
    assert_no_lease_for_lease_op(&e);
    let e = b.lease(&c, &x, change(holder, other)).await.unwrap_err();
    assert_kind(
        &e,
        ErrorKind::LeaseLost,
        Some("LeaseNotPresentWithLeaseOperation"),
    );
    let e = b
        .put_blob(
            &c,
            &x,
            body(),
            &Metadata::new(),
            &BlobConditions::leased(holder),
        )
        .await
        .unwrap_err();
    assert_kind(
        &e,
        ErrorKind::LeaseLost,
        Some("LeaseNotPresentWithBlobOperation"),
    );

    b.lease(&c, &x, acquire(LeaseDuration::Infinite, holder))
        .await
        .unwrap();

    // Contention.
    let e = b
        .lease(&c, &x, acquire(LeaseDuration::Infinite, other))
        .await
        .unwrap_err();
    assert_kind(&e, ErrorKind::LeaseHeld, Some("LeaseAlreadyPresent"));

    // Lease operations with a wrong id.
    for e in [
        b.lease(&c, &x, Renew(other)).await.unwrap_err(),
        b.lease(&c, &x, Release(other)).await.unwrap_err(),
        b.lease(&c, &x, change(other, LeaseId::new_random()))
            .await
            .unwrap_err(),
    ] {
        assert_kind(
            &e,
            ErrorKind::LeaseLost,
            Some("LeaseIdMismatchWithLeaseOperation"),
        );
    }

    // Blob writes on a leased blob: without the id, with a wrong id.
    let e = b
        .put_blob(&c, &x, body(), &Metadata::new(), &none)
        .await
        .unwrap_err();
    assert_kind(&e, ErrorKind::LeaseHeld, Some("LeaseIdMissing"));
    let e = b
        .set_blob_metadata(&c, &x, &Metadata::new(), &none)
        .await
        .unwrap_err();
    assert_kind(&e, ErrorKind::LeaseHeld, Some("LeaseIdMissing"));
    let e = b.delete_blob(&c, &x, &none).await.unwrap_err();
    assert_kind(&e, ErrorKind::LeaseHeld, Some("LeaseIdMissing"));
    let e = b
        .put_blob(
            &c,
            &x,
            body(),
            &Metadata::new(),
            &BlobConditions::leased(other),
        )
        .await
        .unwrap_err();
    assert_kind(
        &e,
        ErrorKind::LeaseLost,
        Some("LeaseIdMismatchWithBlobOperation"),
    );
    let e = b
        .set_blob_metadata(&c, &x, &Metadata::new(), &BlobConditions::leased(other))
        .await
        .unwrap_err();
    assert_kind(
        &e,
        ErrorKind::LeaseLost,
        Some("LeaseIdMismatchWithBlobOperation"),
    );
    // Reads need no lease id; writes with it succeed.
    assert!(b.get_blob(&c, &x).await.unwrap().is_some());
    b.put_blob(
        &c,
        &x,
        body(),
        &[("epoch".to_owned(), "1".to_owned())].into_iter().collect(),
        &BlobConditions::leased(holder),
    )
    .await
    .unwrap();

    // Breaking (a period on an infinite lease): the holder keeps it for
    // the period; others cannot acquire; the holder cannot change it.
    let left = time_left(
        b.lease(&c, &x, break_after(Some(Duration::from_secs(30))))
            .await
            .unwrap(),
    );
    assert!(
        left > Duration::from_secs(20) && left <= Duration::from_secs(30),
        "{left:?}"
    );
    let props = b.blob_properties(&c, &x).await.unwrap().unwrap();
    assert_eq!(props.lease.state, LeaseState::Breaking);
    assert!(props.lease.is_locked());
    let e = b
        .lease(&c, &x, acquire(LeaseDuration::Infinite, other))
        .await
        .unwrap_err();
    // Azure: 409 LeaseIsBreakingAndCannotBeAcquired. Azurite 3.37.0 answers
    // 409 LeaseAlreadyPresent. Both are LeaseHeld.
    assert_eq!(e.kind(), ErrorKind::LeaseHeld, "{e:?}");
    assert!(
        matches!(
            e.code(),
            Some("LeaseIsBreakingAndCannotBeAcquired" | "LeaseAlreadyPresent")
        ),
        "{e:?}"
    );
    let e = b.lease(&c, &x, change(holder, other)).await.unwrap_err();
    assert_kind(
        &e,
        ErrorKind::LeaseLost,
        Some("LeaseIsBreakingAndCannotBeChanged"),
    );
    // The holder can still write during the break period.
    b.set_blob_metadata(&c, &x, &Metadata::new(), &BlobConditions::leased(holder))
        .await
        .unwrap();

    // Broken (break again with period 0): renew fails; writes under the old
    // id fail; anyone can acquire.
    let left = b
        .lease(&c, &x, break_after(Some(Duration::ZERO)))
        .await
        .unwrap();
    assert_eq!(left, LeaseReply::Broken(Duration::ZERO));
    let props = b.blob_properties(&c, &x).await.unwrap().unwrap();
    assert_eq!(props.lease.state, LeaseState::Broken);
    let e = b.lease(&c, &x, Renew(holder)).await.unwrap_err();
    assert_kind(
        &e,
        ErrorKind::LeaseLost,
        Some("LeaseIsBrokenAndCannotBeRenewed"),
    );
    let e = b
        .put_blob(
            &c,
            &x,
            body(),
            &Metadata::new(),
            &BlobConditions::leased(holder),
        )
        .await
        .unwrap_err();
    assert_kind(
        &e,
        ErrorKind::LeaseLost,
        Some("LeaseNotPresentWithBlobOperation"),
    );
    b.lease(&c, &x, acquire(LeaseDuration::Infinite, other))
        .await
        .unwrap();
    // The old holder's release now meets another's lease.
    let e = b.lease(&c, &x, Release(holder)).await.unwrap_err();
    assert_kind(
        &e,
        ErrorKind::LeaseLost,
        Some("LeaseIdMismatchWithLeaseOperation"),
    );

    // Break without a period breaks an infinite lease at once.
    let left = b.lease(&c, &x, break_after(None)).await.unwrap();
    assert_eq!(left, LeaseReply::Broken(Duration::ZERO));
    assert_eq!(
        b.blob_properties(&c, &x)
            .await
            .unwrap()
            .unwrap()
            .lease
            .state,
        LeaseState::Broken
    );
}
