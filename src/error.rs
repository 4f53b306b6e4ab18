//! The one public error type. Its variants name *situations*, not backends:
//! every backend maps its failures onto the same variants and service codes.
//! Secrets never appear here: errors name the *part* that was wrong, never the
//! value of a key or signature, and other crates' text is scrubbed.

use std::time::Duration;

use crate::key::{PartitionKey, RowKey};

/// The subjects of error texts, one form for every backend and layer: the
/// caller's operation, the table as stored, keys quoted (`("us", "u07")`).
pub(crate) mod what {
    use crate::key::{BlobName, ContainerName, PartitionKey, RowKey, shorten};

    pub(crate) fn entity(op: &str, table: &str, pk: &PartitionKey, rk: &RowKey) -> String {
        format!(
            "{op} of entity ({}, {}) in table `{table}`",
            shorten(pk.as_str()),
            shorten(rk.as_str())
        )
    }

    pub(crate) fn table(table: &str) -> String {
        format!("table `{table}`")
    }

    pub(crate) fn blob(container: &ContainerName, blob: &BlobName) -> String {
        format!("blob {} in container `{container}`", shorten(blob.as_str()))
    }

    pub(crate) fn lease(container: &ContainerName, name: &BlobName) -> String {
        format!("lease on {}", blob(container, name))
    }

    pub(crate) fn listing(container: &ContainerName) -> String {
        format!("listing of container `{container}`")
    }

    #[cfg_attr(not(feature = "azure"), allow(dead_code))]
    pub(crate) fn container(container: &ContainerName) -> String {
        format!("container `{container}`")
    }
}

/// The keys of one row, as error fields carry them.
type RowKeys = Option<Box<(PartitionKey, RowKey)>>;

/// The [`code`](Error::code) of [`Error::ValueTaken`].
const VALUE_TAKEN_CODE: &str = "UniqueValueTaken";

