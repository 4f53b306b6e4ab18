//! Code generation from a validated [`Model`].
//!
//! Generated code names everything by absolute path through
//! `::leasehold::__private`, so it compiles whatever the user's module imports
//! or shadows. Every use of a field's type is spanned at that type, and goes
//! through a qualified path (`<T as PropertyCodec>::...`), so an unsupported
//! type gives one error, at the field, from the trait's own diagnostic.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned;

use crate::model::{Field, KeyKind, Model, Role, is_string, strip_option, unraw};

/// The generated items for one entity.
pub fn expand(model: &Model<'_>) -> TokenStream {
    let entity = entity_impl(model);
    let columns = columns(model);
    let index_checks = crate::index::checks(model);
    let builders = crate::keys::builders(model);
    quote! {
        #entity
        #columns
        #index_checks
        #builders
    }
}

fn private() -> TokenStream {
    quote!(::leasehold::__private)
}

/// A local variable of the generated code. Mixed-site hygiene keeps it apart
/// from the user's variables; the prefix keeps it apart from their constants
/// too (a binding pattern would otherwise match a constant of that name).
fn local(name: &str) -> Ident {
    Ident::new(&format!("__{name}"), Span::mixed_site())
}

fn key_kind(kind: KeyKind) -> TokenStream {
    let p = private();
    match kind {
        KeyKind::Partition => quote!(#p::KeyKind::Partition),
        KeyKind::Row => quote!(#p::KeyKind::Row),
    }
}

fn entity_impl(model: &Model<'_>) -> TokenStream {
    let p = private();
    let ident = model.ident;
    let table = &model.table;

    let names = model.fields.iter().flat_map(|f| match &f.role {
        Role::Property(prop) if prop.chunked => {
            vec![prop.name.clone(), crate::chunked::count_name(&prop.name)]
        }
        Role::Property(prop) => vec![prop.name.clone()],
        _ => Vec::new(),
    });
    let own_property = crate::chunked::is_own_property(model);

    let partition_key = crate::keys::key_method(model, KeyKind::Partition);
    let row_key = crate::keys::key_method(model, KeyKind::Row);

    let index_consts = crate::index::consts(model);
    let props = local("props");
    let store_expiry = crate::expiry::store(model, &props);
    let property_count = model
        .fields
        .iter()
        .filter(|f| matches!(f.role, Role::Property(_)))
        .count();
    let has_properties = property_count > 0;
    // Fields are encoded in field order (so the first failure reported is the
    // first field's), then stored in name order, which the bag appends.
    let property_fields: Vec<(usize, &Field<'_>, &crate::model::Property)> = model
        .fields
        .iter()
        .enumerate()
        .filter_map(|(i, f)| match &f.role {
            Role::Property(prop) => Some((i, f, prop)),
            _ => None,
        })
        .collect();
    let mut by_name = property_fields.clone();
    by_name.sort_by(|a, b| a.2.name.cmp(&b.2.name));
    let slot = |i: usize| local(&format!("value_{i}"));
    let encoders = property_fields.iter().map(|&(i, f, prop)| {
        let Field { ident, ty, .. } = f;
        let name = &prop.name;
        let p = crate::private::private_at(ty.span());
        let slot = slot(i);
        let check = if prop.chunked && !prop.json {
            quote_spanned!(ty.span()=> #p::chunked_field::<#ty>();)
        } else {
            TokenStream::new()
        };
        if prop.json {
            quote_spanned! {ty.span()=>
                let #slot = #p::encode_json_field::<#ty>(#table, #name, &self.#ident)?;
            }
        } else {
            quote_spanned! {ty.span()=>
                #check
                let #slot = #p::encoded(#table, #name, <#ty as #p::PropertyCodec>::encode(&self.#ident))?;
            }
        }
    });
    let stores = by_name.iter().map(|&(i, _, prop)| {
        let name = &prop.name;
        let slot = slot(i);
        if prop.chunked {
            quote!(#p::put_chunked(&mut #props, #table, #name, #slot)?;)
        } else {
            quote!(#p::put(&mut #props, #name, #slot);)
        }
    });
    // Decoding takes the values out in reverse name order (each from the
    // end of the bag), then decodes them in field order.
    let takes = by_name.iter().rev().map(|&(i, _, prop)| {
        let name = &prop.name;
        let slot = slot(i);
        if prop.chunked {
            quote!(let #slot = #p::take_chunked(&mut #props, #table, #name)?;)
        } else {
            quote!(let #slot = #props.remove(#name);)
        }
    });
    let props_binding = if has_properties {
        quote!(mut #props)
    } else {
        quote!(#props)
    };

    let data = local("data");
    let pk = local("pk");
    let rk = local("rk");
    let value = local("value");
    let decoded = local("decoded");
    // The raw parts of a stored key, by position: `pk_0`, `pk_1`, ...
    let raw_part = |kind: KeyKind, position: usize| {
        let stored = match kind {
            KeyKind::Partition => &pk,
            KeyKind::Row => &rk,
        };
        Ident::new(&format!("{stored}_{position}"), Span::mixed_site())
    };
    let split = |kind: KeyKind, parts: &[usize]| {
        let stored = match kind {
            KeyKind::Partition => &pk,
            KeyKind::Row => &rk,
        };
        let n = parts.len();
        let kind_tokens = key_kind(kind);
        if n == 0 {
            // A constant key: checked, not split.
            return crate::keys::constant_check(model, kind, stored);
        }
        if n == 1 {
            // A one-part key is the stored key itself: borrow it.
            let raw = raw_part(kind, 0);
            return quote! {
                let #raw = #stored.as_str();
            };
        }
        let raws = (0..n).map(|position| raw_part(kind, position));
        quote! {
            let [#(#raws),*] = #p::split_key::<#n>(#table, #kind_tokens, #stored.as_str())?;
        }
    };
    let split_pk = split(KeyKind::Partition, &model.partition_key);
    let split_rk = split(KeyKind::Row, &model.row_key);

    let decoders = model.fields.iter().map(|field| {
        let Field { ident, ty, role } = field;
        let p = crate::private::private_at(ty.span());
        let expr = match role {
            Role::Key { kind, position } => {
                let raw = raw_part(*kind, *position);
                let kind_tokens = key_kind(*kind);
                let field_name = unraw(ident);
                quote_spanned! {ty.span()=>
                    #p::key_part(#table, #kind_tokens, #field_name, &#raw, <#ty as #p::KeyPart>::parse_key(&#raw))?
                }
            }
            Role::Skip => quote_spanned!(ty.span()=> <#ty as #p::Default>::default()),
            Role::Property(prop) => {
                let name = &prop.name;
                let taken = property_fields
                    .iter()
                    .find(|(_, f, _)| std::ptr::eq(*f, field))
                    .map(|&(i, _, _)| slot(i));
                match (prop.json, prop.default) {
                    (true, false) => quote_spanned! {ty.span()=>
                        #p::decode_json_field::<#ty>(#table, #name, #taken)?
                    },
                    (true, true) => quote_spanned! {ty.span()=>
                        #p::decode_json_field_or_default::<#ty>(#table, #name, #taken)?
                    },
                    (false, false) => quote_spanned! {ty.span()=>
                        #p::decoded(#table, #name, <#ty as #p::PropertyCodec>::decode(#taken))?
                    },
                    (false, true) => quote_spanned! {ty.span()=>
                        #p::decoded(#table, #name, match #taken {
                            #p::None => #p::Ok(<#ty as #p::Default>::default()),
                            #value => <#ty as #p::PropertyCodec>::decode(#value),
                        })?
                    },
                }
            }
        };
        quote!(#ident: #expr)
    });

    let keep_unknown = if model.drop_unknown {
        quote!(
            const KEEP_UNKNOWN_PROPERTIES: ::core::primitive::bool = false;
        )
    } else {
        TokenStream::new()
    };

    quote! {
        #[automatically_derived]
        impl #p::Entity for #ident {
            const TABLE: &'static #p::str = #table;
            const PROPERTY_NAMES: &'static [&'static #p::str] = &[#(#names),*];
            #index_consts

            #partition_key

            #row_key

            fn encode_properties(&self) -> #p::Result<#p::Properties> {
                #(#encoders)*
                let #props_binding = #p::Properties::with_capacity(#property_count);
                #(#stores)*
                #store_expiry
                #p::Ok(#props)
            }

            fn decode(#data: #p::EntityData) -> #p::Result<Self> {
                let #p::EntityData {
                    partition_key: #pk,
                    row_key: #rk,
                    properties: #props_binding,
                } = #data;
                // Errors name the row, whose keys outlive the decoding.
                let #decoded = (|| -> #p::Result<Self> {
                    #(#takes)*
                    #split_pk
                    #split_rk
                    #p::Ok(Self {
                        #(#decoders,)*
                    })
                })();
                #p::in_row(&#pk, &#rk, #decoded)
            }

            #keep_unknown

            #own_property
        }
    }
}

fn columns(model: &Model<'_>) -> TokenStream {
    let p = private();
    let ident = model.ident;
    let vis = model.vis;
    let columns_ident = format_ident!("{}Columns", ident);

    // (field name, column value type, the field's type when it is a
    // property, stored name), in field order.
    let mut columns: Vec<(&Ident, TokenStream, Option<&syn::Type>, String)> = Vec::new();
    for (i, field) in model.fields.iter().enumerate() {
        match &field.role {
            Role::Key { kind, .. } => {
                let parts = match kind {
                    KeyKind::Partition => &model.partition_key,
                    KeyKind::Row => &model.row_key,
                };
                // A key has a column only when it is one `String` field: other
                // key types are stored in an encoded form.
                if parts.as_slice() == [i] && is_string(field.ty) {
                    columns.push((
                        field.ident,
                        quote!(#p::String),
                        None,
                        kind.property().to_owned(),
                    ));
                }
            }
            Role::Property(prop) if !prop.json && !prop.chunked => {
                let ty = strip_option(field.ty);
                columns.push((field.ident, quote!(#ty), Some(field.ty), prop.name.clone()));
            }
            Role::Property(_) | Role::Skip => {}
        }
    }

    let struct_doc =
        format!("Typed columns of [`{ident}`] for query filters, from [`{ident}::columns`].");
    let fn_doc = format!(
        "Typed columns of `{ident}` for query filters: each compares a stored property with values of its field's type."
    );
    let defs = columns.iter().map(|(field, ty, _, stored)| {
        let doc = if stored == "PartitionKey" || stored == "RowKey" {
            format!("`{stored}`: the key held by field `{field}`.")
        } else {
            format!("Property `{stored}` (field `{field}`).")
        };
        quote! {
            #[doc = #doc]
            pub #field: #p::Column<#ident, #ty>
        }
    });
    let inits = columns
        .iter()
        .map(|(field, ty, field_ty, stored)| match field_ty {
            None => quote!(#field: #p::Column::new(#stored)),
            Some(field_ty) => {
                // The field's type is checked as the entity impl checks it, so an
                // unsupported type gives the same error, which rustc reports
                // once. `Column::new` needs the same bound of the column type;
                // spanning its path over the whole field type puts that
                // obligation at the same place, where rustc counts it as the
                // same error.
                let (first, last) = span_ends(field_ty);
                let p_first = crate::private::private_at(first);
                let new = Ident::new("new", last);
                quote_spanned! {first=>
                    #field: {
                        let _ = <#field_ty as #p_first::PropertyCodec>::EDM_TYPE;
                        let column: #p::Column<#ident, #ty> = #p_first::Column::#new(#stored);
                        column
                    }
                }
            }
        });
    let debug_fields = columns.iter().map(|(field, _, _, _)| {
        let name = unraw(field);
        quote!(.field(#name, &self.#field))
    });
    let columns_name = columns_ident.to_string();
    let f = local("f");

    quote! {
        #[doc = #struct_doc]
        #vis struct #columns_ident {
            #(#defs,)*
        }

        #[automatically_derived]
        impl #p::Clone for #columns_ident {
            fn clone(&self) -> Self {
                *self
            }
        }

        #[automatically_derived]
        impl #p::Copy for #columns_ident {}

        #[automatically_derived]
        impl #p::Debug for #columns_ident {
            fn fmt(&self, #f: &mut #p::Formatter<'_>) -> #p::FmtResult {
                #f.debug_struct(#columns_name)
                    #(#debug_fields)*
                    .finish()
            }
        }

        impl #ident {
            #[doc = #fn_doc]
            pub const fn columns() -> #columns_ident {
                #columns_ident {
                    #(#inits,)*
                }
            }
        }
    }
}

/// The spans of the first and last tokens of a type: an expression whose
/// first and last tokens carry them spans the whole type.
fn span_ends(ty: &syn::Type) -> (Span, Span) {
    let tokens: Vec<TokenTree> = ty.to_token_stream().into_iter().collect();
    let first = tokens.first().map_or_else(Span::call_site, TokenTree::span);
    let last = match tokens.last() {
        Some(TokenTree::Group(group)) => group.span_close(),
        Some(token) => token.span(),
        None => first,
    };
    (first, last)
}
