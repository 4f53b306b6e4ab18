//! [`Store::import`].

use std::collections::{HashMap, HashSet};
use std::ops::Bound;
use std::sync::Arc;

use futures_core::Stream;
use futures_util::stream::{BoxStream, FuturesOrdered};
use futures_util::{FutureExt as _, StreamExt as _, future::BoxFuture, stream};

use super::Store;
use crate::backend::wire::EntityBody;
use crate::backend::{Backend, Precondition, TableOp};
use crate::entity::{DynamicEntity, EntityData, validate_entity};
use crate::error::{Error, ErrorKind, Result};
use crate::key::{PartitionKey, RowKey, TableName};
use crate::query::scope_filter;

/// How [`Store::import`] writes rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportOptions {
    upsert: bool,
    concurrency: usize,
}

impl ImportOptions {
    /// The default of [`ImportOptions::with_concurrency`].
    pub const DEFAULT_CONCURRENCY: usize = 8;

    /// Each row is inserted: a row already stored fails the import with
    /// [`Error::AlreadyExists`], unless it is stored exactly as the input
    /// has it ([`ImportProgress::already_there`]).
    pub fn insert_only() -> Self {
        ImportOptions {
            upsert: false,
            concurrency: Self::DEFAULT_CONCURRENCY,
        }
    }

    /// Each row is inserted or replaced, unconditionally.
    pub fn upsert() -> Self {
        ImportOptions {
            upsert: true,
            ..Self::insert_only()
        }
    }

    /// At most `transactions` transactions in flight at once (1 to 256).
    #[must_use]
    pub fn with_concurrency(mut self, transactions: usize) -> Self {
        self.concurrency = transactions;
        self
    }
}

/// How far an import has come, reported after each transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ImportProgress {
    /// The rows of the input, from its start, that are stored (a resumed
    /// import skips this many).
    pub rows: u64,
    /// Of those, the rows this import wrote.
    pub written: u64,
    /// Of those, the rows an insert-only import found already stored.
    pub already_there: u64,
}

/// One transaction's rows, stored.
struct Sent {
    /// The input rows before this count are stored once this one is.
    end: u64,
    written: u64,
    already_there: u64,
    keys: Vec<(PartitionKey, RowKey)>,
}

impl Store {
    /// Writes `rows` (an export's lines, read back with
    /// [`DynamicEntity::from_json_line`]) into table `table` (without the
    /// store's prefix; created when missing), consecutive rows of one
    /// partition in transactions of up to 100 operations and 4 MiB, several
    /// in flight. To resume, import the same input without its first
    /// [`ImportProgress::rows`] rows.
    ///
    /// Rows are written as they are: index tables are not written (import
    /// them too, or rebuild the indexes). Import into a table nothing else
    /// writes meanwhile.
    ///
    /// ```
    /// use leasehold::store::{ImportOptions, ImportProgress};
    /// use leasehold::stream::TryStreamExt as _;
    /// use leasehold::DynamicEntity;
    /// # #[derive(leasehold::Entity, Clone, Debug)]
    /// # #[entity(table = "Orders")]
    /// # struct Order { #[entity(partition_key)] shop: String, #[entity(row_key)] id: String, total: i64 }
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let lines = "{\"PartitionKey\":\"s1\",\"RowKey\":\"7\",\"total\":\"42\",\"total@odata.type\":\"Edm.Int64\"}\n\
    ///              {\"PartitionKey\":\"s2\",\"RowKey\":\"8\",\"total\":\"-1\",\"total@odata.type\":\"Edm.Int64\"}\n";
    /// let rows = futures_util::stream::iter(lines.lines().map(DynamicEntity::from_json_line));
    ///
    /// let store = leasehold::Store::memory();
    /// let last: Option<ImportProgress> = store
    ///     .import("Orders", rows, ImportOptions::insert_only())
    ///     .try_fold(None, |_, progress| async move { Ok(Some(progress)) })
    ///     .await?;
    /// assert_eq!(last.map(|p| (p.rows, p.written)), Some((2, 2)));
    /// assert_eq!(store.table::<Order>().get("s2", "8").await?.unwrap().total, -1);
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// Through the stream, which ends after the first: [`Error::Invalid`]
    /// for a bad concurrency or table name, or a row breaking a service
    /// limit or using a reserved (`_lh…`) property, before it is sent; the
    /// input's errors; [`Error::AlreadyExists`] (insert-only) for a row
    /// stored with other values; backend errors.
    pub fn import<'a, S>(
        &self,
        table: &str,
        rows: S,
        options: ImportOptions,
    ) -> impl Stream<Item = Result<ImportProgress>> + Send + 'a
    where
        S: Stream<Item = Result<DynamicEntity>> + Send + 'a,
    {
        let importer = Importer {
            store: self.clone(),
            table: table.to_owned(),
            name: None,
            options,
            rows: rows.boxed(),
            input_done: false,
            read: 0,
            buffer: Vec::new(),
            buffer_bytes: 0,
            pending: HashMap::new(),
            held: None,
            in_flight: FuturesOrdered::new(),
            progress: ImportProgress::default(),
        };
        // Ends after the first error.
        stream::try_unfold(importer, |mut importer| async move {
            Ok(importer.step().await?.map(|progress| (progress, importer)))
        })
    }
}

