#!/usr/bin/env bash
# run_h200.sh — regenerates the published benchmark results (docs/benchmarks.md) in one command.
#
#   bench/run_h200.sh [OUTDIR] [STEP...]
#
# OUTDIR defaults to bench/results/h200. STEPs (default: all, in this order):
# Every step but timing runs `auto` beside the registry kernels (its rows name the kernel it chose)
# and times GPU execution (--timing gpu, the default).
#   default  the default sweep: every kernel, u8+i32, 16/64/256 bins, 1M/16M/64M, all distributions
#   1g       1G u8 samples, 256 bins, every distribution
#   images   the natural images in samples/ (luma/gray plane), 256 bins
#   l2       hot vs cold L2 at 16M and 64M u8, 256 bins, every distribution
#   blocks   block-size sweep on the lessons' case (i32, 16M, 256 bins, hot)
#   lesson   the int-array lesson's array (--case lesson) and the lessons' command line
#   wide     int32 with 1024 and 4096 bins (CUB privatizes in global memory above 256)
#   small    photo-sized u8 inputs (64K..4M), 256 bins, every distribution
#   fold     u8 and i32 with 16/64 bins from 64K to 8M: where `auto` switches between coarsened
#            and columns
#   equalize the whole equalization in device memory (fused, three stages, CPU), 1M..1G
#   timing   a few cells again with --timing enqueue (launches as the host issues them), to show
#            what the host's launch rate adds on this machine
#   clahe    CLAHE (clip 2, 8x8) and the 16-bit paths in device memory, three runs (clahe-N.*)
#   details  `histeq kernels --details` for 16M u8 samples, 256 bins (kernels-details.txt)
# Each step writes STEP.txt (the table), STEP.csv, STEP.json and STEP.log (progress); the default
# and 1g steps also STEP.png when python3 with matplotlib is there (else: see the .log for the
# command that draws it from the CSV on another machine).
#
# The histeq binary: $HISTEQ_BIN if set, else build/histeq (configured and built here, Release,
# sm_90, when missing). The commit recorded in the results: $HISTEQ_COMMIT, else `git rev-parse`.
# Exit status: non-zero when any step reports a FAIL (the remaining steps still run).
set -u
case "${1:-}" in
  -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  -*) echo "run_h200.sh: unknown option '$1' (usage: bench/run_h200.sh [OUTDIR] [STEP...]; --help)" >&2
      exit 2 ;;
esac
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$ROOT/bench/results/h200}"
shift || true
STEPS=("$@")
[ ${#STEPS[@]} -eq 0 ] && STEPS=(default 1g images l2 blocks lesson wide small fold equalize timing clahe details)

for step in "${STEPS[@]}"; do
  case "$step" in
    default|1g|images|l2|blocks|lesson|wide|small|fold|equalize|timing|clahe|details) ;;
    *) echo "unknown step '$step'; valid: default 1g images l2 blocks lesson wide small fold equalize timing clahe details" >&2
       exit 2 ;;
  esac
done

BIN="${HISTEQ_BIN:-$ROOT/build/histeq}"
if [ ! -x "$BIN" ]; then
  echo "== building $BIN" >&2
  cmake -S "$ROOT" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DHISTEQ_BUILD_TESTS=OFF >&2 || exit 1
  cmake --build "$ROOT/build" -j"$(nproc)" --target histeq >&2 || exit 1
fi
# These are the GPU's published results: refuse to overwrite them with CPU-only rows.
if ! gpu_check=$("$BIN" kernels --details 2>&1 >/dev/null); then
  echo "run_h200.sh: no usable GPU, nothing run (histeq kernels --details: ${gpu_check:-failed})" >&2
  exit 1
fi
if [ -z "${HISTEQ_COMMIT:-}" ]; then
  HISTEQ_COMMIT="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || true)"
  if [ -n "$HISTEQ_COMMIT" ] && ! git -C "$ROOT" diff --quiet HEAD 2>/dev/null; then
    HISTEQ_COMMIT="$HISTEQ_COMMIT-dirty"
  fi
fi
export HISTEQ_COMMIT
export HISTEQ_PLOT_SCRIPT="$ROOT/bench/plot.py"
mkdir -p "$OUT" || exit 1

status=0
# bench_step NAME ARGS... : one `histeq bench` run with its table, CSV, JSON and log under $OUT.
bench_step() {
  local name="$1"
  shift
  echo "== $name: histeq bench $*" >&2
  local t0=$SECONDS
  "$BIN" bench "$@" --csv "$OUT/$name.csv" --json "$OUT/$name.json" \
      >"$OUT/$name.txt" 2>"$OUT/$name.log"
  local rc=$?
  echo "   $name: exit $rc, $((SECONDS - t0)) s; $(tail -n 1 "$OUT/$name.log")" >&2
  [ $rc -ne 0 ] && status=1
  return 0
}

for step in "${STEPS[@]}"; do
  case "$step" in
    default) bench_step default --kernels all,auto --plot "$OUT/default.png" ;;
    1g)      bench_step 1g --kernels all,auto --type u8 --bins 256 --sizes 1G --dist all --reps 10 \
                 --plot "$OUT/1g.png" ;;
    images)  bench_step images --kernels all,auto --images "$ROOT/samples" --bins 256 ;;
    l2)      bench_step l2 --kernels all,auto --type u8 --bins 256 --sizes 16M,64M --dist all \
                 --l2 both ;;
    blocks)  bench_step blocks --type i32 --size 16M --bins 256 --dist hot \
                 --block 0,64,128,256,512,1024 --reps 10 ;;
    lesson)  bench_step lesson --case lesson --reps 10
             bench_step lesson_cmdline --type i32 --size 16M --bins 256 --block 256 --reps 10 \
                 --dist hot ;;
    wide)    bench_step wide --kernels all,auto --type i32 --bins 1024,4096 --sizes 16M,64M,256M \
                 --dist uniform,hot,natural,sequential --reps 10 ;;
    small)   bench_step small --kernels all,auto --type u8 --bins 256 --sizes 64K,256K,1M,4M \
                 --dist all ;;
    fold)    bench_step fold --kernels all,auto --type u8,i32 --bins 16,64 \
                 --sizes 64K,256K,1M,2M,4M,8M,16M --dist uniform,natural,blocky ;;
    timing)  bench_step timing --kernels columns,cub,auto --type u8 --bins 256 \
                 --sizes 1M,16M,64M --dist uniform,natural --timing enqueue
             bench_step timing_equalize --equalize --sizes 1M,16M --dist uniform,natural \
                 --l2 both --timing enqueue ;;
    equalize) bench_step equalize --equalize --sizes 1M,4M,16M,64M,256M,1G \
                 --dist uniform,hot,natural,constant --l2 both ;;
    clahe)   for run in 1 2 3; do
               bench_step "clahe-$run" --clahe --sizes 1M,16M,64M --dist natural,uniform \
                   --reps 20 --warmup 3
             done ;;
    details) echo "== details: histeq kernels --details --type u8 --bins 256 --size 16M" >&2
             "$BIN" kernels --details --type u8 --bins 256 --size 16M >"$OUT/kernels-details.txt" ||
               status=1 ;;
  esac
done
echo "== results in $OUT (commit ${HISTEQ_COMMIT:-unknown})" >&2
exit $status
