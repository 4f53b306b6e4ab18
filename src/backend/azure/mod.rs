//! The Azure backend: Azure Storage or Azurite, on the `azure_core` 1.x
//! pipeline. leasehold writes every Table request itself (there is no Table
//! crate on the 1.x line); blobs and leases go through
//! `azure_storage_blob` 1.x.
//!
//! ```no_run
//! # async fn demo() -> leasehold::Result<()> {
//! use leasehold::backend::azure::AzureBackend;
//! let backend = AzureBackend::from_connection_string("UseDevelopmentStorage=true")?;
//! # let _ = backend; Ok(()) }
//! ```
//!
//! Entities travel as JSON with `@odata.type` annotations (an `i64` above
//! 2^53 keeps its precision); limits are checked before anything is sent;
//! signing, retries ([`TransportRetry`]) and the transport are leasehold's
//! own; your policies go in front of the transport
//! ([`AzureBackendBuilder::policy`]).

mod auth;
mod batch;
mod blobs;
mod connection;
mod credential;
mod errors;
#[cfg(feature = "identity")]
mod identity;
mod pipeline;
mod query;
mod requests;
mod retry;
mod tables;
mod transport;

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use azure_core::credentials::TokenCredential;
use azure_core::http::policies::Policy;
use azure_core::http::{Context, PipelineSendOptions, RawResponse, Request, Url};
use futures_util::FutureExt as _;

pub use connection::ConnectionSettings;
pub(crate) use connection::Credentials;
use connection::{AccountKey, SasToken};

use self::connection::parse_endpoint;
pub use retry::TransportRetry;

use self::auth::Service;
use self::errors::{Failure, Redactor};
use self::pipeline::Pipelines;
use self::transport::{RootCertificate, Transport};
use crate::error::{Error, Result};

/// Azure Table Storage and Blob Storage (or Azurite) as a leasehold
/// backend. Clones share the HTTP connection pool.
#[derive(Clone)]
pub struct AzureBackend {
    inner: Arc<Inner>,
}

struct Inner {
    settings: ConnectionSettings,
    pipelines: Pipelines,
    retry: TransportRetry,
    redactor: Redactor,
}

impl fmt::Debug for AzureBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AzureBackend")
            .field("settings", &self.inner.settings)
            .field("retry", &self.inner.retry)
            .finish()
    }
}

impl AzureBackend {
    /// Connects with an Azure Storage connection string, failing as
    /// [`ConnectionSettings::parse`]. Sends nothing.
    pub fn from_connection_string(connection_string: &str) -> Result<Self> {
        Self::builder()
            .connection_string(connection_string)?
            .build()
    }

    /// A builder taking the account, credentials and endpoints explicitly.
    pub fn builder() -> AzureBackendBuilder {
        AzureBackendBuilder::default()
    }

    /// The settings this backend was built from.
    pub fn settings(&self) -> &ConnectionSettings {
        &self.inner.settings
    }

    /// The transport retry policy in force.
    pub fn transport_retry(&self) -> &TransportRetry {
        &self.inner.retry
    }

