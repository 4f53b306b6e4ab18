//! Queries of the Table service: one page per call, resumed from a
//! continuation.

use azure_core::prelude::Continuable as _;
use futures_util::StreamExt as _;

use super::AzureBackend;
use super::errors::Failure;
use super::requests::stored_from_json;
use crate::backend::wire;
use crate::backend::{QueryPage, QuerySpec};
use crate::entity::{RESERVED_NAMES, property_name_problem};
use crate::error::{Error, Result};
use crate::key::TableName;
use crate::query::Continuation;

impl AzureBackend {
    pub(super) async fn query_impl(
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
        self.retrying("query", |_| self.query_once(table, spec, select.clone()))
            .await
            .map_err(|f| f.into_error(&what))
    }

    async fn query_once(
        &self,
        table: &TableName,
        spec: &QuerySpec,
        select: Option<String>,
    ) -> std::result::Result<QueryPage, Failure> {
        let mut builder = self.table_client(table).query();
        if let Some(filter) = &spec.filter {
            builder = builder.filter(filter.to_odata());
        }
        if let Some(select) = select {
            builder = builder.select(select);
        }
        if let Some(top) = spec.top {
            builder = builder.top(u32::from(top));
        }
        if let Some(c) = &spec.continuation {
            builder = builder.initial_partition_key(c.next_partition_key.clone());
            if let Some(rk) = &c.next_row_key {
                builder = builder.initial_row_key(rk.clone());
            }
        }
        let mut pages = builder.into_stream::<wire::ParsedEntity>();
        let mut page = self
            .attempt(async move {
                match pages.next().await {
                    Some(page) => page,
                    None => Err(azure_core::Error::message(
                        azure_core::error::ErrorKind::Other,
                        "the query reply held no page",
                    )),
                }
            })
            .await?;
        let entities = std::mem::take(&mut page.entities)
            .into_iter()
            .map(|json| stored_from_json(table, json, None))
            .collect::<Result<Vec<_>>>()?;
        let continuation = page.continuation().map(|(pk, rk)| Continuation {
            next_partition_key: pk,
            next_row_key: rk,
        });
        Ok(QueryPage {
            entities,
            continuation,
        })
    }
}
