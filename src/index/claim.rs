//! Claims on unique values, and the index rows of non-unique ones: the
//! conditional writes an indexed write makes before its entity's (see the
//! [module docs](super)).

use futures_util::future::join_all;

use super::{Def, ENTITY_PK, ENTITY_RK, Indexes, Key, target_of, value_key};
use crate::backend::{Precondition, StoredEntity, TableOp, WriteOptions};
use crate::entity::{EntityData, Properties, Value};
use crate::error::{Error, ErrorKind, Result};
use crate::key::{PartitionKey, RowKey};
use crate::rows::tombstone::{self, is_tombstone};
use crate::table::TableEnv;
use crate::table::{Resolver, lost_race as raced};
use std::sync::Arc;

pub(crate) const TXN: &str = "Txn";
/// The keys of the entity a unit took a claim over from within its
/// commit, which holds the value until the commit lands.
const PREV_PK: &str = "PrevPartitionKey";
const PREV_RK: &str = "PrevRowKey";

pub(crate) fn prev_of(data: &EntityData) -> Option<Keys> {
    super::keys_in(data, PREV_PK, PREV_RK)
}

const ATTEMPTS: usize = 16;

pub(crate) type Keys = (PartitionKey, RowKey);

/// Whether an entity's stored `properties` hold `key` in index `def`.
pub(crate) fn holds(def: &Def, properties: &Properties, key: &str) -> bool {
    !is_tombstone(properties)
        && properties
            .get(&def.property)
            .and_then(|v| value_key(v).ok())
            .is_some_and(|k| k == key)
}

fn index_row(
    indexes: &Indexes,
    def: &Def,
    key: &Key,
    owner: &Keys,
    txn: &str,
    prev: Option<&Keys>,
) -> Result<EntityData> {
    let mut properties = Properties::with_capacity(2);
    properties.insert_static(ENTITY_PK, Value::String(owner.0.as_str().to_owned()));
    properties.insert_static(ENTITY_RK, Value::String(owner.1.as_str().to_owned()));
    let pk = indexes.partition(def, &key.key)?;
    let mut data = crate::rows::row(&pk, &Indexes::row(def, &owner.0, &owner.1)?, properties);
    if def.unique {
        data.properties
            .insert_static(TXN, Value::String(txn.to_owned()));
    }
    if let Some((pk, rk)) = prev {
        data.properties
            .insert_static(PREV_PK, Value::String(pk.as_str().to_owned()));
        data.properties
            .insert_static(PREV_RK, Value::String(rk.as_str().to_owned()));
    }
    Ok(data)
}

/// Sends one index write (never through a fence).
async fn send(env: &Arc<TableEnv>, table: &crate::key::TableName, op: TableOp) -> Result<()> {
    env.backend
        .execute(table, op, &WriteOptions::new())
        .await
        .map(|_| ())
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Claimant<'a> {
    pub(crate) owner: &'a Keys,
    pub(crate) txn: &'a str,
    /// An entity the same unit's commit frees the value from: its claim
    /// is taken over naming it, untouched (see `PREV_PK`).
    pub(crate) freed_by_unit: Option<&'a Keys>,
    /// The partitions whose locks a unit holds: a mark whose primary it
    /// holds is taken off at once.
    pub(crate) held: &'a [PartitionKey],
}

impl<'a> Claimant<'a> {
    pub(crate) fn plain(owner: &'a Keys, txn: &'a str) -> Self {
        Claimant {
            owner,
            txn,
            freed_by_unit: None,
            held: &[],
        }
    }
}

