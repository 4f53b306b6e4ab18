//! The instruments, made once per store on its meter (the README's
//! "Metrics" table; OpenTelemetry's database-client conventions).

use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, Meter};

/// Bucket bounds for request durations, in seconds.
const REQUEST_SECONDS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 10.0,
];

/// Bucket bounds for lock waits and renewal lag, in seconds.
const WAIT_SECONDS: [f64; 12] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0,
];

/// Bucket bounds for requests per logical operation.
const REQUEST_COUNTS: [f64; 10] = [1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0];

/// How a failed request ended: its error's kind (`error.type`), and
/// whether its caller expected it (see `backend::notes::expecting`).
#[derive(Debug, Clone)]
pub(super) struct Outcome {
    pub(super) kind: String,
    pub(super) expected: bool,
}

#[derive(Debug)]
pub(super) struct Instruments {
    requests: Counter<u64>,
    duration: Histogram<f64>,
    conflicts: Counter<u64>,
    pub(super) throttled: Counter<u64>,
    retries: Counter<u64>,
    pub(super) renewal_lag: Histogram<f64>,
    pub(super) lock_wait: Histogram<f64>,
    pub(super) roll_forwards: Counter<u64>,
    pub(super) operation_requests: Histogram<u64>,
    pub(super) expired_rows: Counter<u64>,
}

impl Instruments {
    pub(super) fn new(meter: &Meter) -> Self {
        let counter = |name, unit, description| {
            meter
                .u64_counter(name)
                .with_unit(unit)
                .with_description(description)
                .build()
        };
        let seconds = |name, description, bounds: &[f64]| {
            meter
                .f64_histogram(name)
                .with_unit("s")
                .with_description(description)
                .with_boundaries(bounds.to_vec())
                .build()
        };
        Instruments {
            requests: counter(
                "leasehold.requests",
                "{request}",
                "Requests to the storage backend, by operation and outcome.",
            ),
            duration: seconds(
                "db.client.operation.duration",
                "Duration of requests to the storage backend, retries included.",
                &REQUEST_SECONDS,
            ),
            conflicts: counter(
                "leasehold.conflicts",
                "{request}",
                "Requests refused because a row or blob changed or already exists (409, 412).",
            ),
            throttled: counter(
                "leasehold.throttled",
                "{response}",
                "Answers saying the service is busy (503 ServerBusy, 429).",
            ),
            retries: counter(
                "leasehold.retries",
                "{retry}",
                "Attempts made again: after a transport failure, throttling or a conflict.",
            ),
            renewal_lag: seconds(
                "leasehold.lease.renewal.lag",
                "How long after it was due a lease renewal succeeded.",
                &WAIT_SECONDS,
            ),
            lock_wait: seconds(
                "leasehold.lock.wait.duration",
                "How long a unit of work waited for its partition locks.",
                &WAIT_SECONDS,
            ),
            roll_forwards: counter(
                "leasehold.commit.roll_forwards",
                "{row}",
                "Committed rows finished after their commit's own finishing round: by the writer row by row, or by a reader meeting the row's mark.",
            ),
            expired_rows: counter(
                "leasehold.sweep.expired_rows",
                "{row}",
                "Rows past their expiry the expiry sweep met: removed, or kept because they were renewed (changed) after it read them.",
            ),
            operation_requests: meter
                .u64_histogram("leasehold.operation.requests")
                .with_unit("{request}")
                .with_description("Requests made by one logical operation.")
                .with_boundaries(REQUEST_COUNTS.to_vec())
                .build(),
        }
    }

    /// One request `operation` that took `elapsed`, `failed` or not. An
    /// error its caller expected is an outcome, without `error.type`.
    pub(super) fn request(
        &self,
        system: &'static str,
        operation: &'static str,
        failed: Option<&Outcome>,
        elapsed: Duration,
    ) {
        let system = KeyValue::new("db.system.name", system);
        let op = KeyValue::new("db.operation.name", operation);
        let kind = failed.map_or("ok", |f| f.kind.as_str());
        let outcome = KeyValue::new("leasehold.outcome", kind.to_owned());
        self.requests.add(1, &[system.clone(), op.clone(), outcome]);
        match failed.filter(|f| !f.expected) {
            Some(_) => {
                let error_type = KeyValue::new("error.type", kind.to_owned());
                self.duration.record(
                    elapsed.as_secs_f64(),
                    &[system, op.clone(), error_type.clone()],
                );
                if matches!(kind, "conflict" | "already_exists") {
                    self.conflicts.add(1, &[op, error_type]);
                }
            }
            None => self.duration.record(elapsed.as_secs_f64(), &[system, op]),
        }
    }

    /// `count` attempts of `operation` made again for `reason`
    /// (`transport`, `throttled` or `conflict`).
    pub(super) fn retries(&self, reason: &'static str, operation: &'static str, count: u64) {
        self.retries.add(
            count,
            &[
                KeyValue::new("db.operation.name", operation),
                KeyValue::new("leasehold.retry.reason", reason),
            ],
        );
    }
}
