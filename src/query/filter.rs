//! The filter language: a small AST of comparisons, which the Azure
//! backend renders with [`Filter::to_odata`] and the memory backend
//! evaluates with [`Filter::matches`]. A comparison matches only a property
//! of exactly the literal's EDM type (an `Edm.Int64` property never
//! matches an `Int32` literal), as in Azure.

use std::cmp::Ordering;
use std::fmt::Write as _;

use leasehold_rules::property_name_problem;

use crate::datetime;
use crate::entity::{Properties, Value};
use crate::error::{Error, Result};

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `eq`
    Eq,
    /// `ne`
    Ne,
    /// `gt`
    Gt,
    /// `ge`
    Ge,
    /// `lt`
    Lt,
    /// `le`
    Le,
}

impl CmpOp {
    /// The OData spelling.
    pub fn odata(self) -> &'static str {
        match self {
            CmpOp::Eq => "eq",
            CmpOp::Ne => "ne",
            CmpOp::Gt => "gt",
            CmpOp::Ge => "ge",
            CmpOp::Lt => "lt",
            CmpOp::Le => "le",
        }
    }

    fn holds(self, ord: Ordering) -> bool {
        match self {
            CmpOp::Eq => ord == Ordering::Equal,
            CmpOp::Ne => ord != Ordering::Equal,
            CmpOp::Gt => ord == Ordering::Greater,
            CmpOp::Ge => ord != Ordering::Less,
            CmpOp::Lt => ord == Ordering::Less,
            CmpOp::Le => ord != Ordering::Greater,
        }
    }
}

/// A filter over entities.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// `property op literal`. `PartitionKey`, `RowKey` and `Timestamp` are
    /// properties here too.
    Compare {
        /// The property name.
        property: String,
        /// The operator.
        op: CmpOp,
        /// The literal, whose EDM type the property must have to match.
        value: Value,
    },
    /// Both hold.
    And(Box<Filter>, Box<Filter>),
    /// Either holds.
    Or(Box<Filter>, Box<Filter>),
    /// The inner filter does not hold.
    Not(Box<Filter>),
}

/// What a filter is evaluated against.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Row<'a> {
    pub(crate) partition_key: &'a str,
    pub(crate) row_key: &'a str,
    pub(crate) timestamp: time::OffsetDateTime,
    pub(crate) properties: &'a Properties,
}

impl Filter {
    /// The most comparisons one filter may hold (a service limit).
    pub const MAX_COMPARISONS: usize = 15;

    /// The longest filter leasehold sends, in bytes of its URL-encoded
    /// text: 10 KiB; a longer one is [`Error::Invalid`] before any request.
    ///
    /// The service documents no limit on the request line; Azurite (3.37,
    /// Node 20) answers 431 to a request head over 16 KiB, and the longest
    /// query head holds besides the filter about 0.5 KiB of path and
    /// headers and a continuation of two 1 KiB keys (4 KiB). See
    /// [`crate::query`], "Key ranges", for what fits.
    pub const MAX_LEN: usize = 10 * 1024;

    /// A comparison.
    #[must_use = "a filter does nothing until used in a query"]
    pub fn compare(property: impl Into<String>, op: CmpOp, value: Value) -> Self {
        Filter::Compare {
            property: property.into(),
            op,
            value,
        }
    }

    /// `self and other`
    #[must_use = "`and` returns the combined filter; `self` is consumed"]
    pub fn and(self, other: Filter) -> Self {
        Filter::And(Box::new(self), Box::new(other))
    }

    /// `self or other`
    #[must_use = "`or` returns the combined filter; `self` is consumed"]
    pub fn or(self, other: Filter) -> Self {
        Filter::Or(Box::new(self), Box::new(other))
    }

    /// `not self`
    #[allow(clippy::should_implement_trait)]
    #[must_use = "`not` returns the negated filter; `self` is consumed"]
    pub fn not(self) -> Self {
        Filter::Not(Box::new(self))
    }

    /// The number of comparisons.
    pub fn comparisons(&self) -> usize {
        self.leaves().len()
    }

