//! Checks of the 1.x signing policies (`auth.rs`): the text signed for each
//! service, by the rules; the same signatures as the 0.21 line's signing
//! policy on the same requests; SAS appended once; no secret in `Debug`.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use azure_core_v1::credentials::Secret;
use azure_core_v1::http::headers::{HeaderName, HeaderValue, Headers};
use azure_core_v1::http::policies::{Policy, PolicyResult};
use azure_core_v1::http::{AsyncRawResponse, Context, Method, Request, StatusCode, Url};

use super::auth::{SasPolicy, Service, SharedKeyPolicy, Signed, StorageHeadersPolicy, http_date};

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
    let key = SharedKeyPolicy::new(ACCOUNT, Secret::new(KEY), Service::Blob);
    let sas = SasPolicy::new(vec![
        ("sv".into(), "2022-11-02".into()),
        ("sig".into(), "c2VjcmV0c2lnbmF0dXJl".into()),
    ]);
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
    let sas: Arc<dyn Policy> = Arc::new(SasPolicy::new(vec![
        ("sv".into(), "2022-11-02".into()),
        ("sig".into(), "a+b/c=".into()),
    ]));
    let key: Arc<dyn Policy> = Arc::new(SharedKeyPolicy::new(
        ACCOUNT,
        Secret::new(KEY),
        Service::Blob,
    ));
    let headers_policy: Arc<dyn Policy> = Arc::new(StorageHeadersPolicy::new("2022-11-02"));
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
    let key = SharedKeyPolicy::new(ACCOUNT, Secret::new(KEY), Service::Table);
    let mut request = Request::new(
        Url::parse("http://127.0.0.1:10002/devstoreaccount1/Tables").unwrap(),
        Method::Get,
    );
    assert!(key.send(&Context::new(), &mut request, &[]).await.is_err());
}

#[test]
fn a_key_that_is_not_base64_is_a_credential_error_that_does_not_quote_it() {
    let key = SharedKeyPolicy::new(ACCOUNT, Secret::new("not base64 !!"), Service::Table);
    let url = Url::parse("http://127.0.0.1:10002/devstoreaccount1/Tables").unwrap();
    let h = headers(&[("x-ms-date", DATE)]);
    let e = key
        .authorization(&Signed {
            method: "GET",
            url: &url,
            headers: &h,
            content_length: 0,
        })
        .unwrap_err();
    assert!(!e.to_string().contains("not base64 !!"), "{e}");
}

/// The 0.21 line's signing, on the same requests: its pipeline with the
/// account key, ending in a policy that records what would be sent.
mod against_0_21 {
    use super::*;
    use azure_core::headers::{HeaderName as HeaderName0, Headers as Headers0};
    use azure_core::{
        BytesStream, ClientOptions, Context as Context0, Method as Method0, Policy as Policy0,
        PolicyResult as PolicyResult0, Request as Request0, Response as Response0, RetryOptions,
        StatusCode as StatusCode0, TransportOptions,
    };
    use azure_storage::StorageCredentials;
    use azure_storage::clients::ServiceType;

    /// What the 0.21 pipeline would send: URL, method and headers.
    type Sent = (String, String, Vec<(String, String)>);

    #[derive(Debug, Default)]
    struct Capture0(Mutex<Option<Sent>>);

