//! Reading `#[entity(...)]` attributes, as written, before any checking of how
//! they combine (that is [`crate::model`]'s job).
//!
//! A mistake in one attribute is recorded and parsing goes on, so every
//! mistake is reported in one compile.

use proc_macro2::Span;
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, ExprLit, Lit, LitInt, LitStr, Token};

use crate::errors::Errors;

/// What a field may say, for messages.
const FIELD_ATTRIBUTES: &str = "`partition_key`, `row_key`, `rename = \"...\"`, `skip`, `json`, `default`, `chunked`, `unique`, `index`, `expires_at` or `time_to_live = \"...\"`";

/// The names a field attribute may have.
const FIELD_NAMES: [&str; 11] = [
    "partition_key",
    "row_key",
    "rename",
    "skip",
    "json",
    "default",
    "chunked",
    "unique",
    "index",
    "expires_at",
    "time_to_live",
];

/// The container attribute: `#[entity(table = "Name")]`.
#[derive(Default)]
pub struct ContainerAttrs {
    /// `table = "Name"`, the literal as written.
    pub table: Option<LitStr>,
    /// Whether `table` was written at all (perhaps with a wrong value that
    /// was already reported).
    pub table_written: bool,
    /// `partition_key = "..."`: a constant partition key, not from a field.
    pub partition_key: Option<LitStr>,
    /// `row_key = "..."`: a constant row key, not from a field.
    pub row_key: Option<LitStr>,
    /// `drop_unknown_properties`: reads keep no properties the type does
    /// not know, so a replace removes them.
    pub drop_unknown: Flag,
}

/// `partition_key` or `row_key`, with its position when one is given.
pub struct KeyAttr {
    /// Where the attribute's name was written.
    pub span: Span,
    /// The position, for a key composed of several fields.
    pub position: Position,
}

/// The position of a key field.
pub enum Position {
    /// `row_key`: the key is this one field.
    None,
    /// `row_key = 1`: the position and its literal.
    At(usize, LitInt),
    /// A position that is not a number (already reported).
    Invalid,
}

/// A flag attribute such as `skip`: where it was written, if it was.
pub type Flag = Option<Span>;

/// Field attributes, as written.
#[derive(Default)]
pub struct FieldAttrs {
    /// `partition_key` or `partition_key = n`.
    pub partition_key: Option<KeyAttr>,
    /// `row_key` or `row_key = n`.
    pub row_key: Option<KeyAttr>,
    /// `rename = "Name"`.
    pub rename: Option<LitStr>,
    /// `skip`.
    pub skip: Flag,
    /// `json`.
    pub json: Flag,
    /// `default`.
    pub default: Flag,
    /// `chunked`.
    pub chunked: Flag,
    /// `unique`: an index whose values no two entities share.
    pub unique: Flag,
    /// `index`: a non-unique index.
    pub index: Flag,
    /// `expires_at`: the row expires at the field's instant.
    pub expires_at: Flag,
    /// `time_to_live = "30d"`: the row expires this long after the field's
    /// instant.
    pub time_to_live: Option<LitStr>,
}

impl FieldAttrs {
    /// The attributes that only make sense on a stored property, by name,
    /// with where they were written.
    pub fn property_attrs(&self) -> Vec<(&'static str, Span)> {
        let mut out = Vec::new();
        if let Some(rename) = &self.rename {
            out.push(("rename", rename.span()));
        }
        if let Some(span) = self.json {
            out.push(("json", span));
        }
        if let Some(span) = self.default {
            out.push(("default", span));
        }
        if let Some(span) = self.chunked {
            out.push(("chunked", span));
        }
        out
    }
}

fn is_entity(attr: &Attribute) -> bool {
    attr.path().is_ident("entity")
}

/// Consumes the value of an attribute that is being rejected, so parsing can
/// go on to the next one and report it too.
pub(crate) fn skip_value(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(Token![=]) {
        meta.value()?.parse::<Expr>()?;
    } else if meta.input.peek(syn::token::Paren) {
        let _content;
        syn::parenthesized!(_content in meta.input);
    }
    Ok(())
}

