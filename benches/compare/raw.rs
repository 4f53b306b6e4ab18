//! The raw side of the table benchmarks: the same Table requests written by
//! hand and sent through an `azure_core` 1.x pipeline with the same signing
//! and transport as leasehold's (there is no official Table crate on the
//! 1.x line). Entities go out as hand-annotated JSON and come back as JSON
//! maps: no typed encode or decode, no checks against the service limits.

use std::fmt::Write as _;

use azure_core::Bytes;
use azure_core::http::{Context, Method, Pipeline, PipelineSendOptions, RawResponse, Request, Url};
use serde_json::{Map, Value as Json};

use crate::Res;

/// A table client written by hand over a bare pipeline.
#[derive(Clone)]
pub(crate) struct RawTables {
    pipeline: Pipeline,
    base: Url,
    /// Whether each request names itself (`x-ms-client-request-id`), as
    /// leasehold's do; else the pipeline makes the id up.
    names_requests: bool,
}

fn url(base: &Url, segment: &str) -> Url {
    let mut url = base.clone();
    url.path_segments_mut()
        .expect("an endpoint with a path")
        .push(segment);
    url
}

fn entity_url(base: &Url, table: &str, pk: &str, rk: &str) -> Url {
    url(base, &format!("{table}(PartitionKey='{pk}',RowKey='{rk}')"))
}

/// The reply's ETag, looked up by iterating the headers (`Headers`'
/// getters format a message on every lookup).
fn etag(reply: &RawResponse) -> String {
    reply
        .headers()
        .iter()
        .find(|(name, _)| name.as_str() == "etag")
        .map(|(_, value)| value.as_str().to_owned())
        .expect("an ETag")
}

impl RawTables {
    pub(crate) fn connect(conn_str: &str) -> Res<Self> {
        let backend = leasehold::backend::azure::AzureBackend::from_connection_string(conn_str)?;
        Ok(RawTables::sharing(&backend))
    }

    /// Requests through `backend`'s own pipeline and connections.
    pub(crate) fn sharing(backend: &leasehold::backend::azure::AzureBackend) -> Self {
        let (pipeline, base) = leasehold::backend::azure::__bench::table_pipeline(backend);
        RawTables {
            pipeline,
            base,
            names_requests: true,
        }
    }

    /// The same client, leaving each request's id to the pipeline, as the
    /// SDK's own clients do: it looks for the header (an error, with a
    /// backtrace when `RUST_BACKTRACE` is set, when it is absent) and draws
    /// a fresh UUID from the system.
    pub(crate) fn leaving_ids_to_the_pipeline(&self) -> Self {
        RawTables {
            names_requests: false,
            ..self.clone()
        }
    }

    /// Sends `request`; an error status is an error.
    async fn send(&self, mut request: Request) -> Res<RawResponse> {
        if self.names_requests {
            request.insert_header(
                "x-ms-client-request-id",
                uuid::Uuid::new_v4().hyphenated().to_string(),
            );
        }
        let reply = self
            .pipeline
            .send(
                &Context::new(),
                &mut request,
                Some(PipelineSendOptions {
                    skip_checks: true,
                    ..PipelineSendOptions::default()
                }),
            )
            .await?;
        let status = u16::from(reply.status());
        if !(200..300).contains(&status) {
            return Err(format!("HTTP {status}").into());
        }
        Ok(reply)
    }

