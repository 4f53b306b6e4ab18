//! `#[derive(Entity)]` for leasehold.
//!
//! The derive is documented on its re-export, `leasehold::Entity`. Its
//! pipeline has one module per stage: `attr` reads the `#[entity(...)]`
//! attributes, `build` checks them against the service's rules (the
//! `leasehold-rules` crate, which the runtime checks with too) and builds
//! the validated `model` (the types `expand` trusts), and `expand` turns
//! the model into code. Every problem found along the way is reported,
//! each at the token that causes it.

extern crate proc_macro;

mod attr;
mod build;
mod chunked;
mod codec;
mod errors;
mod expand;
mod expiry;
mod index;
mod keys;
mod model;
mod private;

use proc_macro::TokenStream;
use syn::{DeriveInput, parse_macro_input};

/// Derives `leasehold::entity::Entity`; see `leasehold::Entity`.
#[proc_macro_derive(Entity, attributes(entity))]
pub fn derive_entity(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match model::Model::from_input(&input) {
        Ok(model) => expand::expand(&model).into(),
        Err(errors) => errors.to_compile_error().into(),
    }
}

/// Derives `leasehold::entity::PropertyCodec` for a fieldless enum; see
/// `leasehold::PropertyCodec`.
#[proc_macro_derive(PropertyCodec, attributes(entity))]
pub fn derive_property_codec(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match codec::derive(&input) {
        Ok(tokens) => tokens.into(),
        Err(errors) => errors.to_compile_error().into(),
    }
}