/// Parses `= <value>` and returns the value if it is a string literal; any
/// other value is reported at itself.
pub(crate) fn string_value(
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
    example: &str,
) -> syn::Result<Option<LitStr>> {
    let name = path_text(&meta.path);
    if !meta.input.peek(Token![=]) {
        errors.spanned(
            &meta.path,
            format!("`{name}` needs a value: `{name} = \"{example}\"`"),
        );
        return Ok(None);
    }
    match meta.value()?.parse::<Expr>()? {
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) => Ok(Some(lit)),
        other => {
            errors.spanned(
                other,
                format!("`{name}` takes a string literal: `{name} = \"{example}\"`"),
            );
            Ok(None)
        }
    }
}

/// Parses the optional `= n` of a key attribute.
fn key_position(
    meta: &ParseNestedMeta<'_>,
    errors: &mut Errors,
    name: &str,
) -> syn::Result<Position> {
    if !meta.input.peek(Token![=]) {
        return Ok(Position::None);
    }
    let value = meta.value()?.parse::<Expr>()?;
    if let Expr::Lit(ExprLit {
        lit: Lit::Int(lit), ..
    }) = &value
        && let Ok(n) = lit.base10_parse::<usize>()
    {
        return Ok(Position::At(n, lit.clone()));
    }
    errors.spanned(
        value,
        format!("a `{name}` position is a number from 0: `{name} = 0`, `{name} = 1`, ..."),
    );
    Ok(Position::Invalid)
}

fn duplicate(errors: &mut Errors, meta: &ParseNestedMeta<'_>) {
    errors.spanned(
        &meta.path,
        format!("duplicate `{}` attribute", path_text(&meta.path)),
    );
}

/// Reads the container's `#[entity(...)]` attributes.
pub fn container(attrs: &[Attribute], errors: &mut Errors) -> ContainerAttrs {
    let mut out = ContainerAttrs::default();
    for attr in attrs.iter().filter(|a| is_entity(a)) {
        let parsed = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("table") {
                let written_before = out.table_written;
                out.table_written = true;
                let lit = string_value(&meta, errors, "Accounts")?;
                if written_before {
                    duplicate(errors, &meta);
                } else {
                    out.table = lit;
                }
            } else if container_attr(&meta, &mut out, errors)? {
                // A constant key or `drop_unknown_properties` (crate::keys).
            } else {
                let name = path_text(&meta.path);
                errors.spanned(
                    &meta.path,
                    format!(
                        "unknown entity attribute `{name}`{}; on the struct, write `#[entity(table = \"...\")]`",
                        did_you_mean(&name, &CONTAINER_NAMES)
                    ),
                );
                skip_value(&meta)?;
            }
            Ok(())
        });
        if let Err(e) = parsed {
            errors.push(e);
        }
    }
    out
}

