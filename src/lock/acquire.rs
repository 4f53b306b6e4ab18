//! Taking the locks of a unit: in canonical order, giving everything back on
//! any failure, and resolving what earlier holders left pending (a journal
//! is rolled forward; an intent is resolved through its primary) before
//! user code sees a partition.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use tokio::time::Instant;
use tracing::Instrument as _;

use super::env::LockEnv;
use super::journal::{Journal, LockRecord};
use super::name::lock_name;
use super::roll_forward::{RollForwardReport, finished_participants, roll_back, roll_forward};
use crate::error::{Error, Result};
use crate::key::PartitionKey;
use crate::lease::{LeaseGuard, LeaseName};
use crate::telemetry::FinishedBy;

/// How many times taking a set of locks may have to give them back to
/// resolve an intent through its primary before giving up. Each round
/// resolves one intent for good, so only a storm of crashing commits
/// could use them up.
const MAX_ROUNDS: usize = 16;

/// What taking one lock found.
enum Found {
    /// Nothing pending, or a journal rolled forward (its report).
    Ready(Option<RollForwardReport>),
    /// An intent whose primary this acquisition does not hold: the locks
    /// must be given back and the primary resolved first.
    Detour { primary: PartitionKey, txn: String },
}

/// Takes the locks of `targets` (sorted by lock name, distinct) one after
/// the other, waiting up to `timeout` in all (`None`: not at all, and a held
/// lock ends with `Ok(None)`). Returns the guards, in `targets` order, and
/// what was rolled forward.
///
/// An intent found in a lock blob points at a commit whose journal is (or
/// was) in its primary partition, which comes earlier in canonical order.
/// When the primary is among the locks already taken, its journal was rolled
/// forward on taking it, so the intent is stale and is cleared. Otherwise the
/// locks taken are given back (taking the primary now would break the
/// order), the primary is taken alone and its journal rolled forward, and
/// the round starts over, clearing the intent when it is met again.
///
/// # Errors
/// [`Error::Timeout`] when a lock stays held; the errors of taking a lock or
/// rolling a journal forward; [`Error::Inconsistent`] when the rounds run
/// out. Every lock taken is given back first.
pub(super) async fn take_all(
    env: &Arc<LockEnv>,
    targets: &[(LeaseName, PartitionKey)],
    timeout: Option<Duration>,
) -> Result<Option<(Vec<LeaseGuard>, Option<RollForwardReport>)>> {
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut resolved: HashSet<(PartitionKey, String)> = HashSet::new();
    let mut report: Option<RollForwardReport> = None;
    let mut at_once = match try_all_at_once(env, targets).await? {
        AtOnce::Taken(guards) => Some(guards),
        AtOnce::Held { failed: false } if deadline.is_none() => return Ok(None),
        AtOnce::Held { .. } => None,
    };
    for _ in 0..MAX_ROUNDS {
        let mut guards: Vec<LeaseGuard> = Vec::with_capacity(targets.len());
        // Locks taken all at once (first round only) are used in order;
        // what is left of them is given back with the others.
        let mut taken = at_once.take().map(Vec::into_iter);
        let mut detour = None;
        for (i, (name, pk)) in targets.iter().enumerate() {
            let next = match taken.as_mut().and_then(Iterator::next) {
                Some(guard) => Ok(Some(guard)),
                None => take(env, name, deadline).await,
            };
            let guard = match next {
                Ok(Some(guard)) => guard,
                Ok(None) => {
                    guards.extend(taken.into_iter().flatten());
                    give_back(guards).await;
                    return Ok(None);
                }
                Err(e) => {
                    guards.extend(taken.into_iter().flatten());
                    give_back(guards).await;
                    return Err(e);
                }
            };
            let held = &targets[..i];
            let found = resolve_here(env, pk, &guard, held, &resolved).await;
            guards.push(guard);
            match found {
                Ok(Found::Ready(r)) => add(&mut report, r),
                Ok(Found::Detour { primary, txn }) => {
                    detour = Some((primary, txn));
                    break;
                }
                Err(e) => {
                    guards.extend(taken.into_iter().flatten());
                    give_back(guards).await;
                    return Err(e);
                }
            }
        }
        guards.extend(taken.into_iter().flatten());
        let Some((primary, txn)) = detour else {
            return Ok(Some((guards, report)));
        };
        give_back(guards).await;
        tracing::info!(primary = %primary, txn = %txn, "resolving an intent through its primary partition");
        let name = lock_name(env.table_prefix(), &primary)?;
        let Some(guard) = take(env, &name, deadline).await? else {
            return Ok(None);
        };
        let r = finish_journal(env, &primary, &guard).await;
        if let Err(e) = guard.release().await {
            tracing::warn!(partition = %primary, error = %e, "releasing the primary's lock failed; it will expire");
        }
        add(&mut report, r?);
        // The primary was held here after the commit's writer lost it, so
        // no journal of that transaction can appear there any more.
        resolved.insert((primary, txn));
    }
    Err(Error::Inconsistent {
        what: format!(
            "taking the locks of {} partitions met intents of other commits {MAX_ROUNDS} times in a row",
            targets.len()
        ),
    })
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
/// full set together. No request waits on a held lock, so trying out of
/// order cannot deadlock; when any lock is held (or a try fails), what was
/// taken is given back and the caller falls back to taking the locks one
/// after the other in canonical order. A single lock is left to that path.
///
/// # Errors
/// [`Error::Invalid`] for a bad lock name (before any request).
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
            .map(|(name, _)| env.locks().try_acquire(name.as_str())),
    )
    .await;
    let mut guards = Vec::with_capacity(targets.len());
    let mut all = true;
    let mut failed = false;
    for t in tries {
        match t {
            Ok(Some(guard)) => guards.push(guard),
            Ok(None) => all = false,
            Err(e) if e.kind() == crate::ErrorKind::Invalid => {
                give_back(guards).await;
                return Err(e);
            }
            Err(e) => {
                tracing::debug!(error = %e, "trying the locks at once failed; taking them in order");
                all = false;
                failed = true;
            }
        }
    }
    if !all {
        give_back(guards).await;
        return Ok(AtOnce::Held { failed });
    }
    // The lock-blob reads, together; a failed one is read again when the
    // lock's record is looked at.
    join_all(guards.iter().map(LockRecord::pending)).await;
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
            env.locks().acquire(name.as_str(), left).await.map(Some)
        }
        None => env.locks().try_acquire(name.as_str()).await,
    }
}

