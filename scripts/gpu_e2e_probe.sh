#!/usr/bin/env bash
# Where the time of a JPEG/PNG folder goes on the GPU machine: histeq's batch run under several
# routes (auto, --decoder cpu, --backend cpu, device worker counts), each with --json (per-file
# stage times, decoders, the summary with start-up costs), the single-file start-up, and the
# 2-core CPU-backend case (taskset to two cores, GPU hidden) against OpenCV with 2 threads.
# A measuring aid for bench/e2e/run.py (which gives the published figures), not a benchmark.
# Usage (project root, GPU machine, .deps carried, photos in PHOTOS/jpg):
#   HISTEQ_COMMIT=<sha> scripts/gpu_e2e_probe.sh OUTDIR [PHOTOS] [STEPS]
#   STEPS: comma list of build,prebuilt,tests,nvjpeg,batch,single,twocore,png (default
#   build,batch,single,twocore). prebuilt: the build carried in .gpu-bundle
#   (scripts/gpu_prebuilt_suite.sh --pack) instead of building here. nvjpeg: bench/probes/
#   nvjpeg_probe.cpp (nvJPEG's own start-up, decode and encode rates on these photos).
set -u
out=${1:?usage: scripts/gpu_e2e_probe.sh OUTDIR [PHOTOS] [STEPS]}
photos=${2:-.e2e}
steps=${3:-build,batch,single,twocore}
t_start=$(date +%s.%N)
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.3f}')" "$1" "$2"; }
mkdir -p "$out" && out=$(cd "$out" && pwd)
export LD_LIBRARY_PATH="$PWD/.deps/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export HISTEQ_COMMIT=${HISTEQ_COMMIT:-unknown}
B=build/histeq
has() { case ",$steps," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
if has build; then
  cmake -S . -B build -DCMAKE_PREFIX_PATH="$PWD/.deps" -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_BUILD_TYPE=Release >"$out/configure.txt" 2>&1
  target=histeq
  has tests && target=all
  cmake --build build -j16 --target $target >"$out/build.txt" 2>&1 || { tail -40 "$out/build.txt"; exit 1; }
  echo "built in $(elapsed "$t_start" "$(date +%s.%N)") s"
fi
if has prebuilt; then
  scripts/gpu_prebuilt_suite.sh --unpack "$out/unpack" || exit 1
  export LD_LIBRARY_PATH="$PWD/.gpu-bundle/lib:$LD_LIBRARY_PATH"
fi
if has tests; then  # the GPU tests of the executor and the JPEG paths
  for t in test_executor test_executor_jpeg_gpu test_jpeg_gpu test_cli_batch test_cli_jpeg test_cli; do
    (cd build && timeout 120 ./tests/$t --gtest_brief=1 >"$out/$t.txt" 2>&1; echo "$t rc=$?") | tee -a "$out/tests.txt"
    grep -E "FAILED|PASSED|SKIPPED \]" "$out/$t.txt" | head -12
  done
fi
"$B" --version | tee "$out/version.txt"
if has nvjpeg; then
  cu=/usr/local/cuda
  g++ -O2 -std=c++17 bench/probes/nvjpeg_probe.cpp -I$cu/include -L$cu/lib64 -lnvjpeg -lcudart \
    -lpthread -o /tmp/nvjpeg_probe && timeout 120 /tmp/nvjpeg_probe "$photos/jpg" 7 >"$out/nvjpeg_probe.txt" 2>&1
  echo "nvjpeg_probe rc=$?"; cat "$out/nvjpeg_probe.txt" | grep -v "^  "
fi
which nsys ncu 2>&1; nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
cat "$photos"/jpg/* >/dev/null
rep=/tmp/probe_j133
rm -rf "$rep" && mkdir -p "$rep"
for f in "$photos"/jpg/*.jpg; do
  for r in 1 2 3 4 5 6 7; do ln -s "$PWD/$f" "$rep/$(basename "$f" .jpg)_$r.jpg"; done
done
batch() {  # batch NAME ARGS...: one run over the 133 files, JSON Lines kept
  local name=$1; shift
  rm -rf /tmp/probe_out
  local t0 t1
  t0=$(date +%s.%N)
  "$B" equalize "$rep" -o /tmp/probe_out --json --quiet "$@" >"$out/$name.jsonl" 2>"$out/$name.err"
  local rc=$?
  t1=$(date +%s.%N)
  printf '%-14s rc=%d wall=%s s  %s\n' "$name" "$rc" "$(elapsed "$t0" "$t1")" "$*" | tee -a "$out/batch.txt"
  tail -1 "$out/$name.jsonl" | cut -c1-900 | tee -a "$out/batch.txt"
}
if has batch; then
  batch auto_a
  batch auto_b
  batch dec_cpu --decoder cpu
  batch all_cpu --backend cpu
  batch dec_gpu --decoder gpu
  batch dev1 --devices 0
  batch dev3 --devices 0,0,0
fi
if has single; then
  v="$photos/jpg/Volna.jpg"
  for i in 1 2 3; do
    /usr/bin/time -f "single auto: %e s, %M KB" "$B" equalize "$v" -o /tmp/probe_v.jpg --timing >>"$out/single.txt" 2>&1
  done
  for i in 1 2; do
    /usr/bin/time -f "single cpu: %e s, %M KB" "$B" equalize "$v" -o /tmp/probe_v.jpg --timing --backend cpu >>"$out/single.txt" 2>&1
    /usr/bin/time -f "single gpu: %e s, %M KB" "$B" equalize "$v" -o /tmp/probe_v.jpg --timing --decoder gpu >>"$out/single.txt" 2>&1
  done
  cat "$out/single.txt" | grep -E "single|total|start|init|decode|encode"
fi
if has twocore; then
  CUDA_VISIBLE_DEVICES= taskset -c 0,1 python3 bench/e2e/run.py --histeq "$B" --threads 2 --reps 2 \
    --no-torchvision "$photos/jpg" >"$out/twocore_jpg.txt" 2>&1
  grep -E "^\|" "$out/twocore_jpg.txt" | head -8
fi
if has png; then
  bench/e2e/fetch.sh "$photos" >"$out/png_prep.txt" 2>&1
  python3 bench/e2e/run.py --histeq "$B" --threads 16 --reps ${PNG_REPS:-3} ${E2E_ARGS:-} "$photos/png" \
    >"$out/e2e_png.txt" 2>&1
  grep -E "^\|" "$out/e2e_png.txt" | head -16
  rm -rf /tmp/probe_out
  "$B" equalize "$photos/png" -o /tmp/probe_out --json --quiet >"$out/png.jsonl" 2>"$out/png.err"
  echo "png batch rc=$?"; tail -1 "$out/png.jsonl" | cut -c1-900
fi