/// Sets value `key` of index `def` for `who`'s entity: its index row, or
/// of a unique index its claim (see "Writes" in the module docs).
///
/// # Errors
/// [`Error::ValueTaken`] when another entity holds the value;
/// [`Error::Timeout`] after [`ATTEMPTS`] lost races.
pub(crate) async fn set(
    env: &Arc<TableEnv>,
    indexes: &Indexes,
    def: &Def,
    key: &Key,
    who: &Claimant<'_>,
) -> Result<()> {
    if !def.unique {
        return add_row(env, indexes, def, key, who.owner).await;
    }
    let Claimant {
        owner,
        txn,
        freed_by_unit,
        held,
    } = *who;
    let plain = index_row(indexes, def, key, owner, txn, None)?;
    let table = &indexes.index_table;
    let started = tokio::time::Instant::now();
    let mut pauses = env.conflict_retry.backoff();
    for attempt in 0..ATTEMPTS {
        // Racing writers step back as `update_with` does.
        if attempt > 0
            && let Some(pause) = pauses.next()
        {
            tokio::time::sleep(pause).await;
        }
        match send(env, table, TableOp::Insert(plain.clone())).await {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let found = env.read_row(table, &plain.partition_key, &plain.row_key);
        let Some(current) = found.await? else {
            continue;
        };
        let holder = target_of(&current.data);
        let mut take_as = plain.clone();
        if holder.is_some() && holder.as_ref() == freed_by_unit {
            take_as = index_row(indexes, def, key, owner, txn, freed_by_unit)?;
        } else {
            // Every other entity the claim names is neutralized, the one a
            // unit frees (which rewriting the claim drops) included.
            let prev = prev_of(&current.data);
            let named: Vec<Keys> = if holder.as_ref() == Some(owner) {
                if prev.is_some() && prev.as_ref() == freed_by_unit {
                    // The caller's own unit frees it: it stays named.
                    take_as = index_row(indexes, def, key, owner, txn, freed_by_unit)?;
                    Vec::new()
                } else {
                    prev.filter(|prev| prev != owner).into_iter().collect()
                }
            } else {
                holder.into_iter().chain(prev).collect()
            };
            let mut raced = false;
            for named in named {
                match neutralize(env, indexes, def, &key.key, &named, held).await? {
                    Neutralized::Holds => {
                        return Err(indexes.duplicate(def, &key.value, Some(named)));
                    }
                    Neutralized::Raced => {
                        raced = true;
                        break;
                    }
                    Neutralized::Done => {}
                }
            }
            if raced {
                continue;
            }
        }
        let take = TableOp::Replace(take_as, Precondition::IfMatch(current.etag));
        if crate::rows::write_as_read(env.backend.as_ref(), table, take).await? {
            return Ok(());
        }
    }
    Err(Error::Timeout {
        what: format!(
            "claiming {}.{} = {} for entity ({:?}, {:?}): other writers of the value kept changing its claim ({ATTEMPTS} tries)",
            indexes.type_name,
            def.field,
            super::show(&key.value),
            owner.0.as_str(),
            owner.1.as_str()
        ),
        after: started.elapsed(),
    })
}

pub(crate) enum Neutralized {
    Holds,
    /// The owner's row changed meanwhile: look again.
    Raced,
    /// No pending write of the owner can succeed any more.
    Done,
}

/// Makes any pending write of entity `owner` fail unless it holds `key`
/// of index `def` now (invariant 2 of the module docs).
pub(crate) async fn neutralize(
    env: &Arc<TableEnv>,
    indexes: &Indexes,
    def: &Def,
    key: &str,
    owner: &Keys,
    held: &[PartitionKey],
) -> Result<Neutralized> {
    let table = &indexes.table;
    env.ensure_table(table).await?;
    let row = Resolver::new(env, held.to_vec())
        .read(table, (&owner.0, &owner.1))
        .await?;
    let op = match row {
        Some(row) if holds(def, &row.data.properties, key) => return Ok(Neutralized::Holds),
        Some(row) => {
            tracing::debug!(table = %table, partition = %owner.0, row = %owner.1, "touching the row of a stalled claim's owner");
            TableOp::Replace(row.data, Precondition::IfMatch(row.etag))
        }
        None => {
            tracing::debug!(table = %table, partition = %owner.0, row = %owner.1, "leaving a tombstone where a stalled claim's owner is absent");
            TableOp::Insert(tombstone::data(&owner.0, &owner.1, "claim"))
        }
    };
    match send(env, table, op).await {
        Ok(()) => Ok(Neutralized::Done),
        Err(e) if raced(&e) => Ok(Neutralized::Raced),
        Err(e) => Err(e),
    }
}

/// Writes the index row of a non-unique value, unconditionally (lookups
/// check the owner holds the value).
async fn add_row(
    env: &Arc<TableEnv>,
    indexes: &Indexes,
    def: &Def,
    key: &Key,
    owner: &Keys,
) -> Result<()> {
    let row = index_row(indexes, def, key, owner, "", None)?;
    send(
        env,
        &indexes.index_table,
        TableOp::Replace(row, Precondition::Upsert),
    )
    .await
}

/// Reads the index rows of the values `owner` frees that name it, to
/// remove once the write freeing them succeeded.
pub(crate) async fn read_freed(
    env: &Arc<TableEnv>,
    indexes: &Indexes,
    frees: &[(usize, Key)],
    owner: &Keys,
) -> Result<Vec<StoredEntity>> {
    let reads = frees.iter().map(|(def, key)| async move {
        let d = &indexes.defs[*def];
        let ipk = indexes.partition(d, &key.key)?;
        let irk = Indexes::row(d, &owner.0, &owner.1)?;
        let row = env.backend.get(&indexes.index_table, &ipk, &irk).await?;
        Ok::<_, Error>(row.filter(|r| target_of(&r.data).as_ref() == Some(owner)))
    });
    join_all(reads)
        .await
        .into_iter()
        .filter_map(Result::transpose)
        .collect()
}

/// Removes the rows [`read_freed`] read at their ETags, best effort (a
/// row left behind is a stale claim).
pub(crate) async fn remove_freed(env: &Arc<TableEnv>, indexes: &Indexes, freed: Vec<StoredEntity>) {
    let deletes = freed.iter().map(|row| async move {
        let deleted = crate::rows::delete_as_read(env.backend.as_ref(), &indexes.index_table, row);
        if let Err(e) = deleted.await {
            tracing::debug!(table = %indexes.index_table, error = %e, "removing a freed index row failed; it stays as a stale claim");
        }
    });
    join_all(deletes).await;
}
