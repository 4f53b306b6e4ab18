//! The library's own behaviour checks: typed tables, entity mapping, the
//! lease manager and its fairness, unique indexes, partition locks (one
//! partition, several, commits too big for one transaction), transactions,
//! reads beside unfinished commits, operators' views of commits, fenced
//! writes, purges, the sweep and expiry.
//!
//! Each check is an async function over a
//! [`Ctx`](leasehold::testing::conformance::Ctx) (a store on a fresh
//! namespace of the backend, and how time passes for it), written once in
//! a [`checks!`] block of its module, which also says how it runs:
//!
//! * `plain`: no waits; one test per backend, on a two-thread runtime
//!   (on a real service in one of the few turns of [`Ctx::busy_turn`]).
//! * `timed`: waits for leases to run out or renewals: on paused Tokio time
//!   on the memory backend, in real time (15 s leases) on Azurite.
//! * `blocking`: a synchronous test, outside any runtime.
//!
//! A kind marked `(oauth)` (`plain(oauth)`, `timed(oauth)`) also runs on
//! the OAuth Azurite, signed in with tokens.
//!
//! The backend files run every module: `memory.rs` (`memory::<module>::<check>`),
//! `azurite.rs` (`azurite::<module>::<check>`) and `azurite/oauth.rs`
//! (`azurite::oauth::<module>::<check>`), each through [`all!`] with a
//! `conformance_ctx()` of its own beside it. The checks use only
//! leasehold's public API (and [`ambiguous`], a backend wrapper the
//! conformance feature keeps for them).

use std::sync::Arc;
use std::time::Duration;

use leasehold::Store;
use leasehold::backend::Backend;
pub(crate) use leasehold::testing::conformance::ambiguous;
pub(crate) use leasehold::testing::conformance::{Clock, Ctx};

