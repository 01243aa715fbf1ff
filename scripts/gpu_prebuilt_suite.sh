#!/usr/bin/env bash
# The whole test suite on the GPU machine from a build made on the build machine, for when the
# device time left is too short to configure and compile there (the full build takes about
# 20 core-minutes, the suite under a minute on 16 cores).
#
#   scripts/gpu_prebuilt_suite.sh --pack [BUILD_DIR]   on the build machine, after building
#       BUILD_DIR (default build; configured with nvJPEG, e.g. -DHISTEQ_NVJPEG_ROOT=...): writes
#       .gpu-bundle/ (ignored by git): the build tree without object files and ../shared, each a
#       solid xz archive (the test binaries share their kernels' fatbins, so ~175 MB pack to
#       ~12 MB), plus Debian's runtime libraries the GPU machine lacks (libjpeg62-turbo,
#       libdeflate0, libspng0, libisal2) and djpeg from libjpeg-turbo-progs. Carry .gpu-bundle.
#   scripts/gpu_prebuilt_suite.sh OUTDIR                on the GPU machine (project root):
#       unpacks the bundle where the build machine had it (the test binaries hold the source
#       folder's absolute path, so that path is made a link to this checkout when it differs),
#       then runs every CTest entry, 16 at a time, with their GoogleTest output; writes
#       OUTDIR/gpu_test_summary.txt (one line per CTest entry: its PASSED/FAILED/SKIPPED counts) and
#       OUTDIR/ctest.log. Exit 0 when every entry passed.
#   scripts/gpu_prebuilt_suite.sh --unpack OUTDIR       on the GPU machine: unpacks as above and
#       stops before the tests (for benchmarks and probes of the same build; then
#       export LD_LIBRARY_PATH=$PWD/.gpu-bundle/lib:$LD_LIBRARY_PATH).
# The binaries need a glibc and libstdc++ at least as new as the build machine's (Debian 12);
# the CUDA runtime is linked statically, nvJPEG is found through the build's RPATH (.deps).
set -uo pipefail
bundle=.gpu-bundle
if [ "${1:-}" = "--pack" ]; then
  set -e
  build=${2:-build}
  src=$(pwd -P)
  [ -f "$build/CMakeCache.txt" ] || { echo "no $build/CMakeCache.txt: build first" >&2; exit 1; }
  mkdir -p .git/info
  grep -qx "/$bundle/" .git/info/exclude 2>/dev/null || echo "/$bundle/" >>.git/info/exclude
  rm -rf "$bundle" && mkdir -p "$bundle/lib" "$bundle/bin"
  echo "$src" >"$bundle/source_dir"
  echo "$build" >"$bundle/build_dir"
  git rev-parse --short HEAD >"$bundle/commit" 2>/dev/null || echo unknown >"$bundle/commit"
  tar -cf - --exclude='*.o' --exclude="$build/Testing" --exclude="$build/package-test" \
    --exclude="$build/*venv" "$build" | xz -9 -T2 >"$bundle/build.tar.xz"
  [ -d ../shared ] && tar -C .. -cf - shared | xz -9 -T2 >"$bundle/shared.tar.xz"
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download libjpeg62-turbo libdeflate0 libspng0 libisal2 libjpeg-turbo-progs \
     >/dev/null 2>&1)
  for f in "$tmp"/*.deb; do dpkg -x "$f" "$tmp/x"; done
  cp -L "$tmp"/x/usr/lib/x86_64-linux-gnu/*.so.[0-9]* "$bundle/lib/"
  cp -a "$tmp/x/usr/bin/djpeg" "$tmp/x/usr/bin/cjpeg" "$bundle/bin/"
  rm -rf "$tmp"
  echo "packed $bundle ($(du -sh "$bundle" | cut -f1)) from $build at $(cat "$bundle/commit")"
  exit 0
fi

unpack_only=0
if [ "${1:-}" = "--unpack" ]; then unpack_only=1; shift; fi
out=${1:?usage: scripts/gpu_prebuilt_suite.sh --pack [BUILD_DIR] | [--unpack] OUTDIR}
mkdir -p "$out"
[ -f "$bundle/build.tar.xz" ] || { echo "no $bundle: run --pack on the build machine" >&2; exit 1; }
src=$(cat "$bundle/source_dir")
build=$(cat "$bundle/build_dir")
commit=$(cat "$bundle/commit")
here=$(pwd -P)
if [ "$here" != "$src" ]; then
  if [ -e "$src" ] && [ ! -L "$src" ]; then
    echo "$src exists and is not this checkout: cannot place the build" >&2
    exit 1
  fi
  mkdir -p "$(dirname "$src")" && ln -sfn "$here" "$src"
fi
unpack() {  # unpack ARCHIVE DIR: xz when the machine has it, else Python's tarfile
  if command -v xz >/dev/null 2>&1; then
    xz -dc "$1" | tar -C "$2" -xf -
  else
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
      "$1" "$2"
  fi
}
t0=$SECONDS
unpack "$bundle/build.tar.xz" "$here"
[ -f "$bundle/shared.tar.xz" ] && [ ! -d "$(dirname "$src")/shared" ] &&
  unpack "$bundle/shared.tar.xz" "$(dirname "$src")"
export LD_LIBRARY_PATH="$here/$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for p in djpeg cjpeg; do
  command -v "$p" >/dev/null 2>&1 || cp "$bundle/bin/$p" /usr/local/bin/ 2>/dev/null || true
done
# The CTest entries that run scripts call the build machine's cmake by its path: give it there.
cm=$(sed -n 's/^CMAKE_COMMAND:INTERNAL=//p' "$here/$build/CMakeCache.txt")
if [ -n "$cm" ] && [ ! -x "$cm" ] && command -v cmake >/dev/null 2>&1; then
  mkdir -p "$(dirname "$cm")" && ln -sfn "$(command -v cmake)" "$cm"
fi
# The installed package (package_consumer) links the libraries the build machine found, by
# absolute path (e.g. /usr/lib/x86_64-linux-gnu/libdeflate.so): where one is missing, link it
# to the bundle's runtime copy.
sed -n 's/^[A-Z_]*_LIBRARY:FILEPATH=//p' "$here/$build/CMakeCache.txt" | while read -r lib; do
  [ -e "$lib" ] || [ "${lib#/}" = "$lib" ] && continue
  for have in "$here/$bundle/lib/$(basename "$lib")".*; do
    [ -e "$have" ] && mkdir -p "$(dirname "$lib")" && ln -sfn "$have" "$lib" && break
  done
done
# nvJPEG is found without the cache (HISTEQ_NVJPEG_ROOT on the build machine): the exported
# targets name its path; where that is missing, link it to this machine's libnvjpeg.
grep -rhoE '/[^";]*libnvjpeg\.so[.0-9]*' "$here/$build/CMakeFiles/Export" 2>/dev/null | sort -u |
  while read -r lib; do
    [ -e "$lib" ] && continue
    name=$(basename "$lib")  # the same major version (libnvjpeg.so.13)
    have=$(ldconfig -p 2>/dev/null | awk -v n="$name" '$1 == n {print $NF; exit}')
    [ -n "$have" ] || have=$(ls /usr/local/cuda*/lib64/"$name" \
                               /usr/local/cuda*/targets/*/lib/"$name" 2>/dev/null | head -1)
    [ -n "$have" ] && mkdir -p "$(dirname "$lib")" && ln -sfn "$have" "$lib"
  done
echo "unpacked in $((SECONDS - t0)) s" >"$out/steps.txt"
[ "$unpack_only" = 1 ] && exit 0
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
summary="$out/gpu_test_summary.txt"
echo "# whole CTest suite at commit $commit on ${gpu:-no GPU} (scripts/gpu_prebuilt_suite.sh: built on the build machine, every entry run here, 16 at a time)" >"$summary"
t0=$SECONDS
ctest --test-dir "$src/$build" -j16 -V --timeout 600 >"$out/ctest.log" 2>&1
rc=$?
echo "ctest rc=$rc in $((SECONDS - t0)) s" >>"$out/steps.txt"
# Per entry: its number, name and GoogleTest's closing counts (ctest -V prefixes lines "N: ").
ctest --test-dir "$src/$build" -N 2>/dev/null | sed -n 's/^ *Test *#\([0-9]*\): \(.*\)$/\1 \2/p' |
  while read -r n name; do
    counts=$(grep -E "^$n: \[  (PASSED|FAILED|SKIPPED) " "$out/ctest.log" | sed "s/^$n: //" |
             tr '\n' ' ')
    state=$(grep -E "^ *[0-9]+/[0-9]+ Test +#$n: " "$out/ctest.log" | grep -oE 'Passed|Failed|\*\*\*[A-Za-z]+' |
            head -1)
    echo "$name ${state:-?} $counts"
  done >>"$summary"
grep -E "tests passed|Total Test time" "$out/ctest.log" >>"$summary"
cat "$out/steps.txt" "$summary"
exit $rc
