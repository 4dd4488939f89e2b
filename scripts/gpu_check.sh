#!/usr/bin/env bash
# Every check that needs a GPU, in one short call on a lent device machine. Nothing is
# compiled there but NVRTC's kernels: the binaries, the shared libraries the device
# lacks and the kernels' cubins for sm_90 are made here, into one folder the call carries.
#
#   scripts/gpu_check.sh --bundle [BUILD]  here: build/gpu-bundle from a release build tree
#                                          (default build/release, whose luminal_tests and
#                                          generate are built first)
#   scripts/gpu_check.sh --rehearse        here: runs the bundle as the device would (a fresh
#                                          folder holding the tracked tree and the bundle, a clean
#                                          environment, only the bundle's libraries); the steps
#                                          that need a device say there is none
#   scripts/gpu_check.sh                   on the device: the check
#
# The device call: command "bash scripts/gpu_check.sh", carry ["build/gpu-bundle"],
# timeout_s 420. Steps, most valuable first, each under its own time limit, so a call cut
# short still returns what came before: (0) the binaries start (ldd); (1) the device and its
# two ceilings, copy bandwidth and bf16 GEMM rate; (2) the Llama-3.1-8B shape with random
# weights: bf16 TTFT at 128 and 1024 prompt tokens, TPOT after 1024, each launch of a decode
# step and of the 1024-token prefill timed beside the plan report's model, then the Q4_K_M
# plan and the Qwen3-30B-A3B shape; (3) the CUDA tests' device cases, compute-sanitizer's
# memcheck and racecheck on a short decode; (4) transformers eager and torch.compile on the
# same shape. A summary table comes last; $OUT gets the log, every result as JSON lines and
# the per-launch profiles.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUNDLE="$ROOT/build/gpu-bundle"
BUNDLE_LIMIT_MIB=48
LLAMA_8B="tests/data/configs/llama31_8b"

# The libraries every Linux machine with a CUDA driver has (glibc, the GCC runtime) and
# the CUDA ones this project opens at run time from the machine's own toolkit and driver.
system_library() {
  [[ "$1" =~ ^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libgcc_s\.|libstdc\+\+\.|libcuda\.|libnvrtc|libcublas) ]]
}

make_bundle() {
  local build="${1:-$ROOT/build/release}"
  source "$ROOT/scripts/common.sh"
  if [[ ! -f "$build/CMakeCache.txt" ]]; then
    "$ROOT/scripts/setup.sh"
    luminal_configure "$build" "${RELEASE_ARGS[@]}"
  fi
  cmake --build "$build" -j"$LUMINAL_JOBS" --target luminal_tests generate
  rm -rf "$BUNDLE"
  mkdir -p "$BUNDLE/tests" "$BUNDLE/examples" "$BUNDLE/lib" "$BUNDLE/kernels"
  cp "$build/tests/luminal_tests" "$BUNDLE/tests/"
  cp "$build/examples/generate" "$BUNDLE/examples/"
  strip --strip-unneeded "$BUNDLE/tests/luminal_tests" "$BUNDLE/examples/generate"
  local binary name path
  for binary in "$BUNDLE/tests/luminal_tests" "$BUNDLE/examples/generate"; do
    while read -r name path; do
      system_library "$name" || cp -L "$path" "$BUNDLE/lib/$name"
    done < <(ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
  done
  # The cubins of the first run's kernels (the 8B shape in bf16: a 1024-token prompt, decode after
  # it), compiled here for sm_90 under the key the runtime looks them up by. The rest compile there.
  local step
  for step in "--cached 0 --new-tokens 1024" "--cached 1024 --new-tokens 1"; do
    # shellcheck disable=SC2086  # the step's arguments are meant to be split
    LUMINAL_CACHE_DIR="$BUNDLE/kernels" "$BUNDLE/examples/generate" --model "$ROOT/$LLAMA_8B" --device cuda \
      --plan-only --weights bf16 --context 2048 $step >/dev/null
  done
  local missing
  missing="$(env -i LD_LIBRARY_PATH="$BUNDLE/lib" ldd "$BUNDLE/tests/luminal_tests" "$BUNDLE/examples/generate" | grep 'not found' || true)"
  [[ -z "$missing" ]] || { echo "gpu_check.sh: the bundle lacks libraries: $missing" >&2; exit 1; }
  local size_mib
  size_mib=$(( $(du -sk "$BUNDLE" | cut -f1) / 1024 ))
  echo "gpu_check.sh: $BUNDLE: ${size_mib} MiB ($(ls "$BUNDLE/lib" | wc -l) libraries, $(ls "$BUNDLE/kernels" | wc -l) cubins)"
  (( size_mib <= BUNDLE_LIMIT_MIB )) || { echo "gpu_check.sh: the bundle is over ${BUNDLE_LIMIT_MIB} MiB" >&2; exit 1; }
}

rehearse() {
  [[ -x "$BUNDLE/examples/generate" ]] || { echo "gpu_check.sh: no bundle; run scripts/gpu_check.sh --bundle first" >&2; exit 1; }
  STAGE="$(mktemp -d)"
  trap 'rm -rf "$STAGE"' EXIT
  local stage="$STAGE"
  # What the device tool lays out: the tracked tree (and files git does not ignore), plus the bundle.
  (cd "$ROOT" && git ls-files -co --exclude-standard -z | tar --null --ignore-failed-read --files-from=- -cf - 2>/dev/null | tar -xf - -C "$stage")
  mkdir -p "$stage/build" "$stage/out" "$stage/home"
  cp -r "$BUNDLE" "$stage/build/gpu-bundle"
  env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$stage/home" OUT="$stage/out" LUMINAL_GPU_CHECK_REHEARSAL=1 \
    bash "$stage/scripts/gpu_check.sh"
}

case "${1:-}" in
  --bundle) shift; make_bundle "$@"; exit 0 ;;
  --rehearse) rehearse; exit 0 ;;
  "") ;;
  *) echo "usage: $0 [--bundle [BUILD] | --rehearse]" >&2; exit 2 ;;
