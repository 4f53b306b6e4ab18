//! [`Store`]: the entry point, owning the backend and the configuration.

use std::fmt;
use std::sync::Arc;

use crate::backend::memory::MemoryBackend;
use crate::backend::{Backend, BlobBackend, Layer, Tracing, Wrap};
use crate::error::{Error, Result};
use crate::index::UnitClaims;
use crate::key::{ContainerName, IntoPartitionKey};
use crate::lease::{LeaseManager, LeaseName, LeaseOptions, Settings};
use crate::lock::LockEnv;
use crate::lock::options::LockOptions;
use crate::retry::ConflictRetry;
use crate::table::TableEnv;
use crate::table::lock_name;
use crate::telemetry::Telemetry;

mod expiry;
mod import;
mod indexes;
mod lock_blobs;
mod manage;
mod open;
mod sweep;

pub use import::{ImportOptions, ImportProgress};
pub use sweep::{SweepOptions, SweepReport};

/// The entry point: a backend plus configuration. Cheap to clone; clones
/// share the backend and the record of tables already created.
///
/// ```
/// let store = leasehold::Store::memory();
/// # let _ = store;
/// ```
#[derive(Clone)]
pub struct Store {
    inner: Arc<StoreInner>,
}

struct StoreInner {
    /// Everything but the leases, shared with every table and unit.
    locking: Arc<LockEnv>,
    leases: LeaseManager,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("backend", self.backend())
            .field("conflict_retry", self.conflict_retry())
            .field("table_prefix", &self.table_prefix())
            .finish_non_exhaustive()
    }
}

impl Store {
    /// A store on a new, empty embedded [`MemoryBackend`].
    pub fn memory() -> Store {
        Store::new(MemoryBackend::new())
    }

    /// A store on Azure Storage (or Azurite) from a connection string
    /// (`UseDevelopmentStorage=true`, `AccountName=...;AccountKey=...`).
    ///
    /// # Errors
    /// [`crate::Error::Invalid`] naming the malformed part of the string
    /// (never echoing a key or signature).
    #[cfg(feature = "azure")]
    pub fn connect(connection_string: &str) -> Result<Store> {
        Store::builder_from_connection_string(connection_string)?.build()
    }

    /// A store on Azure Storage (or Azurite) configured by the environment
    /// as the Azure CLI reads it: `AZURE_STORAGE_AUTH_MODE=login` with
    /// `AZURE_STORAGE_ACCOUNT` signs in with Microsoft Entra ID (feature
    /// `identity`); otherwise `AZURE_STORAGE_CONNECTION_STRING`.
    ///
    /// # Errors
    /// [`crate::Error::Invalid`] naming the variable that is unset,
    /// malformed, or asks for what this build cannot do (`login` without
    /// the `identity` feature); [`crate::Error::Auth`] when no credential
    /// of the chain can be set up.
    #[cfg(feature = "azure")]
    pub fn from_env() -> Result<Store> {
        Store::builder_from_env()?.build()
    }

    /// A [`StoreBuilder`] for [`Store::connect`]'s store.
    ///
    /// ```
    /// use std::time::Duration;
    /// use leasehold::Store;
    /// use leasehold::lease::LeaseOptions;
    ///
    /// let store = Store::builder_from_connection_string("UseDevelopmentStorage=true")?
    ///     .table_prefix("shop")?
    ///     .lease_options(LeaseOptions::new().with_duration(Duration::from_secs(20)))
    ///     .build()?;
    /// assert_eq!(store.table_prefix(), "shop");
    /// # Ok::<(), leasehold::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Store::connect`].
    #[cfg(feature = "azure")]
    pub fn builder_from_connection_string(connection_string: &str) -> Result<StoreBuilder> {
        Ok(Store::builder(
            crate::backend::azure::AzureBackend::from_connection_string(connection_string)?,
        ))
    }

