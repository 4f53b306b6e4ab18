//! Keys beyond one field per key: constant keys written on the struct
//! (`#[entity(row_key = "profile")]`), and the key builders and prefix
//! filters generated for every entity.
//!
//! For each key the derive generates, as associated functions of the entity
//! type (with its visibility):
//!
//! * `partition_key_from(parts...)` / `row_key_from(parts...)`: the key of an
//!   entity with these key fields, in position order (no arguments for a
//!   constant key), built exactly as `Entity::partition_key` builds it. It
//!   returns the key itself when building cannot fail: for a constant key
//!   (checked here, at compile time), and when every part is a fixed-width
//!   type (see [`is_fixed`]), whose forms hold no forbidden character and
//!   whose longest forms together fit the key limit (a generated constant
//!   checks this with `FixedKeyPart::MAX_KEY_LEN`). Otherwise (a `String` or
//!   other part) it returns a `Result`;
//! * for a key of several parts, one prefix filter per proper prefix of its
//!   parts, named after the fields it takes:
//!   `row_key_prefix_year(year)`, `row_key_prefix_year_number(year, number)`,
//!   a `TypedFilter` matching exactly the rows whose key starts with these
//!   leading parts.

use leasehold_rules as rules;
use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{GenericArgument, LitStr, PathArguments, Type};

use crate::attr::KeyAttr;
use crate::errors::Errors;
use crate::model::{Field, KeyKind, Model, is_string, unraw};

/// The value of a constant key, checked against the service's key rules.
pub fn constant(lit: Option<&LitStr>, kind: KeyKind, errors: &mut Errors) -> Option<String> {
    let lit = lit?;
    let value = lit.value();
    if let Some(why) = rules::key_problem(&value) {
        errors.spanned(
            lit,
            format!("invalid constant {} {value:?}: {why}", kind.noun()),
        );
    }
    Some(value)
}

/// With a constant key, no field may feed that key: each one marked is an
/// error. Returns the (empty) list of the key's fields.
pub fn constant_key_parts(
    kind: KeyKind,
    value: &str,
    fields: &[Field<'_>],
    key_attrs: &[(usize, KeyKind, KeyAttr)],
    errors: &mut Errors,
) -> Vec<usize> {
    for (i, _, attr) in key_attrs.iter().filter(|(_, k, _)| *k == kind) {
        errors.at(
            attr.span,
            format!(
                "`{field}` cannot be the {noun}: the struct sets the {noun} to the constant {value:?}\n\
                 help: remove `{key} = \"...\"` from the struct, or `{key}` from this field",
                field = fields[*i].ident,
                noun = kind.noun(),
                key = kind.attr(),
            ),
        );
    }
    Vec::new()
}

fn private() -> TokenStream {
    quote!(::leasehold::__private)
}

/// One key's fields in position order.
fn parts<'m>(model: &'m Model<'_>, kind: KeyKind) -> Vec<&'m Field<'m>> {
    let indexes = match kind {
        KeyKind::Partition => &model.partition_key,
        KeyKind::Row => &model.row_key,
    };
    indexes.iter().map(|&i| &model.fields[i]).collect()
}

/// Whether `ty` is written as one of the key part types whose forms cannot
/// make an invalid key: an integer type, `Uuid`, `OffsetDateTime` or
/// `DateTime<Utc>`, alone or behind the path of its crate
/// (`uuid::Uuid`, `leasehold::time::OffsetDateTime`, `chrono::Utc`). The
/// generated code checks that the type is indeed one (`FixedKeyPart`).
pub fn is_fixed(ty: &Type) -> bool {
    let Type::Path(path) = ty else { return false };
    if path.qself.is_some() {
        return false;
    }
    let segments: Vec<&syn::PathSegment> = path.path.segments.iter().collect();
    let Some((last, prefix)) = segments.split_last() else {
        return false;
    };
    // Every segment before the last names one of `crates`.
    let behind = |crates: &[&str]| {
        prefix
            .iter()
            .all(|s| s.arguments.is_none() && crates.iter().any(|c| s.ident == c))
    };
    let name = last.ident.to_string();
    match name.as_str() {
        "u8" | "u16" | "u32" | "u64" | "i8" | "i16" | "i32" | "i64" => {
            last.arguments.is_none() && behind(&["std", "core", "primitive"])
        }
        "Uuid" => last.arguments.is_none() && behind(&["uuid", "leasehold"]),
        "OffsetDateTime" => last.arguments.is_none() && behind(&["time", "leasehold"]),
        "DateTime" => {
            let PathArguments::AngleBracketed(args) = &last.arguments else {
                return false;
            };
            let utc = match args.args.iter().collect::<Vec<_>>().as_slice() {
                [GenericArgument::Type(Type::Path(arg))] if arg.qself.is_none() => {
                    let path: Vec<String> = arg
                        .path
                        .segments
                        .iter()
                        .filter(|s| s.arguments.is_none())
                        .map(|s| s.ident.to_string())
                        .collect();
                    path.len() == arg.path.segments.len()
                        && matches!(
                            path.join("::").as_str(),
                            "Utc" | "chrono::Utc" | "chrono::offset::Utc"
                        )
                }
                _ => false,
            };
            utc && behind(&["chrono"])
        }
        _ => false,
    }
}