/// Reads one field's `#[entity(...)]` attributes.
pub fn field(attrs: &[Attribute], errors: &mut Errors) -> FieldAttrs {
    let mut out = FieldAttrs::default();
    for attr in attrs.iter().filter(|a| is_entity(a)) {
        let parsed = attr.parse_nested_meta(|meta| {
            let path = &meta.path;
            let name = path_text(path);
            match name.as_str() {
                "partition_key" | "row_key" => {
                    let position = key_position(&meta, errors, &name)?;
                    let slot = if name == "row_key" {
                        &mut out.row_key
                    } else {
                        &mut out.partition_key
                    };
                    if slot.is_some() {
                        duplicate(errors, &meta);
                    } else {
                        *slot = Some(KeyAttr {
                            span: path.span(),
                            position,
                        });
                    }
                }
                "rename" => {
                    let lit = string_value(&meta, errors, "Name")?;
                    if out.rename.is_some() {
                        duplicate(errors, &meta);
                    } else {
                        out.rename = lit;
                    }
                }
                "time_to_live" => {
                    let lit = string_value(&meta, errors, "30d")?;
                    if out.time_to_live.is_some() {
                        duplicate(errors, &meta);
                    } else {
                        out.time_to_live = lit;
                    }
                }
                "skip" | "json" | "default" | "chunked" | "unique" | "index" | "expires_at" => {
                    let slot = match name.as_str() {
                        "skip" => &mut out.skip,
                        "json" => &mut out.json,
                        "chunked" => &mut out.chunked,
                        "unique" => &mut out.unique,
                        "index" => &mut out.index,
                        "expires_at" => &mut out.expires_at,
                        _ => &mut out.default,
                    };
                    if slot.is_some() {
                        duplicate(errors, &meta);
                    } else {
                        *slot = Some(path.span());
                    }
                    if !meta.input.is_empty() && !meta.input.peek(Token![,]) {
                        errors.spanned(path, format!("`{name}` takes no value: write `#[entity({name})]`"));
                        skip_value(&meta)?;
                    }
                }
                _ => {
                    errors.spanned(
                        path,
                        format!(
                            "unknown entity attribute `{name}`{}; on a field, write {FIELD_ATTRIBUTES}",
                            did_you_mean(&name, &FIELD_NAMES)
                        ),
                    );
                    skip_value(&meta)?;
                }
            }
            Ok(())
        });
        if let Err(e) = parsed {
            errors.push(e);
        }
    }
    out
}

pub(crate) fn path_text(path: &syn::Path) -> String {
    let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    segments.join("::")
}

/// ` (did you mean `x`?)` for a close known name, else nothing.
pub(crate) fn did_you_mean(name: &str, known: &[&str]) -> String {
    known
        .iter()
        .map(|k| (edit_distance(name, k), k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| format!(" (did you mean `{k}`?)"))
        .unwrap_or_default()
}

/// Levenshtein distance, counting an adjacent swap as one edit.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // d[i][j]: distance between a[..i] and b[..j].
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// The names a container attribute may have, for suggestions.
pub const CONTAINER_NAMES: [&str; 4] = [
    "table",
    "partition_key",
    "row_key",
    "drop_unknown_properties",
];

/// Reads the container attributes of the keys (constant keys) and of
/// unknown properties; `false` when `meta` is none of them.
pub fn container_attr(
    meta: &ParseNestedMeta<'_>,
    out: &mut ContainerAttrs,
    errors: &mut Errors,
) -> syn::Result<bool> {
    let name = path_text(&meta.path);
    match name.as_str() {
        "partition_key" | "row_key" => {
            let example = if name == "row_key" { "profile" } else { "all" };
            let lit = string_value(meta, errors, example)?;
            let slot = if name == "row_key" {
                &mut out.row_key
            } else {
                &mut out.partition_key
            };
            if slot.is_some() {
                errors.spanned(&meta.path, format!("duplicate `{name}` attribute"));
            } else {
                *slot = lit;
            }
            Ok(true)
        }
        "drop_unknown_properties" => {
            if out.drop_unknown.is_some() {
                errors.spanned(&meta.path, format!("duplicate `{name}` attribute"));
            }
            out.drop_unknown = Some(meta.path.span());
            if !meta.input.is_empty() && !meta.input.peek(syn::Token![,]) {
                errors.spanned(
                    &meta.path,
                    format!("`{name}` takes no value: write `#[entity({name})]`"),
                );
                skip_value(meta)?;
            }
            Ok(true)
        }
        _ => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_for_near_misses_only() {
        assert_eq!(edit_distance("tabel", "table"), 1);
        assert_eq!(edit_distance("renamed", "rename"), 1);
        assert_eq!(
            did_you_mean("rowkey", &FIELD_NAMES),
            " (did you mean `row_key`?)"
        );
        assert_eq!(did_you_mean("primary", &FIELD_NAMES), "");
    }
}
