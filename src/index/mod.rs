//! Declarative indexes: `#[entity(unique)]` and `#[entity(index)]`.
//!
//! No two entities of a type share the value of a `#[entity(unique)]`
//! field; an `#[entity(index)]` field is looked up by value. Every write
//! through [`Table`](crate::Table) or a [`Unit`](crate::lock::Unit) keeps
//! the index rows with the entity, and a duplicate is refused unstored.
//!
//! ```
//! use leasehold::{Entity, ErrorKind, Store};
//!
//! #[derive(Entity, Debug, Clone, PartialEq)]
//! #[entity(table = "Customers")]
//! struct Customer {
//!     #[entity(partition_key)] region: String,
//!     #[entity(row_key)] id: String,
//!     #[entity(unique)] email: String,
//!     #[entity(index)] city: Option<String>,
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let customers = Store::memory().table::<Customer>();
//! let c = Customer::columns();
//! customers.insert(Customer { region: "eu".into(), id: "1".into(),
//!     email: "ann@example.com".into(), city: Some("Oslo".into()) }).await?;
//! let dup = customers.insert(Customer { region: "us".into(), id: "2".into(),
//!     email: "ann@example.com".into(), city: None }).await;
//! assert_eq!(dup.unwrap_err().kind(), ErrorKind::ValueTaken); // nothing stored
//!
//! let ann = customers.get_by(c.email, "ann@example.com").await?.expect("indexed");
//! assert_eq!(ann.id, "1");
//! use leasehold::stream::TryStreamExt as _;
//! let in_oslo: Vec<_> = customers.find_by(c.city, "Oslo").try_collect().await?;
//! assert_eq!(in_oslo.len(), 1);
//! # Ok::<(), leasehold::Error>(()) }).unwrap();
//! ```
//!
//! # Storage layout
//!
//! * The index rows of `E` live in the table `E::TABLE` + `Idx` (with the
//!   store's prefix). An index row's partition key is the [`CompositeKey`]
//!   of the property name and the value's key form ([`KeyPart`]), so a
//!   range of values is a range of partitions.
//! * A unique value's row, its *claim*, has the row key `_lhClaim` (the
//!   service refuses a second one); a non-unique one has the composite of
//!   the entity's keys. Both name the entity in `EntityPartitionKey` and
//!   `EntityRowKey`; a claim also names the write that made it (`Txn`). An
//!   absent value (`None`) has no row.
//! * The partition `~indexes` describes the indexes (one row per indexed
//!   property, `Unique` true or false), so the operator command can verify
//!   a table without the Rust type.
//! * A deleted entity leaves a *tombstone* at its keys (only `_lhGone`),
//!   which reads see as absent and an insert replaces.
//!
//! # Writes
//!
//! No write takes a lock. An entity **holds** a value when its row (any
//! unit's mark on it resolved) stores it. A claim naming an entity that
//! does not hold its value is *stale*; lookups and writers see through it.
//! The invariants:
//!
//! 1. an entity comes to hold a unique value only by a conditional write
//!    of its row sent after the value's claim names it, and conditioned on
//!    a state of the row read *before* that claim write;
//! 2. a claim is taken from the entity it names only by a write at the
//!    claim's ETag, after reading that the entity does not hold the value
//!    and then writing its row conditionally (a tombstone where absent,
//!    the row as it is where it exists): that fails every write of the
//!    entity pending since before it, and rows of indexed types are never
//!    deleted, so an insert waiting for the row to be absent fails for good;
//! 3. every claim write changes the claim's ETag, so a takeover from a
//!    version read before another writer claimed fails and looks again.
//!
//! So of two entities holding one value, the later claimant took the claim
//! over after the first's claim and neutralized the first's write: no two
//! entities ever hold one unique value, and a held value's claim names its
//! holder. No clock or lease takes part, until rows are swept (below).
//!
//! **A write of entity X** (every [`Table`](crate::Table) of an indexed
//! type sends its writes this way) computes the indexed values the row
//! holds before (as read) and after the write. It claims each unique value
//! it sets: inserts the claim; where one exists that names X, writes it
//! again (3); where it names Y, reads Y: Y holds the value →
//! [`Error::ValueTaken`], else it neutralizes Y (2) and takes the claim
//! over at the ETag read. Each non-unique value gets its index row. Then it
//! writes X (1) at the ETag read, the commit point, through the table's
//! writer (of a [fenced](crate::Table::fenced) table the entity's write is
//! fenced, its claims are not); last, the rows of the values it freed are
//! removed at the ETags read. A write changing no indexed value is the
//! plain write; an unconditional one is sent conditioned on the row as
//! just read, and retried when it changed.
//!
//! A delete leaves a tombstone and its claims, which the next writer of
//! the value finds stale, as is a claim whose writer died before its
//! entity write. So a lookup ([`Table::get_by`](crate::Table::get_by),
//! `find_by`, `find_range`) answers an entity only if it holds the value.
//!
//! **How long a claim or tombstone is relied on.** A writer sends its
//! entity's write within `SEND_WINDOW` (5 minutes) of starting its claims
//! (past it: [`Error::Timeout`]), and the service refuses a Shared Key
//! request dated more than 15 minutes off, so a stalled write lands within
//! 20 minutes or never; with 5 minutes of clock skew,
//! `STALLED_WRITE_BOUND` = 25 minutes. Past that,
//! [`Store::sweep`](crate::Store::sweep) removes tombstones and stale
//! claims (each at the ETag read); see "Rows commits leave behind" in
//! [`crate::lock`].
//!
//! **Units.** Before a [`Unit`](crate::lock::Unit)'s commit sends
//! anything, it conditions each staged write of an indexed type on the row
//! as the unit read it and claims the values they set as above; a value
//! another entity holds fails the commit with [`Error::ValueTaken`],
//! nothing applied. A unit moving a value between two of its entities
//! takes the claim over naming both, so the first holds it until the
//! commit lands. Two writes of one unit claiming one value are refused,
//! and so is a [`Batch`](crate::table::Batch) of an indexed type (its
//! transaction cannot carry the claims).
//!
//! # Errors of indexed writes
//!
//! A write that claims a value adds to its errors:
//!
//! * [`Error::ValueTaken`] (code `UniqueValueTaken`) when a unique field
//!   would take a value another entity holds. An insert of existing keys
//!   is [`Error::AlreadyExists`] when its unique values are free or its
//!   own.
//! * [`Error::Timeout`] when the claim kept changing under the write (16
//!   tries), or an unconditional write's row did (8 attempts).
//! * [`Error::Invalid`] when a value's index partition key would be too
//!   long, before any request.
//!
//! # Adding an index to a populated table
//!
//! Marking a field changes no stored row: until the entities already
//! there are backfilled, lookups miss them and their unique values are not
//! defended.
//!
//! 1. **Deploy the new type to every writer first** (old writers write no
//!    index rows), and move batches of the type into units.
//! 2. **Backfill** with [`Table::rebuild_indexes`](crate::Table::rebuild_indexes)
//!    or `leasehold indexes rebuild TABLE`
//!    ([`Store::rebuild_indexes`](crate::Store::rebuild_indexes), which
//!    needs the index descriptions the new version writes at its first
//!    indexed write). It reads the whole table; writes may go on.
//! 3. **Verify** with [`Table::verify_indexes`](crate::Table::verify_indexes)
//!    or `leasehold indexes verify TABLE`; rebuild again if old writers
//!    were still running.
//! 4. **Duplicates** of a new unique field are reported in
//!    [`IndexReport::duplicates`], never fixed: each other holder must get
//!    another value.
//!
//! ```
//! use leasehold::{Entity, Store};
//!
//! #[derive(Entity, Debug, Clone)]
//! #[entity(table = "Members")]
//! struct MemberV1 { #[entity(partition_key)] region: String, #[entity(row_key)] id: String, email: String }
//!
//! /// The new version: the e-mail is unique.
//! #[derive(Entity, Debug, Clone)]
//! #[entity(table = "Members")]
//! struct Member { #[entity(partition_key)] region: String, #[entity(row_key)] id: String, #[entity(unique)] email: String }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let store = Store::memory();
//! for (id, email) in [("1", "ann@x.org"), ("2", "bob@x.org"), ("3", "ann@x.org")] {
//!     let old = MemberV1 { region: "eu".into(), id: id.into(), email: email.into() };
//!     store.table::<MemberV1>().insert(old).await?;
//! }
//! let members = store.table::<Member>();
//! let c = Member::columns();
//! assert!(members.get_by(c.email, "bob@x.org").await?.is_none()); // not yet indexed
//!
//! let fixed = members.rebuild_indexes().await?; // backfill
//! assert_eq!(fixed.repaired, 2); // a row for ann@x.org, one for bob@x.org
//! assert_eq!(members.get_by(c.email, "bob@x.org").await?.expect("indexed").id, "2");
//! let dup = &fixed.duplicates[0]; // ann@x.org, held by "1" and "3"
//! assert_eq!((dup.value.as_str(), dup.entities.len()), ("ann@x.org", 2));
//! assert_eq!(dup.partition_key.as_str(), "email ann@x.0org");
//!
//! members.update_with("eu", "3", |m| m.email = "ann.b@x.org".into()).await?;
//! assert!(members.verify_indexes().await?.is_consistent());
//! # Ok::<(), leasehold::Error>(()) }).unwrap();
//! ```
//!
//! # Cost per write
//!
//! An insert claiming one fresh unique value costs 2 requests in 2 round
//! trips (the claim, the entity); a change of the value 4 in 3 (new claim
//! and old claim's read, the entity, the old claim's removal); a delete 1
//! (the tombstone); `get_by` 2. An insert refused because another entity
//! holds its value costs 3; taking over a stale claim 4 more. Each further
//! value adds its claim, sent with the others at once.

