//! The index claims of a unit's writes of indexed entity types, made
//! before its commit (see the [module docs](super)).

use std::sync::Arc;

use async_trait::async_trait;
use futures_util::future::{join, try_join_all};

use super::claim::{self, Keys};
use super::write::{State, entity_op};
use super::{Changes, Indexes, Key};
use crate::backend::{Precondition, StoredEntity, TableOp};
use crate::entity::Properties;
use crate::error::Result;
use crate::key::RowKey;
use crate::lock::{AfterCommit, ClaimInput, Claimed, CommitClaims, LockEnv, Slot};
use crate::rows::tombstone::{self, is_tombstone};
use crate::table::{Resolver, TableEnv};

/// The index claims of units' commits.
pub(crate) struct UnitClaims;

#[async_trait]
impl CommitClaims for UnitClaims {
    async fn claim(&self, env: &Arc<LockEnv>, input: ClaimInput<'_>) -> Result<Claimed> {
        claim_indexes(&env.tables, input).await
    }
}

/// The rows of the values a unit's commit freed, per index table, to
/// remove once it succeeded.
struct FreedRows(Vec<(Indexes, Vec<StoredEntity>)>);

#[async_trait]
impl AfterCommit for FreedRows {
    async fn run(self: Box<Self>, env: &Arc<LockEnv>) {
        for (indexes, rows) in self.0 {
            claim::remove_freed(&env.tables, &indexes, rows).await;
        }
    }
}

/// The index changes of one staged write.
struct Plan {
    indexes: usize,
    owner: Keys,
    changes: Changes,
}

/// The row `key` as the unit read it, or else read now and added to
/// `read`, for the commit to record.
async fn read_for_index(
    env: &Arc<TableEnv>,
    input: &ClaimInput<'_>,
    read: &mut Vec<((Slot, RowKey), Option<StoredEntity>)>,
    key: &(Slot, RowKey),
) -> Result<Option<StoredEntity>> {
    if let Some(row) = input.reads.get(key) {
        return Ok(row.clone());
    }
    let (slot, rk) = key;
    env.ensure_table(&slot.table).await?;
    let pk = &input.parts[slot.part];
    let stored = Resolver::new(env, input.held.to_vec())
        .read(&slot.table, (pk, rk))
        .await?;
    read.push((key.clone(), stored.clone()));
    Ok(stored)
}

/// The claims of a unit's staged writes ("Units" in the module docs).
async fn claim_indexes(env: &Arc<TableEnv>, input: ClaimInput<'_>) -> Result<Claimed> {
    let all: Vec<Indexes> = input
        .indexed
        .iter()
        .map(|t| Indexes::new(env, t.declared_table, t.type_name.clone(), t.defs))
        .collect::<Result<_>>()?;
    let mut plans: Vec<Plan> = Vec::new();
    let (mut read, mut writes) = (Vec::new(), Vec::new());
    for &(key, op) in &input.writes {
        let Some(n) = all.iter().position(|i| i.table == key.0.table) else {
            continue;
        };
        let row = read_for_index(env, &input, &mut read, key).await?;
        let op = conditioned(op.clone(), row.as_ref());
        let live = row.filter(|r| !is_tombstone(&r.data.properties));
        let before: Option<Properties> = live.map(|r| r.data.properties);
        let after: Option<Properties> = match &op {
            TableOp::Insert(d) | TableOp::Replace(d, _) => {
                (!is_tombstone(&d.properties)).then(|| d.properties.clone())
            }
            TableOp::Merge(d, _) => {
                let mut base = before.clone().unwrap_or_default();
                base.merge_from(&d.properties);
                Some(base)
            }
            TableOp::Delete { .. } => None,
        };
        let indexes = &all[n];
        let changes = indexes.changes(before.as_ref(), after.as_ref())?;
        writes.push((key.clone(), op));
        plans.push(Plan {
            indexes: n,
            owner: (input.parts[key.0.part].clone(), key.1.clone()),
            changes,
        });
    }
    // Two writes of this unit claiming one unique value: refused. A
    // value one write claims and another frees (a re-keyed entity) is
    // taken over from the entity freeing it.
    let same = |p: &Plan, list: &[(usize, Key)], n: usize, def: usize, key: &Key| {
        p.indexes == n && list.iter().any(|(e, k)| *e == def && k.key == key.key)
    };
    let mut freed_by: Vec<Option<Keys>> = Vec::new();
    for (i, plan) in plans.iter().enumerate() {
        for (def, key) in &plan.changes.claims {
            let d = &all[plan.indexes].defs[*def];
            if let Some(p) = plans[..i]
                .iter()
                .find(|p| d.unique && same(p, &p.changes.claims, plan.indexes, *def, key))
            {
                return Err(all[plan.indexes].duplicate(d, &key.value, Some(p.owner.clone())));
            }
            freed_by.push(
                plans
                    .iter()
                    .find(|p| same(p, &p.changes.releases, plan.indexes, *def, key))
                    .map(|p| p.owner.clone()),
            );
        }
    }
    for (n, indexes) in all.iter().enumerate() {
        let touches = |p: &Plan| !p.changes.claims.is_empty() || !p.changes.frees.is_empty();
        if plans.iter().any(|p| p.indexes == n && touches(p)) {
            super::ensure_defs(env, indexes).await?;
        }
    }
    // A mark met while claiming whose primary this unit holds is taken
    // off at once: waiting for that lock would wait for this unit.
    let held = input.held;
    let txn = crate::backend::write_log::new_id();
    let each = plans
        .iter()
        .flat_map(|plan| plan.changes.claims.iter().map(move |c| (plan, c)));
    let claims = try_join_all(each.zip(&freed_by).map(|((plan, (def, key)), from)| {
        let indexes = &all[plan.indexes];
        let who = claim::Claimant {
            owner: &plan.owner,
            txn: txn.as_str(),
            freed_by_unit: from.as_ref(),
            held,
        };
        async move { claim::set(env, indexes, &indexes.defs[*def], key, &who).await }
    }));
    let freed = try_join_all(
        plans
            .iter()
            .filter(|p| !p.changes.frees.is_empty())
            .map(|plan| {
                let indexes = &all[plan.indexes];
                async move {
                    let rows =
                        claim::read_freed(env, indexes, &plan.changes.frees, &plan.owner).await?;
                    Ok::<_, crate::Error>((indexes.clone(), rows))
                }
            }),
    );
    let (claimed, freed) = join(claims, freed).await;
    claimed?;
    let freed = FreedRows(freed?);
    let after = (!freed.0.is_empty()).then(|| Box::new(freed) as Box<dyn AfterCommit>);
    Ok(Claimed {
        read,
        writes,
        after,
    })
}

/// A staged write conditioned on the row as the unit read it, as a
/// [`Table`](crate::Table)'s indexed write conditions it.
fn conditioned(op: TableOp, read: Option<&StoredEntity>) -> TableOp {
    let state = match read {
        None => State::Absent,
        Some(r) if is_tombstone(&r.data.properties) => State::Tombstone(r.etag.clone()),
        Some(r) => State::Version(r.etag.clone()),
    };
    match entity_op(&op, &state) {
        Ok(sent) => sent,
        // Nothing to write onto: the commit fails as it would have.
        Err(_) if matches!(op, TableOp::Delete { .. }) => {
            let gone = tombstone::data(op.partition_key(), op.row_key(), "deleted");
            TableOp::Replace(gone, Precondition::IfExists)
        }
        Err(_) => op,
    }
}
