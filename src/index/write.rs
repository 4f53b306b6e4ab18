//! The index write path (see the [module docs](super)): claims first, then
//! the entity's row, which makes them good.

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;

use super::Indexes;
use super::claim::{self, Keys};
use crate::backend::deadline;
use crate::backend::{Backend, Precondition, TableOp, Version, WriteOptions};
use crate::entity::entity_type::IndexDef;
use crate::entity::{EntityData, Properties};
use crate::error::{Error, ErrorKind, Result};
use crate::key::{ETag, PartitionKey, RowKey, TableName};
use crate::rows::tombstone::{self, is_tombstone};
use crate::table::{IndexedWriter, Resolver, TableEnv, lost_race};

/// How often a write whose row changed under it (an unconditional write,
/// an insert meeting a tombstone) reads it again and starts over.
const ATTEMPTS: usize = 8;

pub(crate) fn writes(
    env: Arc<TableEnv>,
    declared_table: &'static str,
    type_name: String,
    defs: &'static [IndexDef],
) -> Arc<dyn IndexedWriter> {
    Arc::new(IndexedWrites {
        env,
        declared: declared_table,
        type_name,
        defs,
        indexes: OnceLock::new(),
    })
}

/// The entity's write goes to the table's writer, the claims to the
/// store's backend.
struct IndexedWrites {
    env: Arc<TableEnv>,
    declared: &'static str,
    type_name: String,
    defs: &'static [IndexDef],
    indexes: OnceLock<Arc<Indexes>>,
}

impl std::fmt::Debug for IndexedWrites {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexedWrites")
            .field("table", &self.declared)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl IndexedWriter for IndexedWrites {
    async fn execute(
        &self,
        below: &dyn Backend,
        table: &TableName,
        op: TableOp,
        options: &WriteOptions,
        as_read: Option<Arc<Properties>>,
    ) -> Result<Option<Version>> {
        let indexes = self.indexes()?;
        self.indexed(below, table, &indexes, op, options, as_read)
            .await
    }
}

/// The entity's row as the write is conditioned on it, known before any
/// claim.
#[derive(Debug, Clone)]
pub(super) enum State {
    Absent,
    Tombstone(ETag),
    Row(ETag, Arc<Properties>),
    /// A row at this version, its values not needed (a delete's).
    Version(ETag),
}

impl State {
    fn properties(&self) -> Option<&Properties> {
        match self {
            State::Row(_, p) => Some(p),
            _ => None,
        }
    }
}

impl IndexedWrites {
    fn indexes(&self) -> Result<Arc<Indexes>> {
        if let Some(known) = self.indexes.get() {
            return Ok(Arc::clone(known));
        }
        let found = Arc::new(Indexes::new(
            &self.env,
            self.declared,
            self.type_name.clone(),
            self.defs,
        )?);
        Ok(Arc::clone(self.indexes.get_or_init(|| found)))
    }

    async fn read_state(&self, table: &TableName, pk: &PartitionKey, rk: &RowKey) -> Result<State> {
        let env = &self.env;
        Ok(
            match Resolver::new(env, Vec::new()).read(table, (pk, rk)).await? {
                None => State::Absent,
                Some(row) if is_tombstone(&row.data.properties) => State::Tombstone(row.etag),
                Some(row) => State::Row(row.etag, Arc::new(row.data.properties)),
            },
        )
    }

    /// The service's answer `(status, code)` to the caller's `op`.
    fn refused(
        (status, code): (u16, &str),
        op: &str,
        table: &TableName,
        pk: &PartitionKey,
        rk: &RowKey,
    ) -> Error {
        let what = crate::error::what::entity(op, table.as_str(), pk, rk);
        Error::from_service(status, Some(code), what).for_row(table.as_str(), pk, rk)
    }

    /// `e`, a conditional write's refusal; `NotFound` when the row is a
    /// tombstone now (as an unindexed table's write says).
    async fn gone_if_tombstone(
        &self,
        e: Error,
        op: &str,
        table: &TableName,
        pk: &PartitionKey,
        rk: &RowKey,
    ) -> Result<Error> {
        if e.kind() == ErrorKind::Conflict
            && matches!(self.read_state(table, pk, rk).await?, State::Tombstone(_))
        {
            return Ok(Self::refused(NOT_FOUND, op, table, pk, rk));
        }
        Ok(e)
    }

