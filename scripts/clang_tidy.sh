#!/usr/bin/env bash
# scripts/clang_tidy.sh [BUILD_DIR] — clang-tidy (.clang-tidy at the root) over the host C++
# sources core/*.cpp and src/*/*.cpp (every host room of docs/architecture.md) and the headers
# they include from core/, include/, src/ and kernels/, with the compile commands
# of a configured build (default: build; CMake writes compile_commands.json there). Exit status
# non-zero on any finding (WarningsAsErrors: '*'). Two jobs; about a minute of CPU on 2 cores.
# Needs clang-tidy (Debian 12: apt-get install clang-tidy, which is clang-tidy-14).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build="${1:-build}"
if [ ! -f "$build/compile_commands.json" ]; then
  echo "clang_tidy.sh: no $build/compile_commands.json; configure first: cmake -S . -B $build" >&2
  exit 2
fi
runner=""
for c in run-clang-tidy run-clang-tidy-14 run-clang-tidy-15 run-clang-tidy-16; do
  if command -v "$c" >/dev/null 2>&1; then runner="$c"; break; fi
done
tidy=""
for c in clang-tidy clang-tidy-14 clang-tidy-15 clang-tidy-16; do
  if command -v "$c" >/dev/null 2>&1; then tidy="$c"; break; fi
done
if [ -z "$tidy" ]; then
  echo "clang_tidy.sh: clang-tidy not found (apt-get install clang-tidy)" >&2
  exit 2
fi
if [ -n "$runner" ]; then
  # -quiet: findings only; the file regex: the host rooms' sources (never .cu).
  "$runner" -clang-tidy-binary "$(command -v "$tidy")" -p "$build" -j 2 -quiet \
    "$PWD/(core|src/[a-z]+)/[^/]*\.cpp$"
else
  status=0
  for f in core/*.cpp src/*/*.cpp; do "$tidy" -p "$build" --quiet "$f" || status=1; done
  exit "$status"
fi
