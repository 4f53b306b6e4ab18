//! The command line.

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Args, CommandFactory as _, Parser, Subcommand, ValueEnum};
use leasehold::lease::LeaseOptions;

pub(crate) const EXIT_CODES: &str = "Exit codes: 0 success; 1 operation failed; 2 usage error \
                          (bad arguments, no connection string, invalid name or key); \
                          3 not found (no such lease, lock blob or table, no index definitions).";

/// Inspect and repair the leases and partition locks of a leasehold store.
#[derive(Debug, Parser)]
#[command(name = "leasehold", version, after_help = EXIT_CODES)]
pub(crate) struct Cli {
    /// The storage connection string (`UseDevelopmentStorage=true` for
    /// Azurite on its default ports).
    #[arg(
        long,
        global = true,
        env = "AZURE_STORAGE_CONNECTION_STRING",
        hide_env_values = true
    )]
    pub(crate) connection_string: Option<String>,
    /// How to authorise: `key` (the connection string) or `login`
    /// (Microsoft Entra ID through the default credential chain:
    /// environment / workload identity, managed identity, Azure CLI), as
    /// the Azure CLI's `--auth-mode`.
    #[arg(
        long,
        global = true,
        value_enum,
        env = "AZURE_STORAGE_AUTH_MODE",
        default_value = "key",
        ignore_case = true
    )]
    pub(crate) auth_mode: AuthMode,
    /// The storage account, for `--auth-mode login`.
    #[arg(long, global = true, env = "AZURE_STORAGE_ACCOUNT")]
    pub(crate) account_name: Option<String>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// The table prefix of the store to inspect (as given to
    /// `StoreBuilder::table_prefix`): its tables, leases and locks.
    #[arg(long, global = true, default_value = "")]
    pub(crate) table_prefix: String,
    /// The container of the lease blobs.
    #[arg(long, global = true, default_value = LeaseOptions::DEFAULT_CONTAINER)]
    pub(crate) lease_container: String,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// How requests are authorised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum AuthMode {
    /// The account key or SAS of the connection string.
    Key,
    /// Microsoft Entra ID sign-in.
    Login,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Leases: run-once markers, leaders, reservations, guards.
    #[command(subcommand)]
    Leases(LeasesCommand),
    /// Partition locks of units of work.
    #[command(subcommand)]
    Locks(LocksCommand),
    /// Index rows of `#[entity(unique)]` and `#[entity(index)]` fields.
    #[command(subcommand)]
    Indexes(IndexesCommand),
    /// The tables under the table prefix.
    #[command(subcommand)]
    Tables(TablesCommand),
    /// Deletes the rows of a table a partition, a row-key range and
    /// filters select (asks first on a terminal; `--yes` otherwise).
    Purge(crate::data::PurgeArgs),
    /// Counts the rows of a table a partition, a row-key range and filters
    /// select, reading keys only.
    Count(crate::data::CountArgs),
    /// Removes what leasehold leaves behind once nothing relies on it:
    /// tombstones, stale index rows, decision and after-image rows of
    /// commits, lock blobs of partitions not locked for --older-than.
    Sweep(crate::sweep::SweepArgs),
    /// Writes a table's rows as JSON lines, every EDM type exact
    /// (resumable with --checkpoint).
    Export(ExportArgs),
    /// Writes JSON lines of an export into a table, in transactions of up
    /// to 100 rows per partition (resumable with --checkpoint).
    Import(ImportArgs),
}

#[derive(Debug, Subcommand)]
pub(crate) enum TablesCommand {
    /// Lists the tables under the table prefix, without it: the user's,
    /// then the index tables of indexed types (`{table}Idx`), marked.
    List,
    /// Creates a table (the table prefix goes in front) unless it exists.
    Create {
        /// The table name, without the table prefix.
        name: String,
    },
    /// Deletes a table and every entity in it, with its index table when
    /// it has one; exit code 3 when there is neither.
    Delete {
        /// The table name, without the table prefix.
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum IndexesCommand {
    /// Reports missing and orphan index rows, and unique values held twice
    /// (read-only; exits 0 either way, the report says `consistent`).
    Verify {
        /// The entity table (without the table prefix).
        table: String,
    },
    /// Verifies, then claims missing values and removes orphan and stale
    /// index rows, as a leasehold write does.
    Rebuild {
        /// The entity table (without the table prefix).
        table: String,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum LeasesCommand {
    /// Lists the leases, with state, holder and epoch.
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

/// The partition a `locks` command works on.
#[derive(Debug, Args)]
pub(crate) struct PartitionArg {
    /// The partition key, as stored.
    pub(crate) partition_key: String,
}

#[derive(Debug, Subcommand)]
pub(crate) enum LocksCommand {
    /// Lists the partition locks, with state and holder.
    List,
    /// Shows the lock of one partition, then the commits left half-way
    /// that hold rows of it, oldest first: transaction id, state
    /// (committed, withdrawn, or undecided: marks and no decision row),
    /// where the decision row is (partition and table), age, and the rows
    /// of this partition each still marks, per table. Reads only; `locks
    /// decide` settles a commit. Exit code 3 when the partition has
    /// neither a lock blob nor such a commit.
    Show {
        #[command(flatten)]
        partition: PartitionArg,
    },
    /// Breaks the lease of a partition's lock, whoever holds it.
    Break {
        #[command(flatten)]
        partition: PartitionArg,
        /// Seconds (0-60) the holder keeps the lease; default 0, at once.
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=60))]
        period: u64,
    },
    /// Settles a commit's decision: reads it, and withdraws a commit that
    /// has none yet (so its writer's commit point is refused). Prints
    /// whether the commit is applied. Marked rows are finished or taken off
    /// by their next read.
    Decide {
        /// The commit's primary partition (`Error::InDoubt` names it).
        #[command(flatten)]
        partition: PartitionArg,
        /// The transaction id (`Error::InDoubt`, `CommitReport::transaction`).
        #[arg(long)]
        transaction: String,
    },
}

/// `leasehold export`.
#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    /// The table (without the table prefix).
    #[arg(long)]
    pub(crate) table: String,
    /// Only the rows of this partition.
    #[arg(long)]
    pub(crate) partition: Option<String>,
    /// Only the rows matching this OData filter, as the service takes it:
    /// `total ge 100L and status eq 'open'` (literals: 'text', 42, 42L,
    /// 1.5, true, datetime'2026-01-02T03:04:05Z', guid'…', X'0a0b').
    #[arg(long)]
    pub(crate) filter: Option<String>,
    /// The file to write (default: stdout).
    #[arg(long)]
    pub(crate) out: Option<std::path::PathBuf>,
    /// Resume from this checkpoint file when it exists, and keep it after
    /// each page written (needs --out); removed once the export completes.
    #[arg(long)]
    pub(crate) checkpoint: Option<std::path::PathBuf>,
}

/// How `leasehold import` writes rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ImportMode {
    /// Insert each row; a row the table holds with other values fails
    /// the import (one stored exactly as the input has it is left alone).
    Insert,
    /// Insert or replace each row.
    Upsert,
}

