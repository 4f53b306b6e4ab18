//! The `leasehold` operator command, end to end against Azurite (started by
//! `scripts/with-azurite.sh`; required when `CI` is set): a stuck infinite
//! lease is shown and broken, a journal left by a unit that died
//! mid-commit is shown and rolled forward, and so is a commit across
//! partitions (an intent naming its primary), from a participant.

#[path = "../../tests/support/mod.rs"]
mod support;

use leasehold::backend::WriteOptions;
use std::process::{Command, Output};
use std::sync::Arc;

use leasehold::backend::Op;
use leasehold::backend::azure::AzureBackend;
use leasehold::backend::{BlobBackend, LeaseDuration, LeaseId};
use leasehold::lease::{LeaseName, LeaseOptions};
use leasehold::testing::FaultyBackend;
use leasehold::{Entity, Store};
use serde_json::{Value, json};
use support::azurite::{azurite_connection_string, unique_names};

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "CliAccounts")]
struct Account {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    name: String,
    balance: i64,
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "CliLedger")]
struct LedgerEntry {
    #[entity(partition_key)]
    customer: String,
    #[entity(row_key)]
    id: String,
    amount: i64,
}

/// Runs the command with `args` and no connection string in its environment;
/// progress lines (off a terminal, one every interval) only once an hour,
/// so that a slow machine does not change what a command prints.
fn run(args: &[&str]) -> Output {
    run_with_progress_every("3600000", args)
}

/// As [`run`], with a progress line every `ms` milliseconds
/// (`LEASEHOLD_PROGRESS_EVERY_MS`).
fn run_with_progress_every(ms: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_leasehold"))
        .env_remove("AZURE_STORAGE_CONNECTION_STRING")
        .env("LEASEHOLD_PROGRESS_EVERY_MS", ms)
        .args(args)
        .output()
        .expect("the leasehold binary runs")
}

/// Runs the command against Azurite with `--json`; returns the exit code and
/// the JSON document it printed.
fn run_json(cs: &str, args: &[&str]) -> (i32, Value) {
    let mut all = vec!["--connection-string", cs, "--json"];
    all.extend_from_slice(args);
    let out = run(&all);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "{args:?} printed no JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().expect("exit code"), json)
}

#[test]
fn usage_errors_exit_with_2() {
    let out = run(&["leases", "show", "x"]);
    assert_eq!(out.status.code(), Some(2), "no connection string");
    assert!(String::from_utf8_lossy(&out.stderr).contains("AZURE_STORAGE_CONNECTION_STRING"));
    assert_eq!(run(&["leases", "frobnicate"]).status.code(), Some(2));
    let out = run(&[
        "--connection-string",
        "UseDevelopmentStorage=true",
        "leases",
        "break",
        "x",
        "--period",
        "61",
    ]);
    assert_eq!(out.status.code(), Some(2), "period out of range");
    let out = run(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Exit codes"));
}

/// Where no CA certificate can be loaded (a minimal container; here
/// `SSL_CERT_FILE` and `SSL_CERT_DIR` name none), the command still works on
/// plain-http endpoints, and on https ones fails saying why. The system's
/// roots are read beside the builder's: the test CA as the only "system"
/// root is enough for the HTTPS Azurite.
#[test]
fn without_ca_certificates_http_works_and_https_says_why() {
    let Some(cs) = azurite_connection_string() else {
        return;
    };
    let Some(_) = support::oauth::oauth_azurite() else {
        return;
    };
    let https = std::env::var(support::oauth::OAUTH_ENV).expect("the OAuth connection string");
    let ca = std::env::var(support::oauth::OAUTH_CA_ENV).expect("the OAuth CA file");
    let empty = std::env::temp_dir().join(format!("leasehold-no-ca-{}", std::process::id()));
    std::fs::create_dir_all(&empty).expect("an empty directory");
    let list = |cs: &str, cert_file: &str, cert_dir: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_leasehold"))
            .env_remove("AZURE_STORAGE_CONNECTION_STRING")
            .env("SSL_CERT_FILE", cert_file)
            .env("SSL_CERT_DIR", cert_dir)
            .args(["--connection-string", cs, "--json", "tables", "list"])
            .output()
            .expect("the leasehold binary runs")
    };
    let show = |out: &Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };

    let out = list(&cs, "/dev/null", &empty);
    assert_eq!(out.status.code(), Some(0), "http: {}", show(&out));

    let out = list(&https, "/dev/null", &empty);
    assert_eq!(out.status.code(), Some(1), "https: {}", show(&out));
    assert!(
        show(&out).contains("no certificate authority")
            && show(&out).contains("root_certificate_pem"),
        "https: {}",
        show(&out)
    );

    let out = list(&https, &ca, &empty);
    assert_eq!(
        out.status.code(),
        Some(0),
        "https, CA as system root: {}",
        show(&out)
    );
    let _ = std::fs::remove_dir(&empty);
}

