//! The fault-injecting wrapper.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::Op;
use super::delegate::delegate_backend;
use crate::error::{Error, Result};

/// What happens to a request picked by a [`FaultInjector`] rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The request is not sent; the caller gets [`Error::Transient`].
    Fail,
    /// The request is applied, but its reply is lost: the caller gets
    /// [`Error::Transient`] although the change happened.
    LoseReply,
    /// The request never completes (until the caller gives up on it). It is
    /// not applied.
    Hang,
    /// The process "dies" here: this request and every later one are not
    /// sent and fail with [`Error::Transient`], until [`FaultInjector::revive`].
    Die,
}

#[derive(Debug, Clone, Copy)]
struct Rule {
    op: Option<Op>,
    nth: u64,
    fault: Fault,
}

#[derive(Debug, Default)]
struct Plan {
    seen: BTreeMap<Op, u64>,
    seen_any: u64,
    rules: Vec<Rule>,
    latency: BTreeMap<Option<Op>, Duration>,
    dead: bool,
    injected: u64,
}

/// Controls a [`FaultyBackend`]: which requests fail, hang or lose their
/// reply, how slow requests are, and whether the "process" is dead.
/// Cheap to clone; clones control the same backend.
///
/// Rules count requests from the moment they are added: `fail_nth(Some(Op::Batch), 1)`
/// fails the next batch.
#[derive(Clone, Default)]
pub struct FaultInjector {
    plan: Arc<Mutex<Plan>>,
}

impl fmt::Debug for FaultInjector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plan = self.lock();
        f.debug_struct("FaultInjector")
            .field("rules", &plan.rules)
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
            op,
            nth: base + nth.max(1),
            fault,
        });
        self
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
        let hit = plan.rules.iter().position(|r| match r.op {
            Some(rop) => rop == op && r.nth == n_op,
            None => r.nth == n_any,
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

    async fn call<T>(&self, op: Op, fut: impl Future<Output = Result<T>>) -> Result<T> {
        let (fault, latency) = self.injector.decide(op);
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        let injected = |what: &str| Error::Transient {
            message: format!("injected fault: {what} ({op:?})"),
        };
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
        }
    }
}

delegate_backend!(FaultyBackend);
