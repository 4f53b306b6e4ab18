#!/usr/bin/env bash
# The body of scripts/test.sh, run with LEASEHOLD_TEST_AZURITE pointing at a
# running Azurite.
set -euo pipefail
cd "$(dirname "$0")/.."
for example in quickstart transfer wiki_edit last_writer_wins init_once leader scheduled_jobs; do
    echo "== example $example (memory)"
    env -u AZURE_STORAGE_CONNECTION_STRING cargo run --quiet --example "$example"
    echo "== example $example (Azurite)"
    AZURE_STORAGE_CONNECTION_STRING="$LEASEHOLD_TEST_AZURITE" cargo run --quiet --example "$example"
done
cargo test --workspace --no-fail-fast
