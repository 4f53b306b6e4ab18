//! `leasehold`: the operator command for the leases and partition locks of a
//! storage account used through the leasehold library.
//!
//! ```text
//! leasehold [--connection-string CS] [--json] [--table-prefix P] [--lease-container C] <COMMAND>
//!
//!   leases list [--prefix P]          lease blobs: state, holder, epoch, journal pending
//!   leases show NAME                  one lease in detail
//!   leases break NAME [--period S]    break a lease, whoever holds it
//!   locks list                        partition locks: state, holder, journal pending
//!   locks show PK                     one partition lock and its pending journal
//!   locks break PK [--period S]       break a partition lock's lease
//!   locks roll-forward PK [--break-lease] [--timeout S]
//!                                     finish a commit a crashed holder left pending
//! ```
//!
//! The connection string comes from `--connection-string` or, failing that,
//! `AZURE_STORAGE_CONNECTION_STRING` (`UseDevelopmentStorage=true` means
//! Azurite on its default ports). It is never printed.
//!
//! Exit codes: 0 success; 1 the operation failed (storage error, timeout, a
//! journal that cannot be rolled forward); 2 usage error (bad arguments, no
//! connection string, an invalid name or key); 3 not found (no such lease or
//! lock blob). When the reader of stdout goes away early (`leasehold --json
//! locks list | head -c 10`), the command stops writing and exits quietly
//! with 0: what it was asked to do is done, only its report was cut short.
//! (Tools killed by `SIGPIPE` end with 141 instead; 0 keeps a
//! `set -o pipefail` script from failing because its reader had seen
//! enough.)
//!
//! Output is text for people, or one JSON document on stdout with `--json`.
//! Long listings show a progress bar on stderr when it is a terminal and
//! `--json` is not given.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use futures_util::StreamExt;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use leasehold::backend::LeaseState;
use leasehold::backend::azure::AzureBackend;
use leasehold::key::ContainerName;
use leasehold::lease::{BreakOutcome, LeaseDescription, LeaseManager, LeaseOptions, OnceState};
use leasehold::lock::{LockOptions, PendingCommit};
use leasehold::{Error, ErrorKind, Store};
use serde_json::{Value, json};

/// Prints a line on stdout; see [`stdout_line`].
macro_rules! out {
    ($($arg:tt)*) => {
        stdout_line(format_args!($($arg)*))
    };
}

/// Prints a line on stderr, ignoring failures: a closed stderr is nobody's
/// concern but the caller's.
macro_rules! err {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// Writes a line on stdout. A reader that closed the pipe (`| head`) ends
/// the command at once, quietly and with status 0: the output is written
/// only after the operation is done, so nothing is left half-way. Another
/// write failure ends it with status 1 and a message on stderr.
fn stdout_line(line: std::fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_fmt(line)
        .and_then(|()| stdout.write_all(b"\n"))
        .and_then(|()| stdout.flush());
    if let Err(e) = written {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        err!("leasehold: cannot write the output: {e}");
        std::process::exit(i32::from(Failure::FAILED));
    }
}

const EXIT_CODES: &str = "Exit codes: 0 success; 1 operation failed; 2 usage error \
                          (bad arguments, no connection string, invalid name or key); \
                          3 not found (no such lease or lock blob).";

/// Inspect and repair the leases and partition locks of a leasehold store.
#[derive(Debug, Parser)]
#[command(name = "leasehold", version, after_help = EXIT_CODES)]
struct Cli {
    /// The storage connection string (`UseDevelopmentStorage=true` for
    /// Azurite on its default ports).
    #[arg(
        long,
        global = true,
        env = "AZURE_STORAGE_CONNECTION_STRING",
        hide_env_values = true
    )]
    connection_string: Option<String>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// The table prefix of the store whose locks to inspect (as given to
    /// `StoreBuilder::table_prefix`).
    #[arg(long, global = true, default_value = "")]
    table_prefix: String,
    /// The container of the lease blobs.
    #[arg(long, global = true, default_value = LeaseOptions::DEFAULT_CONTAINER)]
    lease_container: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Leases: run-once markers, leaders, reservations, guards.
    #[command(subcommand)]
    Leases(LeasesCommand),
    /// Partition locks of units of work.
    #[command(subcommand)]
    Locks(LocksCommand),
}

