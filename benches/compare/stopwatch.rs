//! The timing hooks of the per-operation section, both through public
//! extension points as a user's would: [`Stopwatch`], a `Layer` that times
//! the backend requests below it, and [`Exchange`], an `azure_core` pipeline
//! policy that times each HTTP exchange. Together they tell leasehold's own
//! time around a request from the request's. [`cpu_time`] reads the
//! processor time the whole process has used, to tell work done here from
//! time spent waiting for the emulator.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use std::future::Future;

use leasehold::Result;
use leasehold::backend::{Layer, Op, Request};

/// The duration of the last thing timed, shared between the hook that
/// times it and the code that reads it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Last(Arc<Mutex<Duration>>);

impl Last {
    /// How long the last timed thing took.
    pub(crate) fn get(&self) -> Duration {
        *self.0.lock().expect("not poisoned")
    }

    /// Records the time since `started`.
    fn since(&self, started: Instant) {
        *self.0.lock().expect("not poisoned") = started.elapsed();
    }
}

/// Times the gets of the backend it wraps.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stopwatch(pub(crate) Last);

impl Layer for Stopwatch {
    async fn call<T: Send>(
        &self,
        request: &Request<'_>,
        next: impl Future<Output = Result<T>> + Send,
    ) -> Result<T> {
        if request.op() != Op::Get {
            return next.await;
        }
        let started = Instant::now();
        let got = next.await;
        self.0.since(started);
        got
    }
}

/// A pipeline policy, placed last before the transport, that times each
/// HTTP exchange (request sent, reply read).
#[derive(Debug, Clone, Default)]
pub(crate) struct Exchange(pub(crate) Last);

#[async_trait::async_trait]
impl azure_core::http::policies::Policy for Exchange {
    async fn send(
        &self,
        ctx: &azure_core::http::Context,
        request: &mut azure_core::http::Request,
        next: &[Arc<dyn azure_core::http::policies::Policy>],
    ) -> azure_core::http::policies::PolicyResult {
        let started = Instant::now();
        let reply = match next.split_first() {
            Some((first, rest)) => first.send(ctx, request, rest).await,
            None => Err(azure_core::Error::with_message(
                azure_core::error::ErrorKind::Other,
                "no transport after the timing policy",
            )),
        };
        self.0.since(started);
        reply
    }
}

/// The processor time this process has used so far, every thread of it
/// (the scheduler's per-thread totals on Linux, in nanoseconds); `None`
/// where they cannot be read.
pub(crate) fn cpu_time() -> Option<Duration> {
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let text = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        total += text.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(Duration::from_nanos(total))
}
