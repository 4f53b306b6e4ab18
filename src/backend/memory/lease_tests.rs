//! Unit tests of the memory backend's lease state machine, timed to the
//! millisecond on paused Tokio time: when a lease expires, how renewals,
//! changes and breaks move its deadline. The conformance suite checks the
//! same transitions, and their error codes, on every backend
//! (`testing::conformance::blobs` and `timed`).

use crate::backend::{LeaseCalls as _, LeaseKind};
use std::time::Duration;

use tokio::time::advance;

use super::MemoryBackend;
use super::blob_tests::{assert_service_error, blob, meta, setup};
use crate::backend::{
    BlobBackend, BlobConditions, LeaseDuration, LeaseId, LeaseInfo, LeaseState, Metadata,
};
use crate::error::ErrorKind;
use crate::key::{BlobName, ContainerName};

const SECS_15: LeaseDuration = LeaseDuration::Seconds(15);
const SECS_30: LeaseDuration = LeaseDuration::Seconds(30);
const SECS_60: LeaseDuration = LeaseDuration::Seconds(60);

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

struct Fixture {
    m: MemoryBackend,
    c: ContainerName,
    b: BlobName,
}

impl Fixture {
    async fn new() -> Self {
        let (m, c, b, _) = setup().await;
        Fixture { m, c, b }
    }

    async fn lease(&self) -> LeaseInfo {
        self.m
            .blob_properties(&self.c, &self.b)
            .await
            .unwrap()
            .unwrap()
            .lease
    }

    async fn state(&self) -> LeaseState {
        self.lease().await.state
    }

    async fn acquire(&self, d: LeaseDuration, id: LeaseId) -> crate::Result<LeaseId> {
        self.m
            .acquire_lease(&self.c, &self.b, d, id)
            .await
            .map(|_| id)
    }

    async fn renew(&self, id: LeaseId) -> crate::Result<()> {
        self.m.renew_lease(&self.c, &self.b, id).await
    }

    async fn change(&self, id: LeaseId, to: LeaseId) -> crate::Result<LeaseId> {
        self.m.change_lease(&self.c, &self.b, id, to).await
    }

    async fn release(&self, id: LeaseId) -> crate::Result<()> {
        self.m.release_lease(&self.c, &self.b, id).await
    }

    async fn break_lease(&self, period: Option<Duration>) -> crate::Result<Duration> {
        self.m.break_lease(&self.c, &self.b, period).await
    }

    async fn write(&self, lease: Option<LeaseId>) -> crate::Result<()> {
        let conditions = BlobConditions {
            lease_id: lease,
            ..BlobConditions::default()
        };
        self.m
            .set_blob_metadata(&self.c, &self.b, &meta(&[("w", "1")]), &conditions)
            .await
            .map(|_| ())
    }
}

fn expect_err(r: crate::Result<impl std::fmt::Debug>, kind: ErrorKind, code: &str) {
    match r {
        Ok(v) => panic!("expected {code}, got Ok({v:?})"),
        Err(e) => assert_service_error(&e, kind, code),
    }
}

fn not_present<T: std::fmt::Debug>(r: crate::Result<T>) {
    expect_err(r, ErrorKind::LeaseLost, "LeaseNotPresentWithLeaseOperation");
}

fn mismatch<T: std::fmt::Debug>(r: crate::Result<T>) {
    expect_err(r, ErrorKind::LeaseLost, "LeaseIdMismatchWithLeaseOperation");
}

// ---------------------------------------------------------------------------
// Durations and periods
// ---------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn durations_outside_15_to_60_seconds_are_invalid() {
    let f = Fixture::new().await;
    for bad in [0, 1, 14, 61, 255] {
        let e = f
            .acquire(LeaseDuration::Seconds(bad), LeaseId::new_random())
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    }
    assert_eq!(f.state().await, LeaseState::Available);
    f.acquire(LeaseDuration::Seconds(60), LeaseId::new_random())
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn break_periods_outside_0_to_60_seconds_are_invalid() {
    let f = Fixture::new().await;
    f.acquire(LeaseDuration::Infinite, LeaseId::new_random())
        .await
        .unwrap();
    for bad in [secs(61), secs(3600), Duration::from_millis(1500)] {
        let e = f.break_lease(Some(bad)).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    }
    assert_eq!(f.state().await, LeaseState::Leased);
}