    #[async_trait]
    impl Policy0 for Capture0 {
        async fn send(
            &self,
            _ctx: &Context0,
            request: &mut Request0,
            _next: &[Arc<dyn Policy0>],
        ) -> PolicyResult0 {
            let headers = request
                .headers()
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), v.as_str().to_owned()))
                .collect();
            *self.0.lock().unwrap() = Some((
                request.url().to_string(),
                request.method().to_string(),
                headers,
            ));
            Ok(Response0::new(
                StatusCode0::Ok,
                Headers0::new(),
                Box::pin(BytesStream::new(Vec::new())),
            ))
        }
    }

    /// One request: method, URL, headers (`x-ms-date` fixed) and body.
    struct Case {
        service: Service,
        method: Method0,
        url: &'static str,
        headers: &'static [(&'static str, &'static str)],
        body: &'static [u8],
    }

    /// The 0.21 signature of `case`, and the request as it was signed.
    async fn signed_by_0_21(case: &Case) -> (String, Sent) {
        let capture = Arc::new(Capture0::default());
        let options = ClientOptions::new(TransportOptions::new_custom_policy(capture.clone()))
            .retry(RetryOptions::none());
        let pipeline = azure_storage::clients::new_pipeline_from_options(
            options,
            StorageCredentials::access_key(ACCOUNT, azure_core::auth::Secret::new(KEY)),
        );
        let mut request = Request0::new(Url::parse(case.url).unwrap(), case.method);
        for (k, v) in case.headers {
            request.insert_header(HeaderName0::from(*k), *v);
        }
        request.insert_header(HeaderName0::from("x-ms-date"), DATE);
        request.insert_header(
            HeaderName0::from("content-length"),
            case.body.len().to_string(),
        );
        request.set_body(case.body.to_vec());
        let mut ctx = Context0::new();
        ctx.insert(match case.service {
            Service::Blob => ServiceType::Blob,
            Service::Table => ServiceType::Table,
        });
        pipeline.send(&ctx, &mut request).await.unwrap();
        let (url, method, headers) = capture.0.lock().unwrap().take().unwrap();
        let authorization = headers
            .iter()
            .find(|(k, _)| k == "authorization")
            .map(|(_, v)| v.clone())
            .expect("signed");
        (authorization, (url, method, headers))
    }

    #[tokio::test]
    async fn shared_key_signatures_match_the_0_21_policy() {
        let cases = [
            Case {
                service: Service::Table,
                method: Method0::Get,
                url: "http://127.0.0.1:10002/devstoreaccount1/Accounts(PartitionKey='a%20b',RowKey='c')",
                headers: &[("accept", "application/json;odata=fullmetadata")],
                body: b"",
            },
            Case {
                service: Service::Table,
                method: Method0::Get,
                url: "http://127.0.0.1:10002/devstoreaccount1/Accounts()?$filter=PartitionKey%20eq%20'a'&$top=10&NextPartitionKey=1!8!YQ--",
                headers: &[("accept", "application/json;odata=nometadata")],
                body: b"",
            },
            Case {
                service: Service::Table,
                method: Method0::Post,
                url: "https://acct.table.core.windows.net/$batch",
                headers: &[
                    ("content-type", "multipart/mixed; boundary=batch_1"),
                    ("x-ms-version", "2022-11-02"),
                ],
                body: b"--batch_1\r\n...\r\n--batch_1--",
            },
            Case {
                service: Service::Table,
                method: Method0::Put,
                url: "http://127.0.0.1:10002/devstoreaccount1/Ledger(PartitionKey='o''brien',RowKey='100%25')",
                headers: &[
                    ("content-type", "application/json"),
                    ("if-match", "W/\"datetime'2026-11-27T10%3A00%3A00Z'\""),
                ],
                body: b"{\"n\":1}",
            },
            Case {
                service: Service::Blob,
                method: Method0::Put,
                url: "http://127.0.0.1:10000/devstoreaccount1/leasehold-locks/lh~a%2Fb?comp=lease",
                headers: &[
                    ("x-ms-lease-action", "acquire"),
                    ("x-ms-lease-duration", "15"),
                    (
                        "x-ms-proposed-lease-id",
                        "6f1c0b0e-0000-4000-8000-000000000001",
                    ),
                    ("x-ms-version", "2022-11-02"),
                ],
                body: b"",
            },
            Case {
                service: Service::Blob,
                method: Method0::Put,
                url: "https://acct.blob.core.windows.net/c/dir/name%20with'quote",
                headers: &[
                    ("x-ms-blob-type", "BlockBlob"),
                    ("x-ms-meta-owner", "host a"),
                    ("x-ms-lease-id", "6f1c0b0e-0000-4000-8000-000000000002"),
                    ("content-type", "application/json"),
                    ("if-match", "\"0x8DC\""),
                    ("x-ms-version", "2022-11-02"),
                ],
                body: b"{\"lease\":1}",
            },
            Case {
                service: Service::Blob,
                method: Method0::Get,
                url: "http://127.0.0.1:10000/devstoreaccount1/c?restype=container&comp=list&prefix=a%2Fb&marker=m%2B1&include=metadata&z=2&z=1",
                headers: &[("x-ms-version", "2022-11-02")],
                body: b"",
            },
            Case {
                service: Service::Blob,
                method: Method0::Delete,
                url: "http://127.0.0.1:10000/devstoreaccount1/c/b",
                headers: &[("x-ms-version", "2022-11-02"), ("x-ms-lease-id", "x")],
                body: b"",
            },
        ];
        for case in &cases {
            let (expected, (url, method, sent)) = signed_by_0_21(case).await;
            // The same request for the 1.x policy: every header the 0.21
            // pipeline sent but the signature and the length (which the
            // 1.x policy takes from the body).
            let mut h = Headers::new();
            for (k, v) in &sent {
                if k != "authorization" && k != "content-length" {
                    h.insert(HeaderName::from(k.clone()), HeaderValue::from(v.clone()));
                }
            }
            let url = Url::parse(&url).unwrap();
            let signed = Signed {
                method: &method,
                url: &url,
                headers: &h,
                content_length: case.body.len() as u64,
            };
            let policy = SharedKeyPolicy::new(ACCOUNT, Secret::new(KEY), case.service);
            assert_eq!(
                policy.authorization(&signed).unwrap(),
                expected,
                "{method} {url}\n{}",
                signed.string_to_sign(case.service, ACCOUNT)
            );
        }
    }
}
