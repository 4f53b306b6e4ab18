//! Leader election: campaign for a lease, lead while holding it.

use std::future::Future;
use std::sync::Arc;

use tokio::time::sleep;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, info_span, warn};

use super::fence::Fence;
use crate::error::{Error, ErrorKind, Result};

use super::guard::{LeaseGuard, LeaseStatus};
use super::manager::{AcquireMode, LeaseManager, ManagerInner};
use super::name::LeaseName;
use super::options::setters;
use super::outage::Outage;

/// How [`LeaseManager::run_as_leader`] campaigns.
#[derive(Debug, Clone)]
#[must_use = "LeaderOptions do nothing until given to `LeaseManager::run_as_leader`"]
pub struct LeaderOptions {
    stop: CancellationToken,
    campaign_again: bool,
    advance_epoch: bool,
}

impl Default for LeaderOptions {
    fn default() -> Self {
        LeaderOptions {
            stop: CancellationToken::new(),
            campaign_again: true,
            advance_epoch: true,
        }
    }
}

impl LeaderOptions {
    /// Campaign again after each term, advance the epoch each term, and never
    /// stop unless asked through [`LeaderOptions::stop_token`].
    pub fn new() -> Self {
        Self::default()
    }

    setters! {
        /// Stops campaigning when `stop` is cancelled (a running term's token
        /// too); `run_as_leader` returns once the task has returned.
        with_stop(stop: CancellationToken) => stop = stop;

        /// Whether to campaign again after a term ends (default: yes). With
        /// `false`, `run_as_leader` returns after the first term.
        with_campaign_again(again: bool) => campaign_again = again;

        /// Whether each term advances the lease's fencing epoch (one metadata
        /// write; default: yes), so no earlier leader had
        /// [`LeaderContext::epoch`].
        with_epoch_per_term(advance: bool) => advance_epoch = advance;
    }

    /// The token that stops campaigning (see [`LeaderOptions::with_stop`]).
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }
}

/// What the leader's task receives for one term.
#[derive(Debug, Clone)]
pub struct LeaderContext {
    token: CancellationToken,
    status: LeaseStatus,
    epoch: u64,
    term: u64,
    epoch_per_term: bool,
}

impl LeaderContext {
    /// Cancelled when the lease is lost or campaigning stops: return
    /// promptly then.
    pub fn cancellation_token(&self) -> &CancellationToken {
        &self.token
    }

    /// Completes when [`LeaderContext::cancellation_token`] is cancelled.
    pub async fn cancelled(&self) {
        self.token.cancelled().await;
    }

    /// The lease held during this term.
    pub fn lease(&self) -> &LeaseStatus {
        &self.status
    }

    /// The fencing epoch of this term (the epoch as found when
    /// [`LeaderOptions::with_epoch_per_term`] is off).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Which term of this `run_as_leader` call this is (1 for the first).
    pub fn term(&self) -> u64 {
        self.term
    }

    /// A [`Fence`] at this term's epoch, for
    /// [`Table::fenced`](crate::Table::fenced); no request. Fences of one
    /// term share its epoch, so none fences out another.
    ///
    /// ```
    /// # use leasehold::lease::LeaderOptions;
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let store = leasehold::Store::memory();
    /// let options = LeaderOptions::new().with_campaign_again(false);
    /// store.leases().run_as_leader("coordinator", options, |ctx| async move {
    ///     let fence = ctx.fence().expect("epochs advance each term");
    ///     assert_eq!(fence.epoch(), ctx.epoch());
    /// }).await?;
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`Error::Invalid`] when the term did not advance the epoch
    /// ([`LeaderOptions::with_epoch_per_term`] is off), or as
    /// [`LeaseGuard::fence`] for a long name.
    pub fn fence(&self) -> Result<Fence> {
        if !self.epoch_per_term {
            return Err(Error::invalid(
                format!("fence of lease {:?}", self.status.name().as_str()),
                "this term did not advance the epoch (LeaderOptions::with_epoch_per_term(false)); a fence needs an epoch no earlier term had",
            ));
        }
        Fence::new(self.status.name().as_str(), self.epoch)
    }
}