/// A missing required argument is named, with the usage of its command:
/// not with the options the environment gave, as if those were missing.
#[test]
fn a_missing_argument_is_named_not_the_connection_string_from_the_environment() {
    let out = Command::new(env!("CARGO_BIN_EXE_leasehold"))
        .env(
            "AZURE_STORAGE_CONNECTION_STRING",
            "UseDevelopmentStorage=true",
        )
        .args(["--table-prefix", "Shop", "count", "--partition", "p"])
        .output()
        .expect("the leasehold binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--table <TABLE>"), "{stderr}");
    assert!(
        stderr.contains("Usage: leasehold count [OPTIONS] --table <TABLE>"),
        "{stderr}"
    );
    assert!(!stderr.contains("--connection-string"), "{stderr}");
    assert!(!stderr.contains("UseDevelopmentStorage"), "{stderr}");
    // The same for a missing positional argument.
    let out = Command::new(env!("CARGO_BIN_EXE_leasehold"))
        .env(
            "AZURE_STORAGE_CONNECTION_STRING",
            "UseDevelopmentStorage=true",
        )
        .args(["leases", "show"])
        .output()
        .expect("the leasehold binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("Usage: leasehold leases show [OPTIONS] <NAME>"),
        "{stderr}"
    );
    assert!(!stderr.contains("--connection-string"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_infinite_lease_is_shown_and_broken() {
    let Some(cs) = azurite_connection_string() else {
        return;
    };
    let names = unique_names("cli_stuck_lease");
    let container = names.container("leases");
    let backend = Arc::new(AzureBackend::from_connection_string(&cs).unwrap());
    let store = Store::builder_shared(backend.clone())
        .lease_options(LeaseOptions::new().with_container(container.clone()))
        .build()
        .unwrap();
    // A holder that took an infinite lease and died.
    let name = "nightly/report";
    store
        .leases()
        .try_acquire(name)
        .await
        .unwrap()
        .unwrap()
        .release()
        .await
        .unwrap();
    store
        .leases()
        .try_acquire("nightly/other")
        .await
        .unwrap()
        .unwrap()
        .release()
        .await
        .unwrap();
    let blob = LeaseName::new(name).unwrap().blob_name().unwrap();
    backend
        .lease(
            &container,
            &blob,
            leasehold::backend::LeaseAction::Acquire {
                duration: LeaseDuration::Infinite,
                proposed: LeaseId::new_random(),
            },
        )
        .await
        .unwrap();

    let c = ["--lease-container", container.as_str()];
    let (code, listed) = run_json(
        &cs,
        &[&c[..], &["leases", "list", "--prefix", "nightly/"]].concat(),
    );
    assert_eq!(code, 0, "{listed}");
    let leases = listed["leases"].as_array().unwrap();
    assert_eq!(leases.len(), 2, "{listed}");
    let stuck = leases.iter().find(|l| l["name"] == name).unwrap();
    assert_eq!(stuck["state"], "leased");
    assert_eq!(stuck["held"], true);

    let (code, shown) = run_json(&cs, &[&c[..], &["leases", "show", name]].concat());
    assert_eq!(
        (code, &shown["state"]),
        (0, &Value::from("leased")),
        "{shown}"
    );
    assert!(store.leases().try_acquire(name).await.unwrap().is_none());
    let out = run(&[
        &["--connection-string", cs.as_str()][..],
        &c[..],
        &["leases", "list"],
    ]
    .concat());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("nightly/report") && text.contains("leased"),
        "{text}"
    );
    assert!(text.contains("2 leases"), "{text}");

    let (code, broken) = run_json(&cs, &[&c[..], &["leases", "break", name]].concat());
    assert_eq!(code, 0, "{broken}");
    assert_eq!(broken["broken"], true);
    assert_eq!(broken["seconds_left"], 0);

    let (code, shown) = run_json(&cs, &[&c[..], &["leases", "show", name]].concat());
    assert_eq!(
        (code, &shown["state"]),
        (0, &Value::from("broken")),
        "{shown}"
    );
    let guard = store.leases().try_acquire(name).await.unwrap();
    assert!(guard.is_some(), "free after the break");
    guard.unwrap().release().await.unwrap();

    // Breaking a free lease changes nothing; a missing one is "not found".
    let (code, again) = run_json(&cs, &[&c[..], &["leases", "break", name]].concat());
    assert_eq!(
        (code, &again["broken"]),
        (0, &Value::from(false)),
        "{again}"
    );
    let (code, missing) = run_json(
        &cs,
        &[&c[..], &["leases", "show", "no-such-lease"]].concat(),
    );
    assert_eq!(code, 3, "{missing}");
    let (code, _) = run_json(
        &cs,
        &[&c[..], &["leases", "break", "no-such-lease"]].concat(),
    );
    assert_eq!(code, 3);
}

/// Two accounts of `customer` (100 and 0) and, in a process that dies at
/// its `die_at`-th transaction, a transfer of 30 between them with a ledger
/// entry: two tables, so it decides in a row (the ledger entry is marked by
/// transaction 1, the accounts and the decision row are transaction 2, the
/// commit point, and transaction 3 finishes the ledger entry). Returns a
/// healthy store on the same prefix, what the dying commit said, and its
/// transaction id.
async fn crashed_transfer(
    cs: &str,
    prefix: &str,
    customer: &str,
    die_at: u64,
) -> (Store, leasehold::Result<()>, String) {
    let healthy = Store::builder(AzureBackend::from_connection_string(cs).unwrap())
        .table_prefix(prefix)
        .unwrap()
        .build()
        .unwrap();
    let faulty = FaultyBackend::new(AzureBackend::from_connection_string(cs).unwrap());
    let injector = faulty.injector();
    let dying = Store::builder(faulty)
        .table_prefix(prefix)
        .unwrap()
        .build()
        .unwrap();
    let accounts = healthy.table::<Account>();
    for (name, balance) in [("checking", 100), ("savings", 0)] {
        accounts
            .insert(Account {
                customer: customer.into(),
                name: name.into(),
                balance,
            })
            .await
            .unwrap();
    }
    dying.create_table("CliLedger").await.unwrap();
    let mut unit = dying.lock(customer).await.unwrap();
    let mut from = unit.get::<Account>("checking").await.unwrap().unwrap();
    let mut to = unit.get::<Account>("savings").await.unwrap().unwrap();
    from.balance -= 30;
    to.balance += 30;
    unit.replace(&from).unwrap();
    unit.replace(&to).unwrap();
    unit.insert(&LedgerEntry {
        customer: customer.into(),
        id: "t1".into(),
        amount: 30,
    })
    .unwrap();
    injector.die_at_nth(Some(Op::Batch), die_at);
    match unit.commit().await {
        Ok(report) => (
            healthy,
            Ok(()),
            report.transaction.expect("decided in a row"),
        ),
        Err(leasehold::Error::InDoubt {
            transaction: Some(txn),
            ..
        }) => (
            healthy,
            Err(leasehold::Error::invalid("commit", "in doubt")),
            txn,
        ),
        Err(e) => panic!("{e}"),
    }
}

/// A process dies before its commit point (in doubt) or right after it
/// (committed, its ledger entry left marked): `locks decide` withdraws the
/// first and reports the second applied; reads then show the partition
/// before and after the transfer, whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_decide_settles_a_dead_writers_commit() {
    let Some(cs) = azurite_connection_string() else {
        return;
    };
    let names = unique_names("cli_decide");
    let prefix = names.prefix().to_owned();
    let p = ["--table-prefix", prefix.as_str()];
    for (customer, die_at, applied) in [("early", 2, false), ("late", 3, true)] {
        let (healthy, said, txn) = crashed_transfer(&cs, &prefix, customer, die_at).await;
        assert_eq!(said.is_ok(), applied, "{customer}: {said:?}");
        let (code, decided) = run_json(
            &cs,
            &[
                &p[..],
                &["locks", "decide", customer, "--transaction", txn.as_str()],
            ]
            .concat(),
        );
        assert_eq!(code, 0, "{decided}");
        assert_eq!(decided["applied"], applied, "{decided}");
        assert_eq!(decided["transaction"], txn.as_str(), "{decided}");
        // Asked again, the same answer.
        let out = run(&[
            &["--connection-string", cs.as_str()][..],
            &p[..],
            &["locks", "decide", customer, "--transaction", txn.as_str()],
        ]
        .concat());
        let text = String::from_utf8_lossy(&out.stdout);
        let word = if applied { "committed" } else { "withdrawn" };
        assert!(text.contains(word), "{text}");

        let accounts = healthy.table::<Account>();
        let checking = accounts.get(customer, "checking").await.unwrap().unwrap();
        let entry = healthy
            .table::<LedgerEntry>()
            .get(customer, "t1")
            .await
            .unwrap();
        if applied {
            assert_eq!(checking.balance, 70);
            assert_eq!(entry.map(|e| e.amount), Some(30));
        } else {
            assert_eq!(checking.balance, 100);
            assert!(entry.is_none());
        }
    }
    // A transaction id naming no table is a usage error.
    let (code, _) = run_json(
        &cs,
        &[
            &p[..],
            &["locks", "decide", "early", "--transaction", "0f1e"],
        ]
        .concat(),
    );
    assert_ne!(code, 0);
}