pub(crate) mod claim;
mod lookup;
mod unit;
mod verify;
mod write;

use std::ops::Bound::Unbounded;
use std::sync::{Arc, Mutex, Weak};

pub(crate) use unit::UnitClaims;
pub use verify::{DuplicateValue, IndexReport};
pub(crate) use verify::{defs_of, report, stale_rows, still_stale};
pub(crate) use write::writes;

use crate::backend::{Precondition, TableOp};
use crate::entity::{EntityData, Properties, Value};
use crate::error::{Error, Result};
use crate::key::{CompositeKey, KeyPart, PartitionKey, RowKey, TableName};
use crate::table::TableEnv;

pub(crate) use crate::rows::SEND_WINDOW;

/// How long a tombstone or a stale claim is relied on (module docs).
pub(crate) const STALLED_WRITE_BOUND: std::time::Duration = std::time::Duration::from_secs(25 * 60);

/// The names of the storage layout (module docs).
pub(crate) const TABLE_SUFFIX: &str = "Idx";
pub(crate) const ENTITY_PK: &str = "EntityPartitionKey";
pub(crate) const ENTITY_RK: &str = "EntityRowKey";
pub(crate) const DEFS_PARTITION: &str = "~indexes";
pub(crate) const UNIQUE: &str = "Unique";

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Def {
    pub(crate) field: String,
    pub(crate) property: String,
    pub(crate) unique: bool,
}

