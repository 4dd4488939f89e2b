#!/usr/bin/env bash
# Longer fuzzing of the file parsers than the CI smoke run:
#   scripts/fuzz.sh [seconds per target, default 300] [target...]
# Builds the libFuzzer targets (clang) in $LUMINAL_BUILD_DIR/fuzz, runs each on
# its growing corpus (seeded with tests/data), and prints per target the runs
# executed and any findings (crash/leak/timeout/oom files) left in findings/.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

"$LUMINAL_ROOT/scripts/setup.sh"
seconds="${1:-300}"
shift || true

luminal_configure "$FUZZ_DIR" "${FUZZ_ARGS[@]}" >/dev/null
cmake --build "$FUZZ_DIR" -j"$LUMINAL_JOBS"

targets=("$@")
if ((${#targets[@]} == 0)); then
  mapfile -t targets < <(cd "$FUZZ_DIR/fuzz" && ls ./*.args | sed 's|^\./||; s|\.args$||')
fi

status=0
for target in "${targets[@]}"; do
  mapfile -t args <"$FUZZ_DIR/fuzz/$target.args"
  cmd=("$FUZZ_DIR/fuzz/$target" "-max_total_time=$seconds" "${args[@]}")
  log="$FUZZ_DIR/fuzz/$target.log"
  "${cmd[@]}" >"$log" 2>&1 || status=1
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)"
  findings="$(find "$FUZZ_DIR/fuzz/findings/$target" -type f | wc -l)"
  echo "$target: ${runs:-?} runs in ${seconds} s, $findings findings (log: $log)"
done
exit "$status"
