//! Lease checks: the lease manager, its guards, run-once, leader election
//! and reservations, over the blob backend under test.
//!
//! Each check builds several "processes" on the context's backend (each
//! process wraps it in its own [`FaultyBackend`] or [`CountingBackend`]).
//! With [`Clock::Paused`] they run with 30 s leases; with [`Clock::Real`]
//! (a service) with 15 s leases. Every wait is derived from the lease
//! duration.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold::backend::Op;
use leasehold::backend::{BlobBackend, BlobConditions, LeaseState, Metadata};
use leasehold::lease::{
    LeaderOptions, LeaseManager, LeaseOptions, OnceOutcome, OnceState, Reservation,
};
use leasehold::testing::{CountingBackend, FaultInjector, FaultyBackend};
use leasehold::{Error, ErrorKind};
use tokio::sync::oneshot;
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep, timeout};
use tokio_util::sync::CancellationToken;

use super::{Clock, Ctx};

crate::checks::checks! {

/// What a run of the suite is parameterised by.
#[derive(Debug, Clone)]
struct SuiteConfig {
    /// The lease duration (15–60 s).
    pub lease: Duration,
    /// Prefix of every lease name, so runs against a shared service do not
    /// meet.
    pub prefix: String,
    /// Forced failovers in the leader test.
    pub failovers: usize,
    /// How often waiting processes poll a held lease (`None`: the default,
    /// 100 ms).
    pub poll: Option<Duration>,
    /// Whether the checks run on real time (a service whose replies may be
    /// slow on a busy machine) rather than paused time.
    pub real_time: bool,
}

impl SuiteConfig {
    /// The context's lease duration and prefix; on paused time 100 forced
    /// failovers and the default poll interval, on real time 2 forced
    /// failovers (each takes about one lease duration) and polls every
    /// 500 ms, so that checks running side by side (50 processes polling
    /// one lease in one of them) stay within what one emulator answers
    /// promptly.
    pub fn of(ctx: &Ctx) -> Self {
        let (failovers, poll) = match ctx.clock() {
            Clock::Paused => (100, None),
            Clock::Real => (2, Some(Duration::from_millis(500))),
        };
        SuiteConfig {
            lease: ctx.lease_duration(),
            prefix: ctx.prefix().to_owned(),
            failovers,
            poll,
            real_time: ctx.clock() == Clock::Real,
        }
    }

    /// For checks that count requests: on real time the longest lease
    /// (60 s), so that no renewal falls within what is counted however slow
    /// the service answers; on paused time nothing changes.
    pub fn counting(self, ctx: &Ctx) -> Self {
        match ctx.clock() {
            Clock::Paused => self,
            Clock::Real => SuiteConfig {
                lease: Duration::from_secs(60),
                ..self
            },
        }
    }

    /// Options for one "process".
    pub fn options(&self, owner: &str) -> LeaseOptions {
        self.polling(
            LeaseOptions::new()
                .with_duration(self.lease)
                .with_owner(owner),
        )
    }

    /// `options` with this configuration's poll interval.
    pub fn polling(&self, options: LeaseOptions) -> LeaseOptions {
        match self.poll {
            Some(poll) => options.with_poll_interval(poll),
            None => options,
        }
    }

    /// A lease name unique to this run.
    pub fn name(&self, base: &str) -> String {
        format!("{}-{base}", self.prefix)
    }

    /// The renew interval the options give (a third of the lease).
    pub fn renew_interval(&self) -> Duration {
        self.lease / 3
    }
}

/// The context's backend (clones share storage) and suite settings.
fn suite(ctx: &Ctx) -> (Arc<dyn leasehold::backend::Backend>, SuiteConfig) {
    (ctx.backend().clone(), SuiteConfig::of(ctx))
}

/// One simulated process: a manager on its own fault-injecting wrapper.
struct Process {
    pub leases: LeaseManager,
    pub faults: FaultInjector,
}

fn process<B: BlobBackend + Clone>(backend: &B, cfg: &SuiteConfig, owner: &str) -> Process {
    let faulty = FaultyBackend::new(backend.clone());
    let faults = faulty.injector();
    let leases = LeaseManager::new(Arc::new(faulty), cfg.options(owner)).expect("valid options");
    Process { leases, faults }
}

/// Takes and releases `name` once, so its container and blob exist.
async fn warm_up(leases: &LeaseManager, name: &str) {
    leases
        .acquire(name, LONG)
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
}

/// A manager whose requests are counted.
fn counted<B: BlobBackend + Clone>(
    backend: &B,
    cfg: &SuiteConfig,
    owner: &str,
) -> (LeaseManager, leasehold::testing::RequestCounter) {
    let counting = CountingBackend::new(backend.clone());
    let counter = counting.counter();
    let leases = LeaseManager::new(Arc::new(counting), cfg.options(owner)).expect("valid options");
    (leases, counter)
}

/// Closed intervals recorded by critical sections.
#[derive(Clone, Default)]
struct Intervals(Arc<Mutex<Vec<(Instant, Instant, String)>>>);

impl Intervals {
    pub fn push(&self, start: Instant, end: Instant, who: impl Into<String>) {
        assert!(start <= end);
        self.0.lock().unwrap().push((start, end, who.into()));
    }

    pub fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// Panics if two intervals overlap (touching ends are allowed: one
    /// holder ending at the instant the next begins).
    pub fn assert_disjoint(&self) {
        let mut all = self.0.lock().unwrap().clone();
        all.sort_by_key(|(s, e, _)| (*s, *e));
        for w in all.windows(2) {
            let (s0, e0, a) = &w[0];
            let (s1, _, b) = &w[1];
            assert!(
                s1 >= e0,
                "{a} held [{:?}, {:?}] and {b} started at {:?}",
                *s0 - all[0].0,
                *e0 - all[0].0,
                *s1 - all[0].0
            );
        }
    }
}

const LONG: Duration = Duration::from_secs(3600);

/// 50 contenders in 10 processes take one lease in turn.
timed async fn mutual_exclusion_among_50_contenders_in_10_processes(ctx) {
    let _turn = ctx.contention_turn().await;
    let (backend, cfg) = suite(ctx);
    mutual_exclusion(backend, cfg, 10, 5).await;
}

/// 50 contenders in 50 processes take one lease in turn.
timed async fn mutual_exclusion_among_50_contenders_in_50_processes(ctx) {
    let _turn = ctx.contention_turn().await;
    let (backend, cfg) = suite(ctx);
    mutual_exclusion(backend, cfg, 50, 1).await;
}

/// `processes × tasks` contenders (each process a manager of its own) take
/// one lease in turn; their critical sections never overlap.
async fn mutual_exclusion<B: BlobBackend + Clone>(
    backend: B,
    cfg: SuiteConfig,
    processes: usize,
    tasks_per_process: usize,
) {
    let name = cfg.name(&format!("mutex-{processes}x{tasks_per_process}"));
    let intervals = Intervals::default();
    let inside = Arc::new(AtomicUsize::new(0));
    let mut tasks = JoinSet::new();
    for p in 0..processes {
        let proc = process(&backend, &cfg, &format!("proc-{p}"));
        for t in 0..tasks_per_process {
            let leases = proc.leases.clone();
            let (name, intervals, inside) = (name.clone(), intervals.clone(), inside.clone());
            tasks.spawn(async move {
                let guard = leases.acquire(&name, LONG).await.expect("acquire");
                eprintln!(
                    "DIAG mutex {p}/{t} handed over {} at {:?}",
                    guard.is_handed_over(),
                    Instant::now()
                );
                let start = Instant::now();
                assert_eq!(
                    inside.fetch_add(1, Ordering::SeqCst),
                    0,
                    "two holders at once"
                );
                sleep(Duration::from_millis(50)).await;
                guard
                    .ensure_valid(Duration::from_secs(1))
                    .expect("still valid");
                inside.fetch_sub(1, Ordering::SeqCst);
                let end = Instant::now();
                intervals.push(start, end, format!("proc-{p}/task-{t}"));
                guard.release().await.expect("release");
            });
        }
    }
    while let Some(r) = tasks.join_next().await {
        r.expect("contender panicked");
    }
    assert_eq!(intervals.len(), processes * tasks_per_process);
    intervals.assert_disjoint();
}

/// Renewal holds a lease of the context's duration for ten durations.
timed async fn renewal_holds_a_lease_for_ten_durations(ctx) {
    let (backend, cfg) = suite(ctx);
    renewal_holds_for_ten_durations(backend, cfg).await;
}

/// Renewal holds the shortest lease (15 s) for ten durations.
timed async fn renewal_holds_a_fifteen_second_lease_for_ten_durations(ctx) {
    let (backend, cfg) = suite(ctx);
    let cfg = SuiteConfig {
        lease: Duration::from_secs(15),
        ..cfg
    };
    renewal_holds_for_ten_durations(backend, cfg).await;
}

/// Background renewal keeps a lease for ten times its duration: nobody else
/// gets it meanwhile, and it renews about every third of the duration.
async fn renewal_holds_for_ten_durations<B: BlobBackend + Clone>(backend: B, cfg: SuiteConfig) {
    let name = cfg.name("renewal");
    let (holder, counter) = counted(&backend, &cfg, "holder");
    let other = process(&backend, &cfg, "other");
    let guard = holder.acquire(&name, LONG).await.expect("acquire");
    let start = Instant::now();
    while start.elapsed() < cfg.lease * 10 {
        sleep(cfg.lease / 4).await;
        assert!(
            other
                .leases
                .try_acquire(&name)
                .await
                .expect("try")
                .is_none(),
            "taken after {:?}",
            start.elapsed()
        );
        // Renewed every third of the duration, so about two thirds are
        // left just before a renewal; on paused time (instant replies) at
        // least a third is always left. On real time a slow reply on a busy
        // machine may take more of it: still valid is the check there.
        let margin = if cfg.real_time {
            Duration::ZERO
        } else {
            cfg.lease / 3
        };
        guard.ensure_valid(margin).expect("valid");
    }
    let renews = counter.get(Op::RenewLease);
    assert!(renews >= 29, "only {renews} renewals in 10 lease durations");
    guard.release().await.expect("release");
    assert!(
        other
            .leases
            .try_acquire(&name)
            .await
            .expect("try")
            .is_some()
    );
}

/// A renew request that hangs still ends in `lost` before the service's lease
/// could expire: the local deadline does not wait for the request.
timed async fn hanging_renew_fires_lost_before_the_lease_expires(ctx) {
    let (backend, cfg) = suite(ctx);
    let name = cfg.name("hang");
    let holder = process(&backend, &cfg, "holder");
    let other = process(&backend, &cfg, "other");
    // The lease blob exists, so the acquire is a single request sent now.
    warm_up(&holder.leases, &name).await;
    let sent = Instant::now();
    let guard = holder.leases.acquire(&name, LONG).await.expect("acquire");
    // Every renew from now on hangs.
    for n in 1..=100 {
        holder.faults.hang_nth(Some(Op::RenewLease), n);
    }
    let lost = guard.lost();
    timeout(cfg.lease * 2, lost).await.expect("lost() fired");
    let lost_at = Instant::now();
    assert!(
        lost_at < sent + cfg.lease,
        "lost after {:?}, the lease lasts {:?}",
        lost_at - sent,
        cfg.lease
    );
    assert!(guard.is_lost());
    assert_eq!(guard.remaining(), Duration::ZERO);
    let e = guard.ensure_valid(Duration::ZERO).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LeaseLost);
    // At that instant the service still has it leased: nobody else could
    // have taken it yet. (The service's lease began after `sent`, so a
    // reply that arrives before `sent + lease` was given while it held;
    // a later one, on a slow machine, proves nothing either way.)
    let d = other.leases.describe(&name).await.expect("describe");
    if Instant::now() < sent + cfg.lease {
        assert_eq!(d.state, LeaseState::Leased);
    }
    let taken = other.leases.try_acquire(&name).await.expect("try");
    if Instant::now() < sent + cfg.lease {
        assert!(taken.is_none());
    }
    if let Some(early) = taken {
        early.release().await.expect("release");
    }
    // After the service's expiry, another process gets it.
    let g = other
        .leases
        .acquire(&name, cfg.lease)
        .await
        .expect("taken after expiry");
    assert!(Instant::now() >= sent + cfg.lease);
    assert_eq!(
        guard.release().await.unwrap_err().kind(),
        ErrorKind::LeaseLost
    );
    g.release().await.expect("release");
}

