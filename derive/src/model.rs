//! The validated model of an entity, as [`build`](crate::build) makes it
//! (checking every rule that can be checked at compile time), so code
//! generation can trust its input.

use syn::{Ident, Type, Visibility};

/// Which key a key field feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// `PartitionKey`
    Partition,
    /// `RowKey`
    Row,
}

impl KeyKind {
    /// The attribute that marks the key's fields.
    pub fn attr(self) -> &'static str {
        match self {
            KeyKind::Partition => "partition_key",
            KeyKind::Row => "row_key",
        }
    }

    /// The key in prose.
    pub fn noun(self) -> &'static str {
        match self {
            KeyKind::Partition => "partition key",
            KeyKind::Row => "row key",
        }
    }

    /// The name the service stores the key under.
    pub fn property(self) -> &'static str {
        match self {
            KeyKind::Partition => "PartitionKey",
            KeyKind::Row => "RowKey",
        }
    }
}

/// A validated `#[derive(Entity)]` input.
pub struct Model<'a> {
    /// The struct's name.
    pub ident: &'a Ident,
    /// The struct's visibility, shared by the generated column set.
    pub vis: &'a Visibility,
    /// The table name, valid by the service's rule.
    pub table: String,
    /// Every field, in declaration order.
    pub fields: Vec<Field<'a>>,
    /// The partition key's fields, as indexes into `fields`, in key order.
    pub partition_key: Vec<usize>,
    /// The row key's fields, as indexes into `fields`, in key order.
    pub row_key: Vec<usize>,
    /// The indexed fields (`#[entity(unique)]`, `#[entity(index)]`).
    pub indexes: Vec<Index>,
    /// `#[entity(partition_key = "...")]`: a constant partition key.
    pub partition_key_const: Option<String>,
    /// `#[entity(row_key = "...")]`: a constant row key.
    pub row_key_const: Option<String>,
    /// `#[entity(drop_unknown_properties)]`.
    pub drop_unknown: bool,
    /// The field declared `expires_at` or `time_to_live`.
    pub expiry: Option<Expiry>,
}

/// The entity's expiry field.
pub struct Expiry {
    /// The field, as an index into [`Model::fields`].
    pub field: usize,
    /// `time_to_live = "..."`: the seconds after the field's instant;
    /// `None` for `expires_at` (the field's instant itself).
    pub ttl_seconds: Option<u64>,
}

/// One indexed field.
pub struct Index {
    /// The field, as an index into [`Model::fields`].
    pub field: usize,
    /// `unique` rather than `index`.
    pub unique: bool,
}

/// One field and what it is stored as.
pub struct Field<'a> {
    /// The field's name.
    pub ident: &'a Ident,
    /// The field's type, as written.
    pub ty: &'a Type,
    /// How the field is stored.
    pub role: Role,
}

/// How a field is stored.
pub enum Role {
    /// (Part of) a key: not a property.
    Key {
        /// Which key.
        kind: KeyKind,
        /// The field's place among the key's parts (0 for a one-field key).
        position: usize,
    },
    /// A property.
    Property(Property),
    /// Not stored; `Default::default()` on read.
    Skip,
}

/// A stored property.
pub struct Property {
    /// The stored name: the field's name or its `rename`.
    pub name: String,
    /// `#[entity(json)]`: stored as a JSON string.
    pub json: bool,
    /// `#[entity(default)]`: a missing property reads as the default.
    pub default: bool,
    /// `#[entity(chunked)]`: stored across numbered properties.
    pub chunked: bool,
}

/// A field name as stored: without its `r#` prefix.
pub fn unraw(ident: &Ident) -> String {
    let name = ident.to_string();
    match name.strip_prefix("r#") {
        Some(rest) => rest.to_owned(),
        None => name,
    }
}

/// Whether `ty` is written as the standard `String`.
pub fn is_string(ty: &Type) -> bool {
    let Type::Path(path) = ty else { return false };
    if path.qself.is_some() {
        return false;
    }
    let segments: Vec<String> = path
        .path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    let args_free = path.path.segments.iter().all(|s| s.arguments.is_none());
    args_free
        && matches!(
            segments
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .as_slice(),
            ["String"] | ["std" | "alloc", "string", "String"]
        )
}

/// The `T` of a type written as `Option<T>` (or `std::option::Option<T>`),
/// or the type itself.
pub fn strip_option(ty: &Type) -> &Type {
    let Type::Path(path) = ty else { return ty };
    if path.qself.is_some() {
        return ty;
    }
    let names: Vec<String> = path
        .path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    let is_option = matches!(
        names
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice(),
        ["Option"] | ["std" | "core", "option", "Option"]
    );
    if !is_option {
        return ty;
    }
    let Some(last) = path.path.segments.last() else {
        return ty;
    };
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return ty;
    };
    match args.args.iter().collect::<Vec<_>>().as_slice() {
        [syn::GenericArgument::Type(inner)] => inner,
        _ => ty,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_only_an_outer_option() {
        let ty: Type = syn::parse_quote!(Option<Vec<u8>>);
        let inner: Type = syn::parse_quote!(Vec<u8>);
        assert_eq!(strip_option(&ty), &inner);
        let ty: Type = syn::parse_quote!(::std::option::Option<i64>);
        let inner: Type = syn::parse_quote!(i64);
        assert_eq!(strip_option(&ty), &inner);
        let ty: Type = syn::parse_quote!(Vec<Option<u8>>);
        assert_eq!(strip_option(&ty), &ty);
    }

    #[test]
    fn recognises_string() {
        for yes in [quote::quote!(String), quote::quote!(::std::string::String)] {
            let ty: Type = syn::parse2(yes).unwrap();
            assert!(is_string(&ty));
        }
        for no in [
            quote::quote!(str),
            quote::quote!(Option<String>),
            quote::quote!(my::Name),
        ] {
            let ty: Type = syn::parse2(no).unwrap();
            assert!(!is_string(&ty));
        }
    }
}
