//! The checks behind the fuzz targets, shared with the stable smoke test in
//! `tests/it/properties.rs` (which includes this file as a module). Each takes
//! arbitrary bytes and panics only when leasehold misbehaves.

use leasehold::__private::{wire_body, wire_read};
use leasehold::entity::Value;
use leasehold::key::CompositeKey;
use leasehold::query::{CmpOp, Filter};
use serde_json::{Map, Value as Json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use time::macros::datetime;

/// The earliest and latest `Edm.DateTime` the service stores.
const MIN_DATE_TIME: OffsetDateTime = datetime!(1601-01-01 00:00:00 UTC);
const MAX_DATE_TIME: OffsetDateTime = datetime!(9999-12-31 23:59:59.9999999 UTC);

/// The entity wire codec (the JSON body the Azure backend writes and reads;
/// reached through leasehold's hidden `__private` hooks) on arbitrary bytes:
/// reading never panics, and an entity that reads writes back to a body
/// that reads as the same entity.
pub fn wire_codec(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok((partition_key, row_key, properties)) = wire_read("Fuzz", text) else {
        return;
    };
    let written = wire_body(&partition_key, &row_key, &properties).expect("writes");
    let again = wire_read("Fuzz", &written).expect("written JSON reads back");
    assert_eq!(again.0, partition_key);
    assert_eq!(again.1, row_key);
    assert_eq!(again.2, properties);
    // The body is a JSON object.
    let Ok(Json::Object(_)) = serde_json::from_str::<Json>(&written) else {
        panic!("written JSON is an object");
    };
}

/// As [`wire_codec`], on an already parsed JSON object.
pub fn wire_codec_json(json: &Map<String, Json>) {
    let text = serde_json::to_vec(json).expect("serialises");
    wire_codec(&text);
}

/// Whether `c` is a character the service forbids in keys: `/ \ # ?` and
/// control characters.
fn is_forbidden_key_char(c: char) -> bool {
    matches!(c, '/' | '\\' | '#' | '?' | '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
}

/// Composite keys on arbitrary text: splitting never panics; what splits
/// joins and splits to the same parts; parts made from the bytes (split at
/// 0xFF) join into a key without forbidden characters that splits back.
pub fn composite_key(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(parts) = CompositeKey::split(&text) {
        let joined = CompositeKey::join(parts.iter().map(String::as_str));
        assert_eq!(CompositeKey::split(&joined).as_ref(), Ok(&parts));
    }
    let parts: Vec<String> = data
        .split(|&b| b == 0xff)
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    let joined = CompositeKey::join(parts.iter().map(String::as_str));
    assert!(
        !joined.chars().any(is_forbidden_key_char),
        "forbidden character in {joined:?}"
    );
    assert_eq!(CompositeKey::split(&joined), Ok(parts));
}

/// Filters built from arbitrary bytes: validation never panics, and the
/// rendered OData has balanced parentheses, well-formed quotes, one
/// operator per comparison, and parses back to the same filter.
pub fn filter_rendering(data: &[u8]) {
    let mut bytes = Bytes(data);
    let filter = filter_from_bytes(&mut bytes, 0);
    let _ = filter.validate();
    check_rendering(&filter);
}

/// The rendering checks of [`filter_rendering`] on a given filter (whose
/// literals the service can spell: finite doubles, in-range date-times).
pub fn check_rendering(filter: &Filter) {
    let text = filter.to_odata();
    let mut depth = 0i64;
    let mut quoted = false;
    let mut outside = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if quoted {
            if c == '\'' {
                if chars.peek() == Some(&'\'') {
                    chars.next();
                } else {
                    quoted = false;
                }
            }
            continue;
        }
        match c {
            '\'' => quoted = true,
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                assert!(depth >= 0, "unbalanced `)` in {text}");
            }
            _ => {}
        }
        outside.push(c);
    }
    assert!(!quoted, "unterminated quote in {text}");
    assert_eq!(depth, 0, "unbalanced parentheses in {text}");
    let operators = outside
        .split(' ')
        .filter(|w| matches!(*w, "eq" | "ne" | "gt" | "ge" | "lt" | "le"))
        .count();
    assert_eq!(operators, filter.comparisons(), "in {text}");
    assert_eq!(
        parse_odata(&text).as_ref(),
        Ok(filter),
        "does not parse back: {text}"
    );
}

/// Property names filters are built with (keys, Timestamp, user names).
pub const NAMES: [&str; 6] = [
    "PartitionKey",
    "RowKey",
    "Timestamp",
    "n",
    "note_2",
    "Größe",
];

struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        for b in &mut out {
            *b = self.byte();
        }
        out
    }
    fn text(&mut self) -> String {
        let len = usize::from(self.byte() % 16);
        let raw: Vec<u8> = (0..len).map(|_| self.byte()).collect();
        String::from_utf8_lossy(&raw).into_owned()
    }
}

fn filter_from_bytes(b: &mut Bytes<'_>, depth: u32) -> Filter {
    let choice = if depth >= 5 { 0 } else { b.byte() % 5 };
    match choice {
        1 => filter_from_bytes(b, depth + 1).and(filter_from_bytes(b, depth + 1)),
        2 => filter_from_bytes(b, depth + 1).or(filter_from_bytes(b, depth + 1)),
        3 => filter_from_bytes(b, depth + 1).not(),
        _ => {
            let name = NAMES[usize::from(b.byte()) % NAMES.len()];
            let op = [
                CmpOp::Eq,
                CmpOp::Ne,
                CmpOp::Gt,
                CmpOp::Ge,
                CmpOp::Lt,
                CmpOp::Le,
            ][usize::from(b.byte() % 6)];
            Filter::compare(name, op, value_from_bytes(b))
        }
    }
}

