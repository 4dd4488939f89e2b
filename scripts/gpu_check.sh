#!/usr/bin/env bash
# Every check that needs a GPU, in one call on a lent device machine (which
# has nvcc, CMake, ninja and Python but none of our Debian dependencies and no
# network).
#
#   scripts/gpu_check.sh --prepare   here: download the dependencies' .debs into
#                                    build/gpu-deps (carry that path to the device)
#   scripts/gpu_check.sh             on the device: unpack them into a prefix,
#                                    build, run the CUDA tests (the device kernels
#                                    against the reference runtime, the five
#                                    families against transformers' logits), then
#                                    time generation on CPU and GPU side by side
#   scripts/gpu_check.sh --bench     on the device: unpack, build generate while the
#                                    benchmark suite's gpu_llm configuration starts
#                                    (issue 20: bf16 Llama-3-8B and Qwen3-MoE shapes,
#                                    ours against HF eager and torch.compile, the
#                                    copy-bandwidth floor), inside a budget of
#                                    LUMINAL_BENCH_BUDGET_S (default 540) seconds
#                                    from the script's start; further arguments go
#                                    to the suite (--skip torch-compile-cuda, or
#                                    --dry-run to check it all on a CPU here)
#
# The device tool call: command "bash scripts/gpu_check.sh" (or "... --bench"), carry
# ["build/gpu-deps"]. Logs go to $OUT when it is set (--bench: also the suite's SQLite
# database and every path's raw output). Ends with a summary table.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEPS="$ROOT/build/gpu-deps"

PACKAGES=(libfmt-dev libfmt9 libabsl-dev libabsl20220623 nlohmann-json3-dev libeigen3-dev doctest-dev
          libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 libutf8proc-dev libutf8proc2
          libcli11-dev pkgconf pkgconf-bin libpkgconf3 pkg-config)

MODE=tests
SUITE_ARGS=()
case "${1:-}" in
  --prepare)
    mkdir -p "$DEPS"
    (cd "$DEPS" && apt-get download "${PACKAGES[@]}")
    du -sh "$DEPS"
    exit 0 ;;
  --bench) MODE=bench; shift; SUITE_ARGS=("$@") ;;
  "") ;;
  *) echo "usage: $0 [--prepare | --bench [suite arguments...]]" >&2; exit 2 ;;
esac

RESULTS="${OUT:-/tmp}"
if [[ "$MODE" == bench ]]; then LOG="$RESULTS/gpu_bench.log"; else LOG="$RESULTS/gpu_check.log"; fi
exec > >(tee "$LOG") 2>&1
start=$SECONDS
step() { echo "=== [$((SECONDS - start)) s] $*"; }

step "device"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
nvcc --version | tail -1

