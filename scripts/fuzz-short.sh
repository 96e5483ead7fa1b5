#!/usr/bin/env bash
# Runs every Fuzz* target of the module for a short time (default 10s each).
# Seeds live in each package's testdata/fuzz; a crash fails the run.
set -euo pipefail
t=${1:-10s}
cd "$(dirname "$0")/.."
found=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# fuzz_one runs one target. Go's fuzzing coordinator sometimes ends a run
# with "context deadline exceeded" when -fuzztime expires while a worker is
# slow to answer (seen on a loaded 2-core machine, with no failing input).
# That one outcome is retried once; a real failure writes its input under
# testdata/fuzz and fails at once.
fuzz_one() {
  local try
  for try in 1 2; do
    if go test -run '^$' -fuzz "^${2}\$" -fuzztime "$t" "$1" >"$log" 2>&1; then
      cat "$log"; return 0
    fi
    cat "$log"
    if grep -q 'Failing input written' "$log" || ! grep -q 'context deadline exceeded' "$log" || [ "$try" = 2 ]; then
      return 1
    fi
    echo "fuzz $1 $2: the coordinator timed out without a failing input; once more"
  done
}
while IFS= read -r pkg; do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for fn in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    found=1
    echo "fuzz $pkg $fn ($t)"
    fuzz_one "$pkg" "$fn"
  done
done < <(go list ./...)
[ "$found" = 1 ] || { echo "no fuzz targets found" >&2; exit 1; }
