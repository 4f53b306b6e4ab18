//! `#[derive(Entity)]` for leasehold.
extern crate proc_macro;
use proc_macro::TokenStream;

/// See `leasehold::Entity`.
#[proc_macro_derive(Entity, attributes(entity))]
pub fn derive_entity(_input: TokenStream) -> TokenStream {
    TokenStream::new()
}
