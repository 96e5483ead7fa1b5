#!/usr/bin/env bash
# `make bench`: ncclrun's targets in users' terms, each as a ratio or a
# figure against a reference measured in this same run on this machine:
#
#   start-up of `ncclrun run -- true`   <= 1.5x a minimal Go supervisor
#                                       (bench/minisuper; a static Go hello
#                                       beside it for the record)
#   a child printing RATE (200 MiB/s)   slowed by at most 5%, and no line
#   of mixed INFO and WARN lines        the catalog could match lost
#                                       (--report's tap counters)
#   relay at pipe speed                 reported against `cat F | cat | cat`,
#                                       wall and CPU time per GiB: no target
#   explain of plain INFO logs          >= 200 MiB/s (`grep -c` beside it)
#   explain of WARN-only logs           >= 100 MiB/s
#   peak RSS                            <= 16 MiB, 20 MiB on compressed input
#
# The last table says which target each figure meets or misses; nothing is
# asserted. Wall times are the targets; CPU times beside them say what a
# loaded machine made of them.
#
# Knobs (environment):
#   NCCLRUN=bin/ncclrun     the binary under test (make bench builds it)
#   RUNS=5                  rounds of the explain comparisons (medians)
#   RELAY_RUNS=15           rounds of the relay comparisons (a pipe's speed
#                           varies run to run with where the kernel places
#                           its two ends: the ratio is the median of each
#                           round's ratio, command and reference side by side)
#   SIZE=256MiB             the INFO log, the mixed log, the long line
#   WARN_SIZE=64MiB         the WARN-only log
#   RSS_RUNS=3              runs per peak-RSS figure
#   PROCS=1100000           distinct processes of the many-processes log
#   START_RUNS=200          runs per start-up variant (in START_ROUNDS rounds)
#   START_ROUNDS=5
#   RATE=200MiB             the paced child's rate
#   LAT_N=500               partial-line round trips per variant
#   BENCH_TMP=/tmp          where the temporary directory goes (not the repo)
set -euo pipefail
cd "$(dirname "$0")/.."

NCCLRUN=${NCCLRUN:-bin/ncclrun}
RUNS=${RUNS:-5}
RELAY_RUNS=${RELAY_RUNS:-15}
SIZE=${SIZE:-256MiB}
WARN_SIZE=${WARN_SIZE:-64MiB}
RSS_RUNS=${RSS_RUNS:-3}
PROCS=${PROCS:-1100000}
START_RUNS=${START_RUNS:-200}
START_ROUNDS=${START_ROUNDS:-5}
RATE=${RATE:-200MiB}
LAT_N=${LAT_N:-500}

die() { echo "bench: $*" >&2; exit 1; }
[ -x "$NCCLRUN" ] || die "$NCCLRUN not built (run make bench, or make build)"
NCCLRUN=$(cd "$(dirname "$NCCLRUN")" && pwd)/$(basename "$NCCLRUN")

# Every reference is required: a table with a missing reference would not
# say what it claims. Debian/Ubuntu packages in parentheses.
need() { command -v "$1" >/dev/null 2>&1 || die "$1 not found (apt package $2): a figure is a ratio against it"; }
[ -x /usr/bin/time ] || die "/usr/bin/time not found (apt package time): GNU time measures peak RSS"
need grep grep
need go golang
need bc bc
need gzip gzip
need numfmt coreutils