/// The indexes of one entity table in one store.
#[derive(Debug, Clone)]
pub(crate) struct Indexes {
    /// The entity's type (or table) name, for messages.
    pub(crate) type_name: String,
    pub(crate) table: TableName,
    pub(crate) index_table: TableName,
    pub(crate) defs: Vec<Def>,
}

/// The key form of a stored value in an index, or why it has none.
pub(crate) fn value_key(value: &Value) -> std::result::Result<String, String> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Int32(v) => Ok(i64::from(*v).to_key()),
        Value::Int64(v) => Ok(v.to_key()),
        Value::Guid(g) => Ok(g.to_key()),
        Value::DateTime(t) => Ok(t.to_key()),
        other => Err(format!(
            "an {} value has no key form; index strings, integers, GUIDs or date-times",
            other.edm_type()
        )),
    }
}

/// A value as error messages show it.
pub(crate) fn show(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        Value::Int32(v) => v.to_string(),
        Value::Int64(v) => v.to_string(),
        Value::Guid(g) => g.to_string(),
        Value::DateTime(t) => crate::datetime::format(*t),
        other => format!("{other:?}"),
    }
}

pub(crate) fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => show(other),
    }
}

/// An index value and its key form.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Key {
    pub(crate) value: Value,
    pub(crate) key: String,
}