    /// A [`StoreBuilder`] for [`Store::from_env`]'s store.
    ///
    /// ```no_run
    /// let store = leasehold::Store::builder_from_env()?
    ///     .table_prefix("shop")?
    ///     .build()?;
    /// # let _ = store;
    /// # Ok::<(), leasehold::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Store::from_env`].
    #[cfg(feature = "azure")]
    pub fn builder_from_env() -> Result<StoreBuilder> {
        Ok(Store::builder(backend_from_env(&|name| {
            std::env::var(name).ok()
        })?))
    }

    /// A store on any backend, with default options.
    pub fn new(backend: impl Backend) -> Store {
        Store::builder(backend).assemble(None, None)
    }

    /// A builder for a store on `backend`.
    pub fn builder(backend: impl Backend) -> StoreBuilder {
        Store::builder_shared(Arc::new(backend))
    }

    /// A builder for a store on a shared backend.
    pub fn builder_shared(backend: Arc<dyn Backend>) -> StoreBuilder {
        StoreBuilder {
            backend,
            conflict_retry: ConflictRetry::default(),
            table_prefix: String::new(),
            lease_options: None,
            lock_lease_options: None,
            lock_options: LockOptions::default(),
            telemetry: None,
            layers: Vec::new(),
        }
    }

    /// The backend this store uses.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.inner.locking.tables.backend
    }

    /// How optimistic read-modify-write loops retry after a conflict.
    pub fn conflict_retry(&self) -> &ConflictRetry {
        &self.inner.locking.tables.conflict_retry
    }

    /// The lease manager: auto-renewing leases, run-once initialisation,
    /// leader election and job reservations.
    pub fn leases(&self) -> &LeaseManager {
        &self.inner.leases
    }

    /// The lease manager of partition locks, for operators (list, describe,
    /// break); locks are taken with [`Store::lock`].
    pub fn locks(&self) -> &LeaseManager {
        &self.inner.locking.locks
    }

    /// The lease name of a partition's lock in [`Store::locks`]:
    /// `"{table_prefix}/{partition_key}"` (the key alone without a prefix;
    /// `#` and a 128-bit hash for a key too long for a lease name).
    ///
    /// ```
    /// let store = leasehold::Store::memory();
    /// assert_eq!(store.lock_lease_name("alice")?.as_str(), "alice");
    /// # Ok::<(), leasehold::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`crate::Error::Invalid`] for a bad partition key.
    pub fn lock_lease_name(&self, partition_key: impl IntoPartitionKey) -> Result<LeaseName> {
        let pk = partition_key.into_partition_key()?;
        lock_name(self.table_prefix(), &pk)
    }

    /// The partition-lock settings.
    pub fn lock_options(&self) -> &LockOptions {
        &self.inner.locking.options
    }

    /// The prefix put before every table name (empty by default).
    pub fn table_prefix(&self) -> &str {
        &self.inner.locking.tables.table_prefix
    }

    pub(crate) fn tables(&self) -> &Arc<TableEnv> {
        &self.inner.locking.tables
    }

    pub(crate) fn locking(&self) -> &Arc<LockEnv> {
        &self.inner.locking
    }
}

/// Configures a [`Store`].
#[derive(Debug)]
#[must_use = "a StoreBuilder does nothing until `build()`"]
pub struct StoreBuilder {
    backend: Arc<dyn Backend>,
    conflict_retry: ConflictRetry,
    table_prefix: String,
    /// `None`: the defaults.
    lease_options: Option<LeaseOptions>,
    lock_lease_options: Option<LeaseOptions>,
    lock_options: LockOptions,
    /// `None`: the global meter provider's (feature `opentelemetry`).
    telemetry: Option<Telemetry>,
    /// Stacked over the backend, first given lowest.
    layers: Vec<Arc<dyn Wrap>>,
}