/// `locks show` lists the commits a dead writer left in the partition:
/// one past its commit point (committed, its ledger entry still marked),
/// one before it (undecided), then withdrawn by `locks decide`; a
/// partition without lock blob or commit is not found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_show_lists_the_commits_a_dead_writer_left() {
    let Some(cs) = azurite_connection_string() else {
        return;
    };
    let names = unique_names("cli_show_commits");
    let prefix = names.prefix().to_owned();
    let p = ["--table-prefix", prefix.as_str()];
    let (_, said, committed) = crashed_transfer(&cs, &prefix, "late", 3).await;
    said.expect("applied at its commit point");
    let (_, said, undecided) = crashed_transfer(&cs, &prefix, "early", 2).await;
    assert!(said.is_err(), "in doubt");

    let out = run(&[
        &["--connection-string", cs.as_str()][..],
        &p[..],
        &["locks", "show", "late"],
    ]
    .concat());
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().any(|l| l == "commits       1"), "{text}");
    let header = text.lines().find(|l| l.starts_with("TRANSACTION"));
    assert!(
        header.is_some_and(|h| h.contains("STATE") && h.ends_with("MARKED ROWS")),
        "{text}"
    );
    let line = text
        .lines()
        .find(|l| l.starts_with(committed.as_str()))
        .unwrap_or_else(|| panic!("a line for {committed}: {text}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words.len(), 5, "{line}");
    assert_eq!(words[1], "committed", "{line}");
    assert_eq!(words[2], format!("{prefix}CliAccounts/late"), "{line}");
    assert!(words[3].ends_with('s'), "an age: {line}");
    assert_eq!(words[4], format!("{prefix}CliLedger:1"), "{line}");

    let show = [&p[..], &["locks", "show", "early"]].concat();
    let (code, shown) = run_json(&cs, &show);
    assert_eq!(code, 0, "{shown}");
    let commits = shown["commits"].as_array().expect("commits");
    assert_eq!(commits.len(), 1, "{shown}");
    assert_eq!(commits[0]["transaction"], undecided.as_str(), "{shown}");
    assert_eq!(commits[0]["state"], "undecided", "{shown}");
    assert_eq!(commits[0]["primary"], "early", "{shown}");
    assert_eq!(
        commits[0]["marked_rows"],
        json!([{ "table": format!("{prefix}CliLedger"), "rows": 1 }]),
        "{shown}"
    );
    assert!(commits[0]["age_seconds"].is_u64(), "{shown}");
    // Decided from the command line: withdrawn, its mark still there.
    let decide = [
        &p[..],
        &[
            "locks",
            "decide",
            "early",
            "--transaction",
            undecided.as_str(),
        ],
    ]
    .concat();
    let (code, decided) = run_json(&cs, &decide);
    assert_eq!((code, &decided["applied"]), (0, &json!(false)), "{decided}");
    let (_, shown) = run_json(&cs, &show);
    assert_eq!(shown["commits"][0]["state"], "withdrawn", "{shown}");
    assert_eq!(shown["commits"][0]["marked_rows"][0]["rows"], 1, "{shown}");

    let (code, missing) = run_json(&cs, &[&p[..], &["locks", "show", "nobody"]].concat());
    assert_eq!(code, 3, "{missing}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_list_and_show_name_the_holder_of_a_leaked_unit() {
    let Some(cs) = azurite_connection_string() else {
        return;
    };
    let names = unique_names("cli_lock_holder");
    let prefix = names.prefix().to_owned();
    let holder = Store::builder(AzureBackend::from_connection_string(&cs).unwrap())
        .table_prefix(prefix.as_str())
        .unwrap()
        .build()
        .unwrap();
    let owner = holder.locks().owner().to_owned();
    // A process holds the lock and never gives it up (as if killed: its
    // unit is leaked, never released).
    std::mem::forget(holder.lock("p").await.unwrap());

    let p = ["--table-prefix", prefix.as_str()];
    let (code, listed) = run_json(&cs, &[&p[..], &["locks", "list"]].concat());
    assert_eq!(code, 0, "{listed}");
    let locks = listed["locks"].as_array().unwrap();
    assert_eq!(locks.len(), 1, "{listed}");
    assert_eq!(locks[0]["holder"], owner.as_str(), "{listed}");
    let (code, shown) = run_json(&cs, &[&p[..], &["locks", "show", "p"]].concat());
    assert_eq!(code, 0, "{shown}");
    assert_eq!(shown["holder"], owner.as_str(), "{shown}");
    assert!(shown["acquired_at"].is_string(), "{shown}");
    let out = run(&[
        &["--connection-string", cs.as_str()][..],
        &p[..],
        &["locks", "show", "p"],
    ]
    .concat());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("holder") && l.ends_with(owner.as_str())),
        "{text}"
    );
    let out = run(&[
        &["--connection-string", cs.as_str()][..],
        &p[..],
        &["locks", "list"],
    ]
    .concat());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(owner.as_str()), "{text}");

    // After a break the lock is free, and its last holder is still named.
    let (code, broken) = run_json(&cs, &[&p[..], &["locks", "break", "p"]].concat());
    assert_eq!(
        (code, &broken["broken"]),
        (0, &Value::from(true)),
        "{broken}"
    );
    let (_, shown) = run_json(&cs, &[&p[..], &["locks", "show", "p"]].concat());
    assert_eq!(shown["holder"], Value::Null, "{shown}");
    assert_eq!(shown["last_owner"], owner.as_str(), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stdout_ends_the_command_quietly() {
    use std::process::Stdio;

    let Some(cs) = azurite_connection_string() else {
        return;
    };
    let names = unique_names("cli_closed_pipe");
    let prefix = names.prefix().to_owned();
    let store = Store::builder(AzureBackend::from_connection_string(&cs).unwrap())
        .table_prefix(prefix.as_str())
        .unwrap()
        .build()
        .unwrap();
    for pk in ["a", "b", "c"] {
        store.lock(pk).await.unwrap().abandon().await.unwrap();
    }
    for json in [true, false] {
        let mut args = vec!["--connection-string", cs.as_str(), "--table-prefix"];
        args.push(prefix.as_str());
        if json {
            args.push("--json");
        }
        args.extend(["locks", "list"]);
        let mut child = Command::new(env!("CARGO_BIN_EXE_leasehold"))
            .env_remove("AZURE_STORAGE_CONNECTION_STRING")
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the leasehold binary runs");
        // The reader goes away before anything is printed (as `head -c 10`
        // does once it has its bytes).
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(0),
            "json {json}: {:?} {stderr}",
            out.status
        );
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "json {json}: {stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breaking_a_free_lock_prints_not_held() {
    let Some(cs) = azurite_connection_string() else {
        return;
    };
    let names = unique_names("cli_break_free");
    let prefix = names.prefix().to_owned();
    let store = Store::builder(AzureBackend::from_connection_string(&cs).unwrap())
        .table_prefix(prefix.as_str())
        .unwrap()
        .build()
        .unwrap();
    store.lock("q").await.unwrap().abandon().await.unwrap();
    let p = ["--table-prefix", prefix.as_str()];
    let out = run(&[
        &["--connection-string", cs.as_str()][..],
        &p[..],
        &["locks", "break", "q"],
    ]
    .concat());
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("not held (available); nothing to break"),
        "{text}"
    );
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "CliCustomers")]
struct Customer {
    #[entity(partition_key)]
    region: String,
    #[entity(row_key)]
    id: String,
    #[entity(unique)]
    email: String,
}

/// An entity written around leasehold (no index row) and an index row
/// left behind are reported by `indexes verify` and fixed by `indexes
/// rebuild`; a table never indexed is "not found".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexes_verify_reports_and_rebuild_fixes_broken_index_rows() {
    let Some(cs) = azurite_connection_string() else {
        return;
    };
    let names = unique_names("cli_indexes");
    let prefix = names.prefix().to_owned();
    let store = Store::builder(AzureBackend::from_connection_string(&cs).unwrap())
        .table_prefix(prefix.as_str())
        .unwrap()
        .build()
        .unwrap();
    let customers = store.table::<Customer>();
    for i in 0..3 {
        customers
            .insert(Customer {
                region: "eu".into(),
                id: format!("c{i}"),
                email: format!("c{i}@x.org"),
            })
            .await
            .unwrap();
    }
    // A writer outside leasehold: deletes c0 without its index row, and
    // writes c9 without one.
    let table = names.table("CliCustomers");
    let backend = store.backend();
    backend
        .execute(
            &table,
            leasehold::backend::TableOp::Delete {
                partition_key: "eu".parse().unwrap(),
                row_key: "c0".parse().unwrap(),
                condition: leasehold::backend::Precondition::IfExists,
            },
            &WriteOptions::new(),
        )
        .await
        .unwrap();
    let outside = Customer {
        region: "eu".into(),
        id: "c9".into(),
        email: "c9@x.org".into(),
    };
    backend
        .execute(
            &table,
            leasehold::backend::TableOp::Insert(
                leasehold::entity::Entity::encode(&outside).unwrap(),
            ),
            &WriteOptions::new(),
        )
        .await
        .unwrap();

    let args = [
        "--table-prefix",
        prefix.as_str(),
        "indexes",
        "verify",
        "CliCustomers",
    ];
    let (code, doc) = run_json(&cs, &args);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["consistent"], false, "{doc}");
    assert_eq!(doc["entities"], 3, "{doc}");
    assert_eq!(doc["missing"].as_array().unwrap().len(), 1, "{doc}");
    // c0's claim names an entity that no longer holds its value: stale.
    assert_eq!(doc["orphans"].as_array().unwrap().len(), 0, "{doc}");
    assert_eq!(doc["stale"], 1, "{doc}");

    let args = [
        "--table-prefix",
        prefix.as_str(),
        "indexes",
        "rebuild",
        "CliCustomers",
    ];
    let (code, doc) = run_json(&cs, &args);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["repaired"], 2, "{doc}");

    let mut text = vec!["--connection-string", cs.as_str()];
    text.extend([
        "--table-prefix",
        prefix.as_str(),
        "indexes",
        "verify",
        "CliCustomers",
    ]);
    let out = run(&text);
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("consistent"), "{stdout}");
    assert!(out.stderr.is_empty(), "no progress bar off a terminal");
    // The freed value can be taken again through leasehold.
    customers
        .insert(Customer {
            region: "us".into(),
            id: "c5".into(),
            email: "c0@x.org".into(),
        })
        .await
        .unwrap();

    let args = [
        "--table-prefix",
        prefix.as_str(),
        "indexes",
        "verify",
        "Nothing",
    ];
    let (code, _) = run_json(&cs, &args);
    assert_eq!(code, 3);
}

