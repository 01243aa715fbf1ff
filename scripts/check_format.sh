#!/usr/bin/env bash
# scripts/check_format.sh [--fix] — .clang-format over every tracked C++/CUDA source and header
# (core/, include/, kernels/, src/, tests/, bench/, python/src/, samples/, examples/; not
# bench/probes/: throw-away experiments, not built by CMake, whose statement macros written
# without semicolons clang-format 14 joins onto one line and reflows differently on each pass).
# Without
# --fix: fails listing each file whose formatting differs (clang-format --dry-run --Werror);
# with --fix: formats them in place. .ci/run runs the check. Needs clang-format (Debian 12:
# apt-get install clang-format, which is clang-format-14; the tree is formatted with 14).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fmt=""
for c in clang-format-14 clang-format; do
  if command -v "$c" >/dev/null 2>&1; then fmt="$c"; break; fi
done
if [ -z "$fmt" ]; then
  echo "check_format.sh: clang-format not found (apt-get install clang-format)" >&2
  exit 2
fi
dirs=(core include kernels src tests bench python/src samples examples)
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files -- "${dirs[@]}" | grep -E '\.(c|cc|cpp|cxx|h|hh|hpp|cu|cuh)$' |
                       grep -v '^bench/probes/')
else  # a source tarball: the same folders, found on disk
  mapfile -t files < <(find "${dirs[@]}" -type f 2>/dev/null |
                       grep -E '\.(c|cc|cpp|cxx|h|hh|hpp|cu|cuh)$' | grep -v '^bench/probes/' | sort)
fi
if [ "${#files[@]}" -eq 0 ]; then
  echo "check_format.sh: no sources found" >&2
  exit 2
fi
if [ "${1:-}" = "--fix" ]; then
  "$fmt" -i "${files[@]}"
  echo "check_format.sh: formatted ${#files[@]} files with $fmt"
  exit 0
fi
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! "$fmt" --dry-run --Werror "${files[@]}" 2>"$log"; then
  grep -oE '^[^:]+\.(c|cc|cpp|cxx|h|hh|hpp|cu|cuh):' "$log" | sort -u |
    sed 's/:$//; s/^/  not formatted: /' >&2
  echo "check_format.sh: run scripts/check_format.sh --fix (or $fmt -i FILE)" >&2
  exit 1
fi
echo "check_format.sh: ${#files[@]} files formatted as .clang-format says"