// ---------------------------------------------------------------------------
// Available
// ---------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn available_allows_only_acquire() {
    let f = Fixture::new().await;
    let a = LeaseId::new_random();
    assert_eq!(
        f.lease().await,
        LeaseInfo {
            state: LeaseState::Available,
            kind: None
        }
    );
    not_present(f.renew(a).await);
    not_present(f.change(a, LeaseId::new_random()).await);
    not_present(f.release(a).await);
    not_present(f.break_lease(None).await);
    not_present(f.break_lease(Some(secs(0))).await);
    assert_eq!(f.acquire(SECS_30, a).await.unwrap(), a);
    assert_eq!(
        f.lease().await,
        LeaseInfo {
            state: LeaseState::Leased,
            kind: Some(LeaseKind::Fixed)
        }
    );
    assert!(f.lease().await.is_locked());
}

// ---------------------------------------------------------------------------
// Leased
// ---------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn acquire_with_the_current_id_succeeds_and_restarts_the_duration() {
    let f = Fixture::new().await;
    let a = LeaseId::new_random();
    f.acquire(SECS_30, a).await.unwrap();
    advance(secs(20)).await;
    assert_eq!(f.acquire(SECS_30, a).await.unwrap(), a);
    advance(secs(20)).await;
    assert_eq!(f.state().await, LeaseState::Leased);
    advance(secs(10)).await;
    assert_eq!(f.state().await, LeaseState::Expired);
    // The retry may also change the duration.
    f.acquire(LeaseDuration::Infinite, a).await.unwrap();
    f.acquire(SECS_15, a).await.unwrap();
    assert_eq!(f.lease().await.kind, Some(LeaseKind::Fixed));
}

#[tokio::test(start_paused = true)]
async fn renew_restarts_the_duration() {
    let f = Fixture::new().await;
    let a = LeaseId::new_random();
    f.acquire(SECS_15, a).await.unwrap();
    for _ in 0..5 {
        advance(secs(14)).await;
        f.renew(a).await.unwrap();
    }
    advance(secs(14)).await;
    assert_eq!(f.state().await, LeaseState::Leased);
    advance(secs(1)).await;
    assert_eq!(f.state().await, LeaseState::Expired);
}

#[tokio::test(start_paused = true)]
async fn an_infinite_lease_never_expires_and_renews() {
    let f = Fixture::new().await;
    let a = LeaseId::new_random();
    f.acquire(LeaseDuration::Infinite, a).await.unwrap();
    advance(secs(24 * 3600)).await;
    assert_eq!(
        f.lease().await,
        LeaseInfo {
            state: LeaseState::Leased,
            kind: Some(LeaseKind::Infinite)
        }
    );
    f.renew(a).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn change_moves_the_lease_to_the_new_id_and_keeps_its_expiry() {
    let f = Fixture::new().await;
    let a = LeaseId::new_random();
    let b = LeaseId::new_random();
    let c = LeaseId::new_random();
    f.acquire(SECS_30, a).await.unwrap();
    advance(secs(10)).await;
    assert_eq!(f.change(a, b).await.unwrap(), b);
    // The old id is no longer the lease.
    mismatch(f.renew(a).await);
    expect_err(
        f.write(Some(a)).await,
        ErrorKind::LeaseLost,
        "LeaseIdMismatchWithBlobOperation",
    );
    // A retried change (from the old id to the id it now has) succeeds.
    assert_eq!(f.change(a, b).await.unwrap(), b);
    // From neither id: mismatch.
    mismatch(f.change(c, a).await);
    f.write(Some(b)).await.unwrap();
    // Change does not renew: the lease still ends 30 s after acquire.
    advance(secs(19)).await;
    assert_eq!(f.state().await, LeaseState::Leased);
    advance(secs(1)).await;
    assert_eq!(f.state().await, LeaseState::Expired);
}

#[tokio::test(start_paused = true)]
async fn release_makes_the_blob_available_at_once() {
    let f = Fixture::new().await;
    let a = LeaseId::new_random();
    f.acquire(SECS_60, a).await.unwrap();
    f.release(a).await.unwrap();
    assert_eq!(f.state().await, LeaseState::Available);
    not_present(f.release(a).await);
    not_present(f.renew(a).await);
    let b = LeaseId::new_random();
    f.acquire(SECS_30, b).await.unwrap();
    f.write(None).await.unwrap_err();
}

// ---------------------------------------------------------------------------
// Expired
// ---------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_timed_lease_expires_at_its_duration() {
    let f = Fixture::new().await;
    f.acquire(SECS_15, LeaseId::new_random()).await.unwrap();
    advance(Duration::from_millis(14_999)).await;
    assert_eq!(f.state().await, LeaseState::Leased);
    advance(Duration::from_millis(1)).await;
    assert_eq!(
        f.lease().await,
        LeaseInfo {
            state: LeaseState::Expired,
            kind: None
        }
    );
    assert!(!f.lease().await.is_locked());
}