    /// One attempt under the per-attempt timeout. Not an `async fn`, whose
    /// future would hold `fut` twice.
    fn attempt<'a, T, F>(
        &'a self,
        fut: F,
    ) -> impl Future<Output = std::result::Result<T, Failure>> + 'a
    where
        F: Future<Output = azure_core::Result<T>> + 'a,
    {
        let limit = self.inner.retry.request_timeout();
        tokio::time::timeout(limit, fut).map(move |done| match done {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(Failure::from_azure(e, &self.inner.redactor)),
            Err(elapsed) => Err(Failure::ReplyLost(errors::Scrubbed::new(
                format!("no reply within {limit:?}"),
                Some(errors::Scrubbed::chain(&elapsed, &self.inner.redactor)),
            ))),
        })
    }

    /// Sends a request once; an error status is a [`Failure`].
    async fn send_raw(
        &self,
        service: Service,
        mut request: Request,
    ) -> std::result::Result<RawResponse, Failure> {
        let pipeline = match service {
            Service::Table => &self.inner.pipelines.table,
            Service::Blob => &self.inner.pipelines.blob,
        };
        // Set here, or the pipeline's policy draws a random id from the
        // system (and builds an error with a backtrace) for every request.
        request.insert_header(CLIENT_REQUEST_ID, fresh_uuid());
        let context = Context::new();
        let reply = self
            .attempt(pipeline.send(
                &context,
                &mut request,
                // leasehold reads every status itself.
                Some(PipelineSendOptions {
                    skip_checks: true,
                    ..PipelineSendOptions::default()
                }),
            ))
            .await?;
        let status = u16::from(reply.status());
        if (200..300).contains(&status) {
            Ok(reply)
        } else {
            Err(Failure::from_reply(
                status,
                reply.headers(),
                reply.body().as_ref(),
                &self.inner.redactor,
            ))
        }
    }

    fn base_url(&self, service: Service) -> &Url {
        match service {
            Service::Table => &self.inner.settings.table_endpoint,
            Service::Blob => &self.inner.settings.blob_endpoint,
        }
    }
}

const CLIENT_REQUEST_ID: &str = "x-ms-client-request-id";

/// A version-4 UUID without a system call.
fn fresh_uuid() -> String {
    let (hi, lo) = (crate::retry::random_seed(), crate::retry::random_seed());
    let bits = (u128::from(hi) << 64) | u128::from(lo);
    uuid::Builder::from_random_bytes(bits.to_le_bytes())
        .into_uuid()
        .hyphenated()
        .to_string()
}

/// Builds an [`AzureBackend`] from parts, or from a connection string with
/// parts overridden.
///
/// ```no_run
/// # fn demo() -> leasehold::Result<()> {
/// use leasehold::backend::azure::AzureBackend;
/// let backend = AzureBackend::builder()
///     .account("myaccount")
///     .access_key("c2VjcmV0")?
///     .build()?;
/// # let _ = backend; Ok(()) }
/// ```
#[derive(Debug, Default)]
#[must_use = "an AzureBackendBuilder does nothing until `build()`"]
pub struct AzureBackendBuilder {
    account: Option<String>,
    credentials: Option<Credentials>,
    table_endpoint: Option<String>,
    blob_endpoint: Option<String>,
    retry: TransportRetry,
    policies: Vec<Arc<dyn Policy>>,
    audience: Option<String>,
    root_certificates: Vec<RootCertificate>,
}

impl AzureBackendBuilder {
    /// Takes the parts of a connection string over those set before,
    /// failing as [`ConnectionSettings::parse`].
    pub fn connection_string(self, connection_string: &str) -> Result<Self> {
        Ok(self.start_from(ConnectionSettings::parse(connection_string)?))
    }

    fn start_from(mut self, settings: ConnectionSettings) -> Self {
        self.account = Some(settings.account);
        self.credentials = Some(settings.credentials);
        self.table_endpoint = Some(settings.table_endpoint.into());
        self.blob_endpoint = Some(settings.blob_endpoint.into());
        self
    }

    /// Takes Azurite's defaults ([`ConnectionSettings::emulator`]) over
    /// the parts set before.
    pub fn emulator(self) -> Result<Self> {
        Ok(self.start_from(ConnectionSettings::emulator()?))
    }

    /// The storage account name.
    pub fn account(mut self, account: impl Into<String>) -> Self {
        self.account = Some(account.into());
        self
    }

    /// Authorise with Shared Key, using this base64 account key
    /// ([`Error::Invalid`] when empty or not base64).
    pub fn access_key(mut self, key: impl Into<String>) -> Result<Self> {
        self.credentials = Some(Credentials::AccessKey(AccountKey::new(key)?));
        Ok(self)
    }

    /// Authorise with an account SAS covering tables and blobs (a SAS URL's
    /// query, with or without its `?`); [`Error::Invalid`] when it is empty
    /// or has no `sig` parameter.
    pub fn sas_token(mut self, token: impl AsRef<str>) -> Result<Self> {
        self.credentials = Some(Credentials::Sas(SasToken::new(token)?));
        Ok(self)
    }

