//! `#[derive(PropertyCodec)]`: fieldless enums stored as one property.
//!
//! By default a variant is stored as an `Edm.String` holding its name (or its
//! `rename`, or its name under the enum's `rename_all`, spelled as serde
//! spells them). With `#[entity(int32)]` on the enum, every variant has an
//! explicit integer discriminant and is stored as that `Edm.Int32`.
//!
//! Every mistake is reported in one compile, each at its token.

use std::collections::HashMap;

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::spanned::Spanned;
use syn::{
    Attribute, Data, DeriveInput, Expr, ExprLit, ExprUnary, Fields, Ident, Lit, LitStr, UnOp,
};

use crate::errors::Errors;

/// The spellings `rename_all` accepts, as serde accepts them.
const CASES: [&str; 8] = [
    "lowercase",
    "UPPERCASE",
    "PascalCase",
    "camelCase",
    "snake_case",
    "SCREAMING_SNAKE_CASE",
    "kebab-case",
    "SCREAMING-KEBAB-CASE",
];

/// How the enum is stored.
enum Storage {
    /// `Edm.String`: the stored name of each variant.
    Names(Vec<String>),
    /// `Edm.Int32`: each variant's discriminant.
    Int32(Vec<i32>),
}

/// Derives `PropertyCodec` for a fieldless enum.
pub fn derive(input: &DeriveInput) -> syn::Result<TokenStream> {
    let mut errors = Errors::default();
    let (rename_all, int32) = container(&input.attrs, &mut errors);

    if !input.generics.params.is_empty() || input.generics.where_clause.is_some() {
        errors.spanned(
            &input.generics,
            "#[derive(PropertyCodec)] does not support generic enums: a stored value names one variant of one type",
        );
    }
    let data = match &input.data {
        Data::Enum(data) => data,
        Data::Struct(data) => {
            errors.spanned(
                data.struct_token,
                "#[derive(PropertyCodec)] supports fieldless enums; for a struct, implement `leasehold::PropertyCodec` by hand or store it with `#[entity(json)]`",
            );
            return Err(errors.into_error());
        }
        Data::Union(data) => {
            errors.spanned(
                data.union_token,
                "#[derive(PropertyCodec)] supports fieldless enums, not unions",
            );
            return Err(errors.into_error());
        }
    };
    if data.variants.is_empty() {
        errors.spanned(
            &input.ident,
            "#[derive(PropertyCodec)] needs at least one variant: an enum without variants has no value to store",
        );
    }

    let mut idents: Vec<&Ident> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut numbers: Vec<i32> = Vec::new();
    // Stored form -> the variant that claimed it first.
    let mut seen_names: HashMap<String, &Ident> = HashMap::new();
    for variant in &data.variants {
        if !matches!(variant.fields, Fields::Unit) {
            errors.spanned(
                &variant.fields,
                format!(
                    "variant `{}` has fields; #[derive(PropertyCodec)] stores fieldless variants only (store data-carrying enums with `#[entity(json)]`)",
                    variant.ident
                ),
            );
        }
        let rename = variant_rename(&variant.attrs, &mut errors);
        if int32.is_some() {
            if let Some(lit) = &rename {
                errors.spanned(
                    lit,
                    "`rename` does not apply to an `#[entity(int32)]` enum: its variants are stored as their discriminants",
                );
            }
            match &variant.discriminant {
                None => errors.spanned(
                    &variant.ident,
                    format!(
                        "variant `{}` needs an explicit discriminant: an `#[entity(int32)]` enum is stored as them (`{} = 1`)",
                        variant.ident, variant.ident
                    ),
                ),
                Some((_, expr)) => match int_literal(expr) {
                    Some(n) => match i32::try_from(n) {
                        Ok(n) => numbers.push(n),
                        Err(_) => errors.spanned(
                            expr,
                            format!("discriminant {n} does not fit Edm.Int32 ({} to {})", i32::MIN, i32::MAX),
                        ),
                    },
                    None => errors.spanned(
                        expr,
                        "an `#[entity(int32)]` discriminant is an integer literal, such as `3` or `-1`",
                    ),
                },
            }
        } else {
            let name = match (&rename, &rename_all) {
                (Some(lit), _) => lit.value(),
                (None, Some(case)) => apply_case(&case.value(), &variant.ident.to_string()),
                (None, None) => variant.ident.to_string(),
            };
            if let Some(first) = seen_names.get(&name) {
                errors.at(
                    rename.as_ref().map_or_else(|| variant.ident.span(), LitStr::span),
                    format!(
                        "two variants are stored as {name:?}: `{first}` and `{}`; `rename` one of them",
                        variant.ident
                    ),
                );
            } else {
                seen_names.insert(name.clone(), &variant.ident);
            }
            names.push(name);
        }
        idents.push(&variant.ident);
    }
    if let (Some(_), Some(lit)) = (int32, &rename_all) {
        errors.spanned(
            lit,
            "`rename_all` does not apply to an `#[entity(int32)]` enum: its variants are stored as their discriminants",
        );
    }

    let storage = if int32.is_some() {
        Storage::Int32(numbers)
    } else {
        Storage::Names(names)
    };
    errors.finish(())?;
    Ok(expand(&input.ident, &idents, &storage))
}

