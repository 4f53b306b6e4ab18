//! The table side: tables of entities in key order, single writes, atomic
//! batches and paged queries.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

use time::OffsetDateTime;

use super::clock::{WriteClock, entity_etag};
use crate::backend::{
    Precondition, QueryPage, QuerySpec, StoredEntity, TableCreation, TableOp, Version,
};
use crate::entity::{EntityData, entity_size};
use crate::error::{Error, Result, what};
use crate::key::{PartitionKey, RowKey, TableName};
use crate::query::{Continuation, Row};

/// A row's position: the PartitionKey, a 0 unit, then the RowKey, all as
/// UTF-16 code units. Keys hold no control characters, so comparing
/// positions as slices orders rows by (PartitionKey, RowKey) in the service's
/// UTF-16 order, and a lookup needs no allocation (see [`with_position`]).
type Position = Box<[u16]>;

fn position(partition_key: &str, row_key: &str) -> Position {
    let mut out = Vec::with_capacity(partition_key.len() + 1 + row_key.len());
    out.extend(partition_key.encode_utf16());
    out.push(0);
    out.extend(row_key.encode_utf16());
    out.into_boxed_slice()
}

/// Runs `f` on the position of (`partition_key`, `row_key`), built on the
/// stack when the keys are short.
fn with_position<R>(partition_key: &str, row_key: &str, f: impl FnOnce(&[u16]) -> R) -> R {
    const INLINE: usize = 128;
    // UTF-8 takes at least as many bytes as UTF-16 takes units.
    if partition_key.len() + 1 + row_key.len() > INLINE {
        return f(&position(partition_key, row_key));
    }
    let mut buf = [0u16; INLINE];
    let mut len = 0;
    let units = partition_key
        .encode_utf16()
        .chain(std::iter::once(0))
        .chain(row_key.encode_utf16());
    for (slot, unit) in buf.iter_mut().zip(units) {
        *slot = unit;
        len += 1;
    }
    f(&buf[..len])
}

/// Where a continuation resumes: the first position at or after
/// (`partition_key`, `row_key`) in key order. A continuation is not checked
/// like a key, so a 0 unit in its PartitionKey (which would collide with
/// the separator) is handled apart: no stored PartitionKey holds one, so the
/// rows from there on are those whose PartitionKey is greater than the part
/// before it.
fn resume_position(partition_key: &str, row_key: &str) -> Position {
    match partition_key.find('\0') {
        Some(nul) => {
            let mut out: Vec<u16> = partition_key[..nul].encode_utf16().collect();
            out.push(1);
            out.into_boxed_slice()
        }
        None => position(partition_key, row_key),
    }
}

#[derive(Debug, Default)]
struct Table {
    rows: BTreeMap<Position, StoredEntity>,
}

/// What one checked operation will do once committed.
enum Planned {
    Put(EntityData),
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
    Error::from_service(404, Some("TableNotFound"), what::table(table.as_str()))
        .for_table(table.as_str())
}

/// Checks a condition against the stored row (`None`: absent); `If-Match: *`
/// on the wire means "if it exists".
fn check_condition(
    condition: &Precondition,
    existing: Option<&StoredEntity>,
    what: impl Fn() -> String,
) -> Result<()> {
    match (condition, existing) {
        (Precondition::Upsert, _) => Ok(()),
        (_, None) => Err(Error::from_service(404, Some("ResourceNotFound"), what())),
        (Precondition::IfMatch(etag), Some(row)) if etag.as_str() != "*" && row.etag != *etag => {
            Err(Error::from_service(
                412,
                Some("UpdateConditionNotSatisfied"),
                what(),
            ))
        }
        _ => Ok(()),
    }
}

impl Table {
    /// Decides what `op` does against the current rows, without changing
    /// anything. Its errors name the row.
    fn plan(&self, name: &TableName, op: TableOp) -> Result<Planned> {
        let (pk, rk) = (op.partition_key().clone(), op.row_key().clone());
        let op_name = op.name();
        let what = || what::entity(op_name, name.as_str(), &pk, &rk);
        let existing = with_position(pk.as_str(), rk.as_str(), |p| self.rows.get(p));
        let refused = |status, code| Err(Error::from_service(status, Some(code), what()));
        let planned = match op {
            TableOp::Insert(_) if existing.is_some() => refused(409, "EntityAlreadyExists"),
            TableOp::Insert(d) => Ok(Planned::Put(d)),
            TableOp::Replace(d, condition) => {
                check_condition(&condition, existing, what).map(|()| Planned::Put(d))
            }
            TableOp::Merge(mut d, condition) => check_condition(&condition, existing, what)
                .and_then(|()| {
                    let mut merged = existing
                        .map(|r| r.data.properties.clone())
                        .unwrap_or_default();
                    merged.merge_from(&d.properties);
                    // Each part was valid; their union may not be. The caller
                    // could not know, so this is the service's own 400.
                    if merged.len() > EntityData::MAX_PROPERTIES {
                        return refused(400, "TooManyProperties");
                    }
                    if entity_size(&d.partition_key, &d.row_key, &merged) > EntityData::MAX_BYTES {
                        return refused(400, "EntityTooLarge");
                    }
                    d.properties = merged;
                    Ok(Planned::Put(d))
                }),
            TableOp::Delete {
                partition_key,
                row_key,
                condition,
            } => check_condition(&condition, existing, what).map(|()| Planned::Remove {
                partition_key,
                row_key,
            }),
        };
        planned.map_err(|e| e.for_row(name.as_str(), &pk, &rk))
    }