/// `leasehold sweep` lists the partitions whose lock blobs it would
/// remove with `--dry-run` (deleting nothing), keeps those locked within
/// `--older-than` and a held one, then removes the free ones, saying what
/// it kept per reason; a removed partition locks again. (It replaced
/// `leasehold locks prune`, which is gone.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_lists_lock_blobs_with_dry_run_then_deletes_free_ones() {
    let Some(cs) = azurite_connection_string() else {
        return;
    };
    let names = unique_names("cli_prune");
    let prefix = names.prefix().to_owned();
    let store = Store::builder(AzureBackend::from_connection_string(&cs).unwrap())
        .table_prefix(prefix.as_str())
        .unwrap()
        .build()
        .unwrap();
    for pk in ["a", "b", "c"] {
        store.lock(pk).await.unwrap().abandon().await.unwrap();
    }
    // A lock held while sweeping stays.
    let held = store.lock("held").await.unwrap();
    let p = ["--table-prefix", prefix.as_str()];
    let listed = |cs: &str| {
        let (code, listed) = run_json(cs, &[&p[..], &["locks", "list"]].concat());
        assert_eq!(code, 0, "{listed}");
        listed["locks"].as_array().unwrap().len()
    };
    assert_eq!(listed(&cs), 4);

    // Bad durations are usage errors, before anything is sent.
    for bad in ["7", "7w", "1.5h", "-1s", "", "1 h"] {
        // `=` so that clap hands `-1s` to the parser instead of reading a flag.
        let arg = format!("--older-than={bad}");
        let out = run(&[
            &["--connection-string", cs.as_str()][..],
            &p[..],
            &["sweep", arg.as_str()],
        ]
        .concat());
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("is not a duration"), "{bad:?}: {stderr}");
    }
    assert_eq!(listed(&cs), 4);

    // Nothing is a week old; --dry-run lists every free lock at 0s, deletes
    // nothing.
    let sweep = |extra: &[&str]| -> (i32, Value) {
        let (code, v) = run_json(&cs, &[&p[..], &["sweep"], extra].concat());
        (code, v)
    };
    let (code, week) = sweep(&["--older-than", "7d"]);
    assert_eq!(code, 0, "{week}");
    assert_eq!(
        (
            &week["lock_blobs"],
            &week["lock_blobs_kept_recent"],
            &week["lock_blobs_kept_held"]
        ),
        (&Value::from(0), &Value::from(3), &Value::from(1)),
        "{week}"
    );
    let (code, plan) = sweep(&["--older-than", "0s", "--dry-run"]);
    assert_eq!(code, 0, "{plan}");
    assert_eq!(plan["dry_run"], true, "{plan}");
    assert_eq!(
        plan["lock_blob_partitions"],
        serde_json::json!(["a", "b", "c"]),
        "{plan}"
    );
    assert_eq!(plan["lock_blobs_kept_held"], 1, "{plan}");
    assert_eq!(plan["lock_blobs_examined"], 4, "{plan}");
    let out = run(&[
        &["--connection-string", cs.as_str()][..],
        &p[..],
        &["sweep", "--older-than", "0s", "--dry-run"],
    ]
    .concat());
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[..3], ["a", "b", "c"], "{text}");
    assert!(
        lines[3].starts_with("sweep: would remove 0 tombstones") && lines[3].contains(
            "3 lock blobs, 0 expired rows (0 rows examined, 0 kept; 4 lock blobs examined, kept 1 held, 0 pending, 0 recent)"
        ),
        "{text}"
    );
    assert_eq!(listed(&cs), 4, "a dry run deletes nothing");

    // Then for real: the free locks go, the held one stays.
    let out = run(&[
        &["--connection-string", cs.as_str()][..],
        &p[..],
        &["sweep", "--older-than", "0s"],
    ]
    .concat());
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("3 lock blobs, 0 expired rows (0 rows examined, 0 kept; 4 lock blobs examined, kept 1 held, 0 pending, 0 recent)"),
        "{text}"
    );
    assert_eq!(listed(&cs), 1);
    held.abandon().await.unwrap();
    let (code, report) = sweep(&["--older-than", "0s"]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(
        report["lock_blob_partitions"],
        serde_json::json!(["held"]),
        "{report}"
    );
    assert_eq!(listed(&cs), 0);
    // A removed partition locks again.
    store.lock("a").await.unwrap().abandon().await.unwrap();
    assert_eq!(listed(&cs), 1);
    // The command is gone.
    let out = run(&[
        &["--connection-string", cs.as_str()][..],
        &p[..],
        &["locks", "prune", "--older-than", "0s"],
    ]
    .concat());
    assert_eq!(out.status.code(), Some(2));
}