/// The result type used throughout leasehold.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in leasehold.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The entity, table, blob or container does not exist (HTTP 404).
    NotFound {
        /// What was looked for.
        what: String,
        /// The service's error code, such as `ResourceNotFound`.
        code: Option<String>,
        /// The table, when a table or a row was looked for.
        table: Option<String>,
        /// The keys of the row, when a row was looked for.
        row: RowKeys,
    },

    /// A create-only write found something already there (HTTP 409).
    AlreadyExists {
        /// What already exists.
        what: String,
        /// The service's error code, such as `EntityAlreadyExists`.
        code: Option<String>,
        /// The table, when a table or a row already exists.
        table: Option<String>,
        /// The keys of the row, when a row already exists.
        row: RowKeys,
    },

    /// A write would give a unique field (`#[entity(unique)]`) a value another
    /// entity holds (see [`crate::index`]); nothing was written. Also for an
    /// insert onto existing keys whose unique value another entity holds.
    /// Its [`code`](Error::code) is `UniqueValueTaken`; [`Error::row`] gives
    /// the holder's keys.
    ValueTaken {
        /// The unique index, such as `Customer.email`.
        index: String,
        /// The value as messages show it (a string in quotes).
        value: String,
        /// The entity table (with the store's table prefix).
        table: String,
        /// The keys of the entity holding the value, when known.
        holder: RowKeys,
    },

    /// A conditional write failed: the ETag read is stale (HTTP 412).
    Conflict {
        /// What was being written.
        what: String,
        /// The service's error code, such as `UpdateConditionNotSatisfied`.
        code: Option<String>,
        /// The table, when a row was being written.
        table: Option<String>,
        /// The keys of the row, when a row was being written.
        row: RowKeys,
    },

    /// Somebody else holds the lease (or a write to a leased blob came
    /// without its lease id).
    LeaseHeld {
        /// The lease, or the blob that is leased.
        what: String,
        /// The service's error code, such as `LeaseAlreadyPresent`.
        code: Option<String>,
    },

    /// The lease this caller held is gone (expired, broken, or taken), or a
    /// later epoch wrote the partition ([`Table::fenced`](crate::Table::fenced)):
    /// nothing was written.
    LeaseLost {
        /// The lease that was lost.
        what: String,
        /// The service's error code, such as `LeaseIdMismatchWithLeaseOperation`.
        code: Option<String>,
    },

    /// An operation did not complete in the time it was given.
    Timeout {
        /// What was waited for.
        what: String,
        /// How long it was waited for.
        after: Duration,
    },

    /// One operation of an atomic batch failed, so none was applied.
    Batch {
        /// The zero-based index of the failing operation.
        index: usize,
        /// Why it failed.
        source: Box<Error>,
    },

    /// Input that the service would reject, found before any request.
    Invalid {
        /// Which field, key, name or value.
        what: String,
        /// Which rule it breaks.
        why: String,
    },

    /// A stored property could not be turned into the Rust field it feeds.
    Decode {
        /// The table the entity was read from.
        table: String,
        /// The keys of the row, when known.
        row: RowKeys,
        /// The property name as stored.
        property: String,
        /// The type the Rust field needs.
        expected: String,
        /// What was stored (`absent` when missing).
        found: String,
    },

    /// Stored data contradicts what leasehold wrote (something wrote without
    /// the lock; a row of leasehold's own does not parse), or one of its
    /// invariants failed (a bug). Not transient.
    Inconsistent {
        /// What contradicts what, or which rule was broken.
        what: String,
    },

    /// A commit could not finish after its commit point may have passed, and
    /// storage could not be asked what became of it: it is fully applied or
    /// not at all. Do not retry blindly: ask
    /// [`Store::commit_outcome`](crate::Store::commit_outcome) once storage
    /// answers; a single transaction (`transaction` is `None`) shows in its rows.
    InDoubt {
        /// What happened.
        what: String,
        /// The commit's primary partition (holding its decision row).
        primary: PartitionKey,
        /// The commit's transaction id; `None` for a single transaction.
        transaction: Option<String>,
        /// Why the outcome could not be read.
        source: Box<Error>,
    },

    /// A failure that may go away if retried (5xx, 408, 429, no reply), left
    /// after leasehold's own retries gave up.
    Transient {
        /// What failed.
        message: String,
        /// The HTTP status; `None` when no reply came.
        status: Option<u16>,
        /// The service's error code, such as `ServerBusy`.
        code: Option<String>,
        /// The underlying failure, when there is one.
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },

    /// Any other failure, reported by the service or found on this side.
    Backend {
        /// The HTTP status; `None` for a failure on the client side.
        status: Option<u16>,
        /// The service's error code.
        code: Option<String>,
        /// What went wrong.
        message: String,
        /// The underlying failure, when there is one.
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },

    /// The request was not authorised: the credential gave no token, or the
    /// service refused it (401, 403). Never holds a key, signature or token.
    Auth {
        /// The kind of credential, such as `shared key` or `AzureCliCredential`.
        credential: String,
        /// The HTTP status of the refusal; `None` when no token was had.
        status: Option<u16>,
        /// The service's error code, such as `AuthenticationFailed`.
        code: Option<String>,
        /// What was refused, and why when known.
        message: String,
        /// The credential's own failure, when there is one (scrubbed).
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },

    /// Storage kept failing for the bound of
    /// [`LeaseOptions::with_unavailable_after`](crate::lease::LeaseOptions::with_unavailable_after)
    /// while leasehold waited for a lease.
    Unavailable {
        /// The blob service URL (never with credentials), or `memory`.
        endpoint: String,
        /// How long requests kept failing.
        after: Duration,
        /// The last failure.
        source: Box<Error>,
    },
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&Text::of(self), f)
    }
}

