//! Connection strings (no crate of the SDK line parses them), credentials
//! and endpoints. Secrets live only in `AccountKey` and `SasToken`, whose
//! `Debug` hides them; errors name the *part* that is wrong, not its value.

use std::fmt;
use std::sync::Arc;

use azure_core::credentials::TokenCredential;

use azure_core::http::Url;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};

use super::credential::credential_kind;
use crate::error::{Error, Result};

pub(crate) const EMULATOR_ACCOUNT: &str = "devstoreaccount1";

/// The storage emulator's publicly documented account key.
const EMULATOR_ACCOUNT_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

pub(crate) const EMULATOR_BLOB_ENDPOINT: &str = "http://127.0.0.1:10000/devstoreaccount1";
pub(crate) const EMULATOR_TABLE_ENDPOINT: &str = "http://127.0.0.1:10002/devstoreaccount1";

const DEFAULT_ENDPOINT_SUFFIX: &str = "core.windows.net";

const REDACTED: &str = "<redacted>";

/// A storage account key, never shown by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct AccountKey(String);

impl AccountKey {
    pub(crate) fn new(key: impl Into<String>) -> Result<Self> {
        let key = key.into();
        if key.is_empty() {
            return Err(Error::invalid("account key", "is empty"));
        }
        if BASE64.decode(key.as_bytes()).is_err() {
            return Err(Error::invalid("account key", "is not valid base64"));
        }
        Ok(AccountKey(key))
    }

    pub(crate) fn emulator() -> Self {
        AccountKey(EMULATOR_ACCOUNT_KEY.to_owned())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for AccountKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AccountKey({REDACTED})")
    }
}

/// A shared access signature (a SAS URL's query), its `sig` never shown by
/// `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct SasToken {
    pairs: Vec<(String, String)>,
}

impl SasToken {
    pub(crate) fn new(token: impl AsRef<str>) -> Result<Self> {
        let token = token.as_ref();
        let token = token.strip_prefix('?').unwrap_or(token);
        if token.is_empty() {
            return Err(Error::invalid("shared access signature", "is empty"));
        }
        let mut probe = Url::parse("http://sas.invalid/")
            .map_err(|_| Error::invalid("shared access signature", "cannot be parsed"))?;
        probe.set_query(Some(token));
        let pairs: Vec<(String, String)> = probe
            .query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        if !pairs.iter().any(|(k, v)| k == "sig" && !v.is_empty()) {
            return Err(Error::invalid(
                "shared access signature",
                "has no `sig` parameter",
            ));
        }
        if pairs.iter().any(|(k, _)| k.is_empty()) {
            return Err(Error::invalid(
                "shared access signature",
                "has a parameter without a name",
            ));
        }
        Ok(SasToken { pairs })
    }

    pub(crate) fn pairs(&self) -> &[(String, String)] {
        &self.pairs
    }

    pub(crate) fn signature(&self) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == "sig")
            .map(|(_, v)| v.as_str())
    }
}

impl fmt::Debug for SasToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SasToken(")?;
        for (i, (k, v)) in self.pairs.iter().enumerate() {
            let v = if k == "sig" { REDACTED } else { v };
            write!(f, "{}{k}={v}", if i == 0 { "" } else { "&" })?;
        }
        f.write_str(")")
    }
}

/// How requests are authorised (Entra ID tokens are asked for `audience`).
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) enum Credentials {
    AccessKey(AccountKey),
    Sas(SasToken),
    Token {
        credential: TokenSource,
        audience: String,
    },
}

/// A token credential: equal to its clones only; `Debug` shows its kind.
#[derive(Clone)]
pub(crate) struct TokenSource(pub(crate) Arc<dyn TokenCredential>);

impl PartialEq for TokenSource {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for TokenSource {}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&credential_kind(self.0.as_ref()))
    }
}

impl Credentials {
    /// The kind of credential, for errors.
    pub(crate) fn kind(&self) -> String {
        match self {
            Credentials::AccessKey(_) => "shared key".to_owned(),
            Credentials::Sas(_) => "SAS".to_owned(),
            Credentials::Token { credential, .. } => credential_kind(credential.0.as_ref()),
        }
    }

