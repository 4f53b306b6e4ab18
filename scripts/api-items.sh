#!/usr/bin/env bash
# Counts the items of leasehold's public API as rustdoc lists them
# (target/doc/leasehold/all.html, built by `cargo doc`) and fails when there
# are more than the budget. `-v` prints them.
set -euo pipefail
cd "$(dirname "$0")/.."
# 105 when the surface was cut to what users use; 106 since fenced writes,
# indexes and entity mapping added `Fence`, `IndexReport`, `DynamicEntity`
# and the `PropertyCodec` derive, and `PropertiesIntoIter` became a std type;
# 113 since units report what storage holds and operators resolve and prune
# lock blobs: `CommitOutcome`, `FinishedBy`, `Resolution`, `ResolveAction`,
# `ResolveRow`, `RowShows`, `PruneReport`; 116 since reads by partition key
# alone, key lists mixing kinds and structured duplicates added
# `ConstantRowKey`, `IntoPartitionKeys` and `DuplicateValue`; 117 since an
# acquire reports the blob's ETag (`backend::AcquiredLease`), which lets a
# lock taken back skip its lock-blob read; 119 since stores manage tables
# (`backend::TableCreation`, what a create found) and query pages carry a
# token a client can hold (`query::ContinuationToken`); 121 since counting,
# faults, tracing, metrics and fences are layers of one trait that users
# can write too (`backend::Layer`); 123 since stores sweep what leasehold
# leaves behind (`store::SweepOptions`, `store::SweepReport`); 122 since
# `lock::PruneReport` folded into `SweepReport` (its counts are plain fields
# there) with `Store::prune_locks` gone; 124 since a layer is one method
# (`backend::Request` public, `BlobBackend::lease` taking `LeaseAction` and
# answering `LeaseReply`, which replaced `AcquiredLease`); 119 since the test
# kit (`testing`: counting and fault layers) is behind feature `conformance`;
# 110 since secrets go to the Azure builder as strings (`AccountKey`,
# `SasToken`, `Credentials` gone), a batch answers `Option<Versioned<E>>`
# (`BatchResult` gone), decode errors go to a function (`OnDecodeError`,
# `DecodeErrors` gone), `break_lease` answers `Option<Duration>`
# (`BreakOutcome` gone), a guard says `is_handed_over` (`Acquisition` gone),
# and `stream` re-exports only `Stream` and `TryStreamExt`.
budget=110
page=target/doc/leasehold/all.html
[[ -f $page ]] || cargo doc --no-deps -p leasehold --quiet
items=$(grep -o '<li><a href="[^"]*">' "$page" | sed 's/<li><a href="\(.*\)">/\1/')
count=$(printf '%s\n' "$items" | grep -c .)
if [[ ${1:-} == -v ]]; then printf '%s\n' "$items"; fi
echo "public API items: $count (budget $budget)"
(( count <= budget ))
