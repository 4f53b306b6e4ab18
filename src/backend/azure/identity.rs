//! The default Microsoft Entra ID credential chain (`azure_identity` 1.x has
//! no `DefaultAzureCredential`): the first source to give a token is asked
//! from then on. Every source sends through leasehold's transport.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use azure_core::credentials::{AccessToken, Secret, TokenCredential, TokenRequestOptions};
use azure_core::http::ClientOptions;
use azure_core::http::policies::Policy;
use azure_identity::{
    ClientAssertionCredentialOptions, ClientSecretCredential, ClientSecretCredentialOptions,
    DeveloperToolsCredential, ManagedIdentityCredential, ManagedIdentityCredentialOptions,
    WorkloadIdentityCredential, WorkloadIdentityCredentialOptions,
};

use super::errors::{Redactor, Scrubbed};
use super::transport::{RootCertificate, Transport};
use crate::error::{Error, Result};

const KIND: &str = "AZURE_CREDENTIAL_KIND";

/// The chain: sources in order, and the one that answered first.
pub(crate) struct DefaultCredential {
    sources: Vec<(&'static str, Arc<dyn TokenCredential>)>,
    chosen: AtomicUsize,
}

impl fmt::Debug for DefaultCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.sources.iter().map(|(n, _)| *n).collect();
        f.debug_struct("DefaultAzureCredential")
            .field("sources", &names)
            .finish_non_exhaustive()
    }
}

/// The chain's error: it `has no source`, or `cannot be set up: {source}`.
fn chain_error(why: &str, e: Option<&azure_core::Error>) -> Error {
    Error::Auth {
        credential: "DefaultAzureCredential".to_owned(),
        status: None,
        code: None,
        message: format!("the default credential chain {why}"),
        source: e.map(|e| Box::new(Scrubbed::chain(e, &Redactor::default())) as _),
    }
}

