#!/usr/bin/env bash
# Runs every Fuzz* target of the module for a short time (default 10s each).
# Seeds live in each package's testdata/fuzz; a crash fails the run.
set -euo pipefail
t=${1:-10s}
cd "$(dirname "$0")/.."
found=0
while IFS= read -r pkg; do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for fn in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    found=1
    echo "fuzz $pkg $fn ($t)"
    go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$t" "$pkg"
  done
done < <(go list ./...)
[ "$found" = 1 ] || { echo "no fuzz targets found" >&2; exit 1; }
