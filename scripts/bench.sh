#!/usr/bin/env bash
# The benchmark suite (benchmarks/suite): every path on the machine measured the same way.
#   scripts/bench.sh [--config NAME]   run a configuration (default: default), store it in SQLite
#   scripts/bench.sh --report          write the HTML report from the stored runs
#   scripts/bench.sh --list            list the configurations
# First builds what the suite runs (generate, random_model, bench_model_build) in
# build/release, unless LUMINAL_BENCH_NO_BUILD=1. Results: $LUMINAL_BUILD_DIR/bench/bench.db,
# report: $LUMINAL_BUILD_DIR/bench/report.html (both overridable with --db / --out).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# The Python package's environment (scripts/python_env.sh) has torch, transformers and
# luminal, so the torch and luminal-python paths run; otherwise the system python3.
python="${LUMINAL_BENCH_PYTHON:-}"
if [[ -z "$python" && -x "$LUMINAL_BUILD_DIR/python-env/bin/python" ]]; then
  python="$LUMINAL_BUILD_DIR/python-env/bin/python"
fi
python="${python:-$(command -v python3 || true)}"
if [[ -z "$python" ]] || ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "bench.sh: needs python3 >= 3.11 (tomllib)" >&2
  exit 2
fi

measuring=1
for arg in "$@"; do
  [[ "$arg" == --report || "$arg" == --markdown || "$arg" == --list || "$arg" == -h || "$arg" == --help ]] && measuring=0
done
if [[ "$measuring" == 1 && "${LUMINAL_BENCH_NO_BUILD:-0}" != 1 ]]; then
  luminal_configure "$RELEASE_DIR" "${RELEASE_ARGS[@]}" >/dev/null
  cmake --build "$RELEASE_DIR" -j"$LUMINAL_JOBS" --target generate random_model bench_model_build
fi

export PYTHONPATH="$LUMINAL_ROOT/benchmarks/suite${PYTHONPATH:+:$PYTHONPATH}"
exec "$python" -m luminal_bench --bin "$RELEASE_DIR" --db "$LUMINAL_BUILD_DIR/bench/bench.db" "$@"
