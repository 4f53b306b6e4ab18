//! Shared helpers for integration tests that run against Azurite.
//!
//! A module of `tests/support` (`crate::support::azurite` in the `it` test
//! binary). Run the tests through `scripts/with-azurite.sh`, which starts a private
//! Azurite and sets `LEASEHOLD_TEST_AZURITE`.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};

use leasehold::TableName;
use leasehold::key::ContainerName;

/// The environment variable holding the Azurite connection string.
pub const AZURITE_ENV: &str = "LEASEHOLD_TEST_AZURITE";

/// The connection string of the Azurite to test against.
///
/// When `LEASEHOLD_TEST_AZURITE` is unset: in CI (env `CI` set) this panics,
/// so Azurite tests never skip silently there; elsewhere it prints a notice
/// to stderr and returns `None`, and the calling test returns early.
pub fn azurite_connection_string() -> Option<String> {
    match std::env::var(AZURITE_ENV) {
        Ok(s) if !s.trim().is_empty() => Some(s),
        _ => {
            if std::env::var_os("CI").is_some() {
                panic!(
                    "Azurite is required in CI: run through scripts/with-azurite.sh \
                     ({AZURITE_ENV} is not set)"
                );
            }
            eprintln!(
                "notice: {AZURITE_ENV} is not set; skipping a test that needs Azurite \
                 (run it through scripts/with-azurite.sh)"
            );
            None
        }
    }
}

/// Names unique to one test, so tests running in parallel (in one process or
/// several, against one Azurite) never share a table or container.
#[derive(Debug, Clone)]
pub struct UniqueNames {
    /// Lowercase letters and digits, starting with a letter.
    prefix: String,
}

/// Unique names for the test called `test`. The prefix holds a short form of
/// the test name (to find its leftovers), the process id, a per-process
/// counter and a random part.
pub fn unique_names(test: &str) -> UniqueNames {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let short: String = test
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .take(12)
        .collect();
    let random = uuid::Uuid::new_v4().simple().to_string();
    UniqueNames {
        prefix: format!("t{short}{}x{n}x{}", std::process::id(), &random[..8]),
    }
}

impl UniqueNames {
    /// The prefix: lowercase letters and digits, starting with a letter.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// A table name: the prefix and `suffix` (letters and digits).
    pub fn table(&self, suffix: &str) -> TableName {
        let name: String = format!("{}{suffix}", self.prefix)
            .chars()
            .take(63)
            .collect();
        TableName::new(name).expect("unique table name")
    }

    /// A container name: the prefix and `suffix` (lowercase letters, digits).
    pub fn container(&self, suffix: &str) -> ContainerName {
        let name: String = format!("{}{suffix}", self.prefix)
            .to_ascii_lowercase()
            .chars()
            .take(63)
            .collect();
        ContainerName::new(name).expect("unique container name")
    }
}
