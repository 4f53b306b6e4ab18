#!/usr/bin/env bash
# Checks that every entry of the changelog carries the day it landed: each
# top-level list item under a `###` section (Changed, Removed, Added,
# Fixed) starts with `- *(YYYY-MM-DD)* `. Prints each undated entry with its
# line number and fails when there is one.
#
#   scripts/changelog-dates.sh [FILE]     (default: the repository's CHANGELOG.md)
set -euo pipefail
file="${1:-$(dirname "$0")/../CHANGELOG.md}"
[ -f "$file" ] || { echo "changelog-dates: no file $file" >&2; exit 2; }
awk -v file="$file" '
    /^## /  { in_section = 0 }
    /^### / { in_section = 1; next }
    in_section && /^[-*+][ \t]/ {
        if ($0 !~ /^- \*\([0-9][0-9][0-9][0-9]-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])\)\* /) {
            printf "%s:%d: entry without a date *(YYYY-MM-DD)* at its start: %s\n", file, NR, substr($0, 1, 70) > "/dev/stderr"
            bad++
        }
    }
    END {
        if (bad) {
            printf "changelog-dates: %d undated entr%s; start each with the day it lands, e.g. `- *(2026-11-29)* `\n", bad, (bad == 1 ? "y" : "ies") > "/dev/stderr"
            exit 1
        }
    }
' "$file"
