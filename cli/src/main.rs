//! `leasehold`: the operator command for the leases and partition locks of a
//! storage account used through the leasehold library.
//!
//! ```text
//! leasehold [--connection-string CS | --auth-mode login --account-name A] [--json]
//!           [--table-prefix P] [--lease-container C] <COMMAND>
//!
//!   leases list [--prefix P]          lease blobs: state, holder, epoch
//!   leases show NAME                  one lease in detail
//!   leases break NAME [--period S]    break a lease, whoever holds it
//!   locks list                        partition locks: state, holder
//!   locks show PK                     one partition lock, and the commits left half-way
//!                                     holding rows of it (decision, age, rows marked)
//!   locks break PK [--period S]       break a partition lock's lease
//!   locks decide PK --transaction ID  a commit's decision; one without any is withdrawn
//!   sweep [--older-than DURATION] [--dry-run]
//!                                     remove tombstones, stale index rows, commits' leftover
//!                                     rows and the lock blobs of partitions not locked for
//!                                     DURATION (90s, 30m, 24h, 7d; free and clean), each
//!                                     once nothing relies on it
//!   indexes verify TABLE              missing and orphan index rows, duplicated unique values
//!   indexes rebuild TABLE             the same, then fix missing and orphan rows
//!   tables list                       the tables under the table prefix, without it;
//!                                     index tables apart, marked
//!   tables create NAME                create a table unless it exists (says which)
//!   tables delete NAME                delete a table and every entity in it, with its
//!                                     index table
//!   purge --table T [--partition P] [--from RK] [--to RK] [--filter 'PROP OP LIT']... [--yes]
//!                                     delete the rows selected (asks on a terminal)
//!   count --table T [--partition P] [--from RK] [--to RK] [--filter 'PROP OP LIT']...
//!                                     count the rows selected, reading keys only
//!   export --table T [--partition P] [--filter F] [--out FILE] [--checkpoint FILE]
//!                                     a table's rows as JSON lines, EDM types exact
//!   import --table T [--in FILE] [--mode insert|upsert] [--checkpoint FILE]
//!                                     JSON lines of an export back into a table
//! ```
//!
//! The connection string comes from `--connection-string` or, failing that,
//! `AZURE_STORAGE_CONNECTION_STRING` (`UseDevelopmentStorage=true` means
//! Azurite on its default ports). It is never printed. With
//! `--auth-mode login` (or `AZURE_STORAGE_AUTH_MODE=login`) the command
//! signs in with Microsoft Entra ID instead (environment / workload
//! identity, managed identity, Azure CLI) to the account of
//! `--account-name` (or `AZURE_STORAGE_ACCOUNT`).
//!
//! Exit codes: 0 success; 1 the operation failed (storage error, timeout,
//! refused input); 2 usage error (bad arguments, no
//! connection string, an invalid name or key); 3 not found (no such lease,
//! lock blob or table). When the reader of stdout goes away early (`leasehold --json
//! locks list | head -c 10`), the command stops writing and exits quietly
//! with 0: what it was asked to do is done, only its report was cut short.
//! (Tools killed by `SIGPIPE` end with 141 instead; 0 keeps a
//! `set -o pipefail` script from failing because its reader had seen
//! enough.)
//!
//! Output is text for people, or one JSON document on stdout with `--json`.
//! Long commands (`purge`, `count`, `export`, `import`, `sweep`,
//! `indexes`, listings) show their progress on stderr, one kind for all
//! ([`output::Tally`]): count, rate and time redrawn on a terminal without
//! `--json`, otherwise a plain line every 2 s (`LEASEHOLD_PROGRESS_EVERY_MS`
//! sets the interval in milliseconds); each ends with a line saying what it
//! did (`sweep`: what it removed per kind and the lock blobs it kept).
//!
//! One module per command group ([`leases`], [`locks`], [`indexes`],
//! [`tables`], [`data`]: `purge` and `count`, [`transfer`]: export and
//! import, [`sweep`]); [`args`] parses
//! the command line, [`output`] writes the results, [`failure`] maps errors
//! to exit codes.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser as _;
use leasehold::Store;
use leasehold::backend::azure::AzureBackend;
use leasehold::key::ContainerName;
use leasehold::lease::LeaseOptions;
use leasehold::lock::LockOptions;
use serde_json::json;

/// Prints a line on stdout; see [`output::stdout_line`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::stdout_line(format_args!($($arg)*))
    };
}

/// Prints a line on stderr, ignoring failures: a closed stderr is nobody's
/// concern but the caller's.
macro_rules! err {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod args;
mod data;
mod failure;
mod indexes;
mod leases;
mod locks;
mod output;
mod sweep;
mod tables;
mod transfer;

use args::{AuthMode, Cli, Command};
use failure::Failure;
use output::Output;

fn main() -> ExitCode {
    // Usage errors exit with 2, `--help` and `--version` with 0.
    let cli = Cli::try_parse().unwrap_or_else(|e| args::usage_error(e).exit());
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
    let timeout = LockOptions::DEFAULT_ACQUIRE_TIMEOUT;
    let store = open_store(&cli, timeout)?;
    match cli.command {
        Command::Leases(command) => leases::run(&store, command, &out).await,
        Command::Locks(command) => locks::run(&store, command, &out).await,
        Command::Indexes(command) => indexes::run(&store, command, &out).await,
        Command::Tables(command) => tables::run(&store, command, &out).await,
        Command::Purge(args) => data::purge(&store, args, &out).await,
        Command::Count(args) => data::count(&store, args, &out).await,
        Command::Sweep(args) => sweep::run(&store, args, &out).await,
        Command::Export(args) => transfer::export(&store, args, &out).await,
        Command::Import(args) => transfer::import(&store, args, &out).await,
    }
}

/// The store the command works on.
fn open_store(cli: &Cli, lock_timeout: Duration) -> Result<Store, Failure> {
    let backend = match cli.auth_mode {
        AuthMode::Key => {
            let Some(cs) = cli.connection_string.as_deref() else {
                return Err(Failure {
                    code: Failure::USAGE,
                    message: "no connection string: pass --connection-string or set \
                              AZURE_STORAGE_CONNECTION_STRING (or sign in with \
                              --auth-mode login --account-name A)"
                        .into(),
                });
            };
            AzureBackend::from_connection_string(cs)?
        }
        AuthMode::Login => {
            let Some(account) = cli.account_name.as_deref() else {
                return Err(Failure {
                    code: Failure::USAGE,
                    message: "--auth-mode login needs the storage account: pass \
                              --account-name or set AZURE_STORAGE_ACCOUNT"
                        .into(),
                });
            };
            AzureBackend::builder()
                .account(account)
                .default_credential()?
                .build()?
        }
    };
    let container = ContainerName::new(cli.lease_container.as_str())?;
    let mut builder = Store::builder(backend)
        .lease_options(LeaseOptions::new().with_container(container))
        .lock_options(LockOptions::new().with_acquire_timeout(lock_timeout));
    if !cli.table_prefix.is_empty() {
        builder = builder.table_prefix(cli.table_prefix.as_str())?;
    }
    Ok(builder.build()?)
}
