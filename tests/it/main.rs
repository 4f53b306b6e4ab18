//! The integration tests, in one binary so CI links one test executable
//! instead of one per file. (`tests/ui.rs` (trybuild) and `tests/torture.rs`
//! (its own harness) stay apart; the operator command's tests are in
//! `cli/tests/`.)
//!
//! The conformance runs (`memory`, `azurite`, `emulator`) and the library's
//! own checks they run (`checks`) need the `conformance` feature:
//! `cargo test --features conformance --test it`.
//! Tests that need Azurite run through `scripts/with-azurite.sh`; without
//! it they skip with a notice, and fail when `CI` is set. The Azurite
//! conformance checks wait in real time for leases to run out: give them
//! enough test threads to run side by side (scripts/test.sh runs them on
//! their own, after everything else, with 48).

// `checks!` (tests/it/checks) expands once per item of a check module.
#![recursion_limit = "256"]

#[path = "../support/mod.rs"]
mod support;

#[cfg(any(feature = "conformance", clippy))]
mod azurite;
#[cfg(any(feature = "conformance", clippy))]
mod checks;
#[cfg(any(feature = "conformance", clippy))]
mod emulator;
#[cfg(any(feature = "conformance", clippy))]
mod memory;
#[cfg(any(feature = "conformance", clippy))]
mod transfer;
mod txn_input;

mod api_surface;
mod architecture;
mod azure_backend;
mod bad_input;
mod changelog;
#[cfg(feature = "chrono")]
mod chrono_fields;
mod codec;
mod composite_keys;
mod derive;
mod differential;
mod enums;
mod error_texts;
mod errors;
mod fault_proxy;
mod key_builders;
mod layers;
mod lock_errors;
mod mapping_budgets;
mod properties;
mod secrets;
mod storage_unavailable;
mod storm;
#[cfg(feature = "opentelemetry")]
mod telemetry;
mod unit_drop;
mod write_results;

/// Without the `opentelemetry` feature the metrics checks are left out:
/// fine for a quick local run, never in CI.
#[cfg(not(feature = "opentelemetry"))]
#[test]
fn metrics_checks_need_the_opentelemetry_feature() {
    assert!(
        std::env::var_os("CI").is_none(),
        "CI runs the metrics checks: test with `--features opentelemetry`"
    );
    eprintln!("notice: the metrics checks need `--features opentelemetry`; left out");
}

/// Without the `conformance` feature the conformance runs are left out:
/// fine for a quick local run, never in CI.
#[cfg(not(any(feature = "conformance", clippy)))]
#[test]
fn conformance_runs_need_the_conformance_feature() {
    assert!(
        std::env::var_os("CI").is_none(),
        "CI runs the conformance suite: test with `--features conformance`"
    );
    eprintln!("notice: the conformance runs need `--features conformance`; left out");
}
