//! Verifying and rebuilding the index rows of a table: the orphan and
//! missing rows writers outside leasehold leave.

use std::collections::BTreeMap;

use super::claim::{self, Claimant, Neutralized};
use super::{DEFS_PARTITION, Indexes, read_defs, target_of, value_key_of};
use crate::backend::{QuerySpec, StoredEntity};
use crate::error::{Error, Result};
use crate::key::{PartitionKey, RowKey, TableName};
use crate::rows::Pages;
use crate::table::TableEnv;
use std::sync::Arc;

/// What [`Store::verify_indexes`](crate::Store::verify_indexes) found, or [`Store::rebuild_indexes`](crate::Store::rebuild_indexes)
/// found and fixed, in one table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct IndexReport {
    /// The entity table, as stored (with the store's table prefix).
    pub table: String,
    /// Entities read.
    pub entities: u64,
    /// Index rows read.
    pub index_rows: u64,
    /// Indexed values whose entity no index row names, one line each.
    pub missing: Vec<String>,
    /// Index rows that name no entity, one line each.
    pub orphans: Vec<String>,
    /// Index rows naming an entity that does not hold their value:
    /// harmless; a rebuild removes them.
    pub stale: u64,
    /// Values of unique fields held by several entities (not fixed).
    pub duplicates: Vec<DuplicateValue>,
    /// Index rows written or deleted by a rebuild.
    pub repaired: u64,
}

impl IndexReport {
    /// Whether nothing is missing, orphaned or duplicated.
    pub fn is_consistent(&self) -> bool {
        self.missing.is_empty() && self.orphans.is_empty() && self.duplicates.is_empty()
    }
}

/// A value of a unique field that several entities hold, as
/// [`IndexReport::duplicates`] lists it (example: the [`index`](crate::index)
/// module docs, "Adding an index to a populated table").
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DuplicateValue {
    /// The entity's type (or table name) and the field: `Customer.email`.
    pub index: String,
    /// The field.
    pub field: String,
    /// The value as text (a date-time in RFC 3339, UTC).
    pub value: String,
    /// The partition of the value's index row.
    pub partition_key: PartitionKey,
    /// The keys of the entities holding the value, in key order.
    pub entities: Vec<(PartitionKey, RowKey)>,
}

impl std::fmt::Display for DuplicateValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list: Vec<String> = self.entities.iter().map(show_entity).collect();
        write!(
            f,
            "{} = {:?} is held by {} entities: {}",
            self.index,
            self.value,
            self.entities.len(),
            list.join(", ")
        )
    }
}

/// An index row that should exist.
#[derive(Debug, Clone)]
struct Expected {
    def: usize,
    key: super::Key,
    entity: (PartitionKey, RowKey),
}

enum Problem {
    Missing(Expected),
    /// A row naming no entity, or one that does not hold its value.
    Orphan {
        row: StoredEntity,
        def: Option<usize>,
    },
}

/// Every row of `table` (but the definitions partition), page after page.
async fn scan(
    env: &Arc<TableEnv>,
    table: &TableName,
    select: Option<Vec<String>>,
    mut each: impl FnMut(StoredEntity) -> Result<()>,
) -> Result<()> {
    let spec = QuerySpec {
        select,
        top: Some(QuerySpec::MAX_PAGE_SIZE),
        ..QuerySpec::default()
    };
    let mut pages = Pages::of(env.backend.as_ref(), table, spec);
    while let Some(page) = pages.next().await? {
        // A commit's decision row, a fence row, a tombstone: leasehold's
        // own, neither an entity nor an index row.
        for row in page.into_iter().filter(|row| {
            row.data.partition_key.as_str() != DEFS_PARTITION
                && !crate::rows::is_hidden(&row.data.row_key, &row.data.properties)
        }) {
            each(row)?;
        }
    }
    Ok(())
}

/// The entities an index row names (see `claim::prev_of`).
fn named(data: &crate::entity::EntityData) -> Vec<(PartitionKey, RowKey)> {
    target_of(data)
        .into_iter()
        .chain(claim::prev_of(data))
        .collect()
}

