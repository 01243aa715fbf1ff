#!/usr/bin/env bash
# The Python package on a machine without a package registry (the GPU machine): builds the
# extension histeq._histeq with the plain CMake build (HISTEQ_BUILD_PYTHON=ON; nanobind from
# the unpacked wheel in .deps/py), runs pytest tests/python with PYTHONPATH=python:BUILD/python
# (pytest from .deps/py too, when the machine has none), then bench/python/bench_python.py.
# No pip install anywhere.
#
#   scripts/gpu_python.sh --fetch          on a machine WITH PyPI: downloads and unpacks the
#                                          pure-Python wheels (nanobind, pytest, pluggy,
#                                          iniconfig, packaging) into .deps/py (carry .deps)
#   scripts/gpu_python.sh OUTDIR [BUILD]   on the GPU machine (project root): build + pytest +
#                                          bench; logs and bench.md in OUTDIR. BENCH=0 skips
#                                          the benchmark; PYTEST_ARGS adds pytest arguments;
#                                          HISTEQ_COMMIT names the commit in the bench table
#                                          (the machine's .git may be stale).
set -uo pipefail
deps="$PWD/.deps/py"
if [ "${1:-}" = "--fetch" ]; then
  set -e
  mkdir -p "$deps" /tmp/histeq-wheels
  python3 -m pip download -q --no-deps -d /tmp/histeq-wheels nanobind pytest pluggy iniconfig \
    packaging
  for w in /tmp/histeq-wheels/*.whl; do python3 -m zipfile -e "$w" "$deps"; done
  echo "unpacked into $deps: $(ls "$deps" | grep -v dist-info | tr '\n' ' ')"
  exit 0
fi
out=${1:?usage: scripts/gpu_python.sh OUTDIR [BUILD_DIR] | --fetch}
build=${2:-build}
mkdir -p "$out"
py=$(command -v python3)
nb_dir=""
if [ -d "$deps/nanobind/cmake" ]; then nb_dir="-Dnanobind_DIR=$deps/nanobind/cmake"; fi
cmake -B "$build" -DCMAKE_PREFIX_PATH="$PWD/.deps" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" \
  -DHISTEQ_BUILD_PYTHON=ON -DPython_EXECUTABLE="$py" $nb_dir \
  >"$out/py_configure.log" 2>&1 || { tail -30 "$out/py_configure.log"; exit 1; }
# histeq (the CLI) too: test_files.py compares equalize_files' outputs with the CLI batch's.
cmake --build "$build" -j"$(nproc)" --target _histeq histeq >"$out/py_build.log" 2>&1 || {
  grep -E "error|Error" "$out/py_build.log" | head -40; exit 1; }
# .deps/py last: the machine's own packages (torch, cupy, numpy) win over anything carried.
export PYTHONPATH="$PWD/python:$PWD/$build/python${PYTHONPATH:+:$PYTHONPATH}:$deps"
# The CLI just built, for test_files.py (else it would take a build/histeq of another build).
export HISTEQ_CLI="${HISTEQ_CLI:-$PWD/$build/histeq}"
"$py" -c "import histeq; print('histeq', histeq.__version__, 'cuda:', histeq.cuda_available(), histeq._cuda_state[1])" \
  | tee "$out/py_import.txt"
# shellcheck disable=SC2086
"$py" -m pytest -q -rs tests/python ${PYTEST_ARGS:-} >"$out/pytest.log" 2>&1
rc=$?
tail -40 "$out/pytest.log"
[ $rc -eq 5 ] && echo "gpu_python.sh: pytest collected no tests" >&2
if [ "${BENCH:-1}" != 0 ]; then
  "$py" bench/python/bench_python.py --csv "$out/bench_python.csv" | tee "$out/bench_python.md"
fi
exit $rc