esac

# ---- the check, run where the bundle has been carried ----
cd "$ROOT"
RESULTS="${OUT:-/tmp/luminal-gpu-check}"
mkdir -p "$RESULTS"
exec > >(tee "$RESULTS/gpu_check.log") 2>&1
JSONL="$RESULTS/results.jsonl"
: >"$JSONL"
export LD_LIBRARY_PATH="$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LUMINAL_TEST_DATA_DIR="$ROOT/tests/data"
export LUMINAL_CACHE_DIR="${TMPDIR:-/tmp}/luminal-kernels"
mkdir -p "$LUMINAL_CACHE_DIR" && cp -r "$BUNDLE/kernels/." "$LUMINAL_CACHE_DIR/"
GENERATE="$BUNDLE/examples/generate"
TESTS="$BUNDLE/tests/luminal_tests"
PYTHON="$(command -v python3 || true)"
start=$SECONDS
DEVICE=0
nvidia-smi -L >/dev/null 2>&1 && DEVICE=1

# step NAME LIMIT_S COMMAND...: runs COMMAND under its time limit, records its status and time.
step() {
  local name="$1" limit="$2"; shift 2
  echo "=== [$((SECONDS - start)) s] $name (limit ${limit} s)"
  local began=$SECONDS rc=0
  # timeout runs programs, not functions: the step runs in a bash that inherits them (export -f below).
  timeout -k 5 "$limit" bash -c '"$@"' step "$@" || rc=$?
  local status=ok
  ((rc == 0)) || status="exit $rc"
  ((rc == 124 || rc == 137)) && status="timed out"
  echo "=== $name: $status in $((SECONDS - began)) s"
  printf '{"step": "%s", "status": "%s", "seconds": %d}\n' "$name" "$status" $((SECONDS - began)) >>"$JSONL"
}

# record KIND LABEL COMMAND...: runs COMMAND, echoing its output, and keeps its result lines as JSON.
record() {
  local kind="$1" label="$2"; shift 2
  local rc=0
  "$@" 2>&1 | tee "$RESULTS/last.out" || rc=$?
  sed -n 's/^\(BENCH_RESULT\|RESULT\|PLAN_RESULT\) \(.*\)/\2/p' "$RESULTS/last.out" |
    while read -r json; do printf '{"kind": "%s", "label": "%s", "result": %s}\n' "$kind" "$label" "$json"; done >>"$JSONL"
  return "$rc"
}

binaries_start() {
  local missing
  missing="$(ldd "$GENERATE" "$TESTS" | grep 'not found' || true)"
  [[ -z "$missing" ]] || { echo "libraries not found: $missing"; return 1; }
  echo "ldd: every library of generate and luminal_tests resolves"
  "$GENERATE" --help >/dev/null
}

device_facts() {
  if ((DEVICE)); then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
    record facts device "$PYTHON" scripts/gpu_check.py facts
  else
    echo "no device: nvidia-smi finds no GPU"
  fi
}

