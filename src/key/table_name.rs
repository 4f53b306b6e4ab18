//! [`TableName`]: a validated table name.

use crate::error::{Error, Result};

/// A table name: `^[A-Za-z][A-Za-z0-9]{2,62}$`, not `tables`.
///
/// Table names are case-insensitive in the service; leasehold keeps the
/// spelling it was given and compares case-insensitively.
#[derive(Clone, Eq)]
pub struct TableName(String);

impl TableName {
    /// Validates a table name.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the table when it breaks the service's rule.
    pub fn new(name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        match leasehold_rules::table_name_problem(&name) {
            None => Ok(TableName(name)),
            Some(why) => Err(Error::invalid(format!("table name {name:?}"), why)),
        }
    }

    /// The name as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl PartialEq for TableName {
    fn eq(&self, other: &Self) -> bool {
        self.0.eq_ignore_ascii_case(&other.0)
    }
}

impl std::hash::Hash for TableName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // Hashes the lowercase spelling in one write (a valid name is at most
        // 63 ASCII bytes), consistent with the case-insensitive `eq`.
        let mut lower = [0u8; 64];
        let mut len = 0;
        for chunk in self.0.as_bytes().chunks(lower.len()) {
            for (slot, b) in lower.iter_mut().zip(chunk) {
                *slot = b.to_ascii_lowercase();
            }
            state.write(&lower[..chunk.len()]);
            len += chunk.len();
        }
        state.write_usize(len);
    }
}

impl PartialOrd for TableName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for TableName {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0
            .bytes()
            .map(|b| b.to_ascii_lowercase())
            .cmp(other.0.bytes().map(|b| b.to_ascii_lowercase()))
    }
}

impl std::str::FromStr for TableName {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        TableName::new(s)
    }
}

super::shown_as_text!(TableName);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_follow_the_service_rule() {
        assert!(TableName::new("Accounts").is_ok());
        assert!(TableName::new("abc").is_ok());
        assert!(TableName::new("a".repeat(63)).is_ok());
        for bad in ["ab", "1abc", "ab-c", "ab_c", "tables", "Tables", ""] {
            let e = TableName::new(bad).unwrap_err();
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
        assert!(TableName::new("a".repeat(64)).is_err());
        assert_eq!(
            TableName::new("Accounts").unwrap(),
            TableName::new("ACCOUNTS").unwrap()
        );
    }
}
