//! Taking the locks of a unit (see "Taking several locks" in the
//! [module docs](super)).

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use tokio::time::Instant;

use super::env::LockEnv;
use crate::error::Result;
use crate::key::PartitionKey;
use crate::lease::{LeaseGuard, LeaseName};

/// Takes the locks of `targets` (sorted by lock name, distinct), waiting
/// up to `timeout` in all (`None`: not at all; a held lock is `Ok(None)`),
/// answering the guards in `targets` order.
pub(super) async fn take_all(
    env: &Arc<LockEnv>,
    targets: &[(LeaseName, PartitionKey)],
    timeout: Option<Duration>,
) -> Result<Option<Vec<LeaseGuard>>> {
    let deadline = timeout.map(|t| Instant::now() + t);
    match try_all_at_once(env, targets).await? {
        AtOnce::Taken(guards) => return Ok(Some(guards)),
        AtOnce::Held { failed: false } if deadline.is_none() => return Ok(None),
        AtOnce::Held { .. } => {}
    }
    let mut guards: Vec<LeaseGuard> = Vec::with_capacity(targets.len());
    for (name, _) in targets {
        match take(env, name, deadline).await {
            Ok(Some(guard)) => {
                // The blob's holder metadata is read now, as the lock is
                // taken (see `Unit::record_holder`); a failed read is
                // made again there.
                let _ = guard.core.snapshot().await;
                guards.push(guard);
            }
            // Held, or failed: the locks taken go back.
            other => {
                give_back(guards).await;
                return other.map(|_| None);
            }
        }
    }
    Ok(Some(guards))
}

/// What trying every lock of a unit at once found.
enum AtOnce {
    /// Every lock, in `targets` order, with its lock blob read.
    Taken(Vec<LeaseGuard>),
    /// Some lock was held, or (`failed`) could not be tried: every lock
    /// taken was given back.
    Held {
        /// Whether a try failed (rather than finding the lock held).
        failed: bool,
    },
}

/// Tries every lock of `targets` at once, and reads the lock blobs of a
/// full set together (a single lock is left to the ordered path).
async fn try_all_at_once(
    env: &Arc<LockEnv>,
    targets: &[(LeaseName, PartitionKey)],
) -> Result<AtOnce> {
    if targets.len() < 2 {
        return Ok(AtOnce::Held { failed: true });
    }
    let tries = join_all(
        targets
            .iter()
            .map(|(name, _)| env.locks.try_acquire(name.as_str())),
    )
    .await;
    let mut guards = Vec::with_capacity(targets.len());
    let (mut held, mut failed) = (false, false);
    for t in tries {
        match t {
            Ok(Some(guard)) => guards.push(guard),
            Ok(None) => held = true,
            Err(e) if e.kind() == crate::ErrorKind::Invalid => {
                give_back(guards).await;
                return Err(e);
            }
            Err(e) => {
                tracing::debug!(error = %e, "trying the locks at once failed; taking them in order");
                failed = true;
            }
        }
    }
    if held || failed {
        give_back(guards).await;
        return Ok(AtOnce::Held { failed });
    }
    // The lock-blob reads, together; a failed one is read again when the
    // lock's holder is recorded.
    join_all(guards.iter().map(|guard| guard.core.snapshot())).await;
    Ok(AtOnce::Taken(guards))
}

/// Takes one lock: waiting until `deadline`, or trying once without one.
async fn take(
    env: &Arc<LockEnv>,
    name: &LeaseName,
    deadline: Option<Instant>,
) -> Result<Option<LeaseGuard>> {
    match deadline {
        Some(deadline) => {
            let left = deadline.saturating_duration_since(Instant::now());
            env.locks.acquire(name.as_str(), left).await.map(Some)
        }
        None => env.locks.try_acquire(name.as_str()).await,
    }
}

/// Gives back the locks of an acquisition that does not go on.
async fn give_back(guards: Vec<LeaseGuard>) {
    join_all(guards.into_iter().map(|guard| async move {
        let name = guard.name().clone();
        if let Err(e) = guard.release().await {
            tracing::warn!(lock = %name, error = %e, "giving a lock back failed; it will expire");
        }
    }))
    .await;
}