/// A builder's parameters and the rendered key parts they give: `String`
/// parts take `impl Into<String>`, others their own type by value.
fn params_and_rendered(fields: &[&Field<'_>]) -> (Vec<TokenStream>, Vec<TokenStream>) {
    let p = private();
    let mut params = Vec::new();
    let mut rendered = Vec::new();
    for field in fields {
        // Named after the field, but prefixed (and mixed-site) so that a
        // constant of the field's name cannot turn the parameter into a
        // pattern.
        let ident = &proc_macro2::Ident::new(
            &format!("__{}", unraw(field.ident)),
            proc_macro2::Span::mixed_site().located_at(field.ident.span()),
        );
        let ty = field.ty;
        if is_string(ty) {
            params.push(quote!(#ident: impl ::core::convert::Into<#p::String>));
            rendered.push(quote_spanned! {ty.span()=>
                <#ty as #p::KeyPart>::to_key(&::core::convert::Into::<#p::String>::into(#ident))
            });
        } else {
            params.push(quote!(#ident: #ty));
            rendered.push(quote_spanned!(ty.span()=> <#ty as #p::KeyPart>::to_key(&#ident)));
        }
    }
    (params, rendered)
}

/// `Entity::partition_key` / `row_key` of an entity: from its fields, or
/// the constant.
pub fn key_method(model: &Model<'_>, kind: KeyKind) -> TokenStream {
    let p = private();
    let table = &model.table;
    let (fn_name, builder, ty, constant) = match kind {
        KeyKind::Partition => (
            quote!(partition_key),
            quote!(partition_key_of),
            quote!(#p::PartitionKey),
            &model.partition_key_const,
        ),
        KeyKind::Row => (
            quote!(row_key),
            quote!(row_key_of),
            quote!(#p::RowKey),
            &model.row_key_const,
        ),
    };
    if let Some(value) = constant {
        return quote! {
            fn #fn_name(&self) -> #p::Result<#ty> {
                #p::#builder(#table, [#p::String::from(#value)])
            }
        };
    }
    let rendered = parts(model, kind).into_iter().map(|field| {
        let Field { ident, ty, .. } = field;
        let p = crate::private::private_at(ty.span());
        quote_spanned!(ty.span()=> <#ty as #p::KeyPart>::to_key(&self.#ident))
    });
    quote! {
        fn #fn_name(&self) -> #p::Result<#ty> {
            #p::#builder(#table, [#(#rendered),*])
        }
    }
}

/// The check, on decode, that a stored key equals the constant.
pub fn constant_check(model: &Model<'_>, kind: KeyKind, stored: &syn::Ident) -> TokenStream {
    let p = private();
    let table = &model.table;
    let (constant, kind_tokens) = match kind {
        KeyKind::Partition => (&model.partition_key_const, quote!(#p::KeyKind::Partition)),
        KeyKind::Row => (&model.row_key_const, quote!(#p::KeyKind::Row)),
    };
    match constant {
        Some(value) => quote! {
            #p::constant_key(#table, #kind_tokens, #stored.as_str(), #value)?;
        },
        None => TokenStream::new(),
    }
}

/// The key builders and prefix filters of an entity.
pub fn builders(model: &Model<'_>) -> TokenStream {
    let p = private();
    let ident = model.ident;
    let vis = model.vis;
    let table = &model.table;
    let mut out = TokenStream::new();
    // Items beside the inherent impl: trait impls and compile-time checks.
    let mut traits = TokenStream::new();
    for kind in [KeyKind::Partition, KeyKind::Row] {
        let (from, builder, ty, constant, column) = match kind {
            KeyKind::Partition => (
                "partition_key_from",
                quote!(partition_key_of),
                quote!(#p::PartitionKey),
                &model.partition_key_const,
                "PartitionKey",
            ),
            KeyKind::Row => (
                "row_key_from",
                quote!(row_key_of),
                quote!(#p::RowKey),
                &model.row_key_const,
                "RowKey",
            ),
        };
        let from = format_ident!("{}", from);
        let fixed_builder = match kind {
            KeyKind::Partition => quote!(fixed_partition_key),
            KeyKind::Row => quote!(fixed_row_key),
        };
        if let Some(value) = constant {
            let doc = format!(
                "The {} of every `{ident}`: the constant {value:?}, checked against the key rules at compile time.",
                kind.noun()
            );
            out.extend(quote! {
                #[doc = #doc]
                #vis fn #from() -> #ty {
                    #p::#fixed_builder([#p::String::from(#value)])
                }
            });
            if matches!(kind, KeyKind::Row) {
                traits.extend(quote! {
                    impl #p::ConstantRowKey for #ident {
                        const ROW_KEY: &'static #p::str = #value;
                    }
                });
            }
            continue;
        }
        let fields = parts(model, kind);
        let names: Vec<String> = fields
            .iter()
            .map(|f| format!("`{}`", unraw(f.ident)))
            .collect();
        let (params, rendered) = params_and_rendered(&fields);
        if fields.iter().all(|f| is_fixed(f.ty)) {
            let doc = format!(
                "The {} of a `{ident}` whose key fields are these ({}, in key order), as [`Entity::{}`](::leasehold::entity::Entity) builds it. Every part has a fixed-width form, so it cannot fail.",
                kind.noun(),
                names.join(", "),
                kind.attr(),
            );
            out.extend(quote! {
                #[doc = #doc]
                #vis fn #from(#(#params),*) -> #ty {
                    #p::#fixed_builder([#(#rendered),*])
                }
            });
            // The parts are fixed-width key parts indeed (a type of the user's
            // own of one of their names is not), and their longest forms fit.
            let lens = fields.iter().map(|f| {
                let ty = f.ty;
                let p = crate::private::private_at(ty.span());
                quote_spanned!(ty.span()=> <#ty as #p::FixedKeyPart>::MAX_KEY_LEN)
            });
            let message = format!(
                "the longest forms of the {} parts of `{ident}` exceed the key limit of 1 KiB: no entity with the longest values could be stored",
                kind.noun(),
            );
            traits.extend(quote! {
                const _: () = ::core::assert!(#p::fixed_parts_fit(&[#(#lens),*]), #message);
            });
        } else {
            let doc = format!(
                "The {} of a `{ident}` whose key fields are these ({}, in key order), as [`Entity::{}`](::leasehold::entity::Entity) builds it.\n\n# Errors\n`Error::Invalid` when the parts do not make a valid key (such as one over 1 KiB, or a single `String` part holding a character keys forbid).",
                kind.noun(),
                names.join(", "),
                kind.attr(),
            );
            out.extend(quote! {
                #[doc = #doc]
                #vis fn #from(#(#params),*) -> #p::Result<#ty> {
                    #p::#builder(#table, [#(#rendered),*])
                }
            });
        }
        // Prefix filters over the leading parts of a composite key.
        for k in 1..fields.len() {
            let leading = &fields[..k];
            let suffix: Vec<String> = leading.iter().map(|f| unraw(f.ident)).collect();
            let name = format_ident!("{}_prefix_{}", kind.attr(), suffix.join("_"));
            let (params, rendered) = params_and_rendered(leading);
            let doc = format!(
                "A filter on the rows of `{ident}` whose {} starts with these leading parts ({}): for `Query::filter`, as a key range the service serves efficiently.",
                kind.noun(),
                names[..k].join(", "),
            );
            out.extend(quote! {
                #[doc = #doc]
                #vis fn #name(#(#params),*) -> #p::TypedFilter<Self> {
                    #p::key_prefix_filter(#column, [#(#rendered),*])
                }
            });
        }
    }
    quote! {
        impl #ident {
            #out
        }
        #traits
    }
}

#[cfg(test)]
mod tests {
    use super::is_fixed;

    fn fixed(ty: &str) -> bool {
        is_fixed(&syn::parse_str(ty).expect("a type"))
    }

    #[test]
    fn fixed_parts_are_recognized_by_name_and_crate_path() {
        for yes in [
            "u8",
            "i64",
            "core::primitive::u16",
            "Uuid",
            "uuid::Uuid",
            "::uuid::Uuid",
            "leasehold::uuid::Uuid",
            "OffsetDateTime",
            "time::OffsetDateTime",
            "DateTime<Utc>",
            "chrono::DateTime<chrono::Utc>",
        ] {
            assert!(fixed(yes), "{yes}");
        }
        for no in [
            "String",
            "u128",
            "usize",
            "crate::ids::Uuid",
            "self::Uuid",
            "Option<u16>",
            "DateTime<Local>",
            "DateTime<FixedOffset>",
            "u16<T>",
            "&u16",
        ] {
            assert!(!fixed(no), "{no}");
        }
    }
}