/// An integer literal, possibly negated, as written.
fn int_literal(expr: &Expr) -> Option<i64> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Int(lit), ..
        }) => lit.base10_parse::<i64>().ok(),
        Expr::Unary(ExprUnary {
            op: UnOp::Neg(_),
            expr,
            ..
        }) => int_literal(expr).and_then(i64::checked_neg),
        Expr::Group(group) => int_literal(&group.expr),
        Expr::Paren(paren) => int_literal(&paren.expr),
        _ => None,
    }
}

/// A variant name under a serde `rename_all` case (variants are written in
/// PascalCase).
fn apply_case(case: &str, name: &str) -> String {
    let snake = || {
        let mut out = String::new();
        for (i, c) in name.chars().enumerate() {
            if c.is_uppercase() && i > 0 {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        }
        out
    };
    match case {
        "lowercase" => name.to_ascii_lowercase(),
        "UPPERCASE" => name.to_ascii_uppercase(),
        "camelCase" => {
            let mut chars = name.chars();
            match chars.next() {
                Some(first) => first.to_lowercase().chain(chars).collect(),
                None => String::new(),
            }
        }
        "snake_case" => snake(),
        "SCREAMING_SNAKE_CASE" => snake().to_ascii_uppercase(),
        "kebab-case" => snake().replace('_', "-"),
        "SCREAMING-KEBAB-CASE" => snake().replace('_', "-").to_ascii_uppercase(),
        _ => name.to_owned(),
    }
}

/// Reads the enum's `#[entity(...)]`: `rename_all = "..."` and `int32`.
fn container(attrs: &[Attribute], errors: &mut Errors) -> (Option<LitStr>, Option<Span>) {
    let mut rename_all: Option<LitStr> = None;
    let mut int32: Option<Span> = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("entity")) {
        let parsed = attr.parse_nested_meta(|meta| {
            let name = crate::attr::path_text(&meta.path);
            match name.as_str() {
                "rename_all" => {
                    let lit = crate::attr::string_value(&meta, errors, "snake_case")?;
                    if rename_all.is_some() {
                        errors.spanned(&meta.path, "duplicate `rename_all` attribute");
                    } else if let Some(lit) = lit {
                        if CASES.contains(&lit.value().as_str()) {
                            rename_all = Some(lit);
                        } else {
                            errors.spanned(
                                &lit,
                                format!(
                                    "unknown case {:?}{}; `rename_all` takes one of {}",
                                    lit.value(),
                                    crate::attr::did_you_mean(&lit.value(), &CASES),
                                    CASES.map(|c| format!("{c:?}")).join(", ")
                                ),
                            );
                        }
                    }
                }
                "int32" => {
                    if int32.is_some() {
                        errors.spanned(&meta.path, "duplicate `int32` attribute");
                    }
                    int32 = Some(meta.path.span());
                    if !meta.input.is_empty() && !meta.input.peek(syn::Token![,]) {
                        errors.spanned(&meta.path, "`int32` takes no value: write `#[entity(int32)]`");
                        crate::attr::skip_value(&meta)?;
                    }
                }
                _ => {
                    errors.spanned(
                        &meta.path,
                        format!(
                            "unknown attribute `{name}`{} on a `#[derive(PropertyCodec)]` enum; write `#[entity(rename_all = \"...\")]` or `#[entity(int32)]`",
                            crate::attr::did_you_mean(&name, &["rename_all", "int32"])
                        ),
                    );
                    crate::attr::skip_value(&meta)?;
                }
            }
            Ok(())
        });
        if let Err(e) = parsed {
            errors.push(e);
        }
    }
    (rename_all, int32)
}

