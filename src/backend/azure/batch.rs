//! Entity-group transactions on the wire: the `multipart/mixed` request and
//! its reply, which answers 202 as a whole and names the failing operation
//! only inside its part (the index as `"N:message"`, and the code).

use std::fmt::Write as _;

use azure_core::Bytes;
use azure_core::http::{Method, Request, Url};
use serde_json::Value as Json;

use super::AzureBackend;
use super::auth::Service;
use super::errors::{Failure, bad_reply, error_code, is_transient_status};
use super::requests::{if_match, op_what, url_with, version_from_etag, write_url};
use crate::backend::wire;
use crate::backend::{TableOp, Version};
use crate::error::{Error, Result};
use crate::key::TableName;

pub(super) struct BatchRequest {
    pub(super) content_type: String,
    pub(super) body: Bytes,
}

/// Writes the `multipart/mixed` body of a transaction on `table`.
pub(super) fn build(base: &Url, table: &TableName, ops: &[TableOp]) -> Result<BatchRequest> {
    // Random boundaries only guard against parsers that look for one
    // anywhere: a delimiter starts a line, and no part has a line break of
    // its own (JSON escapes them, keys are percent-encoded in the URL).
    let batch = format!("batch_{:016x}", crate::retry::random_seed());
    let changeset = format!("changeset_{:016x}", crate::retry::random_seed());
    let mut body = String::new();
    let _ = write!(
        body,
        "--{batch}\r\nContent-Type: multipart/mixed; boundary={changeset}\r\n\r\n"
    );
    for (i, op) in ops.iter().enumerate() {
        let method = match op {
            TableOp::Insert(_) => "POST",
            TableOp::Replace(..) => "PUT",
            TableOp::Merge(..) => "MERGE",
            TableOp::Delete { .. } => "DELETE",
        };
        let url = write_url(base, table, op)?;
        let condition = op.condition();
        let _ = write!(
            body,
            "--{changeset}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n\
             {method} {url} HTTP/1.1\r\n\
             Content-ID: {}\r\n\
             Accept: application/json;odata=minimalmetadata\r\n\
             DataServiceVersion: 3.0;\r\n",
            i + 1
        );
        if let Some(etag) = condition.as_ref().and_then(if_match) {
            let _ = write!(body, "If-Match: {etag}\r\n");
        }
        match op.data() {
            Some(d) => {
                let json = wire::EntityBody::of(d)
                    .to_text()
                    .map_err(|e| Error::invalid(format!("batch operation {i}"), e.to_string()))?;
                // Only an insert answers with the entity unless asked not
                // to; the other writes answer 204 with no body anyway.
                let prefer = match op {
                    TableOp::Insert(_) => "Prefer: return-no-content\r\n",
                    _ => "",
                };
                let _ = write!(
                    body,
                    "Content-Type: application/json\r\n{prefer}Content-Length: {}\r\n\r\n{json}\r\n",
                    json.len()
                );
            }
            None => body.push_str("\r\n"),
        }
    }
    let _ = write!(body, "--{changeset}--\r\n\r\n--{batch}--\r\n");
    Ok(BatchRequest {
        content_type: format!("multipart/mixed; boundary={batch}"),
        body: Bytes::from(body),
    })
}

/// One operation's reply inside a batch reply, borrowed from its text.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct PartReply<'a> {
    pub(super) status: u16,
    pub(super) headers: Vec<(&'a str, &'a str)>,
    pub(super) body: &'a str,
}

impl<'a> PartReply<'a> {
    pub(super) fn header(&self, name: &str) -> Option<&'a str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|&(_, v)| v)
    }

    /// The zero-based operation index this reply names through `Content-ID`.
    pub(super) fn content_index(&self) -> Option<usize> {
        self.header("content-id")?
            .trim()
            .parse::<usize>()
            .ok()?
            .checked_sub(1)
    }

    /// The error code (as [`error_code`]) and the failing operation's index,
    /// from an OData error body: `{"odata.error": {"code": "...", "message":
    /// {"value": "3:..."}}}`.
    pub(super) fn error_details(&self) -> (Option<String>, Option<usize>) {
        let code = error_code(self.header("x-ms-error-code"), self.body.as_bytes());
        let json = serde_json::from_str::<Json>(self.body.trim()).ok();
        let message = (json.as_ref())
            .and_then(|j| j.get("odata.error").or_else(|| j.get("error")))
            .and_then(|e| e.get("message"))
            .and_then(|m| m.get("value").and_then(Json::as_str).or_else(|| m.as_str()));
        let index = message
            .and_then(|m| m.split_once(':'))
            .filter(|(digits, _)| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|(digits, _)| digits.parse().ok());
        (code, index)
    }
}

