//! The index rows of a unit's writes of indexed entity types: staged at
//! commit, before anything is sent (see [`crate::index`]).

use super::fold::fold;
use super::unit::{Slot, Unit};
use crate::backend::{StoredEntity, TableOp};
use crate::entity::{Entity, EntityData, Properties};
use crate::error::{Error, Result};
use crate::index::{self, Indexes, Key};
use crate::key::{PartitionKey, RowKey, TableName};

/// One index value an entity frees or claims.
struct Change {
    indexes: usize,
    def: usize,
    key: Key,
    entity: (PartitionKey, RowKey),
}

fn not_locked(
    indexes: &Indexes,
    def: &index::Def,
    key: &Key,
    ipk: &PartitionKey,
    unit: &Unit,
) -> Error {
    let held: Vec<&str> = unit.parts.iter().map(|p| p.pk.as_str()).collect();
    Error::invalid(
        format!(
            "{}.{} = {}",
            indexes.type_name,
            def.field,
            index::show(&key.value)
        ),
        format!(
            "its index partition {:?} is not locked by this unit (it holds {held:?}); lock it with the entity's partition (Table::index_partitions names it)",
            ipk.as_str()
        ),
    )
}

impl Unit {
    /// Records that the unit writes entities of `E` to `table` (so the commit
    /// keeps their index rows), and checks that it holds the partitions of the
    /// index values `data` claims. Called when a write is staged; a refusal
    /// leaves the staged writes unchanged.
    pub(super) fn note_indexes<E: Entity>(
        &mut self,
        table: &TableName,
        data: &EntityData,
        what: &str,
    ) -> Result<()> {
        let unit = self;
        if E::INDEXES.is_empty() {
            return Ok(());
        }
        let Some(indexes) = Indexes::of::<E>(unit.store.tables())? else {
            return Ok(());
        };
        if what != "delete" {
            let keys = indexes.keys(Some(&data.properties))?;
            for (def, key) in indexes.defs.iter().zip(&keys) {
                if let Some(key) = key {
                    let ipk = indexes.partition(def, &key.key)?;
                    if !unit.parts.iter().any(|p| p.pk == ipk) {
                        return Err(not_locked(&indexes, def, key, &ipk, unit));
                    }
                }
            }
        }
        if !unit.indexes.iter().any(|i| &i.table == table) {
            unit.indexes.push(indexes);
        }
        Ok(())
    }

    /// Reads a row for the unit (recording it as read), creating its table
    /// first; a row the unit read before costs nothing.
    async fn read_for_index(&mut self, slot: &Slot, rk: &RowKey) -> Result<Option<StoredEntity>> {
        let key = (slot.clone(), rk.clone());
        if let Some(read) = self.reads.get(&key) {
            return Ok(read.clone());
        }
        self.store.ensure_table(&slot.table).await?;
        let pk = self.parts[slot.part].pk.clone();
        let stored = self.store.backend().get(&slot.table, &pk, rk).await?;
        let stored = self.resolver().resolve_opt(&slot.table, stored).await?;
        self.reads.insert(key, stored.clone());
        Ok(stored)
    }

    /// Adds an index-row write, folding it into one staged for the row.
    fn stage_index(&mut self, slot: Slot, op: TableOp) -> Result<()> {
        let key = (slot, op.row_key().clone());
        let read_absent = matches!(self.reads.get(&key), Some(None));
        match fold(self.staged.get(&key), op, read_absent) {
            Ok(Some(op)) => {
                self.staged.insert(key, op);
            }
            Ok(None) => {
                self.staged.remove(&key);
            }
            Err(why) => {
                return Err(Error::Inconsistent {
                    what: format!("index row {:?} in `{}`: {why}", key.1.as_str(), key.0),
                });
            }
        }
        Ok(())
    }

    /// The slot of an index row, refusing a partition the unit does not
    /// hold.
    fn index_slot(&self, indexes: &Indexes, change: &Change) -> Result<(Slot, PartitionKey)> {
        let def = &indexes.defs[change.def];
        let ipk = indexes.partition(def, &change.key.key)?;
        match self.parts.iter().position(|p| p.pk == ipk) {
            Some(part) => Ok((
                Slot {
                    part,
                    table: indexes.index_table.clone(),
                },
                ipk,
            )),
            None => Err(not_locked(indexes, def, &change.key, &ipk, self)),
        }
    }

