//! Reading `#[entity(...)]` attributes, as written, before any checking of how
//! they combine (that is [`crate::model`]'s job).

use proc_macro2::Span;
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;
use syn::{Attribute, LitInt, LitStr, Token};

use crate::errors::Errors;

const FIELD_ATTRIBUTES: &str =
    "`partition_key`, `row_key`, `rename = \"...\"`, `skip`, `json` or `default`";

/// The container attribute: `#[entity(table = "Name")]`.
#[derive(Default)]
pub struct ContainerAttrs {
    /// `table = "Name"`, the literal as written.
    pub table: Option<LitStr>,
}

/// `partition_key` or `row_key`, with its position when one is given.
pub struct KeyAttr {
    /// Where the attribute's name was written.
    pub span: Span,
    /// `row_key = 1`: the position and its literal.
    pub position: Option<(usize, LitInt)>,
}

/// A flag attribute such as `skip`: where it was written.
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
}

impl FieldAttrs {
    /// The attributes other than the keys that were given, by name, for
    /// messages about combinations.
    pub fn storage_attrs(&self) -> Vec<(&'static str, Span)> {
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
        out
    }
}

fn is_entity(attr: &Attribute) -> bool {
    attr.path().is_ident("entity")
}

/// Consumes the value of an attribute that is being rejected, so parsing can
/// go on to the next one and report it too.
fn skip_value(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(Token![=]) {
        meta.value()?.parse::<syn::Expr>()?;
    } else if meta.input.peek(syn::token::Paren) {
        let _content;
        syn::parenthesized!(_content in meta.input);
    }
    Ok(())
}

fn duplicate(errors: &mut Errors, meta: &ParseNestedMeta<'_>, name: &str) {
    errors.spanned(&meta.path, format!("duplicate `{name}` attribute"));
}

/// Reads the container's `#[entity(...)]` attributes.
pub fn container(attrs: &[Attribute], errors: &mut Errors) -> ContainerAttrs {
    let mut out = ContainerAttrs::default();
    for attr in attrs.iter().filter(|a| is_entity(a)) {
        let parsed = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("table") {
                let lit: LitStr = meta.value()?.parse()?;
                if out.table.is_some() {
                    duplicate(errors, &meta, "table");
                } else {
                    out.table = Some(lit);
                }
            } else {
                errors.spanned(
                    &meta.path,
                    format!(
                        "unknown entity attribute `{}`; on the struct, write `#[entity(table = \"...\")]`",
                        path_text(&meta.path)
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
            if path.is_ident("partition_key") || path.is_ident("row_key") {
                let name = if path.is_ident("row_key") {
                    "row_key"
                } else {
                    "partition_key"
                };
                let position = if meta.input.peek(Token![=]) {
                    let lit: LitInt = meta.value()?.parse()?;
                    match lit.base10_parse::<usize>() {
                        Ok(n) => Some((n, lit)),
                        Err(_) => {
                            errors.spanned(
                                &lit,
                                format!("a `{name}` position is a number: 0, 1, 2, ..."),
                            );
                            None
                        }
                    }
                } else {
                    None
                };
                let span = path.span();
                let slot = if name == "row_key" {
                    &mut out.row_key
                } else {
                    &mut out.partition_key
                };
                if slot.is_some() {
                    duplicate(errors, &meta, name);
                } else {
                    *slot = Some(KeyAttr { span, position });
                }
            } else if path.is_ident("rename") {
                let lit: LitStr = meta.value()?.parse()?;
                if out.rename.is_some() {
                    duplicate(errors, &meta, "rename");
                } else {
                    out.rename = Some(lit);
                }
            } else if let Some((name, slot)) = [
                ("skip", &mut out.skip),
                ("json", &mut out.json),
                ("default", &mut out.default),
            ]
            .into_iter()
            .find(|(name, _)| path.is_ident(name))
            {
                if slot.is_some() {
                    duplicate(errors, &meta, name);
                } else {
                    *slot = Some(path.span());
                }
                if !meta.input.is_empty() && !meta.input.peek(Token![,]) {
                    errors.spanned(path, format!("`{name}` takes no value"));
                    skip_value(&meta)?;
                }
            } else {
                errors.spanned(
                    path,
                    format!(
                        "unknown entity attribute `{}`; on a field, write {FIELD_ATTRIBUTES}",
                        path_text(path)
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

fn path_text(path: &syn::Path) -> String {
    let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    segments.join("::")
}
