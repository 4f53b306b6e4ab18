//! Microsoft Entra ID tokens for both services: a cache in front of the
//! caller's `TokenCredential` that answers with the token it holds and
//! refreshes it in a background task at the earlier of half its lifetime
//! and five minutes before its end, so a lease renewal never waits on a
//! fetch. Validity is counted on the Tokio clock from each token's arrival.
//! No `Debug` shows a token.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use azure_core::credentials::{AccessToken, TokenCredential};
use tokio::time::Instant;

use crate::retry::{Backoff, random_seed};

pub(crate) const DEFAULT_AUDIENCE: &str = "https://storage.azure.com";

/// A token is refreshed at most this long before it runs out.
const REFRESH_AHEAD: Duration = Duration::from_secs(5 * 60);
/// A token with less than this left is not handed out.
const MIN_LEFT: Duration = Duration::from_secs(5);

/// The type name a credential's `Debug` starts with, never a field value.
pub(crate) fn credential_kind(credential: &dyn TokenCredential) -> String {
    let text = format!("{credential:?}");
    let name: String = text
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(64)
        .collect();
    if name.is_empty() {
        "token credential".to_owned()
    } else {
        name
    }
}

pub(crate) fn scope_of(audience: &str) -> String {
    format!("{}/.default", audience.trim_end_matches('/'))
}

/// Why no token could be had: the credential's kind and its failure.
#[derive(Debug, thiserror::Error)]
#[error("{kind} could not get a token")]
pub(crate) struct CredentialFailure {
    pub(crate) kind: String,
    pub(crate) source: azure_core::Error,
}

struct Held {
    token: AccessToken,
    ends: Instant,
    refresh_at: Instant,
}

struct Shared {
    credential: Arc<dyn TokenCredential>,
    kind: String,
    scope: String,
    held: Mutex<Option<Held>>,
    /// One fetch at a time.
    fetching: tokio::sync::Mutex<()>,
    /// Whether a refresh task is alive.
    refresher: AtomicBool,
}

#[derive(Clone)]
pub(crate) struct TokenCache {
    shared: Arc<Shared>,
}

impl fmt::Debug for TokenCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenCache")
            .field("credential", &self.shared.kind)
            .field("scope", &self.shared.scope)
            .finish_non_exhaustive()
    }
}

impl TokenCache {
    pub(crate) fn new(credential: Arc<dyn TokenCredential>, audience: &str) -> Self {
        let kind = credential_kind(credential.as_ref());
        TokenCache {
            shared: Arc::new(Shared {
                credential,
                kind,
                scope: scope_of(audience),
                held: Mutex::new(None),
                fetching: tokio::sync::Mutex::new(()),
                refresher: AtomicBool::new(false),
            }),
        }
    }

    pub(crate) async fn token(&self) -> azure_core::Result<AccessToken> {
        let token = match TokenCache::usable(&self.shared) {
            Some(token) => token,
            None => {
                let _one = self.shared.fetching.lock().await;
                match TokenCache::usable(&self.shared) {
                    Some(token) => token,
                    None => TokenCache::fetch(&self.shared).await?,
                }
            }
        };
        self.ensure_refresher();
        Ok(token)
    }

    fn usable(shared: &Shared) -> Option<AccessToken> {
        let held = shared.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.as_ref()
            .filter(|h| Instant::now() + MIN_LEFT < h.ends)
            .map(|h| h.token.clone())
    }

    async fn fetch(shared: &Shared) -> azure_core::Result<AccessToken> {
        let scope = shared.scope.as_str();
        let token = shared
            .credential
            .get_token(&[scope], None)
            .await
            .map_err(|source| {
                azure_core::Error::new(
                    azure_core::error::ErrorKind::Credential,
                    CredentialFailure {
                        kind: shared.kind.clone(),
                        source,
                    },
                )
            })?;
        let now = Instant::now();
        let left = token.expires_on - time::OffsetDateTime::now_utc();
        let left = Duration::try_from(left).unwrap_or(Duration::ZERO);
        let ends = now + left;
        let refresh_at = ends - (left / 2).min(REFRESH_AHEAD);
        *shared.held.lock().unwrap_or_else(PoisonError::into_inner) = Some(Held {
            token: token.clone(),
            ends,
            refresh_at,
        });
        Ok(token)
    }