/// `indexes verify --json` lists a unique value held twice as an object
/// naming the index, the value, its partition and the entities holding
/// it. The `locks` commands take a partition key only: indexed writes
/// take no lock on an index value's partition, so `--index` is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_lists_duplicates_as_objects_and_locks_take_no_index_values() {
    let Some(cs) = azurite_connection_string() else {
        return;
    };
    let names = unique_names("cli_index_values");
    let prefix = names.prefix().to_owned();
    let store = Store::builder(AzureBackend::from_connection_string(&cs).unwrap())
        .table_prefix(prefix.as_str())
        .unwrap()
        .build()
        .unwrap();
    store
        .table::<Customer>()
        .insert(Customer {
            region: "eu".into(),
            id: "c1".into(),
            email: "user@example.com".into(),
        })
        .await
        .unwrap();
    let encoded = "email user@example.0com";
    let p = ["--table-prefix", prefix.as_str()];
    let out = run(&[
        &["--connection-string", cs.as_str()][..],
        &p[..],
        &["locks", "show", "--index", "CliCustomers.email", "x"],
    ]
    .concat());
    assert_eq!(out.status.code(), Some(2), "--index is no option any more");

    // A second holder of the value, written around leasehold.
    let outside = Customer {
        region: "us".into(),
        id: "c2".into(),
        email: "user@example.com".into(),
    };
    store
        .backend()
        .execute(
            &names.table("CliCustomers"),
            leasehold::backend::TableOp::Insert(
                leasehold::entity::Entity::encode(&outside).unwrap(),
            ),
            &WriteOptions::new(),
        )
        .await
        .unwrap();
    let (code, doc) = run_json(
        &cs,
        &[&p[..], &["indexes", "verify", "CliCustomers"]].concat(),
    );
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["consistent"], false, "{doc}");
    let duplicates = doc["duplicates"].as_array().expect("a list");
    assert_eq!(duplicates.len(), 1, "{doc}");
    let dup = &duplicates[0];
    assert_eq!(dup["index"], "CliCustomers.email", "{doc}");
    assert_eq!(dup["field"], "email", "{doc}");
    assert_eq!(dup["value"], "user@example.com", "{doc}");
    assert_eq!(dup["partition_key"], encoded, "{doc}");
    assert_eq!(
        dup["entities"],
        serde_json::json!([
            { "partition_key": "eu", "row_key": "c1" },
            { "partition_key": "us", "row_key": "c2" },
        ]),
        "{doc}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_are_listed_created_and_deleted_under_the_prefix() {
    let Some(cs) = azurite_connection_string() else {
        return;
    };
    let names = unique_names("cli_tables");
    let prefix = names.prefix().to_owned();
    let p = ["--table-prefix", prefix.as_str()];
    let tables = |args: &[&str]| run_json(&cs, &[&p[..], &["tables"], args].concat());

    let none = json!({ "tables": [], "index_tables": [] });
    assert_eq!(tables(&["list"]), (0, none.clone()));
    assert_eq!(
        tables(&["create", "Orders"]),
        (0, json!({ "table": "Orders", "created": true }))
    );
    assert_eq!(
        tables(&["create", "Orders"]),
        (0, json!({ "table": "Orders", "created": false }))
    );
    // The library sees the table the command made, under the prefix.
    let store = Store::builder(AzureBackend::from_connection_string(&cs).unwrap())
        .table_prefix(prefix.as_str())
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(store.list_tables().await.unwrap(), ["Orders"]);
    assert_eq!(
        tables(&["list"]),
        (0, json!({ "tables": ["Orders"], "index_tables": [] }))
    );

    let out = run(&[
        &["--connection-string", cs.as_str()][..],
        &p[..],
        &["tables", "list"],
    ]
    .concat());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "Orders");

    assert_eq!(
        tables(&["delete", "Orders"]),
        (
            0,
            json!({ "table": "Orders", "deleted": true, "index_table": null })
        )
    );
    let (code, doc) = tables(&["delete", "Orders"]);
    assert_eq!(code, 3, "{doc}");
    assert!(
        doc["error"]["message"].as_str().unwrap().contains("Orders"),
        "{doc}"
    );
    let (code, doc) = tables(&["create", "bad-name"]);
    assert_eq!(code, 2, "an invalid name is a usage error: {doc}");
    assert_eq!(tables(&["list"]), (0, none.clone()));

    // An indexed type's index table is listed apart, and deleted with its
    // table.
    store
        .table::<Customer>()
        .insert(Customer {
            region: "eu".into(),
            id: "c1".into(),
            email: "user@example.com".into(),
        })
        .await
        .unwrap();
    assert_eq!(
        tables(&["list"]),
        (
            0,
            json!({ "tables": ["CliCustomers"], "index_tables": ["CliCustomersIdx"] })
        )
    );
    let out = run(&[
        &["--connection-string", cs.as_str()][..],
        &p[..],
        &["tables", "list"],
    ]
    .concat());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "CliCustomers\nCliCustomersIdx  (index table of CliCustomers)"
    );
    let out = run(&[
        &["--connection-string", cs.as_str()][..],
        &p[..],
        &["tables", "delete", "CliCustomers"],
    ]
    .concat());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "CliCustomers: deleted, with its index table CliCustomersIdx"
    );
    assert_eq!(tables(&["list"]), (0, none.clone()));
    // A table without one says so in JSON.
    tables(&["create", "Orders"]);
    assert_eq!(
        tables(&["delete", "Orders"]),
        (
            0,
            json!({ "table": "Orders", "deleted": true, "index_table": null })
        )
    );
}

/// `locks show` and `locks list` of a store without a table prefix name its
/// lock by the partition key, with no leading `/`; a prefixed store's locks
/// are not in its list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unprefixed_lock_names_print_without_a_leading_slash() {
    let Some(cs) = azurite_connection_string() else {
        return;
    };
    let names = unique_names("cli_lock_name");
    let key = format!("held-during-show-{}", names.prefix());
    let store = Store::new(AzureBackend::from_connection_string(&cs).unwrap());
    let prefixed = Store::builder(AzureBackend::from_connection_string(&cs).unwrap())
        .table_prefix(names.prefix())
        .unwrap()
        .build()
        .unwrap();
    let unit = store.lock(key.as_str()).await.unwrap();
    let other = prefixed.lock(key.as_str()).await.unwrap();
    let out = run(&["--connection-string", cs.as_str(), "locks", "show", &key]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.lines().any(|l| l == format!("lock lease    {key}")),
        "{text}"
    );
    assert!(!text.contains(&format!("/{key}")), "{text}");
    let (code, listed) = run_json(&cs, &["locks", "list"]);
    assert_eq!(code, 0, "{listed}");
    let locks = listed["locks"].as_array().unwrap();
    let ours: Vec<&Value> = locks
        .iter()
        .filter(|l| l["name"].as_str().is_some_and(|n| n.contains(key.as_str())))
        .collect();
    assert_eq!(ours.len(), 1, "only the unprefixed store's lock: {listed}");
    assert_eq!(ours[0]["name"], key.as_str(), "{listed}");
    assert_eq!(ours[0]["partition_key"], key.as_str(), "{listed}");
    unit.abandon().await.unwrap();
    other.abandon().await.unwrap();
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "CliEvents")]
struct Event {
    #[entity(partition_key)]
    day: String,
    #[entity(row_key)]
    id: String,
    kind: String,
    size: i64,
}

