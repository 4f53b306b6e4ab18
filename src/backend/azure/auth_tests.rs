//! Checks of the signing policies (`auth.rs`): the text signed for each
//! service, by the rules and on the REST reference's worked examples; SAS
//! appended once; no secret in `Debug`. Azurite checks every signature
//! again in the conformance suite (a wrong one is a 403).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use azure_core::credentials::Secret;
use azure_core::http::headers::{HeaderName, HeaderValue, Headers};
use azure_core::http::policies::{Policy, PolicyResult};
use azure_core::http::{AsyncRawResponse, Context, Method, Request, StatusCode, Url};

use super::auth::{Service, Signed, Stamp, http_date, shared_key};
use super::connection::SasToken;

fn signer(key: &str, service: Service) -> Stamp {
    Stamp::SharedKey {
        account: ACCOUNT.to_owned(),
        key: Secret::new(key.to_owned()),
        service,
    }
}

/// The emulator's well-known account and key.
const ACCOUNT: &str = "devstoreaccount1";
const KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IDunNVvpyBq9p1YqEqIpU8XrVpL6U8Ibkt38XfFu5Q==";
const DATE: &str = "Fri, 27 Nov 2026 10:00:00 GMT";

fn headers(pairs: &[(&str, &str)]) -> Headers {
    let mut h = Headers::new();
    for (k, v) in pairs {
        h.insert(
            HeaderName::from((*k).to_owned()),
            HeaderValue::from((*v).to_owned()),
        );
    }
    h
}

#[test]
fn the_table_text_is_verb_md5_type_date_and_resource() {
    let url = Url::parse(
        "http://127.0.0.1:10002/devstoreaccount1/Accounts(PartitionKey='a',RowKey='b')?$select=n",
    )
    .unwrap();
    let h = headers(&[
        ("content-type", "application/json"),
        ("x-ms-date", DATE),
        ("x-ms-version", "2022-11-02"),
        ("if-match", "*"),
    ]);
    let signed = Signed {
        method: "PUT",
        url: &url,
        headers: &h,
        content_length: 12,
    };
    assert_eq!(
        signed.string_to_sign(Service::Table, ACCOUNT),
        format!(
            "PUT\n\napplication/json\n{DATE}\n/devstoreaccount1/devstoreaccount1/Accounts(PartitionKey='a',RowKey='b')"
        )
    );
    // `comp` is part of a Table resource; other parameters are not.
    let url =
        Url::parse("https://acct.table.core.windows.net/?restype=service&comp=properties").unwrap();
    let h = headers(&[("date", DATE)]);
    let signed = Signed {
        method: "GET",
        url: &url,
        headers: &h,
        content_length: 0,
    };
    assert_eq!(
        signed.string_to_sign(Service::Table, "acct"),
        format!("GET\n\n\n{DATE}\n/acct/?comp=properties")
    );
}

#[test]
fn the_blob_text_has_twelve_lines_the_ms_headers_and_the_sorted_query() {
    let url = Url::parse(
        "http://127.0.0.1:10000/devstoreaccount1/locks/a%2Fb?comp=lease&Restype=x&a=2&a=1",
    )
    .unwrap();
    let h = headers(&[
        ("x-ms-version", "2022-11-02"),
        ("x-ms-date", DATE),
        ("x-ms-lease-action", "acquire"),
        ("if-match", "\"0x1\""),
        ("content-type", "application/octet-stream"),
        ("accept", "application/xml"),
    ]);
    let signed = Signed {
        method: "PUT",
        url: &url,
        headers: &h,
        content_length: 0,
    };
    let expected = [
        "PUT",
        "",
        "",
        "", // a length of 0 is left empty
        "",
        "application/octet-stream",
        "",
        "",
        "\"0x1\"",
        "",
        "",
        "",
        "x-ms-date:Fri, 27 Nov 2026 10:00:00 GMT",
        "x-ms-lease-action:acquire",
        "x-ms-version:2022-11-02",
        "/devstoreaccount1/devstoreaccount1/locks/a%2Fb",
        "a:1,2",
        "comp:lease",
        "restype:x",
    ]
    .join("\n");
    assert_eq!(signed.string_to_sign(Service::Blob, ACCOUNT), expected);
    let with_body = Signed {
        content_length: 5,
        ..signed
    };
    assert!(
        with_body
            .string_to_sign(Service::Blob, ACCOUNT)
            .starts_with("PUT\n\n\n5\n")
    );
}