    /// The secrets to scrub from other crates' error text.
    pub(crate) fn secrets(&self) -> Vec<String> {
        match self {
            Credentials::AccessKey(key) => vec![key.expose().to_owned()],
            // The signature, also as a URL's query carries it.
            Credentials::Sas(token) => token.signature().map_or_else(Vec::new, |sig| {
                let encoded = utf8_percent_encode(sig, NON_ALPHANUMERIC).to_string();
                vec![sig.to_owned(), encoded]
            }),
            // Tokens change; they never reach text leasehold writes.
            Credentials::Token { .. } => Vec::new(),
        }
    }
}

/// Parses a service's base URL (host- or path-style), dropping a trailing
/// `/`. Errors name `what`, not the URL (a signature may be pasted in it).
pub(crate) fn parse_endpoint(what: &str, url: &str) -> Result<Url> {
    let bad = |why: &str| Error::invalid(format!("connection string part {what}"), why);
    let mut parsed = Url::parse(url.trim()).map_err(|_| bad("is not an absolute URL"))?;
    if parsed.scheme() != "http" && parsed.scheme() != "https" {
        return Err(bad("must be an http or https URL"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(bad("has no host"));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(bad(
            "must not carry a query or fragment (give a SAS as SharedAccessSignature)",
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad("must not carry user information"));
    }
    let trimmed = parsed.path().trim_end_matches('/').to_owned();
    parsed.set_path(if trimmed.is_empty() { "/" } else { &trimmed });
    Ok(parsed)
}

/// An endpoint without its trailing `/`.
pub(crate) fn base_uri(endpoint: &Url) -> String {
    endpoint.as_str().trim_end_matches('/').to_owned()
}

/// The account an endpoint names: a path-style (emulator) URL's first
/// segment, else the host's first label.
fn account_hint(endpoint: &Url) -> Option<String> {
    let path_account = endpoint
        .path_segments()
        .and_then(|mut s| s.next())
        .filter(|s| !s.is_empty());
    if let Some(seg) = path_account {
        return Some(seg.to_owned());
    }
    let host = endpoint.host_str()?;
    let is_ip = host.starts_with('[') || host.parse::<std::net::Ipv4Addr>().is_ok();
    (!is_ip && host != "localhost")
        .then(|| host.split('.').next().map(str::to_owned))
        .flatten()
}

/// Everything a connection string says: account, credentials and endpoints.
#[derive(Clone, PartialEq, Eq)]
pub struct ConnectionSettings {
    /// The storage account name.
    pub account: String,
    pub(crate) credentials: Credentials,
    /// The Table service endpoint, such as
    /// `http://127.0.0.1:10002/devstoreaccount1` (no trailing `/`).
    pub table_endpoint: Url,
    /// The Blob service endpoint.
    pub blob_endpoint: Url,
}

impl fmt::Debug for ConnectionSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionSettings")
            .field("account", &self.account)
            .field("credentials", &self.credentials)
            .field("table_endpoint", &self.table_endpoint.as_str())
            .field("blob_endpoint", &self.blob_endpoint.as_str())
            .finish()
    }
}

/// The parts leasehold uses, in the order `from_parts` takes them.
const PARTS: [&str; 9] = [
    "UseDevelopmentStorage",
    "DevelopmentStorageProxyUri",
    "DefaultEndpointsProtocol",
    "AccountName",
    "AccountKey",
    "SharedAccessSignature",
    "TableEndpoint",
    "BlobEndpoint",
    "EndpointSuffix",
];

const IGNORED_PARTS: [&str; 6] = [
    "QueueEndpoint",
    "FileEndpoint",
    "BlobSecondaryEndpoint",
    "TableSecondaryEndpoint",
    "QueueSecondaryEndpoint",
    "FileSecondaryEndpoint",
];

fn conn_err(why: impl Into<String>) -> Error {
    Error::invalid("connection string", why)
}

/// A part name safe to quote (anything else might be a mangled secret).
fn printable_part_name(name: &str) -> Option<&str> {
    (name.len() <= 40 && !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric()))
        .then_some(name)
}

