//! Typed queries over a [`Table`].

use std::ops::Bound;
use std::sync::Arc;

use futures_core::Stream;
use futures_util::{StreamExt as _, TryStreamExt as _, stream};

use super::handle::{SameTable, Table};
use super::stored::versioned_from;
use crate::backend::{QuerySpec, StoredEntity};
use crate::entity::{Entity, Versioned, property_name_problem};
use crate::error::{Error, Result};
use crate::key::PartitionKey;
use crate::query::{ContinuationToken, Filter, TypedFilter, digest, scope_builders, scope_filter};

/// A query over a [`Table`]: partition, row-key range, filter, projection,
/// page size and resume token, then [`Query::stream`], [`Query::page`],
/// [`Query::pages`] or [`Query::all`].
///
/// ```
/// # use leasehold::{Entity, Store};
/// # use futures_util::TryStreamExt;
/// # #[derive(Entity, Clone, Debug)]
/// # #[entity(table = "Accounts")]
/// # struct Account { #[entity(partition_key)] customer: String, #[entity(row_key)] name: String, balance: i64 }
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let accounts = Store::memory().table::<Account>();
/// for (name, balance) in [("checking", 10), ("savings", 500), ("spare", 0)] {
///     accounts.insert(Account { customer: "alice".into(), name: name.into(), balance }).await?;
/// }
/// let c = Account::columns();
/// let rich: Vec<_> = accounts
///     .query()
///     .partition("alice")
///     .row_key_prefix("s")
///     .filter(c.balance.gt(100))
///     .stream()
///     .try_collect()
///     .await?;
/// assert_eq!(rich.len(), 1);
/// assert_eq!(rich[0].name, "savings");
/// # Ok::<(), leasehold::Error>(()) }).unwrap();
/// ```
#[must_use = "a Query does nothing until `stream()`, `pages()`, `page().await` or `all().await`"]
pub struct Query<E> {
    table: Table<E>,
    partition: Option<Result<PartitionKey>>,
    rows: (Bound<String>, Bound<String>),
    filter: Option<TypedFilter<E>>,
    select: Option<Vec<String>>,
    page_size: Option<u16>,
    resume: Option<ContinuationToken>,
    on_decode_error: OnDecodeError,
}

/// See [`Query::on_decode_error`]; `None`: the error is returned.
type OnDecodeError = Option<Arc<dyn Fn(Error) + Send + Sync>>;

impl<E> std::fmt::Debug for Query<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Query")
            .field("rows", &self.rows)
            .field("filter", &self.filter)
            .field("select", &self.select)
            .field("page_size", &self.page_size)
            .finish_non_exhaustive()
    }
}

/// Pages of rows, each with whether a page follows.
pub(super) type KeyPages = stream::BoxStream<'static, Result<(Vec<StoredEntity>, bool)>>;

/// A page's rows as decoded (or errors), and the token of the next page.
pub(super) type RowPage<T> = (Vec<Result<T>>, Option<ContinuationToken>);

/// One page of typed results.
#[derive(Debug, Clone)]
pub struct Page<E> {
    /// The entities of this page, in key order (maybe none though more
    /// follow).
    pub items: Vec<Versioned<E>>,
    /// Where the next page starts, for [`Query::resume`] on the same query;
    /// `None` on the last page.
    pub continuation: Option<ContinuationToken>,
}

impl<E> Page<E> {
    pub(super) async fn of((items, continuation): RowPage<Versioned<E>>) -> Result<Page<E>> {
        Ok(Page {
            items: items.into_iter().collect::<Result<_>>()?,
            continuation,
        })
    }
}

impl<E: Entity> Table<E> {
    /// A query over this table. Fence rows (row keys starting with
    /// `~lhfence~`, see [`Fence`](super::Fence)) are left out.
    pub fn query(&self) -> Query<E> {
        Query {
            table: self.clone(),
            partition: None,
            rows: (Bound::Unbounded, Bound::Unbounded),
            filter: None,
            select: None,
            page_size: None,
            resume: None,
            on_decode_error: None,
        }
    }
}

impl<E: Entity> Query<E> {
    scope_builders!("Only entities of this partition.");

    /// Returns only these properties (and the keys and Timestamp); fields
    /// not selected must tolerate absence. See also [`Query::select`].
    pub fn select_properties(mut self, properties: &[&str]) -> Self {
        self.select = Some(properties.iter().map(|p| (*p).to_owned()).collect());
        self
    }

