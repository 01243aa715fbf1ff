#!/usr/bin/env bash
# scripts/fuzz_long.sh [-b BUILD_DIR] [-n EXECUTIONS] [-j JOBS] [-o OUT] [HARNESS...]
#
# The long libFuzzer campaigns of docs/reliability.md §1: each decode harness (default
# fuzz_decode and fuzz_decode_equalize) runs JOBS parallel jobs (default: the cores) until they
# have executed EXECUTIONS inputs together (default 10,000,000), ASan + UBSan, from the
# repository's corpora into OUT/HARNESS/corpus (default OUT=/tmp/histeq-fuzz-long). Findings
# land in OUT/HARNESS/artifacts/ and stop that harness with a non-zero status. At the end the
# summary gives per harness: executions (summed over the jobs' "Done N runs"), findings, and
# the command that merges the new corpus into tests/fuzz/corpus/decode-min (minimized).
# Build first (once): cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DHISTEQ_FUZZ=ON
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=build-fuzz; total=10000000; jobs="$(nproc)"; out=/tmp/histeq-fuzz-long
while getopts "b:n:j:o:h" opt; do
  case "$opt" in
    b) build="$OPTARG" ;; n) total="$OPTARG" ;; j) jobs="$OPTARG" ;; o) out="$OPTARG" ;;
    *) sed -n '2,13p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(fuzz_decode fuzz_decode_equalize)
src="$PWD/tests/fuzz"
status=0
for h in "${harnesses[@]}"; do
  bin="$PWD/$build/tests/fuzz/$h"
  [ -x "$bin" ] || { echo "fuzz_long: $bin not built" >&2; exit 1; }
  d="$out/$h"; mkdir -p "$d/corpus" "$d/artifacts" "$d/logs"
  per_job=$(( (total + jobs - 1) / jobs ))
  echo "+ $h: $jobs jobs x $per_job executions"
  pids=()
  for j in $(seq 1 "$jobs"); do
    nice -n 10 "$bin" -runs="$per_job" -seed="$j" -rss_limit_mb=2048 -max_len=65536 -timeout=30 \
      -print_final_stats=1 -artifact_prefix="$d/artifacts/" \
      "$d/corpus" "$src/corpus/decode" "$src/corpus/decode-min" "$src/crashes/decode" \
      >"$d/logs/job$j.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  execs=$(grep -hoE "stat::number_of_executed_units: [0-9]+" "$d"/logs/*.log | awk '{s+=$2} END {print s+0}')
  findings=$(find "$d/artifacts" -type f | wc -l)
  echo "$h: executions $execs, findings $findings, corpus $(ls "$d/corpus" | wc -l) files"
  echo "  minimize into the repository: $bin -merge=1 -max_len=65536 $src/corpus/decode-min $d/corpus"
done
exit $status