#[derive(Debug, Subcommand)]
enum LeasesCommand {
    /// Lists the leases, with state, holder, epoch and pending journal.
    List {
        /// Only the leases whose names start with this.
        #[arg(long, default_value = "")]
        prefix: String,
    },
    /// Shows one lease.
    Show {
        /// The lease name.
        name: String,
    },
    /// Breaks a lease, whoever holds it.
    Break {
        /// The lease name.
        name: String,
        /// Seconds (0-60) the holder keeps the lease; default 0, at once.
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=60))]
        period: u64,
    },
}

#[derive(Debug, Subcommand)]
enum LocksCommand {
    /// Lists the partition locks, with state, holder and pending journal.
    List,
    /// Shows the lock of one partition and its pending journal.
    Show {
        /// The partition key.
        partition_key: String,
    },
    /// Breaks the lease of a partition's lock, whoever holds it.
    Break {
        /// The partition key.
        partition_key: String,
        /// Seconds (0-60) the holder keeps the lease; default 0, at once.
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=60))]
        period: u64,
    },
    /// Takes a partition's lock, finishes a commit left pending, releases.
    RollForward {
        /// The partition key.
        partition_key: String,
        /// Break the lock's lease first (for a holder known to be dead).
        #[arg(long)]
        break_lease: bool,
        /// Seconds to wait for the lock.
        #[arg(long, default_value_t = 60)]
        timeout: u64,
    },
}

/// Why the command failed, and with which exit code.
#[derive(Debug)]
struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    const FAILED: u8 = 1;
    const USAGE: u8 = 2;
    const NOT_FOUND: u8 = 3;

    fn not_found(message: impl Into<String>) -> Failure {
        Failure {
            code: Failure::NOT_FOUND,
            message: message.into(),
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        let code = match e.kind() {
            ErrorKind::NotFound => Failure::NOT_FOUND,
            ErrorKind::Invalid => Failure::USAGE,
            _ => Failure::FAILED,
        };
        Failure {
            code,
            message: e.to_string(),
        }
    }
}

fn main() -> ExitCode {
    // Usage errors exit with 2, `--help` and `--version` with 0.
    let cli = Cli::parse();
    let json = cli.json;
    let result = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(run(cli)),
        Err(e) => Err(Failure {
            code: Failure::FAILED,
            message: format!("cannot start the async runtime: {e}"),
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            err!("leasehold: {}", failure.message);
            if json {
                // The exit code tells the failure even when stdout is closed.
                let _ = writeln!(
                    std::io::stdout(),
                    "{}",
                    json!({ "error": { "exit_code": failure.code, "message": failure.message } })
                );
            }
            ExitCode::from(failure.code)
        }
    }
}