    fn leaves(&self) -> Vec<(&str, &Value)> {
        fn walk<'a>(f: &'a Filter, out: &mut Vec<(&'a str, &'a Value)>) {
            match f {
                Filter::Compare {
                    property, value, ..
                } => out.push((property, value)),
                Filter::And(a, b) | Filter::Or(a, b) => {
                    walk(a, out);
                    walk(b, out);
                }
                Filter::Not(a) => walk(a, out),
            }
        }
        let mut out = Vec::new();
        walk(self, &mut out);
        out
    }

    /// Checks the service's rules: at most
    /// [`MAX_COMPARISONS`](Self::MAX_COMPARISONS) comparisons and
    /// [`MAX_LEN`](Self::MAX_LEN) bytes URL-encoded, valid property names
    /// (so a name never changes the expression), literals it can spell (no
    /// NaN or infinities), date-times in range.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the filter part at fault.
    pub fn validate(&self) -> Result<()> {
        const MAX_COMPARISONS: usize = Filter::MAX_COMPARISONS;
        const MAX_FILTER_LEN: usize = Filter::MAX_LEN;
        let n = self.comparisons();
        if n > MAX_COMPARISONS {
            return Err(Error::invalid(
                "filter",
                format!("has {n} comparisons; the service allows at most {MAX_COMPARISONS}"),
            ));
        }
        for (property, value) in self.leaves() {
            // Property names are written into the OData text unquoted.
            let system = matches!(property, "PartitionKey" | "RowKey" | "Timestamp");
            if let Some(why) = property_name_problem(property).filter(|_| !system) {
                return Err(Error::invalid(format!("filter property {property:?}"), why));
            }
            let literal = || format!("filter literal for `{property}`");
            match value {
                Value::Double(d) if !d.is_finite() => {
                    let why = format!("{d} cannot be written in a filter");
                    return Err(Error::invalid(literal(), why));
                }
                Value::DateTime(t) => {
                    datetime::normalize(*t).map_err(|why| Error::invalid(literal(), why))?;
                }
                _ => {}
            }
        }
        let len = self.encoded_len();
        if len > MAX_FILTER_LEN {
            let on = self
                .property_names()
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ");
            return Err(Error::invalid(
                format!("filter on {on}"),
                format!(
                    "is {len} bytes long once URL-encoded; at most {MAX_FILTER_LEN} are sent \
                     (a filter travels in the request line, which the service bounds)"
                ),
            ));
        }
        Ok(())
    }

    /// The length of the filter's text URL-encoded as the Azure client
    /// encodes a query string (form encoding).
    pub(crate) fn encoded_len(&self) -> usize {
        self.to_odata()
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'*' | b'-' | b'.' | b'_' | b' ' => 1,
                _ => 3,
            })
            .sum()
    }

    /// The distinct property names compared, in order of appearance.
    fn property_names(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for (property, _) in self.leaves() {
            if !out.contains(&property) {
                out.push(property);
            }
        }
        out
    }

    /// Renders the filter as an OData `$filter` expression.
    pub fn to_odata(&self) -> String {
        match self {
            Filter::Compare {
                property,
                op,
                value,
            } => {
                let mut out = format!("{property} {} ", op.odata());
                write_literal(&mut out, value);
                out
            }
            Filter::And(a, b) => format!("({}) and ({})", a.to_odata(), b.to_odata()),
            Filter::Or(a, b) => format!("({}) or ({})", a.to_odata(), b.to_odata()),
            Filter::Not(a) => format!("not ({})", a.to_odata()),
        }
    }

    /// The filter's top-level conjuncts on `PartitionKey` and `RowKey`
    /// alone (a row keeps its keys whatever is written to it), and the
    /// rest, each joined back with `and`.
    pub(crate) fn split_keys(&self) -> (Option<Filter>, Option<Filter>) {
        fn conjuncts<'a>(f: &'a Filter, out: &mut Vec<&'a Filter>) {
            match f {
                Filter::And(a, b) => {
                    conjuncts(a, out);
                    conjuncts(b, out);
                }
                other => out.push(other),
            }
        }
        let on_keys = |f: &Filter| {
            f.leaves()
                .iter()
                .all(|(p, _)| matches!(*p, "PartitionKey" | "RowKey"))
        };
        let join = |parts: Vec<&Filter>| parts.into_iter().cloned().reduce(Filter::and);
        let mut all = Vec::new();
        conjuncts(self, &mut all);
        let (keys, rest): (Vec<&Filter>, Vec<&Filter>) = all.into_iter().partition(|f| on_keys(f));
        (join(keys), join(rest))
    }

    /// The distinct properties compared other than the keys and
    /// `Timestamp`, in order of appearance.
    pub(crate) fn user_properties(&self) -> Vec<&str> {
        let mut names = self.property_names();
        names.retain(|n| !matches!(*n, "PartitionKey" | "RowKey" | "Timestamp"));
        names
    }

    /// Evaluates the filter as the service does.
    pub(crate) fn matches(&self, row: &Row<'_>) -> bool {
        match self {
            Filter::Compare {
                property,
                op,
                value,
            } => {
                let stored = match property.as_str() {
                    "PartitionKey" => Some(Value::String(row.partition_key.to_owned())),
                    "RowKey" => Some(Value::String(row.row_key.to_owned())),
                    "Timestamp" => Some(Value::DateTime(row.timestamp)),
                    name => row.properties.get(name).cloned(),
                };
                match stored.and_then(|s| compare_values(&s, value)) {
                    Some(ord) => op.holds(ord),
                    None => false,
                }
            }
            Filter::And(a, b) => a.matches(row) && b.matches(row),
            Filter::Or(a, b) => a.matches(row) || b.matches(row),
            Filter::Not(a) => !a.matches(row),
        }
    }
}