/// A renew that is never answered (a connection that stopped answering) is
/// given up and sent again well before the lease's deadline: the lease is
/// kept, and nobody else can take it.
timed async fn a_renew_left_unanswered_is_sent_again_and_the_lease_kept(ctx) {
    let (backend, cfg) = suite(ctx);
    let name = cfg.name("resend");
    let holder = process(&backend, &cfg, "holder");
    let other = process(&backend, &cfg, "other");
    warm_up(&holder.leases, &name).await;
    let guard = holder.leases.acquire(&name, LONG).await.expect("acquire");
    // The first renew hangs; the ones after it are answered.
    holder.faults.hang_nth(Some(Op::RenewLease), 1);
    sleep(cfg.lease * 2).await;
    assert!(
        !guard.is_lost(),
        "a hanging renew lost the lease: {:?}",
        guard.ensure_valid(Duration::ZERO).err()
    );
    assert!(
        other
            .leases
            .try_acquire(&name)
            .await
            .expect("try")
            .is_none(),
        "another process took a lease whose holder renews it"
    );
    guard.release().await.expect("release");
}

/// An operator's break fires `lost()` and the service refuses writes made
/// under the broken lease.
timed(oauth) async fn external_break_fires_lost_and_fences_writes(ctx) {
    let (backend, cfg) = suite(ctx);
    let operator = process(&backend, &cfg, "operator");
    let holder = process(&backend, &cfg, "holder");

    // Noticed by the next renewal.
    let name = cfg.name("break-renew");
    let guard = holder.leases.acquire(&name, LONG).await.expect("acquire");
    let left = operator
        .leases
        .break_lease(&name, Some(Duration::ZERO))
        .await
        .expect("break");
    assert_eq!(left, Some(Duration::ZERO));
    let broken_at = Instant::now();
    timeout(cfg.renew_interval() + Duration::from_secs(3), guard.lost())
        .await
        .expect("lost() after the next renewal");
    assert!(broken_at.elapsed() <= cfg.renew_interval() + Duration::from_secs(3));
    let e = guard.ensure_valid(Duration::ZERO).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LeaseLost);
    assert!(
        e.code().is_some_and(|c| c.starts_with("LeaseIsBroken")),
        "{e}"
    );
    // Each fact once: neither the code nor the kind is repeated.
    let text = e.to_string();
    assert_eq!(text.matches(e.code().unwrap_or("-")).count(), 1, "{text}");
    assert_eq!(text.matches("lease lost").count(), 1, "{text}");
    // Writes that carry the old lease id are refused by the service.
    let raw = backend
        .put_blob(
            operator.leases.container(),
            &leasehold::lease::LeaseName::new(name.as_str())
                .unwrap()
                .blob_name()
                .unwrap(),
            b"{}".to_vec(),
            &Metadata::new(),
            &BlobConditions::leased(guard.lease_id()),
        )
        .await
        .unwrap_err();
    assert_eq!(raw.kind(), ErrorKind::LeaseLost, "{raw}");
    drop(guard);
    assert!(
        operator
            .leases
            .try_acquire(&name)
            .await
            .expect("try")
            .is_some()
    );

    // Noticed at once by a write under the lease.
    let name = cfg.name("break-write");
    let (writer, counter) = counted(&backend, &cfg, "writer");
    let guard = writer.acquire(&name, LONG).await.expect("acquire");
    guard
        .update_metadata(|m| {
            m.insert("step".into(), "1".into());
        })
        .await
        .expect("write");
    operator
        .leases
        .break_lease(&name, Some(Duration::ZERO))
        .await
        .expect("break");
    assert!(!guard.is_lost(), "not noticed yet");
    let e = guard
        .update_metadata(|m| {
            m.insert("step".into(), "2".into());
        })
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LeaseLost, "{e}");
    timeout(Duration::from_millis(1), guard.lost())
        .await
        .expect("lost() fires with the refused write");
    // The write made before the break is still there.
    let d = operator.leases.describe(&name).await.unwrap();
    assert_eq!(d.metadata.get("step").map(String::as_str), Some("1"));
    // Nothing more is sent under a lease known to be lost.
    counter.reset();
    assert_eq!(
        guard.update_metadata(|_| {}).await.unwrap_err().kind(),
        ErrorKind::LeaseLost
    );
    assert_eq!(
        guard.advance_epoch().await.unwrap_err().kind(),
        ErrorKind::LeaseLost
    );
    assert_eq!(
        guard.release().await.unwrap_err().kind(),
        ErrorKind::LeaseLost
    );
    assert_eq!(counter.total(), 0, "{counter:?}");
}

