//! `#[entity(chunked)]`: the names a chunked field's chunks take, checked
//! against the other stored names, and the generated
//! `Entity::is_own_property`. The layout is documented in leasehold's
//! `entity::chunked` module.

use leasehold_rules as rules;
use proc_macro2::TokenStream;
use quote::quote;

use crate::errors::Errors;
use crate::model::{Field, Model, Role};

/// The property holding a chunked field's chunk count.
pub fn count_name(name: &str) -> String {
    format!("{name}_count")
}

/// The most chunks a value can take: 1 MiB in chunks of 64 KiB.
const MAX_CHUNKS: usize = 16;

/// Whether `property` is a name one of the chunks of `field` takes.
fn is_chunk_of(property: &str, field: &str) -> bool {
    property
        .strip_prefix(field)
        .and_then(|rest| rest.strip_prefix('_'))
        .is_some_and(|rest| {
            rest == "count" || (!rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
        })
}

/// Checks the chunk names of every chunked field: valid property names,
/// and none taken by another field.
pub fn check(fields: &[Field<'_>], errors: &mut Errors) {
    let stored: Vec<(&Field<'_>, &str)> = fields
        .iter()
        .filter_map(|f| match &f.role {
            Role::Property(p) => Some((f, p.name.as_str())),
            _ => None,
        })
        .collect();
    for (field, name) in &stored {
        let Role::Property(prop) = &field.role else {
            continue;
        };
        if !prop.chunked {
            continue;
        }
        for longest in [count_name(name), format!("{name}_{MAX_CHUNKS}")] {
            if let Some(why) = rules::property_name_problem(&longest)
                .or_else(|| rules::reserved_property_problem(&longest))
            {
                errors.spanned(
                    field.ident,
                    format!(
                        "chunked field `{}` stores its chunks as `{name}_1`, ... and `{name}_count`, but {longest:?} {why}; `rename` the field",
                        field.ident
                    ),
                );
                break;
            }
        }
        for (other, other_name) in &stored {
            if is_chunk_of(other_name, name) {
                errors.spanned(
                    other.ident,
                    format!(
                        "`{}` is stored as `{other_name}`, a name the chunks of chunked field `{}` take (`{name}_1`, ..., `{name}_count`); `rename` one of them",
                        other.ident, field.ident
                    ),
                );
            }
        }
    }
}

/// `Entity::is_own_property`: a `match` on the stored names (the trait's
/// default searches `PROPERTY_NAMES`, and every read asks it of each stored
/// property), plus the chunks of chunked fields.
pub fn is_own_property(model: &Model<'_>) -> TokenStream {
    let mut names: Vec<String> = Vec::new();
    let mut chunked: Vec<&str> = Vec::new();
    for field in &model.fields {
        if let Role::Property(p) = &field.role {
            names.push(p.name.clone());
            if p.chunked {
                names.push(count_name(&p.name));
                chunked.push(p.name.as_str());
            }
        }
    }
    if let Some(expiry) = crate::expiry::own_name(model) {
        names.push(expiry);
    }
    let p = quote!(::leasehold::__private);
    // Mixed-site hygiene and a prefix keep it apart from the user's
    // constants (a parameter pattern would match a constant of its name).
    let name = proc_macro2::Ident::new("__name", proc_macro2::Span::mixed_site());
    let named = if names.is_empty() {
        quote!(false)
    } else {
        quote!(::core::matches!(#name, #(#names)|*))
    };
    let chunks = if chunked.is_empty() {
        TokenStream::new()
    } else {
        quote!(|| #p::is_chunk_of(#name, &[#(#chunked),*]))
    };
    quote! {
        fn is_own_property(#name: &#p::str) -> ::core::primitive::bool {
            #named #chunks
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_names() {
        assert!(is_chunk_of("body_3", "body"));
        assert!(is_chunk_of("body_count", "body"));
        assert!(!is_chunk_of("body", "body"));
        assert!(!is_chunk_of("body_x", "body"));
    }
}
