#!/usr/bin/env bash
# Makes the Python environment of the Python package (python/): a virtual environment with
# python/requirements-test.txt and the package built from this checkout, and prints its
# interpreter. Reuses the environment when the requirements have not changed (their hash
# names it), so only the package is rebuilt (ccache keeps that short).
# Environment: LUMINAL_PYTHON_ENV (default: $LUMINAL_BUILD_DIR/python-env).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

base_python="$(command -v python3 || true)"
[[ -n "$base_python" ]] || { echo "python_env.sh: python3 is not installed" >&2; exit 1; }
"$base_python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
  { echo "python_env.sh: the package needs Python >= 3.10" >&2; exit 1; }

env_dir="${LUMINAL_PYTHON_ENV:-$LUMINAL_BUILD_DIR/python-env}"
requirements="$LUMINAL_ROOT/python/requirements-test.txt"
stamp="$env_dir/.requirements.sha256"
want="$(sha256sum "$requirements" | cut -d' ' -f1)"
if [[ ! -x "$env_dir/bin/python" || "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  rm -rf "$env_dir"
  "$base_python" -m venv "$env_dir" >&2
  "$env_dir/bin/python" -m pip install --disable-pip-version-check -q -r "$requirements" >&2
  echo "$want" >"$stamp"
fi
# --no-build-isolation: the build requirements are already in the environment.
CMAKE_BUILD_PARALLEL_LEVEL="$LUMINAL_JOBS" "$env_dir/bin/python" -m pip install --disable-pip-version-check -q \
  --no-build-isolation --no-deps "$LUMINAL_ROOT/python" >&2
echo "$env_dir/bin/python"