/// The state of one import.
struct Importer<'a> {
    store: Store,
    table: String,
    /// Once the table is known to exist.
    name: Option<TableName>,
    options: ImportOptions,
    rows: BoxStream<'a, Result<DynamicEntity>>,
    input_done: bool,
    /// Rows taken from the input.
    read: u64,
    /// Operations of one partition not sent yet.
    buffer: Vec<TableOp>,
    buffer_bytes: usize,
    /// The rows buffered or in flight, counted.
    pending: HashMap<(PartitionKey, RowKey), usize>,
    /// A row met while an earlier write of it is pending.
    held: Option<TableOp>,
    in_flight: FuturesOrdered<BoxFuture<'static, Result<Sent>>>,
    progress: ImportProgress,
}

impl Importer<'_> {
    /// The next report, or the end.
    async fn step(&mut self) -> Result<Option<ImportProgress>> {
        if self.name.is_none() {
            if !(1..=256).contains(&self.options.concurrency) {
                return Err(Error::invalid(
                    "import concurrency",
                    format!(
                        "{} transactions at once is outside 1..=256",
                        self.options.concurrency
                    ),
                ));
            }
            let table = self.store.dynamic_table(&self.table);
            self.name = Some(table.ready().await?.clone());
        }
        loop {
            if self.held.is_some() {
                if !self.in_flight.is_empty() {
                    let sent = self.in_flight.next().await;
                    return self.finished(sent);
                }
                self.flush()?;
                if let Some(op) = self.held.take() {
                    self.buffer_bytes = op.payload_size();
                    self.buffer.push(op);
                }
                continue;
            }
            if !self.input_done && self.in_flight.len() < self.options.concurrency {
                let row = if self.in_flight.is_empty() {
                    self.rows.next().await
                } else {
                    tokio::select! {
                        biased;
                        sent = self.in_flight.next() => return self.finished(sent),
                        row = self.rows.next() => row,
                    }
                };
                match row.transpose()? {
                    None => self.input_done = true,
                    Some(row) => self.take(row)?,
                }
                continue;
            }
            if self.input_done && !self.buffer.is_empty() {
                self.flush()?;
                continue;
            }
            // With room or input left, something is in flight: `None` is
            // the end.
            let sent = self.in_flight.next().await;
            return self.finished(sent);
        }
    }

    fn finished(&mut self, sent: Option<Result<Sent>>) -> Result<Option<ImportProgress>> {
        let Some(sent) = sent.transpose()? else {
            return Ok(None);
        };
        for key in sent.keys {
            if let Some(n) = self.pending.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    self.pending.remove(&key);
                }
            }
        }
        self.progress.rows = sent.end;
        self.progress.written += sent.written;
        self.progress.already_there += sent.already_there;
        Ok(Some(self.progress))
    }

    /// Checks the next input row and buffers its write.
    fn take(&mut self, row: DynamicEntity) -> Result<()> {
        let table = self.name.as_ref().map_or("", |n| n.as_str());
        crate::entity::refuse_reserved_properties(&row.properties, false, |name| {
            format!(
                "property `{name}` of row ({:?}, {:?}) imported into table `{table}`",
                row.partition_key.as_str(),
                row.row_key.as_str()
            )
        })?;
        validate_entity(table, &row.partition_key, &row.row_key, &row.properties)?;
        let data = EntityData {
            partition_key: row.partition_key,
            row_key: row.row_key,
            properties: row.properties,
        };
        let op = if self.options.upsert {
            TableOp::Replace(data, Precondition::Upsert)
        } else {
            TableOp::Insert(data)
        };
        let key = (op.partition_key().clone(), op.row_key().clone());
        let again = self.pending.contains_key(&key);
        let size = op.payload_size();
        let fits = !again
            && self.buffer.first().is_none_or(|first| {
                first.partition_key() == op.partition_key()
                    && self.buffer.len() < TableOp::MAX_BATCH_OPS
                    && self.buffer_bytes + size <= TableOp::MAX_BATCH_BYTES
            });
        if !fits {
            self.flush()?;
        }
        *self.pending.entry(key).or_default() += 1;
        self.read += 1;
        if again {
            // Written again: after the earlier write is stored.
            self.held = Some(op);
        } else {
            self.buffer_bytes += size;
            self.buffer.push(op);
        }
        Ok(())
    }

    /// Sends the buffer as one transaction.
    fn flush(&mut self) -> Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let ops = std::mem::take(&mut self.buffer);
        self.buffer_bytes = 0;
        let Some(name) = self.name.clone() else {
            return Err(Error::Inconsistent {
                what: "an import sent rows before its table was ready".into(),
            });
        };
        let end = self.read - u64::from(self.held.is_some());
        let backend = Arc::clone(self.store.backend());
        let upsert = self.options.upsert;
        self.in_flight
            .push_back(send(backend, name, ops, upsert, end).boxed());
        Ok(())
    }
}