/// Run-once with 10 concurrent callers (5 processes × 2 tasks) runs the work
/// exactly once; after a crash between the `started` and `done` markers the
/// next caller runs it again and is told so.
timed(oauth) async fn do_once_runs_once_among_10_callers_and_again_after_a_crash(ctx) {
    let _turn = ctx.contention_turn().await;
    let (backend, cfg) = suite(ctx);
    async fn ten_callers<B: BlobBackend + Clone>(
        backend: &B,
        cfg: &SuiteConfig,
        name: &str,
        runs: Arc<AtomicUsize>,
        tag: &str,
    ) -> Vec<OnceOutcome<usize>> {
        let mut tasks = JoinSet::new();
        for p in 0..5 {
            let proc = process(backend, cfg, &format!("{tag}-{p}"));
            for _ in 0..2 {
                let (leases, runs, name) = (proc.leases.clone(), runs.clone(), name.to_owned());
                let work_time = cfg.lease * 2;
                tasks.spawn(async move {
                    leases
                        .do_once(&name, |ctx| async move {
                            let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
                            // Long enough that the lease must be renewed while
                            // the others wait.
                            sleep(work_time).await;
                            ctx.lease().ensure_valid(Duration::from_secs(1))?;
                            Ok::<_, Error>(n)
                        })
                        .await
                        .expect("do_once")
                });
            }
        }
        let mut outcomes = Vec::new();
        while let Some(r) = tasks.join_next().await {
            outcomes.push(r.expect("caller panicked"));
        }
        outcomes
    }

    let name = cfg.name("once-a");
    let runs = Arc::new(AtomicUsize::new(0));
    let outcomes = ten_callers(&backend, &cfg, &name, runs.clone(), "a").await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let ran: Vec<_> = outcomes
        .iter()
        .filter(|o| matches!(o, OnceOutcome::Ran { .. }))
        .collect();
    assert_eq!(
        ran,
        [&OnceOutcome::Ran {
            output: 1,
            previous_attempt_unfinished: false
        }]
    );
    assert_eq!(
        outcomes
            .iter()
            .filter(|o| **o == OnceOutcome::AlreadyDone)
            .count(),
        9
    );

    // A process dies while running the work: "started" stays, "done" never
    // comes.
    let name = cfg.name("once-b");
    let doomed = process(&backend, &cfg, "doomed");
    let (started_tx, started_rx) = oneshot::channel();
    let task = {
        let (leases, name) = (doomed.leases.clone(), name.clone());
        tokio::spawn(async move {
            let _ = leases
                .do_once(&name, |_ctx| async move {
                    let _ = started_tx.send(());
                    std::future::pending::<()>().await;
                    Ok::<_, Error>(0usize)
                })
                .await;
        })
    };
    started_rx.await.expect("work started");
    doomed.faults.die_now();
    task.abort();
    let _ = task.await;
    let observer = process(&backend, &cfg, "observer");
    assert_eq!(
        observer.leases.once_state(&name).await.unwrap(),
        OnceState::Started { attempts: 1 }
    );

    let runs = Arc::new(AtomicUsize::new(0));
    let outcomes = ten_callers(&backend, &cfg, &name, runs.clone(), "b").await;
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "ran once more after the crash"
    );
    let ran: Vec<_> = outcomes
        .iter()
        .filter(|o| matches!(o, OnceOutcome::Ran { .. }))
        .collect();
    assert_eq!(
        ran,
        [&OnceOutcome::Ran {
            output: 1,
            previous_attempt_unfinished: true
        }]
    );
    assert_eq!(
        observer.leases.once_state(&name).await.unwrap(),
        OnceState::Done { attempts: 2 }
    );
}