/// Reads the operation replies (status line, headers, blank line, body up
/// to the next `--` line) out of a batch reply, in a changeset or not (the
/// answer to a malformed batch).
pub(super) fn parse(body: &str) -> Vec<PartReply<'_>> {
    #[derive(Clone, Copy)]
    enum State {
        Outside,
        Headers,
        /// In a body from this offset to, so far, the end of its last line.
        Body(usize, usize),
    }
    let mut replies = Vec::new();
    let mut current = PartReply::default();
    let mut state = State::Outside;
    let mut at = 0;
    for raw_line in body.split('\n') {
        let start = at;
        at += raw_line.len() + 1;
        let line = raw_line.strip_suffix('\r').unwrap_or(raw_line);
        match state {
            State::Outside => {
                if let Some(rest) = line.strip_prefix("HTTP/1.1 ") {
                    current = PartReply {
                        status: rest
                            .split_whitespace()
                            .next()
                            .and_then(|s| s.parse().ok())
                            .unwrap_or(0),
                        ..PartReply::default()
                    };
                    state = State::Headers;
                }
            }
            State::Headers => {
                if line.is_empty() {
                    state = State::Body(at.min(body.len()), at.min(body.len()));
                } else if let Some((name, value)) = line.split_once(':') {
                    current.headers.push((name.trim(), value.trim()));
                }
            }
            State::Body(from, to) if line.starts_with("--") => {
                current.body = &body[from..to.max(from)];
                replies.push(std::mem::take(&mut current));
                state = State::Outside;
            }
            State::Body(from, _) => state = State::Body(from, start + line.len()),
        }
    }
    if let State::Body(from, to) = state {
        current.body = &body[from..to.max(from)];
        replies.push(current);
    } else if matches!(state, State::Headers) {
        replies.push(current);
    }
    replies
}

impl AzureBackend {
    /// Sends the batch once. A failed operation is a final answer
    /// ([`Failure::Fatal`]: nothing was applied).
    pub(super) async fn batch_once(
        &self,
        table: &TableName,
        ops: &[TableOp],
        base: &Url,
        request: &BatchRequest,
        what: &str,
    ) -> std::result::Result<Vec<Option<Version>>, Failure> {
        let mut raw = Request::new(url_with(base, "$batch")?, Method::Post);
        raw.insert_header("content-type", request.content_type.clone());
        raw.insert_header("accept", "application/json;odata=minimalmetadata");
        raw.insert_header("dataserviceversion", "3.0;");
        raw.insert_header("maxdataserviceversion", "3.0;NetFx");
        raw.set_body(request.body.clone());
        let reply = self.send_raw(Service::Table, raw).await?;
        let text = String::from_utf8_lossy(reply.body().as_ref());
        let parts = parse(&text);
        if let Some(part) = parts.iter().find(|p| p.status >= 300 || p.status < 200) {
            let (code, message_index) = part.error_details();
            if is_transient_status(part.status) {
                return Err(Failure::Status {
                    status: part.status,
                    code,
                });
            }
            let index = message_index
                .or_else(|| part.content_index())
                .or((ops.len() == 1).then_some(0))
                .filter(|i| *i < ops.len());
            let source = Error::from_service(
                part.status,
                code.as_deref(),
                match index {
                    Some(i) => op_what(table, &ops[i]),
                    None => what.to_owned(),
                },
            );
            return Err(Failure::Fatal(match index {
                Some(index) => Error::Batch {
                    index,
                    source: Box::new(source.for_row(
                        table.as_str(),
                        ops[index].partition_key(),
                        ops[index].row_key(),
                    )),
                },
                None => source,
            }));
        }
        if parts.len() != ops.len() {
            return Err(bad_reply(
                202,
                format!(
                    "{what}: the reply holds {} operation results for {} operations",
                    parts.len(),
                    ops.len()
                ),
            ));
        }
        // Replies come in request order; Content-ID, when echoed, says so too.
        let mut ordered: Vec<Option<&PartReply<'_>>> = vec![None; ops.len()];
        for (i, part) in parts.iter().enumerate() {
            let at = part.content_index().filter(|j| *j < ops.len()).unwrap_or(i);
            ordered[at] = Some(part);
        }
        let mut versions = Vec::with_capacity(ops.len());
        for (op, part) in ops.iter().zip(ordered) {
            match (op, part) {
                (TableOp::Delete { .. }, _) => versions.push(None),
                (_, Some(part)) => {
                    versions.push(Some(version_from_etag(table, part.header("etag"))?));
                }
                (_, None) => {
                    return Err(bad_reply(202, format!("{what}: an operation has no reply")));
                }
            }
        }
        Ok(versions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Precondition;

    const FAILED: &str = "--batchresponse_1\r\n\
        Content-Type: multipart/mixed; boundary=changesetresponse_2\r\n\r\n\
        --changesetresponse_2\r\n\
        Content-Type: application/http\r\n\
        Content-Transfer-Encoding: binary\r\n\r\n\
        HTTP/1.1 409 Conflict\r\n\
        Content-ID: 4\r\n\
        X-Content-Type-Options: nosniff\r\n\
        Content-Type: application/json;odata=minimalmetadata;streaming=true;charset=utf-8\r\n\r\n\
        {\"odata.error\":{\"code\":\"EntityAlreadyExists\",\"message\":{\"lang\":\"en-US\",\"value\":\"3:The specified entity already exists.\\nRequestId:x\"}}}\r\n\
        --changesetresponse_2--\r\n\
        --batchresponse_1--\r\n";

    #[test]
    fn parses_a_failed_batch_reply() {
        let parts = parse(FAILED);
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].status, 409);
        assert_eq!(parts[0].content_index(), Some(3));
        assert_eq!(
            parts[0].error_details(),
            (Some("EntityAlreadyExists".into()), Some(3))
        );
    }