    /// Authorise with Microsoft Entra ID bearer tokens from any `azure_core`
    /// 1.x [`TokenCredential`] (roles *Storage Table Data Contributor* and
    /// *Storage Blob Data Contributor*), refreshed ahead of expiry; without
    /// a token requests fail with [`Error::Auth`]. Endpoints must be `https`.
    ///
    /// ```no_run
    /// # fn demo(credential: std::sync::Arc<dyn azure_core::credentials::TokenCredential>) -> leasehold::Result<()> {
    /// use leasehold::backend::azure::AzureBackend;
    /// let backend = AzureBackend::builder()
    ///     .account("myaccount")
    ///     .token_credential(credential)
    ///     .build()?;
    /// # let _ = backend; Ok(()) }
    /// ```
    pub fn token_credential(mut self, credential: Arc<dyn TokenCredential>) -> Self {
        self.credentials = Some(Credentials::Token {
            credential: connection::TokenSource(credential),
            audience: String::new(),
        });
        self
    }

    /// Authorise with Microsoft Entra ID through a chain of `azure_identity`
    /// 1.x credentials, tried until one gives a token: the environment's
    /// client secret, workload identity, managed identity, then the
    /// developer tools (`az login`, `azd auth login`). `AZURE_CREDENTIAL_KIND`
    /// (`environment`, `workloadidentity`, `managedidentity`, `appservice`,
    /// `virtualmachine`, `azurecli`, `developertools`) picks one kind.
    ///
    /// # Errors
    /// [`Error::Auth`] when no credential of the chain can be set up.
    #[cfg(feature = "identity")]
    pub fn default_credential(self) -> Result<Self> {
        let credential = identity::DefaultCredential::from_env(&self.root_certificates)?;
        Ok(self.token_credential(credential))
    }

    /// The audience Entra ID tokens are asked for (default
    /// `https://storage.azure.com`), such as a sovereign cloud's.
    pub fn token_audience(mut self, audience: impl Into<String>) -> Self {
        self.audience = Some(audience.into());
        self
    }

    /// Trusts the PEM certificates in `pem` as root authorities, beside the
    /// system's; [`Error::Invalid`] when none parses.
    pub fn root_certificate_pem(mut self, pem: &[u8]) -> Result<Self> {
        self.root_certificates
            .extend(RootCertificate::parse_pem(pem)?);
        Ok(self)
    }

    /// The Table service endpoint (default
    /// `https://{account}.table.core.windows.net`); give both or neither.
    pub fn table_endpoint(mut self, url: impl Into<String>) -> Self {
        self.table_endpoint = Some(url.into());
        self
    }

    /// The Blob service endpoint (as [`Self::table_endpoint`]).
    pub fn blob_endpoint(mut self, url: impl Into<String>) -> Self {
        self.blob_endpoint = Some(url.into());
        self
    }

    /// The transport retry policy (default: [`TransportRetry::default`]).
    pub fn transport_retry(mut self, policy: TransportRetry) -> Self {
        self.retry = policy;
        self
    }

    /// Adds an `azure_core` 1.x [`Policy`] that sees every signed request of
    /// both services on every attempt, in the order added. Its answer is
    /// read as the network's: an error of kind `Connection` (or `Io`
    /// wrapping a refused connection) as a request not sent, any other `Io`
    /// error as a lost reply (see [`TransportRetry`]), any other error is
    /// reported at once. Merges are sent as `PATCH`.
    pub fn policy(mut self, policy: Arc<dyn Policy>) -> Self {
        self.policies.push(policy);
        self
    }