async fn run(cli: Cli) -> Result<(), Failure> {
    let out = Output { json: cli.json };
    let timeout = match &cli.command {
        Command::Locks(LocksCommand::RollForward { timeout, .. }) => Duration::from_secs(*timeout),
        _ => LockOptions::default().acquire_timeout,
    };
    let store = open_store(&cli, timeout)?;
    match cli.command {
        Command::Leases(LeasesCommand::List { prefix }) => {
            let leases = store.leases();
            let names = leases.list(&prefix).await?;
            let descriptions = describe_all(leases, names.iter().map(|n| n.as_str()), &out).await?;
            out.lease_list(&descriptions);
        }
        Command::Leases(LeasesCommand::Show { name }) => {
            let d = store.leases().describe(&name).await?;
            if !d.exists {
                return Err(Failure::not_found(format!("no lease named {name:?}")));
            }
            out.lease(&d);
        }
        Command::Leases(LeasesCommand::Break { name, period }) => {
            break_lease(store.leases(), &name, period, &out).await?;
        }
        Command::Locks(LocksCommand::List) => {
            let prefix = format!("{}/", store.table_prefix());
            let names = store.locks().list(&prefix).await?;
            let descriptions =
                describe_all(store.locks(), names.iter().map(|n| n.as_str()), &out).await?;
            out.lock_list(&prefix, &descriptions);
        }
        Command::Locks(LocksCommand::Show { partition_key }) => {
            let name = store.lock_lease_name(partition_key.as_str())?;
            let d = store.locks().describe(name.as_str()).await?;
            if !d.exists {
                return Err(Failure::not_found(format!(
                    "partition {partition_key:?} has no lock blob (it was never locked)"
                )));
            }
            let pending = store.pending_commit(partition_key.as_str()).await?;
            out.lock(&partition_key, &d, pending.as_ref());
        }
        Command::Locks(LocksCommand::Break {
            partition_key,
            period,
        }) => {
            let name = store.lock_lease_name(partition_key.as_str())?;
            break_lease(store.locks(), name.as_str(), period, &out).await?;
        }
        Command::Locks(LocksCommand::RollForward {
            partition_key,
            break_lease: break_first,
            ..
        }) => {
            let name = store.lock_lease_name(partition_key.as_str())?;
            let d = store.locks().describe(name.as_str()).await?;
            if !d.exists {
                return Err(Failure::not_found(format!(
                    "partition {partition_key:?} has no lock blob (it was never locked)"
                )));
            }
            if break_first && d.is_held() {
                store
                    .locks()
                    .break_lease(name.as_str(), Some(Duration::ZERO))
                    .await?;
                out.note(&format!("broke the lease of lock {name}"));
            }
            let report = store.roll_forward(partition_key.as_str()).await?;
            out.rolled_forward(&partition_key, report.as_ref());
        }
    }
    Ok(())
}

/// The store the command works on.
fn open_store(cli: &Cli, lock_timeout: Duration) -> Result<Store, Failure> {
    let Some(cs) = cli.connection_string.as_deref() else {
        return Err(Failure {
            code: Failure::USAGE,
            message: "no connection string: pass --connection-string or set \
                      AZURE_STORAGE_CONNECTION_STRING"
                .into(),
        });
    };
    let container = ContainerName::new(cli.lease_container.as_str())?;
    let mut builder = Store::builder(AzureBackend::from_connection_string(cs)?)
        .lease_options(LeaseOptions::new().with_container(container))
        .lock_options(LockOptions {
            acquire_timeout: lock_timeout,
            ..LockOptions::default()
        });
    if !cli.table_prefix.is_empty() {
        builder = builder.table_prefix(cli.table_prefix.as_str())?;
    }
    Ok(builder.build()?)
}

/// Describes every lease named, a few at a time, with a progress bar.
async fn describe_all<'a>(
    manager: &LeaseManager,
    names: impl ExactSizeIterator<Item = &'a str>,
    out: &Output,
) -> Result<Vec<LeaseDescription>, Failure> {
    let bar = out.progress(names.len() as u64, "describing");
    let mut described = futures_util::stream::iter(names)
        .map(|name| manager.describe(name))
        .buffered(8);
    let mut all = Vec::new();
    while let Some(d) = described.next().await {
        all.push(d?);
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(all)
}

/// Breaks a lease unless it is already free.
async fn break_lease(
    manager: &LeaseManager,
    name: &str,
    period: u64,
    out: &Output,
) -> Result<(), Failure> {
    let d = manager.describe(name).await?;
    if !d.exists {
        return Err(Failure::not_found(format!("no lease named {name:?}")));
    }
    // An expired lease is not broken (that would mark it broken on the way
    // to the next holder); a lease released since the read is reported as
    // not held by the break itself.
    let outcome = if d.is_held() {
        manager
            .break_lease(name, Some(Duration::from_secs(period)))
            .await?
    } else {
        BreakOutcome::NotHeld
    };
    let was = match outcome {
        BreakOutcome::NotHeld if d.is_held() => LeaseState::Available,
        _ => d.state,
    };
    out.broken(name, was, outcome);
    Ok(())
}

fn state_str(state: LeaseState) -> &'static str {
    match state {
        LeaseState::Available => "available",
        LeaseState::Leased => "leased",
        LeaseState::Expired => "expired",
        LeaseState::Breaking => "breaking",
        LeaseState::Broken => "broken",
    }
}