impl Indexes {
    pub(super) fn new(
        tables: &TableEnv,
        declared_table: &str,
        type_name: String,
        defs: &[crate::entity::entity_type::IndexDef],
    ) -> Result<Indexes> {
        Ok(Indexes {
            type_name,
            table: tables.table_name(declared_table)?,
            index_table: tables.table_name(&format!("{declared_table}{TABLE_SUFFIX}"))?,
            defs: defs
                .iter()
                .map(|d| Def {
                    field: d.field.to_owned(),
                    property: d.property.to_owned(),
                    unique: d.unique,
                })
                .collect(),
        })
    }

    /// The index values of an entity's stored properties, one per index.
    pub(crate) fn keys(&self, properties: Option<&Properties>) -> Result<Vec<Option<Key>>> {
        self.defs
            .iter()
            .map(|def| match properties.and_then(|p| p.get(&def.property)) {
                None => Ok(None),
                Some(value) => value_key(value)
                    .map(|key| {
                        Some(Key {
                            value: value.clone(),
                            key,
                        })
                    })
                    .map_err(|why| {
                        Error::invalid(
                            format!("indexed property `{}` of {}", def.property, self.type_name),
                            why,
                        )
                    }),
            })
            .collect()
    }

    /// The values a write changes from `before` to `after` (stored).
    pub(crate) fn changes(
        &self,
        before: Option<&Properties>,
        after: Option<&Properties>,
    ) -> Result<Changes> {
        let mut changes = Changes::default();
        let pairs = self.keys(before)?.into_iter().zip(self.keys(after)?);
        for (i, (old, new)) in pairs.enumerate() {
            if old.as_ref().map(|k| &k.key) == new.as_ref().map(|k| &k.key) {
                continue;
            }
            changes.claims.extend(new.map(|new| (i, new)));
            if let Some(old) = old {
                if after.is_some() {
                    changes.frees.push((i, old.clone()));
                }
                changes.releases.push((i, old));
            }
        }
        Ok(changes)
    }

    pub(crate) fn partition(&self, def: &Def, key: &str) -> Result<PartitionKey> {
        PartitionKey::new(CompositeKey::join([def.property.as_str(), key])).map_err(|e| {
            Error::invalid(
                format!("{}.{} index value", self.type_name, def.field),
                format!("its index partition key is not a valid key: {e}"),
            )
        })
    }

    pub(crate) fn row(def: &Def, pk: &PartitionKey, rk: &RowKey) -> Result<RowKey> {
        if def.unique {
            RowKey::new(crate::rows::claim::ROW)
        } else {
            RowKey::new(CompositeKey::join([pk.as_str(), rk.as_str()]))
        }
    }

    pub(crate) fn duplicate(
        &self,
        def: &Def,
        value: &Value,
        holder: Option<(PartitionKey, RowKey)>,
    ) -> Error {
        Error::ValueTaken {
            index: format!("{}.{}", self.type_name, def.field),
            value: show(value),
            table: self.table.as_str().to_owned(),
            holder: holder.map(Box::new),
        }
    }
}

/// The key form of the value of the index row in partition `ipk`.
pub(crate) fn value_key_of(ipk: &PartitionKey) -> Option<String> {
    let mut parts = CompositeKey::split(ipk.as_str()).ok()?;
    (parts.len() == 2).then(|| parts.swap_remove(1))
}

