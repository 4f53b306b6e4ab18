//! Account keys and SAS signatures never reach `Debug`, `Display`, errors or
//! tracing output, on the paths a user of [`Store`] takes.
//!
//! The backend-level checks (every `AzureBackend` operation against a dead
//! endpoint, connection-setting types, a SAS backend logging at TRACE) live in
//! `tests/it/azure_backend.rs`; this file covers what is built on top: stores
//! made with `Store::connect`, their tables, leases and partition locks, and
//! the errors those return.
#![cfg(feature = "azure")]

use crate::support::{azurite, secrets};

use std::fmt::Debug;
use std::time::Duration;

use leasehold::backend::azure::{AzureBackend, ConnectionSettings, TransportRetry};
use leasehold::{Entity, Error, ErrorKind, Store};
use secrets::{AccountKey_, Captured, account_sas, signature_forms};

/// A recognisable fake key (valid base64) and signature.
const KEY: &str = "TGVhc2Vob2xkRmFrZUFjY291bnRLZXlTZWNyZXRzVGVzdDAxMjM0NTY3ODk=";
const SIG: &str = "LeaseholdFakeSasSignatureSecretsTest0123456789";

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "Secrets")]
struct Note {
    #[entity(partition_key)]
    pk: String,
    #[entity(row_key)]
    rk: String,
    n: i64,
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "SecretsAudit")]
struct Audit {
    #[entity(partition_key)]
    pk: String,
    #[entity(row_key)]
    rk: String,
    text: String,
}

fn note(rk: &str, n: i64) -> Note {
    Note {
        pk: "p".into(),
        rk: rk.into(),
        n,
    }
}

fn fake_sas() -> String {
    format!("sv=2022-11-02&ss=bt&srt=sco&sp=rwdlacu&se=2030-01-01T00:00:00Z&sig={SIG}")
}

/// Connection strings with the fake key and the fake SAS, pointing at a port
/// where nothing listens.
fn dead_connection_strings() -> [String; 2] {
    let endpoints = "BlobEndpoint=http://127.0.0.1:1/devstoreaccount1;\
                     TableEndpoint=http://127.0.0.1:1/devstoreaccount1";
    [
        format!(
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={KEY};{endpoints}"
        ),
        format!("{endpoints};SharedAccessSignature={}", fake_sas()),
    ]
}

fn shown(value: &dyn Debug) -> [String; 2] {
    [format!("{value:?}"), format!("{value:#?}")]
}

fn error_texts(e: &Error) -> [String; 3] {
    [e.to_string(), format!("{e:?}"), format!("{e:#?}")]
}

/// Each secret, whole and as a recognisable fragment.
fn fake_secrets() -> Vec<String> {
    let mut all = vec![
        KEY.to_owned(),
        KEY[..20].to_owned(),
        KEY[30..50].to_owned(),
        SIG.to_owned(),
        SIG[..20].to_owned(),
        SIG[20..40].to_owned(),
    ];
    all.extend(signature_forms(&fake_sas()));
    all
}

#[track_caller]
fn assert_clean(texts: &[String], secrets: &[String]) {
    for text in texts {
        for secret in secrets {
            assert!(
                !text.contains(secret.as_str()),
                "a secret ({} chars) leaked into: {text}",
                secret.len()
            );
        }
    }
}

/// A store on `conn` that gives up at once, so dead-endpoint errors come
/// back without retry delays (lease waits after 100 ms of failures).
fn fail_fast_store(conn: &str) -> Store {
    let backend = AzureBackend::builder()
        .connection_string(conn)
        .expect("parses")
        .transport_retry(TransportRetry::none())
        .build()
        .expect("builds");
    Store::builder(backend)
        .lease_options(
            leasehold::lease::LeaseOptions::new()
                .with_unavailable_after(Duration::from_millis(100)),
        )
        .build()
        .expect("builds")
}