fn setup_error(what: &str, e: &azure_core::Error) -> Error {
    chain_error(&format!("cannot be set up: {what}"), Some(e))
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl DefaultCredential {
    pub(crate) fn from_env(root_certificates: &[RootCertificate]) -> Result<Arc<Self>> {
        let transport: Arc<dyn Policy> = Arc::new(Transport::new(root_certificates)?);
        let client_options = ClientOptions {
            per_try_policies: vec![transport.clone()],
            transport: Some(azure_core::http::Transport::with_policy(transport)),
            ..ClientOptions::default()
        };
        let only = var(KIND).map(|k| k.to_ascii_lowercase().replace(['_', '-'], ""));
        let wanted = |names: &[&str]| only.as_deref().is_none_or(|k| names.contains(&k));
        let mut sources: Vec<(&'static str, Arc<dyn TokenCredential>)> = Vec::new();
        if wanted(&["environment", "clientsecret"])
            && let (Some(tenant), Some(client), Some(secret)) = (
                var("AZURE_TENANT_ID"),
                var("AZURE_CLIENT_ID"),
                var("AZURE_CLIENT_SECRET"),
            )
        {
            let c = ClientSecretCredential::new(
                &tenant,
                client,
                Secret::new(secret),
                Some(ClientSecretCredentialOptions {
                    client_options: client_options.clone(),
                }),
            )
            .map_err(|e| setup_error("the client secret credential", &e))?;
            sources.push(("ClientSecretCredential", c));
        }
        if wanted(&["workloadidentity"]) && var("AZURE_FEDERATED_TOKEN_FILE").is_some() {
            let c = WorkloadIdentityCredential::new(Some(WorkloadIdentityCredentialOptions {
                credential_options: ClientAssertionCredentialOptions {
                    client_options: client_options.clone(),
                },
                ..WorkloadIdentityCredentialOptions::default()
            }))
            .map_err(|e| setup_error("the workload identity credential", &e))?;
            sources.push(("WorkloadIdentityCredential", c));
        }
        if wanted(&["managedidentity", "appservice", "virtualmachine"]) {
            let c = ManagedIdentityCredential::new(Some(ManagedIdentityCredentialOptions {
                client_options: client_options.clone(),
                ..ManagedIdentityCredentialOptions::default()
            }))
            .map_err(|e| setup_error("the managed identity credential", &e))?;
            sources.push(("ManagedIdentityCredential", c));
        }
        if wanted(&["azurecli", "developertools"]) {
            let c = DeveloperToolsCredential::new(None)
                .map_err(|e| setup_error("the developer tools credential", &e))?;
            sources.push(("DeveloperToolsCredential", c));
        }
        if sources.is_empty() {
            return Err(match only {
                Some(kind) => Error::invalid(
                    KIND,
                    format!(
                        "names {kind:?}, which is not a kind this chain knows or cannot be set up \
                         here (environment, workloadidentity, managedidentity, appservice, \
                         virtualmachine, azurecli, developertools)"
                    ),
                ),
                None => chain_error("has no source", None),
            });
        }
        Ok(Arc::new(DefaultCredential {
            sources,
            chosen: AtomicUsize::new(usize::MAX),
        }))
    }
}

#[async_trait]
impl TokenCredential for DefaultCredential {
    async fn get_token(
        &self,
        scopes: &[&str],
        options: Option<TokenRequestOptions<'_>>,
    ) -> azure_core::Result<AccessToken> {
        let chosen = self.chosen.load(Ordering::Acquire);
        if let Some((_, source)) = self.sources.get(chosen) {
            return source.get_token(scopes, options).await;
        }
        let mut failures = Vec::new();
        for (i, (name, source)) in self.sources.iter().enumerate() {
            match source.get_token(scopes, options.clone()).await {
                Ok(token) => {
                    self.chosen.store(i, Ordering::Release);
                    return Ok(token);
                }
                Err(e) => failures.push(format!("{name}: {e}")),
            }
        }
        Err(azure_core::Error::with_message(
            azure_core::error::ErrorKind::Credential,
            format!(
                "no credential of the chain gave a token ({})",
                failures.join("; ")
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    /// Counts its calls; gives a token or fails.
    #[derive(Debug)]
    struct Source {
        gives: bool,
        calls: AtomicU32,
    }

    #[async_trait]
    impl TokenCredential for Source {
        async fn get_token(
            &self,
            _: &[&str],
            _: Option<TokenRequestOptions<'_>>,
        ) -> azure_core::Result<AccessToken> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            if self.gives {
                Ok(AccessToken::new(
                    "t",
                    time::OffsetDateTime::now_utc() + time::Duration::hours(1),
                ))
            } else {
                Err(azure_core::Error::with_message(
                    azure_core::error::ErrorKind::Credential,
                    "not here",
                ))
            }
        }
    }

    fn source(gives: bool) -> Arc<Source> {
        Arc::new(Source {
            gives,
            calls: AtomicU32::new(0),
        })
    }

    /// Sources are asked in order until one gives a token; from then on
    /// only that one is asked. When none does, the error names each.
    #[tokio::test]
    async fn the_first_source_that_answers_is_kept() {
        let (a, b, c) = (source(false), source(true), source(true));
        let chain = DefaultCredential {
            sources: vec![("A", a.clone()), ("B", b.clone()), ("C", c.clone())],
            chosen: AtomicUsize::new(usize::MAX),
        };
        for _ in 0..3 {
            chain.get_token(&["s/.default"], None).await.unwrap();
        }
        let calls = |s: &Source| s.calls.load(Ordering::SeqCst);
        assert_eq!((calls(&a), calls(&b), calls(&c)), (1, 3, 0));
        assert!(format!("{chain:?}").starts_with("DefaultAzureCredential"));

        let none = DefaultCredential {
            sources: vec![("A", source(false)), ("B", source(false))],
            chosen: AtomicUsize::new(usize::MAX),
        };
        let e = none.get_token(&["s/.default"], None).await.unwrap_err();
        assert_eq!(e.kind(), &azure_core::error::ErrorKind::Credential);
        assert!(
            e.to_string().contains("A: ") && e.to_string().contains("B: "),
            "{e}"
        );
    }
}
