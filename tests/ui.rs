//! Compile-time diagnostics of `#[derive(Entity)]`, pinned with trybuild.
//!
//! Each `tests/ui/*.rs` case holds one kind of mistake; its `.stderr` is what
//! the user sees. Cases in `tests/ui/pass/` must compile without warnings.
//! Regenerate the messages with `TRYBUILD=overwrite cargo test --test ui` and
//! review every change.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