/// Sends one transaction; an insert-only one refused because a row exists
/// is sent again without the rows stored exactly as sent.
async fn send(
    backend: Arc<dyn Backend>,
    table: TableName,
    mut ops: Vec<TableOp>,
    upsert: bool,
    end: u64,
) -> Result<Sent> {
    let keys: Vec<(PartitionKey, RowKey)> = ops
        .iter()
        .map(|op| (op.partition_key().clone(), op.row_key().clone()))
        .collect();
    let mut already_there = 0;
    while !ops.is_empty() {
        match backend.batch(&table, &ops).await {
            Ok(_) => break,
            Err(Error::Batch { source, .. })
                if !upsert && source.kind() == ErrorKind::AlreadyExists =>
            {
                let stored = stored_rows(backend.as_ref(), &table, &ops).await?;
                let before = ops.len();
                let mut kept = Vec::with_capacity(ops.len());
                for op in ops {
                    let Some(data) = op.data() else { continue };
                    match stored.get(data.row_key.as_str()) {
                        None => kept.push(op),
                        Some(text) if *text == line_of(data)? => already_there += 1,
                        Some(_) => {
                            let (pk, rk) = (&data.partition_key, &data.row_key);
                            let e = Error::AlreadyExists {
                                what: format!(
                                    "row ({:?}, {:?}) of table `{table}`, stored with other values than the import's",
                                    pk.as_str(),
                                    rk.as_str()
                                ),
                                code: source.code().map(str::to_owned),
                                table: None,
                                row: None,
                            };
                            return Err(e.for_row(table.as_str(), pk, rk));
                        }
                    }
                }
                if kept.len() == before {
                    // Nothing stored after all: the refusal stands.
                    return Err(Error::Batch { index: 0, source });
                }
                ops = kept;
            }
            Err(e) => return Err(e),
        }
    }
    let written = keys.len() as u64 - already_there;
    Ok(Sent {
        end,
        written,
        already_there,
        keys,
    })
}

/// The stored rows among those `ops` write, as export lines by row key.
async fn stored_rows(
    backend: &dyn Backend,
    table: &TableName,
    ops: &[TableOp],
) -> Result<HashMap<String, String>> {
    let wanted: HashSet<&str> = ops.iter().map(|op| op.row_key().as_str()).collect();
    let (Some(low), Some(high)) = (wanted.iter().min(), wanted.iter().max()) else {
        return Ok(HashMap::new());
    };
    let rows = (
        Bound::Included(low.to_string()),
        Bound::Included(high.to_string()),
    );
    let pk = ops.first().map(|op| op.partition_key().as_str());
    let Some(filter) = scope_filter(pk, &rows, None) else {
        return Ok(HashMap::new());
    };
    let mut found = HashMap::new();
    for row in crate::rows::query_all(backend, table, filter).await? {
        if wanted.contains(row.data.row_key.as_str()) {
            found.insert(row.data.row_key.to_string(), line_of(&row.data)?);
        }
    }
    Ok(found)
}

/// A row's export line, to compare a stored row with an input row.
fn line_of(data: &EntityData) -> Result<String> {
    EntityBody::of(data).to_text()
}
