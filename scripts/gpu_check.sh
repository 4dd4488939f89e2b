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
#
# The device tool call: command "bash scripts/gpu_check.sh", carry ["build/gpu-deps"].
# Logs go to $OUT when it is set. Ends with a summary table.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEPS="$ROOT/build/gpu-deps"

PACKAGES=(libfmt-dev libfmt9 libabsl-dev libabsl20220623 nlohmann-json3-dev libeigen3-dev doctest-dev
          libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 libutf8proc-dev libutf8proc2
          libcli11-dev pkgconf pkgconf-bin libpkgconf3 pkg-config)

if [[ "${1:-}" == "--prepare" ]]; then
  mkdir -p "$DEPS"
  (cd "$DEPS" && apt-get download "${PACKAGES[@]}")
  du -sh "$DEPS"
  exit 0
fi

LOG="${OUT:-/tmp}/gpu_check.log"
exec > >(tee "$LOG") 2>&1
start=$SECONDS
step() { echo "=== [$((SECONDS - start)) s] $*"; }

step "device"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
nvcc --version | tail -1

step "unpack dependencies"
PREFIX=/tmp/luminal-deps
rm -rf "$PREFIX" && mkdir -p "$PREFIX"
for deb in "$DEPS"/*.deb; do
  if command -v dpkg >/dev/null; then dpkg -x "$deb" "$PREFIX"
  else (cd "$PREFIX" && ar p "$deb" data.tar.xz | tar xJ); fi
done
export PATH="$PREFIX/usr/bin:$PATH"
export LD_LIBRARY_PATH="$PREFIX/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
export PKG_CONFIG_PATH="$PREFIX/usr/lib/x86_64-linux-gnu/pkgconfig:$PREFIX/usr/share/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$PREFIX"
export LUMINAL_CACHE_DIR=/tmp/luminal-kernels

step "configure + build (test_cuda, generate, random_model)"
BUILD=/tmp/luminal-build
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX/usr" \
  -DLUMINAL_BUILD_TESTS=ON -DLUMINAL_BUILD_EXAMPLES=ON -DLUMINAL_BUILD_BENCHMARKS=OFF -DLUMINAL_INSTALL=OFF >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target test_cuda generate random_model

step "CUDA tests (device runtime against the reference; families against transformers)"
tests_rc=0
"$BUILD/tests/test_cuda" --duration=true || tests_rc=$?

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
echo "test_cuda exit code: $tests_rc; total $((SECONDS - start)) s"
exit "$tests_rc"
