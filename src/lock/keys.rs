//! The partitions a unit locks, as callers name them: [`IntoPartitionKeys`].

use crate::error::Result;
use crate::key::{IntoPartitionKey, PartitionKey};

/// The partitions [`Store::lock_many`](crate::Store::lock_many) locks: any
/// iterable of keys of one kind (`&str`, `String`, [`PartitionKey`]), or
/// several of different kinds joined with
/// [`and_keys`](IntoPartitionKeys::and_keys). Keys are checked before any
/// request.
///
/// ```
/// use leasehold::lock::IntoPartitionKeys;
/// use leasehold::{Entity, Store};
///
/// #[derive(Entity, Clone, Debug)]
/// #[entity(table = "Customers")]
/// struct Customer { #[entity(partition_key)] region: String, #[entity(row_key)] id: String }
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let store = Store::memory();
/// let ann = Customer { region: "eu".into(), id: "1".into() };
/// let kept = vec![leasehold::PartitionKey::new("us")?]; // `PartitionKey`s
/// let mut unit = store.lock_many(kept.and_keys([ann.region.as_str()])).await?;
/// unit.insert(&ann)?;
/// unit.commit().await?;
/// # Ok::<(), leasehold::Error>(()) }).unwrap();
/// ```
pub trait IntoPartitionKeys: Sized {
    /// Every key, converted and checked, in the order given (duplicates
    /// kept).
    ///
    /// # Errors
    /// [`Error::Invalid`](crate::Error::Invalid) naming the first key that
    /// breaks the service's key rules.
    fn into_partition_keys(self) -> Result<Vec<PartitionKey>>;

    /// These keys, then those of `more`, which may be of another kind.
    fn and_keys<M: IntoPartitionKeys>(self, more: M) -> impl IntoPartitionKeys {
        AndKeys(self, more)
    }
}

impl<I> IntoPartitionKeys for I
where
    I: IntoIterator,
    I::Item: IntoPartitionKey,
{
    fn into_partition_keys(self) -> Result<Vec<PartitionKey>> {
        self.into_iter()
            .map(IntoPartitionKey::into_partition_key)
            .collect()
    }
}

/// Two sets of keys, one after the other.
struct AndKeys<A, B>(A, B);

impl<A: IntoPartitionKeys, B: IntoPartitionKeys> IntoPartitionKeys for AndKeys<A, B> {
    fn into_partition_keys(self) -> Result<Vec<PartitionKey>> {
        let mut keys = self.0.into_partition_keys()?;
        keys.extend(self.1.into_partition_keys()?);
        Ok(keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::CountingBackend;
    use crate::{Entity, Error, Store};

    #[derive(Entity, Clone, Debug)]
    #[entity(table = "Customers")]
    struct Customer {
        #[entity(partition_key)]
        region: String,
        #[entity(row_key)]
        id: String,
        #[entity(unique)]
        email: String,
    }

    /// `&str` keys and `PartitionKey`s go
    /// in one `lock_many` call; a bad key among them is `Invalid`, naming
    /// it, before any request.
    #[tokio::test(start_paused = true)]
    async fn lock_many_takes_keys_of_mixed_kinds_in_one_call() {
        let backend = CountingBackend::new(crate::backend::memory::MemoryBackend::new());
        let requests = backend.counter();
        let store = Store::new(backend);
        let ann = Customer {
            region: "eu".into(),
            id: "1".into(),
            email: "ann@example.com".into(),
        };
        let index = [PartitionKey::new("email ann@example.0com").unwrap()];

        let mut unit = store
            .lock_many(index.iter().and_keys(["eu", "us"]))
            .await
            .unwrap();
        let mut locked: Vec<&str> = unit.partition_keys().iter().map(|k| k.as_str()).collect();
        locked.sort_unstable();
        let mut expected = vec!["eu", "us", index[0].as_str()];
        expected.sort_unstable();
        assert_eq!(locked, expected);
        unit.insert(&ann).unwrap();
        unit.commit().await.unwrap();

        let before = requests.total();
        let e = store
            .lock_many(index.iter().and_keys(["eu", "bad#key"]))
            .await
            .map(drop)
            .unwrap_err();
        match &e {
            Error::Invalid { what, .. } => assert!(what.contains("bad#key"), "{e}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(requests.total(), before, "no request for a bad key");
    }

    #[test]
    fn kinds_mix_in_order_and_bad_keys_are_named() {
        let pk = PartitionKey::new("b").unwrap();
        let keys = ["a"]
            .and_keys(vec![pk.clone()])
            .and_keys([&pk])
            .and_keys(Some(String::from("c")))
            .into_partition_keys()
            .unwrap();
        let names: Vec<&str> = keys.iter().map(PartitionKey::as_str).collect();
        assert_eq!(names, ["a", "b", "b", "c"]);

        match [pk].and_keys(["ok", "bad/key"]).into_partition_keys() {
            Err(Error::Invalid { what, .. }) => assert!(what.contains("bad/key"), "{what}"),
            other => panic!("{other:?}"),
        }
    }
}