/// `leasehold import`.
#[derive(Debug, Args)]
pub(crate) struct ImportArgs {
    /// The table (without the table prefix); created when missing.
    #[arg(long)]
    pub(crate) table: String,
    /// The file of JSON lines to read (default: stdin).
    #[arg(long = "in", value_name = "IN")]
    pub(crate) input: Option<std::path::PathBuf>,
    /// insert (refuse to overwrite) or upsert.
    #[arg(long, value_enum, default_value = "insert")]
    pub(crate) mode: ImportMode,
    /// Transactions in flight at once (1-256; default 8).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub(crate) concurrency: Option<u16>,
    /// Resume from this checkpoint file when it exists, and keep it after
    /// each transaction (needs --in); removed once the import completes.
    #[arg(long)]
    pub(crate) checkpoint: Option<std::path::PathBuf>,
}

/// A parse error as the user should see it. A missing required argument
/// is reported with the usage of the command it belongs to, which lists
/// that command's required arguments only: clap's own usage line lists
/// the options given too, from the environment as well
/// (`--connection-string` for `AZURE_STORAGE_CONNECTION_STRING`), as if
/// they were what was missing.
pub(crate) fn usage_error(mut error: clap::Error) -> clap::Error {
    if error.kind() == ErrorKind::MissingRequiredArgument {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let mut command = Cli::command();
        command.build();
        let usage = subcommand_of(&command, &args).clone().render_usage();
        error.insert(ContextKind::Usage, ContextValue::StyledStr(usage));
    }
    error
}

/// The (sub)command that `args` (without the program name) select.
fn subcommand_of<'a>(mut command: &'a clap::Command, args: &[String]) -> &'a clap::Command {
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if arg == "--" {
            break;
        }
        if let Some(option) = arg.strip_prefix("--") {
            // An option with its value in the next argument: skip that too.
            let takes_value = !option.contains('=')
                && command
                    .get_arguments()
                    .any(|a| a.get_long() == Some(option) && a.get_action().takes_values());
            if takes_value {
                args.next();
            }
            continue;
        }
        if arg.starts_with('-') {
            continue;
        }
        match command.find_subcommand(arg) {
            Some(sub) => command = sub,
            None => break,
        }
    }
    command
}

/// Parses a duration such as `90s`, `30m`, `24h`, `7d` or `1h30m`: one or
/// more whole numbers, each followed by its unit.
pub(crate) fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let bad = |why: &str| {
        format!("{text:?} is not a duration ({why}); write a number and a unit: 90s, 30m, 24h, 7d")
    };
    let mut total: u64 = 0;
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad("it is empty"));
    }
    while !rest.is_empty() {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            return Err(bad("a unit without a number"));
        }
        let n: u64 = rest[..digits]
            .parse()
            .map_err(|_| bad("a number too large"))?;
        rest = &rest[digits..];
        let unit = rest
            .chars()
            .next()
            .ok_or_else(|| bad("a number without a unit"))?;
        let seconds = match unit {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return Err(bad("units are s, m, h and d")),
        };
        rest = &rest[unit.len_utf8()..];
        total = n
            .checked_mul(seconds)
            .and_then(|s| total.checked_add(s))
            .ok_or_else(|| bad("too long"))?;
    }
    Ok(std::time::Duration::from_secs(total))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::parse_duration;

    #[test]
    fn durations_take_a_number_and_a_unit() {
        for (text, secs) in [
            ("0s", 0),
            ("90s", 90),
            ("30m", 1800),
            ("24h", 86_400),
            ("7d", 604_800),
            ("1h30m", 5400),
        ] {
            assert_eq!(
                parse_duration(text),
                Ok(Duration::from_secs(secs)),
                "{text}"
            );
        }
        for bad in [
            "",
            "7",
            "d",
            "7w",
            "-1s",
            "1.5h",
            "1 h",
            "99999999999999999999s",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }
}
