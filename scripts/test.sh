#!/usr/bin/env bash
# Runs every test: installs the pinned Azurite (npm ci), starts it on free
# loopback ports, runs the whole test suite (unit, conformance on memory and
# on Azurite, doctests, UI tests) and the examples on both backends, then
# stops Azurite.
set -euo pipefail
cd "$(dirname "$0")/.."
exec scripts/with-azurite.sh scripts/test-inner.sh
