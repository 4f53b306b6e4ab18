//! The index methods of [`Table`]: lookups, verify and rebuild.

use std::ops::{Bound, RangeBounds};

use futures_core::Stream;
use futures_util::{StreamExt as _, TryStreamExt as _, stream};

use super::verify::{IndexReport, report};
use super::{Indexes, target_of, value_key};
use crate::backend::{QuerySpec, StoredEntity};
use crate::entity::{Entity, PropertyCodec, Versioned, short_type_name};
use crate::error::{Error, Result};
use crate::key::{CompositeKey, KeyPart, PartitionKey, RowKey};
use crate::query::{Column, ColumnValue, Filter, key_range_filter, scope_filter};
use crate::table::TableEnv;
use crate::table::{Table, versioned};
use std::sync::Arc;

impl<E: Entity> Table<E> {
    fn index_on<T>(
        &self,
        column: &Column<E, T>,
        unique: bool,
    ) -> Result<(Arc<TableEnv>, Indexes, usize)>
    where
        T: PropertyCodec,
    {
        let name = column.name();
        let type_name = std::any::type_name::<E>();
        let not_indexed =
            |why: &str| Error::invalid(format!("column `{name}` of {type_name}"), why.to_owned());
        let (env, indexes) = self.indexes_of()?;
        let Some(i) = indexes.defs.iter().position(|d| d.property == name) else {
            return Err(not_indexed(
                "the field is not indexed; mark it `#[entity(unique)]` or `#[entity(index)]`",
            ));
        };
        if unique && !indexes.defs[i].unique {
            return Err(not_indexed(
                "the index is not unique (`#[entity(index)]`); look values up with `find_by`",
            ));
        }
        Ok((env, indexes, i))
    }

    /// The entity holding a value of a `#[entity(unique)]` field; `None`
    /// when no entity holds it. Two reads: the claim, then the entity. See
    /// the [`index`](crate::index) module docs for an example.
    ///
    /// # Errors
    /// [`Error::Invalid`] before any request when the field is not
    /// `#[entity(unique)]` or the value has no key form; [`Error::Decode`];
    /// backend errors.
    pub async fn get_by<T: PropertyCodec + KeyPart>(
        &self,
        column: Column<E, T>,
        value: impl ColumnValue<T>,
    ) -> Result<Option<Versioned<E>>> {
        let (env, indexes, i) = self.index_on(&column, true)?;
        let key = key_of(column.name(), &value.into_column_value())?;
        let def = &indexes.defs[i];
        let ipk = indexes.partition(def, &key)?;
        let read = async {
            env.ensure_table(&indexes.index_table).await?;
            let claim_row = RowKey::new(crate::rows::claim::ROW)?;
            let row = env.read_row(&indexes.index_table, &ipk, &claim_row);
            let Some(row) = row.await? else {
                return Ok(None);
            };
            // The entity the claim names, else one a unit took the claim
            // over from within a commit that frees it: until that commit
            // lands, that entity holds the value.
            let named = target_of(&row.data).into_iter();
            for keys in named.chain(super::claim::prev_of(&row.data)) {
                if let Some(entity) = holds_now(&env, &indexes, i, &key, &keys).await? {
                    return versioned(entity).map(Some);
                }
            }
            Ok(None)
        };
        env.telemetry.operation("get_by", read).await
    }