/// Five candidates, `cfg.failovers` forced failovers (the leader's process
/// stops reaching storage): never two leaders at the same instant, and each
/// term's epoch is higher than the last.
timed async fn leader_election_with_5_candidates_never_overlaps(ctx) {
    let _turn = ctx.contention_turn().await;
    let (backend, cfg) = suite(ctx);
    let name = cfg.name("leader");
    let intervals = Intervals::default();
    let leader: Arc<Mutex<Option<(usize, u64)>>> = Arc::new(Mutex::new(None));
    let epochs: Arc<Mutex<Vec<u64>>> = Arc::new(Mutex::new(Vec::new()));
    let stop = CancellationToken::new();
    let mut candidates = Vec::new();
    let mut tasks = JoinSet::new();
    for c in 0..5 {
        let proc = process(&backend, &cfg, &format!("candidate-{c}"));
        candidates.push(proc.faults.clone());
        let (leases, name, intervals, leader, epochs) = (
            proc.leases.clone(),
            name.clone(),
            intervals.clone(),
            leader.clone(),
            epochs.clone(),
        );
        let options = LeaderOptions::new().with_stop(stop.clone());
        tasks.spawn(async move {
            leases
                .run_as_leader(&name, options, |ctx| {
                    let (intervals, leader, epochs) =
                        (intervals.clone(), leader.clone(), epochs.clone());
                    async move {
                        let start = Instant::now();
                        {
                            let mut l = leader.lock().unwrap();
                            assert!(l.is_none(), "{l:?} still leads as {c} takes over");
                            *l = Some((c, ctx.epoch()));
                        }
                        epochs.lock().unwrap().push(ctx.epoch());
                        ctx.cancelled().await;
                        *leader.lock().unwrap() = None;
                        intervals.push(start, Instant::now(), format!("candidate-{c}"));
                    }
                })
                .await
                .expect("run_as_leader");
        });
    }

    let mut failovers = 0;
    let t0 = Instant::now();
    let mut last: Option<(usize, u64)> = None;
    while failovers < cfg.failovers {
        // Wait for a new term.
        let current = loop {
            let now = *leader.lock().unwrap();
            match now {
                Some(l) if Some(l) != last => break l,
                _ => sleep(Duration::from_millis(200)).await,
            }
        };
        if let Some((old, _)) = last {
            candidates[old].revive();
            failovers += 1;
        }
        last = Some(current);
        candidates[current.0].die_now();
    }
    candidates[last.expect("a leader").0].revive();
    stop.cancel();
    while let Some(r) = tasks.join_next().await {
        r.expect("candidate panicked");
    }
    intervals.assert_disjoint();
    eprintln!(
        "DIAG leader terms={} failovers={failovers} virtual={:?}",
        intervals.len(),
        t0.elapsed()
    );
    assert!(intervals.len() > cfg.failovers, "{} terms", intervals.len());
    let epochs = epochs.lock().unwrap().clone();
    assert!(epochs.windows(2).all(|w| w[0] < w[1]), "{epochs:?}");
}

/// The reservation log keeps the newest ten records, oldest first, and is
/// readable without the lease.
timed async fn reservation_log_stays_bounded_and_ordered(ctx) {
    let (backend, cfg) = suite(ctx);
    let job = cfg.name("job");
    let procs: Vec<Process> = (0..3)
        .map(|i| process(&backend, &cfg, &format!("worker-{i}")))
        .collect();
    let reservation = Duration::from_secs(2);
    for i in 0..15 {
        let me = &procs[i % 3].leases;
        let r = me
            .try_reserve(&job, reservation)
            .await
            .expect("reserve")
            .expect("free");
        assert!(me.has_reservation(&job));
        assert!(r.is_active());
        assert!(me.try_reserve(&job, reservation).await.unwrap().is_none());
        for other in procs.iter().filter(|p| !std::ptr::eq(&p.leases, me)) {
            assert!(
                other
                    .leases
                    .try_reserve(&job, reservation)
                    .await
                    .unwrap()
                    .is_none()
            );
            assert!(!other.leases.has_reservation(&job));
        }
        if i % 2 == 0 {
            assert!(me.cancel_reservation(&job).await.expect("cancel"));
        } else {
            // Let it run out; renewal stops and the lease is released then.
            sleep(reservation + Duration::from_millis(500)).await;
        }
        assert!(!me.has_reservation(&job));
        assert!(!r.is_active());
        assert!(!me.cancel_reservation(&job).await.unwrap());
    }
    let log = procs[0].leases.reservation_log(&job).await.expect("log");
    assert_eq!(log.len(), Reservation::LOG_LEN);
    let seqs: Vec<u64> = log.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (6..=15).collect::<Vec<_>>());
    for r in &log {
        let i = (r.seq - 1) as usize;
        assert_eq!(r.holder, format!("worker-{}", i % 3));
        assert_eq!(r.cancelled_at.is_some(), i.is_multiple_of(2), "{r:?}");
        assert!(r.until > r.reserved_at);
    }
    // Order is by `seq`: the times come from each holder's own clock.
}