    #[test]
    fn parses_a_successful_batch_reply() {
        let body = "--batchresponse_1\nContent-Type: multipart/mixed; boundary=changesetresponse_2\n\n\
            --changesetresponse_2\nContent-Type: application/http\nContent-Transfer-Encoding: binary\n\n\
            HTTP/1.1 204 No Content\nETag: W/\"datetime'2024-01-01T00%3A00%3A00.1Z'\"\n\n\n\
            --changesetresponse_2\nContent-Type: application/http\nContent-Transfer-Encoding: binary\n\n\
            HTTP/1.1 204 No Content\nETag: W/\"datetime'2024-01-01T00%3A00%3A00.2Z'\"\n\n\n\
            --changesetresponse_2--\n--batchresponse_1--\n";
        let parts = parse(body);
        assert_eq!(parts.len(), 2);
        assert!(parts.iter().all(|p| p.status == 204));
        assert_eq!(
            parts[1].header("etag"),
            Some("W/\"datetime'2024-01-01T00%3A00%3A00.2Z'\"")
        );
    }

    /// A part's body is the text between its blank line and the next
    /// boundary, whatever its line breaks; header names match in any case.
    #[test]
    fn a_body_over_several_lines_is_read_whole() {
        let body = "--batchresponse_1\r\n\
            HTTP/1.1 400 Bad Request\r\n\
            x-ms-error-code: InvalidInput\r\n\
            CONTENT-ID: 2\r\n\r\n\
            {\"odata.error\":{\"code\":\"InvalidInput\",\r\n\
            \"message\":{\"value\":\"1:bad value\"}}}\r\n\
            --batchresponse_1--\r\n";
        let parts = parse(body);
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].status, 400);
        assert_eq!(
            parts[0].body,
            "{\"odata.error\":{\"code\":\"InvalidInput\",\r\n\"message\":{\"value\":\"1:bad value\"}}}"
        );
        assert_eq!(parts[0].content_index(), Some(1));
        assert_eq!(
            parts[0].error_details(),
            (Some("InvalidInput".into()), Some(1))
        );
        // A reply cut off inside its body keeps what arrived.
        let cut = parse("HTTP/1.1 204 No Content\nETag: x\n\nrest");
        assert_eq!(cut.len(), 1);
        assert_eq!((cut[0].header("ETAG"), cut[0].body), (Some("x"), "rest"));
    }

    /// The batch-size check (`TableOp::payload_size`, summed against the
    /// 4 MiB limit) never counts less than the body actually sent, whatever
    /// the keys and text hold.
    #[test]
    fn the_batch_size_estimate_covers_the_body_sent() {
        use crate::entity::{EntityData, Properties, Value};
        use crate::key::{PartitionKey, RowKey};
        let base = Url::parse("https://account.table.core.windows.net/").unwrap();
        let table = TableName::new("Things").unwrap();
        let cases = [
            ("ascii", "p".to_owned(), "r".repeat(10), "x".repeat(30_000)),
            (
                "non-ASCII keys",
                "p ".repeat(256),
                "語".repeat(510),
                "語".repeat(10_000),
            ),
            (
                "punctuation",
                "%".repeat(512),
                "'".repeat(510),
                "\"".repeat(10_000),
            ),
        ];
        for (name, pk, rk, text) in cases {
            let ops: Vec<TableOp> = (0..100)
                .map(|i| {
                    let mut properties = Properties::new();
                    properties.insert("s", Value::String(text.clone()));
                    let d = EntityData {
                        partition_key: PartitionKey::new(pk.clone()).unwrap(),
                        row_key: RowKey::new(format!("{i:02}{rk}")).unwrap(),
                        properties,
                    };
                    match i % 3 {
                        0 => TableOp::Insert(d),
                        1 => TableOp::Replace(d, Precondition::IfExists),
                        _ => TableOp::Merge(d, Precondition::IfExists),
                    }
                })
                .collect();
            let estimated: usize = ops.iter().map(TableOp::payload_size).sum();
            let sent = build(&base, &table, &ops).unwrap().body.len();
            assert!(
                estimated >= sent,
                "{name}: estimated {estimated}, sent {sent}"
            );
        }
    }
}
