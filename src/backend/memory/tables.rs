//! The table side: tables of entities in key order, single writes, atomic
//! batches and paged queries.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

use time::OffsetDateTime;

use super::clock::{WriteClock, entity_etag};
use crate::backend::{Precondition, QueryPage, QuerySpec, StoredEntity, TableOp, Version};
use crate::entity::{
    EntityData, MAX_ENTITY_BYTES, MAX_USER_PROPERTIES, Properties, entity_size, validate_entity,
};
use crate::error::{Error, Result};
use crate::key::{ETag, PartitionKey, RowKey, TableName, compare_keys, shorten};
use crate::query::{Continuation, MAX_PAGE_SIZE, Row};

/// A row's position: (PartitionKey, RowKey) in the service's UTF-16 order.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Position {
    partition_key: String,
    row_key: String,
}

impl Position {
    fn of(partition_key: &PartitionKey, row_key: &RowKey) -> Self {
        Position {
            partition_key: partition_key.as_str().to_owned(),
            row_key: row_key.as_str().to_owned(),
        }
    }
}

impl Ord for Position {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_keys(&self.partition_key, &other.partition_key)
            .then_with(|| compare_keys(&self.row_key, &other.row_key))
    }
}

impl PartialOrd for Position {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// One stored entity.
#[derive(Debug, Clone)]
struct StoredRow {
    partition_key: PartitionKey,
    row_key: RowKey,
    properties: Properties,
    timestamp: OffsetDateTime,
    etag: ETag,
}

impl StoredRow {
    fn to_entity(&self, select: Option<&[String]>) -> StoredEntity {
        let mut properties = self.properties.clone();
        if let Some(names) = select {
            properties.retain_names(names);
        }
        StoredEntity {
            data: EntityData {
                partition_key: self.partition_key.clone(),
                row_key: self.row_key.clone(),
                properties,
            },
            etag: self.etag.clone(),
            timestamp: self.timestamp,
        }
    }
}

#[derive(Debug, Default)]
struct Table {
    rows: BTreeMap<Position, StoredRow>,
}

/// What one checked operation will do once committed.
enum Planned {
    Put {
        partition_key: PartitionKey,
        row_key: RowKey,
        properties: Properties,
    },
    Remove {
        partition_key: PartitionKey,
        row_key: RowKey,
    },
}

/// Every table of one backend. Table names compare ignoring ASCII case, as
/// [`TableName`] does.
#[derive(Debug, Default)]
pub(super) struct TableStore {
    tables: HashMap<TableName, Table>,
}

fn table_not_found(table: &TableName) -> Error {
    Error::from_service(404, Some("TableNotFound"), format!("table `{table}`"))
}

fn entity_what(table: &TableName, partition_key: &PartitionKey, row_key: &RowKey) -> String {
    format!(
        "entity ({}, {}) in table `{table}`",
        shorten(partition_key.as_str()),
        shorten(row_key.as_str())
    )
}

/// Checks what the caller can check before sending anything: the entity
/// limits of every written entity, and that a delete has a condition.
fn validate_op(table: &TableName, op: &TableOp) -> Result<()> {
    match op {
        TableOp::Insert(d) | TableOp::Replace(d, _) | TableOp::Merge(d, _) => {
            validate_entity(table.as_str(), &d.partition_key, &d.row_key, &d.properties)
        }
        TableOp::Delete {
            partition_key,
            row_key,
            condition: Precondition::Upsert,
        } => Err(Error::invalid(
            format!("delete of {}", entity_what(table, partition_key, row_key)),
            "a delete needs a condition (an ETag or `IfExists`), not `Upsert`",
        )),
        TableOp::Delete { .. } => Ok(()),
    }
}

/// Checks a condition against the stored row (`None`: absent).
fn check_condition(
    condition: &Precondition,
    existing: Option<&StoredRow>,
    what: impl Fn() -> String,
) -> Result<()> {
    let must_exist = |existing: Option<&StoredRow>| match existing {
        Some(_) => Ok(()),
        None => Err(Error::from_service(404, Some("ResourceNotFound"), what())),
    };
    match condition {
        Precondition::Upsert => Ok(()),
        Precondition::IfExists => must_exist(existing),
        // `If-Match: *` on the wire means "if it exists".
        Precondition::IfMatch(etag) if etag.as_str() == "*" => must_exist(existing),
        Precondition::IfMatch(etag) => {
            must_exist(existing)?;
            match existing {
                Some(row) if row.etag == *etag => Ok(()),
                _ => Err(Error::from_service(
                    412,
                    Some("UpdateConditionNotSatisfied"),
                    what(),
                )),
            }
        }
    }
}

impl Table {
    /// Decides what `op` does against the current rows, without changing
    /// anything.
    fn plan(&self, name: &TableName, op: &TableOp) -> Result<Planned> {
        let pk = op.partition_key();
        let rk = op.row_key();
        let existing = self.rows.get(&Position::of(pk, rk));
        let what = || entity_what(name, pk, rk);
        let put = |properties: Properties| Planned::Put {
            partition_key: pk.clone(),
            row_key: rk.clone(),
            properties,
        };
        match op {
            TableOp::Insert(d) => match existing {
                Some(_) => Err(Error::from_service(
                    409,
                    Some("EntityAlreadyExists"),
                    what(),
                )),
                None => Ok(put(d.properties.clone())),
            },
            TableOp::Replace(d, condition) => {
                check_condition(condition, existing, what)?;
                Ok(put(d.properties.clone()))
            }
            TableOp::Merge(d, condition) => {
                check_condition(condition, existing, what)?;
                let mut merged = existing.map(|r| r.properties.clone()).unwrap_or_default();
                merged.merge_from(&d.properties);
                // Each part was valid; their union may not be. The caller
                // could not know, so this is the service's own 400.
                if merged.len() > MAX_USER_PROPERTIES {
                    return Err(Error::from_service(400, Some("TooManyProperties"), what()));
                }
                if entity_size(pk, rk, &merged) > MAX_ENTITY_BYTES {
                    return Err(Error::from_service(400, Some("EntityTooLarge"), what()));
                }
                Ok(put(merged))
            }
            TableOp::Delete { condition, .. } => {
                check_condition(condition, existing, what)?;
                Ok(Planned::Remove {
                    partition_key: pk.clone(),
                    row_key: rk.clone(),
                })
            }
        }
    }