/// Off a terminal, every long command prints a plain progress line on
/// stderr each interval (`LEASEHOLD_PROGRESS_EVERY_MS`, 1 ms here): its
/// count, rate and time; and it ends with a line saying what it did. With the interval
/// longer than the run, stderr stays empty. (The redrawn bar on a terminal
/// is not tested: stderr here is a pipe.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_commands_print_progress_lines_off_a_terminal_and_say_what_they_did() {
    let Some(cs) = azurite_connection_string() else {
        return;
    };
    let names = unique_names("cli_progress");
    let prefix = names.prefix().to_owned();
    let copy = unique_names("cli_progress_copy").prefix().to_owned();
    let store = Store::builder(AzureBackend::from_connection_string(&cs).unwrap())
        .table_prefix(prefix.as_str())
        .unwrap()
        .build()
        .unwrap();
    // More rows than one page of a query (1,000), so that the row counts
    // move more than once.
    let events = store.table::<Event>();
    for chunk in 0..12 {
        let mut batch = events.batch();
        for i in 0..100 {
            batch = batch.insert(Event {
                day: "d1".into(),
                id: format!("{:04}", chunk * 100 + i),
                kind: "audit".into(),
                size: i,
            });
        }
        batch.commit().await.unwrap();
    }
    let customers = store.table::<Customer>();
    for i in 0..3 {
        customers
            .insert(Customer {
                region: "eu".into(),
                id: format!("c{i}"),
                email: format!("c{i}@x.org"),
            })
            .await
            .unwrap();
    }
    store.lock("p").await.unwrap().abandon().await.unwrap();
    let dir = std::env::temp_dir().join(format!("leasehold-cli-progress-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("events").display().to_string();

    let every = |ms: &str, prefix: &str, args: &[&str]| {
        let out = run_with_progress_every(
            ms,
            &[
                &["--connection-string", cs.as_str(), "--table-prefix", prefix][..],
                args,
            ]
            .concat(),
        );
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stdout}{stderr}");
        (stdout, stderr)
    };
    // Each progress line starts with the command; a counting one gives the
    // count, the rate and the seconds.
    let lines_of = |stderr: &str, start: &str| -> usize {
        for line in stderr.lines() {
            assert!(line.starts_with(start), "{start}: {stderr}");
        }
        stderr.lines().count()
    };
    let counting = |stderr: &str, start: &str, unit: &str| {
        assert!(lines_of(stderr, start) >= 1, "{start}: no progress line");
        for line in stderr.lines() {
            assert!(
                line.contains(&format!(" {unit} (")) && line.contains(&format!(" {unit}/s, ")),
                "{line}"
            );
        }
    };

    let (stdout, stderr) = every("1", &prefix, &["count", "--table", "CliEvents"]);
    counting(&stderr, "count: counted ", "rows");
    assert!(stdout.starts_with("CliEvents: 1200 rows ("), "{stdout}");
    let (stdout, stderr) = every("3600000", &prefix, &["count", "--table", "CliEvents"]);
    assert_eq!(stderr, "", "no line before the interval");
    assert!(stdout.starts_with("CliEvents: 1200 rows ("), "{stdout}");

    let (stdout, stderr) = every(
        "1",
        &prefix,
        &["export", "--table", "CliEvents", "--out", &file],
    );
    counting(&stderr, "export: exported ", "rows");
    assert!(
        stdout.starts_with(&format!("exported 1200 rows of CliEvents to {file} in ")),
        "{stdout}"
    );

    let (stdout, stderr) = every(
        "1",
        &copy,
        &["import", "--table", "CliEvents", "--in", &file],
    );
    counting(&stderr, "import: imported ", "rows");
    assert!(
        stdout.starts_with(&format!(
            "imported 1200 rows from {file} into CliEvents (1200 written, 0 already there) in "
        )),
        "{stdout}"
    );

    let (stdout, stderr) = every("1", &copy, &["purge", "--table", "CliEvents", "--yes"]);
    counting(&stderr, "purge: deleted ", "rows");
    assert!(
        stdout.starts_with("CliEvents: deleted 1200 rows in "),
        "{stdout}"
    );

    let (stdout, stderr) = every("1", &prefix, &["indexes", "verify", "CliCustomers"]);
    counting(&stderr, "indexes verify: read ", "rows");
    assert_eq!(stdout.lines().last(), Some("consistent"), "{stdout}");
    let (stdout, stderr) = every("1", &prefix, &["indexes", "rebuild", "CliCustomers"]);
    counting(&stderr, "indexes rebuild: read ", "rows");
    assert_eq!(
        stdout.lines().last(),
        Some("repaired 0 index rows"),
        "{stdout}"
    );

    let (stdout, stderr) = every("1", &prefix, &["sweep", "--older-than", "1h", "--dry-run"]);
    assert!(lines_of(&stderr, "sweep: ") >= 1, "{stderr}");
    assert!(
        stderr.lines().any(|l| l.starts_with("sweep: read ")),
        "{stderr}"
    );
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("sweep: would remove ") && last.contains(" lock blobs examined"),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `purge` without `--yes` when stdin is not a terminal refuses with a
/// usage error before it opens anything, saying how to confirm.
#[test]
fn purge_without_yes_off_a_terminal_is_refused() {
    let out = run(&[
        "--connection-string",
        "UseDevelopmentStorage=true",
        "purge",
        "--table",
        "Events",
        "--partition",
        "d1",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--yes") && stderr.contains("partition \"d1\""),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

/// `count` and `purge` select rows by partition, row-key range and
/// filters, say what they did, and refuse a missing table (3), a bad
/// filter (2) and an indexed table (2) without touching anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_and_count_select_rows_and_say_what_they_did() {
    let Some(cs) = azurite_connection_string() else {
        return;
    };
    let names = unique_names("cli_purge");
    let prefix = names.prefix().to_owned();
    let store = Store::builder(AzureBackend::from_connection_string(&cs).unwrap())
        .table_prefix(prefix.as_str())
        .unwrap()
        .build()
        .unwrap();
    let events = store.table::<Event>();
    for day in ["d1", "d2"] {
        let mut batch = events.batch();
        for i in 0..30 {
            batch = batch.insert(Event {
                day: day.into(),
                id: format!("{i:02}"),
                kind: if i % 2 == 0 { "debug" } else { "audit" }.into(),
                size: i,
            });
        }
        batch.commit().await.unwrap();
    }
    let p = ["--table-prefix", prefix.as_str()];
    let json = |args: &[&str]| run_json(&cs, &[&p[..], args].concat());
    let text =
        |args: &[&str]| run(&[&["--connection-string", cs.as_str()][..], &p[..], args].concat());
    let count_of = |doc: &Value| doc["count"].as_u64().expect("a count");

    let (code, doc) = json(&["count", "--table", "CliEvents"]);
    assert_eq!((code, count_of(&doc)), (0, 60), "{doc}");
    let (code, doc) = json(&["count", "--table", "CliEvents", "--partition", "d1"]);
    assert_eq!((code, count_of(&doc)), (0, 30), "{doc}");
    let (code, doc) = json(&[
        "count",
        "--table",
        "CliEvents",
        "--filter",
        "kind eq 'debug'",
        "--filter",
        "size ge 10L",
    ]);
    assert_eq!((code, count_of(&doc)), (0, 20), "{doc}");
    let out = text(&["count", "--table", "CliEvents", "--partition", "d2"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("CliEvents: 30 rows"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // Refused off a terminal without --yes: nothing deleted.
    let out = text(&["purge", "--table", "CliEvents", "--partition", "d1"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(events.count(events.query()).await.unwrap(), 60);

    let (code, doc) = json(&[
        "purge",
        "--table",
        "CliEvents",
        "--partition",
        "d1",
        "--from",
        "10",
        "--to",
        "20",
        "--yes",
    ]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(
        (&doc["deleted"], &doc["skipped"], &doc["batches"]),
        (&json!(10), &json!(0), &json!(1)),
        "{doc}"
    );
    let out = text(&[
        "purge",
        "--table",
        "CliEvents",
        "--filter",
        "kind eq 'audit'",
        "--yes",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.starts_with("CliEvents: deleted 25 rows in 2 transactions"),
        "{said}"
    );
    let left: Vec<(String, String)> = events
        .query()
        .all()
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.day.clone(), e.id.clone()))
        .collect();
    assert_eq!(left.len(), 25, "{left:?}");
    assert!(left.iter().all(|(day, id)| {
        let n: i64 = id.parse().unwrap();
        n % 2 == 0 && !(day == "d1" && (10..20).contains(&n))
    }));

    // Refusals: a missing table, a bad filter, a bad range, an indexed table.
    let (code, doc) = json(&["count", "--table", "CliNothing"]);
    assert_eq!(code, 3, "{doc}");
    assert!(
        !store
            .list_tables()
            .await
            .unwrap()
            .contains(&"CliNothing".to_owned())
    );
    let (code, doc) = json(&["count", "--table", "CliEvents", "--filter", "size gt 5 and"]);
    assert_eq!(code, 2, "{doc}");
    let (code, doc) = json(&["count", "--table", "CliEvents", "--from", "m", "--to", "a"]);
    assert_eq!(code, 2, "{doc}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("row key range"),
        "{doc}"
    );
    store
        .table::<Customer>()
        .insert(Customer {
            region: "eu".into(),
            id: "c1".into(),
            email: "purge@example.com".into(),
        })
        .await
        .unwrap();
    let (code, doc) = json(&["purge", "--table", "CliCustomers", "--yes"]);
    assert_eq!(code, 2, "{doc}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("indexes"),
        "{doc}"
    );
    assert_eq!(
        store
            .table::<Customer>()
            .count(store.table::<Customer>().query())
            .await
            .unwrap(),
        1
    );
}

/// A store under `prefix` on Azurite, and `rows` rows of table `Moved` in
/// three partitions written through it: Int64 past 2^53, doubles JSON
/// cannot spell, date-times to 100 ns.
async fn moved_rows(cs: &str, prefix: &str, rows: usize) -> Store {
    use leasehold::entity::Value;
    let store = Store::builder(AzureBackend::from_connection_string(cs).unwrap())
        .table_prefix(prefix)
        .unwrap()
        .build()
        .unwrap();
    let table = store.dynamic_table("Moved");
    for i in 0..rows {
        let mut row = leasehold::DynamicEntity::new(
            leasehold::PartitionKey::new(format!("p{}", i % 3)).unwrap(),
            leasehold::RowKey::new(format!("r{i:05}")).unwrap(),
        );
        row.properties
            .insert("n", Value::Int64((1 << 53) + i as i64));
        row.properties.insert(
            "d",
            Value::Double([f64::NAN, f64::NEG_INFINITY, 0.25][i % 3]),
        );
        row.properties.insert(
            "t",
            Value::DateTime(
                leasehold::time::OffsetDateTime::from_unix_timestamp_nanos(
                    1_700_000_000_123_456_700 + i as i128 * 100,
                )
                .unwrap(),
            ),
        );
        row.properties
            .insert("s", Value::String(format!("it's row {i}")));
        table.insert(row).await.unwrap();
    }
    store
}

/// `export` writes every row of a table (or of a partition, or those a
/// filter picks) as JSON lines; `import` writes them into an empty table
/// of another prefix, whose export is then the same bytes; importing again
/// finds every row already there (insert) or writes it again (upsert),
/// and a row stored otherwise fails an insert-only import.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_and_import_round_trip_a_table_through_a_file() {
    let Some(cs) = azurite_connection_string() else {
        return;
    };
    let names = unique_names("cli_export");
    let from = format!("{}a", names.prefix());
    let to = format!("{}b", names.prefix());
    moved_rows(&cs, &from, 30).await;
    let dir = std::env::temp_dir().join(format!("leasehold-{}", names.prefix()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str| dir.join(name).display().to_string();
    let with = |prefix: &str, args: &[&str]| {
        run_json(&cs, &[&["--table-prefix", prefix][..], args].concat())
    };

    let (code, doc) = with(
        &from,
        &["export", "--table", "Moved", "--out", &file("all")],
    );
    assert_eq!((code, &doc["rows"]), (0, &json!(30)), "{doc}");
    let all = std::fs::read_to_string(file("all")).unwrap();
    assert_eq!(all.lines().count(), 30);
    assert!(
        all.contains(r#""n":"9007199254740992","n@odata.type":"Edm.Int64""#),
        "{all}"
    );
    assert!(
        all.contains(r#""d":"NaN","d@odata.type":"Edm.Double""#),
        "{all}"
    );
    assert!(
        all.contains(r#""t":"2023-11-14T22:13:20.1234567Z""#),
        "{all}"
    );

    let (_, doc) = with(
        &from,
        &[
            "export",
            "--table",
            "Moved",
            "--partition",
            "p1",
            "--out",
            &file("p1"),
        ],
    );
    assert_eq!(doc["rows"], json!(10), "{doc}");
    let p1 = std::fs::read_to_string(file("p1")).unwrap();
    assert!(
        p1.lines().all(|l| l.starts_with(r#"{"PartitionKey":"p1""#)),
        "{p1}"
    );
    let (_, doc) = with(
        &from,
        &[
            "export",
            "--table",
            "Moved",
            "--filter",
            "n ge 9007199254741012L and s ne 'it''s row 25'",
            "--out",
            &file("some"),
        ],
    );
    assert_eq!(doc["rows"], json!(9), "rows 20 to 29 but 25: {doc}");

    let (code, doc) = with(&to, &["import", "--table", "Moved", "--in", &file("all")]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(
        (
            &doc["rows"],
            &doc["written"],
            &doc["already_there"],
            &doc["mode"]
        ),
        (&json!(30), &json!(30), &json!(0), &json!("insert"))
    );
    with(
        &to,
        &["export", "--table", "Moved", "--out", &file("again")],
    );
    assert!(
        std::fs::read(file("again")).unwrap() == all.as_bytes(),
        "byte-identical"
    );

    let (_, doc) = with(&to, &["import", "--table", "Moved", "--in", &file("all")]);
    assert_eq!(
        (&doc["written"], &doc["already_there"]),
        (&json!(0), &json!(30))
    );
    let (_, doc) = with(
        &to,
        &[
            "import",
            "--table",
            "Moved",
            "--in",
            &file("all"),
            "--mode",
            "upsert",
        ],
    );
    assert_eq!(
        (&doc["written"], &doc["already_there"]),
        (&json!(30), &json!(0))
    );

    // Text output: a summary line with count and rate.
    let out = run(&[
        "--connection-string",
        &cs,
        "--table-prefix",
        &to,
        "export",
        "--table",
        "Moved",
        "--out",
        &file("text"),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("exported 30 rows of Moved to ") && text.contains("rows/s"),
        "{text}"
    );

    // A row stored with other values: an insert-only import refuses it.
    let changed = all.replacen("it's row 0", "changed", 1);
    std::fs::write(file("changed"), changed).unwrap();
    let (code, doc) = with(
        &to,
        &["import", "--table", "Moved", "--in", &file("changed")],
    );
    assert_eq!(code, 1, "{doc}");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("already exists") && message.contains("\"r00000\""),
        "{message}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// An export stopped half-way (its checkpoint after the first page, part
/// of the next page written after it) resumes there: the output is cut
/// back to the checkpoint and completed, every row once; an import
/// resumes after the rows its checkpoint counts, rows stored past it
/// counted as already there. Both checkpoints are removed at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_and_import_resume_from_their_checkpoints() {
    use futures_util::TryStreamExt as _;
    let Some(cs) = azurite_connection_string() else {
        return;
    };
    let names = unique_names("cli_resume");
    let from = format!("{}a", names.prefix());
    let to = format!("{}b", names.prefix());
    let store = moved_rows(&cs, &from, 2500).await;
    let dir = std::env::temp_dir().join(format!("leasehold-{}", names.prefix()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str| dir.join(name).display().to_string();
    let with = |prefix: &str, args: &[&str]| {
        run_json(&cs, &[&["--table-prefix", prefix][..], args].concat())
    };
    let (_, doc) = with(
        &from,
        &["export", "--table", "Moved", "--out", &file("whole")],
    );
    assert_eq!(doc["rows"], json!(2500));
    let whole = std::fs::read_to_string(file("whole")).unwrap();

    // The first page (1000 rows) written and checkpointed, then half a line.
    let mut pages = std::pin::pin!(store.dynamic_table("Moved").export());
    let first = pages.try_next().await.unwrap().unwrap();
    let mut lines = String::new();
    for row in &first.items {
        lines.push_str(&row.to_json_line().unwrap());
        lines.push('\n');
    }
    assert_eq!(first.items.len(), 1000);
    let checkpoint = json!({
        "table": "Moved",
        "token": first.continuation.unwrap().to_string(),
        "rows": 1000,
        "bytes": lines.len(),
    });
    std::fs::write(file("export.ckpt"), checkpoint.to_string()).unwrap();
    std::fs::write(file("part"), format!("{lines}{{\"PartitionKey\":\"p")).unwrap();
    let (code, doc) = with(
        &from,
        &[
            "export",
            "--table",
            "Moved",
            "--out",
            &file("part"),
            "--checkpoint",
            &file("export.ckpt"),
        ],
    );
    assert_eq!(
        (code, &doc["rows"], &doc["resumed_at"]),
        (0, &json!(2500), &json!(1000)),
        "{doc}"
    );
    assert!(
        std::fs::read_to_string(file("part")).unwrap() == whole,
        "every row once"
    );
    assert!(!dir.join("export.ckpt").exists(), "removed once complete");

    // An import stopped after 1000 rows, with 200 more stored past its
    // checkpoint.
    let head: String = whole.lines().take(1200).map(|l| format!("{l}\n")).collect();
    std::fs::write(file("head"), head).unwrap();
    with(&to, &["import", "--table", "Moved", "--in", &file("head")]);
    std::fs::write(
        file("import.ckpt"),
        json!({ "table": "Moved", "mode": "insert", "rows": 1000 }).to_string(),
    )
    .unwrap();
    let (code, doc) = with(
        &to,
        &[
            "import",
            "--table",
            "Moved",
            "--in",
            &file("whole"),
            "--checkpoint",
            &file("import.ckpt"),
        ],
    );
    assert_eq!(code, 0, "{doc}");
    assert_eq!(
        (
            &doc["rows"],
            &doc["written"],
            &doc["already_there"],
            &doc["resumed_at"]
        ),
        (&json!(2500), &json!(1300), &json!(200), &json!(1000))
    );
    assert!(!dir.join("import.ckpt").exists(), "removed once complete");
    with(&to, &["export", "--table", "Moved", "--out", &file("copy")]);
    assert!(
        std::fs::read_to_string(file("copy")).unwrap() == whole,
        "none missing, none twice"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Usage errors (exit 2) and a missing table (exit 3), before any row moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_and_import_refuse_bad_arguments() {
    let Some(cs) = azurite_connection_string() else {
        return;
    };
    let names = unique_names("cli_badexport");
    let p = names.prefix().to_owned();
    let with = |args: &[&str]| run_json(&cs, &[&["--table-prefix", p.as_str()][..], args].concat());
    let (code, doc) = with(&["export", "--table", "Nowhere"]);
    assert_eq!(code, 3, "{doc}");
    let (code, doc) = with(&["export", "--table", "Nowhere", "--checkpoint", "x.ckpt"]);
    assert_eq!(code, 2, "{doc}");
    assert!(
        doc["error"]["message"].as_str().unwrap().contains("--out"),
        "{doc}"
    );
    let (code, doc) = with(&[
        "export",
        "--table",
        "Nowhere",
        "--filter",
        "n eq 99999999999",
    ]);
    assert_eq!(code, 2, "{doc}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("99999999999L"),
        "{doc}"
    );
    let (code, doc) = with(&["import", "--table", "Nowhere", "--checkpoint", "x.ckpt"]);
    assert_eq!(code, 2, "{doc}");
    let dir = std::env::temp_dir().join(format!("leasehold-{p}"));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"PartitionKey\":\"p\",\"RowKey\":\"r\"}\n{\"PartitionKey\":\"p\"}\n",
    )
    .unwrap();
    let (code, doc) = with(&["import", "--table", "Moved", "--in", bad.to_str().unwrap()]);
    assert_eq!(code, 2, "{doc}");
    assert!(
        doc["error"]["message"].as_str().unwrap().contains("line 2"),
        "{doc}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "CliMembers")]
struct Member {
    #[entity(partition_key)]
    region: String,
    #[entity(row_key)]
    id: String,
    #[entity(unique)]
    email: String,
}

/// `leasehold sweep` counts with `--dry-run`, removes free lock blobs and
/// keeps a tombstone and a stale claim younger than their bound, and says
/// what it removed per kind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_says_what_it_removed_per_kind_and_keeps_young_rows() {
    let Some(cs) = azurite_connection_string() else {
        return;
    };
    let names = unique_names("cli_sweep");
    let prefix = names.prefix().to_owned();
    let store = Store::builder(AzureBackend::from_connection_string(&cs).unwrap())
        .table_prefix(prefix.as_str())
        .unwrap()
        .build()
        .unwrap();
    for pk in ["a", "b"] {
        store.lock(pk).await.unwrap().abandon().await.unwrap();
    }
    let members = store.table::<Member>();
    let ann = members
        .insert(Member {
            region: "eu".into(),
            id: "1".into(),
            email: "ann@x.org".into(),
        })
        .await
        .unwrap();
    members.delete(&ann).await.unwrap();
    let p = ["--table-prefix", prefix.as_str()];
    let (code, plan) = run_json(
        &cs,
        &[&p[..], &["sweep", "--older-than", "0s", "--dry-run"]].concat(),
    );
    assert_eq!(code, 0, "{plan}");
    assert_eq!(plan["dry_run"], true, "{plan}");
    assert_eq!(plan["lock_blobs"], 2, "{plan}");
    assert_eq!(plan["kept"], 2, "the tombstone and the claim: {plan}");
    assert_eq!(plan["tombstones"], 0, "{plan}");
    let out = run(&[
        &["--connection-string", cs.as_str()][..],
        &p[..],
        &["sweep", "--older-than", "0s"],
    ]
    .concat());
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "sweep: removed 0 tombstones, 0 stale index rows, 0 decision rows, 0 after-image rows, 2 lock blobs, 0 expired rows"
        ),
        "{text}"
    );
    assert!(text.contains("2 kept;"), "{text}");
    let (code, again) = run_json(&cs, &[&p[..], &["sweep", "--older-than", "0s"]].concat());
    assert_eq!(code, 0, "{again}");
    assert_eq!(again["lock_blobs"], 0, "{again}");
    let bad = run(&[
        &["--connection-string", cs.as_str()][..],
        &p[..],
        &["sweep", "--older-than=7w"],
    ]
    .concat());
    assert_eq!(bad.status.code(), Some(2));
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Tickets")]
struct Ticket {
    #[entity(partition_key)]
    queue: String,
    #[entity(row_key)]
    id: String,
    #[entity(expires_at)]
    until: leasehold::time::OffsetDateTime,
}

/// `leasehold sweep --follow` sweeps in rounds under the store's sweeper
/// lease, a line per round: the first removes the expired ticket (a
/// live one stays), the second finds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_follow_removes_expired_rows_round_after_round() {
    let Some(cs) = azurite_connection_string() else {
        return;
    };
    let names = unique_names("cli_follow");
    let prefix = names.prefix().to_owned();
    let store = Store::builder(AzureBackend::from_connection_string(&cs).unwrap())
        .table_prefix(prefix.as_str())
        .unwrap()
        .build()
        .unwrap();
    let tickets = store.table::<Ticket>();
    let now = leasehold::time::OffsetDateTime::now_utc();
    for (id, until) in [
        ("old", now - leasehold::time::Duration::hours(1)),
        ("new", now + leasehold::time::Duration::hours(1)),
    ] {
        tickets
            .insert(Ticket {
                queue: "q".into(),
                id: id.into(),
                until,
            })
            .await
            .unwrap();
    }
    let p = ["--table-prefix", prefix.as_str()];
    let out = run(&[
        &["--connection-string", cs.as_str()][..],
        &p[..],
        &["sweep", "--follow", "--every", "1s", "--rounds", "2"],
    ]
    .concat());
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let rounds: Vec<&str> = text.lines().filter(|l| l.starts_with("sweep: ")).collect();
    assert_eq!(rounds.len(), 2, "{text}");
    assert!(rounds[0].contains(", 1 expired rows"), "{text}");
    assert!(rounds[1].contains(", 0 expired rows"), "{text}");
    let left: Vec<String> = tickets
        .query()
        .all()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.id.clone())
        .collect();
    assert_eq!(left, ["new"]);
    let bad = run(&[
        &["--connection-string", cs.as_str()][..],
        &p[..],
        &["sweep", "--rounds", "2"],
    ]
    .concat());
    assert_eq!(bad.status.code(), Some(2), "--rounds needs --follow");
}