/// Orders two values as the service does; `None` (never matches) when the
/// types differ or a double is NaN.
fn compare_values(stored: &Value, literal: &Value) -> Option<Ordering> {
    match (stored, literal) {
        (Value::String(a), Value::String(b)) => Some(crate::key::compare_keys(a, b)),
        (Value::Boolean(a), Value::Boolean(b)) => Some(a.cmp(b)),
        (Value::Int32(a), Value::Int32(b)) => Some(a.cmp(b)),
        (Value::Int64(a), Value::Int64(b)) => Some(a.cmp(b)),
        (Value::Double(a), Value::Double(b)) => a.partial_cmp(b),
        (Value::DateTime(a), Value::DateTime(b)) => Some(a.cmp(b)),
        (Value::Guid(a), Value::Guid(b)) => Some(a.cmp(b)),
        (Value::Binary(a), Value::Binary(b)) => Some(a.cmp(b)),
        _ => None,
    }
}

/// Writes an OData literal: `'it''s'`, `42`, `42L`, `1.5`, `true`,
/// `datetime'…'`, `guid'…'`, `X'0a0b'`.
fn write_literal(out: &mut String, value: &Value) {
    match value {
        Value::String(s) => {
            out.push('\'');
            out.push_str(&s.replace('\'', "''"));
            out.push('\'');
        }
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int32(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Int64(i) => {
            let _ = write!(out, "{i}L");
        }
        Value::Double(d) => {
            // Shortest round-trip digits, never an exponent (Azurite reads
            // "1E300" as a property name), with a fraction so the service
            // reads a double. The longest (5E-324) is 326 bytes.
            let start = out.len();
            let _ = write!(out, "{d}");
            if !out[start..].contains('.') {
                out.push_str(".0");
            }
        }
        Value::DateTime(t) => {
            let _ = write!(out, "datetime'{}'", datetime::format(*t));
        }
        Value::Guid(g) => {
            let _ = write!(out, "guid'{}'", g.hyphenated());
        }
        Value::Binary(b) => {
            out.push_str("X'");
            for byte in b {
                let _ = write!(out, "{byte:02x}");
            }
            out.push('\'');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;
    use uuid::Uuid;

    fn lit(v: Value) -> String {
        let mut s = String::new();
        write_literal(&mut s, &v);
        s
    }

    #[test]
    fn literals_are_rendered_as_odata() {
        assert_eq!(lit(Value::String("it's".into())), "'it''s'");
        assert_eq!(lit(Value::Int32(42)), "42");
        assert_eq!(lit(Value::Int64(42)), "42L");
        assert_eq!(lit(Value::Double(1.5)), "1.5");
        assert_eq!(lit(Value::Double(2.0)), "2.0");
        assert_eq!(lit(Value::Double(2.5e3)), "2500.0");
        assert_eq!(lit(Value::Double(-0.0)), "-0.0");
        assert_eq!(lit(Value::Double(1e300)), format!("1{}.0", "0".repeat(300)));
        assert_eq!(
            lit(Value::Double(1e-300)),
            format!("0.{}1", "0".repeat(299))
        );
        assert_eq!(lit(Value::Boolean(true)), "true");
        assert_eq!(
            lit(Value::DateTime(datetime!(2024-01-02 03:04:05 UTC))),
            "datetime'2024-01-02T03:04:05.0000000Z'"
        );
        assert_eq!(
            lit(Value::Guid(Uuid::nil())),
            "guid'00000000-0000-0000-0000-000000000000'"
        );
        assert_eq!(lit(Value::Binary(vec![0x0a, 0xff])), "X'0aff'");
    }

    /// Every finite double renders as plain decimal digits that read back as
    /// the very same double, within the length the filter limit allows for.
    #[test]
    fn doubles_render_as_exact_plain_decimals() {
        let edges = [
            0.0,
            -0.0,
            1.0,
            0.1,
            2.5e3,
            1e-300,
            1e300,
            f64::MAX,
            f64::MIN,
            f64::MIN_POSITIVE,
            5e-324,
            -5e-324,
            f64::EPSILON,
            9007199254740993.0,
            123456.789e-7,
        ];
        let mut longest = 0;
        let mut seed = 0x9e3779b97f4a7c15_u64;
        let randoms = (0..20_000).map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            f64::from_bits(seed)
        });
        for d in edges.into_iter().chain(randoms).filter(|d| d.is_finite()) {
            let text = lit(Value::Double(d));
            let (int, frac) = text.trim_start_matches('-').split_once('.').unwrap();
            assert!(
                !int.is_empty()
                    && !frac.is_empty()
                    && int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()),
                "{text}"
            );
            let back: f64 = text.parse().unwrap();
            assert_eq!(back.to_bits(), d.to_bits(), "{text}");
            longest = longest.max(text.len());
        }
        assert!(longest <= 330, "{longest}");
        let mut f = Filter::compare("d", CmpOp::Eq, Value::Double(-5e-324));
        for _ in 1..Filter::MAX_COMPARISONS {
            f = f.or(Filter::compare("d", CmpOp::Eq, Value::Double(-5e-324)));
        }
        assert!(f.validate().is_ok(), "{}", f.encoded_len());
    }

    #[test]
    fn filters_longer_than_the_limit_are_invalid_and_name_their_properties() {
        let long = |n: usize| {
            Filter::compare("PartitionKey", CmpOp::Eq, Value::String("p".into())).and(
                Filter::compare("blob", CmpOp::Eq, Value::Binary(vec![0xab; n])),
            )
        };
        // `(PartitionKey eq 'p') and (blob eq X'…')`: quotes and parentheses
        // take three bytes each once encoded, hex digits one.
        let fixed = long(0).encoded_len();
        assert!(long((Filter::MAX_LEN - fixed) / 2).validate().is_ok());
        let over = (Filter::MAX_LEN - fixed) / 2 + 1;
        match long(over).validate() {
            Err(Error::Invalid { what, why }) => {
                assert_eq!(what, "filter on `PartitionKey`, `blob`");
                assert!(
                    why.contains(&format!("is {} bytes", fixed + 2 * over)),
                    "{why}"
                );
            }
            other => panic!("{other:?}"),
        }
        // Non-ASCII text counts as sent: three bytes per UTF-8 byte.
        let f = Filter::compare("s", CmpOp::Eq, Value::String("é".into()));
        assert_eq!(f.encoded_len(), "s eq ".len() + 3 + 6 + 3);
    }

    #[test]
    fn nested_filters_are_parenthesized() {
        let f = Filter::compare("a", CmpOp::Eq, Value::Int32(1)).and(
            Filter::compare("b", CmpOp::Lt, Value::Int64(2)).or(Filter::compare(
                "c",
                CmpOp::Ne,
                Value::Boolean(false),
            )
            .not()),
        );
        assert_eq!(
            f.to_odata(),
            "(a eq 1) and ((b lt 2L) or (not (c ne false)))"
        );
        assert_eq!(f.comparisons(), 3);
    }

    #[test]
    fn validation_counts_comparisons_and_rejects_nan() {
        let mut f = Filter::compare("a", CmpOp::Eq, Value::Int32(0));
        for i in 1..15 {
            f = f.or(Filter::compare("a", CmpOp::Eq, Value::Int32(i)));
        }
        assert!(f.validate().is_ok());
        let f = f.or(Filter::compare("a", CmpOp::Eq, Value::Int32(99)));
        assert!(
            f.validate()
                .unwrap_err()
                .to_string()
                .contains("16 comparisons")
        );
        let nan = Filter::compare("d", CmpOp::Eq, Value::Double(f64::NAN));
        assert!(nan.validate().unwrap_err().to_string().contains("`d`"));
    }

    #[test]
    fn property_names_that_would_change_the_expression_are_invalid() {
        for ok in ["PartitionKey", "RowKey", "Timestamp", "n", "_x1", "Größe"] {
            assert!(
                Filter::compare(ok, CmpOp::Eq, Value::Int32(1))
                    .validate()
                    .is_ok(),
                "{ok}"
            );
        }
        for bad in ["", "a b", "x eq 1) or (RowKey", "a'b", "p@odata.type", "1a"] {
            let f = Filter::compare("n", CmpOp::Eq, Value::Int32(1))
                .and(Filter::compare(bad, CmpOp::Eq, Value::Int32(1)).not());
            match f.validate() {
                Err(Error::Invalid { what, .. }) => {
                    assert_eq!(what, format!("filter property {bad:?}"));
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn key_conjuncts_are_split_from_the_rest() {
        let pk = Filter::compare("PartitionKey", CmpOp::Eq, Value::String("p".into()));
        let lo = Filter::compare("RowKey", CmpOp::Ge, Value::String("a".into()));
        let n = Filter::compare("n", CmpOp::Gt, Value::Int64(1));
        let either = Filter::compare("RowKey", CmpOp::Eq, Value::String("x".into()))
            .or(Filter::compare("m", CmpOp::Eq, Value::Int32(2)));
        let f = pk
            .clone()
            .and(lo.clone())
            .and(n.clone().and(either.clone()));
        let (keys, rest) = f.split_keys();
        assert_eq!(keys, Some(pk.clone().and(lo)));
        assert_eq!(rest, Some(n.clone().and(either)));
        assert_eq!(pk.split_keys(), (Some(pk.clone()), None));
        assert_eq!(n.split_keys(), (None, Some(n.clone())));
        let ts = Filter::compare(
            "Timestamp",
            CmpOp::Gt,
            Value::DateTime(datetime!(2024-01-01 0:00 UTC)),
        );
        let f = pk
            .and(n)
            .and(ts)
            .and(Filter::compare("n", CmpOp::Lt, Value::Int64(9)));
        assert_eq!(f.user_properties(), ["n"]);
    }

    #[test]
    fn evaluation_follows_service_typing() {
        let mut props = Properties::new();
        props.insert("n", Value::Int64(5));
        let row = Row {
            partition_key: "p",
            row_key: "r",
            timestamp: datetime!(2024-01-01 0:00 UTC),
            properties: &props,
        };
        assert!(Filter::compare("n", CmpOp::Eq, Value::Int64(5)).matches(&row));
        assert!(!Filter::compare("n", CmpOp::Eq, Value::Int32(5)).matches(&row));
        assert!(!Filter::compare("missing", CmpOp::Eq, Value::Int32(5)).matches(&row));
        assert!(
            Filter::compare("missing", CmpOp::Eq, Value::Int32(5))
                .not()
                .matches(&row)
        );
        assert!(Filter::compare("RowKey", CmpOp::Ge, Value::String("r".into())).matches(&row));
    }
}