    /// Builds the backend (sends nothing); [`Error::Invalid`] when the
    /// account, credentials or an endpoint is missing or malformed.
    pub fn build(self) -> Result<AzureBackend> {
        let account =
            (self.account).ok_or_else(|| Error::invalid("Azure backend", "has no account name"))?;
        connection::account_name_check(&account)?;
        let mut credentials = self.credentials.ok_or_else(|| {
            Error::invalid(
                "Azure backend",
                "has no credentials (an account key or a SAS)",
            )
        })?;
        let (table_endpoint, blob_endpoint) = connection::endpoints(
            "Azure backend",
            [
                self.table_endpoint.as_deref(),
                self.blob_endpoint.as_deref(),
            ],
            Some(("https", &account, "core.windows.net")),
        )?;
        if let Credentials::Token { audience, .. } = &mut credentials {
            *audience = (self.audience.as_deref())
                .unwrap_or(credential::DEFAULT_AUDIENCE)
                .to_owned();
            parse_endpoint("token audience", audience)
                .map_err(|_| Error::invalid("token audience", "is not an absolute http(s) URL"))?;
            for (what, url) in [
                ("TableEndpoint", &table_endpoint),
                ("BlobEndpoint", &blob_endpoint),
            ] {
                if url.scheme() != "https" {
                    return Err(Error::invalid(
                        format!("connection string part {what}"),
                        "must be an https URL with a token credential (bearer tokens never \
                         travel over plain http)",
                    ));
                }
            }
        } else if self.audience.is_some() {
            return Err(Error::invalid(
                "token audience",
                "is set, but the credentials are not a token credential",
            ));
        }
        let settings = ConnectionSettings {
            account,
            credentials,
            table_endpoint,
            blob_endpoint,
        };
        let transport: Arc<dyn Policy> = Arc::new(Transport::new(&self.root_certificates)?);
        let pipelines = pipeline::build(&settings, &self.policies, transport);
        let redactor = Redactor::new(settings.credentials.secrets(), settings.credentials.kind());
        Ok(AzureBackend {
            inner: Arc::new(Inner {
                settings,
                pipelines,
                retry: self.retry,
                redactor,
            }),
        })
    }
}

/// What the benchmarks' raw side sends through: not part of the API.
#[doc(hidden)]
pub mod __bench {
    use super::AzureBackend;

    /// The Table pipeline of `backend` and its Table endpoint.
    pub fn table_pipeline(
        backend: &AzureBackend,
    ) -> (azure_core::http::Pipeline, azure_core::http::Url) {
        (
            backend.inner.pipelines.table.clone(),
            backend.inner.settings.table_endpoint.clone(),
        )
    }
}

