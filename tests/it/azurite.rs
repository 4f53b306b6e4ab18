//! The conformance suite (the backend contract and the library check) and
//! the library's own checks (`checks`) on a real Azurite (started by
//! `scripts/with-azurite.sh`; required when `CI` is set), timed checks in
//! real time with 15 s leases. `oauth`: the conformance suite and the
//! checks marked `(oauth)` on the HTTPS Azurite with OAuth, signed in with
//! tokens.

use leasehold::testing::conformance;

use crate::support;

mod fenced_leader;
mod oauth;
mod txn_deadline;

leasehold::conformance_suite!(real: support::azurite_backend());
crate::checks::all!(azurite);

fn azurite_ctx() -> Option<conformance::Ctx> {
    support::azurite_backend().map(|b| conformance::Ctx::new(b, conformance::Clock::Real))
}

crate::emulator_suite!(azurite_ctx(), crate::emulator::Target::Azurite);
crate::transfer_suite!(azurite_ctx(), crate::emulator::Target::Azurite);

/// An over-long filter is refused before the transport is asked to send
/// anything (it used to be retried for about 5 s and end as `Transient`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_long_filters_send_no_request_on_azurite() {
    let Some(cs) = support::azurite::azurite_connection_string() else {
        return;
    };
    let plan = leasehold::testing::FaultInjector::default();
    let backend = leasehold::backend::azure::AzureBackend::builder()
        .connection_string(&cs)
        .unwrap()
        .policy(plan.transport_policy())
        .build()
        .unwrap();
    let store = leasehold::Store::builder(backend)
        .table_prefix(prefix())
        .unwrap()
        .build()
        .unwrap();
    crate::emulator::over_long_filters_send_no_request(&store, || plan.requests()).await;
}

crate::emulator_timed_suite!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    azurite_ctx(),
    crate::emulator::Target::Azurite
);

fn prefix() -> String {
    format!("z{}", &uuid::Uuid::new_v4().simple().to_string()[..10])
}