fn names_one_of(row: &StoredEntity, holders: &[Expected]) -> bool {
    named(&row.data)
        .iter()
        .any(|t| holders.iter().any(|h| &h.entity == t))
}

fn show_entity(e: &(PartitionKey, RowKey)) -> String {
    format!("({:?}, {:?})", e.0.as_str(), e.1.as_str())
}

async fn check<P: FnMut(u64) + ?Sized>(
    env: &Arc<TableEnv>,
    indexes: &Indexes,
    progress: &mut P,
) -> Result<(IndexReport, Vec<Problem>)> {
    let mut report = IndexReport {
        table: indexes.table.as_str().to_owned(),
        ..IndexReport::default()
    };
    let mut scanned = 0u64;
    // Index row keys -> the entities that should have it.
    let mut expected: BTreeMap<(PartitionKey, RowKey), Vec<Expected>> = BTreeMap::new();
    let mut select: Vec<String> = indexes.defs.iter().map(|d| d.property.clone()).collect();
    select.push(crate::rows::tombstone::PROPERTY.to_owned());
    scan(env, &indexes.table, Some(select), |row| {
        report.entities += 1;
        scanned += 1;
        progress(scanned);
        let entity = (row.data.partition_key.clone(), row.data.row_key.clone());
        let keys = indexes.keys(Some(&row.data.properties))?;
        for (def_i, key) in keys.into_iter().enumerate() {
            let Some(key) = key else { continue };
            let def = &indexes.defs[def_i];
            let ipk = indexes.partition(def, &key.key)?;
            let irk = Indexes::row(def, &entity.0, &entity.1)?;
            expected.entry((ipk, irk)).or_default().push(Expected {
                def: def_i,
                key,
                entity: entity.clone(),
            });
        }
        Ok(())
    })
    .await?;
    let mut actual: BTreeMap<(PartitionKey, RowKey), StoredEntity> = BTreeMap::new();
    scan(env, &indexes.index_table, None, |row| {
        report.index_rows += 1;
        scanned += 1;
        progress(scanned);
        let keys = (row.data.partition_key.clone(), row.data.row_key.clone());
        actual.insert(keys, row);
        Ok(())
    })
    .await?;

    let mut problems = Vec::new();
    for (keys, holders) in &expected {
        let def = &indexes.defs[holders[0].def];
        let describe = |e: &Expected| {
            format!(
                "{}.{} = {} of entity {}",
                indexes.type_name,
                def.field,
                super::show(&e.key.value),
                show_entity(&e.entity)
            )
        };
        if holders.len() > 1 {
            report.duplicates.push(DuplicateValue {
                index: format!("{}.{}", indexes.type_name, def.field),
                field: def.field.clone(),
                value: super::text(&holders[0].key.value),
                partition_key: keys.0.clone(),
                entities: holders.iter().map(|h| h.entity.clone()).collect(),
            });
        }
        if !actual.get(keys).is_some_and(|r| names_one_of(r, holders)) {
            report.missing.push(describe(&holders[0]));
            problems.push(Problem::Missing(holders[0].clone()));
        }
    }
    for (keys, row) in actual {
        let target = target_of(&row.data);
        let def = crate::key::CompositeKey::split(keys.0.as_str())
            .ok()
            .and_then(|parts| {
                indexes
                    .defs
                    .iter()
                    .position(|d| parts.first().is_some_and(|p| p == &d.property))
            });
        if !expected.get(&keys).is_some_and(|hs| names_one_of(&row, hs)) {
            // A unique row pointing at a non-holder was counted as missing
            // for the holder; the fix overwrites it.
            if def.is_some_and(|d| indexes.defs[d].unique) && expected.contains_key(&keys) {
                continue;
            }
            match &target {
                Some(_) => report.stale += 1,
                None => report.orphans.push(format!(
                    "index row ({:?}, {:?}) names no entity",
                    keys.0.as_str(),
                    keys.1.as_str(),
                )),
            }
            problems.push(Problem::Orphan { row, def });
        }
    }
    Ok((report, problems))
}