# ours LABEL ARGS...: generate with random weights on the 8B config (or as ARGS say).
ours() {
  local label="$1"; shift
  record ours "$label" "$GENERATE" --random-weights --ignore-eos --seed 1 "$@"
}

llama_8b() {
  if ((!DEVICE)); then
    echo "no device: the 8B plan report alone (decode after 1024 tokens), then a small model on the CPU from the bundle"
    record plan "8b-bf16-decode-plan" "$GENERATE" --model "$LLAMA_8B" --device cuda --plan-only --weights bf16 --context 2048 \
      --cached 1024 | tail -n 6
    ours "smollm2-135m-cpu" --model tests/data/configs/smollm2_135m --device cpu --prompt-tokens 16 --max-tokens 4
    return
  fi
  local bandwidth
  bandwidth="$(sed -n 's/.*"copy_bandwidth": \([0-9.e+]*\).*/\1/p' "$JSONL" | head -n1)"
  ours "8b-bf16-1024" --model "$LLAMA_8B" --device cuda --weights bf16 --context 2048 --prompt-tokens 1024 --iters 3 \
    --max-tokens 33 ${bandwidth:+--bandwidth "$bandwidth"} --profile "$RESULTS/profile_8b_bf16.json"
  ours "8b-bf16-128" --model "$LLAMA_8B" --device cuda --weights bf16 --context 2048 --prompt-tokens 128 --iters 3 --max-tokens 2
}

llama_8b_q4_k_m() {
  ((DEVICE)) || { echo "no device"; return 0; }
  ours "8b-q4_k_m-1024" --model "$LLAMA_8B" --device cuda --weights bf16 --quant q4_k_m --context 2048 --prompt-tokens 1024 \
    --iters 2 --max-tokens 33
}

qwen3_moe() {
  ((DEVICE)) || { echo "no device"; return 0; }
  ours "qwen3-30b-a3b-bf16-1024" --model tests/data/configs/qwen3_moe_30b_a3b --device cuda --weights bf16 --context 2048 \
    --prompt-tokens 1024 --iters 2 --max-tokens 33
}

cuda_tests() {
  # Without a device the device cases skip; the rest of tests/cuda runs in CI on every commit.
  "$TESTS" --source-file='*/tests/cuda/test_cuda_runtime.cpp' --duration=true
}

sanitizers() {
  ((DEVICE)) || { echo "no device"; return 0; }
  local tool
  for tool in memcheck racecheck; do
    compute-sanitizer --tool "$tool" --error-exitcode 1 "$GENERATE" --model tests/data/configs/smollm2_135m --random-weights \
      --device cuda --weights bf16 --prompt-tokens 16 --max-tokens 4 --ignore-eos >"$RESULTS/sanitizer_$tool.log" 2>&1 &&
      echo "$tool: no errors" || { echo "$tool: errors (sanitizer_$tool.log):"; tail -n 20 "$RESULTS/sanitizer_$tool.log"; return 1; }
  done
}

peer() {
  ((DEVICE)) || { echo "no device"; return 0; }
  record peer "torch-$1" "$PYTHON" scripts/gpu_check.py peer "$1" "$LLAMA_8B"
}

export RESULTS JSONL GENERATE TESTS PYTHON DEVICE LLAMA_8B
export -f record ours binaries_start device_facts llama_8b llama_8b_q4_k_m qwen3_moe cuda_tests sanitizers peer
step "binaries start (ldd)" 30 binaries_start
step "device facts, copy bandwidth, bf16 GEMM rate" 60 device_facts
step "Llama-3.1-8B shape bf16: TTFT 128/1024, TPOT after 1024, per-launch profile" 150 llama_8b
step "Llama-3.1-8B shape Q4_K_M" 60 llama_8b_q4_k_m
step "Qwen3-30B-A3B shape bf16" 90 qwen3_moe
step "CUDA tests (device cases)" 90 cuda_tests
step "compute-sanitizer memcheck and racecheck" 90 sanitizers
step "transformers eager, Llama-3.1-8B shape" 60 peer eager
step "torch.compile (inductor), Llama-3.1-8B shape" 150 peer compile
rm -f "$RESULTS/last.out"
echo "=== [$((SECONDS - start)) s] summary"
if [[ -n "$PYTHON" ]]; then "$PYTHON" scripts/gpu_check.py summary "$JSONL"; else cat "$JSONL"; fi