impl LeaseManager {
    /// Campaigns for the lease `name` and runs `f` while leading: its
    /// [`LeaderContext`]'s token is cancelled when the lease is lost or
    /// campaigning stops. When `f` returns the lease is released and, unless
    /// stopped (see [`LeaderOptions`]), campaigning resumes after a pause.
    /// Emits `tracing` events `became leader`, `leadership lost` and
    /// `stepped down`.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad name; [`Error::Unavailable`] when storage
    /// kept failing while campaigning (see the
    /// [module docs](super#failing-storage)); another backend error that is
    /// neither transient nor a timeout.
    pub async fn run_as_leader<F, Fut>(
        &self,
        name: &str,
        options: LeaderOptions,
        mut f: F,
    ) -> Result<()>
    where
        F: FnMut(LeaderContext) -> Fut,
        Fut: Future<Output = ()>,
    {
        let name = LeaseName::new(name)?;
        let span = info_span!("lease.leader", lease = %name);
        let this = &self.inner;
        async move {
            let stop = options.stop.clone();
            let mut term = 0u64;
            loop {
                let Some(guard) = this.campaign(&name, &stop).await? else {
                    return Ok(());
                };
                let epoch = if options.advance_epoch {
                    guard.advance_epoch().await
                } else {
                    guard.epoch().await
                };
                let (guard, epoch) = match guard.or_release(epoch).await {
                    Ok(held) => held,
                    Err(e)
                        if matches!(
                            e.kind(),
                            ErrorKind::Transient | ErrorKind::Timeout | ErrorKind::LeaseLost
                        ) =>
                    {
                        warn!(error = %e, "could not start a term; campaigning again");
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                term += 1;
                info!(epoch, term, "became leader");
                let token = guard.cancellation_token();
                let ctx = LeaderContext {
                    token: token.clone(),
                    status: guard.status(),
                    epoch,
                    term,
                    epoch_per_term: options.advance_epoch,
                };
                let lost = guard.lost();
                tokio::pin!(lost);
                let work = f(ctx);
                tokio::pin!(work);
                let mut stopping = false;
                let mut lost_seen = false;
                loop {
                    tokio::select! {
                        () = &mut work => break,
                        () = &mut lost, if !lost_seen => {
                            lost_seen = true;
                            if guard.is_lost() {
                                warn!(epoch, term, "leadership lost");
                            }
                        }
                        () = stop.cancelled(), if !stopping => {
                            stopping = true;
                            token.cancel();
                        }
                    }
                }
                if guard.is_lost() {
                    if !lost_seen {
                        warn!(epoch, term, "leadership lost");
                    }
                    let _ = guard.release().await;
                } else {
                    if let Err(e) = guard.release().await {
                        warn!(error = %e, "release after stepping down failed");
                    }
                    info!(epoch, term, "stepped down");
                }
                if !options.campaign_again || stop.is_cancelled() {
                    return Ok(());
                }
                let mut rest = this.env.standby_backoff();
                tokio::select! {
                    biased;
                    () = stop.cancelled() => return Ok(()),
                    () = sleep(rest.pause()) => {}
                }
            }
        }
        .instrument(span)
        .await
    }
}

impl ManagerInner {
    async fn campaign(
        self: &Arc<Self>,
        name: &LeaseName,
        stop: &CancellationToken,
    ) -> Result<Option<LeaseGuard>> {
        let mut backoff = self.env.standby_backoff();
        let mut outage = Outage::new(&self.env);
        loop {
            let attempt = tokio::select! {
                biased;
                () = stop.cancelled() => return Ok(None),
                r = self.acquire(name.clone(), AcquireMode::LocalThenTry, &mut outage) => r,
            };
            if let Some(guard) = attempt.inspect_err(|e| warn!(error = %e, "campaign ended"))? {
                return Ok(Some(guard));
            }
            tokio::select! {
                biased;
                () = stop.cancelled() => return Ok(None),
                () = sleep(backoff.pause()) => {}
            }
        }
    }
}
