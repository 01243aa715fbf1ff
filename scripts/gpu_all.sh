#!/usr/bin/env bash
# Everything that needs the GPU machine, in one call, in order of importance: the whole test
# suite (scripts/gpu_suite.sh), the end-to-end folders against OpenCV and torchvision
# (bench/e2e/run.py), CLAHE and 16-bit histogram timings (histeq bench --clahe), the three
# lessons (bench/run_lessons.sh), the Python package (scripts/gpu_python.sh). Each step has a
# time limit so that the later ones still run; logs under OUTDIR, one summary at the end.
# A step that could run past BUDGET seconds (default 540) from the start is skipped, so the
# whole call ends inside the device tool's 600 s.
# Usage (project root, on the GPU machine, .deps carried; photos in PHOTOS/jpg):
#   HISTEQ_COMMIT=<sha> [BUDGET=540] [PREBUILT=1] [STEPS=...] scripts/gpu_all.sh OUTDIR [PHOTOS]
# PREBUILT=1: the build carried in .gpu-bundle (scripts/gpu_prebuilt_suite.sh --pack) and its
# suite runner instead of building here. STEPS: comma list of suite,e2e_png,e2e_jpg,clahe,
# lessons,python (default all). JPEG_REPEAT (default 8): names per photo in the JPEG folder.
set -u
out=${1:?usage: scripts/gpu_all.sh OUTDIR [PHOTOS]}
photos=${2:-.e2e}
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.deps/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export HISTEQ_COMMIT=${HISTEQ_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
export PYTHONUNBUFFERED=1
budget=${BUDGET:-540}
step() {  # step NAME SECONDS COMMAND...: runs COMMAND with a limit, output to OUTDIR/NAME.txt
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  if [ $((SECONDS + limit)) -gt "$budget" ]; then
    limit=$((budget - SECONDS))
    [ "$limit" -ge 20 ] || { echo "$name skipped (budget)" | tee -a "$out/steps.txt"; return; }
  fi
  timeout "$limit" "$@" >"$out/$name.txt" 2>&1
  echo "$name rc=$? $((SECONDS - t0)) s" | tee -a "$out/steps.txt"
}
B=build/histeq
steps=${STEPS:-suite,e2e_png,e2e_jpg,clahe,lessons,python}
has() { case ",$steps," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
if [ "${PREBUILT:-0}" = 1 ]; then
  export LD_LIBRARY_PATH="$PWD/.gpu-bundle/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH"
  if has suite; then
    step suite 300 scripts/gpu_prebuilt_suite.sh "$out/suite"
  else
    scripts/gpu_prebuilt_suite.sh --unpack "$out/suite" >/dev/null
  fi
else
  has suite && step suite 300 scripts/gpu_suite.sh "$out/suite"
fi
[ -x "$B" ] || { echo "no $B: build failed"; exit 1; }
step version 10 "$B" --version
has e2e_png && step png_prep 40 bench/e2e/fetch.sh "$photos"
has e2e_png && step e2e_png 90 python3 bench/e2e/run.py --histeq "$B" --threads 16 --reps 3 "$photos/png"
has e2e_jpg && step e2e_jpg 180 python3 bench/e2e/run.py --histeq "$B" --threads 16 --reps 3 \
  --repeat "${JPEG_REPEAT:-8}" "$photos/jpg"
has clahe && step clahe 60 "$B" bench --clahe --sizes 1M,16M,64M --dist natural,uniform \
  --csv "$out/clahe.csv" --json "$out/clahe.json"
has lessons && step lessons 60 bench/run_lessons.sh "$out/lessons"
has python && step python 90 scripts/gpu_python.sh "$out/py" build
cat "$out/steps.txt"