impl StoreBuilder {
    /// Records this store's metrics on `meter` rather than on the global
    /// meter provider's `leasehold` meter (the README's "Metrics").
    ///
    /// ```
    /// use opentelemetry::metrics::MeterProvider as _;
    /// # fn demo(provider: &dyn opentelemetry::metrics::MeterProvider) -> leasehold::Result<()> {
    /// let store = leasehold::Store::builder(leasehold::backend::memory::MemoryBackend::new())
    ///     .meter(provider.meter("leasehold"))
    ///     .build()?;
    /// # let _ = store; Ok(()) }
    /// ```
    #[cfg(feature = "opentelemetry")]
    pub fn meter(mut self, meter: opentelemetry::metrics::Meter) -> Self {
        self.telemetry = Some(Telemetry::from_meter(&meter));
        self
    }

    /// How read-modify-write loops retry after a conflict
    /// ([`ConflictRetry::default`]).
    pub fn conflict_retry(mut self, policy: ConflictRetry) -> Self {
        self.conflict_retry = policy;
        self
    }

    /// Puts `prefix` (a letter, then ASCII letters and digits) before every
    /// table name, so several applications can share one storage account;
    /// lease blobs are named `{prefix}/{lease name}` (lease names are given
    /// and listed without it), locks as [`Store::lock_lease_name`] says.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the prefix.
    pub fn table_prefix(mut self, prefix: impl Into<String>) -> Result<Self> {
        let prefix = prefix.into();
        let ok = prefix.len() <= 60
            && prefix
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphabetic())
            && prefix.bytes().all(|b| b.is_ascii_alphanumeric());
        if !ok {
            return Err(Error::invalid(
                format!("table prefix {prefix:?}"),
                "must be 1 to 60 ASCII letters and digits, starting with a letter",
            ));
        }
        self.table_prefix = prefix;
        Ok(self)
    }

    /// Options of [`Store::leases`] (container `leasehold-leases` by
    /// default).
    pub fn lease_options(mut self, options: LeaseOptions) -> Self {
        self.lease_options = Some(options);
        self
    }

    /// Lease options of partition locks. By default: those of
    /// [`StoreBuilder::lease_options`] with container `leasehold-locks` and
    /// no owner metadata at every acquire ("Who holds a lock" in
    /// [`crate::lock`]), else leases of [`LockOptions::DEFAULT_LEASE_DURATION`].
    pub fn lock_lease_options(mut self, options: LeaseOptions) -> Self {
        self.lock_lease_options = Some(options);
        self
    }

    /// Stacks `layer` over the backend, above the layers given before it
    /// and below the store's tracing and metrics.
    ///
    /// ```
    /// use leasehold::backend::Op;
    /// use leasehold::testing::RequestCounter;
    /// # #[derive(leasehold::Entity, Clone, Debug)]
    /// # #[entity(table = "Things")]
    /// # struct Thing { #[entity(partition_key)] pk: String, #[entity(row_key)] rk: String }
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
    /// let counts = RequestCounter::default();
    /// let store = leasehold::Store::builder(leasehold::backend::memory::MemoryBackend::new())
    ///     .layer(counts.clone())
    ///     .build()?;
    /// store.table::<Thing>().get("a", "b").await?;
    /// assert_eq!(counts.get(Op::Get), 1);
    /// # Ok::<(), leasehold::Error>(()) }).unwrap();
    /// ```
    pub fn layer(mut self, layer: impl Layer) -> Self {
        self.layers.push(Arc::new(Arc::new(layer)));
        self
    }

    /// Partition-lock settings (acquire timeout, commit margin).
    pub fn lock_options(mut self, options: LockOptions) -> Self {
        self.lock_options = options;
        self
    }

    /// Builds the store.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming a lease option out of range.
    pub fn build(self) -> Result<Store> {
        let locks = match (&self.lock_lease_options, &self.lease_options) {
            (Some(options), _) => Some(options.resolve()?),
            (None, Some(options)) => Some(
                options
                    .clone()
                    .with_container(lock_container())
                    .with_owner_metadata(false)
                    .resolve()?,
            ),
            (None, None) => None,
        };
        let leases = self.lease_options.as_ref().map(LeaseOptions::resolve);
        Ok(self.assemble(leases.transpose()?, locks))
    }

    /// `None`: the default settings.
    fn assemble(self, leases: Option<Settings>, locks: Option<Settings>) -> Store {
        let telemetry = self.telemetry.unwrap_or_else(Telemetry::global);
        // The layers in order, then tracing, then the store's metrics.
        let layered = (self.layers.iter()).fold(self.backend, |below, layer| layer.layer(below));
        let backend = telemetry.instrument(Tracing.layer(layered));
        let blobs: Arc<dyn BlobBackend> = backend.clone();
        let manager =
            |settings| LeaseManager::from_settings(blobs.clone(), settings, telemetry.clone());
        let locks = manager(locks.unwrap_or_else(default_lock_settings));
        // Lock names carry the prefix already.
        let leases = leases.unwrap_or_else(default_lease_settings);
        let leases = manager(leases.with_name_prefix(&self.table_prefix));
        let tables = Arc::new(TableEnv::new(
            backend,
            self.conflict_retry,
            self.table_prefix,
            telemetry,
            locks,
            self.lock_options.acquire_timeout(),
            crate::index::writes,
        ));
        let locking = Arc::new(LockEnv {
            tables,
            options: self.lock_options,
            claims: Arc::new(UnitClaims),
        });
        Store {
            inner: Arc::new(StoreInner { locking, leases }),
        }
    }
}

