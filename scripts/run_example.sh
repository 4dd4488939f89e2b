#!/usr/bin/env bash
# Installs dependencies, builds examples/simple in the release tree, runs it.
# Environment: see scripts/common.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

"$LUMINAL_ROOT/scripts/setup.sh"
luminal_configure "$RELEASE_DIR" "${RELEASE_ARGS[@]}"
cmake --build "$RELEASE_DIR" --target simple -j"$LUMINAL_JOBS"
exec "$RELEASE_DIR/examples/simple"
