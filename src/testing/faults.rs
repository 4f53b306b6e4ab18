//! Fault injection: one [`Fault`] type and one [`FaultInjector`] that plans
//! faults for a [`FaultyBackend`] (any backend, by request kind) or for the
//! Azure backend's transport (by HTTP request, through
//! [`FaultInjector::transport_policy`]).

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::backend::delegate::delegate_backend;
use crate::backend::{Layer, Op, Request};
use crate::error::{Error, Result};

/// What happens to a request picked by a [`FaultInjector`] rule.
///
/// A [`FaultyBackend`] reports each as an [`Error`]; on the Azure transport
/// each becomes what the network would do, and the backend's own retries
/// and lost-reply handling take it from there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// The request is not sent (as if the connection was refused); a
    /// wrapped backend's caller gets [`Error::Transient`].
    Fail,
    /// The request is applied, but its reply is lost (as if the connection
    /// broke): a wrapped backend's caller gets [`Error::Transient`] although
    /// the change happened.
    LoseReply,
    /// The request never completes (until the caller gives up on it). It is
    /// not applied.
    Hang,
    /// The process "dies" here: this request and every later one are not
    /// sent and fail with [`Error::Transient`], until [`FaultInjector::revive`].
    Die,
    /// The request is not sent; the service seems to answer with this HTTP
    /// status (such as 503) and no error code: a wrapped backend's caller
    /// gets the error that status means (a 5xx is [`Error::Transient`]).
    Status(u16),
    /// The request waits this long, then is sent and answered as usual: a
    /// process stopped (or starved) just before sending it, whose leases
    /// may run out meanwhile.
    Delay(Duration),
}

/// Which request a rule picks.
#[derive(Debug, Clone)]
enum Target {
    /// The `nth` backend call of kind `op` (`None`: of any kind), counted
    /// from the start.
    Call { op: Option<Op>, nth: u64 },
    /// The next HTTP request with this method whose URL path contains
    /// `path_contains`.
    #[cfg_attr(not(feature = "azure"), allow(dead_code))]
    Request {
        method: String,
        path_contains: String,
    },
}

#[derive(Debug, Clone)]
struct Rule {
    target: Target,
    fault: Fault,
}

#[derive(Debug, Default)]
struct Plan {
    seen: BTreeMap<Op, u64>,
    seen_any: u64,
    http_requests: u64,
    rules: Vec<Rule>,
    latency: BTreeMap<Option<Op>, Duration>,
    dead: bool,
    injected: u64,
}

/// Plans faults: which requests fail, hang, lose their reply or get a
/// status, how slow requests are, and whether the "process" is dead; and
/// counts the requests it sees. Cheap to clone; clones control the same plan.
///
/// It acts in one of two places:
///
/// * as the control of a [`FaultyBackend`], which wraps any backend: rules
///   pick backend calls by kind ([`inject`](Self::inject) and the `*_nth`
///   methods). Rules count requests from the moment they are added:
///   `fail_nth(Some(Op::Batch), 1)` fails the next batch.
/// * as a pipeline policy of the Azure backend
///   ([`transport_policy`](Self::transport_policy), given to
///   `AzureBackendBuilder::policy`), in front of the HTTP transport: rules
///   pick HTTP requests by method and path
///   ([`inject_request`](Self::inject_request)), so a test can lose the
///   reply of exactly the request it means, after the service applied it,
///   and watch the backend's retries and lost-reply verification.
///
/// Latency without a request kind, [`die_now`](Self::die_now) and
/// [`revive`](Self::revive) act in both places.
///
/// ```no_run
/// # async fn demo() -> leasehold::Result<()> {
/// use leasehold::backend::azure::AzureBackend;
/// use leasehold::testing::{Fault, FaultInjector};
///
/// let faults = FaultInjector::default();
/// let backend = AzureBackend::builder()
///     .connection_string("UseDevelopmentStorage=true")?
///     .policy(faults.transport_policy())
///     .build()?;
/// // The next insert into `Things` is applied, but its reply is lost.
/// faults.inject_request("POST", "/Things", Fault::LoseReply);
/// # let _ = backend; Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct FaultInjector {
    plan: Arc<Mutex<Plan>>,
}

impl fmt::Debug for FaultInjector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plan = self.lock();
        f.debug_struct("FaultInjector")
            .field("rules", &plan.rules)
            .field("requests", &(plan.seen_any + plan.http_requests))
            .field("dead", &plan.dead)
            .finish()
    }
}