    /// Applies a checked plan at `timestamp`.
    fn commit(&mut self, plan: Planned, timestamp: OffsetDateTime) -> Option<Version> {
        match plan {
            Planned::Put(data) => {
                let etag = entity_etag(timestamp);
                let row = StoredEntity {
                    data,
                    timestamp,
                    etag: etag.clone(),
                };
                let (pk, rk) = (row.data.partition_key.as_str(), row.data.row_key.as_str());
                match with_position(pk, rk, |p| self.rows.get_mut(p)) {
                    Some(slot) => *slot = row,
                    None => {
                        self.rows.insert(position(pk, rk), row);
                    }
                }
                Some(Version { etag, timestamp })
            }
            Planned::Remove {
                partition_key,
                row_key,
            } => {
                with_position(partition_key.as_str(), row_key.as_str(), |p| {
                    self.rows.remove(p)
                });
                None
            }
        }
    }
}

impl TableStore {
    pub(super) fn create_table(&mut self, table: &TableName) -> TableCreation {
        match self.tables.entry(table.clone()) {
            std::collections::hash_map::Entry::Occupied(_) => TableCreation::AlreadyExisted,
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(Table::default());
                TableCreation::Created
            }
        }
    }

    pub(super) fn delete_table(&mut self, table: &TableName) -> bool {
        self.tables.remove(table).is_some()
    }

    /// The tables by name, compared as the service compares them (without
    /// regard to case).
    pub(super) fn list_tables(&self) -> Vec<TableName> {
        let mut names: Vec<TableName> = self.tables.keys().cloned().collect();
        names.sort_by_cached_key(|n| n.as_str().to_ascii_lowercase());
        names
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
        Ok(with_position(
            partition_key.as_str(),
            row_key.as_str(),
            |p| t.rows.get(p).cloned(),
        ))
    }

    /// Applies one write, moving its entity into the table.
    pub(super) fn execute(
        &mut self,
        clock: &WriteClock,
        table: &TableName,
        op: TableOp,
    ) -> Result<Option<Version>> {
        op.validate(table.as_str())?;
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
            op.validate(table.as_str()).map_err(|e| match e {
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
                t.plan(table, op.clone()).map_err(|source| Error::Batch {
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
        let top = usize::from(spec.top.unwrap_or(QuerySpec::MAX_PAGE_SIZE));
        let scan_limit = scan_limit.max(1);
        let start = spec.continuation.as_ref().map(|c| {
            resume_position(
                &c.next_partition_key,
                c.next_row_key.as_deref().unwrap_or(""),
            )
        });
        // No continuation: the empty position, before every row.
        let start = start.unwrap_or_default();
        let mut rows = t
            .rows
            .range::<[u16], _>((Bound::Included(&*start), Bound::Unbounded));
        let select = spec.select.as_deref();
        let mut entities = Vec::new();
        let mut scanned = 0;
        while entities.len() < top && scanned < scan_limit {
            let Some((_, row)) = rows.next() else { break };
            scanned += 1;
            let matches = spec.filter.as_ref().is_none_or(|f| {
                f.matches(&Row {
                    partition_key: row.data.partition_key.as_str(),
                    row_key: row.data.row_key.as_str(),
                    timestamp: row.timestamp,
                    properties: &row.data.properties,
                })
            });
            if matches {
                let mut read = row.clone();
                if let Some(names) = select {
                    read.data.properties.retain_names(names);
                }
                entities.push(read);
            }
        }
        let continuation = rows.next().map(|(_, row)| Continuation {
            next_partition_key: row.data.partition_key.as_str().to_owned(),
            next_row_key: Some(row.data.row_key.as_str().to_owned()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::compare_keys;

    fn tuple_order(a: (&str, &str), b: (&str, &str)) -> std::cmp::Ordering {
        compare_keys(a.0, b.0).then_with(|| compare_keys(a.1, b.1))
    }

    #[test]
    fn positions_sort_as_key_tuples() {
        let keys = [
            ("", ""),
            ("", "a"),
            ("a", ""),
            ("a", "b"),
            ("a b", ""),
            ("ab", ""),
            ("a", "\u{ffff}"),
            ("a\u{ffff}", ""),
            ("a\u{10000}", ""),
            ("a\u{e000}", "x"),
            (&"p".repeat(200), "r"),
            (&"p".repeat(200), ""),
        ];
        for a in keys {
            for b in keys {
                let stack = with_position(a.0, a.1, |pa| with_position(b.0, b.1, |pb| pa.cmp(pb)));
                assert_eq!(stack, tuple_order(a, b), "{a:?} {b:?}");
                assert_eq!(position(a.0, a.1).cmp(&position(b.0, b.1)), stack);
                with_position(a.0, a.1, |pa| assert_eq!(*pa, *position(a.0, a.1)));
            }
        }
    }

    #[test]
    fn resume_position_handles_a_nul_in_the_partition_key() {
        let start = resume_position("a\u{0}z", "r");
        assert!(*position("a", "zzz") < *start);
        assert!(*position("a ", "") > *start);
        assert!(*position("ab", "") > *start);
        assert_eq!(resume_position("a", "b"), position("a", "b"));
    }
}
