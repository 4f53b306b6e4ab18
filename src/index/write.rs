//! The writes of a [`Table`] of an indexed type: claims first, then the
//! entity's row, which makes them good (see the [module docs](super)).

use std::sync::Arc;

use super::claim::{self, Keys};
use super::{Indexes, Key};
use crate::backend::{Precondition, TableOp};
use crate::entity::{Entity, Properties, Versioned};
use crate::error::{Error, ErrorKind, Result};
use crate::key::{ETag, PartitionKey, RowKey};
use crate::lock::marks::Resolver;
use crate::table::tombstone::{self, is_tombstone};
use crate::table::{Base, IndexedWrite, Routed, Table};

/// How many times a write whose row changed under it (an unconditional
/// write, or an insert meeting a tombstone) reads it again and starts over.
const ATTEMPTS: usize = 8;

/// The entity's row as the write is conditioned on it, known before any
/// claim is made.
#[derive(Debug, Clone)]
enum State {
    Absent,
    Tombstone(ETag),
    Row(ETag, Arc<Properties>),
}

impl State {
    fn properties(&self) -> Option<&Properties> {
        match self {
            State::Row(_, p) => Some(p),
            _ => None,
        }
    }
}

/// Reads the entity's row, any unit's mark on it resolved.
async fn read_state<E: Entity>(table: &Table<E>, pk: &PartitionKey, rk: &RowKey) -> Result<State> {
    let Some(env) = super::env_of(table) else {
        return Err(Error::Inconsistent {
            what: "an indexed write of a table without a env".into(),
        });
    };
    let name = table.ready().await?;
    let found = env.backend().get(name, pk, rk).await?;
    Ok(
        match Resolver::new(&env, Vec::new())
            .resolve_opt(name, found)
            .await?
        {
            None => State::Absent,
            Some(row) if is_tombstone(&row.data.properties) => State::Tombstone(row.etag),
            Some(row) => State::Row(row.etag, Arc::new(row.data.properties)),
        },
    )
}

fn not_found<E: Entity>(pk: &PartitionKey, rk: &RowKey) -> Error {
    Error::NotFound {
        what: format!("entity ({pk:?}, {rk:?}) in table `{}`", E::TABLE),
        code: Some("ResourceNotFound".into()),
        table: Some(E::TABLE.into()),
        row: Some(Box::new((pk.clone(), rk.clone()))),
    }
}

fn exists<E: Entity>(pk: &PartitionKey, rk: &RowKey) -> Error {
    Error::AlreadyExists {
        what: format!("entity ({pk:?}, {rk:?}) in table `{}`", E::TABLE),
        code: Some("EntityAlreadyExists".into()),
        table: Some(E::TABLE.into()),
        row: Some(Box::new((pk.clone(), rk.clone()))),
    }
}

fn changed<E: Entity>(pk: &PartitionKey, rk: &RowKey) -> Error {
    Error::Conflict {
        what: format!(
            "entity ({pk:?}, {rk:?}) in table `{}`: changed since it was read",
            E::TABLE
        ),
        code: Some("UpdateConditionNotSatisfied".into()),
        table: Some(E::TABLE.into()),
        row: Some(Box::new((pk.clone(), rk.clone()))),
    }
}

/// Sends `write` as an indexed write when it has to be one: `Ok(None)` when
/// the type has no indexes or the write is the plain conditional write
/// (it leaves every indexed value as it is; the caller sends it);
/// otherwise the entity as stored after the write (`None` for a delete).
pub(crate) fn route<'a, E: Entity>(
    table: &'a Table<E>,
    write: IndexedWrite<'a, E>,
) -> futures_util::future::BoxFuture<'a, Routed<E>> {
    Box::pin(route_write(table, write))
}