    fn ensure_refresher(&self) {
        if self.shared.refresher.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.shared.refresher.store(false, Ordering::Release);
            return;
        };
        let weak = Arc::downgrade(&self.shared);
        runtime.spawn(refresh_loop(weak));
    }
}

/// Clears the refresher flag however the task ends.
struct Alive(Weak<Shared>);

impl Drop for Alive {
    fn drop(&mut self) {
        if let Some(shared) = self.0.upgrade() {
            shared.refresher.store(false, Ordering::Release);
        }
    }
}

/// Refreshes the held token while the cache lives; failures are retried
/// with backoff, the held token staying in use.
async fn refresh_loop(weak: Weak<Shared>) {
    let _alive = Alive(weak.clone());
    let fresh = || {
        Backoff::doubling(
            Duration::from_secs(1),
            Duration::from_secs(30),
            random_seed(),
        )
    };
    let mut backoff = fresh();
    // When the held token is due for refresh (`None`: none is held).
    let refresh_at = |shared: &Shared| {
        let held = shared.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.as_ref().map(|h| h.refresh_at)
    };
    loop {
        let Some(at) = weak.upgrade().and_then(|shared| refresh_at(&shared)) else {
            return;
        };
        tokio::time::sleep_until(at).await;
        let Some(shared) = weak.upgrade() else { return };
        if refresh_at(&shared).is_none_or(|at| at > Instant::now()) {
            continue;
        }
        let result = {
            let _one = shared.fetching.lock().await;
            TokenCache::fetch(&shared).await
        }
        .and_then(|token| match TokenCache::usable(&shared) {
            Some(_) => Ok(token),
            // A token already (nearly) expired would be refreshed again at
            // once, and again: back off as after a failure.
            None => Err(azure_core::Error::with_message(
                azure_core::error::ErrorKind::Credential,
                "the credential gave a token that is already expired",
            )),
        });
        match result {
            Ok(_) => backoff = fresh(),
            Err(e) => {
                let pause = backoff.pause();
                tracing::warn!(
                    credential = %shared.kind,
                    error = %e,
                    retry_in = ?pause,
                    "token refresh failed; the held token stays in use"
                );
                drop(shared);
                // Then again at once: the held token's refresh time passed.
                tokio::time::sleep(pause).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use std::sync::atomic::AtomicU32;

    /// Tokens of `lifetime`, each fetch taking `delay`; counts fetches and
    /// the scopes asked for.
    #[derive(Debug)]
    struct FakeCredential {
        fetches: AtomicU32,
        failing: AtomicBool,
        lifetime: Duration,
        delay: Duration,
        scopes: Mutex<Vec<String>>,
    }

    impl FakeCredential {
        fn new(lifetime: Duration, delay: Duration) -> Arc<Self> {
            Arc::new(FakeCredential {
                fetches: AtomicU32::new(0),
                failing: AtomicBool::new(false),
                lifetime,
                delay,
                scopes: Mutex::new(Vec::new()),
            })
        }
        fn fetches(&self) -> u32 {
            self.fetches.load(Ordering::SeqCst)
        }
    }

    #[async_trait]
    impl TokenCredential for FakeCredential {
        async fn get_token(
            &self,
            scopes: &[&str],
            _: Option<azure_core::credentials::TokenRequestOptions<'_>>,
        ) -> azure_core::Result<AccessToken> {
            let n = self.fetches.fetch_add(1, Ordering::SeqCst) + 1;
            self.scopes
                .lock()
                .unwrap()
                .extend(scopes.iter().map(|s| s.to_string()));
            tokio::time::sleep(self.delay).await;
            if self.failing.load(Ordering::SeqCst) {
                return Err(azure_core::Error::with_message(
                    azure_core::error::ErrorKind::Credential,
                    "no identity endpoint",
                ));
            }
            // The token's end is on the wall clock, as real tokens say it;
            // the cache counts what is left when it arrives.
            Ok(AccessToken::new(
                format!("fake-token-{n}"),
                time::OffsetDateTime::now_utc() + self.lifetime,
            ))
        }
    }

    /// Three hours of requests, one a minute, on one-hour tokens that take
    /// 10 s to fetch: four fetches (the first, then one ahead of each end),
    /// and no request after the first waits at all.
    #[tokio::test(start_paused = true)]
    async fn tokens_are_refreshed_ahead_of_expiry_and_requests_never_wait() {
        let fake = FakeCredential::new(Duration::from_secs(3600), Duration::from_secs(10));
        let cache = TokenCache::new(fake.clone(), "https://storage.azure.us/");
        let first = cache.token().await.unwrap();
        assert_eq!(first.token.secret(), "fake-token-1");
        assert_eq!(fake.fetches(), 1);
        for minute in 1..=180u32 {
            tokio::time::sleep(Duration::from_secs(60)).await;
            let asked = Instant::now();
            let token = cache.token().await.unwrap();
            assert_eq!(asked.elapsed(), Duration::ZERO, "minute {minute} waited");
            assert!(token.expires_on > time::OffsetDateTime::now_utc());
        }
        // Refreshes at 55, 110 and 165 minutes (each 10 s late: the fetch).
        assert_eq!(fake.fetches(), 4);
        // The configured audience's scope.
        let scopes = fake.scopes.lock().unwrap().clone();
        assert!(
            scopes
                .iter()
                .all(|s| s == "https://storage.azure.us/.default"),
            "{scopes:?}"
        );
    }

    /// A refresh that fails keeps the held token in use and is retried with
    /// backoff; once the token runs out, a request fetches in line and gets
    /// the failure, naming the credential's kind.
    #[tokio::test(start_paused = true)]
    async fn failed_refreshes_are_retried_and_then_surface_as_credential_errors() {
        let fake = FakeCredential::new(Duration::from_secs(600), Duration::ZERO);
        let cache = TokenCache::new(fake.clone(), DEFAULT_AUDIENCE);
        cache.token().await.unwrap();
        fake.failing.store(true, Ordering::SeqCst);
        // Refresh at 5 min; retries until the token ends at 10 min.
        tokio::time::sleep(Duration::from_secs(9 * 60)).await;
        let retried = fake.fetches();
        assert!(retried > 3, "{retried} fetches");
        assert_eq!(cache.token().await.unwrap().token.secret(), "fake-token-1");
        tokio::time::sleep(Duration::from_secs(60)).await;
        let e = cache.token().await.unwrap_err();
        assert_eq!(e.kind(), &azure_core::error::ErrorKind::Credential);
        let failure = e.downcast_ref::<CredentialFailure>().unwrap();
        assert_eq!(failure.kind, "FakeCredential");
        // Back in service: the next request fetches a token again.
        fake.failing.store(false, Ordering::SeqCst);
        let token = cache.token().await.unwrap();
        assert!(token.token.secret().starts_with("fake-token-"));
        assert!(!format!("{cache:?}").contains("fake-token"));
    }

    /// Concurrent first requests share one fetch.
    #[tokio::test(start_paused = true)]
    async fn concurrent_first_requests_share_one_fetch() {
        let fake = FakeCredential::new(Duration::from_secs(3600), Duration::from_secs(1));
        let cache = TokenCache::new(fake.clone(), DEFAULT_AUDIENCE);
        let all = futures_util::future::join_all((0..20).map(|_| cache.token())).await;
        assert!(all.iter().all(Result::is_ok));
        assert_eq!(fake.fetches(), 1);
    }

    /// The background task ends with the cache.
    #[tokio::test(start_paused = true)]
    async fn the_refresh_task_ends_with_the_cache() {
        let fake = FakeCredential::new(Duration::from_secs(3600), Duration::ZERO);
        let cache = TokenCache::new(fake.clone(), DEFAULT_AUDIENCE);
        cache.token().await.unwrap();
        drop(cache);
        tokio::time::sleep(Duration::from_secs(5 * 3600)).await;
        assert_eq!(fake.fetches(), 1);
    }

    /// A credential whose tokens are already expired is not asked again
    /// and again: refreshes back off (up to 30 s apart).
    #[tokio::test(start_paused = true)]
    async fn expired_tokens_do_not_make_the_refresher_spin() {
        let fake = FakeCredential::new(Duration::ZERO, Duration::ZERO);
        let cache = TokenCache::new(fake.clone(), DEFAULT_AUDIENCE);
        let _ = cache.token().await;
        tokio::time::sleep(Duration::from_secs(600)).await;
        let n = fake.fetches();
        assert!(n < 40, "{n} fetches in 10 minutes");
    }

    #[test]
    fn kinds_are_type_names_only() {
        let fake = FakeCredential::new(Duration::from_secs(1), Duration::ZERO);
        assert_eq!(credential_kind(fake.as_ref()), "FakeCredential");
        assert_eq!(
            scope_of("https://storage.azure.com/"),
            "https://storage.azure.com/.default"
        );
    }
}