fn once_json(once: &OnceState) -> Value {
    match once {
        OnceState::NotStarted => json!({ "state": "not_started" }),
        OnceState::Started { attempts } => json!({ "state": "started", "attempts": attempts }),
        OnceState::Done { attempts } => json!({ "state": "done", "attempts": attempts }),
    }
}

fn once_text(once: &OnceState) -> String {
    match once {
        OnceState::NotStarted => "not started".into(),
        OnceState::Started { attempts } => format!("started, unfinished ({attempts} attempts)"),
        OnceState::Done { attempts } => format!("done ({attempts} attempts)"),
    }
}

/// The holder: the recorded owner while the lease is held.
fn holder(d: &LeaseDescription) -> Option<&str> {
    d.owner.as_deref().filter(|_| d.is_held())
}

fn lease_json(d: &LeaseDescription) -> Value {
    json!({
        "name": d.name.as_str(),
        "exists": d.exists,
        "state": state_str(d.state),
        "held": d.is_held(),
        "holder": holder(d),
        "last_owner": d.owner,
        "acquired_at": d.acquired_at,
        "epoch": d.epoch,
        "journal_pending": d.journal_pending,
        "once": once_json(&d.once),
        "reservation_records": d.reservation_records,
    })
}

/// A pending commit as JSON: its partition, and each write's table, row,
/// kind, precondition ETag and the properties it stores.
fn pending_json(p: &PendingCommit) -> Value {
    let ops: Vec<Value> = p
        .writes
        .iter()
        .map(|w| {
            json!({
                "table": w.table.as_str(),
                "row_key": w.row_key.as_str(),
                "kind": w.operation,
                "precondition": w.if_match.as_ref().map(|e| e.as_str()),
                "after": w.properties.as_ref().map(|props| {
                    props
                        .iter()
                        .map(|(name, value)| (name.to_owned(), json!(value.to_string())))
                        .collect::<serde_json::Map<_, _>>()
                }),
            })
        })
        .collect();
    json!({ "partition_key": p.partition_key.as_str(), "ops": ops })
}

/// Where results go: text or JSON on stdout, progress on stderr.
struct Output {
    json: bool,
}

impl Output {
    fn progress(&self, len: u64, what: &'static str) -> ProgressBar {
        if self.json || !std::io::stderr().is_terminal() || len == 0 {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {eta}") {
            bar.set_style(style);
        }
        bar.set_message(what);
        bar
    }

    fn note(&self, text: &str) {
        if self.json {
            err!("{text}");
        } else {
            out!("{text}");
        }
    }

    fn lease_list(&self, all: &[LeaseDescription]) {
        if self.json {
            let leases: Vec<Value> = all.iter().map(lease_json).collect();
            out!("{}", json!({ "leases": leases }));
            return;
        }
        out!(
            "{:<40} {:<10} {:<32} {:>6} JOURNAL",
            "NAME",
            "STATE",
            "HOLDER",
            "EPOCH"
        );
        for d in all {
            out!(
                "{:<40} {:<10} {:<32} {:>6} {}",
                d.name.as_str(),
                state_str(d.state),
                holder(d).unwrap_or("-"),
                d.epoch,
                if d.journal_pending { "pending" } else { "-" }
            );
        }
        out!("{} leases", all.len());
    }

    fn lease(&self, d: &LeaseDescription) {
        if self.json {
            out!("{}", lease_json(d));
            return;
        }
        out!("lease         {}", d.name.as_str());
        out!("state         {}", state_str(d.state));
        out!("holder        {}", holder(d).unwrap_or("-"));
        out!("last owner    {}", d.owner.as_deref().unwrap_or("-"));
        out!("acquired at   {}", d.acquired_at.as_deref().unwrap_or("-"));
        out!("epoch         {}", d.epoch);
        out!(
            "journal       {}",
            if d.journal_pending { "pending" } else { "none" }
        );
        out!("run-once      {}", once_text(&d.once));
        out!("reservations  {} records", d.reservation_records);
    }

