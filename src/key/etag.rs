//! [`ETag`]: the version of an entity or blob.

use std::fmt;
use std::sync::Arc;

/// An entity tag: the version of an entity or blob, as the service gave it.
///
/// Opaque: compare it, send it back, never parse it. Cheap to clone (the
/// text is shared).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ETag(Arc<str>);

/// See [`ETag::superseded`]: the service's shape, at a time no write of
/// the service ever carries.
const SUPERSEDED_ETAG: &str = "W/\"datetime'1601-01-01T00%3A00%3A00.0000000Z'\"";

impl ETag {
    /// Wraps an ETag received from the service.
    pub fn new(tag: impl Into<String>) -> Self {
        ETag(Arc::from(tag.into()))
    }

    /// The ETag reported for a write known to have been applied whose own
    /// ETag was lost with its reply and replaced since. It matches no stored
    /// entity: a conditional write based on it fails with
    /// [`Error::Conflict`](crate::Error::Conflict).
    pub fn superseded() -> Self {
        ETag(SUPERSEDED_ETAG.into())
    }

    /// Whether this is [`ETag::superseded`].
    pub fn is_superseded(&self) -> bool {
        &*self.0 == SUPERSEDED_ETAG
    }

    /// The ETag as sent in `If-Match`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ETag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ETag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ETag({})", self.0)
    }
}