impl FaultInjector {
    fn lock(&self) -> std::sync::MutexGuard<'_, Plan> {
        self.plan.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies `fault` to the `nth` (1-based) request of kind `op` (`None`:
    /// of any kind) counted from now.
    pub fn inject(&self, op: Option<Op>, nth: u64, fault: Fault) -> &Self {
        let mut plan = self.lock();
        let base = match op {
            Some(op) => plan.seen.get(&op).copied().unwrap_or(0),
            None => plan.seen_any,
        };
        plan.rules.push(Rule {
            target: Target::Call {
                op,
                nth: base + nth.max(1),
            },
            fault,
        });
        self
    }

    /// Applies `fault` once, to the next HTTP request with method `method`
    /// (such as `POST`, `PUT`, `PATCH` (a merge), `DELETE`, `GET`, `HEAD`)
    /// whose URL
    /// path contains `path_contains` (percent-encoded, as sent). Rules apply
    /// in the order added. Only a [`transport_policy`](Self::transport_policy)
    /// sees HTTP requests.
    pub fn inject_request(&self, method: &str, path_contains: &str, fault: Fault) -> &Self {
        self.lock().rules.push(Rule {
            target: Target::Request {
                method: method.to_ascii_uppercase(),
                path_contains: path_contains.to_owned(),
            },
            fault,
        });
        self
    }

    /// Rules added but not yet applied.
    pub fn pending(&self) -> usize {
        self.lock().rules.len()
    }

    /// How many requests were seen so far: backend calls through a
    /// [`FaultyBackend`] and HTTP requests through a
    /// [`transport_policy`](Self::transport_policy), faulted ones included.
    pub fn requests(&self) -> u64 {
        let plan = self.lock();
        plan.seen_any + plan.http_requests
    }

    /// Fails the `nth` request of kind `op` from now, without sending it.
    pub fn fail_nth(&self, op: Option<Op>, nth: u64) -> &Self {
        self.inject(op, nth, Fault::Fail)
    }

    /// Applies the `nth` request of kind `op` from now but loses its reply.
    pub fn lose_reply_nth(&self, op: Option<Op>, nth: u64) -> &Self {
        self.inject(op, nth, Fault::LoseReply)
    }

    /// Hangs the `nth` request of kind `op` from now.
    pub fn hang_nth(&self, op: Option<Op>, nth: u64) -> &Self {
        self.inject(op, nth, Fault::Hang)
    }

    /// Kills the "process" just before the `nth` request of kind `op` from now.
    pub fn die_at_nth(&self, op: Option<Op>, nth: u64) -> &Self {
        self.inject(op, nth, Fault::Die)
    }

    /// Kills the "process" now: no further request is sent.
    pub fn die_now(&self) {
        self.lock().dead = true;
    }

    /// Brings the "process" back and forgets every pending rule.
    pub fn revive(&self) {
        let mut plan = self.lock();
        plan.dead = false;
        plan.rules.clear();
    }

    /// Whether the "process" is dead.
    pub fn is_dead(&self) -> bool {
        self.lock().dead
    }

    /// Adds `latency` before every request of kind `op` (`None`: every
    /// request without a latency of its own). Zero removes it.
    pub fn set_latency(&self, op: Option<Op>, latency: Duration) {
        let mut plan = self.lock();
        if latency.is_zero() {
            plan.latency.remove(&op);
        } else {
            plan.latency.insert(op, latency);
        }
    }

    /// How many faults were injected so far (dead-process refusals included).
    pub fn injected(&self) -> u64 {
        self.lock().injected
    }

    /// Decides the fate of one request.
    fn decide(&self, op: Op) -> (Option<Fault>, Duration) {
        let mut plan = self.lock();
        let n_op = {
            let n = plan.seen.entry(op).or_default();
            *n += 1;
            *n
        };
        plan.seen_any += 1;
        let n_any = plan.seen_any;
        let latency = plan
            .latency
            .get(&Some(op))
            .or_else(|| plan.latency.get(&None))
            .copied()
            .unwrap_or_default();
        if plan.dead {
            plan.injected += 1;
            return (Some(Fault::Die), latency);
        }
        let hit = plan.rules.iter().position(|r| match r.target {
            Target::Call { op: Some(rop), nth } => rop == op && nth == n_op,
            Target::Call { op: None, nth } => nth == n_any,
            Target::Request { .. } => false,
        });
        let fault = hit.map(|i| plan.rules.remove(i).fault);
        if fault.is_some() {
            plan.injected += 1;
        }
        if fault == Some(Fault::Die) {
            plan.dead = true;
        }
        (fault, latency)
    }

    /// Decides the fate of one HTTP request on the Azure transport.
    #[cfg(feature = "azure")]
    fn decide_request(&self, method: &str, path: &str) -> (Option<Fault>, Duration) {
        let mut plan = self.lock();
        plan.http_requests += 1;
        let latency = plan.latency.get(&None).copied().unwrap_or_default();
        if plan.dead {
            plan.injected += 1;
            return (Some(Fault::Die), latency);
        }
        let hit = plan.rules.iter().position(|r| match &r.target {
            Target::Request {
                method: m,
                path_contains,
            } => m == method && path.contains(path_contains.as_str()),
            Target::Call { .. } => false,
        });
        let fault = hit.map(|i| plan.rules.remove(i).fault);
        if fault.is_some() {
            plan.injected += 1;
        }
        if fault == Some(Fault::Die) {
            plan.dead = true;
        }
        (fault, latency)
    }

    /// This injector as a pipeline policy for the Azure backend
    /// (`AzureBackendBuilder::policy`): it sees every HTTP request just
    /// before it is sent, counts it, and applies the rules added with
    /// [`inject_request`](Self::inject_request), the latency added without
    /// a request kind, and a dead "process".
    #[cfg(feature = "azure")]
    pub fn transport_policy(&self) -> Arc<dyn azure_core::http::policies::Policy> {
        Arc::new(TransportFaults(self.clone()))
    }
}

/// Passes `request` on to the next policy of the pipeline.
#[cfg(feature = "azure")]
async fn send_next(
    ctx: &azure_core::http::Context<'_>,
    request: &mut azure_core::http::Request,
    next: &[Arc<dyn azure_core::http::policies::Policy>],
) -> azure_core::http::policies::PolicyResult {
    match next.split_first() {
        Some((policy, rest)) => policy.send(ctx, request, rest).await,
        None => Err(azure_core::Error::with_message(
            azure_core::error::ErrorKind::Other,
            "the fault policy has no transport behind it",
        )),
    }
}

/// A [`FaultInjector`] in the Azure pipeline, in front of the transport.
///
/// Its failures are what the backend reads as the network's: an `Io` error
/// whose inner error is a refused connection was not sent; any other `Io`
/// error lost its reply (see `AzureBackendBuilder::policy`).
#[cfg(feature = "azure")]
#[derive(Debug)]
struct TransportFaults(FaultInjector);

#[cfg(feature = "azure")]
#[async_trait::async_trait]
impl azure_core::http::policies::Policy for TransportFaults {
    async fn send(
        &self,
        ctx: &azure_core::http::Context,
        request: &mut azure_core::http::Request,
        next: &[Arc<dyn azure_core::http::policies::Policy>],
    ) -> azure_core::http::policies::PolicyResult {
        use std::io::ErrorKind as Io;
        let io = |kind: Io, what: &str| {
            azure_core::Error::new(
                azure_core::error::ErrorKind::Io,
                std::io::Error::new(kind, format!("{what} (injected fault)")),
            )
        };
        let method = request.method().as_str().to_ascii_uppercase();
        let path = request.url().path().to_owned();
        let (fault, latency) = self.0.decide_request(&method, &path);
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        match fault {
            None => send_next(ctx, request, next).await,
            Some(Fault::Delay(pause)) => {
                tokio::time::sleep(pause).await;
                send_next(ctx, request, next).await
            }
            Some(Fault::Fail) => Err(io(Io::ConnectionRefused, "connection refused")),
            Some(Fault::Die) => Err(io(Io::ConnectionRefused, "process stopped")),
            Some(Fault::Hang) => std::future::pending().await,
            Some(Fault::Status(status)) => Ok(azure_core::http::AsyncRawResponse::from_bytes(
                azure_core::http::StatusCode::from(status),
                azure_core::http::headers::Headers::new(),
                Vec::<u8>::new(),
            )),
            Some(Fault::LoseReply) => {
                // Let the service finish the request, then drop what it said.
                let response = send_next(ctx, request, next).await?;
                let _ = response.into_body().collect().await;
                Err(io(
                    Io::ConnectionReset,
                    "connection reset before the reply was read",
                ))
            }
        }
    }
}

/// A backend wrapper that injects faults chosen through its [`FaultInjector`].
#[derive(Debug)]
pub struct FaultyBackend<B> {
    inner: B,
    injector: FaultInjector,
}

impl<B: Clone> Clone for FaultyBackend<B> {
    fn clone(&self) -> Self {
        FaultyBackend {
            inner: self.inner.clone(),
            injector: self.injector.clone(),
        }
    }
}

impl<B> FaultyBackend<B> {
    /// Wraps `inner` with no faults planned.
    pub fn new(inner: B) -> Self {
        FaultyBackend {
            inner,
            injector: FaultInjector::default(),
        }
    }

