//! [`ContainerName`] and [`BlobName`]: validated names of blob storage.

use super::keys::shorten;
use crate::error::{Error, Result};

/// A blob container name: 3 to 63 lowercase letters, digits and single
/// hyphens, starting and ending with a letter or digit.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContainerName(String);

impl ContainerName {
    /// Validates a container name.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the container when it breaks the rule.
    pub fn new(name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        let b = name.as_bytes();
        let why = if b.len() < 3 || b.len() > 63 {
            Some("must be 3 to 63 characters long")
        } else if !b
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        {
            Some("may contain only lowercase letters, digits and hyphens")
        } else if b[0] == b'-' || b[b.len() - 1] == b'-' {
            Some("must start and end with a letter or digit")
        } else if name.contains("--") {
            Some("must not contain two hyphens in a row")
        } else {
            None
        };
        match why {
            None => Ok(ContainerName(name)),
            Some(why) => Err(Error::invalid(format!("container name {name:?}"), why)),
        }
    }

    /// A name leasehold itself spells out (its default containers), which
    /// follows the rule: a unit test beside each such name checks it with
    /// [`ContainerName::new`].
    pub(crate) fn from_static(name: &'static str) -> Self {
        ContainerName(name.to_owned())
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A blob name: 1 to 1024 characters, no control characters, not ending in
/// `.` or `/`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlobName(String);

impl BlobName {
    /// Validates a blob name.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the blob when it breaks the rule.
    pub fn new(name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        let len = name.chars().count();
        let why = if len == 0 || len > 1024 {
            Some("must be 1 to 1024 characters long")
        } else if name.chars().any(char::is_control) {
            Some("must not contain control characters")
        } else if name.ends_with('.') || name.ends_with('/') {
            Some("must not end with `.` or `/`")
        } else {
            None
        };
        match why {
            None => Ok(BlobName(name)),
            Some(why) => Err(Error::invalid(format!("blob name {}", shorten(&name)), why)),
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

super::shown_as_text!(ContainerName, BlobName);
