#!/usr/bin/env bash
# The body of scripts/test.sh, run with LEASEHOLD_TEST_AZURITE pointing at a
# running Azurite.
set -euo pipefail
cd "$(dirname "$0")/.."
# The conformance suite is the `conformance` feature; building the
# examples with the same features reuses one build of the library.
features=(--features leasehold/conformance)
for example in quickstart transfer wiki_edit last_writer_wins init_once leader scheduled_jobs; do
    echo "== example $example (memory)"
    env -u AZURE_STORAGE_CONNECTION_STRING cargo run --quiet "${features[@]}" --example "$example"
    echo "== example $example (Azurite)"
    AZURE_STORAGE_CONNECTION_STRING="$LEASEHOLD_TEST_AZURITE" cargo run --quiet "${features[@]}" --example "$example"
done
log="$(mktemp "${TMPDIR:-/tmp}/leasehold-test.XXXXXX")"
trap 'rm -f "$log"' EXIT
set +e
# Everything but the conformance suite on Azurite...
cargo test --workspace --no-fail-fast "${features[@]}" -- --skip azurite:: 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
# ... which then has Azurite to itself: its timed checks wait in real time
# for leases to run out (15 s to 2.5 min each), so they run side by side.
RUST_TEST_THREADS="${RUST_TEST_THREADS:-48}" \
    cargo test --no-fail-fast "${features[@]}" --test it azurite:: 2>&1 | tee -a "$log"
second=${PIPESTATUS[0]}
[ "$status" -ne 0 ] || status=$second
set -e
# One closing line for the whole run (cargo prints one per test binary).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed;/) p += $i; if ($(i+1) ~ /^failed;/) f += $i } }
     END { printf "total: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
