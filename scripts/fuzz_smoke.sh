#!/usr/bin/env bash
# scripts/fuzz_smoke.sh [BUILD_DIR] [SECONDS] — builds the libFuzzer harnesses with clang
# (ASan + UBSan, -DHISTEQ_FUZZ=ON) and runs each for SECONDS (default 5) from the repository's
# corpora, new inputs going to a temporary folder (the repository is not written). Exits
# non-zero on a finding (its input is kept under the temporary folder and named in the log).
# Used by .ci/run when clang is installed; docs: tests/fuzz/README.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build="${1:-build-fuzz}"
secs="${2:-5}"
command -v clang++ >/dev/null 2>&1 || { echo "fuzz_smoke: clang++ not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }
cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DHISTEQ_FUZZ=ON >/dev/null
cmake --build "$build" -j2 --target fuzz_decode fuzz_decode_equalize fuzz_cli_options
build="$(cd "$build" && pwd)"
work="$(mktemp -d /tmp/histeq-fuzz-smoke.XXXXXX)"
src="$PWD/tests/fuzz"
run() {  # harness, extra args...
  local h="$1"; shift
  mkdir -p "$work/$h" "$work/art-$h"
  echo "+ $h for ${secs}s"
  "$build/tests/fuzz/$h" -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/art-$h/" "$work/$h" "$@" 2>"$work/$h.log" ||
    { tail -n 40 "$work/$h.log"; echo "fuzz_smoke: $h found a problem: $work/art-$h/" >&2; return 1; }
  grep -E "stat::number_of_executed_units" "$work/$h.log" || true
}
run fuzz_decode -max_len=65536 "$src/corpus/decode" "$src/corpus/decode-min" "$src/crashes/decode"
run fuzz_decode_equalize -max_len=65536 "$src/corpus/decode" "$src/corpus/decode-min" "$src/crashes/decode"
cd "$work"  # fuzz_cli_options changes into an empty folder itself; absolute paths below
run fuzz_cli_options -max_len=4096 -dict="$src/cli.dict" "$src/corpus/cli"
echo "fuzz_smoke: no findings (logs in $work)"