/// Fixes one problem, re-checked first, as an indexed write would: a
/// missing value is claimed; a row naming a non-holder is removed once
/// that entity is neutralized. Answers whether a row was written.
async fn fix(env: &Arc<TableEnv>, indexes: &Indexes, problem: Problem) -> Result<bool> {
    match problem {
        Problem::Missing(e) => {
            let who = Claimant::plain(&e.entity, "rebuilt");
            match claim::set(env, indexes, &indexes.defs[e.def], &e.key, &who).await {
                Ok(()) => Ok(true),
                // Held by another entity as well: a duplicate, reported.
                Err(Error::ValueTaken { .. }) => Ok(false),
                Err(err) => Err(err),
            }
        }
        Problem::Orphan { row, def } => {
            let ipk = row.data.partition_key.clone();
            let irk = row.data.row_key.clone();
            let Some(now) = env.backend.get(&indexes.index_table, &ipk, &irk).await? else {
                return Ok(false);
            };
            if let (Some(def), Some(target)) = (def, target_of(&now.data)) {
                let Some(key) = value_key_of(&ipk) else {
                    return Ok(false);
                };
                match claim::neutralize(env, indexes, &indexes.defs[def], &key, &target, &[])
                    .await?
                {
                    Neutralized::Done => {}
                    Neutralized::Holds | Neutralized::Raced => return Ok(false),
                }
            }
            crate::rows::delete_as_read(env.backend.as_ref(), &indexes.index_table, &now).await
        }
    }
}

/// The stale index rows of `indexes`, each with its index, and how many
/// rows were read: for [`Store::sweep`](crate::Store::sweep).
pub(crate) async fn stale_rows(
    env: &Arc<TableEnv>,
    indexes: &Indexes,
    progress: &mut (dyn FnMut(u64) + Send),
) -> Result<(u64, Vec<(usize, StoredEntity)>)> {
    let (report, problems) = check(env, indexes, progress).await?;
    let stale = problems
        .into_iter()
        .filter_map(|p| match p {
            Problem::Orphan {
                row,
                def: Some(def),
            } if target_of(&row.data).is_some() => Some((def, row)),
            _ => None,
        })
        .collect();
    Ok((report.entities + report.index_rows, stale))
}

/// Whether no entity index row `row` names holds its value now.
pub(crate) async fn still_stale(
    env: &Arc<TableEnv>,
    indexes: &Indexes,
    def: usize,
    row: &StoredEntity,
) -> Result<bool> {
    let Some(key) = value_key_of(&row.data.partition_key) else {
        return Ok(false);
    };
    for (pk, rk) in named(&row.data) {
        let found = crate::table::Resolver::new(env, Vec::new())
            .read(&indexes.table, (&pk, &rk))
            .await?;
        if found.is_some_and(|r| claim::holds(&indexes.defs[def], &r.data.properties, &key)) {
            return Ok(false);
        }
    }
    Ok(true)
}

pub(crate) async fn defs_of(env: &Arc<TableEnv>, table: &str) -> Result<Indexes> {
    read_defs(env, table).await?.ok_or_else(|| Error::NotFound {
        what: format!(
            "index definitions of table `{table}` (table `{table}{}`, partition `{DEFS_PARTITION}`): no indexed entity was written to it through leasehold",
            super::TABLE_SUFFIX
        ),
        code: None,
        table: Some(format!("{table}{}", super::TABLE_SUFFIX)),
        row: None,
    })
}

/// Checks `indexes`, and when `repair` fixes what it found.
pub(crate) async fn report(
    env: &Arc<TableEnv>,
    indexes: &Indexes,
    repair: bool,
    progress: &mut dyn FnMut(u64),
) -> Result<IndexReport> {
    let (mut report, problems) = check(env, indexes, progress).await?;
    for problem in problems.into_iter().filter(|_| repair) {
        if fix(env, indexes, problem).await? {
            report.repaired += 1;
        }
    }
    Ok(report)
}
