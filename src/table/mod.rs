//! [`Table<E>`]: typed, optimistic access to the entities of one table.
//!
//! Every read returns a [`Versioned<E>`](crate::entity::Versioned) (the
//! entity and its ETag); every replace, merge and delete sends it back, so
//! a write based on a stale copy fails with
//! [`Error::Conflict`](crate::Error::Conflict). Writes without a condition
//! say so in their names: [`Table::upsert`], [`Table::upsert_merge`],
//! [`Table::replace_unconditionally`], [`Table::delete_unconditionally`].
//!
//! # Export and import: the line format
//!
//! One JSON object per row and line, as the service's REST API writes an
//! entity: the keys and every property, a value of a type JSON cannot
//! tell followed by its `name@odata.type` annotation:
//!
//! | EDM type | value | annotation |
//! |---|---|---|
//! | `Edm.String` | a JSON string | none |
//! | `Edm.Boolean` | `true` / `false` | none |
//! | `Edm.Int32` | a JSON number | none |
//! | `Edm.Int64` | a decimal string (`"9007199254740993"`): exact past 2^53 | `Edm.Int64` |
//! | `Edm.Double` | a JSON number in its shortest round-trip form (`-0.0` kept), or `"NaN"`, `"Infinity"`, `"-Infinity"` | `Edm.Double` |
//! | `Edm.DateTime` | UTC with seven fractional digits (`"2026-11-29T08:30:00.1234567Z"`) | `Edm.DateTime` |
//! | `Edm.Guid` | lowercase, hyphenated | `Edm.Guid` |
//! | `Edm.Binary` | standard base64 with padding | `Edm.Binary` |
//!
//! Keys are written in byte order of their names (an annotation right
//! after its property), so an export imported into an empty table and
//! exported again is byte-identical. `Timestamp`, the ETag and reserved
//! properties (`_lh...`) are not written. Rows are read as every read sees
//! them. An index table (`{table}Idx`) is a table of its own: export it
//! too, or rebuild the indexes after an import.
//!
//! [`Table::export`] and [`Query::export`] read the rows;
//! [`crate::Store::import`] writes them back.

mod batch;
mod env;
mod export;
mod fence;
mod handle;
mod lock_name;
#[cfg(test)]
mod lock_name_tests;
mod marks;
mod purge;
mod query;
mod stored;
mod update;
mod write;

pub use crate::lease::fence::Fence;
pub use batch::Batch;
pub(crate) use env::{IndexedWriter, TableEnv};
pub use handle::Table;
pub(crate) use lock_name::{lock_name, lock_prefix};
pub(crate) use marks::{Resolver, lost_race, query_request};
pub use purge::{PurgeOptions, PurgeReport};
pub use query::{Page, Query};
pub(crate) use stored::{Base, versioned};
pub use update::UpdateError;
