//! The wait queue of a lease across processes (see the
//! [module docs](super#turns-between-processes)): one line per
//! registration, `<lease id> <unix ms>` and, for a waiter polling on a
//! schedule, ` <anchor unix ms> <every ms>`; written conditionally on the
//! blob's ETag, retried a few times on a conflict.

use crate::backend::{BlobConditions, LeaseId, Metadata};
use crate::error::{Error, Result};
use crate::key::{BlobName, ETag};

use super::env::LeaseEnv;

use std::time::Duration;

use tokio::time::Instant;

/// How many conflicting writers a queue update outlasts before giving up.
const WRITE_ATTEMPTS: usize = 6;

/// How often a waiter renews its registration: five poll intervals.
pub(crate) fn refresh(env: &LeaseEnv) -> Duration {
    env.settings.options.poll_interval * 5
}

/// After how long without renewal a registration is stale.
pub(crate) fn stale_after(env: &LeaseEnv) -> Duration {
    refresh(env) * 3 + Duration::from_secs(1)
}

/// The first poll `anchor + k × every` after `t` (`anchor` if later), on
/// this process's clock; [`Schedule::next_poll`] is the published form.
pub(crate) fn poll_after(anchor: Instant, every: Duration, t: Instant) -> Instant {
    if anchor > t {
        return anchor;
    }
    let every = every.max(Duration::from_millis(1));
    let steps = t.saturating_duration_since(anchor).as_nanos() / every.as_nanos() + 1;
    anchor + every.saturating_mul(u32::try_from(steps).unwrap_or(u32::MAX))
}

/// A waiter's registration in a lease's wait queue.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Queued {
    pub(crate) id: LeaseId,
    pub(crate) renewed_at: Option<Instant>,
    /// Whether the id is published.
    pub(crate) registered: bool,
    /// The first poll of its schedule (waits with a deadline only).
    pub(crate) anchor: Option<Instant>,
}

impl Queued {
    pub(crate) fn new(id: LeaseId) -> Self {
        Queued {
            id,
            renewed_at: None,
            registered: false,
            anchor: None,
        }
    }

    /// Whether the registration is to be written or renewed at `now`.
    pub(crate) fn due(&self, now: Instant, refresh: Duration) -> bool {
        self.renewed_at
            .is_none_or(|at| now.saturating_duration_since(at) >= refresh)
    }
}

/// The times a registered waiter polls: `anchor_ms + k × every_ms` (unix
/// milliseconds) for every whole `k`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Schedule {
    pub(crate) anchor_ms: i64,
    pub(crate) every_ms: i64,
}

impl Schedule {
    /// The first poll at or after `after_ms`.
    pub(crate) fn next_poll(&self, after_ms: i64) -> i64 {
        let every = self.every_ms.max(1);
        let behind = after_ms.saturating_sub(self.anchor_ms);
        if behind <= 0 {
            return self.anchor_ms;
        }
        let steps = behind.saturating_add(every - 1) / every;
        self.anchor_ms.saturating_add(steps.saturating_mul(every))
    }
}

/// One registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) id: LeaseId,
    /// When its waiter last renewed it (unix milliseconds).
    seen_ms: i64,
    pub(crate) schedule: Option<Schedule>,
}

/// The queue blob of one lease.
#[derive(Debug)]
pub(crate) struct WaitQueue<'a> {
    env: &'a LeaseEnv,
    blob: BlobName,
}

fn parse(body: &[u8]) -> Vec<Entry> {
    String::from_utf8_lossy(body)
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_ascii_whitespace();
            let id = LeaseId::from_uuid(fields.next()?.parse().ok()?);
            let seen_ms = fields.next()?.parse().ok()?;
            let schedule = match (fields.next(), fields.next()) {
                (Some(anchor), Some(every)) => Some(Schedule {
                    anchor_ms: anchor.parse().ok()?,
                    every_ms: every.parse().ok().filter(|e: &i64| *e > 0)?,
                }),
                _ => None,
            };
            Some(Entry {
                id,
                seen_ms,
                schedule,
            })
        })
        .collect()
}

fn render(entries: &[Entry]) -> Vec<u8> {
    entries
        .iter()
        .map(|e| {
            let (id, seen) = (e.id.as_uuid(), e.seen_ms);
            match e.schedule {
                Some(s) => format!("{id} {seen} {} {}\n", s.anchor_ms, s.every_ms),
                None => format!("{id} {seen}\n"),
            }
        })
        .collect::<String>()
        .into_bytes()
}

impl<'a> WaitQueue<'a> {
    /// The queue beside the lease blob `lease`.
    pub(crate) fn of(env: &'a LeaseEnv, lease: &BlobName) -> Result<Self> {
        Ok(WaitQueue {
            env,
            blob: BlobName::new(format!("{}.waiters", lease.as_str()))?,
        })
    }

    fn now_ms(&self) -> i64 {
        self.env.wall_ms(Instant::now())
    }

    fn is_fresh(&self, e: &Entry, now_ms: i64) -> bool {
        let stale = i64::try_from(stale_after(self.env).as_millis()).unwrap_or(i64::MAX);
        now_ms.saturating_sub(e.seen_ms) <= stale
    }