#[tokio::test(start_paused = true)]
async fn an_expired_lease_can_be_renewed_by_its_holder_if_untouched() {
    let f = Fixture::new().await;
    let a = LeaseId::new_random();
    f.acquire(SECS_15, a).await.unwrap();
    advance(secs(100)).await;
    mismatch(f.renew(LeaseId::new_random()).await);
    f.renew(a).await.unwrap();
    assert_eq!(
        f.lease().await,
        LeaseInfo {
            state: LeaseState::Leased,
            kind: Some(LeaseKind::Fixed)
        }
    );
    advance(secs(14)).await;
    assert_eq!(f.state().await, LeaseState::Leased);
}

#[tokio::test(start_paused = true)]
async fn an_expired_lease_cannot_be_renewed_after_another_acquire() {
    let f = Fixture::new().await;
    let a = LeaseId::new_random();
    let b = LeaseId::new_random();
    f.acquire(SECS_15, a).await.unwrap();
    advance(secs(15)).await;
    f.acquire(SECS_30, b).await.unwrap();
    mismatch(f.renew(a).await);
    mismatch(f.release(a).await);
    assert_eq!(f.state().await, LeaseState::Leased);
}

#[tokio::test(start_paused = true)]
async fn an_expired_lease_is_forgotten_when_the_blob_is_written() {
    let f = Fixture::new().await;
    let a = LeaseId::new_random();
    f.acquire(SECS_15, a).await.unwrap();
    advance(secs(15)).await;
    // Writing under the expired lease id is refused...
    expect_err(
        f.write(Some(a)).await,
        ErrorKind::LeaseLost,
        "LeaseNotPresentWithBlobOperation",
    );
    assert_eq!(f.state().await, LeaseState::Expired);
    // ...a write without one succeeds and ends the lease for good.
    f.write(None).await.unwrap();
    assert_eq!(f.state().await, LeaseState::Available);
    not_present(f.renew(a).await);
    not_present(f.release(a).await);
}

#[tokio::test(start_paused = true)]
async fn an_expired_lease_can_be_released_once() {
    let f = Fixture::new().await;
    let a = LeaseId::new_random();
    f.acquire(SECS_15, a).await.unwrap();
    advance(secs(30)).await;
    mismatch(f.release(LeaseId::new_random()).await);
    f.release(a).await.unwrap();
    assert_eq!(f.state().await, LeaseState::Available);
    not_present(f.release(a).await);
}