    fn lock_list(&self, prefix: &str, all: &[LeaseDescription]) {
        // A hashed name (`/#...`, for a key too long for a lease name) does
        // not give its key back.
        let key = |d: &LeaseDescription| {
            d.name
                .as_str()
                .strip_prefix(prefix)
                .filter(|k| !k.starts_with('#'))
                .map(str::to_owned)
        };
        if self.json {
            let locks: Vec<Value> = all
                .iter()
                .map(|d| {
                    let mut v = lease_json(d);
                    v["partition_key"] = json!(key(d));
                    v
                })
                .collect();
            out!("{}", json!({ "locks": locks }));
            return;
        }
        out!(
            "{:<40} {:<10} {:<32} JOURNAL",
            "PARTITION",
            "STATE",
            "HOLDER"
        );
        for d in all {
            out!(
                "{:<40} {:<10} {:<32} {}",
                key(d).unwrap_or_else(|| format!("({})", d.name.as_str())),
                state_str(d.state),
                holder(d).unwrap_or("-"),
                if d.journal_pending { "pending" } else { "-" }
            );
        }
        out!("{} locks", all.len());
    }

    fn lock(&self, partition_key: &str, d: &LeaseDescription, pending: Option<&PendingCommit>) {
        if self.json {
            let mut v = lease_json(d);
            v["partition_key"] = json!(partition_key);
            v["journal"] = pending.map_or(Value::Null, pending_json);
            out!("{v}");
            return;
        }
        out!("partition     {partition_key}");
        out!("lock lease    {}", d.name.as_str());
        out!("state         {}", state_str(d.state));
        out!("holder        {}", holder(d).unwrap_or("-"));
        out!("last holder   {}", d.owner.as_deref().unwrap_or("-"));
        out!("since         {}", d.acquired_at.as_deref().unwrap_or("-"));
        match pending {
            None => out!("journal       none pending"),
            Some(p) => {
                out!("journal       pending, {} operations:", p.writes.len());
                for w in &p.writes {
                    out!(
                        "  {:<8} {}/{}{}",
                        w.operation,
                        w.table,
                        w.row_key.as_str(),
                        w.if_match
                            .as_ref()
                            .map(|etag| format!(" if-match {}", etag.as_str()))
                            .unwrap_or_default()
                    );
                }
            }
        }
    }

    fn broken(&self, name: &str, was: LeaseState, outcome: BreakOutcome) {
        let left = match outcome {
            BreakOutcome::Broken { left } => Some(left),
            BreakOutcome::NotHeld => None,
        };
        if self.json {
            out!(
                "{}",
                json!({
                    "name": name,
                    "was": state_str(was),
                    "broken": left.is_some(),
                    "seconds_left": left.map(|d| d.as_secs()),
                })
            );
            return;
        }
        match left {
            None => out!("{name}: not held ({}); nothing to break", state_str(was)),
            Some(d) if d.is_zero() => out!("{name}: broken"),
            Some(d) => out!("{name}: breaking, broken in {} s", d.as_secs()),
        }
    }

    fn rolled_forward(
        &self,
        partition_key: &str,
        report: Option<&leasehold::lock::RollForwardReport>,
    ) {
        if self.json {
            out!(
                "{}",
                json!({
                    "partition_key": partition_key,
                    "rolled_forward": report.is_some(),
                    "applied": report.map(|r| r.applied),
                    "already_applied": report.map(|r| r.already_applied),
                })
            );
            return;
        }
        match report {
            None => out!("{partition_key}: no journal pending; nothing to do"),
            Some(r) => out!(
                "{partition_key}: rolled forward ({} applied, {} already applied)",
                r.applied,
                r.already_applied
            ),
        }
    }
}