/// 100 units queued in one process share one blob lease: exactly one acquire
/// and one release, the lease handed from unit to unit (within the tenure
/// bound).
timed async fn local_sharing_serves_100_units_with_one_acquire_and_one_release(ctx) {
    let (backend, cfg) = suite(ctx);
    let cfg = cfg.counting(ctx);
    let name = cfg.name("local");
    // 100 units of 20 ms outlast the default tenure (2 s): lift it, as
    // nobody else wants the lease.
    let counting = CountingBackend::new(backend.clone());
    let counter = counting.counter();
    let leases = LeaseManager::new(
        Arc::new(counting),
        cfg.options("local").with_handover_limit(1000, LONG),
    )
    .expect("valid options");
    // First use creates the container and blob; count from a warm start.
    warm_up(&leases, &name).await;
    counter.reset();

    let intervals = Intervals::default();
    let kinds = Arc::new(Mutex::new(BTreeMap::<bool, usize>::new()));
    let mut tasks = JoinSet::new();
    for u in 0..100 {
        let (leases, name, intervals, kinds) = (
            leases.clone(),
            name.clone(),
            intervals.clone(),
            kinds.clone(),
        );
        tasks.spawn(async move {
            let guard = leases.acquire(&name, LONG).await.expect("acquire");
            let start = Instant::now();
            *kinds
                .lock()
                .unwrap()
                .entry(guard.is_handed_over())
                .or_default() += 1;
            sleep(Duration::from_millis(20)).await;
            guard.ensure_valid(Duration::from_secs(1)).expect("valid");
            intervals.push(start, Instant::now(), format!("unit-{u}"));
            guard.release().await.expect("release");
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.expect("unit panicked");
    }
    intervals.assert_disjoint();
    assert_eq!(counter.get(Op::AcquireLease), 1, "{counter:?}");
    assert_eq!(counter.get(Op::ReleaseLease), 1, "{counter:?}");
    let kinds = kinds.lock().unwrap().clone();
    assert_eq!(kinds.get(&false), Some(&1));
    assert_eq!(kinds.get(&true), Some(&99));
}

/// Waits until another task of this process queues for `guard`'s lease
/// (at most 30 s, then the check that follows fails).
async fn queued_behind(guard: &leasehold::lease::LeaseGuard) {
    let started = tokio::time::Instant::now();
    while !guard.queued_locally() && started.elapsed() < Duration::from_secs(30) {
        sleep(Duration::from_millis(1)).await;
    }
}

/// A handed-over guard sees what the previous unit wrote without reading the
/// blob; a fresh one reads it.
timed async fn hand_over_keeps_the_blob_view_without_reading(ctx) {
    let (backend, cfg) = suite(ctx);
    let cfg = cfg.counting(ctx);
    let name = cfg.name("view");
    let (leases, counter) = counted(&backend, &cfg, "view");
    let first = leases.acquire(&name, LONG).await.unwrap();
    assert!(!first.is_handed_over());
    first
        .update_metadata(|m| {
            m.insert("note".into(), "op".into());
        })
        .await
        .unwrap();
    assert_eq!(first.advance_epoch().await.unwrap(), 1);
    let waiting = tokio::spawn({
        let (leases, name) = (leases.clone(), name.clone());
        async move { leases.acquire(&name, LONG).await }
    });
    // Let the second unit queue locally (on a busy machine its task may
    // take a while to run).
    queued_behind(&first).await;
    first.release().await.unwrap();
    let second = waiting.await.unwrap().unwrap();
    assert!(second.is_handed_over());
    counter.reset();
    let seen = second.metadata().await.unwrap();
    assert_eq!(seen.get("note").map(String::as_str), Some("op"));
    assert_eq!(second.epoch().await.unwrap(), 1);
    assert_eq!(counter.total(), 0, "hand-over reads nothing: {counter:?}");
    second
        .update_metadata(|m| {
            m.remove("note");
        })
        .await
        .unwrap();
    second.release().await.unwrap();

    let other = process(&backend, &cfg, "other");
    let fresh = other.leases.acquire(&name, LONG).await.unwrap();
    assert!(!fresh.is_handed_over());
    assert_eq!(fresh.metadata().await.unwrap().get("note"), None);
    assert_eq!(fresh.advance_epoch().await.unwrap(), 2);
    fresh.release().await.unwrap();
}

/// `describe` reports holder, state, epoch and metadata without acquiring;
/// a dropped guard is released in the background.
timed(oauth) async fn describe_reports_holder_and_epoch_and_drop_releases(ctx) {
    let (backend, cfg) = suite(ctx);
    let name = cfg.name("describe");
    let holder = process(&backend, &cfg, "holder-1");
    let operator = process(&backend, &cfg, "operator");
    let d = operator.leases.describe(&name).await.unwrap();
    assert!(!d.exists && !d.is_held());

    let guard = holder.leases.acquire(&name, LONG).await.unwrap();
    guard.advance_epoch().await.unwrap();
    guard
        .update_metadata(|m| {
            m.insert("t".into(), "2".into());
        })
        .await
        .unwrap();
    let d = operator.leases.describe(&name).await.unwrap();
    assert!(d.exists && d.is_held());
    assert_eq!(d.state, LeaseState::Leased);
    assert_eq!(d.owner.as_deref(), Some("holder-1"));
    assert!(d.acquired_at.is_some());
    assert_eq!(d.epoch, 1);
    assert_eq!(d.metadata.get("t").map(String::as_str), Some("2"));
    let shown = format!("{guard:?} {:?}", guard.status());
    assert!(!shown.contains(&guard.lease_id().to_string()), "{shown}");
    assert!(shown.contains("describe"), "{shown}");

    drop(guard);
    // The background release lands long before the hour-long lease could
    // run out (the bound leaves room for a busy machine).
    let taken = operator
        .leases
        .acquire(&name, Duration::from_secs(1) + 20 * ctx.slack())
        .await;
    let taken = taken.expect("released by drop");
    let d = operator.leases.describe(&name).await.unwrap();
    assert_eq!(d.owner.as_deref(), Some("operator"));
    assert_eq!(
        d.metadata.get("t").map(String::as_str),
        Some("2"),
        "what a holder wrote outlives it"
    );
    taken
        .update_metadata(|m| {
            m.remove("t");
        })
        .await
        .unwrap();
    taken.release().await.unwrap();
    let d = operator.leases.describe(&name).await.unwrap();
    assert_eq!(d.state, LeaseState::Available);
    assert_eq!(d.metadata.get("t"), None);
}

/// Bad options and names are `Error::Invalid` before any request.
timed(oauth) async fn bad_durations_and_names_are_invalid_before_any_request(ctx) {
    let (backend, cfg) = suite(ctx);
    let counting = CountingBackend::new(backend.clone());
    let counter = counting.counter();
    let shared: Arc<dyn BlobBackend> = Arc::new(counting);
    for (options, what) in [
        (
            cfg.options("x").with_duration(Duration::from_secs(10)),
            "lease duration",
        ),
        (
            cfg.options("x").with_duration(Duration::from_secs(61)),
            "lease duration",
        ),
        (
            cfg.options("x").with_renew_interval(cfg.lease),
            "renew interval",
        ),
        (
            cfg.options("x").with_poll_interval(cfg.lease),
            "poll interval",
        ),
        (cfg.options("x").with_owner("\n"), "owner identity"),
    ] {
        let e = LeaseManager::new(shared.clone(), options).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid);
        assert!(e.to_string().contains(what), "{e}");
    }
    let leases = LeaseManager::new(shared, cfg.options("x")).unwrap();
    let long = "n".repeat(257);
    for name in ["", long.as_str()] {
        assert_eq!(
            leases.try_acquire(name).await.unwrap_err().kind(),
            ErrorKind::Invalid
        );
        assert_eq!(
            leases.acquire(name, LONG).await.unwrap_err().kind(),
            ErrorKind::Invalid
        );
        assert_eq!(
            leases.describe(name).await.unwrap_err().kind(),
            ErrorKind::Invalid
        );
        let once = leases
            .do_once(name, |_| async { Ok::<_, Error>(()) })
            .await
            .unwrap_err();
        assert_eq!(once.kind(), ErrorKind::Invalid);
        let lead = leases
            .run_as_leader(name, LeaderOptions::new(), |_| async {})
            .await
            .unwrap_err();
        assert_eq!(lead.kind(), ErrorKind::Invalid);
    }
    let e = leases
        .break_lease("ok", Some(Duration::from_secs(61)))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("break period"), "{e}");
    for bad in [Duration::ZERO, Duration::MAX] {
        let e = leases.try_reserve("job", bad).await.unwrap_err();
        assert!(e.to_string().contains("reservation duration"), "{e}");
    }
    assert_eq!(counter.total(), 0, "{counter:?}");
}