#[test]
fn http_dates_are_imf_fixdate_in_gmt() {
    let at = time::macros::datetime!(2026-11-27 10:00:00 +02:00);
    assert_eq!(http_date(at), "Fri, 27 Nov 2026 08:00:00 GMT");
}

#[test]
fn no_policy_shows_a_secret_in_debug() {
    let key = signer(KEY, Service::Blob);
    let sas = Stamp::Sas(SasToken::new("sv=2022-11-02&sig=c2VjcmV0c2lnbmF0dXJl").unwrap());
    let shown = format!("{key:?} {sas:?}");
    assert!(!shown.contains(KEY), "{shown}");
    assert!(!shown.contains("c2VjcmV0c2lnbmF0dXJl"), "{shown}");
    assert!(
        shown.contains("sig"),
        "the parameter names are shown: {shown}"
    );
}

/// The last policy of a test pipeline: records the request and answers 200.
#[derive(Debug, Default)]
struct Capture(Mutex<Option<(Url, Headers)>>);

#[async_trait]
impl Policy for Capture {
    async fn send(
        &self,
        _ctx: &Context,
        request: &mut Request,
        _next: &[Arc<dyn Policy>],
    ) -> PolicyResult {
        *self.0.lock().unwrap() = Some((request.url().clone(), request.headers().clone()));
        Ok(AsyncRawResponse::from_bytes(
            StatusCode::Ok,
            Headers::new(),
            Vec::<u8>::new(),
        ))
    }
}

async fn send_through(policies: Vec<Arc<dyn Policy>>, url: &str) -> (Url, Headers) {
    let capture = Arc::new(Capture::default());
    let mut chain = policies;
    chain.push(capture.clone());
    let mut request = Request::new(Url::parse(url).unwrap(), Method::Get);
    chain[0]
        .send(&Context::new(), &mut request, &chain[1..])
        .await
        .unwrap();

    capture.0.lock().unwrap().take().unwrap()
}

#[tokio::test]
async fn a_sas_is_appended_once_and_a_signed_url_is_neither_extended_nor_signed() {
    let policy = |stamp: Stamp| -> Arc<dyn Policy> { Arc::new(stamp) };
    let sas = policy(Stamp::Sas(
        SasToken::new("sv=2022-11-02&sig=a%2Bb%2Fc%3D").unwrap(),
    ));
    let key = policy(signer(KEY, Service::Blob));
    let headers_policy = policy(Stamp::Headers {
        version: "2022-11-02",
    });
    let (url, h) = send_through(
        vec![headers_policy.clone(), sas.clone(), key.clone()],
        "http://127.0.0.1:10000/devstoreaccount1/c/b?comp=lease",
    )
    .await;
    let sigs: Vec<String> = url
        .query_pairs()
        .filter(|(k, _)| k == "sig")
        .map(|(_, v)| v.into_owned())
        .collect();
    assert_eq!(sigs, vec!["a+b/c=".to_owned()], "{url}");
    assert!(
        h.get_optional_str(&HeaderName::from_static("authorization"))
            .is_none(),
        "a SAS request is not signed with the key"
    );
    assert_eq!(
        h.get_optional_str(&HeaderName::from_static("x-ms-version")),
        Some("2022-11-02")
    );
    assert!(
        h.get_optional_str(&HeaderName::from_static("x-ms-date"))
            .is_some_and(|d| d.ends_with(" GMT"))
    );
    // Without a SAS, the key signs.
    let (_, h) = send_through(
        vec![headers_policy, key],
        "http://127.0.0.1:10000/devstoreaccount1/c/b",
    )
    .await;
    assert!(
        h.get_optional_str(&HeaderName::from_static("authorization"))
            .is_some_and(|a| a.starts_with("SharedKey devstoreaccount1:"))
    );
}

