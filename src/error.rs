//! The one public error type.
//!
//! Every fallible operation in leasehold returns [`Error`]. Its variants name
//! *situations* (the entity is missing, the ETag is stale, the lease is gone),
//! not backends: the memory backend and the Azure backend map their failures
//! onto the same variants, so code written against one behaves the same on the
//! other. Where the storage service gave an error code (`x-ms-error-code`), it
//! is kept and available through [`Error::code`].
//!
//! Secrets never appear here: connection strings are parsed before errors are
//! built, and errors name the *part* that was wrong, never its value when the
//! part is a key or a signature.

use std::time::Duration;

/// The result type used throughout leasehold.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in leasehold.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The entity, table, blob or container does not exist (HTTP 404).
    #[error("not found: {what}{}", code_suffix(.code))]
    NotFound {
        /// What was looked for.
        what: String,
        /// The service's error code, such as `ResourceNotFound` or `BlobNotFound`.
        code: Option<String>,
    },

    /// A create-only write found something already there (HTTP 409).
    #[error("already exists: {what}{}", code_suffix(.code))]
    AlreadyExists {
        /// What already exists.
        what: String,
        /// The service's error code, such as `EntityAlreadyExists`.
        code: Option<String>,
    },

    /// A conditional write failed: the ETag that was read is stale, someone
    /// else wrote in between (HTTP 412).
    #[error("conflict: {what}{}", code_suffix(.code))]
    Conflict {
        /// What was being written.
        what: String,
        /// The service's error code, such as `UpdateConditionNotSatisfied`.
        code: Option<String>,
    },

    /// Somebody else holds the lease (HTTP 409 `LeaseAlreadyPresent`, or a
    /// write to a leased blob without its lease id).
    #[error("lease held by another owner: {what}{}", code_suffix(.code))]
    LeaseHeld {
        /// The lease, or the blob that is leased.
        what: String,
        /// The service's error code, such as `LeaseAlreadyPresent`.
        code: Option<String>,
    },

    /// The lease this caller held is gone: expired, broken, or taken by
    /// another owner. Nothing was written.
    #[error("lease lost: {what}{}", code_suffix(.code))]
    LeaseLost {
        /// The lease that was lost.
        what: String,
        /// The service's error code, such as `LeaseIdMismatchWithLeaseOperation`.
        code: Option<String>,
    },

    /// An operation did not complete in the time it was given.
    #[error("timed out after {after:?}: {what}")]
    Timeout {
        /// What was waited for.
        what: String,
        /// How long it was waited for.
        after: Duration,
    },

    /// One operation of an atomic batch failed, so none was applied.
    #[error("batch operation {index} failed: {source}")]
    Batch {
        /// The zero-based index of the failing operation.
        index: usize,
        /// Why it failed.
        source: Box<Error>,
    },

    /// Input that the service would reject: a key, table name, property,
    /// size, duration or connection string. Raised before any request.
    #[error("invalid {what}: {why}")]
    Invalid {
        /// The culprit: which field, key, name or value.
        what: String,
        /// Which rule it breaks.
        why: String,
    },

    /// A stored property could not be turned into the Rust field it feeds.
    #[error(
        "cannot decode property `{property}` of table `{table}`{}: expected {expected}, found {found}",
        row_suffix(.row)
    )]
    Decode {
        /// The table the entity was read from.
        table: String,
        /// The keys of the row, when known (every row read from a table).
        row: Option<Box<(crate::key::PartitionKey, crate::key::RowKey)>>,
        /// The property name as stored.
        property: String,
        /// The type the Rust field needs.
        expected: String,
        /// What was stored (`absent` when missing).
        found: String,
    },

    /// Stored data contradicts a pending journal: roll-forward stopped and
    /// left the journal in place for an operator.
    #[error("inconsistent state: {what}")]
    Inconsistent {
        /// What contradicts what.
        what: String,
    },

    /// A failure that may go away if retried (5xx, 408, connection errors),
    /// left after leasehold's own retries gave up.
    #[error("transient failure: {message}")]
    Transient {
        /// What failed.
        message: String,
    },

    /// Any other failure reported by the storage service.
    #[error("storage service error {status}{}: {message}", code_suffix(.code))]
    Backend {
        /// The HTTP status.
        status: u16,
        /// The service's error code, when it gave one.
        code: Option<String>,
        /// The service's message.
        message: String,
    },

    /// Storage kept failing (transient errors, no reply, an unreachable
    /// endpoint) for the configured bound while leasehold waited for a lease
    /// (see [`LeaseOptions::with_unavailable_after`]), so it gave up.
    /// leasehold has already retried for that long.
    ///
    /// [`LeaseOptions::with_unavailable_after`]: crate::lease::LeaseOptions::with_unavailable_after
    #[error("storage at {endpoint} unavailable for {after:?}: {source}")]
    Unavailable {
        /// Where the storage was sought: the blob service URL (never with
        /// credentials), or `memory`.
        endpoint: String,
        /// How long requests kept failing.
        after: Duration,
        /// The last failure.
        source: Box<Error>,
    },
}