/// Every public value reachable from a store built from a secret-bearing
/// connection string, formatted every way; and every error of the store's
/// operations against a dead endpoint.
#[tokio::test]
async fn stores_tables_leases_and_their_errors_never_show_secrets() {
    let mut texts = Vec::new();
    for conn in dead_connection_strings() {
        // Built by Store::connect: nothing is sent yet.
        let store = Store::connect(&conn).expect("connects");
        texts.extend(shown(&store));
        texts.extend(shown(store.backend()));
        texts.extend(shown(store.leases()));
        texts.extend(shown(&store.table::<Note>()));
        texts.extend(shown(store.lock_options()));
        texts.extend(shown(&Store::builder(
            AzureBackend::from_connection_string(&conn).unwrap(),
        )));
        texts.extend(shown(&ConnectionSettings::parse(&conn).unwrap()));

        // Every kind of store operation fails in the transport.
        let store = fail_fast_store(&conn);
        let notes = store.table::<Note>();
        let mut errors = vec![
            notes.get("p", "r").await.unwrap_err(),
            notes.insert(note("r", 1)).await.unwrap_err(),
            notes.upsert(note("r", 1)).await.unwrap_err(),
            notes.update_with("p", "r", |n| n.n += 1).await.unwrap_err(),
            notes.delete_unconditionally("p", "r").await.unwrap_err(),
            notes.query().partition("p").all().await.unwrap_err(),
            notes
                .batch()
                .insert(note("a", 1))
                .insert(note("b", 2))
                .commit()
                .await
                .unwrap_err(),
            store.try_lock("p").await.unwrap_err(),
            store
                .lock_with_timeout("p", Duration::from_millis(50))
                .await
                .unwrap_err(),
            store.commit_outcome("p", "t.Accounts").await.unwrap_err(),
            store.leases().try_acquire("job").await.unwrap_err(),
            store.leases().describe("job").await.unwrap_err(),
            store
                .leases()
                .break_lease("job", Some(Duration::ZERO))
                .await
                .unwrap_err(),
        ];
        // A store whose table is created but whose later requests fail
        // mid-way is covered by the Azurite test below.
        for e in &errors {
            assert!(
                matches!(
                    e.kind(),
                    ErrorKind::Transient | ErrorKind::Timeout | ErrorKind::Unavailable
                ),
                "{e:?}"
            );
        }
        errors.push(Store::connect(&format!("{conn};AccountKey={KEY}")).unwrap_err());
        errors
            .push(Store::connect(&format!("{conn};SharedAccessSignature=sig={SIG}")).unwrap_err());
        for e in &errors {
            texts.extend(error_texts(e));
        }
    }
    assert!(texts.iter().any(|t| t.contains("<redacted>")));
    assert_clean(&texts, &fake_secrets());
}

