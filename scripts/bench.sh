#!/usr/bin/env bash
# `make bench`: every figure of ncclrun's performance table as a ratio
# against its reference, all measured in this one run, on this machine
# (docs/performance.md says how to read it). Nothing is asserted: these are
# figures; the last table says which target each one meets or misses.
#
# Knobs (environment):
#   NCCLRUN=bin/ncclrun     the binary under test (make bench builds it)
#   RUNS=5                  rounds of the whole-process comparisons (medians)
#   SIZE=256MiB             the relayed INFO log, the mixed log, the long line
#   WARN_SIZE=64MiB         the WARN-only burst
#   EXPLAIN_WARN_SIZE=8MiB  the WARN-only log explain reads
#   RSS_RUNS=3              runs per peak-RSS figure
#   PROCS=1100000           distinct processes of the many-processes log
#   START_RUNS=200          runs per start-up variant (in START_ROUNDS rounds)
#   START_ROUNDS=5
#   RATE=200MiB             the paced burst's rate (tap coverage)
#   LAT_N=500               partial-line round trips per variant
#   GOBENCH=1               also the go test -bench figures
#   BENCH_TMP=/tmp          where the temporary directory goes (not the repo)
set -euo pipefail
cd "$(dirname "$0")/.."

NCCLRUN=${NCCLRUN:-bin/ncclrun}
RUNS=${RUNS:-5}
SIZE=${SIZE:-256MiB}
WARN_SIZE=${WARN_SIZE:-64MiB}
EXPLAIN_WARN_SIZE=${EXPLAIN_WARN_SIZE:-8MiB}
RSS_RUNS=${RSS_RUNS:-3}
PROCS=${PROCS:-1100000}
START_RUNS=${START_RUNS:-200}
START_ROUNDS=${START_ROUNDS:-5}
RATE=${RATE:-200MiB}
LAT_N=${LAT_N:-500}
GOBENCH=${GOBENCH:-1}

die() { echo "bench: $*" >&2; exit 1; }
[ -x "$NCCLRUN" ] || die "$NCCLRUN not built (run make bench, or make build)"
NCCLRUN=$(cd "$(dirname "$NCCLRUN")" && pwd)/$(basename "$NCCLRUN")

# Every reference is required: a table with a missing reference would not
# say what it claims. Debian/Ubuntu packages in parentheses.
need() { command -v "$1" >/dev/null 2>&1 || die "$1 not found (apt package $2): every figure is a ratio against it"; }
[ -x /usr/bin/time ] || die "/usr/bin/time not found (apt package time): GNU time measures CPU and peak RSS"
need tini tini
need dumb-init dumb-init
need grep grep
need gzip gzip
need zcat gzip
need go golang
need bc bc
TINI=$(command -v tini)
DUMBINIT=$(command -v dumb-init)