#[cfg(test)]
mod auth_tests;
#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::TableBackend;
    use crate::backend::azure::connection::base_uri;
    use crate::key::{PartitionKey, RowKey, TableName};
    use async_trait::async_trait;

    const KEY: &str = "c2VjcmV0LWtleS1tYXRlcmlhbC10aGF0LW11c3Qtbm90LWxlYWs=";
    const SIG: &str = "SuperSecretSignatureValue0123456789abcdef";

    #[test]
    fn backend_and_builder_debug_redact_secrets() {
        let b = AzureBackend::from_connection_string(&format!(
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={KEY};\
             BlobEndpoint=http://127.0.0.1:1/devstoreaccount1;TableEndpoint=http://127.0.0.1:2/devstoreaccount1"
        ))
        .unwrap();
        let text = format!("{b:?} {b:#?} {:?}", b.settings());
        assert!(!text.contains(KEY) && !text.contains(&KEY[..16]), "{text}");
        assert!(text.contains("127.0.0.1:2"), "{text}");

        let sas = format!("sv=2022-11-02&ss=bt&sig={SIG}");
        let builder = AzureBackend::builder()
            .account("acct1")
            .sas_token(&sas)
            .unwrap();
        let text = format!("{builder:?}");
        assert!(!text.contains(SIG), "{text}");
        let b = builder.build().unwrap();
        let text = format!("{b:?}");
        assert!(!text.contains(SIG), "{text}");
        assert!(text.contains("acct1.table.core.windows.net"), "{text}");

        let builder = AzureBackend::builder()
            .account("acct1")
            .access_key(KEY)
            .unwrap();
        let text = format!("{builder:?}");
        assert!(!text.contains(KEY), "{text}");
    }

    /// A policy that answers every request with 404 `ResourceNotFound` and
    /// keeps its client request id.
    #[derive(Debug, Default)]
    struct RequestIds(std::sync::Mutex<Vec<Option<String>>>);

    #[async_trait]
    impl Policy for RequestIds {
        async fn send(
            &self,
            _ctx: &Context,
            request: &mut Request,
            _next: &[Arc<dyn Policy>],
        ) -> azure_core::http::policies::PolicyResult {
            let id = request
                .headers()
                .iter()
                .find(|(name, _)| name.as_str() == CLIENT_REQUEST_ID)
                .map(|(_, value)| value.as_str().to_owned());
            self.0.lock().unwrap().push(id);
            let mut headers = azure_core::http::headers::Headers::new();
            headers.insert("x-ms-error-code", "ResourceNotFound");
            Ok(azure_core::http::AsyncRawResponse::from_bytes(
                azure_core::http::StatusCode::NotFound,
                headers,
                Vec::<u8>::new(),
            ))
        }
    }

    #[tokio::test]
    async fn every_table_request_carries_its_own_version_4_client_request_id() {
        let ids = Arc::new(RequestIds::default());
        let b = AzureBackend::builder()
            .connection_string("UseDevelopmentStorage=true")
            .unwrap()
            .policy(ids.clone())
            .build()
            .unwrap();
        let table = TableName::new("Ids").unwrap();
        let (pk, rk) = (PartitionKey::new("p").unwrap(), RowKey::new("r").unwrap());
        for _ in 0..3 {
            assert!(
                super::super::TableBackend::get(&b, &table, &pk, &rk)
                    .await
                    .unwrap()
                    .is_none()
            );
        }
        let seen = ids.0.lock().unwrap().clone();
        assert_eq!(seen.len(), 3, "{seen:?}");
        let mut parsed: Vec<uuid::Uuid> = seen
            .iter()
            .map(|id| uuid::Uuid::parse_str(id.as_deref().expect("an id")).unwrap())
            .collect();
        assert!(
            parsed
                .iter()
                .all(|id| id.get_version() == Some(uuid::Version::Random)),
            "{parsed:?}"
        );
        parsed.dedup();
        assert_eq!(parsed.len(), 3, "each request has its own id: {seen:?}");
    }

    /// Answers the table management requests as the service would: a
    /// listing in two pages, 409 for a second create, 404 for a delete of
    /// a missing table; keeps each request's method and URL.
    #[derive(Debug, Default)]
    struct TableService {
        tables: std::sync::Mutex<Vec<String>>,
        seen: std::sync::Mutex<Vec<String>>,
    }

    #[async_trait]
    impl Policy for TableService {
        async fn send(
            &self,
            _ctx: &Context,
            request: &mut Request,
            _next: &[Arc<dyn Policy>],
        ) -> azure_core::http::policies::PolicyResult {
            use azure_core::http::StatusCode;
            let url = request.url().clone();
            let method = request.method();
            self.seen
                .lock()
                .unwrap()
                .push(format!("{} {url}", method.as_str()));
            let mut headers = azure_core::http::headers::Headers::new();
            let mut tables = self.tables.lock().unwrap();
            let path = url.path().trim_end_matches('/');
            let (status, body) = if method == azure_core::http::Method::Post {
                let body = match request.body() {
                    azure_core::http::Body::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
                    #[allow(unreachable_patterns)]
                    _ => String::new(),
                };
                let name = body.split('"').nth(3).unwrap_or_default().to_owned();
                if tables.iter().any(|t| t.eq_ignore_ascii_case(&name)) {
                    headers.insert("x-ms-error-code", "TableAlreadyExists");
                    (StatusCode::Conflict, String::new())
                } else {
                    tables.push(name);
                    (StatusCode::Created, String::new())
                }
            } else if method == azure_core::http::Method::Delete {
                let name = path
                    .rsplit_once("Tables('")
                    .map(|(_, rest)| rest.trim_end_matches("')").to_owned())
                    .unwrap_or_default();
                match tables.iter().position(|t| *t == name) {
                    Some(i) => {
                        tables.remove(i);
                        (StatusCode::NoContent, String::new())
                    }
                    None => {
                        headers.insert("x-ms-error-code", "ResourceNotFound");
                        (StatusCode::NotFound, String::new())
                    }
                }
            } else {
                // Pages of two names, the continuation naming the next.
                let from = url
                    .query_pairs()
                    .find(|(k, _)| k == "NextTableName")
                    .map(|(_, v)| v.into_owned());
                let start = from
                    .and_then(|f| tables.iter().position(|t| *t == f))
                    .unwrap_or(0);
                let page: Vec<_> = tables.iter().skip(start).take(2).collect();
                if let Some(next) = tables.get(start + 2) {
                    headers.insert("x-ms-continuation-nexttablename", next.clone());
                }
                let value: Vec<_> = page
                    .iter()
                    .map(|t| serde_json::json!({ "TableName": t }))
                    .collect();
                (
                    StatusCode::Ok,
                    serde_json::json!({ "value": value }).to_string(),
                )
            };
            Ok(azure_core::http::AsyncRawResponse::from_bytes(
                status,
                headers,
                body.into_bytes(),
            ))
        }
    }

    #[tokio::test]
    async fn tables_are_created_listed_across_pages_and_deleted() {
        use crate::backend::{TableBackend, TableCreation};
        let service = Arc::new(TableService::default());
        let b = AzureBackend::builder()
            .connection_string("UseDevelopmentStorage=true")
            .unwrap()
            .policy(service.clone())
            .build()
            .unwrap();
        let names = ["Alpha", "Beta", "Charlie", "Delta", "Echo"];
        for name in names {
            let t = TableName::new(name).unwrap();
            assert_eq!(b.create_table(&t).await.unwrap(), TableCreation::Created);
        }
        let beta = TableName::new("beta").unwrap();
        assert_eq!(
            b.create_table(&beta).await.unwrap(),
            TableCreation::AlreadyExisted
        );
        let listed = b.list_tables().await.unwrap();
        let listed: Vec<&str> = listed.iter().map(TableName::as_str).collect();
        assert_eq!(listed, names);
        let lists = service
            .seen
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.starts_with("GET "))
            .cloned()
            .collect::<Vec<_>>();
        assert_eq!(lists.len(), 3, "three pages: {lists:?}");
        assert!(
            lists[1].ends_with("/Tables?NextTableName=Charlie"),
            "{lists:?}"
        );
        let charlie = TableName::new("Charlie").unwrap();
        assert!(b.delete_table(&charlie).await.unwrap());
        assert!(!b.delete_table(&charlie).await.unwrap());
        let seen = service.seen.lock().unwrap().clone();
        assert!(
            seen.iter()
                .any(|r| r.ends_with("/devstoreaccount1/Tables('Charlie')")),
            "{seen:?}"
        );
    }

    #[test]
    fn builder_requires_account_and_credentials() {
        let e = AzureBackend::builder().build().unwrap_err();
        assert!(e.to_string().contains("account"), "{e}");
        let e = AzureBackend::builder().account("abc").build().unwrap_err();
        assert!(e.to_string().contains("credentials"), "{e}");
        let e = AzureBackend::builder()
            .account("abc")
            .access_key(KEY)
            .unwrap()
            .table_endpoint("nope")
            .blob_endpoint("http://127.0.0.1:10000/abc")
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("TableEndpoint"), "{e}");
    }

    #[test]
    fn builder_refuses_one_endpoint_without_the_other() {
        let e = AzureBackend::builder()
            .account("abc")
            .access_key(KEY)
            .unwrap()
            .table_endpoint("http://127.0.0.1:10002/abc")
            .build()
            .unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Invalid);
        assert!(e.to_string().contains("no BlobEndpoint"), "{e}");
        let e = AzureBackend::builder()
            .account("abc")
            .access_key(KEY)
            .unwrap()
            .blob_endpoint("http://127.0.0.1:10000/abc")
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("no TableEndpoint"), "{e}");
    }

    #[derive(Debug)]
    struct NoTokens;

    #[async_trait]
    impl TokenCredential for NoTokens {
        async fn get_token(
            &self,
            _: &[&str],
            _: Option<azure_core::credentials::TokenRequestOptions<'_>>,
        ) -> azure_core::Result<azure_core::credentials::AccessToken> {
            Err(azure_core::Error::with_message(
                azure_core::error::ErrorKind::Credential,
                "no tokens here",
            ))
        }
    }

    #[test]
    fn token_credentials_need_https_and_a_valid_audience() {
        let b = AzureBackend::builder()
            .account("acct1")
            .token_credential(Arc::new(NoTokens))
            .build()
            .unwrap();
        let text = format!("{b:?}");
        assert!(
            text.contains("NoTokens") && text.contains("https://storage.azure.com"),
            "{text}"
        );
        assert!(
            text.contains("https://acct1.blob.core.windows.net"),
            "{text}"
        );
        let e = AzureBackend::builder()
            .account("acct1")
            .token_credential(Arc::new(NoTokens))
            .table_endpoint("http://127.0.0.1:10002/acct1")
            .blob_endpoint("http://127.0.0.1:10000/acct1")
            .build()
            .unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Invalid);
        assert!(
            e.to_string().contains("TableEndpoint") && e.to_string().contains("https"),
            "{e}"
        );
        let e = AzureBackend::builder()
            .account("acct1")
            .token_credential(Arc::new(NoTokens))
            .token_audience("not a url")
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("token audience"), "{e}");
        let e = AzureBackend::builder()
            .account("acct1")
            .access_key(KEY)
            .unwrap()
            .token_audience("https://storage.azure.us")
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("not a token credential"), "{e}");
        let e = AzureBackend::builder()
            .root_certificate_pem(b"-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n")
            .unwrap_err();
        assert!(e.to_string().contains("root certificate"), "{e}");
        let e = AzureBackend::builder()
            .root_certificate_pem(b"")
            .unwrap_err();
        assert!(e.to_string().contains("root certificate"), "{e}");
        // Well-formed PEM around bytes that are no certificate: refused
        // when given, not when the backend is built.
        let e = AzureBackend::builder()
            .root_certificate_pem(
                b"-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n",
            )
            .unwrap_err();
        assert!(e.to_string().contains("not an X.509 certificate"), "{e}");
    }

    /// A credential that gives no token fails the request at once with
    /// `Error::Auth` naming the credential's kind: not retried as transient.
    #[tokio::test(start_paused = true)]
    async fn a_credential_without_tokens_is_an_auth_error_naming_its_kind() {
        let plan = crate::testing::FaultInjector::default();
        let b = AzureBackend::builder()
            .account("acct1")
            .token_credential(Arc::new(NoTokens))
            .table_endpoint("https://127.0.0.1:1/acct1")
            .blob_endpoint("https://127.0.0.1:1/acct1")
            .policy(plan.transport_policy())
            .build()
            .unwrap();
        let t = TableName::new("Things").unwrap();
        let e = b
            .get(
                &t,
                &PartitionKey::new("p").unwrap(),
                &RowKey::new("r").unwrap(),
            )
            .await
            .unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Auth, "{e:?}");
        assert!(!e.is_transient());
        let Error::Auth {
            credential, status, ..
        } = &e
        else {
            unreachable!()
        };
        assert_eq!((credential.as_str(), *status), ("NoTokens", None));
        assert!(e.to_string().contains("NoTokens"), "{e}");
        assert_eq!(plan.requests(), 0, "nothing was sent");
    }

    #[test]
    fn builder_overrides_connection_string_parts() {
        let b = AzureBackend::builder()
            .emulator()
            .unwrap()
            .table_endpoint("http://127.0.0.1:4242/devstoreaccount1/")
            .build()
            .unwrap();
        assert_eq!(
            base_uri(&b.settings().table_endpoint),
            "http://127.0.0.1:4242/devstoreaccount1"
        );
        assert_eq!(
            base_uri(&b.settings().blob_endpoint),
            connection::EMULATOR_BLOB_ENDPOINT
        );
    }
}
