# Sourced by test.sh and run_example.sh: one place for paths and configure
# flags, so both scripts share build/release without reconfiguring it.
#
# Environment:
#   LUMINAL_BUILD_DIR   prefix of the build folders (default: <repo>/build)
#   LUMINAL_JOBS        parallel build/test jobs     (default: nproc)
#   LUMINAL_CMAKE_ARGS  extra configure arguments, word-split
#                       (e.g. "-DCMAKE_CXX_COMPILER=clang++")

LUMINAL_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LUMINAL_BUILD_DIR="${LUMINAL_BUILD_DIR:-$LUMINAL_ROOT/build}"
LUMINAL_JOBS="${LUMINAL_JOBS:-$(nproc)}"
RELEASE_DIR="$LUMINAL_BUILD_DIR/release"
ASAN_DIR="$LUMINAL_BUILD_DIR/asan"
FUZZ_DIR="$LUMINAL_BUILD_DIR/fuzz"

# Let ccache hit across checkouts (CI builds in a fresh clone elsewhere).
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$LUMINAL_ROOT}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"

RELEASE_ARGS=(
  -DCMAKE_BUILD_TYPE=Release
  -DLUMINAL_BUILD_TESTS=ON -DLUMINAL_BUILD_EXAMPLES=ON -DLUMINAL_BUILD_BENCHMARKS=ON
  -DLUMINAL_SANITIZE=OFF
)
# -g1 (line tables and function names: what sanitizer reports print) instead of -g:
# full debug info was about a third of each ASan suite's compile time.
ASAN_ARGS=(
  -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-g1 -O1"
  -DLUMINAL_BUILD_TESTS=ON -DLUMINAL_BUILD_EXAMPLES=OFF -DLUMINAL_BUILD_BENCHMARKS=OFF
  -DLUMINAL_SANITIZE=ON
)

# libFuzzer needs clang; only the fuzz targets are built there.
FUZZ_ARGS=(
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo
  -DLUMINAL_BUILD_FUZZERS=ON -DLUMINAL_BUILD_TESTS=OFF -DLUMINAL_BUILD_EXAMPLES=OFF
  -DLUMINAL_BUILD_BENCHMARKS=OFF -DLUMINAL_INSTALL=OFF
)

# luminal_configure <build-dir> <cmake args...>
luminal_configure() {
  local dir="$1"; shift
  # A cache made with another generator cannot be reused; start over.
  if [[ -f "$dir/CMakeCache.txt" ]] && ! grep -qx 'CMAKE_GENERATOR:INTERNAL=Ninja' "$dir/CMakeCache.txt"; then
    rm -rf "$dir"
  fi
  # shellcheck disable=SC2086  # LUMINAL_CMAKE_ARGS is meant to be word-split
  cmake -S "$LUMINAL_ROOT" -B "$dir" -G Ninja "$@" ${LUMINAL_CMAKE_ARGS:-}
}
