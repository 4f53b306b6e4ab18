//! [`ConstantRowKey`]: entity types whose row key is a constant, so that one
//! partition key names a row.

/// An entity type whose row key is the same for every entity: one row per
/// partition. `#[derive(Entity)]` implements it for a struct declared with
/// `#[entity(row_key = "...")]`, and it makes [`Table::get_one`] read by
/// partition key alone.
///
/// ```
/// use leasehold::{Entity, Store};
/// use leasehold::key::ConstantRowKey;
///
/// #[derive(Entity, Debug, Clone)]
/// #[entity(table = "Customers", row_key = "profile")]
/// struct Profile {
///     #[entity(partition_key)]
///     customer: String,
///     name: String,
/// }
///
/// assert_eq!(Profile::ROW_KEY, "profile");
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let profiles = Store::memory().table::<Profile>();
/// profiles.insert(Profile { customer: "c1".into(), name: "Ann".into() }).await?;
/// let read = profiles.get_one("c1").await?.expect("stored");
/// assert_eq!(read.name, "Ann");
/// assert!(profiles.get_one("c2").await?.is_none());
/// # Ok::<(), leasehold::Error>(()) }).unwrap();
/// ```
///
/// [`Table::get_one`]: crate::Table::get_one
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no constant row key",
    label = "its row key comes from its fields",
    note = "read one row of it with `Table::get(partition_key, row_key)`, or declare a constant row key on the struct: `#[entity(row_key = \"...\")]`"
)]
pub trait ConstantRowKey {
    /// The row key of every entity of the type.
    const ROW_KEY: &'static str;
}
