#!/usr/bin/env bash
# The whole test suite on a machine with the GPU, as run before resolving any change to
# kernels/ or src/: configure and build (Release, sm_90 unless CUDA_ARCH says otherwise), every
# GoogleTest binary with --gtest_brief=1 (one summary line each into gpu_test_summary.txt, full
# output into tests.log), then ctest (which adds package_consumer).
# Usage (project root):  scripts/gpu_suite.sh OUTDIR [BUILD_DIR]
#   HISTEQ_COMMIT=<sha> names the commit in the summary where the tree has no .git.
# .deps (carried) must hold what the GPU machine lacks, from this machine:
#   ../shared/tools/gpu-deps.sh libturbojpeg0-dev libjpeg62-turbo-dev libjpeg62-turbo \
#     libdeflate-dev libdeflate0 libspng-dev libspng0 libisal-dev libisal2 nlohmann-json3-dev
set -uo pipefail
out=${1:?usage: scripts/gpu_suite.sh OUTDIR [BUILD_DIR]}
build=${2:-build}
mkdir -p "$out"
commit=${HISTEQ_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
cmake -B "$build" -DCMAKE_PREFIX_PATH="$PWD/.deps" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" \
  -DHISTEQ_BUILD_TESTS=ON \
  >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build "$build" -j"$(nproc)" >"$out/build.log" 2>&1 || {
  grep -E "error|Error" "$out/build.log" | head -40; exit 1; }
summary="$out/gpu_test_summary.txt"
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
echo "# whole GoogleTest suite at commit $commit on ${gpu:-no GPU} (scripts/gpu_suite.sh: each binary with --gtest_brief=1, then ctest)" >"$summary"
: >"$out/tests.log"
rc_all=0
for t in "$build"/tests/test_*; do
  [ -x "$t" ] && [ -f "$t" ] || continue
  name=$(basename "$t")
  log=$(cd "$build/tests" && "./$name" --gtest_brief=1 2>&1); rc=$?
  [ $rc -ne 0 ] && rc_all=1
  { echo "=== $name rc=$rc"; echo "$log"; } >>"$out/tests.log"
  echo "$name rc=$rc $(echo "$log" | grep -E '^\[  (PASSED|FAILED|SKIPPED) ' | tr '\n' ' ')" >>"$summary"
done
ctest --test-dir "$build" 2>&1 | tee "$out/ctest.log" | tail -3 >>"$summary"
grep -q "100% tests passed" "$out/ctest.log" || rc_all=1
cat "$summary"
exit $rc_all