    /// A projection: the same query, reading only the properties of `V`, an
    /// entity type of the same table, decoded as `V`.
    ///
    /// ```
    /// # use leasehold::{Entity, Store};
    /// #[derive(Entity, Clone, Debug)]
    /// #[entity(table = "Orders")]
    /// struct Order { #[entity(partition_key)] customer: String, #[entity(row_key)] id: String, total: i64, notes: String }
    ///
    /// #[derive(Entity, Clone, Debug)]
    /// #[entity(table = "Orders")]
    /// struct OrderTotal { #[entity(partition_key)] customer: String, #[entity(row_key)] id: String, total: i64 }
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let store = Store::memory();
    /// let orders = store.table::<Order>();
    /// orders.insert(Order { customer: "alice".into(), id: "1".into(), total: 30,
    ///                       notes: "tea, ".repeat(100) }).await?;
    /// let totals = orders.query().partition("alice").select::<OrderTotal>().all().await?;
    /// assert_eq!(totals[0].total, 30);
    /// let mut one = orders.get_as::<OrderTotal>("alice", "1").await?.expect("stored");
    /// assert_eq!(one.total, 30);
    ///
    /// // Written back, a projection is merged: `notes` stays as stored.
    /// one.total = 35;
    /// let totals_table = store.table::<OrderTotal>();
    /// assert!(totals_table.replace(&one).await.is_err()); // would delete `notes`
    /// totals_table.merge(&one).await?;
    /// assert_eq!(orders.get("alice", "1").await?.expect("stored").notes, "tea, ".repeat(100));
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// A projection is written back by `merge`; `replace` refuses it
    /// ([`Error::Invalid`]). A type of another table is a build error (not
    /// under `cargo check`):
    ///
    /// ```compile_fail
    /// # use leasehold::{Entity, Store};
    /// #[derive(Entity, Clone, Debug)]
    /// #[entity(table = "Orders")]
    /// struct Order { #[entity(partition_key)] customer: String, #[entity(row_key)] id: String }
    /// #[derive(Entity, Clone, Debug)]
    /// #[entity(table = "Invoices")]
    /// struct Invoice { #[entity(partition_key)] customer: String, #[entity(row_key)] id: String }
    ///
    /// let _ = Store::memory().table::<Order>().query().select::<Invoice>();
    /// ```
    pub fn select<V: Entity>(self) -> Query<V> {
        let () = SameTable::<E, V>::CHECK;
        Query {
            table: self.table.view::<V>(),
            partition: self.partition,
            rows: self.rows,
            filter: self.filter.map(TypedFilter::view),
            select: Some(V::PROPERTY_NAMES.iter().map(|p| (*p).to_owned()).collect()),
            page_size: self.page_size,
            resume: self.resume,
            on_decode_error: self.on_decode_error,
        }
    }

    /// Entities per page, 1 to [`QuerySpec::MAX_PAGE_SIZE`] (the default).
    pub fn page_size(mut self, size: u16) -> Self {
        self.page_size = Some(size);
        self
    }

    /// Leaves out the rows that do not decode into `E` and hands each one's
    /// [`Error::Decode`] to `report` (without it, such a row fails the
    /// query).
    ///
    /// ```
    /// # use leasehold::{Entity, Store};
    /// use std::sync::{Arc, Mutex};
    /// # #[derive(Entity, Clone, Debug)]
    /// # #[entity(table = "Orders")]
    /// # struct Order { #[entity(partition_key)] shop: String, #[entity(row_key)] id: String, total: i64 }
    /// # #[derive(Entity, Clone, Debug)]
    /// # #[entity(table = "Orders")]
    /// # struct LegacyOrder { #[entity(partition_key)] shop: String, #[entity(row_key)] id: String, total: String }
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let store = Store::memory();
    /// let orders = store.table::<Order>();
    /// orders.insert(Order { shop: "s".into(), id: "1".into(), total: 5 }).await?;
    /// // An older program stored the total as text.
    /// let legacy = LegacyOrder { shop: "s".into(), id: "2".into(), total: "five".into() };
    /// store.table::<LegacyOrder>().insert(legacy).await?;
    ///
    /// let bad = Arc::new(Mutex::new(Vec::new()));
    /// let report = Arc::clone(&bad);
    /// let good = orders
    ///     .query()
    ///     .partition("s")
    ///     .on_decode_error(move |e| report.lock().unwrap().push(e))
    ///     .all()
    ///     .await?;
    /// assert_eq!(good.len(), 1);
    /// let errors = bad.lock().unwrap();
    /// assert_eq!(errors.len(), 1);
    /// assert!(errors[0].to_string().contains(r#"RowKey "2""#));
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    pub fn on_decode_error(mut self, report: impl Fn(Error) + Send + Sync + 'static) -> Self {
        self.on_decode_error = Some(Arc::new(report));
        self
    }