step "unpack dependencies"
SCRATCH="${LUMINAL_GPU_SCRATCH:-/tmp}"  # where dependencies, build and bench models go
PREFIX="$SCRATCH/luminal-deps"
rm -rf "$PREFIX" && mkdir -p "$PREFIX"
for deb in "$DEPS"/*.deb; do
  if command -v dpkg >/dev/null; then dpkg -x "$deb" "$PREFIX"
  else (cd "$PREFIX" && ar p "$deb" data.tar.xz | tar xJ); fi
done
export PATH="$PREFIX/usr/bin:$PATH"
export LD_LIBRARY_PATH="$PREFIX/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
export PKG_CONFIG_PATH="$PREFIX/usr/lib/x86_64-linux-gnu/pkgconfig:$PREFIX/usr/share/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$PREFIX"
export LUMINAL_CACHE_DIR="$SCRATCH/luminal-kernels"

BUILD="$SCRATCH/luminal-build"
step "configure"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX/usr" \
  -DLUMINAL_BUILD_TESTS=ON -DLUMINAL_BUILD_EXAMPLES=ON -DLUMINAL_BUILD_BENCHMARKS=OFF -DLUMINAL_INSTALL=OFF >/dev/null

if [[ "$MODE" == bench ]]; then
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' \
    || true
  # generate is one translation unit (a minute or two): it builds while the suite writes the
  # weights, measures the copy bandwidth and runs the peers; paths of ours wait for the marker.
  step "build generate in the background (log: $RESULTS/gpu_bench_build.log)"
  marker="$SCRATCH/luminal-build.done"
  rm -f "$marker"
  (rc=0; cmake --build "$BUILD" -j"$(nproc)" --target generate >"$RESULTS/gpu_bench_build.log" 2>&1 || rc=$?
   echo "$rc" >"$marker") &
  build_pid=$!
  budget=$(( ${LUMINAL_BENCH_BUDGET_S:-540} - (SECONDS - start) ))
  step "benchmark suite, configuration gpu_llm, budget ${budget} s"
  bench_rc=0
  PYTHONUNBUFFERED=1 PYTHONPATH="$ROOT/benchmarks/suite" python3 -m luminal_bench --config gpu_llm --bin "$BUILD" \
    --db "$RESULTS/bench.db" --work "$SCRATCH/luminal-bench" --build-marker "$marker" --budget-s "$budget" \
    --raw-log "$RESULTS/gpu_bench_raw.log" "${SUITE_ARGS[@]}" || bench_rc=$?
  wait "$build_pid" || true
  echo "build of generate: exit code $(cat "$marker" 2>/dev/null || echo '?') ($(tail -n1 "$RESULTS/gpu_bench_build.log"))"
  echo "benchmark suite exit code: $bench_rc; total $((SECONDS - start)) s"
  exit "$bench_rc"
fi

step "build (luminal_tests, generate, random_model)"
cmake --build "$BUILD" -j"$(nproc)" --target luminal_tests generate random_model

step "CUDA tests (device runtime against the reference; families against transformers)"
tests_rc=0
"$BUILD/tests/luminal_tests" --source-file="*/tests/cuda/*" --duration=true || tests_rc=$?

step "generation: CPU and CUDA side by side on a random-weight Llama (hidden 512, 8 layers)"
MODEL=/tmp/luminal-random-llama
"$BUILD/examples/random_model" --tokenizer "$ROOT/tests/data/tokenizers/llama3.json" --out "$MODEL" \
  --hidden 512 --layers 8 --heads 8 --kv-heads 4 --intermediate 1408 >/dev/null
declare -A result
for device in cpu cuda; do
  for weights in f32 bf16; do
    line="$("$BUILD/examples/generate" --model "$MODEL" --prompt "The quick brown fox jumps over the lazy dog" \
             --max-tokens 32 --iters 3 --ignore-eos --device "$device" --weights "$weights" | grep '^BENCH_RESULT' || true)"
    result["$device-$weights"]="${line:-FAILED}"
    echo "$device $weights: ${line:-FAILED}"
  done
done

step "summary"
printf '%-12s %-10s %-10s %s\n' "run" "TTFT ms" "TPOT ms" "ids equal to cpu-f32"
ref_ids="$(sed -n 's/.*"generated_ids":\(\[[^]]*\]\).*/\1/p' <<<"${result[cpu-f32]}")"
for key in cpu-f32 cpu-bf16 cuda-f32 cuda-bf16; do
  line="${result[$key]}"
  ttft="$(sed -n 's/.*"ttft_ms":\([0-9.e+-]*\).*/\1/p' <<<"$line")"
  tpot="$(sed -n 's/.*"tpot_ms":\([0-9.e+-]*\).*/\1/p' <<<"$line")"
  ids="$(sed -n 's/.*"generated_ids":\(\[[^]]*\]\).*/\1/p' <<<"$line")"
  printf '%-12s %-10s %-10s %s\n' "$key" "${ttft:-FAILED}" "${tpot:-FAILED}" "$([[ -n "$ids" && "$ids" == "$ref_ids" ]] && echo yes || echo no)"
done
echo "CUDA tests exit code: $tests_rc; total $((SECONDS - start)) s"
exit "$tests_rc"
