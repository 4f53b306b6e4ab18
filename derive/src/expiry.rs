//! `#[entity(expires_at)]` and `#[entity(time_to_live = "...")]`: the field
//! that says when the entity's row expires, checked against how it is
//! stored, and the code that writes the row's expiry property.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned;

use leasehold_rules as rules;

use crate::attr::FieldAttrs;
use crate::errors::Errors;
use crate::model::{Model, unraw};

/// Whether a field declares the expiry, checking that its other
/// attributes allow it (a stored, plain property). Errors point at the
/// expiry attribute. `Some((ttl, span))`: `ttl` is `None` for
/// `expires_at`.
pub fn of_field(
    ident: &Ident,
    attrs: &FieldAttrs,
    errors: &mut Errors,
) -> Option<(Option<u64>, Span)> {
    let (ttl, span, name) = match (&attrs.expires_at, &attrs.time_to_live) {
        (None, None) => return None,
        (Some(at), Some(lit)) => {
            errors.spanned(
                lit,
                format!("`{ident}` declares both `expires_at` and `time_to_live`; a row has one expiry: keep one"),
            );
            (None, *at, "expires_at")
        }
        (Some(at), None) => (None, *at, "expires_at"),
        (None, Some(lit)) => match rules::time_to_live_seconds(&lit.value()) {
            Ok(seconds) => (Some(seconds), lit.span(), "time_to_live"),
            Err(why) => {
                errors.spanned(lit, format!("`time_to_live` {why}"));
                return None;
            }
        },
    };
    let not_here = |what: &str| {
        format!(
            "`{name}` does not apply to {what}: the expiry is read from a stored date-time property"
        )
    };
    if attrs.partition_key.is_some() || attrs.row_key.is_some() {
        errors.at(span, not_here(&format!("a key field (`{ident}`)")));
        return None;
    }
    if attrs.skip.is_some() {
        errors.at(
            span,
            not_here(&format!("a skipped field (`{ident}` is not stored)")),
        );
        return None;
    }
    if attrs.json.is_some() {
        errors.at(
            span,
            not_here(&format!(
                "a `json` field (`{ident}` is stored as a JSON string)"
            )),
        );
        return None;
    }
    if attrs.chunked.is_some() {
        errors.at(span, not_here(&format!("a `chunked` field (`{ident}`)")));
        return None;
    }
    Some((ttl, span))
}

/// The statement of `encode_properties` that stores the row's expiry into
/// `props`, or nothing for a type without one. Spanned at the field's
/// type, so a field that is not a date-time is reported there.
pub fn store(model: &Model<'_>, props: &Ident) -> TokenStream {
    let Some(expiry) = &model.expiry else {
        return TokenStream::new();
    };
    let field = &model.fields[expiry.field];
    let ident = field.ident;
    let ty = field.ty;
    let p = crate::private::private_at(ty.span());
    let table = &model.table;
    let name = unraw(ident);
    let ttl = match expiry.ttl_seconds {
        Some(s) => quote!(#p::Some(#s)),
        None => quote!(#p::None),
    };
    quote_spanned! {ty.span()=>
        #p::put_expiry(&mut #props, #table, #name, <#ty as #p::ExpiryInstant>::expiry_instant(&self.#ident), #ttl)?;
    }
}

/// The stored name of the expiry property, for `is_own_property`, when
/// the type has one.
pub fn own_name(model: &Model<'_>) -> Option<String> {
    model
        .expiry
        .as_ref()
        .map(|_| rules::EXPIRY_PROPERTY.to_owned())
}
