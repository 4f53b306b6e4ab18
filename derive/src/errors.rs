//! Collecting errors so that one compile reports every problem at once.

use std::fmt::Display;

use quote::ToTokens;

/// Errors found so far, each spanned at its own token.
#[derive(Default)]
pub struct Errors(Option<syn::Error>);

impl Errors {
    /// Records an error.
    pub fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(error),
            none => *none = Some(error),
        }
    }

    /// Records an error spanned at `tokens`.
    pub fn spanned(&mut self, tokens: impl ToTokens, message: impl Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    /// Records an error at `span`.
    pub fn at(&mut self, span: proc_macro2::Span, message: impl Display) {
        self.push(syn::Error::new(span, message));
    }

    /// Every error recorded, for a caller that cannot go on; a generic error
    /// if, against the caller's expectation, none was.
    pub fn into_error(self) -> syn::Error {
        self.0.unwrap_or_else(|| {
            syn::Error::new(
                proc_macro2::Span::call_site(),
                "#[derive(Entity)] cannot derive this item",
            )
        })
    }

    /// `Ok(value)` when nothing was recorded, else every error together.
    pub fn finish<T>(self, value: T) -> syn::Result<T> {
        match self.0 {
            None => Ok(value),
            Some(errors) => Err(errors),
        }
    }
}
