#!/usr/bin/env bash
# `make bench`: ncclrun side by side with what users would run instead, in
# one run, on this machine. Prints a markdown table (docs/performance.md
# shows one and how to read it). Nothing is asserted: these are figures.
#
# Knobs (environment):
#   NCCLRUN=bin/ncclrun  the binary under test (make bench builds it)
#   RUNS=5               runs per relay/memory variant (medians are reported)
#   SIZE=256MiB          the NCCL INFO file relayed, and the no-newline line
#   RANKS=64 RANKS_SIZE=64MiB   the interleaved-ranks memory case
#   START_RUNS=200       runs per start-up variant
#   LAT_N=500            partial-line round trips per variant
#   GOBENCH=1            also run the matcher's go test -bench (flatness)
#   BENCH_TMP=/tmp       where the temporary directory goes (not the repo)
set -euo pipefail
cd "$(dirname "$0")/.."

NCCLRUN=${NCCLRUN:-bin/ncclrun}
RUNS=${RUNS:-5}
SIZE=${SIZE:-256MiB}
RANKS=${RANKS:-64}
RANKS_SIZE=${RANKS_SIZE:-64MiB}
START_RUNS=${START_RUNS:-200}
LAT_N=${LAT_N:-500}
GOBENCH=${GOBENCH:-1}

die() { echo "bench: $*" >&2; exit 1; }
[ -x "$NCCLRUN" ] || die "$NCCLRUN not built (run make bench, or make build)"
NCCLRUN=$(cd "$(dirname "$NCCLRUN")" && pwd)/$(basename "$NCCLRUN")

