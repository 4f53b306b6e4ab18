//! [`Table<E>`]: typed, optimistic access to the entities of one table.
//!
//! Every read returns a [`Versioned<E>`](crate::entity::Versioned) (the
//! entity and its ETag); every replace, merge and delete takes one back and
//! sends its ETag, so a write based on a stale copy fails with
//! [`Error::Conflict`](crate::Error::Conflict) instead of silently
//! overwriting. Writes without a condition exist only under names that say
//! so: [`Table::upsert`], [`Table::upsert_merge`],
//! [`Table::replace_unconditionally`], [`Table::delete_unconditionally`].
//!
//! One file per job: `handle` (the table, its name and reads), `write`
//! (single-entity writes), `update` (optimistic read-modify-write), `query`,
//! `batch`, `purge` (deleting and counting what a query matches), `stored` (what a read returns and a write leaves stored),
//! `resolve` (how a store's tables see marked rows and tombstones) and `env` (what the tables of a store share).

mod batch;
mod env;
mod handle;
mod purge;
mod query;
mod resolve;
mod stored;
mod update;
mod write;

pub use crate::lease::fence::Fence;
pub use batch::{Batch, BatchResult};
pub(crate) use env::TableEnv;
pub use handle::Table;
pub use purge::{PurgeOptions, PurgeReport};
pub use query::{DecodeErrors, OnDecodeError, Page, Query};
pub(crate) use resolve::Resolve;
pub(crate) use stored::{Base, versioned};
pub use update::UpdateError;
