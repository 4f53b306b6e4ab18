//! A backend wrapper whose renew requests get no reply, applied or not, as
//! switched: [`AmbiguousRenews`]. Hidden from the documentation and not
//! part of the published kit: leasehold's own lease checks (in its tests)
//! use it to leave renewals unanswered, which takes the crate's private
//! request delegation.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::backend::delegate::delegate_backend;
use crate::backend::{Layer, Op, Request};
use crate::{Error, Result};

/// What happens to renew requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renews {
    /// Passed through.
    Normal,
    /// Applied, but the caller gets `Error::Timeout`.
    AppliedNoReply,
    /// Not applied; the caller gets `Error::Timeout`.
    LostNoReply,
}

/// Passes every request through except renewals, which follow the switch.
#[derive(Debug, Clone)]
pub struct AmbiguousRenews<B> {
    inner: B,
    mode: Switch,
}

/// The switch, as the layer every request goes through.
#[derive(Debug, Clone)]
struct Switch(Arc<Mutex<Renews>>);

impl<B> AmbiguousRenews<B> {
    /// Wraps `inner`, passing renewals through until switched.
    pub fn new(inner: B) -> Self {
        AmbiguousRenews {
            inner,
            mode: Switch(Arc::new(Mutex::new(Renews::Normal))),
        }
    }

    /// The switch: what happens to renew requests from now on.
    pub fn switch(&self) -> Arc<Mutex<Renews>> {
        self.mode.0.clone()
    }
}

impl Layer for Switch {
    async fn call<T: Send>(
        &self,
        request: &Request<'_>,
        fut: impl Future<Output = Result<T>> + Send,
    ) -> Result<T> {
        if request.op() != Op::RenewLease {
            return fut.await;
        }
        let mode = *self.0.lock().unwrap_or_else(|p| p.into_inner());
        match mode {
            Renews::Normal => fut.await,
            Renews::AppliedNoReply => {
                let _ = fut.await;
                Err(no_reply())
            }
            Renews::LostNoReply => Err(no_reply()),
        }
    }
}

fn no_reply() -> Error {
    Error::Timeout {
        what: "renew reply".into(),
        after: Duration::from_secs(5),
    }
}

delegate_backend!(AmbiguousRenews, layer = mode);