async fn route_write<E: Entity>(table: &Table<E>, write: IndexedWrite<'_, E>) -> Routed<E> {
    if E::INDEXES.is_empty() {
        return Ok(None);
    }
    let Some(env) = super::env_of(table) else {
        return Ok(None);
    };
    let env = &env;
    let Some(indexes) = Indexes::of::<E>(env.tables())? else {
        return Ok(None);
    };
    use IndexedWrite as W;
    let new = match &write {
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
    let owner: Keys = (pk.clone(), rk.clone());
    let merge = matches!(write, W::Merge(_) | W::UpsertMerge(_));
    let after = |state: &State| -> Option<Properties> {
        let new = new.as_ref()?;
        match (merge, state.properties()) {
            (true, Some(before)) => {
                let mut base = before.clone();
                base.merge_from(&new.properties);
                Some(base)
            }
            _ => Some(new.properties.clone()),
        }
    };
    // The state the entity write is conditioned on, read before any claim
    // (a claim made after it is what a takeover must see changed).
    let mut state = match &write {
        W::Insert(_) => State::Absent,
        W::Replace(v) | W::Merge(v) | W::Delete(v) => match v.stored_properties() {
            Some(p) => State::Row(v.etag().clone(), p),
            None => match read_state(table, &pk, &rk).await? {
                State::Row(etag, p) if &etag == v.etag() => {
                    // A conditional replace or merge that leaves every
                    // indexed value alone is the plain write.
                    if !matches!(write, W::Delete(_))
                        && indexes.keys(Some(&p))?
                            == indexes.keys(after(&State::Row(etag.clone(), p.clone())).as_ref())?
                    {
                        return Ok(None);
                    }
                    State::Row(etag, p)
                }
                State::Row(..) => return Err(changed::<E>(&pk, &rk)),
                _ => return Err(not_found::<E>(&pk, &rk)),
            },
        },
        _ => read_state(table, &pk, &rk).await?,
    };
    if let (W::Replace(_) | W::Merge(_), State::Row(_, p)) = (&write, &state)
        && indexes.keys(Some(p))? == indexes.keys(after(&state).as_ref())?
    {
        return Ok(None);
    }
    let txn = crate::backend::write_log::new_id();
    let started = tokio::time::Instant::now();
    // Writers losing races to each other step back as `update_with` does.
    let mut pauses = env.tables().conflict_retry().backoff();
    for _ in 0..ATTEMPTS {
        match (&write, &state) {
            (W::Insert(_), State::Row(..)) => return Err(exists::<E>(&pk, &rk)),
            (
                W::ReplaceUnconditionally(_) | W::DeleteUnconditionally(..),
                State::Absent | State::Tombstone(_),
            ) => return Err(not_found::<E>(&pk, &rk)),
            _ => {}
        }
        let old = indexes.keys(state.properties())?;
        let now = indexes.keys(after(&state).as_ref())?;
        let mut claims: Vec<(usize, &Key)> = Vec::new();
        let mut frees: Vec<(usize, Key)> = Vec::new();
        for (i, (o, n)) in old.iter().zip(&now).enumerate() {
            if o.as_ref().map(|k| &k.key) == n.as_ref().map(|k| &k.key) {
                continue;
            }
            if let Some(n) = n {
                claims.push((i, n));
            }
            // A delete leaves its claims to the next writer of the value.
            if let (Some(o), Some(_)) = (o, &new) {
                frees.push((i, o.clone()));
            }
        }
        if !claims.is_empty() || !frees.is_empty() {
            super::ensure_defs(env, &indexes).await?;
        }
        let claiming = futures_util::future::try_join_all(claims.iter().map(|(i, key)| {
            let def = &indexes.defs[*i];
            let (indexes, owner, txn) = (&indexes, &owner, txn.as_str());
            async move {
                if def.unique {
                    claim::claim(env, indexes, def, key, &claim::Claimant::plain(owner, txn)).await
                } else {
                    claim::add_row(env, indexes, def, key, owner).await
                }
            }
        }));
        let (claimed, freed) =
            futures_util::future::join(claiming, claim::read_freed(env, &indexes, &frees, &owner))
                .await;
        if let Err(e) = claimed {
            // An insert of a row that exists is refused as such, whatever
            // its claims met.
            if let (W::Insert(_), ErrorKind::ValueTaken) = (&write, e.kind())
                && let State::Row(..) = read_state(table, &pk, &rk).await?
            {
                return Err(exists::<E>(&pk, &rk));
            }
            return Err(e);
        }
        let freed = freed?;
        let sent = send_entity(table, &write, &state, &pk, &rk).await;
        match sent {
            Ok(result) => {
                claim::remove_freed(env, &indexes, freed).await;
                return Ok(Some(result));
            }
            Err(e) => {
                let raced = matches!(
                    e.kind(),
                    ErrorKind::Conflict | ErrorKind::NotFound | ErrorKind::AlreadyExists
                );
                let again = raced
                    && matches!(
                        write,
                        W::Insert(_)
                            | W::Upsert(_)
                            | W::UpsertMerge(_)
                            | W::ReplaceUnconditionally(_)
                            | W::DeleteUnconditionally(..)
                    );
                if !again {
                    // A conditional write refused at a tombstone: the row
                    // is gone, as the caller sees rows.
                    if e.kind() == ErrorKind::Conflict
                        && matches!(read_state(table, &pk, &rk).await?, State::Tombstone(_))
                    {
                        return Err(not_found::<E>(&pk, &rk));
                    }
                    return Err(e);
                }
                if let Some(pause) = pauses.next() {
                    tokio::time::sleep(pause).await;
                }
                state = read_state(table, &pk, &rk).await?;
            }
        }
    }
    Err(Error::Timeout {
        what: format!(
            "an indexed write of {} ({pk:?}, {rk:?}): its row kept changing under it ({ATTEMPTS} attempts)",
            indexes.type_name
        ),
        // The time the attempts took, not a deadline: what ran out was the
        // attempts.
        after: started.elapsed(),
    })
}

/// Sends the entity's write of `write`, conditioned on `state`: the commit
/// point of the claims made for it.
async fn send_entity<E: Entity>(
    table: &Table<E>,
    write: &IndexedWrite<'_, E>,
    state: &State,
    pk: &PartitionKey,
    rk: &RowKey,
) -> Result<Option<Versioned<E>>> {
    use IndexedWrite as W;
    let at = |etag: &ETag| Precondition::IfMatch(etag.clone());
    // What to write onto `state`: the entity, its write log, what it
    // keeps of the stored row, and the operation.
    let (entity, log, base, shape) = match (write, state) {
        (W::Insert(_), State::Row(..)) => return Err(exists::<E>(pk, rk)),
        (W::Insert(e) | W::Upsert(e) | W::UpsertMerge(e), State::Absent) => {
            (*e, None, Base::Nothing, Shape::Insert)
        }
        (W::Insert(e) | W::Upsert(e) | W::UpsertMerge(e), State::Tombstone(etag))
        | (W::Upsert(e) | W::ReplaceUnconditionally(e), State::Row(etag, _)) => {
            (*e, None, Base::Nothing, Shape::Replace(at(etag)))
        }
        (W::UpsertMerge(e), State::Row(etag, p)) => (
            *e,
            None,
            Base::Merge(Some(p.clone())),
            Shape::Merge(at(etag)),
        ),
        (W::Replace(v), _) => (
            v.entity(),
            v.write_log(),
            Base::replace_of(v),
            Shape::Replace(at(v.etag())),
        ),
        (W::Merge(v), _) => (
            v.entity(),
            v.write_log(),
            Base::merge_of(v),
            Shape::Merge(at(v.etag())),
        ),
        (W::Delete(v), _) => {
            let gone = tombstone::data(pk, rk, "deleted");
            table.send(TableOp::Replace(gone, at(v.etag()))).await?;
            return Ok(None);
        }
        (W::DeleteUnconditionally(..), State::Row(etag, _)) => {
            let gone = tombstone::data(pk, rk, "deleted");
            table.send(TableOp::Replace(gone, at(etag))).await?;
            return Ok(None);
        }
        (W::ReplaceUnconditionally(_) | W::DeleteUnconditionally(..), _) => {
            return Err(not_found::<E>(pk, rk));
        }
    };
    let written = table
        .write(entity, log, base, move |d| match shape {
            Shape::Insert => TableOp::Insert(d),
            Shape::Replace(c) => TableOp::Replace(d, c),
            Shape::Merge(c) => TableOp::Merge(d, c),
        })
        .await?;
    Ok(Some(written))
}

/// The operation of an entity's write, without its data.
enum Shape {
    Insert,
    Replace(Precondition),
    Merge(Precondition),
}

impl<E: Entity> Table<E> {
    /// The index partitions of `entity`'s indexed values (see
    /// [`crate::index`]): the partitions of its values' index rows. Writes
    /// take no lock on them (earlier versions did, so units locked them
    /// too; a unit holding them now holds locks it does not need). Empty
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
        let Some(indexes) = Indexes::of::<E>(&self.env)? else {
            return Ok(Vec::new());
        };
        let data = entity.encode()?;
        indexes.partitions_of(&indexes.keys(Some(&data.properties))?)
    }
}