/// Defines the checks of one module and how each runs. Every check is
/// `<kind> async fn <name>(ctx) { .. }` (`blocking fn` for a blocking
/// one), `<kind>` one of `plain`, `timed`, `blocking`, optionally followed
/// by `(oauth)`; other items pass through unchanged. Beside the checks it
/// defines `for_each_check!(memory | azurite | oauth)`, which [`all!`]
/// expands to one test per check on that backend.
macro_rules! checks {
    (@munch [$($done:tt)*]) => {
        macro_rules! for_each_check {
            (memory) => { $crate::checks::tests!(memory; $($done)*); };
            (azurite) => { $crate::checks::tests!(azurite; $($done)*); };
            (oauth) => { $crate::checks::tests!(oauth; $($done)*); };
        }
        pub(crate) use for_each_check;
    };
    (@munch [$($done:tt)*]
        $(#[$attr:meta])* plain $(($tag:ident))? async fn $name:ident($ctx:ident) $body:block
        $($rest:tt)*
    ) => {
        $(#[$attr])*
        pub(crate) async fn $name($ctx: &$crate::checks::Ctx) $body
        $crate::checks::checks!(@munch [$($done)* (plain $name [$($tag)?])] $($rest)*);
    };
    (@munch [$($done:tt)*]
        $(#[$attr:meta])* timed $(($tag:ident))? async fn $name:ident($ctx:ident) $body:block
        $($rest:tt)*
    ) => {
        $(#[$attr])*
        pub(crate) async fn $name($ctx: &$crate::checks::Ctx) $body
        $crate::checks::checks!(@munch [$($done)* (timed $name [$($tag)?])] $($rest)*);
    };
    (@munch [$($done:tt)*]
        $(#[$attr:meta])* blocking $(($tag:ident))? fn $name:ident($ctx:ident) $body:block
        $($rest:tt)*
    ) => {
        $(#[$attr])*
        pub(crate) fn $name($ctx: &$crate::checks::Ctx) $body
        $crate::checks::checks!(@munch [$($done)* (blocking $name [$($tag)?])] $($rest)*);
    };
    (@munch [$($done:tt)*] $item:item $($rest:tt)*) => {
        $item
        $crate::checks::checks!(@munch [$($done)*] $($rest)*);
    };
    ($($items:tt)*) => {
        $crate::checks::checks!(@munch [] $($items)*);
    };
}
pub(crate) use checks;

/// One test per check of a module on a backend (`memory`: timed checks on
/// paused time; `azurite`: real time; `oauth`: only the checks marked
/// `(oauth)`, real time), each on a fresh context from the
/// `conformance_ctx()` of the backend's module (`None` skips the check).
/// The module of the checks is `check` where it expands.
macro_rules! tests {
    ($backend:ident; $(($kind:ident $name:ident [$($tag:ident)?]))*) => {
        $( $crate::checks::tests!(@one $backend $kind $name [$($tag)?]); )*
    };
    (@one oauth $kind:ident $name:ident []) => {};
    (@one $backend:ident plain $name:ident [$($tag:ident)?]) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            let Some(ctx) = super::conformance_ctx() else { return };
            let _turn = ctx.busy_turn().await;
            check::$name(&ctx).await;
        }
    };
    (@one memory timed $name:ident [$($tag:ident)?]) => {
        #[tokio::test(start_paused = true)]
        async fn $name() {
            let Some(ctx) = super::conformance_ctx() else { return };
            check::$name(&ctx).await;
        }
    };
    (@one $backend:ident timed $name:ident [$($tag:ident)?]) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            let Some(ctx) = super::conformance_ctx() else { return };
            check::$name(&ctx).await;
        }
    };
    (@one $backend:ident blocking $name:ident [$($tag:ident)?]) => {
        #[test]
        fn $name() {
            let Some(ctx) = super::conformance_ctx() else { return };
            check::$name(&ctx);
        }
    };
}
pub(crate) use tests;

/// Every module's checks on `backend` (`memory`, `azurite` or `oauth`), in
/// modules named after the check modules, beside a `conformance_ctx()`.
macro_rules! all {
    ($backend:ident) => {
        $crate::checks::all!(@modules $backend:
            tables mapping lease fairness indexes lock lock_many big_commits
            txn reads commits fence purge sweep expiry);
    };
    (@modules $backend:ident: $($module:ident)*) => {
        $(
            mod $module {
                #[allow(unused_imports)]
                use $crate::checks::$module as check;
                $crate::checks::$module::for_each_check!($backend);
            }
        )*
    };
}
pub(crate) use all;

pub(crate) mod big_commits;
pub(crate) mod commits;
mod entities;
pub(crate) mod expiry;
pub(crate) mod fairness;
pub(crate) mod fence;
pub(crate) mod indexes;
pub(crate) mod lease;
pub(crate) mod lock;
pub(crate) mod lock_many;
pub(crate) mod mapping;
pub(crate) mod purge;
pub(crate) mod reads;
pub(crate) mod sweep;
pub(crate) mod tables;
pub(crate) mod txn;

/// Every row stored in the tables whose names start with `prefix`, read
/// through `backend` (which resolves no mark), with the table each is in.
pub(crate) async fn stored_rows(
    backend: &Arc<dyn Backend>,
    prefix: &str,
) -> Vec<(leasehold::TableName, leasehold::backend::StoredEntity)> {
    use leasehold::backend::QuerySpec;
    let mut rows = Vec::new();
    for table in backend.list_tables().await.expect("tables listed") {
        if !table.as_str().starts_with(prefix) {
            continue;
        }
        let mut spec = QuerySpec::default();
        loop {
            let page = backend.query(&table, &spec).await.expect("table read");
            rows.extend(page.entities.into_iter().map(|r| (table.clone(), r)));
            match page.continuation {
                Some(next) => spec.continuation = Some(next),
                None => break,
            }
        }
    }
    rows
}

/// Waits until what a commit sends behind its answer (a unit's or a
/// transaction's finishing and its decision row's delete) has gone out:
/// until no request of `counter` is in flight and none was sent for 100 ms,
/// twice in a row (a busy machine can hold a task back between a reply and
/// its next request).
pub(crate) async fn behind_the_answer(counter: &leasehold::testing::RequestCounter) {
    let mut last = counter.total();
    let mut quiet = 0;
    while quiet < 2 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = counter.total();
        quiet = if now == last && counter.in_flight() == 0 {
            quiet + 1
        } else {
            0
        };
        last = now;
    }
}

/// Pauses longer than the gap after which a re-acquire starts a fresh
/// tenure (1.5 poll intervals), so that the next counted unit on each lock
/// is not part of a run of re-acquires reaching its bound (which would add
/// a read of the wait queue to the count).
pub(crate) async fn fresh_tenure() {
    tokio::time::sleep(Duration::from_millis(200)).await;
}

/// `store`'s sweep ([`Store::sweep`]) keeping what is younger than
/// `older_than`, for real or as a dry run.
pub(crate) async fn sweep(
    store: &Store,
    older_than: Duration,
    dry_run: bool,
) -> leasehold::Result<leasehold::store::SweepReport> {
    sweep_later(store, older_than, Duration::ZERO, dry_run).await
}

/// [`sweep`], judging rows as if it ran `later` than now
/// ([`SweepOptions::as_if_later`](leasehold::store::SweepOptions::as_if_later)).
pub(crate) async fn sweep_later(
    store: &Store,
    older_than: Duration,
    later: Duration,
    dry_run: bool,
) -> leasehold::Result<leasehold::store::SweepReport> {
    store
        .sweep(
            &leasehold::store::SweepOptions::new()
                .with_older_than(older_than)
                .with_dry_run(dry_run)
                .as_if_later(later),
        )
        .await
}

/// Later than a committed decision row is kept whatever the sweep's
/// `older_than` (an hour).
pub(crate) const PAST_DECISIONS_KEPT: Duration = Duration::from_secs(61 * 60);