/// The Azure backend the environment (`var`) describes: [`Store::from_env`].
#[cfg(feature = "azure")]
fn backend_from_env(
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<crate::backend::azure::AzureBackend> {
    const CONNECTION_STRING: &str = "AZURE_STORAGE_CONNECTION_STRING";
    const AUTH_MODE: &str = "AZURE_STORAGE_AUTH_MODE";
    let mode = var(AUTH_MODE).map(|m| m.trim().to_ascii_lowercase());
    match mode.as_deref() {
        None | Some("" | "key") => match var(CONNECTION_STRING) {
            Some(s) => crate::backend::azure::AzureBackend::from_connection_string(&s),
            None => Err(Error::invalid(
                CONNECTION_STRING,
                "is not set (or not UTF-8); set it to a storage connection string, or set \
                 AZURE_STORAGE_AUTH_MODE=login and AZURE_STORAGE_ACCOUNT",
            )),
        },
        Some("login") => login_backend(var),
        Some(_) => Err(Error::invalid(AUTH_MODE, "must be `key` or `login`")),
    }
}

/// `AZURE_STORAGE_AUTH_MODE=login`.
#[cfg(feature = "azure")]
fn login_backend(
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<crate::backend::azure::AzureBackend> {
    const ACCOUNT: &str = "AZURE_STORAGE_ACCOUNT";
    let Some(account) = var(ACCOUNT).filter(|a| !a.trim().is_empty()) else {
        return Err(Error::invalid(
            ACCOUNT,
            "is not set; AZURE_STORAGE_AUTH_MODE=login needs the storage account name",
        ));
    };
    let builder = crate::backend::azure::AzureBackend::builder().account(account.trim());
    #[cfg(feature = "identity")]
    {
        builder.default_credential()?.build()
    }
    #[cfg(not(feature = "identity"))]
    {
        let _ = builder;
        Err(Error::invalid(
            "AZURE_STORAGE_AUTH_MODE",
            "is `login`, which needs leasehold's `identity` feature; enable it \
             (features = [\"identity\"]) or use a connection string",
        ))
    }
}

fn default_lease_settings() -> Settings {
    let container = ContainerName::from_static(LeaseOptions::DEFAULT_CONTAINER);
    Settings::defaults(container, true, crate::lease::DEFAULT_DURATION_SECS)
}

fn default_lock_settings() -> Settings {
    let secs = u8::try_from(LockOptions::DEFAULT_LEASE_DURATION.as_secs()).unwrap_or(15);
    Settings::defaults(lock_container(), false, secs)
}

fn lock_container() -> ContainerName {
    ContainerName::from_static(LockOptions::DEFAULT_CONTAINER)
}

#[cfg(test)]
mod tests {
    #[cfg(feature = "azure")]
    fn env_of(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[cfg(feature = "azure")]
    #[test]
    fn the_environment_selects_key_or_login() {
        use crate::ErrorKind;
        let b = super::backend_from_env(&env_of(&[(
            "AZURE_STORAGE_CONNECTION_STRING",
            "UseDevelopmentStorage=true",
        )]))
        .unwrap();
        assert_eq!(b.settings().account, "devstoreaccount1");
        let b = super::backend_from_env(&env_of(&[
            ("AZURE_STORAGE_AUTH_MODE", "Key"),
            (
                "AZURE_STORAGE_CONNECTION_STRING",
                "UseDevelopmentStorage=true",
            ),
        ]))
        .unwrap();
        assert_eq!(b.settings().account, "devstoreaccount1");
        let e = super::backend_from_env(&env_of(&[])).unwrap_err();
        assert!(
            e.to_string().contains("AZURE_STORAGE_CONNECTION_STRING"),
            "{e}"
        );
        let e =
            super::backend_from_env(&env_of(&[("AZURE_STORAGE_AUTH_MODE", "sso")])).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Invalid);
        assert!(e.to_string().contains("AZURE_STORAGE_AUTH_MODE"), "{e}");
        let e =
            super::backend_from_env(&env_of(&[("AZURE_STORAGE_AUTH_MODE", "login")])).unwrap_err();
        assert!(e.to_string().contains("AZURE_STORAGE_ACCOUNT"), "{e}");
        // Login with an account: a token-authenticated backend (identity),
        // or an error saying to enable the feature.
        let login = super::backend_from_env(&env_of(&[
            ("AZURE_STORAGE_AUTH_MODE", "login"),
            ("AZURE_STORAGE_ACCOUNT", "myacct"),
            (
                "AZURE_STORAGE_CONNECTION_STRING",
                "UseDevelopmentStorage=true",
            ),
        ]));
        #[cfg(feature = "identity")]
        {
            // The chain of `azure_identity` can always be set up (the
            // Azure CLI and managed identity need nothing to start).
            let b = login.unwrap();
            assert_eq!(b.settings().account, "myacct");
            assert!(matches!(
                b.settings().credentials,
                crate::backend::azure::Credentials::Token { .. }
            ));
            assert_eq!(
                b.settings().blob_endpoint.as_str(),
                "https://myacct.blob.core.windows.net/"
            );
        }
        #[cfg(not(feature = "identity"))]
        {
            let e = login.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Invalid);
            assert!(e.to_string().contains("`identity` feature"), "{e}");
        }
    }

    use super::*;

    #[test]
    fn the_default_lock_container_is_a_container_name() {
        assert_eq!(
            ContainerName::new(LockOptions::DEFAULT_CONTAINER).unwrap(),
            lock_container()
        );
    }

    #[test]
    fn a_default_store_has_the_settings_of_default_options() {
        let default = Store::memory();
        let built = Store::builder(MemoryBackend::new())
            .lease_options(LeaseOptions::default())
            .build()
            .unwrap();
        for (a, b) in [
            (default.leases(), built.leases()),
            (default.locks(), built.locks()),
        ] {
            assert_eq!(a.container(), b.container());
        }
        assert_eq!(
            default.leases().lease_duration(),
            built.leases().lease_duration()
        );
        assert_eq!(default.locks().container().as_str(), "leasehold-locks");
        // Locks of a store without lease options last the service minimum;
        // with lease options, those options' duration.
        assert_eq!(
            default.locks().lease_duration(),
            crate::backend::LeaseDuration::Seconds(15)
        );
        assert_eq!(
            built.locks().lease_duration(),
            built.leases().lease_duration()
        );
    }
}
