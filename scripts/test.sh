#!/usr/bin/env bash
# THE test command: installs dependencies, then
#   (a) release build of everything (tests, examples, benchmarks) + all tests;
#   (b) Debug -O1 build with ASan + UBSan + the `unit` tests;
#   (c) clang build of the libFuzzer targets + a short run of each (`fuzz`);
#   (d) the Python package (python/): its environment, the extension, pytest.
# All stages always run; the last line is "<N> passed, <N> failed" summed over
# all ctest runs (a failed configure/build counts as one failure).
# Environment: see scripts/common.sh; LUMINAL_SKIP_ASAN=1 skips stage (b),
# LUMINAL_SKIP_FUZZ=1 stage (c), LUMINAL_SKIP_PYTHON=1 stage (d).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

"$LUMINAL_ROOT/scripts/setup.sh"

passed=0
failed=0
LOG_DIR="$LUMINAL_BUILD_DIR/logs"
mkdir -p "$LOG_DIR"

# run_ctest <stage> <ctest args...>: runs ctest, adds its counts to the totals.
run_ctest() {
  local stage="$1"; shift
  local log="$LOG_DIR/ctest-$stage.log"
  ctest "$@" --output-on-failure --no-tests=error -j"$LUMINAL_JOBS" 2>&1 | tee "$log" || true
  # ctest's summary: "NN% tests passed, F tests failed out of T"
  local line
  line="$(grep -Eo '[0-9]+ tests? failed out of [0-9]+' "$log" | tail -n1 || true)"
  if [[ -z "$line" ]]; then
    echo "test.sh: [$stage] ctest printed no summary; counting one failure" >&2
    failed=$((failed + 1))
    return
  fi
  local f t
  f="$(awk '{print $1}' <<<"$line")"
  t="$(awk '{print $NF}' <<<"$line")"
  passed=$((passed + t - f))
  failed=$((failed + f))
}

# stage <name> <build-dir> <ctest-extra-args...> -- <configure args...>
stage() {
  local name="$1" dir="$2"; shift 2
  local ctest_args=()
  while [[ "$1" != "--" ]]; do ctest_args+=("$1"); shift; done
  shift
  local start=$SECONDS
  echo "=== [$name] configure + build in $dir"
  if ! luminal_configure "$dir" "$@"; then
    echo "test.sh: [$name] configure failed" >&2
    failed=$((failed + 1))
    return
  fi
  # Keep going past errors so every suite that does compile still runs.
  if ! cmake --build "$dir" -j"$LUMINAL_JOBS" -- -k 0; then
    echo "test.sh: [$name] build failed; suites that built still run" >&2
    failed=$((failed + 1))
    remove_stale_executables "$dir"
  fi
  echo "=== [$name] test"
  run_ctest "$name" --test-dir "$dir" "${ctest_args[@]}"
  echo "=== [$name] done in $((SECONDS - start)) s"
}

# After a failed build, an executable that ninja would still relink is stale
# (from an earlier build): delete it, so ctest reports "Not Run" instead of
# passing on old code.
remove_stale_executables() {
  local dir="$1" exe
  for exe in $(ninja -C "$dir" -t targets all | sed -n 's/^\([^:]*\): CXX_EXECUTABLE_LINKER.*/\1/p'); do
    if [[ "$(ninja -C "$dir" -n "$exe")" == *$'\n['* ]]; then
      rm -f "$dir/$exe"
    fi
  done
}

stage release "$RELEASE_DIR" -- "${RELEASE_ARGS[@]}"
# The CUDA backend's compile coverage: what each suite compiled with NVRTC (ctest keeps passing tests' output here).
grep -h "generated kernels" "$RELEASE_DIR/Testing/Temporary/LastTest.log" 2>/dev/null | sed 's/^/test.sh: /' || true

if [[ "${LUMINAL_SKIP_ASAN:-0}" != 1 ]]; then
  # intercept_tls_get_addr=0: up to LLVM 16 the runtime's __tls_get_addr interceptor takes a dynamic TLS
  # block that lands 16 bytes into a page for glibc 2.19's (its header gone since glibc 2.25) and reads a
  # bogus range from the words before it, which LeakSanitizer's exit scan then faults on ("Tracer caught
  # signal 11"), depending only on where blocks land (google/sanitizers#1322). Without the interceptor
  # dynamic TLS is not a root: that could only add leak reports, never hide one.
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
  stage asan "$ASAN_DIR" -L unit -- "${ASAN_ARGS[@]}"
fi

if [[ "${LUMINAL_SKIP_FUZZ:-0}" != 1 ]]; then
  stage fuzz "$FUZZ_DIR" -L fuzz -- "${FUZZ_ARGS[@]}"
fi

# The Python package: after the release stage, whose examples/generate its LLM tests compare with.
python_stage() {
  local start=$SECONDS log="$LOG_DIR/pytest.log" python
  echo "=== [python] environment + extension"
  if ! python="$("$LUMINAL_ROOT/scripts/python_env.sh")"; then
    echo "test.sh: [python] environment or build failed" >&2
    failed=$((failed + 1))
    return
  fi
  echo "=== [python] pytest"
  # From tests/: the checkout's python/luminal (no extension in it) must not shadow the installed package.
  (cd "$LUMINAL_ROOT/python/tests" && LUMINAL_BUILD_DIR="$LUMINAL_BUILD_DIR" "$python" -m pytest . -q -p no:cacheprovider \
     -rfE --import-mode=importlib) 2>&1 | tee "$log" || true
  # pytest's summary: "N failed, N passed, N skipped, N xfailed in 12.3s"
  local summary p f e
  summary="$(grep -E '^=* ?[0-9]+ (passed|failed|error)' "$log" | tail -n1 || true)"
  [[ -n "$summary" ]] || summary="$(grep -E '[0-9]+ (passed|failed)' "$log" | tail -n1 || true)"
  if [[ -z "$summary" ]]; then
    echo "test.sh: [python] pytest printed no summary; counting one failure" >&2
    failed=$((failed + 1))
    return
  fi
  p="$(grep -Eo '[0-9]+ passed' <<<"$summary" | awk '{print $1}' || true)"
  f="$(grep -Eo '[0-9]+ failed' <<<"$summary" | awk '{print $1}' || true)"
  e="$(grep -Eo '[0-9]+ errors?' <<<"$summary" | awk '{print $1}' || true)"
  passed=$((passed + ${p:-0}))
  failed=$((failed + ${f:-0} + ${e:-0}))
  echo "=== [python] done in $((SECONDS - start)) s"
}
if [[ "${LUMINAL_SKIP_PYTHON:-0}" != 1 ]]; then
  python_stage
fi

echo "$passed passed, $failed failed"
[[ "$failed" -eq 0 ]]
