#!/usr/bin/env bash
# Checks the normal (non-dev) dependency tree, with the default features and
# with every feature on:
#
# * no `number_prefix` (unmaintained, RUSTSEC-2025-0119; indicatif 0.17
#   brought it, 0.18 does not);
# * no `openssl-sys` and no `native-tls`: TLS is rustls with ring
#   (src/backend/azure/transport.rs), so no C TLS library is needed;
# * no `aws-lc-sys`: the crypto provider is ring, which builds without cmake;
# * exactly one version of `base64`.
#
# The last one rests on Cargo.lock: reqwest 0.13.5 and hyper-util 0.1.21
# moved to base64 0.23 while the azure_core 1.x line (typespec) is on 0.22,
# so the lock file keeps reqwest 0.13.4 and hyper-util 0.1.20 until
# typespec moves too. After a `cargo update` that undoes this:
#   cargo update -p reqwest --precise 0.13.4
#   cargo update -p hyper-util --precise 0.1.20
# (or, once typespec is on base64 0.23, let all three move together).
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
for features in "" "--all-features"; do
    # shellcheck disable=SC2086 # `features` is one flag or none.
    tree="$(cargo tree --locked --workspace -e normal $features --prefix none)"
    label="${features:-default features}"
    banned="$(grep -E '^(number_prefix|openssl-sys|openssl|native-tls|aws-lc-sys|aws-lc-rs) v' <<<"$tree" | sed -E 's/ \(\*\)$//' | sort -u || true)"
    if [ -n "$banned" ]; then
        echo "dep-tree ($label): crates that must stay out of the tree:" >&2
        echo "$banned" >&2
        status=1
    fi
    base64="$(grep -E '^base64 v' <<<"$tree" | sed -E 's/^(base64 v[^ ]+).*/\1/' | sort -u)"
    count="$(grep -c . <<<"$base64" || true)"
    if [ "$count" -ne 1 ]; then
        echo "dep-tree ($label): expected exactly one base64, found $count:" >&2
        echo "$base64" >&2
        echo "(see the comment at the top of scripts/dep-tree.sh)" >&2
        status=1
    fi
done
if [ "$status" -ne 0 ]; then
    exit "$status"
fi
echo "dep-tree: no number_prefix, openssl, native-tls or aws-lc; one base64 ($(sed 's/^base64 //' <<<"$base64"))"
