//! Writing an entity's JSON body: [`EntityBody`], the one encoder. The text
//! is that of the JSON object a `serde_json::Map` of the keys and properties
//! would be (map order, a later entry of a name replacing an earlier one).

use std::borrow::Cow;
use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value as Json};
use uuid::Uuid;

use crate::datetime;
use crate::entity::{EntityData, Properties, Value};
use crate::error::{Error, Result};

/// What follows a property's name in the key of its type annotation.
pub(super) const ANNOTATION: &str = "@odata.type";

/// An entity's request body: `PartitionKey`, `RowKey` and every property, those
/// the service cannot infer followed by their `name@odata.type` annotation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EntityBody<'a> {
    partition_key: &'a str,
    row_key: &'a str,
    properties: &'a Properties,
}

/// The value of one entry of a body.
#[derive(Clone, Copy)]
enum Entry<'a> {
    /// A key's value or a type annotation: a JSON string.
    Text(&'a str),
    /// A property's value.
    Value(&'a Value),
}

impl<'a> EntityBody<'a> {
    pub(crate) fn new(
        partition_key: &'a str,
        row_key: &'a str,
        properties: &'a Properties,
    ) -> Self {
        EntityBody {
            partition_key,
            row_key,
            properties,
        }
    }

    pub(crate) fn of(data: &'a EntityData) -> Self {
        Self::new(
            data.partition_key.as_str(),
            data.row_key.as_str(),
            &data.properties,
        )
    }

    /// The body text; [`Error::Invalid`] if a value cannot be written (none
    /// fails).
    pub(crate) fn to_text(self) -> Result<String> {
        let mut out = String::with_capacity(self.text_len_bound(1));
        self.write(&mut out)?;
        Ok(out)
    }

    /// The length in bytes of [`EntityBody::to_text`], without writing the text
    /// (what batch sizes count).
    pub(crate) fn text_len(self) -> Result<usize> {
        let mut count = Count(0);
        self.write(&mut count)?;
        Ok(count.0)
    }

    /// From the lengths of names and values alone, each byte of text
    /// escaped to `escape` bytes: with 6, at least [`EntityBody::text_len`];
    /// with 1, that length when nothing needs an escape (to size a buffer).
    pub(crate) fn text_len_bound(self, escape: usize) -> usize {
        // `"` + name escaped + `":`, with the comma before it.
        let key = |name: &str| escape * name.len() + 4;
        let value = |v: &Value| match v {
            Value::String(s) => escape * s.len() + 2,
            Value::Boolean(_) => 5,
            Value::Int32(_) => 11,
            Value::Int64(_) => 22,
            // The longest shortest-round-trip double, or a quoted
            // `-Infinity`.
            Value::Double(_) => 24,
            Value::DateTime(_) => 40,
            Value::Guid(_) => 38,
            Value::Binary(b) => b.len().div_ceil(3) * 4 + 2,
        };
        let properties: usize = self
            .properties
            .iter()
            .map(|(name, v)| {
                let annotation = if needs_annotation(v) {
                    key(name) + ANNOTATION.len() + v.edm_type().odata_name().len() + 2
                } else {
                    0
                };
                key(name) + value(v) + annotation
            })
            .sum();
        2 + key("PartitionKey")
            + escape * self.partition_key.len()
            + 2
            + key("RowKey")
            + escape * self.row_key.len()
            + 2
            + properties
    }

    fn write(&self, out: &mut impl Sink) -> Result<()> {
        let written = if self.streams_in_map_order() {
            self.write_merged(out)
        } else {
            self.write_in_map_order(out)
        };
        written.map_err(|e| {
            Error::invalid(
                format!(
                    "entity ({}, {})",
                    crate::key::shorten(self.partition_key),
                    crate::key::shorten(self.row_key)
                ),
                format!("cannot write its JSON: {e}"),
            )
        })
    }

    /// The body text with every non-ASCII character as a `\uXXXX` escape: the
    /// same JSON value, in ASCII. Single-entity writes go this way because
    /// Azurite decodes a body chunk by chunk, so a character split between
    /// chunks came back as U+FFFD; escapes read the same however the body is
    /// cut. Sizes count the stored data, not the text.
    #[cfg(any(test, feature = "azure"))]
    pub(crate) fn to_ascii_text(self) -> Result<String> {
        let text = self.to_text()?;
        Ok(escape_non_ascii(&text).unwrap_or(text))
    }

    /// The body as a JSON object: its text, read back (a double reads back
    /// to the same bits: serde_json's `float_roundtrip`).
    pub(crate) fn to_map(self) -> Map<String, Json> {
        self.to_text()
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default()
    }

    /// Whether writing keys and properties merged by name, each annotation
    /// right after its property, is the order of a `serde_json::Map` with no
    /// key twice. False only for unusual names (a key name, one holding `@`, or
    /// one continuing an annotated name with a character below `@`).
    fn streams_in_map_order(&self) -> bool {
        let fixed = ["PartitionKey", "RowKey"];
        let mut f = 0;
        let mut props = self.properties.iter().peekable();
        while let Some((name, value)) = props.next() {
            if name.contains('@') || fixed.contains(&name) {
                return false;
            }
            while f < fixed.len() && fixed[f] < name {
                f += 1;
            }
            if needs_annotation(value) {
                let next_prop = props.peek().map(|(n, _)| *n);
                let next_fixed = fixed.get(f).copied();
                for next in [next_prop, next_fixed].into_iter().flatten() {
                    if !after_annotation(next, name) {
                        return false;
                    }
                }
            }
        }
        true
    }

    /// Writes the body with the keys merged into the property names, each
    /// annotation right after its property.
    fn write_merged(&self, out: &mut impl Sink) -> std::result::Result<(), String> {
        let fixed = [
            ("PartitionKey", self.partition_key),
            ("RowKey", self.row_key),
        ];
        let mut f = 0;
        let mut first = true;
        out.push('{');
        for (name, value) in self.properties.iter() {
            while f < fixed.len() && fixed[f].0 < name {
                write_entry(out, &mut first, fixed[f].0, false, Entry::Text(fixed[f].1))?;
                f += 1;
            }
            write_entry(out, &mut first, name, false, Entry::Value(value))?;
            if needs_annotation(value) {
                let annotation = value.edm_type().odata_name();
                write_entry(out, &mut first, name, true, Entry::Text(annotation))?;
            }
        }
        for (key, value) in &fixed[f..] {
            write_entry(out, &mut first, key, false, Entry::Text(value))?;
        }
        out.push('}');
        Ok(())
    }

    /// Writes the body as the map its entries make (a later entry of a name
    /// replacing an earlier one), sorted by name.
    fn write_in_map_order(&self, out: &mut impl Sink) -> std::result::Result<(), String> {
        let mut map: BTreeMap<Cow<'_, str>, Entry<'_>> = BTreeMap::new();
        map.insert("PartitionKey".into(), Entry::Text(self.partition_key));
        map.insert("RowKey".into(), Entry::Text(self.row_key));
        for (name, value) in self.properties.iter() {
            map.insert(name.into(), Entry::Value(value));
            if needs_annotation(value) {
                let annotation = value.edm_type().odata_name();
                map.insert(
                    format!("{name}{ANNOTATION}").into(),
                    Entry::Text(annotation),
                );
            }
        }
        let mut first = true;
        out.push('{');
        for (key, entry) in map {
            write_entry(out, &mut first, &key, false, entry)?;
        }
        out.push('}');
        Ok(())
    }
}

/// Whether a value is written with an `@odata.type` annotation.
fn needs_annotation(value: &Value) -> bool {
    !matches!(
        value,
        Value::String(_) | Value::Boolean(_) | Value::Int32(_)
    )
}

/// Whether `next` (a key greater than `name`) sorts after `name@odata.type`.
fn after_annotation(next: &str, name: &str) -> bool {
    match next.strip_prefix(name) {
        Some(rest) => rest > ANNOTATION,
        None => true,
    }
}

/// Where body text goes: a `String`, or a [`Count`] of its bytes.
trait Sink {
    fn push(&mut self, c: char);
    fn push_str(&mut self, s: &str);
    fn push_ascii(&mut self, b: u8) {
        self.push(char::from(b));
    }
    /// `bytes` in standard base64 with padding.
    fn push_base64(&mut self, bytes: &[u8]);
}

impl Sink for String {
    fn push(&mut self, c: char) {
        String::push(self, c);
    }
    fn push_str(&mut self, s: &str) {
        String::push_str(self, s);
    }
    fn push_base64(&mut self, bytes: &[u8]) {
        BASE64.encode_string(bytes, self);
    }
}

/// Counts the bytes of the text instead of keeping it.
struct Count(usize);

impl Sink for Count {
    fn push(&mut self, c: char) {
        self.0 += c.len_utf8();
    }
    fn push_str(&mut self, s: &str) {
        self.0 += s.len();
    }
    fn push_ascii(&mut self, _: u8) {
        self.0 += 1;
    }
    fn push_base64(&mut self, bytes: &[u8]) {
        self.0 += bytes.len().div_ceil(3) * 4;
    }
}

/// Writes one entry, after a comma unless it is the first: its key (`key`
/// escaped as serde_json escapes it, then [`ANNOTATION`] when `annotation`)
/// and its value.
#[inline]
fn write_entry(
    out: &mut impl Sink,
    first: &mut bool,
    key: &str,
    annotation: bool,
    entry: Entry<'_>,
) -> std::result::Result<(), String> {
    if !*first {
        out.push(',');
    }
    *first = false;
    out.push('"');
    write_json_str_body(out, key);
    if annotation {
        out.push_str(ANNOTATION);
    }
    out.push_str("\":");
    match entry {
        Entry::Text(text) => write_json_str(out, text),
        Entry::Value(value) => write_value(out, value)?,
    }
    Ok(())
}

/// Writes `s` as a JSON string, escaped as serde_json escapes it.
fn write_json_str(out: &mut impl Sink, s: &str) {
    out.push('"');
    write_json_str_body(out, s);
    out.push('"');
}

/// The inside of [`write_json_str`], escaped as serde_json escapes: `"`, `\`
/// and controls below U+0020 (`\b \t \n \f \r` by name, others as `\u00xx`).
fn write_json_str_body(out: &mut impl Sink, s: &str) {
    let needs_escape = |b: u8| b < 0x20 || b == b'"' || b == b'\\';
    if !s.bytes().any(needs_escape) {
        out.push_str(s);
        return;
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        if !needs_escape(b) {
            continue;
        }
        // Escaped bytes are ASCII, so `start..i` lies on character bounds.
        out.push_str(s.get(start..i).unwrap_or_default());
        start = i + 1;
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x08 => out.push_str("\\b"),
            0x0C => out.push_str("\\f"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            _ => {
                out.push_str("\\u00");
                out.push_ascii(HEX[usize::from(b >> 4)]);
                out.push_ascii(HEX[usize::from(b & 0xF)]);
            }
        }
    }
    out.push_str(s.get(start..).unwrap_or_default());
}

/// `json` with every non-ASCII character written as `\uXXXX` (two for one
/// outside the BMP); `None` when it is ASCII already. Such characters stand
/// only inside strings, where the escape means the same.
#[cfg(any(test, feature = "azure"))]
pub(super) fn escape_non_ascii(json: &str) -> Option<String> {
    if json.is_ascii() {
        return None;
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let extra: usize = json
        .chars()
        .filter(|c| !c.is_ascii())
        .map(|c| 6 * c.len_utf16() - c.len_utf8())
        .sum();
    let mut out = String::with_capacity(json.len() + extra);
    let mut units = [0u16; 2];
    for c in json.chars() {
        if c.is_ascii() {
            out.push(c);
            continue;
        }
        for &unit in c.encode_utf16(&mut units).iter() {
            out.push_str("\\u");
            for shift in [12, 8, 4, 0] {
                out.push(char::from(HEX[usize::from((unit >> shift) & 0xF)]));
            }
        }
    }
    Some(out)
}

/// Writes a property value (without its annotation), in the forms the module
/// doc of `wire` gives.
fn write_value(out: &mut impl Sink, value: &Value) -> std::result::Result<(), String> {
    match value {
        Value::String(v) => write_json_str(out, v),
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int32(i) => write_number(out, i)?,
        Value::Int64(i) => {
            out.push('"');
            write_number(out, i)?;
            out.push('"');
        }
        Value::Double(d) if d.is_finite() => write_number(out, d)?,
        Value::Double(d) if d.is_nan() => out.push_str("\"NaN\""),
        Value::Double(d) if *d > 0.0 => out.push_str("\"Infinity\""),
        Value::Double(_) => out.push_str("\"-Infinity\""),
        Value::DateTime(t) => {
            let mut buf = [0u8; 28];
            match datetime::format_into(*t, &mut buf) {
                Some(text) => write_json_str(out, text),
                None => write_json_str(out, &datetime::format(*t)),
            }
        }
        Value::Guid(g) => {
            write_json_str(out, g.hyphenated().encode_lower(&mut Uuid::encode_buffer()));
        }
        Value::Binary(b) => {
            out.push('"');
            out.push_base64(b);
            out.push('"');
        }
    }
    Ok(())
}

/// Writes a number as serde_json writes it (a double in its shortest
/// round-trip form), through a buffer on the stack.
fn write_number(out: &mut impl Sink, n: &impl serde::Serialize) -> std::result::Result<(), String> {
    let mut buf = [0u8; 40];
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    serde_json::to_writer(&mut cursor, n).map_err(|e| e.to_string())?;
    let n = usize::try_from(cursor.position()).map_err(|e| e.to_string())?;
    let text = buf.get(..n).unwrap_or_default();
    out.push_str(std::str::from_utf8(text).map_err(|e| e.to_string())?);
    Ok(())
}
