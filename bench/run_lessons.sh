#!/usr/bin/env bash
# run_lessons.sh — runs the three `histeq lesson`s and the contiguous-vs-coarsened benchmark on
# the GPU, for docs/lessons.md and docs/kernels.md.
#
#   bench/run_lessons.sh [OUTDIR]
#
# OUTDIR defaults to bench/results/h200/lessons. Writes, per lesson NAME (atomics, bins,
# subhist): NAME.txt (the narrated output), NAME.json, NAME.csv, NAME.png (when python3 with
# matplotlib is there; otherwise draw it from the CSV on another machine with
#   python3 bench/lesson_plot.py OUTDIR/NAME.csv -o NAME.png)
# and NAME.log (stderr); then contiguous.txt/.csv/.json: `histeq bench` of contiguous against
# coarsened (u8 and i32, 256 bins, 16M/64M/256M, uniform/hot/blocky).
# The histeq binary: $HISTEQ_BIN if set, else build/histeq. Exit status: non-zero when a lesson
# or the benchmark failed (the rest still run), or when no GPU is usable (nothing is run).
set -u
case "${1:-}" in
  -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  -*) echo "run_lessons.sh: unknown option '$1' (usage: bench/run_lessons.sh [OUTDIR]; --help)" >&2
      exit 2 ;;
esac
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$ROOT/bench/results/h200/lessons}"
BIN="${HISTEQ_BIN:-$ROOT/build/histeq}"
if [ ! -x "$BIN" ]; then
  echo "run_lessons.sh: $BIN not found: build it first (cmake --build build --target histeq)" >&2
  exit 1
fi
if ! gpu_check=$("$BIN" kernels --details 2>&1 >/dev/null); then
  echo "run_lessons.sh: no usable GPU, nothing run (histeq kernels --details: ${gpu_check:-failed})" >&2
  exit 1
fi
mkdir -p "$OUT"
cd "$ROOT" || exit 1  # samples/ and bench/lesson_plot.py are found from here as well
status=0
for name in atomics bins subhist; do
  echo "== lesson $name" >&2
  start=$(date +%s)
  if ! "$BIN" lesson "$name" --csv "$OUT/$name.csv" --json "$OUT/$name.json" \
       --plot "$OUT/$name.png" >"$OUT/$name.txt" 2>"$OUT/$name.log"; then
    echo "lesson $name FAILED (see $OUT/$name.log)" >&2
    status=1
  fi
  echo "   $(( $(date +%s) - start )) s; $(grep -c '  PASS  ' "$OUT/$name.txt") PASS lines," \
       "$(grep -c '  FAIL  ' "$OUT/$name.txt") FAIL lines (racy may FAIL: it loses counts)" >&2
done
echo "== contiguous vs coarsened" >&2
if ! "$BIN" bench --kernels atomic,contiguous,coarsened --type u8,i32 --bins 256 \
     --sizes 16M,64M,256M --dist uniform,hot,blocky --reps 20 \
     --csv "$OUT/contiguous.csv" --json "$OUT/contiguous.json" \
     >"$OUT/contiguous.txt" 2>"$OUT/contiguous.log"; then
  echo "bench contiguous FAILED (see $OUT/contiguous.log)" >&2
  status=1
fi
echo "results in $OUT" >&2
exit $status
