#!/usr/bin/env bash
# The body of scripts/test.sh, run with LEASEHOLD_TEST_AZURITE pointing at a
# running Azurite (and LEASEHOLD_TEST_AZURITE_OAUTH at the HTTPS one with
# OAuth, whose checks, `azurite::oauth::`, run last).
set -euo pipefail
cd "$(dirname "$0")/.."
# The conformance suite is the `conformance` feature, `chrono` adds the
# chrono field types and their tests, `opentelemetry` the metrics and
# theirs; building the examples with the same
# features reuses one build of the library.
features=(--features leasehold/conformance,leasehold/chrono,leasehold/opentelemetry)
log="$(mktemp "${TMPDIR:-/tmp}/leasehold-test.XXXXXX")"
ui="$(mktemp "${TMPDIR:-/tmp}/leasehold-ui.XXXXXX")"
trap 'rm -f "$log" "$ui"' EXIT
# Build every test once, so the runs below never wait for each other's build
# (nor for the build directory's lock). The compile-fail test builds the
# library without `chrono`: its types would join the lists of implementors
# that the expected diagnostics quote.
cargo test --workspace --no-run --quiet "${features[@]}"
cargo test --no-run --quiet --features leasehold/conformance --test ui
# Nothing runs at a lowered priority: beside other busy processes on the
# machine (a shared CI runner) such work would barely get the processor.
# The compile-fail diagnostics (their own target directory) compile while
# the examples, which mostly wait on Azurite, run.
cargo test --no-fail-fast --features leasehold/conformance --test ui >"$ui" 2>&1 &
ui_pid=$!
for example in quickstart transfer wiki_edit last_writer_wins init_once leader scheduled_jobs; do
    echo "== example $example (memory)"
    env -u AZURE_STORAGE_CONNECTION_STRING cargo run --quiet "${features[@]}" --example "$example"
    echo "== example $example (Azurite)"
    AZURE_STORAGE_CONNECTION_STRING="$LEASEHOLD_TEST_AZURITE" cargo run --quiet "${features[@]}" --example "$example"
done
set +e
status=0
# Remembers the first failure: `keep "${PIPESTATUS[0]}"` right after a run.
keep() { [ "$status" -ne 0 ] || status=$1; }
wait "$ui_pid"
keep $?
cat "$ui" | tee "$log"
# The tests that need no Azurite (unit tests, doctests) next, on their own.
cargo test --workspace --no-fail-fast "${features[@]}" --lib --bins 2>&1 | tee -a "$log"
keep "${PIPESTATUS[0]}"
cargo test --workspace --no-fail-fast "${features[@]}" --doc 2>&1 | tee -a "$log"
keep "${PIPESTATUS[0]}"
# The conformance suite and leasehold's own checks (`tests/it/checks`) on
# Azurite wait in real time for leases to run out (15 s to 2.5 min per
# check), so they run side by side, 48 at a time,
# with nothing else talking to this Azurite meanwhile: its timed checks need
# prompt answers (the suite's run on the OAuth Azurite comes last, for the
# same reason; checks where many contenders poll one lease take turns, see
# `Ctx::contention_turn`).
# The checks that measure waits and turns on real time (`fairness`, the
# `lease` check of the fairness bound, which holds one lease through 20 s of
# hand-overs, and the `lease` checks timing renewals against a reply's
# delay) run on their own right after: among 48 others their bounds would
# also measure the load.
prompt=(azurite::fairness:: azurite::lease::ambiguous_renewals azurite::lease::reservation_log
    azurite::lease::the_fairness_bound)
RUST_TEST_THREADS="${RUST_TEST_THREADS:-48}" \
    cargo test --no-fail-fast "${features[@]}" --test it -- azurite:: --skip azurite::oauth:: \
        --skip azurite::fairness:: --skip ambiguous_renewals --skip reservation_log \
        --skip the_fairness_bound 2>&1 | tee -a "$log"
keep "${PIPESTATUS[0]}"
cargo test --no-fail-fast "${features[@]}" --test it -- "${prompt[@]}" 2>&1 | tee -a "$log"
keep "${PIPESTATUS[0]}"
# Then the integration tests that share Azurite (fault proxy, SAS, CLI,
# multi-process torture).
cargo test --no-fail-fast "${features[@]}" --test it --test torture -- --skip azurite:: 2>&1 | tee -a "$log"
keep "${PIPESTATUS[0]}"
cargo test --no-fail-fast "${features[@]}" -p leasehold-cli --test cli 2>&1 | tee -a "$log"
keep "${PIPESTATUS[0]}"
# Last, the conformance suite and the checks marked `(oauth)` through Entra
# ID tokens on the OAuth Azurite.
RUST_TEST_THREADS="${RUST_TEST_THREADS:-48}" \
    cargo test --no-fail-fast "${features[@]}" --test it azurite::oauth:: 2>&1 | tee -a "$log"
keep "${PIPESTATUS[0]}"
# Last, the secrets checks once more with `azure_core`'s `debug` feature,
# which any crate in a program can turn on and which stops the SDK from
# redacting URLs and headers in its logs and `Debug` output: no secret may
# show even so (leasehold's transport ends the pipeline before the SDK's
# logging policy). It builds the library once more, with that feature.
cargo test --no-fail-fast --features leasehold/conformance,leasehold/chrono,leasehold/opentelemetry,azure_core/debug \
    --test it -- secrets:: azure_backend::sas_credentials_work_and_no_secret_reaches_the_logs 2>&1 | tee -a "$log"
keep "${PIPESTATUS[0]}"
set -e
# The failures' own output again, gathered at the end where a truncated log
# still shows it (cargo prints it after each test binary, among the rest).
awk '/^failures:$/ { on = 1 } on { print } /^test result:/ { on = 0 }' "$log"
# One closing line for the whole run (cargo prints one per test binary).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed;/) p += $i; if ($(i+1) ~ /^failed;/) f += $i } }
     END { printf "total: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
