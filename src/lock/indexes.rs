//! A unit's part in the index claims of its commit: it notes the indexed
//! types it writes, and hands its staged writes to the store's
//! [`CommitClaims`](super::env::CommitClaims) before the commit sends
//! anything (see `crate::index`).

use super::env::{AfterCommit, CommitView, IndexedType};
use super::unit::Unit;
use crate::entity::{Entity, short_type_name};
use crate::error::Result;
use crate::key::TableName;

impl Unit {
    /// Records that the unit writes entities of `E` to `table`, so that its
    /// commit claims their indexed values.
    pub(super) fn note_indexes<E: Entity>(&mut self, table: &TableName) {
        if E::INDEXES.is_empty() || self.indexed.iter().any(|i| &i.table == table) {
            return;
        }
        self.indexed.push(IndexedType {
            table: table.clone(),
            declared_table: E::TABLE,
            type_name: short_type_name::<E>(),
            defs: E::INDEXES,
        });
    }

    /// Runs the store's commit claims, if the unit writes indexed types.
    pub(super) async fn claim_indexes(&mut self) -> Result<Option<Box<dyn AfterCommit>>> {
        let Some(claims) = self.env.claims().cloned() else {
            return Ok(None);
        };
        if self.indexed.is_empty() {
            return Ok(None);
        }
        let view = CommitView {
            parts: self.parts.iter().map(|p| p.pk.clone()).collect(),
            held: self.held(),
            reads: &mut self.reads,
            staged: &mut self.staged,
            indexed: &self.indexed,
        };
        claims.claim(&self.env, view).await
    }
}