#[tokio::test(start_paused = true)]
async fn an_expired_lease_can_be_acquired_by_anyone_but_not_changed() {
    let f = Fixture::new().await;
    let a = LeaseId::new_random();
    f.acquire(SECS_15, a).await.unwrap();
    advance(secs(15)).await;
    not_present(f.change(a, LeaseId::new_random()).await);
    let b = LeaseId::new_random();
    f.acquire(SECS_30, b).await.unwrap();
    f.write(Some(b)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn breaking_an_expired_lease_breaks_it_at_once() {
    let f = Fixture::new().await;
    let a = LeaseId::new_random();
    f.acquire(SECS_15, a).await.unwrap();
    advance(secs(15)).await;
    assert_eq!(f.break_lease(Some(secs(30))).await.unwrap(), Duration::ZERO);
    assert_eq!(f.state().await, LeaseState::Broken);
}

// ---------------------------------------------------------------------------
// Break and Breaking
// ---------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn break_without_period_lets_a_timed_lease_run_out() {
    let f = Fixture::new().await;
    let a = LeaseId::new_random();
    f.acquire(SECS_30, a).await.unwrap();
    advance(secs(10)).await;
    assert_eq!(f.break_lease(None).await.unwrap(), secs(20));
    assert_eq!(
        f.lease().await,
        LeaseInfo {
            state: LeaseState::Breaking,
            kind: None
        }
    );
    assert!(f.lease().await.is_locked());
    advance(secs(19)).await;
    assert_eq!(f.state().await, LeaseState::Breaking);
    advance(secs(1)).await;
    assert_eq!(f.state().await, LeaseState::Broken);
}

#[tokio::test(start_paused = true)]
async fn break_without_period_breaks_an_infinite_lease_at_once() {
    let f = Fixture::new().await;
    f.acquire(LeaseDuration::Infinite, LeaseId::new_random())
        .await
        .unwrap();
    assert_eq!(f.break_lease(None).await.unwrap(), Duration::ZERO);
    assert_eq!(f.state().await, LeaseState::Broken);
}

#[tokio::test(start_paused = true)]
async fn break_period_never_outlasts_the_lease() {
    let f = Fixture::new().await;
    f.acquire(SECS_15, LeaseId::new_random()).await.unwrap();
    advance(secs(5)).await;
    assert_eq!(f.break_lease(Some(secs(60))).await.unwrap(), secs(10));
    assert_eq!(f.state().await, LeaseState::Breaking);
    advance(secs(10)).await;
    assert_eq!(f.state().await, LeaseState::Broken);
}

#[tokio::test(start_paused = true)]
async fn break_with_period_zero_breaks_at_once() {
    let f = Fixture::new().await;
    f.acquire(SECS_30, LeaseId::new_random()).await.unwrap();
    assert_eq!(f.break_lease(Some(secs(0))).await.unwrap(), Duration::ZERO);
    assert_eq!(f.state().await, LeaseState::Broken);
}

#[tokio::test(start_paused = true)]
async fn breaking_again_can_shorten_but_never_extend_the_break() {
    let f = Fixture::new().await;
    f.acquire(LeaseDuration::Infinite, LeaseId::new_random())
        .await
        .unwrap();
    assert_eq!(f.break_lease(Some(secs(40))).await.unwrap(), secs(40));
    advance(secs(10)).await;
    assert_eq!(f.break_lease(Some(secs(60))).await.unwrap(), secs(30));
    assert_eq!(f.break_lease(None).await.unwrap(), secs(30));
    assert_eq!(f.break_lease(Some(secs(5))).await.unwrap(), secs(5));
    advance(secs(5)).await;
    assert_eq!(f.state().await, LeaseState::Broken);

    let g = Fixture::new().await;
    g.acquire(LeaseDuration::Infinite, LeaseId::new_random())
        .await
        .unwrap();
    g.break_lease(Some(secs(40))).await.unwrap();
    assert_eq!(g.break_lease(Some(secs(0))).await.unwrap(), Duration::ZERO);
    assert_eq!(g.state().await, LeaseState::Broken);
}

#[tokio::test(start_paused = true)]
async fn a_breaking_lease_refuses_acquire_renew_and_change() {
    let f = Fixture::new().await;
    let a = LeaseId::new_random();
    let b = LeaseId::new_random();
    f.acquire(LeaseDuration::Infinite, a).await.unwrap();
    f.break_lease(Some(secs(30))).await.unwrap();
    expect_err(
        f.acquire(SECS_30, a).await,
        ErrorKind::LeaseHeld,
        "LeaseIsBreakingAndCannotBeAcquired",
    );
    expect_err(
        f.acquire(SECS_30, b).await,
        ErrorKind::LeaseHeld,
        "LeaseAlreadyPresent",
    );
    expect_err(
        f.renew(a).await,
        ErrorKind::LeaseLost,
        "LeaseIsBrokenAndCannotBeRenewed",
    );
    mismatch(f.renew(b).await);
    expect_err(
        f.change(a, b).await,
        ErrorKind::LeaseLost,
        "LeaseIsBreakingAndCannotBeChanged",
    );
    mismatch(f.change(b, a).await);
    mismatch(f.release(b).await);
    assert_eq!(f.state().await, LeaseState::Breaking);
}

#[tokio::test(start_paused = true)]
async fn the_holder_keeps_writing_while_the_lease_breaks() {
    let f = Fixture::new().await;
    let a = LeaseId::new_random();
    f.acquire(LeaseDuration::Infinite, a).await.unwrap();
    f.break_lease(Some(secs(10))).await.unwrap();
    f.write(Some(a)).await.unwrap();
    assert_eq!(f.state().await, LeaseState::Breaking);
    expect_err(f.write(None).await, ErrorKind::LeaseHeld, "LeaseIdMissing");
    expect_err(
        f.write(Some(LeaseId::new_random())).await,
        ErrorKind::LeaseLost,
        "LeaseIdMismatchWithBlobOperation",
    );
    advance(secs(10)).await;
    expect_err(
        f.write(Some(a)).await,
        ErrorKind::LeaseLost,
        "LeaseNotPresentWithBlobOperation",
    );
}

#[tokio::test(start_paused = true)]
async fn a_breaking_lease_can_be_released() {
    let f = Fixture::new().await;
    let a = LeaseId::new_random();
    f.acquire(LeaseDuration::Infinite, a).await.unwrap();
    f.break_lease(Some(secs(30))).await.unwrap();
    f.release(a).await.unwrap();
    assert_eq!(f.state().await, LeaseState::Available);
    f.acquire(SECS_30, LeaseId::new_random()).await.unwrap();
}

// ---------------------------------------------------------------------------
// Broken
// ---------------------------------------------------------------------------

async fn broken() -> (Fixture, LeaseId) {
    let f = Fixture::new().await;
    let a = LeaseId::new_random();
    f.acquire(SECS_30, a).await.unwrap();
    f.break_lease(Some(secs(0))).await.unwrap();
    (f, a)
}

#[tokio::test(start_paused = true)]
async fn a_broken_lease_refuses_renew_and_change() {
    let (f, a) = broken().await;
    expect_err(
        f.renew(a).await,
        ErrorKind::LeaseLost,
        "LeaseIsBrokenAndCannotBeRenewed",
    );
    mismatch(f.renew(LeaseId::new_random()).await);
    not_present(f.change(a, LeaseId::new_random()).await);
    mismatch(f.release(LeaseId::new_random()).await);
    assert_eq!(f.break_lease(None).await.unwrap(), Duration::ZERO);
    assert_eq!(f.break_lease(Some(secs(30))).await.unwrap(), Duration::ZERO);
    assert_eq!(
        f.lease().await,
        LeaseInfo {
            state: LeaseState::Broken,
            kind: None
        }
    );
    // Unlocked: anyone writes, and a lease id is refused.
    expect_err(
        f.write(Some(a)).await,
        ErrorKind::LeaseLost,
        "LeaseNotPresentWithBlobOperation",
    );
}

#[tokio::test(start_paused = true)]
async fn a_broken_lease_can_be_released_by_its_holder() {
    let (f, a) = broken().await;
    f.release(a).await.unwrap();
    assert_eq!(f.state().await, LeaseState::Available);
}

#[tokio::test(start_paused = true)]
async fn a_broken_lease_can_be_acquired_by_anyone() {
    let (f, a) = broken().await;
    f.acquire(SECS_30, a).await.unwrap();
    assert_eq!(f.state().await, LeaseState::Leased);
    let (g, _) = broken().await;
    let b = LeaseId::new_random();
    g.acquire(LeaseDuration::Infinite, b).await.unwrap();
    g.write(Some(b)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_write_forgets_a_broken_lease() {
    let (f, a) = broken().await;
    f.write(None).await.unwrap();
    assert_eq!(f.state().await, LeaseState::Available);
    not_present(f.release(a).await);
}

// ---------------------------------------------------------------------------
// A lease protects one blob only; put keeps the lease.
// ---------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_put_under_the_lease_keeps_the_lease_and_its_expiry() {
    let f = Fixture::new().await;
    let a = LeaseId::new_random();
    f.acquire(SECS_30, a).await.unwrap();
    advance(secs(20)).await;
    f.m.put_blob(
        &f.c,
        &f.b,
        b"journal".to_vec(),
        &Metadata::new(),
        &BlobConditions::leased(a),
    )
    .await
    .unwrap();
    assert_eq!(f.state().await, LeaseState::Leased);
    advance(secs(10)).await;
    assert_eq!(f.state().await, LeaseState::Expired);
    let other = blob("other");
    f.m.put_blob(
        &f.c,
        &other,
        vec![],
        &Metadata::new(),
        &BlobConditions::none(),
    )
    .await
    .unwrap();
    let p = f.m.blob_properties(&f.c, &other).await.unwrap().unwrap();
    assert_eq!(p.lease.state, LeaseState::Available);
}