/// Renew replies that never come are verified with a properties read: while
/// the blob is still leased the guard keeps retrying and keeps the lease;
/// once the service shows it is not leased any more, the loss is immediate.
timed async fn ambiguous_renewals_are_verified_with_a_properties_read(ctx) {
    let (backend, cfg) = suite(ctx);
    use super::ambiguous::{AmbiguousRenews, Renews};

    let wrapper = AmbiguousRenews::new(backend.clone());
    let switch = wrapper.switch();
    let counting = CountingBackend::new(wrapper);
    let counter = counting.counter();
    let holder = LeaseManager::new(Arc::new(counting), cfg.options("holder")).unwrap();
    let operator = process(&backend, &cfg, "operator");

    // Replies lost for a while, requests applied: verified, kept, and the
    // first renew that answers restores full validity.
    let name = cfg.name("ambiguous-kept");
    let guard = holder.acquire(&name, LONG).await.unwrap();
    *switch.lock().unwrap() = Renews::AppliedNoReply;
    sleep(cfg.renew_interval() * 2).await;
    assert!(
        counter.get(Op::BlobProperties) >= 1,
        "verified: {counter:?}"
    );
    assert!(!guard.is_lost());
    *switch.lock().unwrap() = Renews::Normal;
    sleep(cfg.renew_interval() * 2).await;
    guard.ensure_valid(cfg.lease / 2).expect("renewed again");
    guard.release().await.unwrap();

    // Replies lost and the lease broken meanwhile: the verification sees it.
    let name = cfg.name("ambiguous-broken");
    let guard = holder.acquire(&name, LONG).await.unwrap();
    *switch.lock().unwrap() = Renews::LostNoReply;
    operator
        .leases
        .break_lease(&name, Some(Duration::ZERO))
        .await
        .unwrap();
    let broken_at = Instant::now();
    timeout(cfg.renew_interval() + Duration::from_secs(1), guard.lost())
        .await
        .expect("lost at the first verification");
    assert!(broken_at.elapsed() <= cfg.renew_interval() + Duration::from_secs(1));
    *switch.lock().unwrap() = Renews::Normal;

    // Replies never come and nothing is applied: lost at the local deadline,
    // before the service's expiry.
    let name = cfg.name("ambiguous-expiring");
    warm_up(&holder, &name).await;
    let sent = Instant::now();
    let guard = holder.acquire(&name, LONG).await.unwrap();
    *switch.lock().unwrap() = Renews::LostNoReply;
    timeout(cfg.lease, guard.lost()).await.expect("lost");
    assert!(Instant::now() < sent + cfg.lease);
    assert_eq!(
        operator.leases.describe(&name).await.unwrap().state,
        LeaseState::Leased
    );
    *switch.lock().unwrap() = Renews::Normal;
}