    async fn read(&self) -> Result<(Vec<Entry>, Option<ETag>)> {
        let env = self.env;
        match env
            .backend
            .get_blob(&env.settings.container, &self.blob)
            .await?
        {
            Some(blob) => Ok((parse(&blob.body), Some(blob.properties.etag))),
            None => Ok((Vec::new(), None)),
        }
    }

    /// The first fresh registration whose id is not one of `own` (this
    /// process's, lingering while being removed), and the blob's ETag.
    pub(crate) async fn head_excluding(
        &self,
        own: &[Option<LeaseId>],
    ) -> Result<(Option<Entry>, Option<ETag>)> {
        let (entries, etag) = self.read().await?;
        let now = self.now_ms();
        let head =
            (entries.into_iter()).find(|e| self.is_fresh(e, now) && !own.contains(&Some(e.id)));
        Ok((head, etag))
    }

    /// Deletes the queue blob (conditioned on the ETag read) unless it
    /// holds a head: `Ok(false)` when somebody waits. Stale registrations do
    /// not keep it: the holder's lease was passed to none of them.
    pub(crate) async fn remove_if_idle(&self, own: &[Option<LeaseId>]) -> Result<bool> {
        let env = self.env;
        let etag = match self.head_excluding(own).await? {
            (Some(_), _) => return Ok(false),
            (None, None) => return Ok(true),
            (None, Some(etag)) => etag,
        };
        match env
            .backend
            .delete_blob(
                &env.settings.container,
                &self.blob,
                &BlobConditions::if_match(etag),
            )
            .await
        {
            Ok(()) | Err(Error::NotFound { .. }) => Ok(true),
            // Written since the read: a waiter registered.
            Err(Error::Conflict { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Applies `change` to the registrations (stale ones dropped first when
    /// `drop_stale`); returns the stale ones ahead of the first fresh one.
    async fn update(
        &self,
        drop_stale: bool,
        change: impl Fn(&mut Vec<Entry>, i64),
    ) -> Result<Vec<Entry>> {
        let env = self.env;
        let mut last = None;
        for _ in 0..WRITE_ATTEMPTS {
            let (entries, etag) = self.read().await?;
            let now = self.now_ms();
            let stale_head: Vec<Entry> = entries
                .iter()
                .take_while(|e| !self.is_fresh(e, now))
                .copied()
                .collect();
            let mut kept: Vec<Entry> = entries
                .iter()
                .filter(|e| !drop_stale || self.is_fresh(e, now))
                .copied()
                .collect();
            change(&mut kept, now);
            if kept == entries {
                return Ok(stale_head);
            }
            let conditions = match etag {
                Some(etag) => BlobConditions::if_match(etag),
                None => BlobConditions::create_only(),
            };
            match env
                .backend
                .put_blob(
                    &env.settings.container,
                    &self.blob,
                    render(&kept),
                    &Metadata::new(),
                    &conditions,
                )
                .await
            {
                Ok(_) => return Ok(stale_head),
                Err(e @ (Error::Conflict { .. } | Error::AlreadyExists { .. })) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::invalid("wait queue", "no attempt was made")))
    }

    /// Registers `id` at the tail, or renews it in place; returns the stale
    /// registrations dropped ahead of it (a lease may be handed to one).
    pub(crate) async fn register(
        &self,
        id: LeaseId,
        schedule: Option<Schedule>,
    ) -> Result<Vec<Entry>> {
        self.update(true, |entries, now| {
            match entries.iter_mut().find(|e| e.id == id) {
                Some(e) => {
                    e.seen_ms = now;
                    e.schedule = schedule;
                }
                None => entries.push(Entry {
                    id,
                    seen_ms: now,
                    schedule,
                }),
            }
        })
        .await
    }

    /// Removes the registration of `id` (stale ones stay, for the next
    /// waiter that registers to take over a lease handed to one).
    pub(crate) async fn leave(&self, id: LeaseId) -> Result<()> {
        self.update(false, |entries, _| entries.retain(|e| e.id != id))
            .await
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_bad_lines_are_skipped() {
        let a = Entry {
            id: LeaseId::new_random(),
            seen_ms: 1_700_000_000_123,
            schedule: None,
        };
        let b = Entry {
            id: LeaseId::new_random(),
            seen_ms: 5,
            schedule: Some(Schedule {
                anchor_ms: 1_700_000_000_200,
                every_ms: 100,
            }),
        };
        let mut body = render(&[a, b]);
        body.extend_from_slice(b"garbage\nnot-a-uuid 12\n");
        body.extend_from_slice(format!("{} 7 8 0\n", LeaseId::new_random().as_uuid()).as_bytes());
        assert_eq!(parse(&body), vec![a, b]);
    }

    #[test]
    fn the_next_poll_is_on_the_schedule_and_not_before_the_time_given() {
        let s = Schedule {
            anchor_ms: 1000,
            every_ms: 100,
        };
        assert_eq!(s.next_poll(0), 1000);
        assert_eq!(s.next_poll(1000), 1000);
        assert_eq!(s.next_poll(1001), 1100);
        assert_eq!(s.next_poll(1100), 1100);
        assert_eq!(s.next_poll(1234), 1300);
    }
}
