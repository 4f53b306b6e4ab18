//! The `leasehold` operator command, end to end against Azurite (started by
//! `scripts/with-azurite.sh`; required when `CI` is set): a stuck infinite
//! lease is shown and broken, a journal left by a unit that died
//! mid-commit is shown and rolled forward, and so is a commit across
//! partitions (an intent naming its primary), from a participant.

mod support;

use leasehold::backend::WriteOptions;
use std::process::{Command, Output};
use std::sync::Arc;

use leasehold::backend::azure::AzureBackend;
use leasehold::backend::{BlobBackend, LeaseDuration, LeaseId};
use leasehold::lease::{LeaseName, LeaseOptions};
use leasehold::lock::LockOptions;
use leasehold::testing::{FaultyBackend, Op};
use leasehold::{Entity, ErrorKind, Store};
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

/// Runs the command with `args` and no connection string in its environment.
fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_leasehold"))
        .env_remove("AZURE_STORAGE_CONNECTION_STRING")
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

/// A missing required argument is named, with the usage of its command:
/// not with the options the environment gave, as if those were missing.
#[test]
fn a_missing_argument_is_named_not_the_connection_string_from_the_environment() {
    let out = Command::new(env!("CARGO_BIN_EXE_leasehold"))
        .env(
            "AZURE_STORAGE_CONNECTION_STRING",
            "UseDevelopmentStorage=true",
        )
        .args(["--table-prefix", "Shop", "locks", "prune", "--dry-run"])
        .output()
        .expect("the leasehold binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--older-than <OLDER_THAN>"), "{stderr}");
    assert!(
        stderr.contains("Usage: leasehold locks prune [OPTIONS] --older-than <OLDER_THAN>"),
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
        .acquire_lease(
            &container,
            &blob,
            LeaseDuration::Infinite,
            LeaseId::new_random(),
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
    assert_eq!(stuck["journal_pending"], false);

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

/// Opens accounts `checking` (100) and `savings` (0) of `customer` and runs
/// a transfer of 30 between them, with a ledger entry (two tables, so a
/// journalled commit), in a process that dies at its first transaction,
/// after writing its journal: the lock stays leased and the journal
/// pending. Returns a healthy store on the same prefix and what the dying
/// commit said.
async fn crashed_transfer(
    cs: &str,
    prefix: &str,
    customer: &str,
    marks: bool,
) -> (Store, leasehold::Error) {
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
        // A journal in the lock blob for the operator to see: not deciding
        // in a row.
        .lock_options(LockOptions {
            row_marks: marks,
            decision_rows: false,
            ..LockOptions::default()
        })
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
    // After the journal: with row marks, the two transactions marking the
    // rows (accounts, ledger) go first.
    injector.die_at_nth(Some(Op::Batch), if marks { 3 } else { 1 });
    let e = unit.commit().await.unwrap_err();
    (healthy, e)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_units_journal_is_shown_and_rolled_forward() {
    let Some(cs) = azurite_connection_string() else {
        return;
    };
    let names = unique_names("cli_crashed_unit");
    let prefix = names.prefix().to_owned();
    let (healthy, e) = crashed_transfer(&cs, &prefix, "p", true).await;
    assert_eq!(e.kind(), ErrorKind::InDoubt, "{e}");
    let accounts = healthy.table::<Account>();

    let p = ["--table-prefix", prefix.as_str()];
    let (code, listed) = run_json(&cs, &[&p[..], &["locks", "list"]].concat());
    assert_eq!(code, 0, "{listed}");
    let locks = listed["locks"].as_array().unwrap();
    assert_eq!(locks.len(), 1, "{listed}");
    assert_eq!(locks[0]["partition_key"], "p");
    assert_eq!(locks[0]["journal_pending"], true);

    let (code, shown) = run_json(&cs, &[&p[..], &["locks", "show", "p"]].concat());
    assert_eq!(code, 0, "{shown}");
    assert_eq!(shown["state"], "leased", "{shown}");
    assert_eq!(shown["journal_pending"], true);
    let ops = shown["journal"]["ops"].as_array().unwrap();
    assert_eq!(ops.len(), 3, "{shown}");
    // The text form lists the operations too.
    let out = run(&[
        &["--connection-string", cs.as_str()][..],
        &p[..],
        &["locks", "show", "p"],
    ]
    .concat());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("pending, 3 operations"), "{text}");
    assert!(text.contains("CliLedger/t1"), "{text}");

    let (code, rolled) = run_json(
        &cs,
        &[
            &p[..],
            &[
                "locks",
                "roll-forward",
                "p",
                "--break-lease",
                "--timeout",
                "20",
            ],
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{rolled}");
    assert_eq!(rolled["rolled_forward"], true);
    assert_eq!(rolled["applied"], 3, "{rolled}");

    assert_eq!(
        accounts
            .get("p", "checking")
            .await
            .unwrap()
            .unwrap()
            .balance,
        70
    );
    assert_eq!(
        accounts.get("p", "savings").await.unwrap().unwrap().balance,
        30
    );
    let entry = healthy
        .table::<LedgerEntry>()
        .get("p", "t1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(entry.amount, 30);
    assert!(healthy.pending_commit("p").await.unwrap().is_none());

    let (code, shown) = run_json(&cs, &[&p[..], &["locks", "show", "p"]].concat());
    assert_eq!(code, 0);
    assert_eq!(shown["journal"], Value::Null);
    assert_eq!(shown["held"], false, "{shown}");
    let (code, again) = run_json(&cs, &[&p[..], &["locks", "roll-forward", "p"]].concat());
    assert_eq!((code, &again["rolled_forward"]), (0, &Value::from(false)));
    let (code, _) = run_json(&cs, &[&p[..], &["locks", "show", "never-locked"]].concat());
    assert_eq!(code, 3);
    let (code, _) = run_json(&cs, &[&p[..], &["locks", "break", "never-locked"]].concat());
    assert_eq!(code, 3);
    let (code, broken) = run_json(&cs, &[&p[..], &["locks", "break", "p"]].concat());
    assert_eq!((code, &broken["broken"]), (0, &Value::from(false)), "free");
}

/// A journal that cannot be rolled forward (a commit without row marks; a
/// row was written without the lock after the unit died): `roll-forward` says what it waits for and
/// fails, `resolve` shows the stray row and what each choice would write,
/// and `resolve --undo` puts the rows back and clears the journal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_journal_is_shown_and_undone_from_the_command_line() {
    let Some(cs) = azurite_connection_string() else {
        return;
    };
    let names = unique_names("cli_resolve");
    let prefix = names.prefix().to_owned();
    let (healthy, e) = crashed_transfer(&cs, &prefix, "r", false).await;
    assert_eq!(e.kind(), ErrorKind::InDoubt, "{e}");
    let accounts = healthy.table::<Account>();
    // Something writes the row without the lock.
    accounts
        .update_with("r", "checking", |a| a.balance = 5)
        .await
        .unwrap();

    let p = ["--table-prefix", prefix.as_str()];
    let waited = run(&[
        &["--connection-string", cs.as_str(), "--json"][..],
        &p[..],
        &["locks", "roll-forward", "r", "--timeout", "1"],
    ]
    .concat());
    assert_eq!(waited.status.code(), Some(1));
    let said = String::from_utf8_lossy(&waited.stderr);
    assert!(
        said.contains("waiting up to 1 s") && said.contains("--break-lease"),
        "{said}"
    );
    let (code, failed) = run_json(
        &cs,
        &[
            &p[..],
            &[
                "locks",
                "roll-forward",
                "r",
                "--break-lease",
                "--timeout",
                "20",
            ],
        ]
        .concat(),
    );
    assert_eq!(code, 1, "{failed}");
    assert!(
        failed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("checking"),
        "{failed}"
    );

    let (code, shown) = run_json(&cs, &[&p[..], &["locks", "resolve", "r"]].concat());
    assert_eq!(code, 0, "{shown}");
    assert_eq!(shown["pending"], true);
    assert_eq!(shown["done"], "shown");
    let rows = shown["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{shown}");
    let stray: Vec<&Value> = rows.iter().filter(|r| r["shows"] == "neither").collect();
    assert_eq!(stray.len(), 1, "{shown}");
    assert_eq!(stray[0]["row_key"], "checking");
    assert_eq!(stray[0]["stored"]["balance"], "5L");
    assert_eq!(stray[0]["after"]["balance"], "70L");
    assert_eq!(stray[0]["before"]["balance"], "100L");
    let out = run(&[
        &["--connection-string", cs.as_str()][..],
        &p[..],
        &["locks", "resolve", "r"],
    ]
    .concat());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("1 rows were written without the lock"),
        "{text}"
    );
    assert!(text.contains("--undo      balance=100L"), "{text}");

    let (code, undone) = run_json(
        &cs,
        &[&p[..], &["locks", "resolve", "r", "--undo"]].concat(),
    );
    assert_eq!(code, 0, "{undone}");
    assert_eq!(
        (&undone["done"], &undone["written"]),
        (&Value::from("undone"), &Value::from(1))
    );
    assert_eq!(
        accounts
            .get("r", "checking")
            .await
            .unwrap()
            .unwrap()
            .balance,
        100
    );
    assert_eq!(
        accounts.get("r", "savings").await.unwrap().unwrap().balance,
        0
    );
    assert!(
        healthy
            .table::<LedgerEntry>()
            .get("r", "t1")
            .await
            .unwrap()
            .is_none()
    );
    let (code, none) = run_json(&cs, &[&p[..], &["locks", "resolve", "r"]].concat());
    assert_eq!((code, &none["pending"]), (0, &Value::from(false)));
    healthy.lock("r").await.unwrap().abandon().await.unwrap();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_cross_partition_unit_is_shown_and_rolled_forward_from_a_participant() {
    let Some(cs) = azurite_connection_string() else {
        return;
    };
    let names = unique_names("cli_crashed_transfer");
    let prefix = names.prefix().to_owned();
    let healthy = Store::builder(AzureBackend::from_connection_string(&cs).unwrap())
        .table_prefix(prefix.as_str())
        .unwrap()
        .build()
        .unwrap();
    let faulty = FaultyBackend::new(AzureBackend::from_connection_string(&cs).unwrap());
    let injector = faulty.injector();
    // Without row marks, the participant's lock blob holds an intent.
    let dying = Store::builder(faulty)
        .table_prefix(prefix.as_str())
        .unwrap()
        .lock_options(LockOptions {
            row_marks: false,
            ..LockOptions::default()
        })
        .build()
        .unwrap();
    let accounts = healthy.table::<Account>();
    let ledger = healthy.table::<LedgerEntry>();
    for (customer, balance) in [("a", 100), ("b", 0)] {
        accounts
            .insert(Account {
                customer: customer.into(),
                name: "main".into(),
                balance,
            })
            .await
            .unwrap();
    }

    // A transfer from customer "a" to customer "b" (two partitions, two
    // tables each) whose process dies at its first batch, after writing the
    // intent in "b" and the journal in "a" (the primary: first in canonical
    // order): both locks stay leased, nothing is applied.
    let mut unit = dying.lock_many(["b", "a"]).await.unwrap();
    let mut from = unit.get_in::<Account>("a", "main").await.unwrap().unwrap();
    let mut to = unit.get_in::<Account>("b", "main").await.unwrap().unwrap();
    let (from_etag, to_etag) = (
        from.etag().as_str().to_owned(),
        to.etag().as_str().to_owned(),
    );
    from.balance -= 30;
    to.balance += 30;
    unit.replace(&from).unwrap();
    unit.replace(&to).unwrap();
    for (customer, amount) in [("a", -30), ("b", 30)] {
        unit.insert(&LedgerEntry {
            customer: customer.into(),
            id: "t1".into(),
            amount,
        })
        .unwrap();
    }
    injector.die_at_nth(Some(Op::Batch), 1);
    let e = unit.commit().await.unwrap_err();
    assert_ne!(e.kind(), ErrorKind::Invalid, "{e}");
    drop(dying);
    for (customer, balance) in [("a", 100), ("b", 0)] {
        let row = accounts.get(customer, "main").await.unwrap().unwrap();
        assert_eq!(row.balance, balance, "{customer}");
    }
    assert!(ledger.get("b", "t1").await.unwrap().is_none());
    let txn = healthy
        .pending_commit("a")
        .await
        .unwrap()
        .expect("journal in the primary")
        .transaction
        .expect("a transaction id");

    let p = ["--table-prefix", prefix.as_str()];
    let (code, listed) = run_json(&cs, &[&p[..], &["locks", "list"]].concat());
    assert_eq!(code, 0, "{listed}");
    let locks = listed["locks"].as_array().unwrap();
    assert_eq!(locks.len(), 2, "{listed}");
    let lock = |pk: &str| {
        locks
            .iter()
            .find(|l| l["partition_key"] == pk)
            .unwrap_or_else(|| panic!("no lock {pk} in {listed}"))
    };
    for pk in ["a", "b"] {
        assert_eq!(lock(pk)["journal_pending"], true, "{listed}");
        assert_eq!(lock(pk)["held"], true, "{listed}");
    }
    assert_eq!(lock("a")["intent_of"], Value::Null, "{listed}");
    assert_eq!(lock("b")["intent_of"], "a", "{listed}");
    let out = run(&[
        &["--connection-string", cs.as_str()][..],
        &p[..],
        &["locks", "list"],
    ]
    .concat());
    let text = String::from_utf8_lossy(&out.stdout);
    let row = |pk: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(pk))
            .unwrap_or_else(|| panic!("no row {pk} in {text}"))
            .to_owned()
    };
    assert!(row("a").ends_with(" pending"), "{text}");
    assert!(row("b").ends_with(" intent of a"), "{text}");
    assert!(text.contains("2 locks"), "{text}");

    // The participant shows an intent naming the primary and the
    // transaction, with no operations (they are in the primary's journal).
    let (code, shown) = run_json(&cs, &[&p[..], &["locks", "show", "b"]].concat());
    assert_eq!(code, 0, "{shown}");
    assert_eq!(shown["state"], "leased", "{shown}");
    assert_eq!(shown["journal_pending"], true, "{shown}");
    assert_eq!(
        shown["journal"],
        serde_json::json!({
            "partition_key": "b",
            "intent": true,
            "primary": "a",
            "transaction": txn.as_str(),
            "ops": [],
        }),
        "{shown}"
    );
    let out = run(&[
        &["--connection-string", cs.as_str()][..],
        &p[..],
        &["locks", "show", "b"],
    ]
    .concat());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "intent of transaction {txn}: the journal is in partition a"
        )),
        "{text}"
    );

    // The primary shows the pending journal: four operations over both
    // partitions, in application order, with preconditions and after-images.
    let (code, shown) = run_json(&cs, &[&p[..], &["locks", "show", "a"]].concat());
    assert_eq!(code, 0, "{shown}");
    assert_eq!(shown["state"], "leased", "{shown}");
    let journal = &shown["journal"];
    assert_eq!(journal["partition_key"], "a", "{shown}");
    assert_eq!(journal["intent"], false, "{shown}");
    assert_eq!(journal["primary"], "a", "{shown}");
    assert_eq!(journal["transaction"], txn.as_str(), "{shown}");
    let ops = journal["ops"].as_array().unwrap();
    let summary: Vec<(&str, &str, &str, &str)> = ops
        .iter()
        .map(|o| {
            (
                o["table"].as_str().unwrap(),
                o["partition_key"].as_str().unwrap(),
                o["row_key"].as_str().unwrap(),
                o["kind"].as_str().unwrap(),
            )
        })
        .collect();
    let accounts_table = format!("{prefix}CliAccounts");
    let ledger_table = format!("{prefix}CliLedger");
    assert_eq!(
        summary,
        [
            (accounts_table.as_str(), "a", "main", "replace"),
            (ledger_table.as_str(), "a", "t1", "insert"),
            (accounts_table.as_str(), "b", "main", "replace"),
            (ledger_table.as_str(), "b", "t1", "insert"),
        ],
        "{shown}"
    );
    assert_eq!(ops[0]["precondition"], from_etag.as_str(), "{shown}");
    assert_eq!(ops[0]["after"]["balance"], "70L", "{shown}");
    assert_eq!(ops[1]["precondition"], Value::Null, "{shown}");
    assert_eq!(ops[2]["precondition"], to_etag.as_str(), "{shown}");
    assert_eq!(ops[2]["after"]["balance"], "30L", "{shown}");
    assert_eq!(ops[3]["after"]["amount"], "30L", "{shown}");
    let out = run(&[
        &["--connection-string", cs.as_str()][..],
        &p[..],
        &["locks", "show", "a"],
    ]
    .concat());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("transaction   {txn} (across partitions)")),
        "{text}"
    );
    assert!(text.contains("pending, 4 operations"), "{text}");
    assert!(text.contains("CliLedger/t1 (partition b)"), "{text}");

    // Rolled forward from the participant: both leases are broken, the
    // primary's journal applied, the intent cleared.
    let (code, rolled) = run_json(
        &cs,
        &[
            &p[..],
            &[
                "locks",
                "roll-forward",
                "b",
                "--break-lease",
                "--timeout",
                "20",
            ],
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{rolled}");
    assert_eq!(
        rolled,
        serde_json::json!({
            "partition_key": "b",
            "rolled_forward": true,
            "applied": 4,
            "already_applied": 0,
        })
    );

    for (customer, balance, amount) in [("a", 70, -30), ("b", 30, 30)] {
        let row = accounts.get(customer, "main").await.unwrap().unwrap();
        assert_eq!(row.balance, balance, "{customer}");
        let entry = ledger.get(customer, "t1").await.unwrap().unwrap();
        assert_eq!(entry.amount, amount, "{customer}");
        assert!(healthy.pending_commit(customer).await.unwrap().is_none());
        let (code, shown) = run_json(&cs, &[&p[..], &["locks", "show", customer]].concat());
        assert_eq!(code, 0, "{shown}");
        assert_eq!(shown["journal"], Value::Null, "{shown}");
        assert_eq!(shown["journal_pending"], false, "{shown}");
        assert_eq!(shown["held"], false, "{shown}");
        let out = run(&[
            &["--connection-string", cs.as_str()][..],
            &p[..],
            &["locks", "show", customer],
        ]
        .concat());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("journal       none pending"), "{text}");
    }
    let (code, listed) = run_json(&cs, &[&p[..], &["locks", "list"]].concat());
    assert_eq!(code, 0, "{listed}");
    for l in listed["locks"].as_array().unwrap() {
        assert_eq!(l["journal_pending"], false, "{listed}");
        assert_eq!(l["intent_of"], Value::Null, "{listed}");
    }
    // Nothing left to do from either side.
    for customer in ["a", "b"] {
        let (code, again) = run_json(
            &cs,
            &[&p[..], &["locks", "roll-forward", customer]].concat(),
        );
        assert_eq!(
            (code, &again["rolled_forward"]),
            (0, &Value::from(false)),
            "{again}"
        );
    }
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
                if_match: None,
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_prune_lists_with_dry_run_then_deletes_free_lock_blobs() {
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
    // A lock held while pruning stays.
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
            &["locks", "prune", arg.as_str()],
        ]
        .concat());
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("is not a duration"), "{bad:?}: {stderr}");
    }
    assert_eq!(listed(&cs), 4);

    // Nothing is a week old; --dry-run lists every free lock at 0s, deletes
    // nothing.
    let prune = |extra: &[&str]| -> (i32, Value) {
        let (code, v) = run_json(&cs, &[&p[..], &["locks", "prune"], extra].concat());
        (code, v)
    };
    let (code, week) = prune(&["--older-than", "7d"]);
    assert_eq!(code, 0, "{week}");
    assert_eq!(
        (&week["deleted"], &week["kept_recent"]),
        (&Value::from(0), &Value::from(3)),
        "{week}"
    );
    let (code, plan) = prune(&["--older-than", "0s", "--dry-run"]);
    assert_eq!(code, 0, "{plan}");
    assert_eq!(plan["dry_run"], true, "{plan}");
    assert_eq!(
        plan["deleted_partitions"],
        serde_json::json!(["a", "b", "c"]),
        "{plan}"
    );
    assert_eq!(plan["kept_held"], 1, "{plan}");
    let out = run(&[
        &["--connection-string", cs.as_str()][..],
        &p[..],
        &["locks", "prune", "--older-than", "0s", "--dry-run"],
    ]
    .concat());
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[..3], ["a", "b", "c"], "{text}");
    assert!(
        lines[3].starts_with("would delete 3 of 4 lock blobs; kept 1 held"),
        "{text}"
    );
    assert_eq!(listed(&cs), 4, "a dry run deletes nothing");

    // Then for real: the free locks go, the held one stays.
    let out = run(&[
        &["--connection-string", cs.as_str()][..],
        &p[..],
        &["locks", "prune", "--older-than", "0s"],
    ]
    .concat());
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("deleted 3 of 4 lock blobs; kept 1 held, 0 pending, 0 recent"),
        "{text}"
    );
    assert_eq!(listed(&cs), 1);
    held.abandon().await.unwrap();
    let (code, report) = prune(&["--older-than", "0s"]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(
        report["deleted_partitions"],
        serde_json::json!(["held"]),
        "{report}"
    );
    assert_eq!(listed(&cs), 0);
    // A pruned partition locks again.
    store.lock("a").await.unwrap().abandon().await.unwrap();
    assert_eq!(listed(&cs), 1);
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "CliTickets")]
struct Ticket {
    #[entity(partition_key)]
    queue: String,
    #[entity(row_key)]
    id: String,
    #[entity(unique)]
    number: i64,
}

