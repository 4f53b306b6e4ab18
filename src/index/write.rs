//! The writes of a [`Table`] of an indexed type: a unit of work over the
//! entity's partition and the index partitions it touches (see the
//! [module docs](super)).

use std::sync::Arc;

use super::Indexes;
use crate::entity::{Entity, EntityData, Properties, Versioned};
use crate::error::{Error, Result};
use crate::key::{PartitionKey, RowKey};
use crate::table::Table;

/// A write of a [`Table`], as the index machinery routes it.
pub(crate) enum IndexedWrite<'a, E> {
    Insert(&'a E),
    Replace(&'a Versioned<E>),
    Merge(&'a Versioned<E>),
    Delete(&'a Versioned<E>),
    Upsert(&'a E),
    UpsertMerge(&'a E),
    ReplaceUnconditionally(&'a E),
    DeleteUnconditionally(&'a PartitionKey, &'a RowKey),
}

/// How many times a write whose index values changed between its first
/// read and its locks starts over.
const ATTEMPTS: usize = 8;

/// Sends `write` as an indexed write when it has to be one: `Ok(None)` when
/// the type has no indexes or the write leaves every indexed value as it is
/// (the caller then sends the plain write); otherwise the entity as stored
/// after the write (`None` for a delete).
pub(crate) async fn route<E: Entity>(
    table: &Table<E>,
    write: IndexedWrite<'_, E>,
) -> Result<Option<Option<Versioned<E>>>> {
    if E::INDEXES.is_empty() {
        return Ok(None);
    }
    // An indexed write is a unit over several partitions, which a fence
    // (one partition's fence row per transaction) cannot cover: refused
    // rather than sent unfenced.
    if table.fence.is_some() {
        return Err(Error::Invalid {
            what: format!("fenced write of {}", std::any::type_name::<E>()),
            why: "a type with #[entity(unique)] or #[entity(index)] fields cannot be \
                  written through Table::fenced (its writes span the index partitions)"
                .into(),
        });
    }
    let Some(store) = table.store.as_ref() else {
        return Ok(None);
    };
    let Some(indexes) = Indexes::of::<E>(store.tables())? else {
        return Ok(None);
    };
    use IndexedWrite as W;
    let new: Option<EntityData> = match &write {
        W::Insert(e) | W::Upsert(e) | W::UpsertMerge(e) | W::ReplaceUnconditionally(e) => {
            Some(e.encode()?)
        }
        W::Replace(v) | W::Merge(v) => Some(v.entity().encode()?),
        W::Delete(_) | W::DeleteUnconditionally(..) => None,
    };
    let (pk, rk) = match (&write, &new) {
        (_, Some(d)) => (d.partition_key.clone(), d.row_key.clone()),
        (W::Delete(v), None) => (v.partition_key()?, v.row_key()?),
        (W::DeleteUnconditionally(pk, rk), None) => ((*pk).clone(), (*rk).clone()),
        _ => {
            return Err(Error::Inconsistent {
                what: "an indexed write without keys".into(),
            });
        }
    };
    let merge = matches!(write, W::Merge(_) | W::UpsertMerge(_));
    let after = |before: Option<&Properties>| -> Option<Properties> {
        let new = new.as_ref()?;
        if merge {
            let mut base = before.cloned().unwrap_or_default();
            base.merge_from(&new.properties);
            Some(base)
        } else {
            Some(new.properties.clone())
        }
    };
    // What the row holds, when the value knows it without a read: the
    // conditional writes succeed only on exactly that version.
    let known: Option<Properties> = match &write {
        W::Replace(v) | W::Merge(v) | W::Delete(v) => {
            v.stored_properties().map(Arc::unwrap_or_clone)
        }
        _ => None,
    };
    if let (Some(stored), false) = (&known, matches!(write, W::Delete(_)))
        && indexes.keys(Some(stored))? == indexes.keys(after(Some(stored)).as_ref())?
    {
        return Ok(None);
    }
    if let (W::Delete(_), Some(stored)) = (&write, &known)
        && indexes.keys(Some(stored))?.iter().all(Option::is_none)
    {
        return Ok(None);
    }
    if let (W::Insert(_), Some(new)) = (&write, &new)
        && indexes
            .keys(Some(&new.properties))?
            .iter()
            .all(Option::is_none)
    {
        return Ok(None);
    }
    let mut hint: Option<Properties> = match &write {
        W::Insert(_) => None,
        W::Replace(_) | W::Merge(_) | W::Delete(_) if known.is_some() => known.clone(),
        _ => {
            store.ensure_table(&indexes.table).await?;
            let stored = store.backend().get(&indexes.table, &pk, &rk).await?;
            let stored = store.resolve_row(&indexes.table, stored).await?;
            // A conditional replace or merge of the version just read that
            // leaves every indexed value alone (`update_with`, say) is the
            // plain write: its condition holds only on that version.
            if let (W::Replace(v) | W::Merge(v), Some(s)) = (&write, &stored)
                && &s.etag == v.etag()
                && indexes.keys(Some(&s.data.properties))?
                    == indexes.keys(after(Some(&s.data.properties)).as_ref())?
            {
                return Ok(None);
            }
            stored.map(|s| s.data.properties)
        }
    };
    let started = tokio::time::Instant::now();
    for _ in 0..ATTEMPTS {
        let mut parts = vec![pk.clone()];
        parts.extend(indexes.partitions_of(&indexes.keys(hint.as_ref())?)?);
        parts.extend(indexes.partitions_of(&indexes.keys(after(hint.as_ref()).as_ref())?)?);
        let mut unit = store.lock_many(parts.iter().cloned()).await?;
        let staged = stage(&mut unit, &write, &pk, &rk, &indexes, &parts, &after).await;
        match staged {
            Ok(Staged::Ready) => {}
            Ok(Staged::Moved(now)) => {
                // An indexed value changed since the first read: start over
                // with the locks of what is stored now.
                hint = now;
                unit.abandon().await?;
                continue;
            }
            Err(e) => {
                let _ = unit.abandon().await;
                return Err(e);
            }
        }
        unit.commit().await.map_err(unbatch)?;
        return match write {
            W::Delete(_) | W::DeleteUnconditionally(..) => Ok(Some(None)),
            _ => match table.get(pk.clone(), rk.clone()).await? {
                Some(v) => Ok(Some(Some(v))),
                None => Err(Error::NotFound {
                    what: format!(
                        "entity ({pk:?}, {rk:?}) in table `{}`: deleted right after the write, before it could be read back",
                        E::TABLE
                    ),
                    code: Some("ResourceNotFound".into()),
                    table: Some(E::TABLE.into()),
                    row: Some(Box::new((pk, rk))),
                }),
            },
        };
    }
    Err(Error::Timeout {
        what: format!(
            "an indexed write of {} ({pk:?}, {rk:?}): its indexed values kept changing under it ({ATTEMPTS} attempts)",
            indexes.type_name
        ),
        // The time the attempts took, not a deadline: what ran out was the
        // attempts.
        after: started.elapsed(),
    })
}

/// What staging found.
enum Staged {
    /// The write is staged.
    Ready,
    /// The stored row needs locks the unit does not hold: what it holds.
    Moved(Option<Properties>),
}

/// Reads the row under the unit's locks, checks the write's condition and
/// the locks it needs, and stages it.
async fn stage<E: Entity>(
    unit: &mut crate::lock::Unit,
    write: &IndexedWrite<'_, E>,
    pk: &PartitionKey,
    rk: &RowKey,
    indexes: &Indexes,
    parts: &[PartitionKey],
    after: &(dyn Fn(Option<&Properties>) -> Option<Properties> + Sync),
) -> Result<Staged> {
    use IndexedWrite as W;
    let stored: Option<Versioned<E>> = unit.get_in::<E>(pk.clone(), rk.clone()).await?;
    let now = match &stored {
        Some(v) => Some(
            v.stored_properties()
                .map(Arc::unwrap_or_clone)
                .ok_or_else(|| Error::Inconsistent {
                    what: "a row read in a unit without its properties".into(),
                })?,
        ),
        None => None,
    };
    if let (W::Insert(_), Some(_)) = (write, &stored) {
        return Err(Error::AlreadyExists {
            what: format!("entity ({pk:?}, {rk:?}) in table `{}`", E::TABLE),
            code: Some("EntityAlreadyExists".into()),
            table: Some(E::TABLE.into()),
            row: Some(Box::new((pk.clone(), rk.clone()))),
        });
    }
    let mut needed = indexes.partitions_of(&indexes.keys(now.as_ref())?)?;
    needed.extend(indexes.partitions_of(&indexes.keys(after(now.as_ref()).as_ref())?)?);
    if needed.iter().any(|p| !parts.contains(p)) {
        return Ok(Staged::Moved(now));
    }
    let row = || Some(Box::new((pk.clone(), rk.clone())));
    let missing = || Error::NotFound {
        what: format!("entity ({pk:?}, {rk:?}) in table `{}`", E::TABLE),
        code: Some("ResourceNotFound".into()),
        table: Some(E::TABLE.into()),
        row: row(),
    };
    match write {
        W::Insert(e) => unit.insert(*e)?,
        W::Replace(v) | W::Merge(v) | W::Delete(v) => {
            let Some(s) = &stored else {
                return Err(missing());
            };
            if s.etag() != v.etag() {
                return Err(Error::Conflict {
                    what: format!(
                        "entity ({pk:?}, {rk:?}) in table `{}`: changed since it was read",
                        E::TABLE
                    ),
                    code: Some("UpdateConditionNotSatisfied".into()),
                    table: Some(E::TABLE.into()),
                    row: row(),
                });
            }
            match write {
                W::Replace(v) => unit.replace(*v)?,
                W::Merge(v) => unit.merge(*v)?,
                _ => unit.delete(*v)?,
            }
        }
        W::Upsert(e) => unit.upsert(*e)?,
        W::UpsertMerge(e) => unit.upsert_merge(*e)?,
        W::ReplaceUnconditionally(e) => {
            if stored.is_none() {
                return Err(missing());
            }
            // The row exists and its lock is held: an upsert replaces it.
            unit.upsert(*e)?;
        }
        W::DeleteUnconditionally(..) => match &stored {
            Some(s) => unit.delete(s)?,
            None => return Err(missing()),
        },
    }
    Ok(Staged::Ready)
}

/// The error of the one refused operation of a unit's commit, as the
/// single write would have reported it.
fn unbatch(e: Error) -> Error {
    match e {
        Error::Batch { source, .. } => *source,
        other => other,
    }
}

impl<E: Entity> Table<E> {
    /// The index partitions of `entity`'s indexed values (see
    /// [`crate::index`]): the partitions a [`Unit`](crate::lock::Unit)
    /// writing it must lock besides the entity's own, for the index rows of
    /// the values it claims. A unit changing a value must also lock the
    /// partitions of the value it frees (those of the stored entity). Empty
    /// for a type without indexes, or with every indexed value absent.
    ///
    /// ```
    /// # use leasehold::{Entity, Store};
    /// # #[derive(Entity, Clone, Debug)]
    /// # #[entity(table = "Customers")]
    /// # struct Customer { #[entity(partition_key)] region: String, #[entity(row_key)] id: String, #[entity(unique)] email: String }
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let store = Store::memory();
    /// let customers = store.table::<Customer>();
    /// let ann = Customer { region: "eu".into(), id: "1".into(), email: "ann@example.com".into() };
    /// let mut keys = customers.index_partitions(&ann)?;
    /// keys.push(leasehold::PartitionKey::new("eu")?);
    /// let mut unit = store.lock_many(keys).await?;
    /// unit.insert(&ann)?;
    /// unit.commit().await?; // the customer and its e-mail's index row
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`Error::Invalid`] when the entity cannot be encoded, or a value's
    /// index partition key would not be a valid key.
    pub fn index_partitions(&self, entity: &E) -> Result<Vec<PartitionKey>> {
        let Some(store) = self.store.as_ref() else {
            return Ok(Vec::new());
        };
        let Some(indexes) = Indexes::of::<E>(store.tables())? else {
            return Ok(Vec::new());
        };
        let data = entity.encode()?;
        indexes.partitions_of(&indexes.keys(Some(&data.properties))?)
    }
}