    /// Every entity whose indexed field holds `value`, as a stream: one
    /// query per page of the value's index partition, one read per entity.
    ///
    /// # Errors
    /// Through the stream, which ends after the first: as
    /// [`Table::get_by`], for any indexed field.
    pub fn find_by<T: PropertyCodec + KeyPart>(
        &self,
        column: Column<E, T>,
        value: impl ColumnValue<T>,
    ) -> impl Stream<Item = Result<Versioned<E>>> + Send + 'static {
        let value = value.into_column_value();
        let start = self.index_on(&column, false).and_then(|(env, indexes, i)| {
            let key = key_of(column.name(), &value)?;
            let ipk = indexes.partition(&indexes.defs[i], &key)?;
            let all = (Bound::Unbounded, Bound::Unbounded);
            let filter = scope_filter(Some(ipk.as_str()), &all, None);
            Ok((env, indexes, i, filter))
        });
        lookup_stream::<E>(start)
    }

    /// Every entity whose indexed field holds a value in `range`, in value
    /// order, as a stream.
    ///
    /// ```
    /// # use leasehold::{Entity, Store};
    /// # use leasehold::stream::TryStreamExt as _;
    /// # #[derive(Entity, Clone, Debug)]
    /// # #[entity(table = "People")]
    /// # struct Person { #[entity(partition_key)] team: String, #[entity(row_key)] name: String, #[entity(index)] age: i64 }
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let people = Store::memory().table::<Person>();
    /// for (name, age) in [("a", 7), ("b", -3), ("c", 40), ("d", 12)] {
    ///     people.insert(Person { team: "t".into(), name: name.into(), age }).await?;
    /// }
    /// let c = Person::columns();
    /// let young: Vec<_> = people.find_range(c.age, -5..=12).try_collect().await?;
    /// let names: Vec<&str> = young.iter().map(|p| p.name.as_str()).collect();
    /// assert_eq!(names, ["b", "a", "d"]);
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// As [`Table::find_by`].
    pub fn find_range<T: PropertyCodec + KeyPart, R: RangeBounds<T>>(
        &self,
        column: Column<E, T>,
        range: R,
    ) -> impl Stream<Item = Result<Versioned<E>>> + Send + 'static {
        let start = self.index_on(&column, false).and_then(|(env, indexes, i)| {
            let def = &indexes.defs[i];
            let pk = |key: &str| Ok::<_, Error>(indexes.partition(def, key)?.as_str().to_owned());
            let bound = |b: Bound<&T>| -> Result<Bound<String>> {
                Ok(match b {
                    Bound::Included(v) => Bound::Included(pk(&key_of(column.name(), v)?)?),
                    Bound::Excluded(v) => Bound::Excluded(pk(&key_of(column.name(), v)?)?),
                    Bound::Unbounded => Bound::Unbounded,
                })
            };
            let low = match bound(range.start_bound())? {
                Bound::Unbounded => Bound::Included(pk("")?),
                low => low,
            };
            let high = match bound(range.end_bound())? {
                // Past every partition of this index: the property, then
                // the character after the separator.
                Bound::Unbounded => {
                    Bound::Excluded(format!("{}!", CompositeKey::join([def.property.as_str()])))
                }
                high => high,
            };
            Ok((
                env,
                indexes,
                i,
                key_range_filter("PartitionKey", (low, high)),
            ))
        });
        lookup_stream::<E>(start)
    }

    /// As [`Store::verify_indexes`](crate::Store::verify_indexes) for this table, with `E`'s indexes.
    ///
    /// # Errors
    /// As [`Store::verify_indexes`](crate::Store::verify_indexes); [`Error::Invalid`] when `E` has no
    /// indexes.
    pub async fn verify_indexes(&self) -> Result<IndexReport> {
        self.report_indexes(false).await
    }

    /// As [`Store::rebuild_indexes`](crate::Store::rebuild_indexes) for this table, with `E`'s indexes.
    ///
    /// # Errors
    /// As [`Table::verify_indexes`].
    pub async fn rebuild_indexes(&self) -> Result<IndexReport> {
        self.report_indexes(true).await
    }

    async fn report_indexes(&self, repair: bool) -> Result<IndexReport> {
        let (env, indexes) = self.indexes_of()?;
        super::ensure_defs(&env, &indexes).await?;
        report(&env, &indexes, repair, &mut |_| {}).await
    }

    fn indexes_of(&self) -> Result<(Arc<TableEnv>, Indexes)> {
        if E::INDEXES.is_empty() {
            return Err(Error::invalid(
                std::any::type_name::<E>(),
                "has no indexes; mark fields `#[entity(unique)]` or `#[entity(index)]`",
            ));
        }
        let env = Arc::clone(&self.env);
        let indexes = Indexes::new(&env, E::TABLE, short_type_name::<E>(), E::INDEXES)?;
        Ok((env, indexes))
    }
}

fn key_of<T: PropertyCodec>(name: &str, value: &T) -> Result<String> {
    let what = || format!("lookup value for `{name}`");
    match value.encode() {
        Ok(Some(v)) => value_key(&v).map_err(|why| Error::invalid(what(), why)),
        Ok(None) => Err(Error::invalid(
            what(),
            "an absent value has no index row; look up a present value",
        )),
        Err(e) => Err(Error::invalid(what(), e.0)),
    }
}

/// Entity `(pk, rk)` if it holds `key` of index `i` now.
async fn holds_now(
    env: &Arc<TableEnv>,
    indexes: &Indexes,
    i: usize,
    key: &str,
    (pk, rk): &(PartitionKey, RowKey),
) -> Result<Option<StoredEntity>> {
    env.ensure_table(&indexes.table).await?;
    let entity = env.read_row(&indexes.table, pk, rk).await?;
    Ok(entity.filter(|e| super::claim::holds(&indexes.defs[i], &e.data.properties, key)))
}

type Start = Result<(Arc<TableEnv>, Indexes, usize, Option<Filter>)>;

/// The entities of the index rows `filter` selects, page after page.
fn lookup_stream<E: Entity>(
    start: Start,
) -> impl Stream<Item = Result<Versioned<E>>> + Send + 'static {
    let start = start.map(|(env, indexes, i, filter)| {
        let spec = QuerySpec {
            filter,
            ..QuerySpec::default()
        };
        (env, indexes, i, spec)
    });
    stream::try_unfold(Some(start), |state| async move {
        let Some(start) = state else {
            return Ok::<_, Error>(None);
        };
        let (env, indexes, i, mut spec) = start?;
        env.ensure_table(&indexes.index_table).await?;
        let page = env.query_page(&indexes.index_table, &spec).await?;
        let mut items: Vec<Result<Versioned<E>>> = Vec::new();
        for row in &page.entities {
            let Some(key) = super::value_key_of(&row.data.partition_key) else {
                continue;
            };
            let Some(target) = target_of(&row.data) else {
                continue;
            };
            if let Some(entity) = holds_now(&env, &indexes, i, &key, &target).await? {
                items.push(versioned(entity));
            }
        }
        if let Some(failed) = items.iter().position(Result::is_err) {
            items.truncate(failed + 1);
            return Ok(Some((stream::iter(items), None)));
        }
        let next = page.continuation.map(|c| {
            spec.continuation = Some(c);
            Ok((env, indexes, i, spec))
        });
        Ok(Some((stream::iter(items), next)))
    })
    .try_flatten()
    .boxed()
}