/// A store connected with a SAS connection string does tables, batches,
/// queries, a multi-table unit of work and leases against Azurite, with every
/// log line at TRACE level captured; values and errors are formatted into the
/// log too. Neither the signature (raw or URL-encoded) nor the account key
/// that signed it appears.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sas_store_logs_no_secret_at_trace_level() {
    let Some(conn) = azurite::azurite_connection_string() else {
        return;
    };
    let settings = ConnectionSettings::parse(&conn).unwrap();
    let key = conn
        .split(';')
        .find_map(|p| p.strip_prefix("AccountKey="))
        .map(|k| AccountKey_(k.to_owned()))
        .expect("the Azurite string carries the key");
    let sas = account_sas(&settings.account, &key);
    let sas_conn = format!(
        "TableEndpoint={};BlobEndpoint={};SharedAccessSignature={sas}",
        &settings.table_endpoint, &settings.blob_endpoint
    );
    let mut secrets: Vec<String> = signature_forms(&sas).into();
    secrets.push(key.0.clone());
    secrets.push(key.0[..24].to_owned());

    let captured = Captured::default();
    let _guard = captured.capture();

    let names = azurite::unique_names("secrets");
    let store = Store::builder(AzureBackend::from_connection_string(&sas_conn).unwrap())
        .table_prefix(names.prefix())
        .unwrap()
        .build()
        .unwrap();
    tracing::info!(store = ?store, "connected");
    let notes = store.table::<Note>();

    let v = notes.insert(note("a", 1)).await.unwrap();
    let stale = v.clone();
    notes.update_with("p", "a", |n| n.n += 1).await.unwrap();
    let conflict = notes.replace(&stale).await.unwrap_err();
    assert_eq!(conflict.kind(), ErrorKind::Conflict);
    tracing::warn!(error = %conflict, debug = ?conflict, "expected conflict");
    let exists = notes.insert(note("a", 1)).await.unwrap_err();
    tracing::warn!(error = %exists, debug = ?exists, "expected already-exists");
    notes
        .batch()
        .insert(note("b", 2))
        .insert(note("c", 3))
        .commit()
        .await
        .unwrap();
    let all = notes
        .query()
        .partition("p")
        .page_size(2)
        .all()
        .await
        .unwrap();
    assert_eq!(all.len(), 3);
    tracing::info!(first = ?all[0], "queried");

    // A unit of work over two tables: journal, two batches, clear.
    let mut unit = store.lock("p").await.unwrap();
    tracing::info!(unit = ?unit, "locked");
    let mut a = unit.get::<Note>("a").await.unwrap().unwrap();
    a.n += 10;
    unit.replace(&a).unwrap();
    unit.insert(&Audit {
        pk: "p".into(),
        rk: "1".into(),
        text: "moved".into(),
    })
    .unwrap();
    let report = unit.commit().await.unwrap();
    tracing::info!(report = ?report, "committed");
    assert_eq!(notes.get("p", "a").await.unwrap().unwrap().n, 12);

    // Leases: acquire, describe, release.
    let guard = store.leases().try_acquire("job").await.unwrap().unwrap();
    tracing::info!(guard = ?guard, "leased");
    let described = store.leases().describe("job").await.unwrap();
    tracing::info!(described = ?described, "described");
    guard.release().await.unwrap();

    // A failure from the HTTP stack, on a SAS store.
    let dead = fail_fast_store(&format!(
        "TableEndpoint=http://127.0.0.1:1/{a};BlobEndpoint=http://127.0.0.1:1/{a};\
         SharedAccessSignature={sas}",
        a = settings.account
    ));
    let e = dead.table::<Note>().get("p", "a").await.unwrap_err();
    tracing::error!(error = %e, debug = ?e, "dead endpoint");
    let e = dead.try_lock("p").await.unwrap_err();
    tracing::error!(error = %e, debug = ?e, "dead endpoint lock");

    let logs = captured.text();
    if std::env::var_os("LEASEHOLD_SHOW_LOGS").is_some() {
        eprintln!("{logs}");
    }
    assert!(logs.contains("leasehold.write"), "store spans were logged");
    assert!(
        logs.contains("leasehold.table{") && logs.contains("leasehold.blob{"),
        "request spans were logged"
    );
    assert!(logs.contains("TRACE"), "trace events were logged");
    assert_clean(&[logs], &secrets);
}

/// A store signed in with a token credential, against a dead https
/// endpoint: the token its credential gave (it is fetched before the
/// request is sent) never shows in `Debug`, in errors or their sources, or
/// in trace-level logs; the credential's kind does. Tokens on a live
/// service: `azurite::oauth::tokens_never_show_in_debug_errors_or_logs`.
#[tokio::test(flavor = "current_thread")]
async fn tokens_never_show_in_debug_errors_or_logs_of_a_token_store() {
    use crate::support::oauth::TestCredential;
    use std::sync::Arc;

    let captured = Captured::default();
    let _capture = captured.capture();
    let credential = Arc::new(TestCredential::new());
    let builder = AzureBackend::builder()
        .account("acct1")
        .table_endpoint("https://127.0.0.1:1/acct1")
        .blob_endpoint("https://127.0.0.1:1/acct1")
        .token_credential(credential.clone())
        .transport_retry(TransportRetry::none());
    let mut texts = shown(&builder).to_vec();
    let backend = builder.build().unwrap();
    let store = Store::builder(backend.clone())
        .lease_options(
            leasehold::lease::LeaseOptions::new()
                .with_unavailable_after(Duration::from_millis(100)),
        )
        .build()
        .unwrap();
    texts.extend(shown(&store));
    texts.extend(shown(&backend));
    texts.extend(shown(backend.settings()));
    let errors = [
        store.table::<Note>().get("p", "r").await.unwrap_err(),
        store.leases().try_acquire("job").await.unwrap_err(),
    ];
    for e in &errors {
        tracing::error!(error = %e, debug = ?e, "reported");
        texts.extend(error_texts(e));
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            texts.push(format!("{s} {s:?}"));
            source = s.source();
        }
    }
    texts.push(captured.text());
    assert!(captured.text().contains("reported"), "the capture works");
    assert!(texts.iter().any(|t| t.contains("TestCredential")));
    let tokens = credential.tokens();
    assert!(!tokens.is_empty(), "a token was fetched");
    let mut secrets = Vec::new();
    for token in tokens {
        secrets.push(token.split('.').nth(1).unwrap().to_owned());
        secrets.push(token);
    }
    assert_clean(&texts, &secrets);
}