tmp=$(mktemp -d "${BENCH_TMP:-${TMPDIR:-/tmp}}/ncclrun-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
B=$tmp/ncclbench
go build -o "$B" ./bench/ncclbench
HELLO=$tmp/hello
CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$HELLO" ./bench/hello
INFO=$tmp/info.log
"$B" gen -size "$SIZE" -o "$INFO"
WARN=$tmp/warn.log
"$B" mixed -size "$WARN_SIZE" -warn-every 1 -o "$WARN" >"$tmp/warn.count"
WARNX=$tmp/warnx.log
"$B" mixed -size "$EXPLAIN_WARN_SIZE" -warn-every 1 -o "$WARNX" >/dev/null
MIXED=$tmp/mixed.log
"$B" mixed -size "$SIZE" -warn-every 100 -o "$MIXED" >"$tmp/mixed.count"
gzip -1 -c "$INFO" >"$INFO.gz"
MANY=$tmp/procs.log
"$B" mixed -size "$((PROCS * 128))" -warn-every 1 -procs "$PROCS" -o "$MANY" >/dev/null
export INFO WARN WARNX MIXED NCCLRUN B

load() { cut -d' ' -f1-3 /proc/loadavg; }
med() { sort -g | awk '{a[NR]=$1} END {if (NR==0) {print "nan"; exit}; if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }
x() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2fx", a/b}'; }
plus() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%+.2f ms", a-b}'; }
mibs() { awk -v s="$1" -v b="$2" 'BEGIN {printf "%.0f", b/1048576/s}'; }
size() { stat -c %s "$1"; }
countf() { sed -n "s/.*$1=\([0-9]*\).*/\1/p" "$2"; }
verdict() { awk -v v="$1" -v t="$2" 'BEGIN {print (v <= t) ? "met" : "**missed**"}'; }
mib() { awk -v k="$1" 'BEGIN {printf "%.1f MiB", k/1024}'; }

echo "# ncclrun bench ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load before: $(load))"
echo
echo "ncclrun $("$NCCLRUN" version 2>/dev/null | head -1 | cut -d' ' -f2-); logs: $(numfmt --to=iec-i --suffix=B "$(size "$INFO")") of NCCL INFO lines (and gzipped), the same with a WARN line every 100 lines, $(numfmt --to=iec-i --suffix=B "$(size "$WARN")") and $(numfmt --to=iec-i --suffix=B "$(size "$WARNX")") of WARN lines; every figure against its reference measured in this run, the variants round-robin (medians of $RUNS rounds)."
echo

# --- start-up ------------------------------------------------------------
# START_ROUNDS rounds, each variant START_RUNS/START_ROUNDS runs per round.
per=$((START_RUNS / START_ROUNDS))
slabels=() scmds=()
sadd() { slabels+=("$1"); scmds+=("$2"); }
sadd "\`true\` alone" "true"
sadd "\`tini -s -- true\`" "$TINI -s -- true"
sadd "\`dumb-init true\`" "$DUMBINIT true"
sadd "static Go hello" "$HELLO"
sadd "\`ncclrun version\` (Go runtime + init)" "$NCCLRUN version"
sadd "\`ncclrun run --no-watch -- true\` (preflight + exec)" "$NCCLRUN run --no-watch -- true"
sadd "**\`ncclrun run -- true\`**" "$NCCLRUN run -- true"
for _ in $(seq "$START_ROUNDS"); do
  for i in "${!scmds[@]}"; do
    # shellcheck disable=SC2086 # the command is words
    "$B" time -n "$per" -warmup 2 -- ${scmds[$i]} | field median_ms >>"$tmp/start.$i"
  done
done
for i in "${!scmds[@]}"; do smed[i]=$(med <"$tmp/start.$i"); done
tini_ms=${smed[1]}
run_ms=${smed[6]}
echo "## Start-up: \`X -- true\`, median of $START_ROUNDS rounds of $per runs"
echo
echo "| variant | median | vs tini | ratio to tini |"
echo "|---|---|---|---|"
for i in "${!scmds[@]}"; do
  echo "| ${slabels[$i]} | ${smed[$i]} ms | $(plus "${smed[$i]}" "$tini_ms") | $(x "${smed[$i]}" "$tini_ms") |"
done
echo
echo "\`ncclrun run -- true\` is $(x "$run_ms" "${smed[2]}") dumb-init and $(x "$run_ms" "${smed[3]}") a static Go hello."
echo

# --- relay -------------------------------------------------------------------
# Each relay writes into a pipe that ncclbench drains. Wall time of the whole
# command; CPU (user+sys, from wait4) of the writer and the relay together
# (ncclrun's child cat is the writer), so that every variant counts the same
# processes: `sh -c 'cat F | cat'` for the cat relay, ncclrun with its child.
rlabels=() rcmds=()
radd() { rlabels+=("$1"); rcmds+=("$2"); }
for f in INFO WARN; do
  radd "$f: \`cat F \| cat\` (the cat relay)" "sh -c 'cat \"\$$f\" | cat'"
  radd "$f: \`cat F \| ncclbench splice\` (splice relay)" "sh -c 'cat \"\$$f\" | \"\$B\" splice'"
  radd "$f: **\`ncclrun run -- cat F\`**" "\"\$NCCLRUN\" run -- cat \"\$$f\""
done
for round in $(seq 0 "$RUNS"); do
  for i in "${!rcmds[@]}"; do
    out=$("$B" time -n 1 -warmup 0 -pipe -- sh -c "exec ${rcmds[$i]}")
    if [ "$round" != 0 ]; then
      echo "$out" | field median_ms >>"$tmp/rwall.$i"
      echo "$out" | field cpu_ms >>"$tmp/rcpu.$i"
    fi
  done
done
for i in "${!rcmds[@]}"; do rw[i]=$(med <"$tmp/rwall.$i"); rc[i]=$(med <"$tmp/rcpu.$i"); done
echo "## Relay: the same bytes through each, into a pipe"
echo
echo "| log / variant | wall | vs cat relay | CPU (writer + relay) | vs cat relay | MiB/s |"
echo "|---|---|---|---|---|---|"
for i in "${!rcmds[@]}"; do
  ref=$(( i / 3 * 3 ))
  f=$INFO; [ "$i" -ge 3 ] && f=$WARN
  echo "| ${rlabels[$i]} | ${rw[$i]} ms | $(x "${rw[$i]}" "${rw[$ref]}") | ${rc[$i]} ms | $(x "${rc[$i]}" "${rc[$ref]}") | $(mibs "$(echo "${rw[$i]} / 1000" | bc -l)" "$(size "$f")") |"
done
echo

# --- explain -------------------------------------------------------------------
elabels=() ecmds=() efiles=()
eadd() { elabels+=("$1"); ecmds+=("$2"); efiles+=("$3"); }
eadd "INFO: \`grep -c 'NCCL WARN' F > out\`" "grep -c 'NCCL WARN' \"\$INFO\" >\"\$O\" || true" "$INFO"
eadd "INFO: **\`ncclrun explain F > out\`**" "\"\$NCCLRUN\" explain \"\$INFO\" >\"\$O\" || true" "$INFO"
eadd "WARN: \`grep -c 'NCCL WARN' F > out\`" "grep -c 'NCCL WARN' \"\$WARNX\" >\"\$O\" || true" "$WARNX"
eadd "WARN: **\`ncclrun explain F > out\`**" "\"\$NCCLRUN\" explain \"\$WARNX\" >\"\$O\" || true" "$WARNX"
eadd "gzip: \`zcat F.gz \| grep -c 'NCCL WARN' > out\`" "zcat \"\$INFO.gz\" | grep -c 'NCCL WARN' >\"\$O\" || true" "$INFO"
eadd "gzip: **\`ncclrun explain F.gz > out\`**" "\"\$NCCLRUN\" explain \"\$INFO.gz\" >\"\$O\" || true" "$INFO"
export O=$tmp/explain.out
for round in $(seq 0 "$RUNS"); do
  for i in "${!ecmds[@]}"; do
    w=$("$B" time -n 1 -warmup 0 -- sh -c "${ecmds[$i]}" | field median_ms)
    [ "$round" = 0 ] || echo "$w" >>"$tmp/ex.$i"
  done
done
echo "## Explain: diagnosing a saved log (output to a file)"
echo
echo "| log / command | median | MiB/s (uncompressed) | vs grep |"
echo "|---|---|---|---|"
for i in "${!ecmds[@]}"; do
  ex[i]=$(med <"$tmp/ex.$i")
  ref=$(( i / 2 * 2 ))
  echo "| ${elabels[$i]} | ${ex[$i]} ms | $(mibs "$(echo "${ex[$i]} / 1000" | bc -l)" "$(size "${efiles[$i]}")") | $(x "${ex[$i]}" "${ex[$ref]}") |"
done
warn_mibs=$(mibs "$(echo "${ex[3]} / 1000" | bc -l)" "$(size "$WARNX")")
echo

# --- tap coverage ----------------------------------------------------------------
# What diagnosis saw of a burst: shed, lost and unread from --report,
# against the INFO and WARN lines the log has. Past the tap's share of a
# burst (launcher/relay.go, tapBudget) the relay moves the output past it
# unread: the lines of those bytes are not counted, so what was seen of
# them is estimated from the bytes (the lines are alike in size).
tap_row() { # label report warn-count-file log
  local rep=$2 warns lines shed lost unread
  warns=$(countf warn_lines "$3"); lines=$(countf lines "$3")
  shed=$(sed -n 's/.*"tap_shed_lines": *\([0-9]*\).*/\1/p' "$rep"); shed=${shed:-0}
  lost=$(sed -n 's/.*"tap_lost_lines": *\([0-9]*\).*/\1/p' "$rep"); lost=${lost:-0}
  unread=$(sed -n 's/.*"tap_unread_bytes": *\([0-9]*\).*/\1/p' "$rep"); unread=${unread:-0}
  echo "| $1 | $(awk -v u="$unread" -v z="$(size "$4")" 'BEGIN {printf "%.1f%%", 100*(z-u)/z}') | $(awk -v s="$shed" -v n="$((lines - warns))" -v u="$unread" -v z="$(size "$4")" 'BEGIN {r=(z-u)/z; printf "%s%.1f%%", u ? "~" : "", n ? 100*(n*r-s)/n : 100}') | $(awk -v l="$lost" -v w="$warns" -v u="$unread" -v z="$(size "$4")" 'BEGIN {r=(z-u)/z; printf "%s%.2f%%", u ? "~" : "", w ? 100*(w*r-l)/w : 100}') | $shed | $lost | $(numfmt --to=iec-i --suffix=B "$unread") |"
  echo "$((lost + unread))" >>"$tmp/lost.all"
}
echo "## Tap coverage: what diagnosis saw of a burst (\`--report\`)"
echo
echo "| burst | bytes read by the tap | INFO lines seen | WARN lines seen | shed (INFO noise) | lost | unread (past the tap's share) |"
echo "|---|---|---|---|---|---|---|"
"$NCCLRUN" run --report "$tmp/r2.json" -- "$B" pace -rate "$RATE" "$MIXED" 2>/dev/null | cat >/dev/null
tap_row "$(numfmt --to=iec-i --suffix=B "$(size "$MIXED")") INFO with a WARN every 100 lines, at $RATE/s" "$tmp/r2.json" "$tmp/mixed.count" "$MIXED"
cp "$tmp/lost.all" "$tmp/lost.job" # the rate a training job produces
"$NCCLRUN" run --report "$tmp/r1.json" -- cat "$MIXED" 2>/dev/null | cat >/dev/null
tap_row "the same at pipe speed (no job prints this)" "$tmp/r1.json" "$tmp/mixed.count" "$MIXED"
"$NCCLRUN" run --report "$tmp/r3.json" -- cat "$WARN" 2>/dev/null | cat >/dev/null
tap_row "$(numfmt --to=iec-i --suffix=B "$(size "$WARN")") of WARN lines only, at pipe speed (no job prints this)" "$tmp/r3.json" "$tmp/warn.count" "$WARN"
echo

# --- exit after a burst ---------------------------------------------------------
echo "## Exit: from the child's end to the supervisor's exit, after a $(numfmt --to=iec-i --suffix=B "$(size "$WARN")") WARN burst (median of $RUNS)"
echo
echo "| supervisor | median | vs tini |"
echo "|---|---|---|"
for round in $(seq "$RUNS"); do
  "$B" exitlat -n 1 -- "$TINI" -s -- "$B" catstamp "$WARN" | field median_ms >>"$tmp/exit.tini"
  "$B" exitlat -n 1 -- "$NCCLRUN" run -- "$B" catstamp "$WARN" 2>/dev/null | field median_ms >>"$tmp/exit.ncclrun"
done
exit_tini=$(med <"$tmp/exit.tini"); exit_n=$(med <"$tmp/exit.ncclrun")
echo "| \`tini -s --\` | $exit_tini ms | 1.00x |"
echo "| **\`ncclrun run --\`** | $exit_n ms | $(x "$exit_n" "$exit_tini") ($(plus "$exit_n" "$exit_tini")) |"
echo

# --- memory ---------------------------------------------------------------------
peak_kib() { # N CMD...: median over N runs of GNU time's maximum RSS (KiB)
  local n=$1; shift
  for _ in $(seq "$n"); do
    /usr/bin/time -v -o "$tmp/time.txt" "$@" >/dev/null 2>"$tmp/stderr.txt" || true
    sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp/time.txt"
  done | med
}
echo "## Peak RSS (GNU time -v: the largest process of the tree), median of $RSS_RUNS runs"
echo
echo "| case | \`ncclrun run --\` | the child alone | \`tini -s --\` | ncclrun vs tini |"
echo "|---|---|---|---|---|"
mrow() {
  local label=$1; shift
  local a b c
  a=$(peak_kib "$RSS_RUNS" "$NCCLRUN" run -- "$@")
  b=$(peak_kib "$RSS_RUNS" "$@")
  c=$(peak_kib "$RSS_RUNS" "$TINI" -s -- "$@")
  echo "| $label | **$(mib "$a")** | $(mib "$b") | $(mib "$c") | $(x "$a" "$c") |"
  echo "$a" >>"$tmp/rss.all"
}
mrow "idle: \`true\`" true
mrow "one $SIZE line, no newline" "$B" longline -size "$SIZE"
mrow "WARN lines of $PROCS processes" cat "$MANY"
explain_many=$(peak_kib 1 "$NCCLRUN" explain "$MANY")
echo
echo "\`ncclrun explain\` of the $PROCS-process log: $(mib "$explain_many") peak."
echo

# --- partial-line latency -------------------------------------------------------
echo "## Partial line: one byte, no newline, child to the reader of the supervisor's stdout ($LAT_N round trips)"
echo
echo "| variant | median | p99 | max |"
echo "|---|---|---|---|"
lrow() {
  local label=$1; shift
  local out; out=$("$B" latency -n "$LAT_N" -- "$@" 2>/dev/null)
  echo "| $label | $(echo "$out" | field median_us) µs | $(echo "$out" | field p99_us) µs | $(echo "$out" | field max_us) µs |"
}
lrow "child alone" "$B" echo-partial
lrow "\`tini -s --\`" "$TINI" -s -- "$B" echo-partial
lrow "**\`ncclrun run --\`** (through the relay)" "$NCCLRUN" run -- "$B" echo-partial
echo

# --- go test -bench --------------------------------------------------------------
if [ "$GOBENCH" = 1 ]; then
  echo "## go test -bench (median of $RUNS)"
  echo
  echo "| benchmark | ns/op | MB/s | extra |"
  echo "|---|---|---|---|"
  {
    go test -run '^$' -bench 'MatcherFeedHealthy|GramFilter|Noise' -count "$RUNS" ./diagnosis/ || true
    go test -run '^$' -bench 'Relay|TapBurst' -count "$RUNS" ./launcher/ || true
  } >"$tmp/gobench.txt" 2>&1
  awk '/^Benchmark/ {sub(/-[0-9]+$/, "", $1); print $1}' "$tmp/gobench.txt" | awk '!seen[$0]++' >"$tmp/gobench.names"
  while read -r name; do
    rows=$(awk -v n="$name" '{x=$1; sub(/-[0-9]+$/, "", x)} x==n' "$tmp/gobench.txt")
    ns=$(echo "$rows" | awk '{print $3}' | med)
    mb=$(echo "$rows" | awk '{for (i=4;i<NF;i++) if ($(i+1)=="MB/s") print $i}' | med)
    extra=$(echo "$rows" | tail -1 | awk '{s=""; for (i=4;i<NF;i++) if ($(i+1) ~ /\/op$|missed$/) s=s $i " " $(i+1) " "; print s}')
    echo "| ${name#Benchmark} | $ns | ${mb:-} | $extra |"
  done <"$tmp/gobench.names"
  echo
fi

# --- against the targets -----------------------------------------------------------
lost_max=$(sort -g "$tmp/lost.job" | tail -1)
rss_max=$(sort -g "$tmp/rss.all" | tail -1)
echo "## Against the targets (issue 16)"
echo
echo "| target | this run | verdict |"
echo "|---|---|---|"
d=$(awk -v a="$run_ms" -v b="$tini_ms" 'BEGIN {print a-b}')
echo "| start-up \`run -- true\` <= tini + 2.5 ms | tini $(plus "$run_ms" "$tini_ms" | tr -d ' ') | $(verdict "$d" 2.5) |"
r=$(awk -v a="${rw[2]}" -v b="${rw[0]}" 'BEGIN {print a/b}')
echo "| relay INFO <= 1.05x \`cat\` wall | $(x "${rw[2]}" "${rw[0]}") | $(verdict "$r" 1.05) |"
r=$(awk -v a="${rc[2]}" -v b="${rc[0]}" 'BEGIN {print a/b}')
echo "| relay INFO <= 1.3x \`cat\` CPU | $(x "${rc[2]}" "${rc[0]}") | $(verdict "$r" 1.3) |"
r=$(awk -v a="${rw[5]}" -v b="${rw[3]}" 'BEGIN {print a/b}')
echo "| relay WARN <= 1.2x \`cat\` wall | $(x "${rw[5]}" "${rw[3]}") | $(verdict "$r" 1.2) |"
r=$(awk -v a="${ex[1]}" -v b="${ex[0]}" 'BEGIN {print a/b}')
echo "| explain <= 1x \`grep -c\` (plain) | $(x "${ex[1]}" "${ex[0]}") | $(verdict "$r" 1) |"
r=$(awk -v a="${ex[5]}" -v b="${ex[4]}" 'BEGIN {print a/b}')
echo "| explain <= 1x \`zcat \| grep\` (gzip) | $(x "${ex[5]}" "${ex[4]}") | $(verdict "$r" 1) |"
echo "| explain >= 200 MiB/s on WARN lines | $warn_mibs MiB/s | $(awk -v v="$warn_mibs" 'BEGIN {print (v >= 200) ? "met" : "**missed**"}') |"
echo "| tap loses no line that is not noise at the rate a job prints (mixed burst at $RATE/s) | $lost_max lost or unread | $(verdict "$lost_max" 0) |"
echo "| exit after a WARN burst: a few ms | $exit_n ms (tini $exit_tini) | $(verdict "$exit_n" 5) |"
echo "| peak RSS <= 16 MiB whatever the input | at most $(mib "$rss_max") | $(verdict "$rss_max" 16384) |"
echo
echo "Load after: $(load)."
