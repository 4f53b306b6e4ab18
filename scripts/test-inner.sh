#!/usr/bin/env bash
# The body of scripts/test.sh, run with LEASEHOLD_TEST_AZURITE pointing at a
# running Azurite.
set -euo pipefail
cd "$(dirname "$0")/.."
# The conformance suite is the `conformance` feature; building the
# examples with the same features reuses one build of the library.
features=(--features leasehold/conformance)
# The Azurite conformance checks wait in real time for leases to run out
# (15 s to 2.5 min each): run them side by side.
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-48}"
for example in quickstart transfer wiki_edit last_writer_wins init_once leader scheduled_jobs; do
    echo "== example $example (memory)"
    env -u AZURE_STORAGE_CONNECTION_STRING cargo run --quiet "${features[@]}" --example "$example"
    echo "== example $example (Azurite)"
    AZURE_STORAGE_CONNECTION_STRING="$LEASEHOLD_TEST_AZURITE" cargo run --quiet "${features[@]}" --example "$example"
done
log="$(mktemp "${TMPDIR:-/tmp}/leasehold-test.XXXXXX")"
trap 'rm -f "$log"' EXIT
set +e
cargo test --workspace --no-fail-fast "${features[@]}" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
# One closing line for the whole run (cargo prints one per test binary).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed;/) p += $i; if ($(i+1) ~ /^failed;/) f += $i } }
     END { printf "total: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
