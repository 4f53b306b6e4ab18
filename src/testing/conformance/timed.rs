//! Lease transitions that need time to pass: expiry, renewal after expiry,
//! release after expiry, the end of a break period. The memory backend runs
//! them with paused Tokio time; Azurite in real time (about 16 s each, in
//! parallel).

use std::time::Duration;

use leasehold::ErrorKind;
use leasehold::backend::LeaseAction::{Release, Renew};
use leasehold::backend::{BlobConditions, LeaseDuration, LeaseId, LeaseState, Metadata};
use leasehold::key::BlobName;

use super::{Ctx, acquire, break_after, time_left};

/// Just past the shortest lease.
const PAST_EXPIRY: Duration = Duration::from_millis(16_500);

async fn leased(ctx: &Ctx, name: &str) -> (BlobName, LeaseId) {
    let (be, c) = (ctx.backend(), &ctx.container);
    let b = BlobName::new(name).unwrap();
    be.create_container(c).await.unwrap();
    be.put_blob(c, &b, vec![1], &Metadata::new(), &BlobConditions::none())
        .await
        .unwrap();
    let id = LeaseId::new_random();
    be.lease(c, &b, acquire(LeaseDuration::Seconds(15), id))
        .await
        .unwrap();
    (b, id)
}

async fn state(ctx: &Ctx, b: &BlobName) -> LeaseState {
    ctx.backend()
        .blob_properties(&ctx.container, b)
        .await
        .unwrap()
        .unwrap()
        .lease
        .state
}

/// An expired lease can be taken by another.
pub async fn an_expired_lease_can_be_taken_by_another(ctx: &Ctx) {
    let (be, c) = (ctx.backend(), &ctx.container);
    let (b, old) = leased(ctx, "expire").await;
    tokio::time::sleep(PAST_EXPIRY).await;
    assert_eq!(state(ctx, &b).await, LeaseState::Expired);
    // Writes under the expired lease are refused.
    let e = be
        .put_blob(
            c,
            &b,
            vec![2],
            &Metadata::new(),
            &BlobConditions::leased(old),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LeaseLost);
    assert_eq!(e.code(), Some("LeaseNotPresentWithBlobOperation"));
    let new = LeaseId::new_random();
    be.lease(c, &b, acquire(LeaseDuration::Seconds(15), new))
        .await
        .expect("anyone may take an expired lease");
    let e = be.lease(c, &b, Renew(old)).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LeaseLost);
    assert_eq!(e.code(), Some("LeaseIdMismatchWithLeaseOperation"));
}

/// An expired lease can be renewed by its holder.
pub async fn an_expired_lease_can_be_renewed_by_its_holder(ctx: &Ctx) {
    let (b, id) = leased(ctx, "renewexpired").await;
    tokio::time::sleep(PAST_EXPIRY).await;
    ctx.backend()
        .lease(&ctx.container, &b, Renew(id))
        .await
        .expect("nobody took it and the blob was not written");
    assert_eq!(state(ctx, &b).await, LeaseState::Leased);
}

/// An expired lease can be released.
pub async fn an_expired_lease_can_be_released(ctx: &Ctx) {
    let (b, id) = leased(ctx, "releaseexpired").await;
    tokio::time::sleep(PAST_EXPIRY).await;
    ctx.backend()
        .lease(&ctx.container, &b, Release(id))
        .await
        .expect("releasing an expired lease succeeds");
    assert_eq!(state(ctx, &b).await, LeaseState::Available);
}

/// A break period ends in broken.
pub async fn a_break_period_ends_in_broken(ctx: &Ctx) {
    let (be, c) = (ctx.backend(), &ctx.container);
    let (b, id) = leased(ctx, "breakperiod").await;
    let left = time_left(
        be.lease(c, &b, break_after(Some(Duration::from_secs(2))))
            .await
            .unwrap(),
    );
    assert!(left <= Duration::from_secs(2), "{left:?}");
    assert_eq!(state(ctx, &b).await, LeaseState::Breaking);
    // The holder may still write during the break period.
    be.put_blob(
        c,
        &b,
        vec![3],
        &Metadata::new(),
        &BlobConditions::leased(id),
    )
    .await
    .expect("writes under a breaking lease");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(state(ctx, &b).await, LeaseState::Broken);
    let e = be.lease(c, &b, Renew(id)).await.unwrap_err();
    assert_eq!(e.code(), Some("LeaseIsBrokenAndCannotBeRenewed"));
    be.lease(
        c,
        &b,
        acquire(LeaseDuration::Seconds(15), LeaseId::new_random()),
    )
    .await
    .expect("anyone may take a broken lease");
}

/// A timed lease broken without period runs out.
pub async fn a_timed_lease_broken_without_period_runs_out(ctx: &Ctx) {
    let be = ctx.backend();
    let (b, _) = leased(ctx, "breaknone").await;
    let left = time_left(
        be.lease(&ctx.container, &b, break_after(None))
            .await
            .unwrap(),
    );
    assert!(
        left > Duration::from_secs(10) && left <= Duration::from_secs(15),
        "{left:?}"
    );
    assert_eq!(state(ctx, &b).await, LeaseState::Breaking);
    tokio::time::sleep(PAST_EXPIRY).await;
    assert_eq!(state(ctx, &b).await, LeaseState::Broken);
}

/// An expired lease: not locked, writes under its id fail, its holder can
/// renew it while nobody took it and the blob was not written, and it can
/// be released once, after which anyone can acquire.
pub async fn an_expired_lease_can_be_renewed_by_its_holder_until_someone_takes_it(ctx: &Ctx) {
    let b = ctx.backend().clone();
    let c = ctx.container.clone();
    let x = leased_blob(ctx, "x").await;
    let y = leased_blob(ctx, "y").await;
    let holder = LeaseId::new_random();
    b.lease(&c, &x, acquire(LeaseDuration::Seconds(15), holder))
        .await
        .unwrap();
    let holder_y = LeaseId::new_random();
    b.lease(&c, &y, acquire(LeaseDuration::Seconds(15), holder_y))
        .await
        .unwrap();
    tokio::time::sleep(PAST_EXPIRY).await;

    let props = b.blob_properties(&c, &x).await.unwrap().unwrap();
    assert_eq!(props.lease.state, LeaseState::Expired);
    assert!(!props.lease.is_locked());
    // A write under the expired lease id fails.
    let e = b
        .put_blob(
            &c,
            &x,
            b"w".to_vec(),
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
    // Nobody took it and the blob was not written: the holder can renew.
    b.lease(&c, &x, Renew(holder)).await.unwrap();
    assert_eq!(
        b.blob_properties(&c, &x)
            .await
            .unwrap()
            .unwrap()
            .lease
            .state,
        LeaseState::Leased
    );
    b.lease(&c, &x, Release(holder)).await.unwrap();

    // Releasing an expired lease succeeds (once); then another can acquire.
    b.lease(&c, &y, Release(holder_y)).await.unwrap();
    let e = b.lease(&c, &y, Release(holder_y)).await.unwrap_err();
    assert_no_lease_for_lease_op(&e);
    b.lease(
        &c,
        &y,
        acquire(LeaseDuration::Infinite, LeaseId::new_random()),
    )
    .await
    .unwrap();
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

fn assert_kind(e: &leasehold::Error, kind: ErrorKind, code: Option<&str>) {
    assert_eq!(e.kind(), kind, "{e:?}");
    if let Some(code) = code {
        assert_eq!(e.code(), Some(code), "{e:?}");
    }
}

/// See [`blobs`](super::blobs): Azure and Azurite answer a lease operation
/// on a blob without a lease with different codes, both `LeaseLost`.
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
