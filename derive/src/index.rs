//! `#[entity(unique)]` and `#[entity(index)]`: which fields are indexed,
//! checked against how they are stored, and the code declaring the indexes
//! (`Entity::INDEXES`) and checking each indexed type has a key form.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned;

use crate::attr::FieldAttrs;
use crate::errors::Errors;
use crate::model::{Model, Role, strip_option, unraw};

/// Whether a field is indexed, checking that its other attributes allow it:
/// an index needs a stored, non-JSON property. Errors point at the index
/// attribute.
pub fn of_field(ident: &Ident, attrs: &FieldAttrs, errors: &mut Errors) -> Option<(bool, Span)> {
    let (unique, span) = match (attrs.unique, attrs.index) {
        (None, None) => return None,
        (Some(u), Some(i)) => {
            errors.at(
                i,
                format!("`{ident}` is marked both `unique` and `index`; a unique field is already indexed: keep `unique`"),
            );
            (true, u)
        }
        (Some(u), None) => (true, u),
        (None, Some(i)) => (false, i),
    };
    let name = if unique { "unique" } else { "index" };
    if attrs.partition_key.is_some() || attrs.row_key.is_some() {
        errors.at(
            span,
            format!("`{name}` does not apply to a key field: `{ident}` is part of the entity's keys, which are unique and looked up already"),
        );
        return None;
    }
    if attrs.skip.is_some() {
        errors.at(
            span,
            format!("`{name}` does not apply to a skipped field: `{ident}` is not stored"),
        );
        return None;
    }
    if attrs.json.is_some() {
        errors.at(
            span,
            format!("`{name}` does not apply to a `json` field: `{ident}` is stored as a JSON string, which has no ordered key form"),
        );
        return None;
    }
    if attrs.chunked.is_some() {
        errors.at(
            span,
            format!("`{name}` does not apply to a `chunked` field: `{ident}` may hold values far over a key's 1 KiB, spread across several properties"),
        );
        return None;
    }
    Some((unique, span))
}

/// `const INDEXES`, inside the `Entity` impl; nothing without indexes.
pub fn consts(model: &Model<'_>) -> TokenStream {
    if model.indexes.is_empty() {
        return TokenStream::new();
    }
    let p = quote!(::leasehold::__private);
    let defs = model.indexes.iter().filter_map(|index| {
        let field = &model.fields[index.field];
        let Role::Property(prop) = &field.role else {
            return None;
        };
        let name = unraw(field.ident);
        let property = &prop.name;
        let unique = index.unique;
        Some(quote! {
            #p::IndexDef { field: #name, property: #property, unique: #unique }
        })
    });
    quote! {
        const INDEXES: &'static [#p::IndexDef] = &[#(#defs),*];
    }
}

/// A check, spanned at each indexed field's type, that the type (or the
/// `T` of an `Option<T>`) has a key form.
pub fn checks(model: &Model<'_>) -> TokenStream {
    let checks = model.indexes.iter().map(|index| {
        let ty = strip_option(model.fields[index.field].ty);
        let p = quote_spanned!(ty.span()=> ::leasehold::__private);
        quote_spanned! {ty.span()=>
            let _ = <#ty as #p::KeyPart>::to_key;
        }
    });
    if model.indexes.is_empty() {
        return TokenStream::new();
    }
    quote! {
        const _: () = {
            #[allow(dead_code)]
            fn __leasehold_index_keys() {
                #(#checks)*
            }
        };
    }
}