tmp=$(mktemp -d "${BENCH_TMP:-${TMPDIR:-/tmp}}/ncclrun-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
B=$tmp/ncclbench
go build -o "$B" ./bench/ncclbench
HELLO=$tmp/hello
CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$HELLO" ./bench/hello
MINI=$tmp/minisuper
CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$MINI" ./bench/minisuper
INFO=$tmp/info.log
"$B" gen -size "$SIZE" -o "$INFO"
WARN=$tmp/warn.log
"$B" mixed -size "$WARN_SIZE" -warn-every 1 -o "$WARN" >/dev/null
MIXED=$tmp/mixed.log
"$B" mixed -size "$SIZE" -warn-every 100 -o "$MIXED" >"$tmp/mixed.count"
MANY=$tmp/procs.log
"$B" mixed -size "$((PROCS * 128))" -warn-every 1 -procs "$PROCS" -o "$MANY" >/dev/null
export INFO WARN MIXED MANY NCCLRUN B

load() { cut -d' ' -f1-3 /proc/loadavg; }
med() { sort -g | awk '{a[NR]=$1} END {if (NR==0) {print "nan"; exit}; if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a/b}'; }
mibs() { awk -v ms="$1" -v b="$2" 'BEGIN {printf "%.0f", b/1048576/(ms/1000)}'; }
size() { stat -c %s "$1"; }
hsize() { numfmt --to=iec-i --suffix=B "$1"; }
countf() { sed -n "s/.*$1=\([0-9]*\).*/\1/p" "$2"; }
atmost() { awk -v v="$1" -v t="$2" 'BEGIN {print (v <= t) ? "met" : "**missed**"}'; }
atleast() { awk -v v="$1" -v t="$2" 'BEGIN {print (v >= t) ? "met" : "**missed**"}'; }
mib() { awk -v k="$1" 'BEGIN {printf "%.1f MiB", k/1024}'; }
jnum() { local v; v=$(sed -n "s/.*\"$1\": *\([0-9]*\).*/\1/p" "$2" | head -1); echo "${v:-0}"; }

echo "# ncclrun bench ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), load before: $(load))"
echo
echo "ncclrun $("$NCCLRUN" version 2>/dev/null | head -1 | cut -d' ' -f2-); logs: $(hsize "$(size "$INFO")") of NCCL INFO lines, the same size with a WARN line every 100 lines, $(hsize "$(size "$WARN")") of WARN lines; every figure against its reference measured in this run, the variants round-robin."
echo

# --- start-up ------------------------------------------------------------
per=$((START_RUNS / START_ROUNDS))
slabels=() scmds=()
sadd() { slabels+=("$1"); scmds+=("$2"); }
sadd "minimal Go supervisor: \`minisuper true\` (the reference)" "$MINI true"
sadd "static Go hello (for the record)" "$HELLO"
sadd "\`true\`" "true"
sadd "\`ncclrun version\`" "$NCCLRUN version"
sadd "\`ncclrun run --no-watch -- true\`" "$NCCLRUN run --no-watch -- true"
sadd "**\`ncclrun run -- true\`**" "$NCCLRUN run -- true"
for _ in $(seq "$START_ROUNDS"); do
  for i in "${!scmds[@]}"; do
    # shellcheck disable=SC2086 # the command is words
    "$B" time -n "$per" -warmup 2 -- ${scmds[$i]} | field median_ms >>"$tmp/start.$i"
  done
done
for i in "${!scmds[@]}"; do smed[i]=$(med <"$tmp/start.$i"); done
mini_ms=${smed[0]}
hello_ms=${smed[1]}
run_ms=${smed[5]}
echo "## Start-up: median of $START_ROUNDS rounds of $per runs"
echo
echo "| command | median | vs minimal supervisor | vs static Go hello |"
echo "|---|---|---|---|"
for i in "${!scmds[@]}"; do
  echo "| ${slabels[$i]} | ${smed[$i]} ms | $(ratio "${smed[$i]}" "$mini_ms")x | $(ratio "${smed[$i]}" "$hello_ms")x |"
done
echo

# --- relay -------------------------------------------------------------------
# Each relay writes into a pipe that ncclbench drains; wall time of the
# whole command. The paced rows are a child printing RATE: ncclrun must not
# make it slower than it is alone.
rlabels=() rcmds=()
radd() { rlabels+=("$1"); rcmds+=("$2"); }
radd "INFO: \`cat F | cat | cat\` (the reference)" "sh -c 'cat \"\$INFO\" | cat | cat'"
radd "INFO: **\`ncclrun run -- cat F\`**" "\"\$NCCLRUN\" run -- cat \"\$INFO\""
radd "WARN: \`cat F | cat | cat\` (the reference)" "sh -c 'cat \"\$WARN\" | cat | cat'"
radd "WARN: **\`ncclrun run -- cat F\`**" "\"\$NCCLRUN\" run -- cat \"\$WARN\""
radd "mixed at $RATE/s: the child alone (the reference)" "\"\$B\" pace -rate $RATE \"\$MIXED\""
radd "mixed at $RATE/s: **\`ncclrun run -- child\`**" "\"\$NCCLRUN\" run -- \"\$B\" pace -rate $RATE \"\$MIXED\""
for round in $(seq 0 "$RELAY_RUNS"); do
  for i in "${!rcmds[@]}"; do
    out=$("$B" time -n 1 -warmup 0 -pipe -- sh -c "exec ${rcmds[$i]}")
    if [ "$round" != 0 ]; then
      echo "$out" | field median_ms >>"$tmp/rwall.$i"
      echo "$out" | field cpu_ms >>"$tmp/rcpu.$i"
    fi
  done
done
for i in "${!rcmds[@]}"; do rw[i]=$(med <"$tmp/rwall.$i"); rc[i]=$(med <"$tmp/rcpu.$i"); done
# pratio I: the median over the rounds of row I's wall over its reference's
# in the same round.
pratio() {
  local ref=$(( $1 / 2 * 2 ))
  paste "$tmp/rwall.$1" "$tmp/rwall.$ref" | awk '{printf "%.4f\n", $1/$2}' | med | awk '{printf "%.2f", $1}'
}
echo "## Relay: the same bytes through each, into a pipe (medians of $RELAY_RUNS rounds; the ratio is the median of each round's)"
echo
echo "| log / command | wall | vs reference | MiB/s | CPU (writer + relay) | CPU per GiB |"
echo "|---|---|---|---|---|---|"
for i in "${!rcmds[@]}"; do
  f=$INFO; [ "$i" -ge 2 ] && f=$WARN; [ "$i" -ge 4 ] && f=$MIXED
  echo "| ${rlabels[$i]} | ${rw[$i]} ms | $(pratio "$i")x | $(mibs "${rw[$i]}" "$(size "$f")") | ${rc[$i]} ms | $(awk -v ms="${rc[$i]}" -v b="$(size "$f")" 'BEGIN {printf "%.0f ms", ms/(b/1073741824)}') |"
done
echo

# --- lines lost at the rate a job prints --------------------------------------
# --report counts what diagnosis did not see: INFO noise shed (allowed),
# other lines lost (not allowed).
echo "## Diagnosis of a child printing $RATE/s of INFO lines with a WARN line every 100 (\`--report\`)"
echo
"$NCCLRUN" run --report "$tmp/paced.json" -- "$B" pace -rate "$RATE" "$MIXED" 2>/dev/null | cat >/dev/null
shed=$(jnum tap_shed_lines "$tmp/paced.json")
lost=$(jnum tap_lost_lines "$tmp/paced.json")
echo "| lines | WARN lines | INFO lines shed | lines lost |"
echo "|---|---|---|---|"
echo "| $(countf lines "$tmp/mixed.count") | $(countf warn_lines "$tmp/mixed.count") | $shed | **$lost** |"
echo

# --- explain -------------------------------------------------------------------
elabels=() ecmds=() efiles=()
eadd() { elabels+=("$1"); ecmds+=("$2"); efiles+=("$3"); }
eadd "INFO: \`grep -c 'NCCL WARN' F\` (the reference)" "grep -c 'NCCL WARN' \"\$INFO\" >\"\$O\" || true" "$INFO"
eadd "INFO: **\`ncclrun explain F\`**" "\"\$NCCLRUN\" explain \"\$INFO\" >\"\$O\" || true" "$INFO"
eadd "WARN: \`grep -c 'NCCL WARN' F\` (the reference)" "grep -c 'NCCL WARN' \"\$WARN\" >\"\$O\" || true" "$WARN"
eadd "WARN: **\`ncclrun explain F\`**" "\"\$NCCLRUN\" explain \"\$WARN\" >\"\$O\" || true" "$WARN"
eadd "WARN of $PROCS processes: \`grep -c 'NCCL WARN' F\` (the reference)" "grep -c 'NCCL WARN' \"\$MANY\" >\"\$O\" || true" "$MANY"
eadd "WARN of $PROCS processes: **\`ncclrun explain F\`**" "\"\$NCCLRUN\" explain \"\$MANY\" >\"\$O\" || true" "$MANY"
export O=$tmp/explain.out
for round in $(seq 0 "$RUNS"); do
  for i in "${!ecmds[@]}"; do
    out=$("$B" time -n 1 -warmup 0 -- sh -c "${ecmds[$i]}")
    if [ "$round" != 0 ]; then
      echo "$out" | field median_ms >>"$tmp/ex.$i"
      echo "$out" | field cpu_ms >>"$tmp/excpu.$i"
    fi
  done
done
echo "## Explain: diagnosing a saved log (output to a file)"
echo
echo "| log / command | median | MiB/s | vs grep | CPU | MiB per CPU-second |"
echo "|---|---|---|---|---|---|"
for i in "${!ecmds[@]}"; do
  ex[i]=$(med <"$tmp/ex.$i"); exc[i]=$(med <"$tmp/excpu.$i")
  ref=$(( i / 2 * 2 ))
  echo "| ${elabels[$i]} | ${ex[$i]} ms | $(mibs "${ex[$i]}" "$(size "${efiles[$i]}")") | $(ratio "${ex[$i]}" "${ex[$ref]}")x | ${exc[$i]} ms | $(mibs "${exc[$i]}" "$(size "${efiles[$i]}")") |"
done
info_mibs=$(mibs "${ex[1]}" "$(size "$INFO")")
warn_mibs=$(mibs "${ex[3]}" "$(size "$WARN")")
many_mibs=$(mibs "${ex[5]}" "$(size "$MANY")")
echo

# --- memory ---------------------------------------------------------------------
peak_kib() { # N CMD...: median over N runs of GNU time's maximum RSS (KiB)
  local n=$1; shift
  for _ in $(seq "$n"); do
    /usr/bin/time -v -o "$tmp/time.txt" "$@" >/dev/null 2>"$tmp/stderr.txt" || true
    sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp/time.txt"
  done | med
}
echo "## Peak RSS of ncclrun (GNU time -v), median of $RSS_RUNS runs"
echo
echo "| input | peak RSS |"
echo "|---|---|"
mrow() {
  local label=$1; shift
  local k; k=$(peak_kib "$RSS_RUNS" "$@")
  echo "| $label | $(mib "$k") |"
  echo "$k" >>"$tmp/rss.all"
}
mrow "hello (the reference)" "$HELLO"
mrow "\`run -- true\`" "$NCCLRUN" run -- true
mrow "\`run --\` one $SIZE line, no newline" "$NCCLRUN" run -- "$B" longline -size "$SIZE"
mrow "\`run --\` WARN lines of $PROCS processes" "$NCCLRUN" run -- cat "$MANY"
mrow "\`run --\` mixed at $RATE/s" "$NCCLRUN" run -- "$B" pace -rate "$RATE" "$MIXED"
mrow "\`explain\` $(hsize "$(size "$INFO")") of INFO lines" "$NCCLRUN" explain "$INFO"
mrow "\`explain\` WARN lines of $PROCS processes" "$NCCLRUN" explain "$MANY"
# Compressed input: gzip, the one format explain decompresses (its history
# is a 32 KiB window), on top of the rows above.
head -c 64M "$MIXED" >"$tmp/mixed64.log"
crow() {
  local label=$1 file=$2 k
  k=$(peak_kib "$RSS_RUNS" "$NCCLRUN" explain "$file")
  echo "| $label | $(mib "$k") |"
  echo "$k" >>"$tmp/rss.compressed"
}
: >"$tmp/rss.compressed"
gzip -6 -c "$tmp/mixed64.log" >"$tmp/mixed.gz"
crow "\`explain\` gzip of 64MiB of mixed lines" "$tmp/mixed.gz"
gzip -6 -c "$MANY" >"$tmp/procs.gz"
crow "\`explain\` gzip of WARN lines of $PROCS processes" "$tmp/procs.gz"
echo

# --- partial-line latency -------------------------------------------------------
echo "## Partial line: one byte, no newline, child to the reader of ncclrun's stdout ($LAT_N round trips)"
echo
echo "| command | median | p99 | max |"
echo "|---|---|---|---|"
lrow() {
  local label=$1; shift
  local out; out=$("$B" latency -n "$LAT_N" -- "$@" 2>/dev/null)
  echo "| $label | $(echo "$out" | field median_us) µs | $(echo "$out" | field p99_us) µs | $(echo "$out" | field max_us) µs |"
}
lrow "the child alone" "$B" echo-partial
lrow "**\`ncclrun run --\`**" "$NCCLRUN" run -- "$B" echo-partial
echo

# --- against the targets -----------------------------------------------------------
rss_max=$(sed 1d "$tmp/rss.all" | sort -g | tail -1)
echo "## Against the targets"
echo
echo "| target | this run | verdict |"
echo "|---|---|---|"
r=$(ratio "$run_ms" "$mini_ms")
echo "| start-up: \`run -- true\` <= 1.5x a minimal Go supervisor | ${r}x ($run_ms ms, minisuper $mini_ms ms, static hello $hello_ms ms) | $(atmost "$r" 1.5) |"
r=$(pratio 5)
echo "| a child printing $RATE/s of INFO and WARN lines: slowed <= 5% | ${r}x its wall alone | $(atmost "$r" 1.05) |"
echo "| no catalog-matching line lost at $RATE/s (--report) | $lost lost ($shed INFO lines shed) | $(atmost "$lost" 0) |"
echo "| relay at pipe speed, INFO (reported) | $(pratio 1)x \`cat F \| cat \| cat\`'s wall | no target |"
echo "| relay at pipe speed, WARN (reported) | $(pratio 3)x \`cat F \| cat \| cat\`'s wall | no target |"
echo "| explain INFO >= 200 MiB/s | $info_mibs MiB/s (grep -c $(mibs "${ex[0]}" "$(size "$INFO")")) | $(atleast "$info_mibs" 200) |"
echo "| explain WARN-only >= 100 MiB/s | $warn_mibs MiB/s (grep -c $(mibs "${ex[2]}" "$(size "$WARN")")) | $(atleast "$warn_mibs" 100) |"
echo "| explain WARN-only of $PROCS processes >= 100 MiB/s | $many_mibs MiB/s (grep -c $(mibs "${ex[4]}" "$(size "$MANY")")) | $(atleast "$many_mibs" 100) |"
echo "| peak RSS <= 16 MiB on any plain input | at most $(mib "$rss_max") | $(atmost "$rss_max" 16384) |"
rss_c=$(sort -g "$tmp/rss.compressed" | tail -1)
[ -z "$rss_c" ] || echo "| peak RSS <= 20 MiB on compressed input | at most $(mib "$rss_c") | $(atmost "$rss_c" 20480) |"
echo
echo "Load after: $(load)."
