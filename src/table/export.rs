//! Export: a table's rows as JSON lines, in the format the `table` module
//! docs tell.

use futures_core::Stream;
use futures_util::{StreamExt as _, TryStreamExt as _};

use super::handle::Table;
use super::query::{Page, Query};
use super::stored::versioned;
use crate::backend::StoredEntity;
use crate::backend::wire::{EntityBody, entity_from_json_str};
use crate::entity::{
    DynamicEntity, Entity, Versioned, is_reserved, refuse_reserved_properties, validate_entity,
};
use crate::error::{Error, Result};
use crate::key::{PartitionKey, RowKey};

impl<E: Entity> Table<E> {
    /// `self.query().export()`: see [`Query::export`].
    ///
    /// ```
    /// use leasehold::stream::TryStreamExt as _;
    /// # #[derive(leasehold::Entity, Clone, Debug)]
    /// # #[entity(table = "Orders")]
    /// # struct Order { #[entity(partition_key)] shop: String, #[entity(row_key)] id: String, total: i64 }
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let store = leasehold::Store::memory();
    /// let orders = store.table::<Order>();
    /// orders.insert(Order { shop: "s1".into(), id: "7".into(), total: 1 << 60 }).await?;
    ///
    /// let mut lines = String::new();
    /// let mut pages = std::pin::pin!(orders.export());
    /// while let Some(page) = pages.try_next().await? {
    ///     for row in &page.items {
    ///         lines.push_str(&row.to_json_line()?);
    ///         lines.push('\n');
    ///     }
    ///     // page.continuation: where a resumed export starts (checkpoint it
    ///     // once the lines above are safely written).
    /// }
    /// assert_eq!(
    ///     lines,
    ///     "{\"PartitionKey\":\"s1\",\"RowKey\":\"7\",\"total\":\"1152921504606846976\",\"total@odata.type\":\"Edm.Int64\"}\n"
    /// );
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// As [`Query::export`].
    pub fn export(&self) -> impl Stream<Item = Result<Page<DynamicEntity>>> + Send + 'static {
        self.query().export()
    }
}

impl<E: Entity> Query<E> {
    /// The rows this query selects, as stored, page by page: write each
    /// row with [`DynamicEntity::to_json_line`], and once a page is safely
    /// written, keep its [`Page::continuation`] to [`Query::resume`] from.
    /// [`Store::import`](crate::Store::import) reads the lines back.
    ///
    /// # Errors
    /// Through the stream, which ends after the first: as [`Query::page`];
    /// [`Error::Invalid`] for a query with a projection (an export reads
    /// whole rows).
    pub fn export(self) -> impl Stream<Item = Result<Page<DynamicEntity>>> + Send + 'static {
        Query::row_pages(self.into_export(), |row, _| Some(exported(row)))
            .and_then(Page::of)
            .boxed()
    }
}

/// A row as an export writes it: without leasehold's reserved properties.
fn exported(mut row: StoredEntity) -> Result<Versioned<DynamicEntity>> {
    row.data.properties.retain(|name| !is_reserved(name));
    versioned(row)
}

impl DynamicEntity {
    /// The row as one line of an export, without a line break (the format
    /// is in the [`table`](crate::table) module docs).
    ///
    /// ```
    /// use leasehold::entity::Value;
    /// use leasehold::{DynamicEntity, PartitionKey, RowKey};
    /// let mut row = DynamicEntity::new(PartitionKey::new("p")?, RowKey::new("r")?);
    /// row.properties.insert("ratio", Value::Double(f64::NAN));
    /// row.properties.insert("count", Value::Int64(-1));
    /// let line = row.to_json_line()?;
    /// assert_eq!(
    ///     line,
    ///     r#"{"PartitionKey":"p","RowKey":"r","count":"-1","count@odata.type":"Edm.Int64","ratio":"NaN","ratio@odata.type":"Edm.Double"}"#
    /// );
    /// let back = DynamicEntity::from_json_line(&line)?;
    /// assert_eq!(back.to_json_line()?, line);
    /// # Ok::<(), leasehold::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the row if it cannot be written (never for
    /// a row read from a table).
    pub fn to_json_line(&self) -> Result<String> {
        EntityBody::new(
            self.partition_key.as_str(),
            self.row_key.as_str(),
            &self.properties,
        )
        .to_text()
    }

    /// A row read back from a line of an export or of the service's JSON
    /// (`Timestamp`, `odata.*` entries and `null` values left out).
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the culprit: not a JSON object, a key
    /// missing or invalid, a value that does not fit its annotation, a
    /// reserved (`_lh…`) or refused property name, a row over the limits.
    pub fn from_json_line(line: &str) -> Result<DynamicEntity> {
        let wire = entity_from_json_str("", line).map_err(|e| match e {
            Error::Decode {
                property,
                expected,
                found,
                ..
            } => Error::invalid(
                format!("property `{property}` of the line"),
                format!("expected {expected}, found {found}"),
            ),
            other => other,
        })?;
        let partition_key = PartitionKey::new(wire.partition_key)?;
        let row_key = RowKey::new(wire.row_key)?;
        refuse_reserved_properties(&wire.properties, false, |name| {
            format!(
                "property `{name}` of row ({:?}, {:?}) (an export never holds it)",
                partition_key.as_str(),
                row_key.as_str()
            )
        })?;
        validate_entity("(line)", &partition_key, &row_key, &wire.properties)?;
        Ok(DynamicEntity {
            partition_key,
            row_key,
            properties: wire.properties,
        })
    }
}
