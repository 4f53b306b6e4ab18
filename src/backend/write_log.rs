//! Write logs: the ids of an entity's recent writes, stored with it, so that
//! a write whose reply was lost can be told apart from another writer's.
//!
//! A conditional write whose reply is lost may or may not have been applied.
//! Reading the entity back does not always say which: another writer may have
//! written the same content from the same version (two increments of one
//! counter), or written on top of it since. A table opened with
//! [`Table::with_write_log`](crate::Table::with_write_log) keeps, in the
//! reserved property [`PROPERTY`], the ids of the last [`CAPACITY`] writes
//! made through leasehold, newest first. Each write puts a fresh id in front
//! of the log it read, so the entry after its own id (its *anchor*) is the
//! write it was based on. Reading back then decides:
//!
//! * its own id is in the stored log: it was applied (and maybe built upon);
//! * otherwise, and its anchor is still in the log: every write since the
//!   version it was based on is listed, and it is not among them, so it was
//!   not applied;
//! * otherwise (the log was cut, or rewritten by a writer that does not keep
//!   it): the outcome stays unknown.
// Only the Azure backend settles lost replies by the log.
#![cfg_attr(not(feature = "azure"), allow(dead_code))]

use crate::entity::{Properties, Value};

/// The reserved property holding an entity's write log.
pub(crate) const PROPERTY: &str = leasehold_rules::WRITE_LOG_PROPERTY;

/// How many write ids a log keeps.
pub(crate) const CAPACITY: usize = 32;

/// A fresh write id: 48 random bits as 8 URL-safe base64 characters.
pub(crate) fn new_id() -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bits = uuid::Uuid::new_v4().as_u128();
    (0..8)
        .map(|i| char::from(ALPHABET[((bits >> (6 * i)) & 63) as usize]))
        .collect()
}

/// The log a write stores: its id, then the log it was based on, cut to
/// [`CAPACITY`] ids.
pub(crate) fn extend(id: &str, previous: Option<&str>) -> String {
    let mut log = String::with_capacity(9 * CAPACITY);
    log.push_str(id);
    for old in previous.into_iter().flat_map(ids).take(CAPACITY - 1) {
        log.push(' ');
        log.push_str(old);
    }
    log
}

/// The ids of a log, newest first.
pub(crate) fn ids(log: &str) -> impl Iterator<Item = &str> {
    log.split(' ').filter(|id| !id.is_empty())
}

/// The log stored in `property` of a property bag, if any.
pub(crate) fn of<'a>(properties: &'a Properties, property: &str) -> Option<&'a str> {
    match properties.get(property) {
        Some(Value::String(log)) => Some(log),
        _ => None,
    }
}

/// What a stored log says about the write that stored `written`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Evidence {
    /// The write's id is the newest in the stored log.
    AppliedLatest,
    /// The write's id is in the stored log behind later writes.
    AppliedThenBuiltUpon,
    /// Every write since the write's anchor is listed, and it is not.
    NotApplied,
    /// The log cannot tell.
    Unknown,
}

/// Compares the log a write sent (`written`) with the stored one (`stored`,
/// `None` when the entity has no log).
pub(crate) fn evidence(written: &str, stored: Option<&str>) -> Evidence {
    let mut sent = ids(written);
    let Some(own) = sent.next() else {
        return Evidence::Unknown;
    };
    let anchor = sent.next();
    let stored: Vec<&str> = stored.map(|s| ids(s).collect()).unwrap_or_default();
    match stored.iter().position(|id| *id == own) {
        Some(0) => Evidence::AppliedLatest,
        Some(_) => Evidence::AppliedThenBuiltUpon,
        None if anchor.is_some_and(|a| stored.contains(&a)) => Evidence::NotApplied,
        None => Evidence::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_short_and_distinct() {
        let a = new_id();
        let b = new_id();
        assert_eq!(a.len(), 8);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        );
        assert_ne!(a, b);
    }

    #[test]
    fn logs_put_the_newest_first_and_keep_capacity() {
        assert_eq!(extend("a", None), "a");
        assert_eq!(extend("b", Some("a")), "b a");
        let mut log = String::new();
        for i in 0..100 {
            log = extend(&format!("{i:08}"), Some(&log));
        }
        let kept: Vec<&str> = ids(&log).collect();
        assert_eq!(kept.len(), CAPACITY);
        assert_eq!(kept[0], "00000099");
        assert_eq!(kept[CAPACITY - 1], format!("{:08}", 100 - CAPACITY));
    }

    #[test]
    fn evidence_reads_the_chain() {
        let sent = extend("mine", Some("base older"));
        // Ours is stored, alone or built upon.
        assert_eq!(evidence(&sent, Some(&sent)), Evidence::AppliedLatest);
        let on_top = extend("later", Some(&sent));
        assert_eq!(
            evidence(&sent, Some(&on_top)),
            Evidence::AppliedThenBuiltUpon
        );
        // Another write based on the same version won; ours is not listed
        // while its anchor is.
        let rival = extend("rival", Some("base older"));
        assert_eq!(evidence(&sent, Some(&rival)), Evidence::NotApplied);
        assert_eq!(evidence(&sent, Some("base older")), Evidence::NotApplied);
        // The anchor is gone: the log was cut or rewritten.
        assert_eq!(evidence(&sent, Some("x y z")), Evidence::Unknown);
        assert_eq!(evidence(&sent, None), Evidence::Unknown);
        // A first write has no anchor: only its own id can prove anything.
        let first = extend("first", None);
        assert_eq!(evidence(&first, Some("other")), Evidence::Unknown);
        assert_eq!(evidence(&first, Some(&first)), Evidence::AppliedLatest);
    }

    #[test]
    fn a_cut_log_makes_the_outcome_unknown() {
        let sent = extend("mine", Some("base"));
        let mut log = sent.clone();
        for i in 0..CAPACITY {
            log = extend(&format!("w{i}"), Some(&log));
        }
        assert_eq!(evidence(&sent, Some(&log)), Evidence::Unknown);
    }
}
