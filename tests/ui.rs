//! Compile-time diagnostics of `#[derive(Entity)]`, pinned with trybuild.
//!
//! Each `tests/ui/*.rs` case holds one kind of mistake; its `.stderr` is what
//! the user sees. Every case is only checked, never built: a case that must
//! compile cleanly ends with one deliberate `compile_error!`, so its expected
//! output is that error alone (see `warning_free_public_entity.rs`).
//! Regenerate the messages with `TRYBUILD=overwrite cargo test --test ui` and
//! review every change.

#[test]
fn trybuild_diagnostics() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
