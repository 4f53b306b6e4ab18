//! Optimistic read-modify-write: [`Table::update_with`] and
//! [`Table::try_update_with`].

use super::handle::Table;
use crate::entity::{Entity, Versioned};
use crate::error::{Error, ErrorKind, Result};
use crate::key::{IntoPartitionKey, IntoRowKey};

impl<E: Entity> Table<E> {
    /// Read-modify-write with optimistic retries: reads the entity, applies
    /// `f`, and replaces it under the ETag read; on a conflict, re-reads and
    /// applies `f` again after a growing, jittered delay, up to the store's
    /// [`conflict_retry`](crate::StoreBuilder::conflict_retry). `f` may run
    /// several times and must not change the keys.
    ///
    /// ```
    /// # use leasehold::{Entity, Store};
    /// # #[derive(Entity, Clone, Debug)]
    /// # #[entity(table = "Counters")]
    /// # struct Counter { #[entity(partition_key)] pk: String, #[entity(row_key)] rk: String, n: i64 }
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let counters = Store::memory().table::<Counter>();
    /// counters.insert(Counter { pk: "a".into(), rk: "hits".into(), n: 0 }).await?;
    /// let updated = counters.update_with("a", "hits", |c| c.n += 1).await?;
    /// assert_eq!(updated.n, 1);
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// As [`Table::replace`], but [`Error::Conflict`] only when every
    /// attempt conflicted; [`Error::Invalid`] when `f` changed a key;
    /// [`Error::Transient`] when a lost reply cannot be settled (never
    /// with [`Table::with_write_log`]), not retried: a retry could apply `f`
    /// twice.
    pub async fn update_with<F>(
        &self,
        partition_key: impl IntoPartitionKey,
        row_key: impl IntoRowKey,
        mut f: F,
    ) -> Result<Versioned<E>>
    where
        F: FnMut(&mut E),
    {
        let updated = self.try_update_with(partition_key, row_key, |e| {
            f(e);
            Ok::<(), Error>(())
        });
        updated.await.map_err(UpdateError::flatten)
    }

    /// Like [`Table::update_with`], with an update function that may refuse
    /// the change: when `f` returns `Err(u)` (on any attempt), nothing is
    /// sent and the call returns [`UpdateError::Refused`]`(u)`. Example: see
    /// [`UpdateError`].
    ///
    /// # Errors
    /// [`UpdateError::Failed`] with the errors of [`Table::update_with`].
    pub async fn try_update_with<F, U>(
        &self,
        partition_key: impl IntoPartitionKey,
        row_key: impl IntoRowKey,
        mut f: F,
    ) -> std::result::Result<Versioned<E>, UpdateError<U>>
    where
        F: FnMut(&mut E) -> std::result::Result<(), U>,
    {
        let pk = partition_key.into_partition_key()?;
        let rk = row_key.into_row_key()?;
        let policy = self.env.conflict_retry.clone();
        let mut delays = policy.backoff();
        let mut attempts = 0u32;
        let telemetry = &self.env.telemetry;
        let work = async {
            let stored = self.ready().await?.as_str();
            loop {
                attempts += 1;
                let what = || crate::error::what::entity("update", stored, &pk, &rk);
                let mut current = self.get_keys(&pk, &rk).await?.ok_or_else(|| {
                    Error::from_service(404, Some("ResourceNotFound"), what())
                        .for_row(stored, &pk, &rk)
                })?;
                // Replaced whole: the stored properties are kept only for an
                // indexed write (they tell which indexed values change).
                let entity = if E::INDEXES.is_empty() {
                    current.entity_mut_for_replace()
                } else {
                    &mut *current
                };
                f(entity).map_err(UpdateError::Refused)?;
                if current.partition_key()? != pk || current.row_key()? != rk {
                    let why = "the update function changed a key";
                    return Err(Error::invalid(what(), why).into());
                }
                match self.replace(&current).await {
                    Err(e) if e.kind() == ErrorKind::Conflict => match delays.next() {
                        Some(delay) => {
                            telemetry.conflict_retry();
                            tracing::debug!(table = E::TABLE, attempts, "conflict; retrying");
                            tokio::time::sleep(delay).await;
                        }
                        None => {
                            let what = format!(
                                "{}: it kept changing, {attempts} attempts conflicted",
                                what()
                            );
                            let e = Error::from_service(412, e.code(), what);
                            return Err(e.for_row(stored, &pk, &rk).into());
                        }
                    },
                    other => return other.map_err(UpdateError::Failed),
                }
            }
        };
        telemetry.operation("update_with", work).await
    }
}

/// Why [`Table::try_update_with`] did not update: the update function
/// refused, or the update failed. When the refusal's type converts from
/// [`Error`], `.map_err(UpdateError::flatten)?` gives that type either way.
///
/// ```
/// use leasehold::table::UpdateError;
/// use leasehold::{Entity, Store, Table};
///
/// #[derive(Entity, Clone, Debug)]
/// #[entity(table = "Orders")]
/// struct Order { #[entity(partition_key)] shop: String, #[entity(row_key)] id: String, status: String }
///
/// #[derive(Debug)]
/// enum ShopError { AlreadyShipped(String), Storage(leasehold::Error) }
///
/// impl From<leasehold::Error> for ShopError {
///     fn from(e: leasehold::Error) -> Self { ShopError::Storage(e) }
/// }
///
/// async fn cancel(orders: &Table<Order>, id: &str) -> Result<(), ShopError> {
///     orders
///         .try_update_with("s", id, |o| {
///             if o.status == "shipped" {
///                 return Err(ShopError::AlreadyShipped(o.id.clone()));
///             }
///             o.status = "cancelled".into();
///             Ok(())
///         })
///         .await
///         .map_err(UpdateError::flatten)?;
///     Ok(())
/// }
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let orders = Store::memory().table::<Order>();
/// orders.insert(Order { shop: "s".into(), id: "1".into(), status: "shipped".into() }).await?;
/// assert!(matches!(cancel(&orders, "1").await, Err(ShopError::AlreadyShipped(id)) if id == "1"));
/// assert!(matches!(
///     cancel(&orders, "2").await,
///     Err(ShopError::Storage(e)) if e.kind() == leasehold::ErrorKind::NotFound
/// ));
/// # Ok::<(), leasehold::Error>(()) }).unwrap();
/// ```
#[derive(Debug)]
pub enum UpdateError<U> {
    /// The update function returned this error; nothing was sent.
    Refused(U),
    /// Reading or writing failed, as [`Table::update_with`] fails.
    Failed(Error),
}

impl<U: From<Error>> UpdateError<U> {
    /// The caller's error either way (leasehold's converted by `U::from`).
    pub fn flatten(self) -> U {
        match self {
            UpdateError::Refused(u) => u,
            UpdateError::Failed(e) => U::from(e),
        }
    }
}

impl<U> From<Error> for UpdateError<U> {
    fn from(e: Error) -> Self {
        UpdateError::Failed(e)
    }
}

impl<U: std::fmt::Display> std::fmt::Display for UpdateError<U> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpdateError::Refused(u) => write!(f, "update refused: {u}"),
            UpdateError::Failed(e) => e.fmt(f),
        }
    }
}

impl<U> std::error::Error for UpdateError<U>
where
    U: std::error::Error + 'static,
{
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            UpdateError::Refused(u) => u.source(),
            UpdateError::Failed(e) => std::error::Error::source(e),
        }
    }
}
