#!/usr/bin/env bash
# Checks that the dependency tree, with every feature on, holds the
# supported Azure SDK line (azure_core 1.x, azure_storage_blob 1.x) and no
# crate of the 0.x line (azure_core 0.x, azure_data_tables, azure_storage,
# azure_storage_blobs, azure_identity 0.x).
set -euo pipefail
cd "$(dirname "$0")/.."
tree="$(cargo tree --workspace -e normal --all-features --prefix none)"
old="$(grep -E '^(azure_core v0\.|azure_identity v0\.|azure_data_tables v|azure_storage v|azure_storage_blobs v|azure_svc_)' <<<"$tree" | sort -u || true)"
if [ -n "$old" ]; then
    echo "sdk-line: crates of the 0.x Azure SDK line are in the tree:" >&2
    echo "$old" >&2
    exit 1
fi
for crate in 'azure_core v1\.' 'azure_storage_blob v1\.' 'azure_identity v1\.'; do
    if ! grep -qE "^$crate" <<<"$tree"; then
        echo "sdk-line: no ${crate%\\.}.x in the tree" >&2
        exit 1
    fi
done
echo "sdk-line: azure_core 1.x, azure_storage_blob 1.x, azure_identity 1.x; no 0.x Azure crate"