    /// The handle that plans faults.
    pub fn injector(&self) -> FaultInjector {
        self.injector.clone()
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &B {
        &self.inner
    }
}

/// An injector is a [`Layer`]: the requests it sees take the faults it
/// plans.
impl Layer for FaultInjector {
    async fn call<T: Send>(
        &self,
        request: &Request<'_>,
        fut: impl Future<Output = Result<T>> + Send,
    ) -> Result<T> {
        let op = request.op();
        let (fault, latency) = self.decide(op);
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        let injected = |what: &str| Error::transient(format!("injected fault: {what} ({op:?})"));
        match fault {
            None => fut.await,
            Some(Fault::Fail) => Err(injected("request failed")),
            Some(Fault::Die) => Err(injected("process stopped")),
            Some(Fault::Hang) => std::future::pending().await,
            Some(Fault::LoseReply) => {
                // Applied, then the reply is lost on the way back.
                let _ = fut.await;
                Err(injected("reply lost"))
            }
            Some(Fault::Status(status)) => Err(Error::from_service(
                status,
                None,
                format!("injected fault ({op:?})"),
            )),
            Some(Fault::Delay(pause)) => {
                tokio::time::sleep(pause).await;
                fut.await
            }
        }
    }
}

delegate_backend!(FaultyBackend, layer = injector);