fn value_from_bytes(b: &mut Bytes<'_>) -> Value {
    match b.byte() % 8 {
        0 => Value::String(b.text()),
        1 => Value::Boolean(b.byte() % 2 == 1),
        2 => Value::Int32(i32::from_le_bytes(b.take())),
        3 => Value::Int64(i64::from_le_bytes(b.take())),
        4 => {
            let d = f64::from_le_bytes(b.take());
            Value::Double(if d.is_finite() { d } else { 0.5 })
        }
        5 => {
            let span = MAX_DATE_TIME.unix_timestamp() - MIN_DATE_TIME.unix_timestamp();
            let secs = i64::from_le_bytes(b.take()).rem_euclid(span + 1);
            let ticks = u32::from_le_bytes(b.take()) % 10_000_000;
            let t = MIN_DATE_TIME + time::Duration::seconds(secs);
            let t = t.replace_nanosecond(ticks * 100).unwrap_or(t);
            Value::DateTime(t)
        }
        6 => Value::Guid(uuid::Uuid::from_bytes(b.take())),
        _ => {
            let len = usize::from(b.byte() % 8);
            Value::Binary((0..len).map(|_| b.byte()).collect())
        }
    }
}

/// Parses the OData that [`Filter::to_odata`] writes back into a filter.
///
/// # Errors
/// A message saying where the text stops making sense.
pub fn parse_odata(text: &str) -> Result<Filter, String> {
    let mut p = Parser { rest: text };
    let f = p.expr()?;
    if p.rest.is_empty() {
        Ok(f)
    } else {
        Err(format!("trailing text {:?}", p.rest))
    }
}

struct Parser<'a> {
    rest: &'a str,
}

impl Parser<'_> {
    fn eat(&mut self, s: &str) -> bool {
        match self.rest.strip_prefix(s) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    fn expect(&mut self, s: &str) -> Result<(), String> {
        if self.eat(s) {
            Ok(())
        } else {
            Err(format!("expected {s:?} at {:?}", self.rest))
        }
    }

    fn group(&mut self) -> Result<Filter, String> {
        self.expect("(")?;
        let f = self.expr()?;
        self.expect(")")?;
        Ok(f)
    }

    fn expr(&mut self) -> Result<Filter, String> {
        if self.eat("not ") {
            return Ok(self.group()?.not());
        }
        if self.rest.starts_with('(') {
            let left = self.group()?;
            return if self.eat(" and ") {
                Ok(left.and(self.group()?))
            } else if self.eat(" or ") {
                Ok(left.or(self.group()?))
            } else {
                Err(format!("expected and/or at {:?}", self.rest))
            };
        }
        let (name, rest) = self.rest.split_once(' ').ok_or("expected a property")?;
        let (op, rest) = rest.split_once(' ').ok_or("expected an operator")?;
        let op = match op {
            "eq" => CmpOp::Eq,
            "ne" => CmpOp::Ne,
            "gt" => CmpOp::Gt,
            "ge" => CmpOp::Ge,
            "lt" => CmpOp::Lt,
            "le" => CmpOp::Le,
            other => return Err(format!("unknown operator {other:?}")),
        };
        self.rest = rest;
        let value = self.literal()?;
        Ok(Filter::compare(name, op, value))
    }

    /// The text of a quoted literal (the opening quote already eaten), with
    /// doubled quotes undone.
    fn quoted(&mut self) -> Result<String, String> {
        let mut out = String::new();
        let mut chars = self.rest.char_indices();
        while let Some((i, c)) = chars.next() {
            if c == '\'' {
                if self.rest[i + 1..].starts_with('\'') {
                    chars.next();
                    out.push('\'');
                } else {
                    self.rest = &self.rest[i + 1..];
                    return Ok(out);
                }
            } else {
                out.push(c);
            }
        }
        Err("unterminated quote".into())
    }

    fn literal(&mut self) -> Result<Value, String> {
        if self.eat("'") {
            return Ok(Value::String(self.quoted()?));
        }
        if self.eat("datetime'") {
            let text = self.quoted()?;
            return OffsetDateTime::parse(&text, &Rfc3339)
                .map(Value::DateTime)
                .map_err(|e| format!("{text:?}: {e}"));
        }
        if self.eat("guid'") {
            let s = self.quoted()?;
            return uuid::Uuid::parse_str(&s)
                .map(Value::Guid)
                .map_err(|e| e.to_string());
        }
        if self.eat("X'") {
            let s = self.quoted()?;
            return (0..s.len() / 2)
                .map(|i| u8::from_str_radix(s.get(2 * i..2 * i + 2).unwrap_or("?"), 16))
                .collect::<Result<Vec<u8>, _>>()
                .map(Value::Binary)
                .map_err(|e| e.to_string());
        }
        if self.eat("true") {
            return Ok(Value::Boolean(true));
        }
        if self.eat("false") {
            return Ok(Value::Boolean(false));
        }
        let end = self
            .rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '+' | '.')))
            .unwrap_or(self.rest.len());
        let token = &self.rest[..end];
        self.rest = &self.rest[end..];
        if let Some(int) = token.strip_suffix('L') {
            int.parse()
                .map(Value::Int64)
                .map_err(|e| format!("{token}: {e}"))
        } else if token.contains(['.', 'E']) {
            token
                .parse()
                .map(Value::Double)
                .map_err(|e| format!("{token}: {e}"))
        } else {
            token
                .parse()
                .map(Value::Int32)
                .map_err(|e| format!("{token}: {e}"))
        }
    }
}