/// Reads a variant's `#[entity(rename = "...")]`.
fn variant_rename(attrs: &[Attribute], errors: &mut Errors) -> Option<LitStr> {
    let mut rename = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("entity")) {
        let parsed = attr.parse_nested_meta(|meta| {
            let name = crate::attr::path_text(&meta.path);
            if name == "rename" {
                let lit = crate::attr::string_value(&meta, errors, "Name")?;
                if rename.is_some() {
                    errors.spanned(&meta.path, "duplicate `rename` attribute");
                } else {
                    rename = lit;
                }
            } else {
                errors.spanned(
                    &meta.path,
                    format!(
                        "unknown attribute `{name}`{} on a variant; write `#[entity(rename = \"...\")]`",
                        crate::attr::did_you_mean(&name, &["rename"])
                    ),
                );
                crate::attr::skip_value(&meta)?;
            }
            Ok(())
        });
        if let Err(e) = parsed {
            errors.push(e);
        }
    }
    rename
}

fn expand(ident: &Ident, variants: &[&Ident], storage: &Storage) -> TokenStream {
    let p = quote!(::leasehold::__private);
    let type_name = ident.to_string();
    let value = Ident::new("__value", Span::mixed_site());
    let (edm, encoded, decode) = match storage {
        Storage::Names(names) => {
            let arms = variants
                .iter()
                .zip(names)
                .map(|(v, n)| quote!(Self::#v => #n));
            let back = variants
                .iter()
                .zip(names)
                .map(|(v, n)| quote!(#n => #p::Ok(Self::#v)));
            (
                quote!(#p::EdmType::String),
                quote!(#p::Value::String(#p::String::from(match self { #(#arms,)* }))),
                quote! {
                    let #value = #p::enum_string(#value, #type_name, &[#(#names),*])?;
                    match #value.as_str() {
                        #(#back,)*
                        _ => #p::Err(#p::unknown_variant(#type_name, &[#(#names),*], #p::Value::String(#value))),
                    }
                },
            )
        }
        Storage::Int32(numbers) => {
            let arms = variants
                .iter()
                .zip(numbers)
                .map(|(v, n)| quote!(Self::#v => #n));
            let back = variants
                .iter()
                .zip(numbers)
                .map(|(v, n)| quote!(#n => #p::Ok(Self::#v)));
            let shown: Vec<String> = variants
                .iter()
                .zip(numbers)
                .map(|(v, n)| format!("{n} ({v})"))
                .collect();
            (
                quote!(#p::EdmType::Int32),
                quote!(#p::Value::Int32(match self { #(#arms,)* })),
                quote! {
                    let #value = #p::enum_int32(#value, #type_name, &[#(#shown),*])?;
                    match #value {
                        #(#back,)*
                        _ => #p::Err(#p::unknown_variant(#type_name, &[#(#shown),*], #p::Value::Int32(#value))),
                    }
                },
            )
        }
    };
    quote! {
        #[automatically_derived]
        impl #p::PropertyCodec for #ident {
            const EDM_TYPE: #p::EdmType = #edm;

            fn encode(&self) -> ::core::result::Result<#p::Option<#p::Value>, #p::EncodeError> {
                #p::Ok(#p::Some(#encoded))
            }

            fn decode(#value: #p::Option<#p::Value>) -> ::core::result::Result<Self, #p::DecodeError> {
                #decode
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_are_spelled_as_serde_spells_them() {
        let cases: Vec<String> = CASES
            .iter()
            .map(|c| apply_case(c, "OutForDelivery"))
            .collect();
        assert_eq!(
            cases,
            [
                "outfordelivery",
                "OUTFORDELIVERY",
                "OutForDelivery",
                "outForDelivery",
                "out_for_delivery",
                "OUT_FOR_DELIVERY",
                "out-for-delivery",
                "OUT-FOR-DELIVERY"
            ]
        );
    }

    #[test]
    fn negative_discriminants_are_read() {
        let e: Expr = syn::parse_quote!(-3);
        assert_eq!(int_literal(&e), Some(-3));
        let e: Expr = syn::parse_quote!(1 + 2);
        assert_eq!(int_literal(&e), None);
    }
}
