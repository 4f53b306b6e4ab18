//! Signing: the storage headers, Shared Key signatures (`azure_storage_blob`
//! 1.x signs none) as the storage REST reference's "Authorize with Shared
//! Key" says, and SAS tokens.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use async_trait::async_trait;
use azure_core::credentials::Secret;
use azure_core::error::{Error as CoreError, ErrorKind as CoreErrorKind};
use azure_core::http::headers::{HeaderName, Headers};
use azure_core::http::policies::{Policy, PolicyResult};
use azure_core::http::{Context, Request, Url};

use super::connection::SasToken;
use super::credential::TokenCache;

const MS_DATE: HeaderName = HeaderName::from_static("x-ms-date");
const MS_VERSION: HeaderName = HeaderName::from_static("x-ms-version");
const AUTHORIZATION: HeaderName = HeaderName::from_static("authorization");

/// The storage service a request goes to (the two sign differently).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Service {
    Blob,
    Table,
}

/// What a Shared Key signature covers of a request.
pub(crate) struct Signed<'a> {
    pub(crate) method: &'a str,
    pub(crate) url: &'a Url,
    pub(crate) headers: &'a Headers,
    /// The body's length (not among the headers when signing).
    pub(crate) content_length: u64,
}

impl Signed<'_> {
    fn header(&self, name: &'static str) -> &str {
        header_value(self.headers, name).unwrap_or_default()
    }

    /// The text a Shared Key signature for `account` signs.
    pub(crate) fn string_to_sign(&self, service: Service, account: &str) -> String {
        match service {
            Service::Table => {
                let date = match self.header("x-ms-date") {
                    "" => self.header("date"),
                    date => date,
                };
                let mut resource = format!("/{account}{}", self.url.path());
                if let Some((_, comp)) = self.url.query_pairs().find(|(k, _)| k == "comp") {
                    resource.push_str("?comp=");
                    resource.push_str(&comp);
                }
                [
                    self.method,
                    self.header("content-md5"),
                    self.header("content-type"),
                    date,
                    &resource,
                ]
                .join("\n")
            }
            Service::Blob => {
                let length = match self.content_length {
                    0 => String::new(),
                    n => n.to_string(),
                };
                let mut text = [
                    self.method,
                    self.header("content-encoding"),
                    self.header("content-language"),
                    &length,
                    self.header("content-md5"),
                    self.header("content-type"),
                    self.header("date"),
                    self.header("if-modified-since"),
                    self.header("if-match"),
                    self.header("if-none-match"),
                    self.header("if-unmodified-since"),
                    self.header("range"),
                ]
                .join("\n");
                text.push('\n');
                let mut ms: Vec<(&str, &str)> = self
                    .headers
                    .iter()
                    .filter(|(name, _)| name.as_str().starts_with("x-ms-"))
                    .map(|(name, value)| (name.as_str(), value.as_str()))
                    .collect();
                ms.sort_unstable();
                for (name, value) in ms {
                    let _ = writeln!(text, "{name}:{value}");
                }
                let _ = write!(text, "/{account}{}", self.url.path());
                // Each parameter once, its values sorted and joined by `,`.
                let mut params = BTreeMap::<String, Vec<String>>::new();
                for (name, value) in self.url.query_pairs() {
                    let values = params.entry(name.to_lowercase()).or_default();
                    values.push(value.into_owned());
                }
                for (name, mut values) in params {
                    values.sort_unstable();
                    let _ = write!(text, "\n{name}:{}", values.join(","));
                }
                text
            }
        }
    }
}

/// The value of header `name`. Not through the getters of `Headers`, which
/// build an error (with a backtrace) for every absent header.
pub(crate) fn header_value<'a>(headers: &'a Headers, name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.as_str() == name)
        .map(|(_, v)| v.as_str())
}

/// One of leasehold's pipeline policies. No `Debug` shows a secret.
#[derive(Clone, Debug)]
pub(crate) enum Stamp {
    /// `x-ms-date` (fresh on every try) and, unless set, `x-ms-version`.
    Headers { version: &'static str },
    /// A Shared Key signature.
    SharedKey {
        account: String,
        key: Secret,
        service: Service,
    },
    /// A SAS, appended to the query of every unsigned request.
    Sas(SasToken),
    /// `Authorization: Bearer {token}` from the token cache.
    Bearer(TokenCache),
}

pub(crate) fn shared_key(
    account: &str,
    key: &Secret,
    service: Service,
    signed: &Signed<'_>,
) -> azure_core::Result<String> {
    let text = signed.string_to_sign(service, account);
    let mac = azure_core::hmac::hmac_sha256(&text, key).map_err(|_| {
        // The key's own error could quote it: a message of our own.
        CoreError::with_message(CoreErrorKind::Credential, "the account key is not base64")
    })?;
    Ok(format!("SharedKey {account}:{mac}"))
}

#[async_trait]
impl Policy for Stamp {
    async fn send(
        &self,
        ctx: &Context,
        request: &mut Request,
        next: &[Arc<dyn Policy>],
    ) -> PolicyResult {
        match self {
            Stamp::Headers { version } => {
                // Refused before it is dated and signed (`crate::backend::deadline`).
                if crate::backend::deadline::check().is_err() {
                    return Err(CoreError::new(CoreErrorKind::Other, SendDeadlinePassed));
                }
                request.insert_header(MS_DATE, http_date(time::OffsetDateTime::now_utc()));
                if header_value(request.headers(), MS_VERSION.as_str()).is_none() {
                    request.insert_header(MS_VERSION, *version);
                }
            }
            Stamp::Bearer(cache) => {
                let token = cache.token().await?;
                request.insert_header(AUTHORIZATION, format!("Bearer {}", token.token.secret()));
            }
            // A URL that carries a signature already is not signed again.
            _ if request.url().query_pairs().any(|(k, _)| k == "sig") => {}
            Stamp::SharedKey {
                account,
                key,
                service,
            } => {
                let method = request.method();
                let authorization = shared_key(
                    account,
                    key,
                    *service,
                    &Signed {
                        method: method.as_str(),
                        url: request.url(),
                        headers: request.headers(),
                        content_length: request.body().len().unwrap_or(0),
                    },
                )?;
                request.insert_header(AUTHORIZATION, authorization);
            }
            Stamp::Sas(token) => {
                request
                    .url_mut()
                    .query_pairs_mut()
                    .extend_pairs(token.pairs().iter());
            }
        }
        match next.split_first() {
            Some((first, rest)) => first.send(ctx, request, rest).await,
            None => Err(CoreError::with_message(
                CoreErrorKind::Other,
                "a leasehold signing policy was the last of its pipeline",
            )),
        }
    }
}

/// The time as HTTP headers carry it (IMF-fixdate).
pub(crate) fn http_date(at: time::OffsetDateTime) -> String {
    const FORMAT: &[time::format_description::BorrowedFormatItem<'_>] = time::macros::format_description!(
        "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT"
    );
    at.to_offset(time::UtcOffset::UTC)
        .format(FORMAT)
        .unwrap_or_default()
}

/// A request not sent: its deadline to go out had passed.
#[derive(Debug, thiserror::Error)]
#[error("not sent: its deadline to go out had passed")]
pub(crate) struct SendDeadlinePassed;
