//! The `azure_core` pipelines of both services, whose per-try policies are
//! `Stamp::Headers`, the credential's, the caller's, then the transport.
//! Blob clients get no credential of their own (their bearer policy would
//! ask for a fixed scope and bypass the token cache).

use std::sync::Arc;

use azure_core::credentials::Secret;
use azure_core::http::policies::Policy;
use azure_core::http::{ClientOptions, Pipeline, RetryOptions, Transport};

use super::auth::{Service, Stamp};
use super::connection::{ConnectionSettings, Credentials};
use super::credential::TokenCache;

/// The service version of leasehold's own requests, to both services.
const VERSION: &str = "2022-11-02";

/// The pipelines of leasehold's own requests, and the blob clients' options.
pub(crate) struct Pipelines {
    pub(crate) table: Pipeline,
    pub(crate) blob: Pipeline,
    pub(crate) blob_options: ClientOptions,
}

fn options(
    auth: Arc<dyn Policy>,
    user: &[Arc<dyn Policy>],
    transport: &Arc<dyn Policy>,
) -> ClientOptions {
    let stamp = Stamp::Headers { version: VERSION };
    let mut per_try: Vec<Arc<dyn Policy>> = vec![Arc::new(stamp), auth];
    per_try.extend(user.iter().cloned());
    per_try.push(transport.clone());
    ClientOptions {
        per_try_policies: per_try,
        retry: RetryOptions::none(),
        // Never reached, but without it a client would build the stock HTTP
        // client, which is not compiled in.
        transport: Some(Transport::with_policy(transport.clone())),
        ..ClientOptions::default()
    }
}

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

pub(crate) fn build(
    settings: &ConnectionSettings,
    policies: &[Arc<dyn Policy>],
    transport: Arc<dyn Policy>,
) -> Pipelines {
    let shared = |stamp: Stamp| {
        let policy: Arc<dyn Policy> = Arc::new(stamp);
        (policy.clone(), policy)
    };
    let (table_auth, blob_auth) = match &settings.credentials {
        Credentials::AccessKey(key) => {
            let signer = |service| -> Arc<dyn Policy> {
                Arc::new(Stamp::SharedKey {
                    account: settings.account.clone(),
                    key: Secret::new(key.expose().to_owned()),
                    service,
                })
            };
            (signer(Service::Table), signer(Service::Blob))
        }
        Credentials::Sas(token) => shared(Stamp::Sas(token.clone())),
        // One cache for both services: one token, one refresher.
        Credentials::Token {
            credential,
            audience,
        } => shared(Stamp::Bearer(TokenCache::new(
            credential.0.clone(),
            audience,
        ))),
    };
    let blob_options = options(blob_auth, policies, &transport);
    Pipelines {
        table: pipeline(options(table_auth, policies, &transport)),
        blob: pipeline(blob_options.clone()),
        blob_options,
    }
}
