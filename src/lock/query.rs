//! [`UnitQuery`]: typed queries over the partitions a [`Unit`] holds, seeing
//! its staged writes.

use std::collections::BTreeSet;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds as _};

use super::slot::Slot;
use super::unit::Unit;
use crate::backend::QuerySpec;
use crate::entity::{Entity, Versioned};
use crate::error::Result;
use crate::key::{PartitionKey, RowKey};
use crate::query::{Row, TypedFilter, scope_builders, scope_filter};
use crate::rows::fence::is_fence_row;
use crate::table::query_request;

/// A typed query over the partitions of a [`Unit`] (or one, named with
/// [`UnitQuery::partition`]), built as a [`Table::query`](crate::Table::query),
/// answered as the unit sees the rows; every row returned is recorded as
/// read.
///
/// ```
/// use leasehold::{Entity, Store};
///
/// #[derive(Entity, Clone, Debug)]
/// #[entity(table = "Lines")]
/// struct Line { #[entity(partition_key)] order: String, #[entity(row_key)] id: String, qty: i64 }
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let store = Store::memory();
/// store.table::<Line>().insert(Line { order: "o1".into(), id: "l1".into(), qty: 2 }).await?;
/// let mut unit = store.lock("o1").await?;
/// unit.insert(&Line { order: "o1".into(), id: "l2".into(), qty: 5 })?;
/// let c = Line::columns();
/// let big = unit.query::<Line>().row_key_prefix("l").filter(c.qty.gt(1)).all().await?;
/// assert_eq!(big.len(), 2); // the stored line and the staged one
/// # unit.abandon().await?;
/// # Ok::<(), leasehold::Error>(()) }).unwrap();
/// ```
#[must_use = "a UnitQuery does nothing until `all().await`"]
pub struct UnitQuery<'u, E> {
    unit: &'u mut Unit,
    partition: Option<Result<PartitionKey>>,
    rows: (Bound<String>, Bound<String>),
    filter: Option<TypedFilter<E>>,
    entity: PhantomData<fn() -> E>,
}

impl<E> std::fmt::Debug for UnitQuery<'_, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnitQuery").finish_non_exhaustive()
    }
}

impl Unit {
    /// A typed query over this unit's partitions; see [`UnitQuery`].
    pub fn query<E: Entity>(&mut self) -> UnitQuery<'_, E> {
        UnitQuery {
            unit: self,
            partition: None,
            rows: (Bound::Unbounded, Bound::Unbounded),
            filter: None,
            entity: PhantomData,
        }
    }
}

impl<E: Entity> UnitQuery<'_, E> {
    scope_builders!("Only entities of this partition (one the unit holds).");

    /// Every matching entity as the unit sees it: by partition (in
    /// canonical order), then by row key.
    ///
    /// # Errors
    /// [`crate::Error::Invalid`] for a bad filter or key, or a partition the
    /// unit does not hold (before any request); otherwise as [`Unit::get`].
    pub async fn all(self) -> Result<Vec<Versioned<E>>> {
        let UnitQuery {
            unit,
            partition,
            rows,
            filter,
            ..
        } = self;
        let filter = filter.map(TypedFilter::into_filter).transpose()?;
        let parts: Vec<usize> = match partition {
            Some(pk) => vec![unit.part_of(&pk?, "query")?],
            None if unit.ttl.is_some() => {
                return Err(crate::Error::invalid(
                    "query of a transaction",
                    "name its partition",
                ));
            }
            None => (0..unit.parts.len()).collect(),
        };
        let table = unit.table_of::<E>()?;
        let mut specs = Vec::with_capacity(parts.len());
        for &part in &parts {
            let pk = unit.parts[part].pk.as_str();
            let all = scope_filter(Some(pk), &rows, filter.clone());
            let spec = QuerySpec {
                filter: all,
                ..QuerySpec::default()
            };
            spec.validate()?;
            specs.push((part, spec));
        }
        unit.env.ensure_table(&table).await?;
        let backend = unit.env.backend.clone();
        let mut out = Vec::new();
        for (part, mut spec) in specs {
            let slot = Slot {
                part,
                table: table.clone(),
            };
            // Rows as stored now; a row the unit read before keeps the
            // version it read.
            let mut seen: BTreeSet<RowKey> = BTreeSet::new();
            loop {
                // Rows the filter matches once resolved included (see
                // `query_request`); the filter is applied below, to each
                // row as the unit sees it.
                let page = backend.query(&table, &query_request(&spec).0).await?;
                let mut rows = Vec::with_capacity(page.entities.len());
                for row in page.entities {
                    let key = (slot.clone(), row.data.row_key.clone());
                    if unit.reads.contains_key(&key) {
                        rows.push(row);
                    } else if let Some(row) = unit.resolver().resolve(&table, row).await? {
                        rows.push(row);
                    }
                }
                // Answered while the unit's leases may have run out: another
                // holder may have committed meanwhile.
                unit.ensure_held(std::time::Duration::ZERO)?;
                // Fence rows (fenced writes) and commits' decision rows are
                // not the caller's entities.
                for row in rows.into_iter().filter(|r| {
                    !is_fence_row(r.data.row_key.as_str())
                        && !crate::rows::decision::is_decision_row(&r.data.row_key)
                }) {
                    let key = (slot.clone(), row.data.row_key.clone());
                    seen.insert(row.data.row_key.clone());
                    unit.reads.entry(key).or_insert(Some(row));
                }
                match page.continuation {
                    Some(c) => spec.continuation = Some(c),
                    None => break,
                }
            }
            // Rows the unit read or stages in range, whatever the service
            // says of them now.
            let known = unit.reads.keys().chain(unit.staged.keys());
            for (_, rk) in known.filter(|k| k.0 == slot && rows.contains(&k.1.as_str().to_owned()))
            {
                seen.insert(rk.clone());
            }
            for rk in seen {
                let key = (slot.clone(), rk);
                let Some((view, props)) = unit.view::<E>(&key)? else {
                    continue;
                };
                let matches = filter.as_ref().is_none_or(|f| {
                    f.matches(&Row {
                        partition_key: unit.parts[part].pk.as_str(),
                        row_key: key.1.as_str(),
                        timestamp: view.timestamp(),
                        properties: &props,
                    })
                });
                if matches {
                    out.push(view);
                }
            }
        }
        Ok(out)
    }
}