    /// Stages the index rows of every staged write of an indexed type: the
    /// rows of values freed are deleted, those of values claimed inserted;
    /// a unique value another entity holds is refused with
    /// [`Error::ValueTaken`]. Nothing is sent but reads.
    pub(super) async fn stage_index_rows(&mut self) -> Result<()> {
        if self.indexes.is_empty() {
            return Ok(());
        }
        let all = self.indexes.clone();
        let rows: Vec<(Slot, RowKey)> = self
            .staged
            .keys()
            .filter(|(slot, _)| all.iter().any(|i| i.table == slot.table))
            .cloned()
            .collect();
        if rows.is_empty() {
            return Ok(());
        }
        let mut frees: Vec<Change> = Vec::new();
        let mut claims: Vec<Change> = Vec::new();
        for (slot, rk) in rows {
            let Some(n) = all.iter().position(|i| i.table == slot.table) else {
                continue;
            };
            let indexes = &all[n];
            let is_insert = matches!(
                self.staged.get(&(slot.clone(), rk.clone())),
                Some(TableOp::Insert(_))
            );
            // What the row holds now: an insert needs none (it fails if the
            // row exists); anything else is read, under the lock.
            let before: Option<Properties> = if is_insert {
                None
            } else {
                self.read_for_index(&slot, &rk)
                    .await?
                    .map(|s| s.data.properties)
            };
            let Some(op) = self.staged.get(&(slot.clone(), rk.clone())) else {
                continue;
            };
            let after: Option<Properties> = match op {
                TableOp::Insert(d) | TableOp::Replace(d, _) => Some(d.properties.clone()),
                TableOp::Merge(d, _) => {
                    let mut base = before.clone().unwrap_or_default();
                    base.merge_from(&d.properties);
                    Some(base)
                }
                TableOp::Delete { .. } => None,
            };
            let old = indexes.keys(before.as_ref())?;
            let new = indexes.keys(after.as_ref())?;
            let entity = (self.parts[slot.part].pk.clone(), rk.clone());
            for (def, (o, k)) in old.into_iter().zip(new).enumerate() {
                if o == k {
                    continue;
                }
                if let Some(key) = o {
                    frees.push(Change {
                        indexes: n,
                        def,
                        key,
                        entity: entity.clone(),
                    });
                }
                if let Some(key) = k {
                    claims.push(Change {
                        indexes: n,
                        def,
                        key,
                        entity: entity.clone(),
                    });
                }
            }
        }
        if frees.is_empty() && claims.is_empty() {
            return Ok(());
        }
        // Every partition first, so a missing lock is refused before any
        // read.
        for change in frees.iter().chain(&claims) {
            self.index_slot(&all[change.indexes], change)?;
        }
        for indexes in &all {
            index::ensure_defs(&self.store, indexes).await?;
        }
        for change in &frees {
            let indexes = &all[change.indexes];
            let def = &indexes.defs[change.def];
            let (slot, _) = self.index_slot(indexes, change)?;
            let irk = Indexes::row(def, &change.entity.0, &change.entity.1)?;
            // Only a row pointing at this entity is its own to delete.
            if let Some(row) = self.read_for_index(&slot, &irk).await?
                && index::target_of(&row.data).as_ref() == Some(&change.entity)
            {
                self.stage_index(
                    slot,
                    TableOp::Delete {
                        partition_key: row.data.partition_key,
                        row_key: row.data.row_key,
                        if_match: Some(row.etag),
                    },
                )?;
            }
        }
        for change in &claims {
            let indexes = &all[change.indexes];
            let def = &indexes.defs[change.def];
            let (slot, ipk) = self.index_slot(indexes, change)?;
            let irk = Indexes::row(def, &change.entity.0, &change.entity.1)?;
            let row = self.read_for_index(&slot, &irk).await?;
            let data = Indexes::row_data(ipk, irk.clone(), &change.entity.0, &change.entity.1);
            let staged = self.staged.get(&(slot.clone(), irk.clone()));
            match (row, staged) {
                // Freed by this unit: take it over.
                (_, Some(TableOp::Delete { .. })) => {
                    self.stage_index(slot, TableOp::Insert(data))?
                }
                // Claimed by another write of this unit.
                (_, Some(other)) => {
                    let holder = other.data().and_then(index::target_of);
                    return Err(indexes.duplicate(def, &change.key.value, holder));
                }
                (None, None) => self.stage_index(slot, TableOp::Insert(data))?,
                (Some(row), None) => {
                    let holder = index::target_of(&row.data);
                    if holder.as_ref() == Some(&change.entity) {
                        continue;
                    }
                    if !def.unique {
                        continue;
                    }
                    // Another entity's row: refused, unless that entity no
                    // longer holds the value (a row left by a writer outside
                    // leasehold), which is then taken over.
                    if let Some((hpk, hrk)) = &holder {
                        let stored = self.store.backend().get(&indexes.table, hpk, hrk).await?;
                        let stored = self.resolver().resolve_opt(&indexes.table, stored).await?;
                        let holds = match stored {
                            Some(s) => {
                                indexes.keys(Some(&s.data.properties))?[change.def].as_ref()
                                    == Some(&change.key)
                            }
                            None => false,
                        };
                        if holds {
                            return Err(indexes.duplicate(def, &change.key.value, holder));
                        }
                    }
                    self.stage_index(
                        slot,
                        TableOp::Replace(data, crate::backend::Precondition::IfMatch(row.etag)),
                    )?;
                }
            }
        }
        Ok(())
    }
}
