//! From `azure_core` errors to leasehold's: a failed attempt is a
//! [`Failure`] for the retry loop, then an [`Error`] ([`Error::from_service`]:
//! by code, then status). Text from other crates can quote a URL (and a SAS
//! signature): it passes through a [`Redactor`] first.

use std::fmt;

use azure_core::error::ErrorKind;
use azure_core::http::headers::Headers;
use serde_json::Value as Json;

use crate::error::Error;

use super::credential::CredentialFailure;
use super::transport::TransportError;

/// Scrubs known secrets from foreign text; names the credential for
/// `Error::Auth`.
#[derive(Clone, Default)]
pub(crate) struct Redactor {
    secrets: Vec<String>,
    credential: String,
}

impl Redactor {
    pub(crate) fn new(secrets: Vec<String>, credential: String) -> Self {
        Redactor {
            secrets: secrets.into_iter().filter(|s| s.len() >= 4).collect(),
            credential,
        }
    }

    /// `text` with every known secret, and any `sig=` query value, replaced.
    pub(crate) fn scrub(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), "<redacted>");
            }
        }
        scrub_sig_params(&out)
    }
}

/// Replaces the value of every `sig=` parameter in `text`.
fn scrub_sig_params(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("sig=") {
        let starts_param = at == 0 || matches!(rest.as_bytes()[at - 1], b'?' | b'&' | b';' | b' ');
        out.push_str(&rest[..at + 4]);
        rest = &rest[at + 4..];
        if starts_param {
            let end = rest
                .find(|c: char| c == '&' || c == ';' || c.is_whitespace() || c == '"' || c == '\'')
                .unwrap_or(rest.len());
            if end > 0 {
                out.push_str("<redacted>");
            }
            rest = &rest[end..];
        }
    }
    out.push_str(rest);
    out
}

/// A foreign error's chain, each level's text scrubbed (also a request's
/// fate, such as "no reply", with the failure beneath).
#[derive(Debug, thiserror::Error)]
#[error("{text}")]
pub(crate) struct Scrubbed {
    text: String,
    #[source]
    next: Option<Box<Scrubbed>>,
}

impl Scrubbed {
    pub(crate) fn chain(e: &(dyn std::error::Error + 'static), redactor: &Redactor) -> Self {
        let next = e.source().map(|next| Scrubbed::chain(next, redactor));
        Scrubbed::new(redactor.scrub(&e.to_string()), next)
    }

    pub(crate) fn new(text: String, next: Option<Scrubbed>) -> Self {
        Scrubbed {
            text,
            next: next.map(Box::new),
        }
    }
}

#[cfg(test)]
impl From<&str> for Scrubbed {
    fn from(text: &str) -> Self {
        Scrubbed::new(text.to_owned(), None)
    }
}

/// A success reply without what it must carry.
pub(super) fn bad_reply(status: u16, message: String) -> Failure {
    Failure::Fatal(Error::Backend {
        status: Some(status),
        code: None,
        message,
        source: None,
    })
}

/// A reply body that is not what the service sends.
pub(super) fn undecodable(what: impl fmt::Display, e: &serde_json::Error) -> Failure {
    Failure::Fatal(Error::client(format!("the {what} cannot be read: {e}")))
}

/// How one request attempt failed (its text is for logs).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Failure {
    /// The service answered with an error status and code.
    #[error("status {status}{}", .code.as_ref().map_or(String::new(), |c| format!(" ({c})")))]
    Status { status: u16, code: Option<String> },
    /// The request certainly did not reach the service.
    #[error("not sent: {0}")]
    NotSent(Scrubbed),
    /// No complete reply came back: it may have been applied.
    #[error("no reply: {0}")]
    ReplyLost(Scrubbed),
    /// Not a service or transport failure; never retried.
    #[error(transparent)]
    Fatal(#[from] Error),
}

impl Failure {
    /// The service's error reply; 401 and 403 are [`Error::Auth`].
    pub(crate) fn from_reply(
        status: u16,
        headers: &Headers,
        body: &[u8],
        redactor: &Redactor,
    ) -> Self {
        let code = error_code(super::auth::header_value(headers, "x-ms-error-code"), body);
        if status == 401 || status == 403 {
            return Failure::Fatal(Error::Auth {
                credential: redactor.credential.clone(),
                status: Some(status),
                code,
                message: format!("the service refused the request's credentials (HTTP {status})"),
                source: None,
            });
        }
        Failure::Status { status, code }
    }