if [ ! -x /usr/bin/time ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "bench: installing GNU time (/usr/bin/time)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null || die "apt-get install time failed"
  else
    die "/usr/bin/time (GNU time, apt package 'time') is needed for peak RSS"
  fi
fi
have() { command -v "$1" >/dev/null 2>&1; }
TINI=$(command -v tini || true)
DUMBINIT=$(command -v dumb-init || true)
[ -n "$TINI" ] || echo "bench: tini not installed (apt package tini): its rows are skipped" >&2
[ -n "$DUMBINIT" ] || echo "bench: dumb-init not installed (apt package dumb-init): its rows are skipped" >&2

tmp=$(mktemp -d "${BENCH_TMP:-${TMPDIR:-/tmp}}/ncclrun-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
B=$tmp/ncclbench
go build -o "$B" ./bench/ncclbench
F=$tmp/nccl.log
"$B" gen -size "$SIZE" -o "$F"
bytes=$(stat -c %s "$F")

load() { cut -d' ' -f1-3 /proc/loadavg; }
# median of numbers on stdin
median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) {print "nan"; exit}; if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }
# time_ms N CMD...: median wall ms of N runs
time_ms() { local n=$1; shift; "$B" time -n "$n" -warmup 1 -- "$@" | field median_ms; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2fx", a/b}'; }
mbps() { awk -v ms="$1" -v b="$bytes" 'BEGIN {printf "%.0f", b/1048576/(ms/1000)}'; }
# peak_kib N CMD...: median over N runs of GNU time's maximum RSS (KiB)
# of the whole process tree (the largest process in it).
peak_kib() {
  local n=$1; shift
  for _ in $(seq "$n"); do
    /usr/bin/time -v -o "$tmp/time.txt" "$@" >/dev/null 2>"$tmp/stderr.txt" || { cat "$tmp/stderr.txt" >&2; die "$* failed"; }
    sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp/time.txt"
  done | median
}
mib() { awk -v k="$1" 'BEGIN {printf "%.1f MiB", k/1024}'; }

echo "# ncclrun bench ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load before: $(load))"
echo
echo "ncclrun: $("$NCCLRUN" version 2>/dev/null | head -1); file: $(numfmt --to=iec-i --suffix=B "$bytes") of NCCL INFO lines; medians of $RUNS runs"
echo

# --- relay -----------------------------------------------------------
echo "## Relay: the same bytes through each, into a pipe"
echo
echo "| variant | median | vs cat relay | MiB/s |"
echo "|---|---|---|---|"
# Variants run round-robin (one run of each per round, after a warm-up
# round), so that a burst of load from elsewhere hits them all alike.
export F NCCLRUN TINI DUMBINIT
labels=() cmds=()
add() { labels+=("$1"); cmds+=("$2"); }
add "\`cat F \| cat \| cat\` (plain cat relay)" 'cat "$F" | cat | cat >/dev/null'
add "\`cat F \| cat\` (no relay at all)" 'cat "$F" | cat >/dev/null'
[ -n "$TINI" ] && add "\`tini -s -- cat F \| cat\` (tini does not relay)" '"$TINI" -s -- cat "$F" | cat >/dev/null'
[ -n "$DUMBINIT" ] && add "\`dumb-init cat F \| cat\` (does not relay)" '"$DUMBINIT" cat "$F" | cat >/dev/null'
add "\`ncclrun run --no-watch -- cat F \| cat\` (exec, no relay)" '"$NCCLRUN" run --no-watch -- cat "$F" | cat >/dev/null'
add "**\`ncclrun run -- cat F \| cat\`** (relay + diagnosis tap)" '"$NCCLRUN" run -- cat "$F" 2>/dev/null | cat >/dev/null'
for round in $(seq 0 "$RUNS"); do
  for i in "${!cmds[@]}"; do
    t=$("$B" time -n 1 -warmup 0 -- sh -c "${cmds[$i]}" | field median_ms)
    [ "$round" = 0 ] || echo "$t" >>"$tmp/relay.$i"
  done
done
base=$(median <"$tmp/relay.0")
for i in "${!cmds[@]}"; do
  t=$(median <"$tmp/relay.$i")
  echo "| ${labels[$i]} | ${t} ms | $(ratio "$t" "$base") | $(mbps "$t") |"
done
"$NCCLRUN" run --report "$tmp/report.json" -- cat "$F" 2>/dev/null | cat >/dev/null
dropped=$(sed -n 's/.*"tap_dropped_bytes": *\([0-9]*\).*/\1/p' "$tmp/report.json")
dropped=${dropped:-0}
echo
echo "Diagnosis saw $(awk -v d="$dropped" -v b="$bytes" 'BEGIN {printf "%.1f%%", 100*(b-d)/b}') of the relayed bytes in a last run (tap_dropped_bytes: $dropped; the relay never waits for it)."
echo

# --- start-up ----------------------------------------------------------
echo "## Start-up: \`X -- true\`, median of $START_RUNS runs"
echo
echo "| variant | median | vs tini |"
echo "|---|---|---|"
direct=$(time_ms "$START_RUNS" true)
tini_ms=""
[ -n "$TINI" ] && tini_ms=$(time_ms "$START_RUNS" "$TINI" -s -- true)
ref=${tini_ms:-$direct}
srow() { local label=$1; shift; local t; t=$(time_ms "$START_RUNS" "$@"); echo "| $label | ${t} ms | $(awk -v a="$t" -v b="$ref" 'BEGIN {printf "%+.2f ms", a-b}') |"; }
echo "| \`true\` alone | ${direct} ms | $(awk -v a="$direct" -v b="$ref" 'BEGIN {printf "%+.2f ms", a-b}') |"
[ -n "$TINI" ] && echo "| \`tini -s -- true\` | ${tini_ms} ms | +0.00 ms |"
[ -n "$DUMBINIT" ] && srow "\`dumb-init true\`" "$DUMBINIT" true
srow "\`ncclrun version\` (Go runtime + init only)" "$NCCLRUN" version
srow "\`ncclrun run --no-watch -- true\` (preflight + exec)" "$NCCLRUN" run --no-watch -- true
srow "**\`ncclrun run -- true\`**" "$NCCLRUN" run -- true
echo

# --- memory ------------------------------------------------------------
echo "## Peak RSS (GNU time -v: largest process of the tree), median of $RUNS runs"
echo
echo "| case | under ncclrun run | the child alone | under tini |"
echo "|---|---|---|---|"
mrow() { # label cmd... (the child)
  local label=$1; shift
  local a b c="n/a"
  a=$(peak_kib "$RUNS" "$NCCLRUN" run -- "$@")
  b=$(peak_kib "$RUNS" "$@")
  [ -n "$TINI" ] && c=$(mib "$(peak_kib "$RUNS" "$TINI" -s -- "$@")")
  echo "| $label | **$(mib "$a")** | $(mib "$b") | $c |"
}
mrow "\`true\`" true
mrow "one $SIZE line, no newline" "$B" longline -size "$SIZE"
mrow "$RANKS ranks interleaving $RANKS_SIZE of INFO lines" "$B" ranks -n "$RANKS" -size "$RANKS_SIZE"
mrow "cat of the $SIZE INFO file" cat "$F"
echo

# --- partial-line latency ---------------------------------------------
echo "## Partial line: one byte, no newline, from the child to the reader of the supervisor's stdout ($LAT_N round trips)"
echo
echo "| variant | median | p99 | max |"
echo "|---|---|---|---|"
lrow() {
  local label=$1; shift
  local out; out=$("$B" latency -n "$LAT_N" -- "$@" 2>/dev/null)
  echo "| $label | $(echo "$out" | field median_us) µs | $(echo "$out" | field p99_us) µs | $(echo "$out" | field max_us) µs |"
}
lrow "child alone (stdin→child→stdout)" "$B" echo-partial
[ -n "$TINI" ] && lrow "\`tini -s --\`" "$TINI" -s -- "$B" echo-partial
[ -n "$DUMBINIT" ] && lrow "\`dumb-init\`" "$DUMBINIT" "$B" echo-partial
lrow "**\`ncclrun run --\`** (through the relay)" "$NCCLRUN" run -- "$B" echo-partial
echo

# --- matcher flatness (go test -bench) --------------------------------
if [ "$GOBENCH" = 1 ]; then
  echo "## Matcher: healthy INFO lines per catalog size (go test -bench, median of $RUNS)"
  echo
  echo "| benchmark | ns/line | MB/s |"
  echo "|---|---|---|"
  go test -run '^$' -bench 'MatcherFeedHealthy|PrefilterScan' -count "$RUNS" ./diagnosis/ >"$tmp/gobench.txt"
  for name in $(awk '/^Benchmark/ {sub(/-[0-9]+$/, "", $1); print $1}' "$tmp/gobench.txt" | awk '!seen[$0]++'); do
    ns=$(awk -v n="$name" '{x=$1; sub(/-[0-9]+$/, "", x)} x==n {print $3}' "$tmp/gobench.txt" | median)
    mb=$(awk -v n="$name" '{x=$1; sub(/-[0-9]+$/, "", x)} x==n {print $5}' "$tmp/gobench.txt" | median)
    echo "| ${name#Benchmark} | $ns | $mb |"
  done
  echo
fi

echo "Load after: $(load)."
