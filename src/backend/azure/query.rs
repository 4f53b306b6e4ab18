//! Queries of the Table service: one page per call.

use azure_core::http::{Method, Request};

use super::AzureBackend;
use super::auth::{Service, header_value};
use super::errors::Failure;
use super::requests::{read_reply, stored_from_wire, url_with};
use crate::backend::wire;
use crate::backend::{QueryPage, QuerySpec};
use crate::entity::{RESERVED_NAMES, property_name_problem};
use crate::error::{Error, Result};
use crate::key::TableName;
use crate::query::Continuation;

impl AzureBackend {
    pub(super) async fn query_page(
        &self,
        table: &TableName,
        spec: &QuerySpec,
    ) -> Result<QueryPage> {
        spec.validate()?;
        let select = match &spec.select {
            None => None,
            Some(names) => {
                // Keys and Timestamp always come back, so the entity can be
                // rebuilt and versioned.
                let mut list: Vec<&str> = RESERVED_NAMES.to_vec();
                for name in names {
                    if RESERVED_NAMES.contains(&name.as_str()) {
                        continue;
                    }
                    if let Some(why) = property_name_problem(name) {
                        return Err(Error::invalid(format!("selected property {name:?}"), why));
                    }
                    if !list.contains(&name.as_str()) {
                        list.push(name);
                    }
                }
                Some(list.join(","))
            }
        };
        let what = format!("query of table `{table}`");
        self.inner
            .retry
            .run("query", |_| self.query_once(table, spec, select.clone()))
            .await
            .map_err(|f| f.into_error(&what).for_table(table.as_str()))
    }

    async fn query_once(
        &self,
        table: &TableName,
        spec: &QuerySpec,
        select: Option<String>,
    ) -> std::result::Result<QueryPage, Failure> {
        let mut url = url_with(self.base_url(Service::Table), &format!("{table}()"))?;
        {
            let mut query = url.query_pairs_mut();
            if let Some(filter) = &spec.filter {
                query.append_pair("$filter", &filter.to_odata());
            }
            if let Some(select) = &select {
                query.append_pair("$select", select);
            }
            if let Some(top) = spec.top {
                query.append_pair("$top", &top.to_string());
            }
            if let Some(c) = &spec.continuation {
                query.append_pair("NextPartitionKey", &c.next_partition_key);
                if let Some(rk) = &c.next_row_key {
                    query.append_pair("NextRowKey", rk);
                }
            }
        }
        if url.query() == Some("") {
            url.set_query(None);
        }
        let mut request = Request::new(url, Method::Get);
        request.insert_header("accept", "application/json;odata=fullmetadata");
        let reply = self.send_raw(Service::Table, request).await?;
        let body = reply.body().as_ref();
        let read = read_reply(
            body,
            wire::direct::page,
            |page: Page| {
                (page.value.into_iter())
                    .map(|json| wire::entity_from_parsed(table.as_str(), json))
                    .collect()
            },
            || format!("query page in the reply from table `{table}`"),
        )?;
        let continuation =
            header_value(reply.headers(), "x-ms-continuation-nextpartitionkey").map(|pk| {
                Continuation {
                    next_partition_key: pk.to_owned(),
                    next_row_key: header_value(reply.headers(), "x-ms-continuation-nextrowkey")
                        .map(str::to_owned),
                }
            });
        let entities = read
            .into_iter()
            .map(|entity| stored_from_wire(table, entity, None))
            .collect::<Result<Vec<_>>>()?;
        Ok(QueryPage {
            entities,
            continuation,
        })
    }
}

/// A query reply's body: its entities (annotations and all).
#[derive(serde::Deserialize)]
struct Page {
    #[serde(default)]
    value: Vec<wire::ParsedEntity>,
}