    /// Classifies an `azure_core` error, scrubbing its text.
    pub(crate) fn from_azure(e: azure_core::Error, redactor: &Redactor) -> Self {
        if let ErrorKind::HttpResponse {
            status,
            raw_response,
            ..
        } = e.kind()
        {
            // Not the error's `error_code`: without `x-ms-error-code` and
            // with a JSON body it is the status number.
            let status = u16::from(*status);
            return match raw_response {
                Some(r) => Failure::from_reply(status, r.headers(), r.body().as_ref(), redactor),
                None => Failure::from_reply(status, &Headers::new(), &[], redactor),
            };
        }
        if e.downcast_ref::<super::auth::SendDeadlinePassed>()
            .is_some()
        {
            return Failure::Fatal(crate::backend::deadline::passed());
        }
        if let Some(failure) = credential_failure(&e) {
            return Failure::Fatal(Error::Auth {
                credential: failure.kind.clone(),
                status: None,
                code: None,
                message: "no token could be had".to_owned(),
                source: Some(Box::new(Scrubbed::chain(&failure.source, redactor))),
            });
        }
        let scrubbed = |e: &(dyn std::error::Error + 'static)| Scrubbed::chain(e, redactor);
        if let Some(t) = e.downcast_ref::<TransportError>() {
            let why = Scrubbed::new(redactor.scrub(&t.message), Some(scrubbed(&t.cause)));
            return if t.maybe_sent {
                Failure::ReplyLost(why)
            } else {
                Failure::NotSent(why)
            };
        }
        let kind = e.kind().clone();
        let message = redactor.scrub(&e.to_string());
        let inner = e.get_ref().map(|inner| scrubbed(inner));
        match kind {
            // A pipeline policy's refused connection (such as an injected
            // fault): certainly not sent.
            ErrorKind::Connection => Failure::NotSent(Scrubbed::new(message, inner)),
            ErrorKind::Io if connection_refused(&e) => {
                Failure::NotSent(Scrubbed::new(message, inner))
            }
            // Reading a reply body failed after the status arrived, or a
            // pipeline policy lost the reply.
            ErrorKind::Io => Failure::ReplyLost(Scrubbed::new(message, inner)),
            _ => Failure::Fatal(
                Error::client(format!("unexpected reply or client error: {message}"))
                    .with_source(scrubbed(&e)),
            ),
        }
    }

    pub(crate) fn status(&self) -> Option<(u16, Option<&str>)> {
        match self {
            Failure::Status { status, code } => Some((*status, code.as_deref())),
            _ => None,
        }
    }

    /// Whether retrying may help: 408, 429, 5xx, or no reply at all.
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            Failure::Status { status, .. } => is_transient_status(*status),
            Failure::NotSent(_) | Failure::ReplyLost(_) => true,
            Failure::Fatal(_) => false,
        }
    }

    /// Whether the request may have been applied although it failed.
    pub(crate) fn may_have_applied(&self) -> bool {
        match self {
            Failure::ReplyLost(_) => true,
            Failure::Status { status, .. } => *status == 408 || (*status >= 500 && *status != 503),
            Failure::NotSent(_) | Failure::Fatal(_) => false,
        }
    }

    /// The public error for this failure of the operation on `what`.
    pub(crate) fn into_error(self, what: impl Into<String>) -> Error {
        let what = what.into();
        match self {
            Failure::Status { status, code } => Error::from_service(status, code.as_deref(), what),
            Failure::NotSent(m) => with_cause(
                Error::transient(format!("{what}: request not sent: {m}")),
                m,
            ),
            Failure::ReplyLost(m) => {
                with_cause(Error::transient(format!("{what}: no reply: {m}")), m)
            }
            Failure::Fatal(e) => e,
        }
    }
}