impl ConnectionSettings {
    /// Parses an Azure Storage connection string: `UseDevelopmentStorage=true`
    /// (Azurite on its default ports), `DefaultEndpointsProtocol`,
    /// `AccountName`, `AccountKey`, `SharedAccessSignature`, `TableEndpoint`,
    /// `BlobEndpoint`, `EndpointSuffix` (names case-insensitive; queue, file
    /// and secondary endpoints are ignored).
    ///
    /// A string names **both endpoints or neither** (then both are
    /// `{protocol}://{account}.{table|blob}.{suffix}`, by default `https`
    /// and `core.windows.net`): a blob host derived beside a custom Table
    /// endpoint would fail only at the first lease, on a host nobody named.
    ///
    /// ```
    /// use leasehold::backend::azure::ConnectionSettings;
    /// let e = ConnectionSettings::parse(
    ///     "AccountName=devstoreaccount1;AccountKey=c2VjcmV0;\
    ///      TableEndpoint=http://127.0.0.1:10002/devstoreaccount1",
    /// )
    /// .unwrap_err();
    /// assert!(e.to_string().contains("no BlobEndpoint"), "{e}");
    /// ```
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the part that is missing, repeated, unknown
    /// or malformed; no value is quoted.
    pub fn parse(connection_string: &str) -> Result<Self> {
        let mut parts = [None; PARTS.len()];
        for (index, segment) in connection_string.split(';').enumerate() {
            let segment = segment.trim();
            if segment.is_empty() {
                continue;
            }
            let Some((name, value)) = segment.split_once('=') else {
                return Err(conn_err(format!(
                    "segment {} is not of the form Name=Value",
                    index + 1
                )));
            };
            let name = name.trim();
            let value = value.trim();
            let slot = match PARTS.iter().position(|p| p.eq_ignore_ascii_case(name)) {
                Some(i) => &mut parts[i],
                None if IGNORED_PARTS.iter().any(|p| p.eq_ignore_ascii_case(name)) => continue,
                None => {
                    return Err(conn_err(match printable_part_name(name) {
                        Some(name) => format!("unknown part `{name}`"),
                        None => format!("segment {} has an unknown part name", index + 1),
                    }));
                }
            };
            if slot.is_some() || value.is_empty() {
                let name = printable_part_name(name).unwrap_or("?");
                let why = match slot {
                    Some(_) => "appears more than once",
                    None => "is empty",
                };
                return Err(conn_err(format!("part `{name}` {why}")));
            }
            *slot = Some(value);
        }
        Self::from_parts(parts)
    }

