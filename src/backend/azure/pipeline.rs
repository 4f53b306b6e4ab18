//! The `azure_core` pipelines both services' requests go through.
//!
//! Every request, whether leasehold writes it (all Table requests, the
//! un-ranged blob `GET`) or `azure_storage_blob` does (every other blob and
//! lease operation), runs these per-try policies, in this order:
//!
//! 1. [`StorageHeadersPolicy`]: `x-ms-date` (fresh on every try) and, where
//!    the request has none, `x-ms-version`;
//! 2. the credential's policy: [`SharedKeyPolicy`] for the service,
//!    [`SasPolicy`], or [`BearerPolicy`] over the token cache;
//! 3. the caller's own policies ([`AzureBackendBuilder::policy`]), such as
//!    a fault injector;
//! 4. leasehold's [`Transport`], which answers without calling the stock
//!    logging and transport policies behind it.
//!
//! The stock retry policy is off (leasehold retries, see
//! [`TransportRetry`](super::TransportRetry)), and the blob clients get no
//! credential of their own: their bearer policy would ask for a fixed
//! scope and bypass the token cache.
//!
//! [`AzureBackendBuilder::policy`]: super::AzureBackendBuilder::policy
//! [`Transport`]: super::transport::Transport

use std::sync::Arc;

use azure_core::credentials::Secret;
use azure_core::http::policies::Policy;
use azure_core::http::{ClientOptions, Pipeline, RetryOptions, Transport};

use super::auth::{SasPolicy, Service, SharedKeyPolicy, Stamped, StorageHeadersPolicy};
use super::connection::{ConnectionSettings, Credentials};
use super::credential::{BearerPolicy, TokenCache};

/// The Table service version leasehold's requests are written for.
pub(crate) const TABLE_VERSION: &str = "2022-11-02";
/// The Blob service version of the raw `GET` (the blob client names its
/// own on every request).
pub(crate) const BLOB_VERSION: &str = "2022-11-02";

/// The pipelines and client options of one backend.
pub(crate) struct Pipelines {
    /// Table requests, written by leasehold.
    pub(crate) table: Pipeline,
    /// Blob requests written by leasehold (the un-ranged `GET`).
    pub(crate) blob: Pipeline,
    /// What each blob and container client is built with.
    pub(crate) blob_options: ClientOptions,
}

impl std::fmt::Debug for Pipelines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipelines").finish_non_exhaustive()
    }
}

/// The client options for one service: the policies above, in order.
fn options(
    version: &'static str,
    auth: Arc<dyn Policy>,
    user: &[Arc<dyn Policy>],
    transport: &Arc<dyn Policy>,
) -> ClientOptions {
    let mut per_try: Vec<Arc<dyn Policy>> =
        vec![Stamped::policy(StorageHeadersPolicy::new(version)), auth];
    per_try.extend(user.iter().cloned());
    per_try.push(transport.clone());
    ClientOptions {
        per_try_policies: per_try,
        retry: RetryOptions::none(),
        // Never reached (leasehold's transport answers first), but a client
        // left without one would build the stock HTTP client, which is not
        // compiled in.
        transport: Some(Transport::with_policy(transport.clone())),
        ..ClientOptions::default()
    }
}

/// The raw pipeline over `options`: no policies beyond those the options
/// hold.
pub(crate) fn pipeline(options: ClientOptions) -> Pipeline {
    Pipeline::new(
        Some(env!("CARGO_PKG_NAME")),
        Some(env!("CARGO_PKG_VERSION")),
        options,
        Vec::new(),
        Vec::new(),
        None,
    )
}

/// Builds the pipelines for `settings`, with the caller's `policies` in
/// front of `transport`.
pub(crate) fn build(
    settings: &ConnectionSettings,
    policies: &[Arc<dyn Policy>],
    transport: Arc<dyn Policy>,
) -> Pipelines {
    let (table_auth, blob_auth): (Arc<dyn Policy>, Arc<dyn Policy>) = match &settings.credentials {
        Credentials::AccessKey(key) => {
            let (account, key) = (&settings.account, Secret::new(key.expose().to_owned()));
            (
                Stamped::policy(SharedKeyPolicy::new(account, key.clone(), Service::Table)),
                Stamped::policy(SharedKeyPolicy::new(account, key, Service::Blob)),
            )
        }
        Credentials::Sas(token) => {
            let sas = Stamped::policy(SasPolicy::new(token.pairs().to_vec()));
            (sas.clone(), sas)
        }
        Credentials::Token {
            credential,
            audience,
        } => {
            // One cache for both services: one token, one refresher.
            let bearer: Arc<dyn Policy> = Arc::new(BearerPolicy::new(TokenCache::new(
                credential.clone(),
                audience,
            )));
            (bearer.clone(), bearer)
        }
    };
    let blob_options = options(BLOB_VERSION, blob_auth, policies, &transport);
    Pipelines {
        table: pipeline(options(TABLE_VERSION, table_auth, policies, &transport)),
        blob: pipeline(blob_options.clone()),
        blob_options,
    }
}