/// Local hand-over stops at the fairness bound (count, then time) so a
/// process polling from outside gets its turn while local tasks still queue.
/// Each local unit takes 2 s and the time bound falls a whole second from
/// either hand-over around it (at 3.1 s and 5.1 s of the tenure), so a slow
/// reply on a loaded machine does not move the outsider's turn.
timed async fn the_fairness_bound_lets_another_process_in(ctx) {
    let (backend, cfg) = suite(ctx);
    for (limit, expected_before) in [
        (LeaseOptions::new().with_handover_limit(3, LONG), 4),
        (
            LeaseOptions::new().with_handover_limit(1000, Duration::from_millis(4100)),
            3,
        ),
    ] {
        let name = cfg.name(&format!("fair-{expected_before}"));
        let local = LeaseManager::new(
            Arc::new(backend.clone()),
            cfg.polling(limit.with_duration(cfg.lease).with_owner("local")),
        )
        .unwrap();
        let outsider = process(&backend, &cfg, "outsider");
        let order = Arc::new(Mutex::new(Vec::<String>::new()));
        let first = local.acquire(&name, LONG).await.unwrap();
        let mut tasks = JoinSet::new();
        for u in 0..8 {
            let (local, name, order) = (local.clone(), name.clone(), order.clone());
            tasks.spawn(async move {
                let g = local.acquire(&name, LONG).await.unwrap();
                order.lock().unwrap().push(format!("local-{u}"));
                sleep(Duration::from_secs(2)).await;
                g.release().await.unwrap();
            });
        }
        {
            let (leases, name, order) = (outsider.leases.clone(), name.clone(), order.clone());
            tasks.spawn(async move {
                let g = leases.acquire(&name, LONG).await.unwrap();
                order.lock().unwrap().push("outsider".into());
                sleep(Duration::from_secs(1)).await;
                g.release().await.unwrap();
            });
        }
        // Let everyone queue or poll, then start handing over.
        sleep(Duration::from_millis(100)).await;
        order.lock().unwrap().push("local-first".into());
        sleep(Duration::from_secs(1)).await;
        first.release().await.unwrap();
        while let Some(r) = tasks.join_next().await {
            r.unwrap();
        }
        let order = order.lock().unwrap().clone();
        let at = order.iter().position(|o| o == "outsider").unwrap();
        assert_eq!(at, expected_before, "{order:?}");
    }
}

/// An infinite lease needs no renewal and reports no deadline; a break is
/// noticed by the next write under it.
timed(oauth) async fn infinite_leases_hold_until_released_or_broken(ctx) {
    let (backend, cfg) = suite(ctx);
    let name = cfg.name("infinite");
    let counting = CountingBackend::new(backend.clone());
    let counter = counting.counter();
    let options = LeaseOptions::new()
        .with_infinite_duration()
        .with_owner("forever");
    let holder = LeaseManager::new(Arc::new(counting), options).unwrap();
    let operator = process(&backend, &cfg, "operator");
    let guard = holder.acquire(&name, LONG).await.unwrap();
    assert_eq!(guard.remaining(), Duration::MAX);
    sleep(cfg.lease + Duration::from_secs(1)).await;
    assert_eq!(counter.get(Op::RenewLease), 0);
    assert!(operator.leases.try_acquire(&name).await.unwrap().is_none());
    guard.advance_epoch().await.unwrap();
    operator.leases.break_lease(&name, None).await.unwrap();
    let e = guard.advance_epoch().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LeaseLost);
    assert!(guard.is_lost());
    assert_eq!(guard.remaining(), Duration::ZERO);
}

