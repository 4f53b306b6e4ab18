//! Support for `#[derive(PropertyCodec)]` on fieldless enums: reading the
//! stored value, and the error for a value no variant stands for.

use super::codec::{DecodeError, describe};
use super::value::Value;

/// `expected` of an enum's decode errors: the type and its stored values.
fn expected(type_name: &str, stored: &[&str]) -> String {
    format!("{type_name}, one of {}", stored.join(", "))
}

/// The text of an enum stored by name.
///
/// # Errors
/// [`DecodeError`] when the property is absent or not an `Edm.String`.
pub fn enum_string(
    value: Option<Value>,
    type_name: &str,
    names: &[&str],
) -> Result<String, DecodeError> {
    let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    let quoted: Vec<&str> = quoted.iter().map(String::as_str).collect();
    match value {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(DecodeError::mismatch(
            format!("Edm.String: {}", expected(type_name, &quoted)),
            &other,
        )),
        None => Err(DecodeError::missing(format!(
            "Edm.String: {}",
            expected(type_name, &quoted)
        ))),
    }
}

/// The number of an enum stored by discriminant (`shown`: `"1 (Pending)"`).
///
/// # Errors
/// [`DecodeError`] when the property is absent or not an `Edm.Int32`.
pub fn enum_int32(
    value: Option<Value>,
    type_name: &str,
    shown: &[&str],
) -> Result<i32, DecodeError> {
    match value {
        Some(Value::Int32(n)) => Ok(n),
        Some(other) => Err(DecodeError::mismatch(
            format!("Edm.Int32: {}", expected(type_name, shown)),
            &other,
        )),
        None => Err(DecodeError::missing(format!(
            "Edm.Int32: {}",
            expected(type_name, shown)
        ))),
    }
}

/// The error for a stored value that no variant stands for; it names the
/// value (the caller adds the property and the row).
pub fn unknown_variant(type_name: &str, stored: &[&str], value: Value) -> DecodeError {
    let stored: Vec<String> = match &value {
        Value::String(_) => stored.iter().map(|n| format!("{n:?}")).collect(),
        _ => stored.iter().map(|n| (*n).to_owned()).collect(),
    };
    let stored: Vec<&str> = stored.iter().map(String::as_str).collect();
    DecodeError {
        expected: expected(type_name, &stored),
        found: format!("{}, which is no variant of {type_name}", describe(&value)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_values_are_named() {
        let e = unknown_variant(
            "Status",
            &["Pending", "Shipped"],
            Value::String("Lost".into()),
        );
        assert_eq!(e.expected, r#"Status, one of "Pending", "Shipped""#);
        assert_eq!(
            e.found,
            r#"Edm.String "Lost", which is no variant of Status"#
        );
        let e = enum_int32(Some(Value::Int64(1)), "Level", &["1 (Low)"]).unwrap_err();
        assert_eq!(e.expected, "Edm.Int32: Level, one of 1 (Low)");
        assert_eq!(enum_string(None, "S", &["A"]).unwrap_err().found, "absent");
    }
}
