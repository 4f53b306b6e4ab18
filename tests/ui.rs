//! Compile-time diagnostics of `#[derive(Entity)]`, pinned with trybuild.
//!
//! Each `tests/ui/*.rs` case holds one mistake; its `.stderr` is the message
//! the user sees. Regenerate with `TRYBUILD=overwrite cargo test --test ui`
//! and review every changed message.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