/// An acquire gives up at its deadline even when the service has not
/// answered by then, and a lease its late request takes after all is given
/// back at once (an infinite lease would otherwise stay held until broken).
timed async fn acquire_gives_up_at_its_deadline_and_gives_back_a_late_lease(ctx) {
    let (backend, cfg) = suite(ctx);
    let name = cfg.name("deadline");
    let other = process(&backend, &cfg, "other");
    // The lease blob exists, so the slow acquire is a single request.
    warm_up(&other.leases, &name).await;

    let faulty = FaultyBackend::new(backend.clone());
    let faults = faulty.injector();
    let counting = CountingBackend::new(faulty);
    let counter = counting.counter();
    let options = LeaseOptions::new()
        .with_infinite_duration()
        .with_owner("slow");
    let slow = LeaseManager::new(Arc::new(counting), options).unwrap();
    // Its container is known too, so only the acquire is slow.
    warm_up(&slow, &name).await;
    counter.reset();
    let answer = Duration::from_secs(3);
    faults.set_latency(Some(Op::AcquireLease), answer);
    let started = Instant::now();
    let e = slow
        .acquire(&name, Duration::from_secs(1))
        .await
        .unwrap_err();
    let waited = started.elapsed();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert!(waited < answer, "gave up after {waited:?}");

    // The late request takes the lease; it is released right after (an
    // infinite lease not given back would stay held: waiting for the
    // release with room for a busy machine still tells the two apart).
    sleep(answer).await;
    let given_back_by = Instant::now() + Duration::from_secs(1) + 10 * ctx.slack();
    while counter.get(Op::ReleaseLease) == 0 && Instant::now() < given_back_by {
        sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(counter.get(Op::AcquireLease), 1);
    assert_eq!(counter.get(Op::ReleaseLease), 1);
    let guard = other.leases.try_acquire(&name).await.unwrap();
    assert!(guard.is_some(), "the late acquire was not given back");
}

/// The requests a partition-lock unit costs on the lease side, with owner
/// metadata off: a cold unit (on a blob another process wrote last) is
/// acquire + one blob read + its writes under the lease + release; a unit
/// handed over within the process sends only its writes; and so does a unit
/// that takes the lease back from storage with nobody having written the
/// blob since, besides its acquire and release: the acquire's reply shows
/// the blob's ETag unchanged, so it is not read. (The exact lock-unit
/// budgets are checked in the lock suite and in the crate.)
timed async fn a_lock_unit_costs_acquire_read_writes_release_cold_and_only_writes_handed_over(ctx) {
    let (backend, cfg) = suite(ctx);
    let cfg = cfg.counting(ctx);
    let name = cfg.name("budget");
    let counting = CountingBackend::new(backend.clone());
    let counter = counting.counter();
    // Tenures of a minute: on a busy machine slow replies cannot end one
    // (and add its wait-queue read) within what is counted.
    let options = cfg
        .options("budget")
        .with_owner_metadata(false)
        .with_handover_limit(1000, Duration::from_secs(60));
    let leases = LeaseManager::new(Arc::new(counting), options).unwrap();
    // Another process took the lease last (and recorded itself as owner).
    let other = process(&backend, &cfg, "other");
    warm_up(&other.leases, &name).await;
    counter.reset();

    let cold = leases.acquire(&name, LONG).await.unwrap();
    assert!(!cold.is_handed_over());
    assert_eq!(cold.metadata().await.unwrap().get("ops"), None); // the lock-blob read
    let next = tokio::spawn({
        let (leases, name) = (leases.clone(), name.clone());
        async move { leases.acquire(&name, LONG).await }
    });
    cold.update_metadata(|m| {
        m.insert("ops".into(), "2".into());
    })
    .await
    .unwrap();
    cold.update_metadata(|m| {
        m.remove("ops");
    })
    .await
    .unwrap();
    queued_behind(&cold).await;
    cold.release().await.unwrap();
    let work: BTreeMap<Op, u64> = [
        (Op::AcquireLease, 1),
        (Op::GetBlob, 1),
        (Op::SetBlobMetadata, 2),
    ]
    .into_iter()
    .collect();
    assert_eq!(counter.snapshot(), work, "cold unit");

    counter.reset();
    let warm = next.await.unwrap().unwrap();
    assert!(warm.is_handed_over());
    assert_eq!(warm.metadata().await.unwrap().get("ops"), None);
    warm.update_metadata(|m| {
        m.insert("ops".into(), "3".into());
    })
    .await
    .unwrap();
    warm.update_metadata(|m| {
        m.remove("ops");
    })
    .await
    .unwrap();
    let handed: BTreeMap<Op, u64> = [(Op::SetBlobMetadata, 2)].into_iter().collect();
    assert_eq!(counter.snapshot(), handed, "handed-over unit");
    warm.release().await.unwrap();
    assert_eq!(counter.get(Op::ReleaseLease), 1);

    // Taken back from storage (a tenure of its own: more than 1.5 poll
    // intervals later): nobody wrote the blob since this process's last
    // write, so the acquire's reply (its ETag) is enough.
    sleep(cfg.poll.unwrap_or(Duration::from_millis(100)) * 2).await;
    counter.reset();
    let back = leases.acquire(&name, LONG).await.unwrap();
    assert!(!back.is_handed_over());
    assert_eq!(back.metadata().await.unwrap().get("ops"), None);
    back.update_metadata(|m| {
        m.insert("ops".into(), "4".into());
    })
    .await
    .unwrap();
    assert_eq!(
        back.metadata()
            .await
            .unwrap()
            .get("ops")
            .map(String::as_str),
        Some("4")
    );
    back.release().await.unwrap();
    let taken_back: BTreeMap<Op, u64> = [
        (Op::AcquireLease, 1),
        (Op::SetBlobMetadata, 1),
        (Op::ReleaseLease, 1),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        counter.snapshot(),
        taken_back,
        "unit taken back, blob unchanged"
    );
}

/// A guard outliving its runtime is dropped without a panic and without a
/// request (the lease then expires on its own).
blocking fn dropping_a_guard_without_a_runtime_does_not_panic(ctx) {
    let (backend, cfg) = suite(ctx);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let leases = LeaseManager::new(backend, LeaseOptions::default()).unwrap();
    let guard = runtime
        .block_on(leases.acquire(&cfg.name("orphan"), LONG))
        .unwrap();
    drop(runtime);
    drop(guard);
}

/// Stores of different table prefixes over one account keep their leases
/// apart, as they keep their tables and partition locks: each runs its own
/// `do_once` of one name, holds its own lease of one name and its own
/// reservation of one job, and lists only its own leases, without the
/// prefix; a store without a prefix is a third party to both.
timed async fn stores_of_different_prefixes_keep_their_leases_apart(ctx) {
    let store = |prefix: Option<String>| {
        let builder = leasehold::Store::builder_shared(ctx.backend().clone())
            .lease_options(LeaseOptions::new().with_container(ctx.container.clone()));
        match prefix {
            Some(p) => builder.table_prefix(p).expect("valid prefix"),
            None => builder,
        }
        .build()
        .expect("valid store")
    };
    let tail = &ctx.prefix()[1..];
    let stores = [
        store(None),
        store(Some(format!("a{tail}"))),
        store(Some(format!("b{tail}"))),
    ];
    let seeded = Arc::new(AtomicUsize::new(0));
    for s in &stores {
        let seeded = seeded.clone();
        let outcome = s
            .leases()
            .do_once("seed-data", |_| async move {
                seeded.fetch_add(1, Ordering::SeqCst);
                Ok::<_, Error>(())
            })
            .await
            .expect("do_once");
        assert!(
            matches!(outcome, OnceOutcome::Ran { .. }),
            "{:?} was told {outcome:?}",
            s.table_prefix()
        );
    }
    assert_eq!(seeded.load(Ordering::SeqCst), 3);
    for s in &stores {
        let again = s
            .leases()
            .do_once("seed-data", |_| async { Ok::<_, Error>(()) })
            .await
            .expect("do_once");
        assert_eq!(again, OnceOutcome::AlreadyDone, "{:?}", s.table_prefix());
    }
    // One leader lease and one reservation per store.
    let mut guards = Vec::new();
    let mut reservations = Vec::new();
    for s in &stores {
        let guard = s.leases().try_acquire("leader").await.expect("acquire");
        guards.push(guard.expect("free in this store"));
        let reservation = s
            .leases()
            .try_reserve("nightly", Duration::from_secs(60))
            .await
            .expect("reserve");
        reservations.push(reservation.expect("free in this store"));
    }
    for s in &stores {
        let listed = s.leases().list("").await.expect("list");
        let names: Vec<&str> = listed.iter().map(|n| n.as_str()).collect();
        assert_eq!(
            names,
            ["leader", "nightly", "seed-data"],
            "{:?}",
            s.table_prefix()
        );
        assert_eq!(
            s.leases().once_state("seed-data").await.expect("state"),
            OnceState::Done { attempts: 1 },
        );
    }
    for guard in guards {
        guard.release().await.expect("release");
    }
    for (s, r) in stores.iter().zip(reservations) {
        assert!(
            s.leases()
                .cancel_reservation(r.job().as_str())
                .await
                .expect("cancel")
        );
    }
}
}
