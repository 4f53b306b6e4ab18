//! The service's limits on an entity: property names, value sizes, property
//! count and entity size, checked before anything is sent.

use leasehold_rules::{is_plain_property_name, property_name_problem, utf16_len};

use super::data::EntityData;
use super::properties::Properties;
use super::value::Value;
use crate::error::{Error, Result};
use crate::key::{PartitionKey, RowKey};

const MAX_VALUE_BYTES: usize = Value::MAX_BYTES;
const MAX_USER_PROPERTIES: usize = EntityData::MAX_PROPERTIES;
const MAX_ENTITY_BYTES: usize = EntityData::MAX_BYTES;

/// The size of an entity in the service's accounting: 4 bytes, plus both keys
/// as UTF-16, plus for each property 8 bytes, its name as UTF-16 and its value.
pub(crate) fn entity_size(pk: &PartitionKey, rk: &RowKey, props: &Properties) -> usize {
    4 + 2 * utf16_len(pk.as_str())
        + 2 * utf16_len(rk.as_str())
        + props
            .iter()
            .map(|(name, v)| 8 + 2 * utf16_len(name) + v.stored_size())
            .sum::<usize>()
}

/// Checks every rule the service applies to an entity before it is stored:
/// property names, value sizes, property count and entity size.
///
/// # Errors
/// [`Error::Invalid`] naming the table, keys and property at fault.
pub(crate) fn validate_entity(
    table: &str,
    pk: &PartitionKey,
    rk: &RowKey,
    props: &Properties,
) -> Result<()> {
    let at = || {
        format!(
            "entity ({}, {}) of table `{table}`",
            crate::key::shorten(pk.as_str()),
            crate::key::shorten(rk.as_str())
        )
    };
    // One pass: names, value sizes and the entity size (as `entity_size`).
    let mut size = 4 + 2 * utf16_len(pk.as_str()) + 2 * utf16_len(rk.as_str());
    for (name, value) in props.iter() {
        if !is_plain_property_name(name)
            && let Some(why) = property_name_problem(name)
        {
            return Err(Error::invalid(
                format!("property name {name:?} in {}", at()),
                why,
            ));
        }
        // Strings count two bytes per UTF-16 unit, both beside a 4-byte length.
        let value_size = value.stored_size();
        let why = match value {
            Value::String(_) if value_size - 4 > MAX_VALUE_BYTES => Some(format!(
                "string is {} UTF-16 units ({} bytes); the limit is {MAX_VALUE_BYTES} bytes",
                (value_size - 4) / 2,
                value_size - 4
            )),
            Value::Binary(b) if b.len() > MAX_VALUE_BYTES => Some(format!(
                "binary is {} bytes; the limit is {MAX_VALUE_BYTES}",
                b.len()
            )),
            _ => None,
        };
        if let Some(why) = why {
            return Err(Error::invalid(
                format!("property `{name}` of {}", at()),
                why,
            ));
        }
        size += 8 + 2 * utf16_len(name) + value_size;
    }
    if props.len() > MAX_USER_PROPERTIES {
        return Err(Error::invalid(
            at(),
            format!(
                "has {} properties; the limit is {MAX_USER_PROPERTIES} besides PartitionKey, RowKey and Timestamp",
                props.len()
            ),
        ));
    }
    if size > MAX_ENTITY_BYTES {
        return Err(Error::invalid(
            at(),
            format!("is {size} bytes; the limit is {MAX_ENTITY_BYTES}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> (PartitionKey, RowKey) {
        (PartitionKey::new("p").unwrap(), RowKey::new("r").unwrap())
    }

    #[test]
    fn string_limit_counts_utf16_units() {
        let (pk, rk) = keys();
        let mut props = Properties::new();
        props.insert("s", Value::String("x".repeat(32 * 1024)));
        assert!(validate_entity("T", &pk, &rk, &props).is_ok());
        props.insert("s", Value::String("x".repeat(32 * 1024 + 1)));
        let e = validate_entity("T", &pk, &rk, &props).unwrap_err();
        assert!(e.to_string().contains("property `s`"), "{e}");
        // One astral character is two UTF-16 units.
        props.insert(
            "s",
            Value::String(format!("{}😀", "x".repeat(32 * 1024 - 1))),
        );
        assert!(validate_entity("T", &pk, &rk, &props).is_err());
    }

    #[test]
    fn count_and_entity_size_limits() {
        let (pk, rk) = keys();
        let mut props: Properties = (0..252)
            .map(|i| (format!("p{i}"), Value::Int32(i)))
            .collect();
        assert!(validate_entity("T", &pk, &rk, &props).is_ok());
        props.insert("one_more", Value::Boolean(true));
        let e = validate_entity("T", &pk, &rk, &props).unwrap_err();
        assert!(e.to_string().contains("253 properties"), "{e}");

        let big: Properties = (0..17)
            .map(|i| (format!("b{i}"), Value::Binary(vec![0; 64 * 1024])))
            .collect();
        let e = validate_entity("T", &pk, &rk, &big).unwrap_err();
        assert!(e.to_string().contains("the limit is 1048576"), "{e}");
    }
}
