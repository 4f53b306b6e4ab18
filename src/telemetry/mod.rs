//! Metrics (README, "Metrics"), recorded through the `opentelemetry` API
//! crate with the `opentelemetry` feature, compiled away without it, on
//! the meter given to [`StoreBuilder::meter`](crate::StoreBuilder::meter)
//! or the global provider's `leasehold` meter. Every backend call is one
//! request ([`backend::Metered`]); a logical operation counts the requests
//! it made ([`Telemetry::operation`]).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::backend::Backend;

#[cfg(feature = "opentelemetry")]
mod backend;
#[cfg(feature = "opentelemetry")]
mod instruments;

#[cfg(feature = "opentelemetry")]
use instruments::Instruments;
#[cfg(feature = "opentelemetry")]
use opentelemetry::KeyValue;

/// Where a store's metrics go: its instruments, or nowhere. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct Telemetry {
    #[cfg(feature = "opentelemetry")]
    instruments: Option<Arc<Instruments>>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        #[cfg(feature = "opentelemetry")]
        let on = self.instruments.is_some();
        #[cfg(not(feature = "opentelemetry"))]
        let on = false;
        write!(f, "Telemetry({})", if on { "on" } else { "off" })
    }
}

/// Runs `$record` with the instruments bound to `$i`, when there are any.
macro_rules! record {
    ($telemetry:ident, |$i:ident| $record:expr) => {
        #[cfg(feature = "opentelemetry")]
        if let Some($i) = &$telemetry.instruments {
            $record;
        }
    };
}

// Without the feature, every recording is a no-op that ignores its inputs.
#[cfg_attr(not(feature = "opentelemetry"), allow(unused_variables))]
impl Telemetry {
    /// The instruments of the global meter provider's `leasehold` meter.
    pub(crate) fn global() -> Self {
        #[cfg(feature = "opentelemetry")]
        {
            let scope = opentelemetry::InstrumentationScope::builder("leasehold")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build();
            Telemetry::from_meter(&opentelemetry::global::meter_with_scope(scope))
        }
        #[cfg(not(feature = "opentelemetry"))]
        Telemetry::default()
    }

    #[cfg(feature = "opentelemetry")]
    pub(crate) fn from_meter(meter: &opentelemetry::metrics::Meter) -> Self {
        Telemetry {
            instruments: Some(Arc::new(Instruments::new(meter))),
        }
    }

    /// `backend`, counting and timing its requests on these instruments.
    pub(crate) fn instrument(&self, backend: Arc<dyn Backend>) -> Arc<dyn Backend> {
        #[cfg(feature = "opentelemetry")]
        if let Some(instruments) = &self.instruments {
            let layer = backend::Metered {
                instruments: instruments.clone(),
                system: backend.system_name(),
            };
            let inner = backend;
            return Arc::new(crate::backend::Layered { layer, inner });
        }
        backend
    }

    /// Runs `fut` as the logical operation `name`, recording how many
    /// requests it made. Inside another operation it is part of that one
    /// (an `update_with` is one operation, not a get and a replace).
    pub(crate) fn operation<F: Future>(
        &self,
        name: &'static str,
        fut: F,
    ) -> impl Future<Output = F::Output> {
        #[cfg(feature = "opentelemetry")]
        {
            let instruments = self.instruments.clone();
            // On the heap: the futures of commits and lock waits are large,
            // and a layer more of them on the stack overflowed it.
            let fut = Box::pin(fut);
            async move {
                match instruments {
                    Some(i) if !backend::in_operation() => {
                        let (output, requests) = backend::counting_requests(fut).await;
                        let name = KeyValue::new("leasehold.operation", name);
                        i.operation_requests.record(requests, &[name]);
                        output
                    }
                    _ => fut.await,
                }
            }
        }
        #[cfg(not(feature = "opentelemetry"))]
        fut
    }

    /// An optimistic write is tried again after a conflict.
    pub(crate) fn conflict_retry(&self) {
        record!(self, |i| i.retries("conflict", "update_with", 1));
    }

    /// A lease was renewed `lag` after its renewal was due.
    pub(crate) fn renewal_lag(&self, lag: Duration) {
        record!(self, |i| i.renewal_lag.record(lag.as_secs_f64(), &[]));
    }

    /// A unit waited `waited` for its partition locks, ending `outcome`:
    /// `acquired`, `held` (past the timeout, or at once for a `try_`) or
    /// `failed`.
    pub(crate) fn lock_wait(&self, waited: Duration, outcome: &'static str) {
        record!(self, |i| i.lock_wait.record(
            waited.as_secs_f64(),
            &[KeyValue::new("leasehold.outcome", outcome)],
        ));
    }

    /// A committed row still carrying its mark was finished by a reader
    /// meeting the mark (`leasehold.resolver` = `reader`).
    pub(crate) fn roll_forward(&self) {
        record!(self, |i| i
            .roll_forwards
            .add(1, &[KeyValue::new("leasehold.resolver", "reader")]));
    }

    /// The expiry sweep of `table` removed `removed` expired rows and kept
    /// `kept` that changed after it read them.
    pub(crate) fn expired_rows(&self, table: &str, removed: u64, kept: u64) {
        record!(
            self,
            |i| for (outcome, n) in [("removed", removed), ("kept", kept)] {
                if n > 0 {
                    let table = KeyValue::new("db.collection.name", table.to_owned());
                    let outcome = KeyValue::new("leasehold.outcome", outcome);
                    i.expired_rows.add(n, &[table, outcome]);
                }
            }
        );
    }
}

/// The attribute value of an error kind (`error.type`, and the outcome of
/// a request that failed): its name in snake case (`not_found`).
#[cfg(feature = "opentelemetry")]
fn kind_name(kind: crate::error::ErrorKind) -> String {
    let mut name = String::new();
    for c in format!("{kind:?}").chars() {
        if c.is_ascii_uppercase() && !name.is_empty() {
            name.push('_');
        }
        name.push(c.to_ascii_lowercase());
    }
    name
}