#[tokio::test]
async fn a_signing_policy_at_the_end_of_a_pipeline_is_an_error_not_a_panic() {
    let key = signer(KEY, Service::Table);
    let mut request = Request::new(
        Url::parse("http://127.0.0.1:10002/devstoreaccount1/Tables").unwrap(),
        Method::Get,
    );
    assert!(key.send(&Context::new(), &mut request, &[]).await.is_err());
}

#[test]
fn a_key_that_is_not_base64_is_a_credential_error_that_does_not_quote_it() {
    let url = Url::parse("http://127.0.0.1:10002/devstoreaccount1/Tables").unwrap();
    let h = headers(&[("x-ms-date", DATE)]);
    let signed = Signed {
        method: "GET",
        url: &url,
        headers: &h,
        content_length: 0,
    };
    let e = shared_key(
        ACCOUNT,
        &Secret::new("not base64 !!"),
        Service::Table,
        &signed,
    )
    .unwrap_err();
    assert!(!e.to_string().contains("not base64 !!"), "{e}");
}

/// The worked examples of the storage REST reference ("Authorize with
/// Shared Key"): its canonical resources, and its complete Blob text for
/// the metadata of a container on a path-style endpoint.
#[test]
fn the_rest_references_worked_examples() {
    let sign = |service: Service, method: &str, url: &str, h: &[(&str, &str)]| {
        let url = Url::parse(url).unwrap();
        let h = headers(h);
        Signed {
            method,
            url: &url,
            headers: &h,
            content_length: 0,
        }
        .string_to_sign(service, "myaccount")
    };
    let resource = |text: String| {
        text.rsplit_once("\n/")
            .map(|(_, r)| format!("/{r}"))
            .unwrap()
    };
    // Blob: every query parameter, names sorted, values of one name sorted
    // and joined by commas.
    let text = sign(
        Service::Blob,
        "GET",
        "https://myaccount.blob.core.windows.net/mycontainer?restype=container&comp=metadata",
        &[],
    );
    assert!(
        text.ends_with("\n/myaccount/mycontainer\ncomp:metadata\nrestype:container"),
        "{text}"
    );
    let text = sign(
        Service::Blob,
        "GET",
        "https://myaccount.blob.core.windows.net/mycontainer?restype=container&comp=list\
         &include=snapshots&include=metadata&include=uncommittedblobs",
        &[],
    );
    assert!(
        text.ends_with(
            "\n/myaccount/mycontainer\ncomp:list\ninclude:metadata,snapshots,uncommittedblobs\nrestype:container"
        ),
        "{text}"
    );
    // Table: the path, and `comp` alone of the query.
    let text = sign(
        Service::Table,
        "GET",
        "https://myaccount.table.core.windows.net/mytable",
        &[("x-ms-date", "Sun, 11 Oct 2009 19:52:39 GMT")],
    );
    assert_eq!(
        text,
        "GET\n\n\nSun, 11 Oct 2009 19:52:39 GMT\n/myaccount/mytable"
    );
    let text = sign(
        Service::Table,
        "GET",
        "https://myaccount.table.core.windows.net/?restype=service&comp=properties",
        &[],
    );
    assert_eq!(resource(text), "/myaccount/?comp=properties");
    // The complete Blob text: twelve lines (all empty for a GET without a
    // body), the two `x-ms-` headers, then the resource of a path-style
    // URL, where the account appears twice.
    let text = sign(
        Service::Blob,
        "GET",
        "http://127.0.0.1:10000/myaccount/mycontainer?restype=container&comp=metadata&timeout=20",
        &[
            ("x-ms-date", "Sun, 11 Oct 2009 21:49:13 GMT"),
            ("x-ms-version", "2009-09-19"),
        ],
    );
    assert_eq!(
        text,
        "GET\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:Sun, 11 Oct 2009 21:49:13 GMT\nx-ms-version:2009-09-19\n\
         /myaccount/myaccount/mycontainer\ncomp:metadata\nrestype:container\ntimeout:20"
    );
}