    /// Resumes where a [`Page`] of the same query (table, filter,
    /// selection; not page size) left off; a token of another query is
    /// [`Error::Invalid`] before any request.
    pub fn resume(mut self, token: ContinuationToken) -> Self {
        self.resume = Some(token);
        self
    }

    /// The query's table, its first request, validated, and the digest its
    /// tokens carry: the `start` of [`Query::row_pages`].
    fn spec(self) -> Result<(Table<E>, QuerySpec, u64)> {
        let partition = self.partition.transpose()?;
        let partition = partition.as_ref().map(PartitionKey::as_str);
        let user = self.filter.map(TypedFilter::into_filter).transpose()?;
        let filter = scope_filter(partition, &self.rows, user);
        if let Some(select) = &self.select {
            for name in select {
                if let Some(why) = property_name_problem(name) {
                    return Err(Error::invalid(format!("selected property {name:?}"), why));
                }
            }
        }
        if let Some(size) = self.page_size
            && (size == 0 || size > QuerySpec::MAX_PAGE_SIZE)
        {
            return Err(Error::invalid(
                "page size",
                format!("{size} is outside 1..={}", QuerySpec::MAX_PAGE_SIZE),
            ));
        }
        // What tokens name: the table, the filter and the selection.
        let query = digest(
            format!(
                "{}\n{}\n{:?}",
                self.table.name()?.as_str().to_ascii_lowercase(),
                filter.as_ref().map(Filter::to_odata).unwrap_or_default(),
                self.select
            )
            .as_bytes(),
        );
        let continuation = match &self.resume {
            Some(token) if token.query != query => {
                return Err(Error::invalid(
                    "continuation token",
                    "belongs to another query (its table, filter or selection differ)",
                ));
            }
            Some(token) => Some(token.at.clone()),
            None => None,
        };
        // The query as asked; what is sent for it is `query_request`'s.
        let spec = QuerySpec {
            filter,
            select: self.select,
            top: self.page_size,
            continuation,
        };
        spec.validate()?;
        Ok((self.table, spec, query))
    }

    /// The query's table and the pages of the keys (and ETags) of the rows
    /// it matches, for purges and counts (an empty row-key range refused).
    pub(super) fn key_pages(self) -> Result<(Table<E>, KeyPages)> {
        check_range(&self.rows)?;
        let (table, mut spec, query) = self.spec()?;
        // Keys, Timestamp and ETag always come back: no property is asked.
        spec.select = Some(Vec::new());
        let pages = Self::row_pages(Ok((table.clone(), spec, query)), |row, _| Some(Ok(row)));
        let pages =
            pages.map_ok(|(rows, next)| (rows.into_iter().flatten().collect(), next.is_some()));
        Ok((table, pages.boxed()))
    }