    fn from_parts(parts: [Option<&str>; PARTS.len()]) -> Result<Self> {
        let [
            dev,
            proxy,
            protocol,
            account_name,
            key,
            sas,
            table,
            blob,
            suffix,
        ] = parts;
        if proxy.is_some() {
            return Err(conn_err("DevelopmentStorageProxyUri is not supported"));
        }
        if let Some(dev) = dev {
            if !dev.eq_ignore_ascii_case("true") {
                return Err(conn_err("UseDevelopmentStorage must be `true` when given"));
            }
            if let Some(name) = (2..PARTS.len())
                .find(|&i| parts[i].is_some())
                .map(|i| PARTS[i])
            {
                return Err(conn_err(format!(
                    "UseDevelopmentStorage=true cannot be combined with {name}; \
                     give explicit endpoints and the emulator account instead"
                )));
            }
            return Self::emulator();
        }

        let protocol = match protocol {
            None => "https",
            Some(v) if v.eq_ignore_ascii_case("https") => "https",
            Some(v) if v.eq_ignore_ascii_case("http") => "http",
            Some(_) => return Err(conn_err("DefaultEndpointsProtocol must be http or https")),
        };
        let suffix = suffix.unwrap_or(DEFAULT_ENDPOINT_SUFFIX);
        if suffix.starts_with('.') || suffix.contains(['/', ':', '?', '#', '@']) {
            return Err(conn_err(
                "EndpointSuffix must be a bare domain such as core.windows.net",
            ));
        }
        if let Some(account) = account_name {
            account_name_check(account)?;
        }

        let (table_endpoint, blob_endpoint) = endpoints(
            "connection string",
            [table, blob],
            account_name.map(|account| (protocol, account, suffix)),
        )?;

        let account = match account_name {
            Some(a) => a.to_owned(),
            None => account_hint(&table_endpoint)
                .or_else(|| account_hint(&blob_endpoint))
                .ok_or_else(|| conn_err("has no AccountName"))?,
        };

        let credentials = match (key, sas) {
            (Some(_), Some(_)) => {
                return Err(conn_err(
                    "has both AccountKey and SharedAccessSignature; give one",
                ));
            }
            (Some(key), None) => {
                if account_name.is_none() {
                    return Err(conn_err("AccountKey needs AccountName"));
                }
                Credentials::AccessKey(
                    AccountKey::new(key).map_err(|_| conn_err("AccountKey is not valid base64"))?,
                )
            }
            (None, Some(sas)) => Credentials::Sas(SasToken::new(sas).map_err(|e| match e {
                Error::Invalid { why, .. } => conn_err(format!("SharedAccessSignature {why}")),
                other => other,
            })?),
            (None, None) => {
                return Err(conn_err(
                    "has neither AccountKey nor SharedAccessSignature (anonymous access is not supported)",
                ));
            }
        };

        Ok(ConnectionSettings {
            account,
            credentials,
            table_endpoint,
            blob_endpoint,
        })
    }

    /// Azurite on its default ports with the well-known account and key
    /// (`UseDevelopmentStorage=true`). Never fails in practice: the
    /// endpoints are constants that parse.
    pub fn emulator() -> Result<Self> {
        Ok(ConnectionSettings {
            account: EMULATOR_ACCOUNT.to_owned(),
            credentials: Credentials::AccessKey(AccountKey::emulator()),
            table_endpoint: parse_endpoint("TableEndpoint", EMULATOR_TABLE_ENDPOINT)?,
            blob_endpoint: parse_endpoint("BlobEndpoint", EMULATOR_BLOB_ENDPOINT)?,
        })
    }
}

/// The Table and Blob endpoints: both given, or both derived (see
/// [`ConnectionSettings::parse`]); `subject` names the input in errors.
pub(crate) fn endpoints(
    subject: &str,
    [table, blob]: [Option<&str>; 2],
    derive_from: Option<(&str, &str, &str)>,
) -> Result<(Url, Url)> {
    let one_sided = |given: &str, missing: &str| {
        Error::invalid(
            subject,
            format!(
                "has {given} but no {missing}; leasehold uses both the Table and the Blob \
                 service, so give {missing} too (or neither, to derive both from the account)"
            ),
        )
    };
    match (table, blob) {
        (Some(_), None) => return Err(one_sided("TableEndpoint", "BlobEndpoint")),
        (None, Some(_)) => return Err(one_sided("BlobEndpoint", "TableEndpoint")),
        _ => {}
    }
    let endpoint = |what: &str, explicit: Option<&str>, service: &str| match (explicit, derive_from)
    {
        (Some(url), _) => parse_endpoint(what, url),
        (None, Some((protocol, account, suffix))) => {
            parse_endpoint(what, &format!("{protocol}://{account}.{service}.{suffix}"))
        }
        (None, None) => Err(conn_err(format!(
            "has neither {what} nor AccountName to build it from"
        ))),
    };
    Ok((
        endpoint("TableEndpoint", table, "table")?,
        endpoint("BlobEndpoint", blob, "blob")?,
    ))
}