/// `error` with the failure beneath `why` as its source.
fn with_cause(error: Error, why: Scrubbed) -> Error {
    match why.next {
        Some(cause) => error.with_source(*cause),
        None => error,
    }
}

/// The credential failure `e` carries (maybe under a policy's context).
fn credential_failure(e: &azure_core::Error) -> Option<&CredentialFailure> {
    let first: &(dyn std::error::Error + 'static) = e;
    std::iter::successors(Some(first), |s| s.source()).find_map(|s| {
        (s.downcast_ref::<CredentialFailure>())
            .or_else(|| s.downcast_ref::<azure_core::Error>()?.downcast_ref())
    })
}

/// The `x-ms-error-code` header, else the body's code (JSON or XML).
pub(crate) fn error_code(header: Option<&str>, body: &[u8]) -> Option<String> {
    if let Some(code) = header
        && !code.is_empty()
    {
        return Some(code.to_owned());
    }
    let text = std::str::from_utf8(body).ok()?.trim();
    if let Ok(json) = serde_json::from_str::<Json>(text) {
        let code = ["odata.error", "error", "Error"]
            .iter()
            .find_map(|k| json.get(k))
            .and_then(|e| e.get("code").or_else(|| e.get("Code")))
            .or_else(|| json.get("code").or_else(|| json.get("Code")));
        return code.and_then(Json::as_str).map(str::to_owned);
    }
    let start = text.find("<Code>")? + "<Code>".len();
    let end = text[start..].find("</Code>")?;
    Some(text[start..start + end].trim().to_owned()).filter(|c| !c.is_empty())
}

fn connection_refused(e: &azure_core::Error) -> bool {
    e.downcast_ref::<std::io::Error>()
        .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
}

pub(crate) fn is_transient_status(status: u16) -> bool {
    status == 408 || status == 429 || (500..=599).contains(&status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::azure::transport::Transport;
    use azure_core::http::policies::Policy as _;
    use azure_core::http::{Context, Method, Request, Url};

    // How the transport's failures are classified.

    async fn failure_of(url: &str) -> Failure {
        let transport = Transport::new(&[]).unwrap();
        let mut request = Request::new(Url::parse(url).unwrap(), Method::Get);
        let e = transport
            .send(&Context::new(), &mut request, &[])
            .await
            .unwrap_err();
        Failure::from_azure(e, &Redactor::default())
    }

    /// A URL the HTTP stack cannot carry (over 64 KiB) is refused before a
    /// connection is made: the request was never sent, so no reply was lost,
    /// and sending it again would fail the same way.
    #[tokio::test]
    async fn a_request_that_cannot_be_built_is_neither_sent_nor_retried() {
        // Nothing listens there; the failure must come before connecting.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let url = format!("http://127.0.0.1:{port}/T()?$filter={}", "a".repeat(70_000));
        let f = failure_of(&url).await;
        assert!(!f.is_transient(), "{f}");
        assert!(!f.may_have_applied(), "{f}");
        assert!(f.to_string().contains("request not sent"), "{f}");
        assert!(
            !f.to_string().contains("aaaa"),
            "the URL stays out of errors"
        );
    }

    /// A refused connection: not sent, worth retrying, cannot have applied.
    #[tokio::test]
    async fn a_refused_connection_is_not_sent_and_retried() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let f = failure_of(&format!("http://127.0.0.1:{port}/T()")).await;
        assert!(matches!(f, Failure::NotSent(_)), "{f}");
        assert!(f.is_transient() && !f.may_have_applied());
        // The public error keeps the connection error as its source chain,
        // and no status (no reply came).
        let e = f.into_error("get x");
        assert!(
            matches!(e, crate::Error::Transient { status: None, .. }),
            "{e:?}"
        );
        let mut chain = Vec::new();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            chain.push(s.to_string());
            source = s.source();
        }
        assert!(
            chain
                .last()
                .is_some_and(|s| s.to_lowercase().contains("refused")),
            "{chain:?}"
        );
    }

    /// A connection that breaks after the request went out may have applied
    /// it.
    #[tokio::test]
    async fn a_connection_closed_after_sending_may_have_applied() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            use tokio::io::AsyncReadExt as _;
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            // Read the request, then hang up without answering.
            let _ = socket.read(&mut buf).await;
        });
        let f = failure_of(&format!("http://127.0.0.1:{port}/T()")).await;
        server.await.unwrap();
        assert!(matches!(f, Failure::ReplyLost(_)), "{f}");
        assert!(f.is_transient() && f.may_have_applied());
    }

    // Failures and their classification.

    #[test]
    fn redactor_scrubs_secrets_and_sig_params() {
        let r = Redactor::new(vec!["topsecretkey".into()], String::new());
        assert_eq!(
            r.scrub("key topsecretkey in text"),
            "key <redacted> in text"
        );
        assert_eq!(
            r.scrub("http://h/p?sv=1&sig=abc%2Bdef&se=2"),
            "http://h/p?sv=1&sig=<redacted>&se=2"
        );
        assert_eq!(r.scrub("sig=xyz"), "sig=<redacted>");
        assert_eq!(r.scrub("design=ok"), "design=ok");
    }

    #[test]
    fn foreign_error_chains_are_scrubbed_level_by_level() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl fmt::Display for Outer {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("request to http://h/c?sv=1&sig=abc failed")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let r = Redactor::new(vec!["topsecretkey".into()], String::new());
        let e = Outer(std::io::Error::other("key topsecretkey refused"));
        let s = Scrubbed::chain(&e, &r);
        assert_eq!(
            s.to_string(),
            "request to http://h/c?sv=1&sig=<redacted> failed"
        );
        let inner = std::error::Error::source(&s).map(ToString::to_string);
        assert_eq!(inner.as_deref(), Some("key <redacted> refused"));
    }

    #[test]
    fn error_codes_come_from_the_header_then_the_body() {
        let mut headers = Headers::new();
        let table = br#"{"odata.error":{"code":"EntityAlreadyExists","message":{"value":"x"}}}"#;
        let blob = b"<?xml version=\"1.0\"?><Error><Code>LeaseIdMissing</Code><Message>m</Message></Error>";
        assert_eq!(
            error_code(None, table).as_deref(),
            Some("EntityAlreadyExists")
        );
        assert_eq!(error_code(None, blob).as_deref(), Some("LeaseIdMissing"));
        assert_eq!(error_code(None, b"").as_deref(), None);
        assert_eq!(error_code(None, b"{}").as_deref(), None);
        headers.insert("x-ms-error-code", "ConditionNotMet");
        assert_eq!(
            error_code(Some("ConditionNotMet"), table).as_deref(),
            Some("ConditionNotMet")
        );
        let f = Failure::from_reply(412, &headers, b"", &Redactor::default());
        assert_eq!(f.status(), Some((412, Some("ConditionNotMet"))));
        let f = Failure::from_reply(403, &headers, b"", &Redactor::default());
        assert!(matches!(
            f,
            Failure::Fatal(Error::Auth {
                status: Some(403),
                ..
            })
        ));
    }

    #[test]
    fn classification_of_failures() {
        let lost = Failure::ReplyLost("x".into());
        assert!(lost.is_transient() && lost.may_have_applied());
        let refused = Failure::NotSent("x".into());
        assert!(refused.is_transient() && !refused.may_have_applied());
        let busy = Failure::Status {
            status: 503,
            code: Some("ServerBusy".into()),
        };
        assert!(busy.is_transient() && !busy.may_have_applied());
        let internal = Failure::Status {
            status: 500,
            code: None,
        };
        assert!(internal.is_transient() && internal.may_have_applied());
        for status in [409, 412, 404, 400] {
            let f = Failure::Status { status, code: None };
            assert!(!f.is_transient() && !f.may_have_applied());
        }
        let e = Failure::NotSent("refused".into()).into_error("get x");
        assert!(e.is_transient());
    }
}
