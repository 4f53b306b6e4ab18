//! Paths into `leasehold::__private`, the support the generated code
//! calls.

use proc_macro2::{Span, TokenStream};
use quote::quote_spanned;

/// `::leasehold::__private` spanned at `span`: code meant to point at a field
/// must carry the field's span in every token, paths included.
pub(crate) fn private_at(span: Span) -> TokenStream {
    quote_spanned!(span=> ::leasehold::__private)
}