/// The index values a write changes, each with its index's position.
#[derive(Debug, Default)]
pub(crate) struct Changes {
    pub(crate) claims: Vec<(usize, Key)>,
    /// The values it takes away whose rows go once it landed (a delete
    /// leaves its claims to the next writer).
    pub(crate) frees: Vec<(usize, Key)>,
    /// Every value it takes away.
    pub(crate) releases: Vec<(usize, Key)>,
}

pub(crate) fn target_of(data: &EntityData) -> Option<(PartitionKey, RowKey)> {
    keys_in(data, ENTITY_PK, ENTITY_RK)
}

fn keys_in(data: &EntityData, pk: &str, rk: &str) -> Option<(PartitionKey, RowKey)> {
    let text = |name: &str| match data.properties.get(name) {
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    };
    Some((
        PartitionKey::new(text(pk)?).ok()?,
        RowKey::new(text(rk)?).ok()?,
    ))
}

static DEFS_WRITTEN: Mutex<Vec<(Weak<TableEnv>, TableName)>> = Mutex::new(Vec::new());

/// Creates the index table and writes the definition rows of `indexes`,
/// unless this process did for this store.
pub(crate) async fn ensure_defs(env: &Arc<TableEnv>, indexes: &Indexes) -> Result<()> {
    let weak = Arc::downgrade(env);
    let known = {
        let mut written = DEFS_WRITTEN.lock().unwrap_or_else(|p| p.into_inner());
        written.retain(|(w, _)| w.strong_count() > 0);
        written
            .iter()
            .any(|(w, t)| Weak::ptr_eq(w, &weak) && t == &indexes.index_table)
    };
    if known {
        return Ok(());
    }
    env.ensure_table(&indexes.index_table).await?;
    let pk = PartitionKey::new(DEFS_PARTITION)?;
    let ops: Vec<TableOp> = indexes
        .defs
        .iter()
        .map(|def| {
            let mut properties = Properties::with_capacity(2);
            properties.insert_static(UNIQUE, Value::Boolean(def.unique));
            properties.insert("Field", Value::String(def.field.clone()));
            let row = crate::rows::row(&pk, &RowKey::new(def.property.clone())?, properties);
            Ok(TableOp::Replace(row, Precondition::Upsert))
        })
        .collect::<Result<_>>()?;
    env.backend.batch(&indexes.index_table, &ops).await?;
    DEFS_WRITTEN
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push((weak, indexes.index_table.clone()));
    Ok(())
}

/// Forgets that this process wrote the definition rows of `index_table`
/// (the store deleted it), so the next indexed write writes them again.
pub(crate) fn forget_defs(env: &Arc<TableEnv>, index_table: &TableName) {
    let weak = Arc::downgrade(env);
    DEFS_WRITTEN
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|(w, t)| !(Weak::ptr_eq(w, &weak) && t == index_table));
}

/// Reads the definition rows of entity table `table` (unprefixed).
pub(crate) async fn read_defs(env: &Arc<TableEnv>, table: &str) -> Result<Option<Indexes>> {
    let entity_table = env.table_name(table)?;
    let index_table = env.table_name(&format!("{table}{TABLE_SUFFIX}"))?;
    let spec = crate::backend::QuerySpec {
        filter: crate::query::scope_filter(Some(DEFS_PARTITION), &(Unbounded, Unbounded), None),
        ..crate::backend::QuerySpec::default()
    };
    let page = match env.backend.query(&index_table, &spec).await {
        Ok(page) => page,
        Err(Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let defs: Vec<Def> = page
        .entities
        .iter()
        .map(|row| Def {
            property: row.data.row_key.as_str().to_owned(),
            field: match row.data.properties.get("Field") {
                Some(Value::String(f)) => f.clone(),
                _ => row.data.row_key.as_str().to_owned(),
            },
            unique: matches!(row.data.properties.get(UNIQUE), Some(Value::Boolean(true))),
        })
        .collect();
    if defs.is_empty() {
        return Ok(None);
    }
    Ok(Some(Indexes {
        type_name: table.to_owned(),
        table: entity_table,
        index_table,
        defs,
    }))
}