    pub(crate) async fn create_table(&self, table: &str) -> Res<()> {
        let mut r = Request::new(url(&self.base, "Tables"), Method::Post);
        r.insert_header("content-type", "application/json");
        r.insert_header("accept", "application/json;odata=nometadata");
        r.insert_header("prefer", "return-no-content");
        r.set_body(Bytes::from(
            serde_json::json!({ "TableName": table }).to_string(),
        ));
        match self.send(r).await {
            Ok(_) => Ok(()),
            Err(e) if e.to_string() == "HTTP 409" => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// One entity as a JSON map, and its ETag.
    pub(crate) async fn get(
        &self,
        table: &str,
        pk: &str,
        rk: &str,
    ) -> Res<(Map<String, Json>, String)> {
        let mut r = Request::new(entity_url(&self.base, table, pk, rk), Method::Get);
        r.insert_header("accept", "application/json;odata=fullmetadata");
        let reply = self.send(r).await?;
        let map = serde_json::from_slice(reply.body().as_ref())?;
        Ok((map, etag(&reply)))
    }

    pub(crate) async fn insert(&self, table: &str, body: &Json) -> Res<String> {
        let mut r = Request::new(url(&self.base, table), Method::Post);
        r.insert_header("content-type", "application/json");
        r.insert_header("accept", "application/json;odata=fullmetadata");
        r.insert_header("prefer", "return-no-content");
        r.set_body(Bytes::from(body.to_string()));
        Ok(etag(&self.send(r).await?))
    }

    /// A replace on `if_match`; the new ETag.
    pub(crate) async fn update(
        &self,
        table: &str,
        pk: &str,
        rk: &str,
        body: &Json,
        if_match: &str,
    ) -> Res<String> {
        let mut r = Request::new(entity_url(&self.base, table, pk, rk), Method::Put);
        r.insert_header("content-type", "application/json");
        r.insert_header("if-match", if_match.to_owned());
        r.set_body(Bytes::from(body.to_string()));
        Ok(etag(&self.send(r).await?))
    }

    /// One entity-group transaction of upserts (`rows`: row key and body)
    /// in partition `pk`; every part must succeed.
    pub(crate) async fn upsert_batch(
        &self,
        table: &str,
        pk: &str,
        rows: &[(String, Json)],
    ) -> Res<()> {
        // Boundaries of the same form and length as leasehold's (64 random
        // bits in hex), so that both sides send bodies of one size.
        let (hi, lo) = uuid::Uuid::new_v4().as_u64_pair();
        let (batch, changeset) = (format!("batch_{hi:016x}"), format!("changeset_{lo:016x}"));
        let mut body =
            format!("--{batch}\r\nContent-Type: multipart/mixed; boundary={changeset}\r\n\r\n");
        for (i, (rk, json)) in rows.iter().enumerate() {
            let json = json.to_string();
            let _ = write!(
                body,
                "--{changeset}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n\
                 PUT {} HTTP/1.1\r\nContent-ID: {}\r\nAccept: application/json;odata=minimalmetadata\r\n\
                 DataServiceVersion: 3.0;\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{json}\r\n",
                entity_url(&self.base, table, pk, rk),
                i + 1,
                json.len()
            );
        }
        let _ = write!(body, "--{changeset}--\r\n\r\n--{batch}--\r\n");
        let mut r = Request::new(url(&self.base, "$batch"), Method::Post);
        r.insert_header("content-type", format!("multipart/mixed; boundary={batch}"));
        r.insert_header("accept", "application/json;odata=minimalmetadata");
        r.insert_header("dataserviceversion", "3.0;");
        r.insert_header("maxdataserviceversion", "3.0;NetFx");
        r.set_body(Bytes::from(body));
        let reply = self.send(r).await?;
        let text = String::from_utf8_lossy(reply.body().as_ref());
        let ok = text.matches("HTTP/1.1 204").count();
        if ok != rows.len() {
            return Err(format!("{ok} of {} operations succeeded", rows.len()).into());
        }
        Ok(())
    }

    /// One page of every entity of `table`, from `from` (the
    /// continuation headers of the page before), and where the next starts.
    pub(crate) async fn page(
        &self,
        table: &str,
        from: Option<&(String, String)>,
    ) -> Res<(Vec<Map<String, Json>>, Option<(String, String)>)> {
        let mut u = url(&self.base, &format!("{table}()"));
        if let Some((pk, rk)) = from {
            u.query_pairs_mut()
                .append_pair("NextPartitionKey", pk)
                .append_pair("NextRowKey", rk);
        }
        let mut r = Request::new(u, Method::Get);
        r.insert_header("accept", "application/json;odata=fullmetadata");
        let reply = self.send(r).await?;
        let header = |name: &str| {
            reply
                .headers()
                .iter()
                .find(|(n, _)| n.as_str() == name)
                .map(|(_, v)| v.as_str().to_owned())
        };
        let next = header("x-ms-continuation-nextpartitionkey").map(|pk| {
            (
                pk,
                header("x-ms-continuation-nextrowkey").unwrap_or_default(),
            )
        });
        #[derive(serde::Deserialize)]
        struct Page {
            value: Vec<Map<String, Json>>,
        }
        let page: Page = serde_json::from_slice(reply.body().as_ref())?;
        Ok((page.value, next))
    }

    /// The first page of `filter`, at most `top` entities.
    pub(crate) async fn query(
        &self,
        table: &str,
        filter: &str,
        top: u16,
    ) -> Res<Vec<Map<String, Json>>> {
        let mut u = url(&self.base, &format!("{table}()"));
        u.query_pairs_mut()
            .append_pair("$filter", filter)
            .append_pair("$top", &top.to_string());
        let mut r = Request::new(u, Method::Get);
        r.insert_header("accept", "application/json;odata=fullmetadata");
        let reply = self.send(r).await?;
        #[derive(serde::Deserialize)]
        struct Page {
            value: Vec<Map<String, Json>>,
        }
        let page: Page = serde_json::from_slice(reply.body().as_ref())?;
        Ok(page.value)
    }
}
