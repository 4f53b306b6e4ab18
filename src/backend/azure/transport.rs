//! The HTTP transport, the last policy of both pipelines (the stock logging
//! policy behind it, which logs URLs and headers behind an allow-list any
//! crate can switch off, never runs: this one logs method and path). A
//! failed request not sent is an error of kind `Connection` carrying a
//! [`TransportError`], one maybe applied of kind `Io`. Connections are
//! pooled on one `reqwest` client, idling less than the servers'
//! keep-alive; TLS is rustls with `ring`, configured here rather than
//! through a process-wide provider. Faults are injected by a policy in front.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use azure_core::error::ErrorKind;
use azure_core::http::headers::{HeaderName, HeaderValue, Headers};
use azure_core::http::policies::{Policy, PolicyResult};
use azure_core::http::{AsyncRawResponse, Body, Context, Request, StatusCode};
use futures_util::TryStreamExt as _;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// Below Node's default keep-alive (5 s, Azurite's) and far below Azure's.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(3);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A transport failure (texts without the URL).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct TransportError {
    /// Whether the request may have reached the service.
    pub(crate) maybe_sent: bool,
    pub(crate) message: String,
    #[source]
    pub(crate) cause: reqwest::Error,
}

impl TransportError {
    fn into_azure(self) -> azure_core::Error {
        let kind = if self.maybe_sent {
            ErrorKind::Io
        } else {
            ErrorKind::Connection
        };
        azure_core::Error::new(kind, self)
    }

    /// Only a failure to build the request or to connect (DNS, refused,
    /// TLS, connect timeout) left nothing behind; any other may have been
    /// applied.
    fn from_reqwest(e: reqwest::Error) -> Self {
        let maybe_sent = !(e.is_connect() || e.is_builder());
        let e = e.without_url();
        let mut message = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            message.push_str(": ");
            message.push_str(&s.to_string());
            source = s.source();
        }
        TransportError {
            maybe_sent,
            message,
            cause: e,
        }
    }
}

fn classify(e: reqwest::Error) -> azure_core::Error {
    if e.is_builder() {
        return unsendable(TransportError::from_reqwest(e).message);
    }
    TransportError::from_reqwest(e).into_azure()
}

/// A request the HTTP stack refused to build (such as a URL over 64 KiB):
/// not a [`TransportError`], so reported at once, never retried.
fn unsendable(message: String) -> azure_core::Error {
    azure_core::Error::with_message(ErrorKind::Other, format!("request not sent: {message}"))
}

/// A certificate authority trusted beside the system's roots.
#[derive(Debug, Clone)]
pub(crate) struct RootCertificate(CertificateDer<'static>);

impl RootCertificate {
    /// Every certificate of `pem`, checked as a trust anchor when given (not
    /// when the backend is built).
    pub(crate) fn parse_pem(pem: &[u8]) -> crate::Result<Vec<Self>> {
        let invalid = |why: &str| crate::Error::invalid("root certificate", why);
        let mut certificates = Vec::new();
        for certificate in CertificateDer::pem_slice_iter(pem) {
            let certificate = certificate.map_err(|_| invalid("is not a PEM certificate"))?;
            rustls::RootCertStore::empty()
                .add(certificate.clone())
                .map_err(|_| invalid("is not an X.509 certificate"))?;
            certificates.push(RootCertificate(certificate));
        }
        if certificates.is_empty() {
            return Err(invalid("holds no PEM certificate"));
        }
        Ok(certificates)
    }
}

/// rustls with `ring`, HTTP/1.1, the platform verifier with the system's
/// roots and `root_certificates`.
fn tls_config(
    root_certificates: &[RootCertificate],
) -> Result<rustls::ClientConfig, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let extra = root_certificates.iter().map(|c| c.0.clone());
    let verifier: Arc<dyn ServerCertVerifier> =
        match rustls_platform_verifier::Verifier::new_with_extra_roots(extra, provider.clone()) {
            Ok(verifier) => Arc::new(verifier),
            // No root at all: http endpoints still work, https ones fail
            // their handshake saying why.
            Err(e) => Arc::new(NoRoots {
                reason: match e {
                    rustls::Error::General(reason) => reason,
                    e => e.to_string(),
                },
                provider: provider.clone(),
            }),
        };
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Refuses every server certificate, naming the cause and the remedy.
#[derive(Debug)]
struct NoRoots {
    reason: String,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for NoRoots {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Err(rustls::Error::General(format!(
            "no certificate authority to check the server's certificate against ({}): \
             install the system's CA certificates, or give one with \
             AzureBackendBuilder::root_certificate_pem",
            self.reason
        )))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[derive(Debug)]
pub(crate) struct Transport {
    client: reqwest::Client,
}

impl Transport {
    pub(crate) fn new(root_certificates: &[RootCertificate]) -> crate::Result<Self> {
        let tls = tls_config(root_certificates)
            .map_err(|e| crate::Error::client(format!("cannot set up TLS: {e}")).with_source(e))?;
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .build()
            .map_err(|e| crate::Error::client("cannot build the HTTP client").with_source(e))?;
        Ok(Transport { client })
    }

    async fn execute(&self, request: &Request) -> azure_core::Result<AsyncRawResponse> {
        let method = request.method();
        let method = reqwest::Method::from_bytes(method.as_str().as_bytes())
            .map_err(|_| unsendable(format!("unsupported HTTP method {}", method.as_str())))?;
        let mut builder = self.client.request(method, request.url().clone());
        for (name, value) in request.headers().iter() {
            builder = builder.header(name.as_str(), value.as_str());
        }
        let builder = match request.body() {
            Body::Bytes(bytes) => builder.body(bytes.clone()),
            #[allow(unreachable_patterns)]
            _ => {
                return Err(unsendable(
                    "streamed request bodies are not supported".to_owned(),
                ));
            }
        };
        let response = builder.send().await.map_err(classify)?;

        let status = StatusCode::from(response.status().as_u16());
        let mut headers = Headers::new();
        for (name, value) in response.headers() {
            if let Ok(value) = value.to_str() {
                headers.insert(
                    HeaderName::from(name.as_str().to_ascii_lowercase()),
                    HeaderValue::from(value.to_owned()),
                );
            }
        }
        let body = response.bytes_stream().map_err(|e| {
            let e = TransportError::from_reqwest(e);
            TransportError {
                maybe_sent: true,
                message: format!("reply cut short: {}", e.message),
                cause: e.cause,
            }
            .into_azure()
        });
        Ok(AsyncRawResponse::new(status, headers, Box::pin(body)))
    }
}

#[async_trait]
impl Policy for Transport {
    async fn send(
        &self,
        _ctx: &Context,
        request: &mut Request,
        _next: &[Arc<dyn Policy>],
    ) -> PolicyResult {
        tracing::trace!(method = %request.method().as_str(), path = %request.url().path(), "sending");
        self.execute(request).await
    }
}
