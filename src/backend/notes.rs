//! What a backend notes about the call it is serving (the attempts it made
//! again, the busy answers it met), for a wrapper around the call to read:
//! the store's metrics (feature `opentelemetry`). Without the feature, or
//! outside such a wrapper, notes go nowhere.
// Only the Azure backend retries and meets busy answers.
#![cfg_attr(not(feature = "azure"), allow(dead_code))]

#[cfg(feature = "opentelemetry")]
use std::cell::Cell;

/// What was noted during one call.
#[cfg(feature = "opentelemetry")]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Noted {
    /// Attempts made again after a failure in transit or a server error.
    pub(crate) transport_retries: u64,
    /// Attempts made again after a busy answer.
    pub(crate) throttle_retries: u64,
    /// Busy answers (503, 429).
    pub(crate) throttled: u64,
}

#[cfg(feature = "opentelemetry")]
tokio::task_local! {
    static NOTES: Cell<Noted>;
}

/// Adds to the notes of the running call, if any.
#[cfg(feature = "opentelemetry")]
fn note(add: impl FnOnce(&mut Noted)) {
    let _ = NOTES.try_with(|n| {
        let mut noted = n.get();
        add(&mut noted);
        n.set(noted);
    });
}

/// Runs `fut` (one backend call), collecting what the backend notes.
#[cfg(feature = "opentelemetry")]
pub(crate) async fn noting<F: std::future::Future>(fut: F) -> (F::Output, Noted) {
    NOTES
        .scope(Cell::default(), async move {
            let output = fut.await;
            (output, NOTES.with(Cell::get))
        })
        .await
}

/// The call is attempted again, after a busy answer (`throttled`) or
/// another transient failure.
pub(crate) fn retry(throttled: bool) {
    #[cfg(feature = "opentelemetry")]
    note(|n| match throttled {
        true => n.throttle_retries += 1,
        false => n.transport_retries += 1,
    });
    #[cfg(not(feature = "opentelemetry"))]
    let _ = throttled;
}

/// The service answered that it is busy.
pub(crate) fn throttled() {
    #[cfg(feature = "opentelemetry")]
    note(|n| n.throttled += 1);
}

// Error kinds a caller expects from the backend calls it makes while
// `expecting` runs.
#[cfg(feature = "opentelemetry")]
tokio::task_local! {
    static EXPECTED: &'static [crate::error::ErrorKind];
}

/// Runs `fut`, backend calls whose failures of `kinds` the caller expects
/// and handles as a normal outcome (a lease held by another process, which
/// it waits for): the store's metrics record them without `error.type`, so
/// that normal use does not look like failing storage.
pub(crate) async fn expecting<F: std::future::Future>(
    kinds: &'static [crate::error::ErrorKind],
    fut: F,
) -> F::Output {
    #[cfg(feature = "opentelemetry")]
    {
        EXPECTED.scope(kinds, fut).await
    }
    #[cfg(not(feature = "opentelemetry"))]
    {
        let _ = kinds;
        fut.await
    }
}

/// Whether the caller of the running call expects `error` (see
/// [`expecting`]).
#[cfg(feature = "opentelemetry")]
pub(crate) fn is_expected(error: &crate::error::Error) -> bool {
    EXPECTED
        .try_with(|kinds| kinds.contains(&error.kind()))
        .unwrap_or(false)
}