    /// The pages of a query from `start` (its table, first request and
    /// token digest), each row decoded (or left out) by `decode` (given
    /// whether rows are whole), each page with the next one's token. Ends
    /// after a page holding an error.
    pub(super) fn row_pages<T: Send + 'static>(
        start: Result<(Table<E>, QuerySpec, u64)>,
        decode: impl Fn(StoredEntity, bool) -> Option<Result<T>> + Send + 'static,
    ) -> impl Stream<Item = Result<RowPage<T>>> + Send + 'static {
        let start = start.map(|start| (start, decode));
        stream::try_unfold(Some(start), |state| async move {
            let Some(start) = state else {
                return Ok(None);
            };
            let ((table, mut spec, query), decode) = start?;
            // As reads see them (see [`TableEnv::query_page`](super::TableEnv::query_page)).
            let read = async {
                table
                    .env
                    .query_page(table.ready_to_read().await?, &spec)
                    .await
            };
            let page = table.env.telemetry.operation("query", read).await?;
            let complete = spec.select.is_none();
            let items: Vec<_> = page
                .entities
                .into_iter()
                .filter_map(|row| decode(row, complete))
                .collect();
            let next = page.continuation;
            let token = next.clone().map(|at| ContinuationToken::new(at, query));
            let rest = match next {
                Some(at) if items.iter().all(Result::is_ok) => {
                    spec.continuation = Some(at);
                    Some(Ok(((table, spec, query), decode)))
                }
                _ => None,
            };
            Ok(Some(((items, token), rest)))
        })
    }

    fn decoded_pages(self) -> impl Stream<Item = Result<RowPage<Versioned<E>>>> + Send + 'static {
        let policy = self.on_decode_error.clone();
        Self::row_pages(self.spec(), move |row, complete| {
            match (versioned_from(row, complete), &policy) {
                (Err(e @ Error::Decode { .. }), Some(report)) => {
                    tracing::debug!(error = %e, "leaving out a row that does not decode");
                    report(e);
                    None
                }
                (row, _) => Some(row),
            }
        })
    }

    /// The `start` of [`Query::row_pages`] for an export (no projection).
    pub(super) fn into_export(self) -> Result<(Table<E>, QuerySpec, u64)> {
        if self.select.is_some() {
            return Err(Error::invalid(
                "export of a query with a projection",
                "an export reads whole rows; leave out `select` and `select_properties`",
            ));
        }
        self.spec()
    }

    /// Reads one page.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad filter, page size or token (before any
    /// request); [`Error::Decode`] for a row that does not decode, unless
    /// [`Query::on_decode_error`] says otherwise; backend errors.
    pub async fn page(self) -> Result<Page<E>> {
        let first = std::pin::pin!(self.pages()).try_next().await?;
        Ok(first.unwrap_or(Page {
            items: Vec::new(),
            continuation: None,
        }))
    }

    /// The pages of the query, one request each.
    ///
    /// ```
    /// # use leasehold::{Entity, Store};
    /// use leasehold::stream::TryStreamExt as _;
    /// use leasehold::query::ContinuationToken;
    /// # #[derive(Entity, Clone, Debug)]
    /// # #[entity(table = "Orders")]
    /// # struct Order { #[entity(partition_key)] customer: String, #[entity(row_key)] id: String, total: i64 }
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let orders = Store::memory().table::<Order>();
    /// for (id, total) in [("1", 10), ("2", 20), ("3", 30)] {
    ///     orders.insert(Order { customer: "alice".into(), id: id.into(), total }).await?;
    /// }
    /// let pages: Vec<_> = orders.query().page_size(2).pages().try_collect().await?;
    /// assert_eq!(pages.iter().map(|p| p.items.len()).collect::<Vec<_>>(), [2, 1]);
    ///
    /// // Or one page per request of a client, who carries the token as text:
    /// let first = orders.query().page_size(2).page().await?;
    /// let text = first.continuation.expect("a next page").to_string();
    /// let token: ContinuationToken = text.parse()?; // `Invalid` if made up
    /// let second = orders.query().page_size(2).resume(token).page().await?;
    /// assert_eq!((second.items[0].total, second.continuation), (30, None));
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// Through the stream, which ends after the first: as [`Query::page`].
    pub fn pages(self) -> impl Stream<Item = Result<Page<E>>> + Send + 'static {
        self.decoded_pages().and_then(Page::of).boxed()
    }

    /// Every matching entity, page after page, as a stream.
    ///
    /// # Errors
    /// Through the stream, which ends after the first: as [`Query::page`].
    pub fn stream(self) -> impl Stream<Item = Result<Versioned<E>>> + Send + 'static {
        self.decoded_pages()
            .map_ok(|(mut items, _)| {
                // The stream ends with its first error.
                if let Some(failed) = items.iter().position(Result::is_err) {
                    items.truncate(failed + 1);
                }
                stream::iter(items)
            })
            .try_flatten()
            .boxed()
    }

    /// Every matching entity, collected.
    ///
    /// # Errors
    /// As [`Query::page`].
    pub async fn all(self) -> Result<Vec<Versioned<E>>> {
        self.stream().try_collect().await
    }
}

/// Refuses a row-key range that holds no key.
fn check_range(rows: &(Bound<String>, Bound<String>)) -> Result<()> {
    let (start, end, open) = match rows {
        (Bound::Included(s), Bound::Included(e)) => (s, e, false),
        (Bound::Included(s) | Bound::Excluded(s), Bound::Excluded(e))
        | (Bound::Excluded(s), Bound::Included(e)) => (s, e, true),
        _ => return Ok(()),
    };
    // Keys sort as the service sorts them: by UTF-16 code units.
    let order = start.encode_utf16().cmp(end.encode_utf16());
    if order.is_gt() || (open && order.is_eq()) {
        return Err(Error::invalid(
            "row key range",
            format!("from {start:?} to {end:?} holds no row key: its start is not before its end"),
        ));
    }
    Ok(())
}