/// The text of each [`Error`], derived with `thiserror`. Not derived on
/// `Error` itself because `thiserror`'s `source()` of a boxed `Error` is the
/// box, which callers cannot downcast to `Error`; `Error`'s own `source()`,
/// below, answers the `Error` in the box.
#[derive(Debug, thiserror::Error)]
enum Text<'a> {
    #[error("not found: {0}{c}", c = code_suffix(.1))]
    NotFound(&'a str, &'a Option<String>),
    #[error("already exists: {0}{c}", c = code_suffix(.1))]
    AlreadyExists(&'a str, &'a Option<String>),
    /// Index, value, holder.
    #[error("unique value taken: {0} = {1}{h}", h = holder_suffix(.2))]
    ValueTaken(&'a str, &'a str, &'a RowKeys),
    #[error("conflict: {0}{c}", c = code_suffix(.1))]
    Conflict(&'a str, &'a Option<String>),
    #[error("lease held by another owner: {0}{c}", c = code_suffix(.1))]
    LeaseHeld(&'a str, &'a Option<String>),
    #[error("lease lost: {0}{c}", c = code_suffix(.1))]
    LeaseLost(&'a str, &'a Option<String>),
    #[error("timed out after {1:?}: {0}")]
    Timeout(&'a str, Duration),
    #[error("batch operation {0} failed: {1}")]
    Batch(usize, &'a Error),
    #[error("invalid {0}: {1}")]
    Invalid(&'a str, &'a str),
    #[error(
        "cannot decode property `{property}` of table `{table}`{}: expected {expected}, found {found}",
        row_suffix(.row)
    )]
    Decode {
        table: &'a str,
        row: &'a RowKeys,
        property: &'a str,
        expected: &'a str,
        found: &'a str,
    },
    #[error("inconsistent state: {0}")]
    Inconsistent(&'a str),
    #[error(
        "commit outcome in doubt: {what}; transaction {transaction} of primary partition {primary:?} is either fully applied or not at all: ask Store::commit_outcome({primary:?}, {transaction:?}) ({cause})"
    )]
    InDoubt {
        what: &'a str,
        primary: &'a str,
        transaction: &'a str,
        cause: &'a Error,
    },
    #[error(
        "commit outcome in doubt: {0}; its one transaction on partition {1:?} is either fully applied or not at all: read its rows ({2})"
    )]
    InDoubtSingle(&'a str, &'a str, &'a Error),
    #[error("transient failure: {0}")]
    Transient(&'a str),
    /// Status, code, message.
    #[error("{p}{c}: {2}", p = backend_prefix(*.0), c = code_suffix(.1))]
    Backend(Option<u16>, &'a Option<String>, &'a str),
    /// Credential, code, message.
    #[error("not authorised ({0}){c}: {2}", c = code_suffix(.1))]
    Auth(&'a str, &'a Option<String>, &'a str),
    #[error("storage at {0} unavailable for {1:?}: {2}")]
    Unavailable(&'a str, Duration, &'a Error),
}

impl<'a> Text<'a> {
    fn of(e: &'a Error) -> Self {
        match e {
            Error::NotFound { what, code, .. } => Text::NotFound(what, code),
            Error::AlreadyExists { what, code, .. } => Text::AlreadyExists(what, code),
            Error::ValueTaken {
                index,
                value,
                holder,
                ..
            } => Text::ValueTaken(index, value, holder),
            Error::Conflict { what, code, .. } => Text::Conflict(what, code),
            Error::LeaseHeld { what, code } => Text::LeaseHeld(what, code),
            Error::LeaseLost { what, code } => Text::LeaseLost(what, code),
            Error::Timeout { what, after } => Text::Timeout(what, *after),
            Error::Batch { index, source } => Text::Batch(*index, source),
            Error::Invalid { what, why } => Text::Invalid(what, why),
            Error::Decode {
                table,
                row,
                property,
                expected,
                found,
            } => Text::Decode {
                table,
                row,
                property,
                expected,
                found,
            },
            Error::Inconsistent { what } => Text::Inconsistent(what),
            Error::InDoubt {
                what,
                primary,
                transaction: Some(transaction),
                source,
            } => Text::InDoubt {
                what,
                primary: primary.as_str(),
                transaction,
                cause: source,
            },
            Error::InDoubt {
                what,
                primary,
                transaction: None,
                source,
            } => Text::InDoubtSingle(what, primary.as_str(), source),
            Error::Transient { message, .. } => Text::Transient(message),
            Error::Backend {
                status,
                code,
                message,
                ..
            } => Text::Backend(*status, code, message),
            Error::Auth {
                credential,
                code,
                message,
                ..
            } => Text::Auth(credential, code, message),
            Error::Unavailable {
                endpoint,
                after,
                source,
            } => Text::Unavailable(endpoint, *after, source),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Batch { source, .. }
            | Error::Unavailable { source, .. }
            | Error::InDoubt { source, .. } => Some(&**source),
            Error::Transient { source, .. }
            | Error::Backend { source, .. }
            | Error::Auth { source, .. } => source.as_deref().map(|e| e as _),
            _ => None,
        }
    }
}

fn backend_prefix(status: Option<u16>) -> String {
    match status {
        Some(status) => format!("storage service error {status}"),
        None => "storage error".to_owned(),
    }
}

fn holder_suffix(holder: &RowKeys) -> String {
    match holder.as_deref() {
        Some((pk, rk)) => format!(
            " is held by the entity at ({:?}, {:?})",
            pk.as_str(),
            rk.as_str()
        ),
        None => " is held by another entity".to_owned(),
    }
}

fn row_suffix(row: &RowKeys) -> String {
    match row.as_deref() {
        Some((pk, rk)) => format!(
            " at PartitionKey {:?}, RowKey {:?}",
            pk.as_str(),
            rk.as_str()
        ),
        None => String::new(),
    }
}

fn code_suffix(code: &Option<String>) -> String {
    match code {
        Some(code) => format!(" ({code})"),
        None => String::new(),
    }
}

/// Declares [`ErrorKind`] and [`Error::kind`].
macro_rules! kinds {
    ($($variant:ident),*) => {
        /// The variant of an [`Error`] without its details, for matching and
        /// for comparing outcomes across backends.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorKind {
            $(#[doc = concat!("[`Error::", stringify!($variant), "`]")]
            $variant,)*
        }

        impl Error {
            /// The variant of this error, without its details.
            pub fn kind(&self) -> ErrorKind {
                match self {
                    $(Error::$variant { .. } => ErrorKind::$variant,)*
                }
            }
        }
    };
}

kinds!(
    NotFound,
    AlreadyExists,
    ValueTaken,
    Conflict,
    LeaseHeld,
    LeaseLost,
    Timeout,
    Batch,
    Invalid,
    Decode,
    Inconsistent,
    InDoubt,
    Transient,
    Backend,
    Unavailable,
    Auth
);

impl Error {
    /// The storage service's error code (`x-ms-error-code`), when there was
    /// one; the memory backend reports Azure's.
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::NotFound { code, .. }
            | Error::AlreadyExists { code, .. }
            | Error::Conflict { code, .. }
            | Error::LeaseHeld { code, .. }
            | Error::LeaseLost { code, .. }
            | Error::Transient { code, .. }
            | Error::Backend { code, .. }
            | Error::Auth { code, .. } => code.as_deref(),
            Error::ValueTaken { .. } => Some(VALUE_TAKEN_CODE),
            Error::Batch { source, .. } | Error::Unavailable { source, .. } => source.code(),
            _ => None,
        }
    }

    /// The HTTP status the service answered with (through a batch or
    /// unavailability too).
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Transient { status, .. }
            | Error::Backend { status, .. }
            | Error::Auth { status, .. } => *status,
            Error::Batch { source, .. } | Error::Unavailable { source, .. } => source.status(),
            _ => None,
        }
    }

    /// The table an error concerns, when it concerns one (through a
    /// [`Batch`](Error::Batch) too).
    pub fn table(&self) -> Option<&str> {
        match self {
            Error::NotFound { table, .. }
            | Error::AlreadyExists { table, .. }
            | Error::Conflict { table, .. } => table.as_deref(),
            Error::Decode { table, .. } | Error::ValueTaken { table, .. } => Some(table),
            Error::Batch { source, .. } => source.table(),
            _ => None,
        }
    }

    /// The keys of the row an error concerns, when it concerns one (see
    /// [`Error::table`]); for [`ValueTaken`](Error::ValueTaken), the
    /// entity holding the value.
    pub fn row(&self) -> Option<(&PartitionKey, &RowKey)> {
        match self {
            Error::NotFound { row, .. }
            | Error::AlreadyExists { row, .. }
            | Error::Conflict { row, .. }
            | Error::Decode { row, .. }
            | Error::ValueTaken { holder: row, .. } => row.as_deref().map(|(pk, rk)| (pk, rk)),
            Error::Batch { source, .. } => source.row(),
            _ => None,
        }
    }

    /// Whether retrying the same request may succeed (transient failures only).
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Transient { .. })
    }

    /// Builds an [`Error::Invalid`].
    pub fn invalid(what: impl Into<String>, why: impl Into<String>) -> Self {
        Error::Invalid {
            what: what.into(),
            why: why.into(),
        }
    }

    /// An [`Error::Decode`] of `property` of `table`, its row not yet known.
    pub(crate) fn decode(
        table: &str,
        property: impl Into<String>,
        expected: impl Into<String>,
        found: impl Into<String>,
    ) -> Self {
        Error::Decode {
            table: table.to_owned(),
            row: None,
            property: property.into(),
            expected: expected.into(),
            found: found.into(),
        }
    }

    /// A [`Transient`](Error::Transient) failure without a reply.
    pub(crate) fn transient(message: impl Into<String>) -> Self {
        Error::Transient {
            message: message.into(),
            status: None,
            code: None,
            source: None,
        }
    }

    /// A [`Backend`](Error::Backend) failure found on the client side.
    pub(crate) fn client(message: impl Into<String>) -> Self {
        Error::Backend {
            status: None,
            code: None,
            message: message.into(),
            source: None,
        }
    }

    /// This error with `cause` as its source, for the variants that keep one.
    #[cfg_attr(not(feature = "azure"), allow(dead_code))]
    pub(crate) fn with_source(
        mut self,
        cause: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        if let Error::Transient { source, .. }
        | Error::Backend { source, .. }
        | Error::Auth { source, .. } = &mut self
        {
            *source = Some(cause.into());
        }
        self
    }

    /// This error marked as concerning a row of `table`: fills the empty table
    /// and row fields (also of a [`Batch`](Error::Batch)'s source).
    pub(crate) fn for_row(
        mut self,
        table: &str,
        partition_key: &PartitionKey,
        row_key: &RowKey,
    ) -> Self {
        let keys = || Some(Box::new((partition_key.clone(), row_key.clone())));
        match &mut self {
            // A missing table is about the table, whatever row was sought.
            Error::NotFound { code, what, .. } if code.as_deref() == Some("TableNotFound") => {
                *what = self::what::table(table);
                return self.for_table(table);
            }
            Error::NotFound { table: t, row, .. }
            | Error::AlreadyExists { table: t, row, .. }
            | Error::Conflict { table: t, row, .. } => {
                t.get_or_insert_with(|| table.to_owned());
                if row.is_none() {
                    *row = keys();
                }
            }
            Error::Decode { row, .. } if row.is_none() => *row = keys(),
            Error::Batch { source, .. } => {
                let inner = std::mem::replace(&mut **source, Error::transient(""));
                **source = inner.for_row(table, partition_key, row_key);
            }
            _ => {}
        }
        self
    }

    /// This error said of the operation `said`: for a layer that sends another
    /// operation than the caller's (a delete sent as a tombstone's replace).
    pub(crate) fn said_of(mut self, said: String) -> Self {
        match &mut self {
            Error::NotFound { what, code, .. } if code.as_deref() != Some("TableNotFound") => {
                *what = said
            }
            Error::AlreadyExists { what, .. } | Error::Conflict { what, .. } => *what = said,
            _ => {}
        }
        self
    }

    /// This error marked as concerning `table` itself (a missing table).
    pub(crate) fn for_table(mut self, table: &str) -> Self {
        if let Error::NotFound { table: t, .. } | Error::AlreadyExists { table: t, .. } = &mut self
        {
            t.get_or_insert_with(|| table.to_owned());
        }
        self
    }

    /// Classifies a service failure: by code first, then by status.
    pub(crate) fn from_service(status: u16, code: Option<&str>, what: impl Into<String>) -> Self {
        let what = what.into();
        let code_owned = code.map(str::to_owned);
        match (status, code) {
            (_, Some("LeaseAlreadyPresent" | "LeaseIsBreakingAndCannotBeAcquired"))
            | (412, Some("LeaseIdMissing")) => Error::LeaseHeld {
                what,
                code: code_owned,
            },
            (
                _,
                Some(
                    "LeaseIdMismatchWithLeaseOperation"
                    | "LeaseNotPresentWithLeaseOperation"
                    | "LeaseIsBrokenAndCannotBeRenewed"
                    | "LeaseIsBreakingAndCannotBeChanged"
                    | "LeaseIdMismatchWithBlobOperation"
                    | "LeaseNotPresentWithBlobOperation"
                    | "LeaseLost",
                ),
            ) => Error::LeaseLost {
                what,
                code: code_owned,
            },
            (404, _) => Error::NotFound {
                what,
                code: code_owned,
                table: None,
                row: None,
            },
            (
                409,
                Some(
                    "EntityAlreadyExists"
                    | "TableAlreadyExists"
                    | "BlobAlreadyExists"
                    | "ContainerAlreadyExists",
                ),
            ) => Error::AlreadyExists {
                what,
                code: code_owned,
                table: None,
                row: None,
            },
            (412, _) => Error::Conflict {
                what,
                code: code_owned,
                table: None,
                row: None,
            },
            (408 | 429 | 500..=599, _) => Error::Transient {
                message: match code {
                    Some(code) => format!("{what}: status {status} ({code})"),
                    None => format!("{what}: status {status}"),
                },
                status: Some(status),
                code: code_owned,
                source: None,
            },
            _ => Error::Backend {
                status: Some(status),
                code: code_owned,
                message: what,
                source: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_by_code_then_status() {
        let e = Error::from_service(409, Some("EntityAlreadyExists"), "x");
        assert_eq!(e.kind(), ErrorKind::AlreadyExists);
        assert_eq!(e.code(), Some("EntityAlreadyExists"));
        let e = Error::from_service(412, Some("UpdateConditionNotSatisfied"), "x");
        assert_eq!(e.kind(), ErrorKind::Conflict);
        let e = Error::from_service(409, Some("LeaseAlreadyPresent"), "x");
        assert_eq!(e.kind(), ErrorKind::LeaseHeld);
        let e = Error::from_service(412, Some("LeaseIdMismatchWithBlobOperation"), "x");
        assert_eq!(e.kind(), ErrorKind::LeaseLost);
        let e = Error::from_service(404, None, "x");
        assert_eq!(e.kind(), ErrorKind::NotFound);
        let e = Error::from_service(503, Some("ServerBusy"), "x");
        assert!(e.is_transient());
        let e = Error::from_service(400, Some("InvalidInput"), "x");
        assert_eq!(e.kind(), ErrorKind::Backend);
        assert_eq!(e.code(), Some("InvalidInput"));
    }

    #[test]
    fn a_taken_value_has_its_own_kind_and_keeps_its_code() {
        let keys = (PartitionKey::new("eu").unwrap(), RowKey::new("1").unwrap());
        let e = Error::ValueTaken {
            index: "Customer.email".into(),
            value: "\"ann@x.org\"".into(),
            table: "Customers".into(),
            holder: Some(Box::new(keys.clone())),
        };
        assert_eq!(e.kind(), ErrorKind::ValueTaken);
        assert_ne!(e.kind(), ErrorKind::AlreadyExists);
        assert_eq!(e.code(), Some("UniqueValueTaken"));
        assert_eq!(e.table(), Some("Customers"));
        assert_eq!(e.row(), Some((&keys.0, &keys.1)));
        assert!(!e.is_transient());
        assert_eq!(
            e.to_string(),
            "unique value taken: Customer.email = \"ann@x.org\" is held by the entity at (\"eu\", \"1\")"
        );
        let batch = Error::Batch {
            index: 1,
            source: Box::new(e),
        };
        assert_eq!(batch.code(), Some("UniqueValueTaken"));
        assert_eq!(batch.table(), Some("Customers"));
    }

    /// One error of every variant and form, with its text to the byte.
    fn every_form() -> Vec<(Error, &'static str)> {
        let pk = || PartitionKey::new("eu").unwrap();
        let keys = || Some(Box::new((pk(), RowKey::new("r1").unwrap())));
        let busy =
            || Error::from_service(503, Some("ServerBusy"), "get of entity (\"eu\", \"r1\")");
        vec![
            (
                Error::from_service(404, Some("ResourceNotFound"), "get of x"),
                "not found: get of x (ResourceNotFound)",
            ),
            (
                Error::from_service(404, None, "blob b"),
                "not found: blob b",
            ),
            (
                Error::from_service(409, Some("EntityAlreadyExists"), "insert of x"),
                "already exists: insert of x (EntityAlreadyExists)",
            ),
            (
                Error::ValueTaken {
                    index: "Customer.email".into(),
                    value: "\"a@x.org\"".into(),
                    table: "Customers".into(),
                    holder: None,
                },
                "unique value taken: Customer.email = \"a@x.org\" is held by another entity",
            ),
            (
                Error::Conflict {
                    what: "replace of x".into(),
                    code: None,
                    table: Some("T".into()),
                    row: keys(),
                },
                "conflict: replace of x",
            ),
            (
                Error::from_service(409, Some("LeaseAlreadyPresent"), "lease on blob b"),
                "lease held by another owner: lease on blob b (LeaseAlreadyPresent)",
            ),
            (
                Error::from_service(412, Some("LeaseLost"), "lease on blob b"),
                "lease lost: lease on blob b (LeaseLost)",
            ),
            (
                Error::Timeout {
                    what: "lock of partition \"eu\"".into(),
                    after: Duration::from_millis(1500),
                },
                "timed out after 1.5s: lock of partition \"eu\"",
            ),
            (
                Error::Batch {
                    index: 2,
                    source: Box::new(Error::invalid("row key", "too long")),
                },
                "batch operation 2 failed: invalid row key: too long",
            ),
            (
                Error::Decode {
                    table: "T".into(),
                    row: keys(),
                    property: "n".into(),
                    expected: "Int64".into(),
                    found: "String".into(),
                },
                "cannot decode property `n` of table `T` at PartitionKey \"eu\", RowKey \"r1\": expected Int64, found String",
            ),
            (
                Error::Decode {
                    table: "T".into(),
                    row: None,
                    property: "n".into(),
                    expected: "Int64".into(),
                    found: "absent".into(),
                },
                "cannot decode property `n` of table `T`: expected Int64, found absent",
            ),
            (
                Error::Inconsistent {
                    what: "a bad mark".into(),
                },
                "inconsistent state: a bad mark",
            ),
            (
                Error::InDoubt {
                    what: "the commit point's reply was lost".into(),
                    primary: pk(),
                    transaction: Some("t-1".into()),
                    source: Box::new(busy()),
                },
                "commit outcome in doubt: the commit point's reply was lost; transaction t-1 of primary partition \"eu\" is either fully applied or not at all: ask Store::commit_outcome(\"eu\", \"t-1\") (transient failure: get of entity (\"eu\", \"r1\"): status 503 (ServerBusy))",
            ),
            (
                Error::InDoubt {
                    what: "no reply".into(),
                    primary: pk(),
                    transaction: None,
                    source: Box::new(Error::transient("no reply")),
                },
                "commit outcome in doubt: no reply; its one transaction on partition \"eu\" is either fully applied or not at all: read its rows (transient failure: no reply)",
            ),
            (
                Error::from_service(400, Some("InvalidInput"), "insert of x"),
                "storage service error 400 (InvalidInput): insert of x",
            ),
            (
                Error::client("a reply without a body"),
                "storage error: a reply without a body",
            ),
            (
                Error::Auth {
                    credential: "shared key".into(),
                    status: Some(403),
                    code: Some("AuthenticationFailed".into()),
                    message: "the signature was refused".into(),
                    source: None,
                },
                "not authorised (shared key) (AuthenticationFailed): the signature was refused",
            ),
            (
                Error::Auth {
                    credential: "AzureCliCredential".into(),
                    status: None,
                    code: None,
                    message: "no token".into(),
                    source: None,
                },
                "not authorised (AzureCliCredential): no token",
            ),
            (
                Error::Unavailable {
                    endpoint: "memory".into(),
                    after: Duration::from_secs(30),
                    source: Box::new(Error::transient("no reply")),
                },
                "storage at memory unavailable for 30s: transient failure: no reply",
            ),
        ]
    }

    #[test]
    fn every_variant_renders_its_text_to_the_byte() {
        for (e, text) in every_form() {
            assert_eq!(e.to_string(), text, "{e:?}");
        }
    }

    /// The errors holding an `Error` answer it from `source()` as an
    /// `Error`, not as the box that holds it.
    #[test]
    fn boxed_sources_downcast_to_the_error_they_hold() {
        use std::error::Error as _;
        let mut boxed = 0;
        for (e, _) in every_form() {
            let inner = match &e {
                Error::Batch { source, .. }
                | Error::InDoubt { source, .. }
                | Error::Unavailable { source, .. } => source.to_string(),
                _ => continue,
            };
            boxed += 1;
            let source = e.source().expect("a source");
            let source = source
                .downcast_ref::<Error>()
                .unwrap_or_else(|| panic!("{e:?}: the source is not an Error"));
            assert_eq!(source.to_string(), inner);
        }
        assert_eq!(boxed, 4);
    }

    #[test]
    fn batch_error_exposes_inner_code() {
        let e = Error::Batch {
            index: 3,
            source: Box::new(Error::from_service(409, Some("EntityAlreadyExists"), "x")),
        };
        assert_eq!(e.code(), Some("EntityAlreadyExists"));
        assert!(e.to_string().contains("batch operation 3"));
    }
}
