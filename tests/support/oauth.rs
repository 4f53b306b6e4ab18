//! The OAuth Azurite (HTTPS, `--oauth basic`) and a token credential whose
//! tokens it accepts.
//!
//! A module of `tests/support` (`crate::support::oauth` in the `it` test
//! binary). `scripts/with-azurite.sh` starts that Azurite and sets
//! `LEASEHOLD_TEST_AZURITE_OAUTH` (a connection string with its https
//! endpoints) and `LEASEHOLD_TEST_AZURITE_OAUTH_CA` (the test CA's PEM file).
//!
//! Azurite's basic OAuth check decodes the bearer token as a JWT without
//! checking its signature, and requires `iat`, `nbf` and `exp` (now between
//! `nbf` and `exp`), an issuer starting with `https://sts.windows.net/` (or
//! another cloud's token service), and an audience of storage
//! (`https://storage.azure.com`, or the account's own service URL). It
//! answers 403 `AuthenticationFailed` otherwise.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use azure_core::credentials::{AccessToken, TokenCredential, TokenRequestOptions};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use leasehold::backend::azure::{AzureBackend, AzureBackendBuilder, ConnectionSettings};

/// The environment variable holding the OAuth Azurite's connection string.
pub const OAUTH_ENV: &str = "LEASEHOLD_TEST_AZURITE_OAUTH";
/// The environment variable holding the path of its CA certificate (PEM).
pub const OAUTH_CA_ENV: &str = "LEASEHOLD_TEST_AZURITE_OAUTH_CA";

/// The OAuth Azurite's endpoints and the CA its certificate chains to.
#[derive(Debug, Clone)]
pub struct OAuthAzurite {
    pub settings: ConnectionSettings,
    pub ca_pem: Vec<u8>,
}

/// The OAuth Azurite to test against; `None` (with a notice) when it is not
/// configured, and a panic instead when `CI` is set: its tests never skip
/// silently there.
pub fn oauth_azurite() -> Option<OAuthAzurite> {
    let conn = std::env::var(OAUTH_ENV)
        .ok()
        .filter(|s| !s.trim().is_empty());
    let ca = std::env::var(OAUTH_CA_ENV)
        .ok()
        .filter(|s| !s.trim().is_empty());
    match (conn, ca) {
        (Some(conn), Some(ca)) => Some(OAuthAzurite {
            settings: ConnectionSettings::parse(&conn).expect("the OAuth connection string parses"),
            ca_pem: std::fs::read(&ca).expect("the OAuth Azurite's CA file is readable"),
        }),
        _ => {
            if std::env::var_os("CI").is_some() {
                panic!(
                    "the OAuth Azurite is required in CI: run through scripts/with-azurite.sh \
                     ({OAUTH_ENV} / {OAUTH_CA_ENV} are not set; did scripts/test-cert.js run?)"
                );
            }
            eprintln!(
                "notice: {OAUTH_ENV} is not set; skipping a test that needs the OAuth Azurite \
                 (run it through scripts/with-azurite.sh)"
            );
            None
        }
    }
}

impl OAuthAzurite {
    /// A builder for a backend on this Azurite, trusting its CA, signed in
    /// with `credential`.
    pub fn builder(&self, credential: Arc<dyn TokenCredential>) -> AzureBackendBuilder {
        AzureBackend::builder()
            .account(self.settings.account.clone())
            .table_endpoint(self.settings.table_endpoint.as_str())
            .blob_endpoint(self.settings.blob_endpoint.as_str())
            .root_certificate_pem(&self.ca_pem)
            .expect("the test CA parses")
            .token_credential(credential)
    }

    /// A backend on this Azurite signed in with a fresh [`TestCredential`].
    pub fn backend(&self) -> AzureBackend {
        self.builder(Arc::new(TestCredential::new()))
            .build()
            .expect("an OAuth backend")
    }
}

/// What the tokens of a [`TestCredential`] claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claims {
    /// Valid for an hour, for the audience asked for.
    Valid,
    /// Expired ten minutes ago (while the credential says it lasts an hour,
    /// as a clock-skewed token service might: only the service notices).
    Expired,
}

/// Issues unsigned JWTs (`alg: none`) that Azurite's basic OAuth check
/// accepts: the audience is the scope asked for without `/.default`, the
/// issuer a tenant of `sts.windows.net`. Counts its tokens.
#[derive(Debug)]
pub struct TestCredential {
    claims: Claims,
    issued: AtomicU32,
    tokens: Mutex<Vec<String>>,
}

impl TestCredential {
    pub fn new() -> Self {
        TestCredential::with_claims(Claims::Valid)
    }

    pub fn with_claims(claims: Claims) -> Self {
        TestCredential {
            claims,
            issued: AtomicU32::new(0),
            tokens: Mutex::new(Vec::new()),
        }
    }

    /// Every token issued so far.
    pub fn tokens(&self) -> Vec<String> {
        self.tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// How many tokens were issued.
    pub fn issued(&self) -> u32 {
        self.issued.load(Ordering::SeqCst)
    }

    /// The token for `audience` with these claims, valid from `now`.
    pub fn token_for(&self, audience: &str, now: i64, serial: u32) -> String {
        let (nbf, exp) = match self.claims {
            Claims::Valid => (now - 60, now + 3600),
            Claims::Expired => (now - 7200, now - 600),
        };
        let header = serde_json::json!({ "alg": "none", "typ": "JWT" });
        let body = serde_json::json!({
            "aud": audience,
            "iss": "https://sts.windows.net/72f988bf-86f1-41af-91ab-2d7cd011db47/",
            "iat": nbf,
            "nbf": nbf,
            "exp": exp,
            "oid": "11059fcc-5514-4800-b5f8-49808b9cfab6",
            "tid": "72f988bf-86f1-41af-91ab-2d7cd011db47",
            "uti": format!("leasehold-test-token-{serial}"),
            "ver": "1.0",
        });
        format!(
            "{}.{}.",
            B64URL.encode(header.to_string()),
            B64URL.encode(body.to_string())
        )
    }
}

impl Default for TestCredential {
    fn default() -> Self {
        TestCredential::new()
    }
}

#[async_trait]
impl TokenCredential for TestCredential {
    async fn get_token(
        &self,
        scopes: &[&str],
        _: Option<TokenRequestOptions<'_>>,
    ) -> azure_core::Result<AccessToken> {
        let serial = self.issued.fetch_add(1, Ordering::SeqCst) + 1;
        let scope = scopes.first().copied().unwrap_or_default();
        let audience = scope.strip_suffix("/.default").unwrap_or(scope);
        let now = time::OffsetDateTime::now_utc();
        let token = self.token_for(audience, now.unix_timestamp(), serial);
        self.tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(token.clone());
        Ok(AccessToken::new(token, now + time::Duration::hours(1)))
    }
}