/// The `locks` commands take an index value as it is (`--index
/// TABLE.FIELD VALUE`), encoded as the library encodes it (an integer
/// field's value too), besides the stored partition key; the natural
/// value given as a partition key is not a key that was locked.
/// `indexes verify --json` lists a unique value held twice as an object
/// naming the index, the value, its partition and the entities holding
/// it, and that value is one `--index` takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_take_index_values_as_they_are_and_verify_lists_duplicates_as_objects() {
    use leasehold::entity::Value as Stored;

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
    store
        .table::<Ticket>()
        .insert(Ticket {
            queue: "q".into(),
            id: "t1".into(),
            number: 42,
        })
        .await
        .unwrap();
    let encoded = "email user@example.0com";
    assert_eq!(
        store
            .index_partition(
                "CliCustomers",
                "email",
                &Stored::String("user@example.com".into())
            )
            .await
            .unwrap()
            .as_str(),
        encoded
    );
    // Indexed writes take no lock: the value's partition is locked here,
    // as a program locking a value's partition itself does.
    store.lock(encoded).await.unwrap().abandon().await.unwrap();
    let p = ["--table-prefix", prefix.as_str()];
    let by_value = ["--index", "CliCustomers.email", "user@example.com"];

    // show, by value and by stored key; the natural value is no key.
    let (code, shown) = run_json(&cs, &[&p[..], &["locks", "show"], &by_value[..]].concat());
    assert_eq!(code, 0, "{shown}");
    assert_eq!(shown["partition_key"], encoded, "{shown}");
    assert_eq!(shown["last_owner"], store.locks().owner(), "{shown}");
    let (code, shown) = run_json(&cs, &[&p[..], &["locks", "show", encoded]].concat());
    assert_eq!((code, &shown["partition_key"]), (0, &Value::from(encoded)));
    let (code, _) = run_json(
        &cs,
        &[&p[..], &["locks", "show", "email user@example.com"]].concat(),
    );
    assert_eq!(code, 3, "the natural value is not the stored key");
    // resolve, roll-forward and break take it too.
    let (code, resolved) = run_json(
        &cs,
        &[&p[..], &["locks", "resolve"], &by_value[..]].concat(),
    );
    assert_eq!(code, 0, "{resolved}");
    assert_eq!(
        (&resolved["partition_key"], &resolved["pending"]),
        (&Value::from(encoded), &Value::from(false))
    );
    let (code, rolled) = run_json(
        &cs,
        &[&p[..], &["locks", "roll-forward"], &by_value[..]].concat(),
    );
    assert_eq!(code, 0, "{rolled}");
    assert_eq!(rolled["partition_key"], encoded, "{rolled}");
    let (code, broken) = run_json(&cs, &[&p[..], &["locks", "break"], &by_value[..]].concat());
    assert_eq!(
        (code, &broken["broken"]),
        (0, &Value::from(false)),
        "{broken}"
    );
    // An integer field: "42" is the number's partition, the one locked.
    let number = store
        .index_partition("CliTickets", "number", &Stored::Int64(42))
        .await
        .unwrap();
    store
        .lock(number.clone())
        .await
        .unwrap()
        .abandon()
        .await
        .unwrap();
    let (code, shown) = run_json(
        &cs,
        &[
            &p[..],
            &["locks", "show", "--index", "CliTickets.number", "42"],
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{shown}");
    assert_eq!(shown["partition_key"], number.as_str(), "{shown}");
    assert_ne!(number.as_str(), "number 42");
    // Bad index names: usage errors and "not found", before any lock.
    for (index, want) in [
        ("CliCustomers", 2),
        ("CliCustomers.nosuchfield", 2),
        ("NoSuchTable.email", 3),
    ] {
        let (code, doc) = run_json(
            &cs,
            &[&p[..], &["locks", "show", "--index", index, "x"]].concat(),
        );
        assert_eq!(code, want, "{index}: {doc}");
    }
    let out = run(&[
        &["--connection-string", cs.as_str()][..],
        &p[..],
        &[
            "locks",
            "show",
            encoded,
            "--index",
            "CliCustomers.email",
            "x",
        ],
    ]
    .concat());
    assert_eq!(out.status.code(), Some(2), "a key and --index at once");

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
    let value = dup["value"].as_str().unwrap();
    let (code, shown) = run_json(
        &cs,
        &[
            &p[..],
            &["locks", "show", "--index", "CliCustomers.email", value],
        ]
        .concat(),
    );
    assert_eq!((code, &shown["partition_key"]), (0, &Value::from(encoded)));
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
