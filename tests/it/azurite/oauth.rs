//! Microsoft Entra ID sign-in on the OAuth Azurite (HTTPS, `--oauth basic`,
//! started by `scripts/with-azurite.sh` with a certificate made for the run):
//! the conformance suite and the library's own checks through a token
//! credential, and the refusals a wrong or expired token gets.
//!
//! The whole conformance suite (the backend contract and the library
//! check) runs here as on the shared-key Azurite, and of the library's own
//! checks those marked `(oauth)` (`tests/it/checks`): the plain checks of
//! tables and locks (not the newest five of each), and seven that wait in real time (lease errors,
//! describe, an external break, do-once, infinite leases, a roll-forward,
//! the commit deadline); the others (renewal for 150 s, many contenders
//! polling, lease expiry timings) change nothing under token sign-in but
//! the header. `scripts/test.sh` runs this module last, on its own: beside
//! the shared-key suite, on a two-core machine, the load of a second
//! emulator made that suite's timing checks miss their bounds. The token
//! cache's timing is checked on paused time in the crate's unit tests.

use std::sync::Arc;

use leasehold::backend::{Backend, TableBackend as _};
use leasehold::{Entity, Error, ErrorKind, Store};

use crate::support::oauth::{Claims, TestCredential, oauth_azurite};
use crate::support::secrets::Captured;

fn backend() -> Option<Arc<dyn Backend>> {
    oauth_azurite().map(|a| Arc::new(a.backend()) as Arc<dyn Backend>)
}

leasehold::conformance_suite!(real: backend());
crate::checks::all!(oauth);

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(table = "OAuthNotes")]
struct Note {
    #[entity(partition_key)]
    pk: String,
    #[entity(row_key)]
    rk: String,
    n: i64,
}

fn prefix() -> String {
    format!("o{}", &uuid::Uuid::new_v4().simple().to_string()[..10])
}

fn store_on(backend: leasehold::backend::azure::AzureBackend) -> Store {
    Store::builder(backend)
        .table_prefix(prefix())
        .unwrap()
        .build()
        .unwrap()
}

/// Every request of a store signs with the one cached token: tables, blobs
/// and leases, 40 requests, one token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_token_serves_every_request_of_tables_blobs_and_leases() {
    let Some(azurite) = oauth_azurite() else {
        return;
    };
    let credential = Arc::new(TestCredential::new());
    let plan = leasehold::testing::FaultInjector::default();
    let backend = azurite
        .builder(credential.clone())
        .policy(plan.transport_policy())
        .build()
        .unwrap();
    let store = store_on(backend);
    let notes = store.table::<Note>();
    for i in 0..10 {
        notes
            .insert(Note {
                pk: "p".into(),
                rk: format!("r{i}"),
                n: i,
            })
            .await
            .unwrap();
    }
    let guard = store
        .leases()
        .acquire(
            &format!("{}-lease", prefix()),
            std::time::Duration::from_secs(15),
        )
        .await
        .unwrap();
    guard.release().await.unwrap();
    assert!(plan.requests() >= 14, "{} requests", plan.requests());
    assert_eq!(credential.issued(), 1);
}

/// A token for another audience is refused by the service: `Error::Auth`
/// with the 403 and its code, naming the credential; not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_for_another_audience_is_an_auth_error() {
    let Some(azurite) = oauth_azurite() else {
        return;
    };
    let credential = Arc::new(TestCredential::new());
    let plan = leasehold::testing::FaultInjector::default();
    let backend = azurite
        .builder(credential.clone())
        .token_audience("https://vault.azure.net")
        .policy(plan.transport_policy())
        .build()
        .unwrap();
    let e = store_on(backend)
        .table::<Note>()
        .get("p", "r")
        .await
        .unwrap_err();
    assert_auth_refusal(&e);
    assert_eq!(plan.requests(), 1, "an auth refusal is not retried");
    // The audience configured is the one asked for.
    let token = credential.tokens().pop().unwrap();
    let body = token.split('.').nth(1).unwrap();
    let claims: serde_json::Value = serde_json::from_slice(
        &base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, body).unwrap(),
    )
    .unwrap();
    assert_eq!(claims["aud"], "https://vault.azure.net");
}

/// An expired token is refused by the service (the credential claimed it
/// was still valid): `Error::Auth`, on blobs as on tables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_token_is_an_auth_error() {
    let Some(azurite) = oauth_azurite() else {
        return;
    };
    let backend = azurite
        .builder(Arc::new(TestCredential::with_claims(Claims::Expired)))
        .build()
        .unwrap();
    let store = store_on(backend);
    let e = store.table::<Note>().get("p", "r").await.unwrap_err();
    assert_auth_refusal(&e);
    let e = store
        .leases()
        .acquire(
            &format!("{}-lease", prefix()),
            std::time::Duration::from_secs(15),
        )
        .await
        .unwrap_err();
    assert_auth_refusal(&e);
}

fn assert_auth_refusal(e: &Error) {
    assert_eq!(e.kind(), ErrorKind::Auth, "{e:?}");
    assert_eq!(e.status(), Some(403), "{e:?}");
    assert_eq!(e.code(), Some("AuthenticationFailed"), "{e:?}");
    assert!(!e.is_transient());
    assert!(e.to_string().contains("TestCredential"), "{e}");
}

/// Tokens never show: not in the `Debug` of the backend, store or builder,
/// not in errors (`Display`, `Debug`, sources), not in logs at trace level,
/// whether requests succeed or are refused.
#[tokio::test(flavor = "current_thread")]
async fn tokens_never_show_in_debug_errors_or_logs() {
    let Some(azurite) = oauth_azurite() else {
        return;
    };
    let captured = Captured::default();
    let _capture = captured.capture();
    let good = Arc::new(TestCredential::new());
    let bad = Arc::new(TestCredential::with_claims(Claims::Expired));
    let builder = azurite.builder(good.clone());
    let builder_text = format!("{builder:?}");
    let backend = builder.build().unwrap();
    let store = store_on(backend.clone());
    let notes = store.table::<Note>();
    notes
        .insert(Note {
            pk: "p".into(),
            rk: "r".into(),
            n: 1,
        })
        .await
        .unwrap();
    backend
        .get(
            &leasehold::TableName::new(format!("{}OAuthNotes", store.table_prefix())).unwrap(),
            &leasehold::PartitionKey::new("p").unwrap(),
            &leasehold::RowKey::new("r").unwrap(),
        )
        .await
        .unwrap();
    let refused = store_on(azurite.builder(bad.clone()).build().unwrap());
    let e = refused.table::<Note>().get("p", "r").await.unwrap_err();
    tracing::error!(error = %e, debug = ?e, "reported");

    let mut texts = vec![
        builder_text,
        format!("{backend:?}"),
        format!("{store:?}"),
        format!("{:?}", backend.settings()),
        format!("{e}"),
        format!("{e:?}"),
        captured.text(),
    ];
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        texts.push(format!("{s} {s:?}"));
        source = s.source();
    }
    let tokens: Vec<String> = good.tokens().into_iter().chain(bad.tokens()).collect();
    assert_eq!(tokens.len(), 2);
    assert!(captured.text().contains("reported"), "the capture works");
    for token in &tokens {
        // The token, and its claims part alone (a token cut at its dots).
        let claims = token.split('.').nth(1).unwrap();
        for text in &texts {
            assert!(!text.contains(token.as_str()), "{text}");
            assert!(!text.contains(claims), "{text}");
        }
    }
    assert!(texts[1].contains("TestCredential"), "{}", texts[1]);
}