fn row_suffix(row: &Option<Box<(crate::key::PartitionKey, crate::key::RowKey)>>) -> String {
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

/// The variant of an [`Error`] without its details, for matching and for
/// comparing outcomes across backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// [`Error::NotFound`]
    NotFound,
    /// [`Error::AlreadyExists`]
    AlreadyExists,
    /// [`Error::Conflict`]
    Conflict,
    /// [`Error::LeaseHeld`]
    LeaseHeld,
    /// [`Error::LeaseLost`]
    LeaseLost,
    /// [`Error::Timeout`]
    Timeout,
    /// [`Error::Batch`]
    Batch,
    /// [`Error::Invalid`]
    Invalid,
    /// [`Error::Decode`]
    Decode,
    /// [`Error::Inconsistent`]
    Inconsistent,
    /// [`Error::Transient`]
    Transient,
    /// [`Error::Backend`]
    Backend,
    /// [`Error::Unavailable`]
    Unavailable,
}

impl Error {
    /// The variant of this error, without its details.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::AlreadyExists { .. } => ErrorKind::AlreadyExists,
            Error::Conflict { .. } => ErrorKind::Conflict,
            Error::LeaseHeld { .. } => ErrorKind::LeaseHeld,
            Error::LeaseLost { .. } => ErrorKind::LeaseLost,
            Error::Timeout { .. } => ErrorKind::Timeout,
            Error::Batch { .. } => ErrorKind::Batch,
            Error::Invalid { .. } => ErrorKind::Invalid,
            Error::Decode { .. } => ErrorKind::Decode,
            Error::Inconsistent { .. } => ErrorKind::Inconsistent,
            Error::Transient { .. } => ErrorKind::Transient,
            Error::Backend { .. } => ErrorKind::Backend,
            Error::Unavailable { .. } => ErrorKind::Unavailable,
        }
    }

    /// The storage service's error code (`x-ms-error-code`), when there was one.
    ///
    /// The memory backend reports the same codes as Azure.
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::NotFound { code, .. }
            | Error::AlreadyExists { code, .. }
            | Error::Conflict { code, .. }
            | Error::LeaseHeld { code, .. }
            | Error::LeaseLost { code, .. }
            | Error::Backend { code, .. } => code.as_deref(),
            Error::Batch { source, .. } | Error::Unavailable { source, .. } => source.code(),
            _ => None,
        }
    }

    /// Whether retrying the same request may succeed (transient failures only;
    /// never a conflict or precondition failure).
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

    /// Builds an error from a service status and error code, the way both
    /// backends classify failures: by code first, then by status.
    pub fn from_service(status: u16, code: Option<&str>, what: impl Into<String>) -> Self {
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
            },
            (412, _) => Error::Conflict {
                what,
                code: code_owned,
            },
            (408 | 429 | 500..=599, _) => Error::Transient {
                message: match code {
                    Some(code) => format!("{what}: status {status} ({code})"),
                    None => format!("{what}: status {status}"),
                },
            },
            _ => Error::Backend {
                status,
                code: code_owned,
                message: what,
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
    fn batch_error_exposes_inner_code() {
        let e = Error::Batch {
            index: 3,
            source: Box::new(Error::from_service(409, Some("EntityAlreadyExists"), "x")),
        };
        assert_eq!(e.code(), Some("EntityAlreadyExists"));
        assert!(e.to_string().contains("batch operation 3"));
    }
}