/// Gives back locks taken by an acquisition that does not go on, all at
/// once.
async fn give_back(guards: Vec<LeaseGuard>) {
    join_all(guards.into_iter().map(|guard| async move {
        let name = guard.name().clone();
        if let Err(e) = guard.release().await {
            tracing::warn!(lock = %name, error = %e, "giving a lock back failed; it will expire");
        }
    }))
    .await;
}

fn add(total: &mut Option<RollForwardReport>, r: Option<RollForwardReport>) {
    if let Some(r) = r {
        let t = total.get_or_insert_with(RollForwardReport::default);
        t.applied += r.applied;
        t.already_applied += r.already_applied;
    }
}

/// Resolves what the lock blob of `pk` (held by `guard`) has pending,
/// where it can be done without taking another lock.
async fn resolve_here(
    env: &Arc<LockEnv>,
    pk: &PartitionKey,
    guard: &LeaseGuard,
    held: &[(LeaseName, PartitionKey)],
    resolved: &HashSet<(PartitionKey, String)>,
) -> Result<Found> {
    match LockRecord::pending(guard).await? {
        None => Ok(Found::Ready(None)),
        Some(LockRecord::Journal(_)) => Ok(Found::Ready(finish_journal(env, pk, guard).await?)),
        Some(LockRecord::Intent(intent)) => {
            let primary =
                PartitionKey::new(&intent.intent_of).map_err(|e| Error::Inconsistent {
                    what: format!(
                        "the intent in the lock of partition {pk:?} names a bad primary: {e}"
                    ),
                })?;
            let primary_held = held.iter().any(|(_, p)| p == &primary);
            if primary_held || resolved.contains(&(primary.clone(), intent.txn.clone())) {
                Journal::clear(guard).await?;
                tracing::info!(partition = %pk, primary = %primary, txn = %intent.txn, "cleared a resolved intent");
                Ok(Found::Ready(None))
            } else {
                Ok(Found::Detour {
                    primary,
                    txn: intent.txn,
                })
            }
        }
    }
}

/// Rolls forward and clears the journal pending in the lock blob of `pk`
/// (held by `guard`), if there is one; an intent there is left alone.
async fn finish_journal(
    env: &Arc<LockEnv>,
    pk: &PartitionKey,
    guard: &LeaseGuard,
) -> Result<Option<RollForwardReport>> {
    let Some(journal) = Journal::pending(guard).await? else {
        return Ok(None);
    };
    let span = tracing::info_span!("leasehold.roll_forward", partition = %pk, ops = journal.ops.len(), undo = ?journal.undo);
    let backend = env.backend().as_ref();
    // A journal with row marks names no intents: its roll-forward looks at
    // every row (and writes only those still carrying its marks).
    let done = if journal.marked {
        std::collections::BTreeSet::new()
    } else {
        finished_participants(env.locks(), env.table_prefix(), &journal).await?
    };
    let report = match journal.undo {
        // A commit refused half-way died while undoing: finish the undo.
        Some(applied) => {
            roll_back(backend, &journal, applied, &done)
                .instrument(span)
                .await?
        }
        None => {
            roll_forward(backend, &journal, &done)
                .instrument(span)
                .await?
        }
    };
    match journal.undo {
        Some(_) => env.telemetry().undo(FinishedBy::NextHolder),
        None => env.telemetry().roll_forward(FinishedBy::NextHolder),
    }
    // The commit that wrote the journal did not finish it: its writer may
    // still be waiting to learn the outcome (see `super::settle`).
    journal.finish(guard, journal.undo.is_none()).await?;
    tracing::info!(
        partition = %pk,
        applied = report.applied,
        already_applied = report.already_applied,
        undo = journal.undo.is_some(),
        "finished a pending journal"
    );
    Ok(Some(report))
}