    /// Applies a checked plan at `timestamp`.
    fn commit(&mut self, plan: Planned, timestamp: OffsetDateTime) -> Option<Version> {
        match plan {
            Planned::Put {
                partition_key,
                row_key,
                properties,
            } => {
                let etag = entity_etag(timestamp);
                self.rows.insert(
                    Position::of(&partition_key, &row_key),
                    StoredRow {
                        partition_key,
                        row_key,
                        properties,
                        timestamp,
                        etag: etag.clone(),
                    },
                );
                Some(Version { etag, timestamp })
            }
            Planned::Remove {
                partition_key,
                row_key,
            } => {
                self.rows.remove(&Position::of(&partition_key, &row_key));
                None
            }
        }
    }
}

impl TableStore {
    pub(super) fn create_table(&mut self, table: &TableName) {
        self.tables.entry(table.clone()).or_default();
    }

    fn table(&self, table: &TableName) -> Result<&Table> {
        self.tables.get(table).ok_or_else(|| table_not_found(table))
    }

    fn table_mut(&mut self, table: &TableName) -> Result<&mut Table> {
        self.tables
            .get_mut(table)
            .ok_or_else(|| table_not_found(table))
    }

    pub(super) fn get(
        &self,
        table: &TableName,
        partition_key: &PartitionKey,
        row_key: &RowKey,
    ) -> Result<Option<StoredEntity>> {
        let t = self.table(table)?;
        Ok(t.rows
            .get(&Position::of(partition_key, row_key))
            .map(|r| r.to_entity(None)))
    }

    pub(super) fn execute(
        &mut self,
        clock: &WriteClock,
        table: &TableName,
        op: &TableOp,
    ) -> Result<Option<Version>> {
        validate_op(table, op)?;
        let t = self.table_mut(table)?;
        let plan = t.plan(table, op)?;
        Ok(t.commit(plan, clock.tick()))
    }

    /// Checks every operation against the rows as they are (each row is
    /// touched at most once, so the checks are independent), then applies
    /// all of them at one Timestamp, or none.
    pub(super) fn batch(
        &mut self,
        clock: &WriteClock,
        table: &TableName,
        ops: &[TableOp],
    ) -> Result<Vec<Option<Version>>> {
        crate::backend::validate_batch(table.as_str(), ops)?;
        for (index, op) in ops.iter().enumerate() {
            validate_op(table, op).map_err(|e| match e {
                Error::Invalid { what, why } => Error::Invalid {
                    what: format!("operation {index} of batch on table `{table}`: {what}"),
                    why,
                },
                other => other,
            })?;
        }
        let t = self.table_mut(table)?;
        let plans = ops
            .iter()
            .enumerate()
            .map(|(index, op)| {
                t.plan(table, op).map_err(|source| Error::Batch {
                    index,
                    source: Box::new(source),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let timestamp = clock.tick();
        Ok(plans
            .into_iter()
            .map(|plan| t.commit(plan, timestamp))
            .collect())
    }

    pub(super) fn query(
        &self,
        table: &TableName,
        spec: &QuerySpec,
        scan_limit: usize,
    ) -> Result<QueryPage> {
        spec.validate()?;
        let t = self.table(table)?;
        let top = usize::from(spec.top.unwrap_or(MAX_PAGE_SIZE));
        let scan_limit = scan_limit.max(1);
        let start = spec.continuation.as_ref().map(|c| Position {
            partition_key: c.next_partition_key.clone(),
            row_key: c.next_row_key.clone().unwrap_or_default(),
        });
        let mut rows = match start {
            Some(start) => t.rows.range(start..),
            None => t.rows.range(..),
        };
        let select = spec.select.as_deref();
        let mut entities = Vec::new();
        let mut scanned = 0;
        while entities.len() < top && scanned < scan_limit {
            let Some((_, row)) = rows.next() else { break };
            scanned += 1;
            let matches = spec.filter.as_ref().is_none_or(|f| {
                f.matches(&Row {
                    partition_key: row.partition_key.as_str(),
                    row_key: row.row_key.as_str(),
                    timestamp: row.timestamp,
                    properties: &row.properties,
                })
            });
            if matches {
                entities.push(row.to_entity(select));
            }
        }
        let continuation = rows.next().map(|(position, _)| Continuation {
            next_partition_key: position.partition_key.clone(),
            next_row_key: Some(position.row_key.clone()),
        });
        Ok(QueryPage {
            entities,
            continuation,
        })
    }

    /// The number of tables, for `Debug`.
    pub(super) fn table_count(&self) -> usize {
        self.tables.len()
    }
}
