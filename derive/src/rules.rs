//! The service's naming rules, checked at compile time.
//!
//! These duplicate two small functions of the runtime crate, which cannot be a
//! dependency of its own proc macro: `leasehold::key::table_name_problem` and
//! `leasehold::entity::property_name_problem`. Keep each pair in step; the
//! runtime twins are the reference.

/// Property names the service keeps for itself.
pub const RESERVED_NAMES: [&str; 3] = ["PartitionKey", "RowKey", "Timestamp"];

/// The longest property name, in characters.
pub const MAX_NAME_CHARS: usize = 255;

/// The most user properties an entity may have (255 minus PartitionKey,
/// RowKey and Timestamp).
pub const MAX_USER_PROPERTIES: usize = 252;

/// Why `name` is not a valid table name (`^[A-Za-z][A-Za-z0-9]{2,62}$`, not
/// `tables` in any case), or `None` when it is.
/// Runtime twin: `leasehold::key::table_name_problem`.
pub fn table_name_problem(name: &str) -> Option<&'static str> {
    let bytes = name.as_bytes();
    if bytes.len() < 3 || bytes.len() > 63 {
        return Some("must be 3 to 63 characters long");
    }
    if !bytes[0].is_ascii_alphabetic() {
        return Some("must start with a letter");
    }
    if !bytes.iter().all(u8::is_ascii_alphanumeric) {
        return Some("may contain only ASCII letters and digits");
    }
    if name.eq_ignore_ascii_case("tables") {
        return Some("`tables` is reserved");
    }
    None
}

/// Why `name` cannot be a property name (C# identifier rules, at most 255
/// characters, not reserved), or `None` when it can.
/// Runtime twin: `leasehold::entity::property_name_problem`.
pub fn property_name_problem(name: &str) -> Option<String> {
    let mut chars = name.chars();
    match chars.next() {
        None => return Some("is empty".into()),
        Some(c) if !(c.is_alphabetic() || c == '_') => {
            return Some(format!("must start with a letter or `_`, not {c:?}"));
        }
        _ => {}
    }
    if let Some(c) = chars.find(|&c| !(c.is_alphanumeric() || c == '_')) {
        return Some(format!(
            "may contain only letters, digits and `_`, not {c:?}"
        ));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Some(format!("is longer than {MAX_NAME_CHARS} characters"));
    }
    if RESERVED_NAMES.contains(&name) {
        return Some("is reserved by the service".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names() {
        for good in ["Accounts", "abc", "A12", &"a".repeat(63)] {
            assert_eq!(table_name_problem(good), None, "{good}");
        }
        for bad in [
            "",
            "ab",
            "1abc",
            "ab-c",
            "ab_c",
            "tables",
            "TABLES",
            &"a".repeat(64),
        ] {
            assert!(table_name_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn property_names() {
        for good in ["balance", "_x1", "Größe", &"a".repeat(255)] {
            assert_eq!(property_name_problem(good), None, "{good}");
        }
        for bad in [
            "",
            "1a",
            "a-b",
            "a b",
            "a@odata.type",
            "PartitionKey",
            "RowKey",
            "Timestamp",
        ] {
            assert!(property_name_problem(bad).is_some(), "{bad}");
        }
        assert!(property_name_problem(&"a".repeat(256)).is_some());
    }
}