pub(crate) fn account_name_check(account: &str) -> Result<()> {
    let allowed = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !(3..=24).contains(&account.len()) || !account.bytes().all(allowed) {
        return Err(conn_err(
            "AccountName must be 3 to 24 lowercase letters and digits",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "c2VjcmV0LWtleS1tYXRlcmlhbC10aGF0LW11c3Qtbm90LWxlYWs=";
    const SIG: &str = "SuperSecretSignatureValue0123456789abcdef";

    fn sas() -> String {
        format!("sv=2022-11-02&ss=bt&srt=sco&sp=rwdlacu&se=2030-01-01T00:00:00Z&sig={SIG}")
    }

    #[test]
    fn development_storage_means_azurite_default_ports() {
        let s = ConnectionSettings::parse("UseDevelopmentStorage=true").unwrap();
        assert_eq!(s.account, EMULATOR_ACCOUNT);
        assert_eq!(s.table_endpoint.as_str(), EMULATOR_TABLE_ENDPOINT);
        assert_eq!(s.blob_endpoint.as_str(), EMULATOR_BLOB_ENDPOINT);
        assert!(matches!(s.credentials, Credentials::AccessKey(_)));
        let s = ConnectionSettings::parse("usedevelopmentstorage=TRUE;").unwrap();
        assert_eq!(s, ConnectionSettings::emulator().unwrap());
        let e = ConnectionSettings::parse("UseDevelopmentStorage=false").unwrap_err();
        assert!(e.to_string().contains("UseDevelopmentStorage"), "{e}");
        let e = ConnectionSettings::parse(
            "UseDevelopmentStorage=true;DevelopmentStorageProxyUri=http://p",
        )
        .unwrap_err();
        assert!(e.to_string().contains("DevelopmentStorageProxyUri"), "{e}");
    }

    #[test]
    fn account_and_key_build_public_endpoints() {
        let s = ConnectionSettings::parse(&format!(
            "DefaultEndpointsProtocol=https;AccountName=myacct;AccountKey={KEY};EndpointSuffix=core.windows.net"
        ))
        .unwrap();
        assert_eq!(s.account, "myacct");
        assert_eq!(
            s.table_endpoint.as_str(),
            "https://myacct.table.core.windows.net/"
        );
        assert_eq!(
            base_uri(&s.blob_endpoint),
            "https://myacct.blob.core.windows.net"
        );
        let s = ConnectionSettings::parse(&format!(
            "DefaultEndpointsProtocol=http;AccountName=myacct;AccountKey={KEY};EndpointSuffix=core.chinacloudapi.cn"
        ))
        .unwrap();
        assert_eq!(
            base_uri(&s.table_endpoint),
            "http://myacct.table.core.chinacloudapi.cn"
        );
    }

    #[test]
    fn custom_endpoints_are_path_style_and_trimmed() {
        let s = ConnectionSettings::parse(&format!(
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={KEY};\
             BlobEndpoint=http://127.0.0.1:41000/devstoreaccount1/;TableEndpoint=http://127.0.0.1:41002/devstoreaccount1;"
        ))
        .unwrap();
        assert_eq!(
            base_uri(&s.blob_endpoint),
            "http://127.0.0.1:41000/devstoreaccount1"
        );
        assert_eq!(
            base_uri(&s.table_endpoint),
            "http://127.0.0.1:41002/devstoreaccount1"
        );
    }

    #[test]
    fn one_endpoint_without_the_other_is_refused_naming_the_missing_one() {
        let cases = [
            (
                format!(
                    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={KEY};\
                     TableEndpoint=http://127.0.0.1:41002/devstoreaccount1"
                ),
                "has TableEndpoint but no BlobEndpoint",
            ),
            (
                format!(
                    "AccountName=myacct;AccountKey={KEY};EndpointSuffix=core.windows.net;\
                     TableEndpoint=https://myacct.table.core.windows.net"
                ),
                "has TableEndpoint but no BlobEndpoint",
            ),
            (
                format!(
                    "AccountName=myacct;AccountKey={KEY};\
                     BlobEndpoint=https://myacct.blob.core.windows.net"
                ),
                "has BlobEndpoint but no TableEndpoint",
            ),
            (
                format!(
                    "TableEndpoint=https://acct1.table.core.windows.net;SharedAccessSignature={}",
                    sas()
                ),
                "has TableEndpoint but no BlobEndpoint",
            ),
            (
                format!(
                    "blobendpoint=http://127.0.0.1:1/devstoreaccount1;SharedAccessSignature={}",
                    sas()
                ),
                "has BlobEndpoint but no TableEndpoint",
            ),
        ];
        for (conn, expected) in cases {
            let e = ConnectionSettings::parse(&conn).unwrap_err();
            assert!(matches!(e, Error::Invalid { .. }), "{conn}: {e:?}");
            let text = format!("{e} {e:?}");
            assert!(text.contains(expected), "{conn}: {text}");
            assert!(!text.contains(KEY), "{text}");
            assert!(!text.contains(SIG), "{text}");
            // Nothing derived is named: no host the user did not write.
            assert!(!text.contains(".blob."), "{text}");
        }
    }

    #[test]
    fn both_endpoints_or_neither_are_accepted() {
        let neither = ConnectionSettings::parse(&format!(
            "DefaultEndpointsProtocol=https;AccountName=myacct;AccountKey={KEY};EndpointSuffix=core.windows.net"
        ))
        .unwrap();
        assert_eq!(
            base_uri(&neither.blob_endpoint),
            "https://myacct.blob.core.windows.net"
        );
        let both = ConnectionSettings::parse(&format!(
            "AccountName=myacct;AccountKey={KEY};EndpointSuffix=core.windows.net;\
             TableEndpoint=https://t.example.net;BlobEndpoint=https://b.example.net/acct"
        ))
        .unwrap();
        assert_eq!(base_uri(&both.table_endpoint), "https://t.example.net");
        assert_eq!(base_uri(&both.blob_endpoint), "https://b.example.net/acct");
    }

    #[test]
    fn sas_with_endpoints_derives_the_account() {
        let s = ConnectionSettings::parse(&format!(
            "BlobEndpoint=https://acct1.blob.core.windows.net;TableEndpoint=https://acct1.table.core.windows.net;SharedAccessSignature={}",
            sas()
        ))
        .unwrap();
        assert_eq!(s.account, "acct1");
        assert!(matches!(s.credentials, Credentials::Sas(_)));
        let s = ConnectionSettings::parse(&format!(
            "BlobEndpoint=http://127.0.0.1:1/devstoreaccount1;TableEndpoint=http://127.0.0.1:2/devstoreaccount1;SharedAccessSignature=?{}",
            sas()
        ))
        .unwrap();
        assert_eq!(s.account, "devstoreaccount1");
    }

    #[test]
    fn malformed_strings_name_the_part() {
        let cases: Vec<(String, &str)> = vec![
            (
                "AccountName=myacct".into(),
                "neither AccountKey nor SharedAccessSignature",
            ),
            (format!("AccountKey={KEY}"), "TableEndpoint"),
            (
                format!("AccountName=myacct;AccountKey={KEY};AccountName=x"),
                "`AccountName` appears more than once",
            ),
            (
                format!("AccountName=myacct;AccountKey={KEY};Bogus=1"),
                "unknown part `Bogus`",
            ),
            (
                format!("AccountName=myacct;AccountKey={KEY};DefaultEndpointsProtocol=ftp"),
                "DefaultEndpointsProtocol",
            ),
            (
                format!(
                    "AccountName=myacct;AccountKey={KEY};TableEndpoint=not a url;BlobEndpoint=http://b/"
                ),
                "TableEndpoint: is not an absolute URL",
            ),
            (
                format!(
                    "AccountName=myacct;AccountKey={KEY};BlobEndpoint=ftp://x/;TableEndpoint=http://t/"
                ),
                "BlobEndpoint: must be an http or https URL",
            ),
            (
                "AccountName=myacct;AccountKey=***not base64***".into(),
                "AccountKey is not valid base64",
            ),
            (
                format!(
                    "AccountName=myacct;AccountKey={KEY};SharedAccessSignature={}",
                    sas()
                ),
                "both AccountKey and SharedAccessSignature",
            ),
            (
                "AccountName=myacct;SharedAccessSignature=sv=1&sp=r".into(),
                "SharedAccessSignature has no `sig`",
            ),
            (
                "AccountName=My_Acct;SharedAccessSignature=sig=x".into(),
                "AccountName",
            ),
            ("AccountName=myacct;garbage".into(), "segment 2"),
            (
                "AccountName=myacct;AccountKey=".into(),
                "`AccountKey` is empty",
            ),
            (
                format!("AccountName=myacct;AccountKey={KEY};EndpointSuffix=.bad/x"),
                "EndpointSuffix",
            ),
            (
                format!("UseDevelopmentStorage=true;AccountKey={KEY}"),
                "cannot be combined with AccountKey",
            ),
        ];
        for (s, expected) in cases {
            let e = ConnectionSettings::parse(&s).unwrap_err();
            assert!(matches!(e, Error::Invalid { .. }), "{s}: {e:?}");
            let text = format!("{e} {e:?}");
            assert!(text.contains(expected), "{s}: {text}");
            assert!(!text.contains(KEY), "{text}");
        }
    }

    #[test]
    fn secrets_never_show_in_debug_display_or_errors() {
        let conn = format!(
            "DefaultEndpointsProtocol=https;AccountName=myacct;AccountKey={KEY};EndpointSuffix=core.windows.net"
        );
        let s = ConnectionSettings::parse(&conn).unwrap();
        let Credentials::AccessKey(key) = &s.credentials else {
            panic!("expected an access key");
        };
        for text in [
            format!("{s:?}"),
            format!("{s:#?}"),
            format!("{:?}", s.credentials),
            format!("{key:?}"),
        ] {
            assert!(!text.contains(KEY), "{text}");
            assert!(!text.contains(&KEY[..20]), "{text}");
        }

        let conn = format!(
            "BlobEndpoint=https://acct1.blob.core.windows.net;TableEndpoint=https://acct1.table.core.windows.net;SharedAccessSignature={}",
            sas()
        );
        let s = ConnectionSettings::parse(&conn).unwrap();
        let Credentials::Sas(token) = &s.credentials else {
            panic!("expected a SAS");
        };
        for text in [
            format!("{s:?}"),
            format!("{:?}", s.credentials),
            format!("{token:?}"),
        ] {
            assert!(!text.contains(SIG), "{text}");
            assert!(text.contains("sig=<redacted>"), "{text}");
        }

        // Malformed strings that carry secrets: the error quotes neither.
        for bad in [
            format!("AccountName=myacct;AccountKey={KEY};Extra{KEY}"),
            format!("AccountName=myacct;AccountKey={KEY};AccountKey={KEY}"),
            format!(
                "AccountName=myacct;AccountKey={KEY};SharedAccessSignature={}",
                sas()
            ),
            format!("AccountName=myacct;AccountKey={KEY}!"),
            format!("AccountName=myacct;SharedAccessSignature={SIG}"),
            format!(
                "AccountName=myacct;AccountKey={KEY};TableEndpoint=https://x/?sig={SIG};BlobEndpoint=https://y/"
            ),
            format!("{KEY}=x;AccountName=myacct"),
            format!("AccountName=myacct;{SIG}"),
        ] {
            let e = ConnectionSettings::parse(&bad).unwrap_err();
            let text = format!("{e} {e:?}");
            assert!(!text.contains(KEY), "{text}");
            assert!(!text.contains(SIG), "{text}");
        }
    }

    #[test]
    fn secret_list_includes_url_encoded_signature() {
        let token = SasToken::new("sv=1&sig=a%2Bb%3D").unwrap();
        let secrets = Credentials::Sas(token).secrets();
        assert!(secrets.contains(&"a+b=".to_owned()));
        assert!(secrets.contains(&"a%2Bb%3D".to_owned()));
    }
}