    /// Sends `op` as an indexed write (see "Writes" in the module docs).
    async fn indexed(
        &self,
        below: &dyn Backend,
        table: &TableName,
        indexes: &Indexes,
        op: TableOp,
        options: &WriteOptions,
        as_read: Option<Arc<Properties>>,
    ) -> Result<Option<Version>> {
        let env = &self.env;
        let at_version = matches!(op.condition(), Some(Precondition::IfMatch(_)));
        // Errors name the caller's operation (a delete sends a replace).
        let op_name = op.name();
        let merge = matches!(op, TableOp::Merge(..));
        let (pk, rk) = (op.partition_key().clone(), op.row_key().clone());
        let new: Option<&EntityData> = op.data();
        let owner: Keys = (pk.clone(), rk.clone());
        let after = |state: &State| -> Option<Properties> {
            let new = new?;
            match (merge, state.properties()) {
                (true, Some(before)) => {
                    let mut base = before.clone();
                    base.merge_from(&new.properties);
                    Some(base)
                }
                _ => Some(new.properties.clone()),
            }
        };
        // Read before any claim: a takeover must see it changed by a
        // claim made after.
        let mut state = match (&op, op.condition()) {
            (TableOp::Insert(_), _) => State::Absent,
            (TableOp::Delete { .. }, Some(Precondition::IfMatch(etag))) => State::Version(etag),
            (_, Some(Precondition::IfMatch(etag))) => match as_read {
                Some(p) => State::Row(etag, p),
                None => match self.read_state(table, &pk, &rk).await? {
                    State::Row(read, p) if read == etag => State::Row(read, p),
                    State::Row(..) => {
                        let changed = (412, "UpdateConditionNotSatisfied");
                        return Err(Self::refused(changed, op_name, table, &pk, &rk));
                    }
                    _ => return Err(Self::refused(NOT_FOUND, op_name, table, &pk, &rk)),
                },
            },
            _ => self.read_state(table, &pk, &rk).await?,
        };
        if at_version
            && let State::Row(_, p) = &state
            && new.is_some()
            && indexes.keys(Some(p))? == indexes.keys(after(&state).as_ref())?
        {
            return match below.execute(table, op, options).await {
                Err(e) => Err(self.gone_if_tombstone(e, op_name, table, &pk, &rk).await?),
                sent => sent,
            };
        }
        let txn = crate::backend::write_log::new_id();
        let started = tokio::time::Instant::now();
        // Racing writers step back as `update_with` does.
        let mut pauses = env.conflict_retry.backoff();
        for _ in 0..ATTEMPTS {
            // Refused before any claim when the row is not as `op` needs.
            let entity = entity_op(&op, &state)
                .map_err(|refusal| Self::refused(refusal, op_name, table, &pk, &rk))?;
            let super::Changes { claims, frees, .. } =
                indexes.changes(state.properties(), after(&state).as_ref())?;
            if !claims.is_empty() || !frees.is_empty() {
                super::ensure_defs(env, indexes).await?;
            }
            // Within `SEND_WINDOW` of this round's first claim, or never.
            let send_by = tokio::time::Instant::now() + super::SEND_WINDOW;
            let who = claim::Claimant::plain(&owner, &txn);
            let claiming = futures_util::future::try_join_all(
                claims
                    .iter()
                    .map(|(i, key)| claim::set(env, indexes, &indexes.defs[*i], key, &who)),
            );
            let (claimed, freed) = futures_util::future::join(
                claiming,
                claim::read_freed(env, indexes, &frees, &owner),
            )
            .await;
            // Refused as `ValueTaken` whether or not the row exists.
            claimed?;
            let freed = freed?;
            let sent = deadline::send_by(send_by, below.execute(table, entity, options))
                .await
                .map_err(|e| {
                    let what = crate::error::what::entity(op_name, table.as_str(), &pk, &rk);
                    if e.kind() == ErrorKind::LeaseLost && tokio::time::Instant::now() > send_by {
                        return Error::Timeout {
                            what: format!(
                                "{what}: not sent, {:?} after its claims (an entity's write must follow its claims within that time, or a claim or tombstone it relies on may be gone); the row is as it was, unless an earlier try of it landed",
                                super::SEND_WINDOW
                            ),
                            after: started.elapsed(),
                        };
                    }
                    e.said_of(what)
                });
            match sent {
                Ok(version) => {
                    claim::remove_freed(env, indexes, freed).await;
                    return Ok(version);
                }
                Err(e) => {
                    if !lost_race(&e) || at_version {
                        return Err(self.gone_if_tombstone(e, op_name, table, &pk, &rk).await?);
                    }
                    if let Some(pause) = pauses.next() {
                        tokio::time::sleep(pause).await;
                    }
                    state = self.read_state(table, &pk, &rk).await?;
                }
            }
        }
        Err(Error::Timeout {
            what: format!(
                "{}: its row kept changing under it ({ATTEMPTS} attempts)",
                crate::error::what::entity(op_name, table.as_str(), &pk, &rk)
            ),
            // The attempts ran out, not a deadline.
            after: started.elapsed(),
        })
    }
}

/// The service's answer `(status, code)` to a write whose row is not as
/// it needs.
type Refusal = (u16, &'static str);
const NOT_FOUND: Refusal = (404, "ResourceNotFound");
const EXISTS: Refusal = (409, "EntityAlreadyExists");

/// The entity's write of `op` conditioned on `state` (a delete leaves a
/// tombstone): the commit point of its claims, a unit's too.
pub(super) fn entity_op(op: &TableOp, state: &State) -> std::result::Result<TableOp, Refusal> {
    let at = |etag: &ETag| Precondition::IfMatch(etag.clone());
    let gone = || tombstone::data(op.partition_key(), op.row_key(), "deleted");
    Ok(match (op, op.condition(), state) {
        // As asked: at the version the caller read.
        (TableOp::Delete { .. }, Some(c @ Precondition::IfMatch(_)), _) => {
            TableOp::Replace(gone(), c)
        }
        (_, Some(Precondition::IfMatch(_)), _) => op.clone(),
        (TableOp::Delete { .. }, _, State::Row(etag, _) | State::Version(etag)) => {
            TableOp::Replace(gone(), at(etag))
        }
        (TableOp::Delete { .. }, ..) => return Err(NOT_FOUND),
        (_, None, State::Row(..) | State::Version(_)) => return Err(EXISTS),
        (_, Some(Precondition::IfExists), State::Absent | State::Tombstone(_)) => {
            return Err(NOT_FOUND);
        }
        (TableOp::Insert(d) | TableOp::Replace(d, _) | TableOp::Merge(d, _), _, state) => {
            let d = d.clone();
            match state {
                State::Absent => TableOp::Insert(d),
                State::Tombstone(etag) => TableOp::Replace(d, at(etag)),
                State::Row(etag, _) | State::Version(etag) => match op {
                    TableOp::Merge(..) => TableOp::Merge(d, at(etag)),
                    _ => TableOp::Replace(d, at(etag)),
                },
            }
        }
    })
}
