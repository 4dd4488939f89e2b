#!/usr/bin/env bash
# Installs the Debian 12 packages luminal needs, and the CUDA toolkit's cuobjdump
# and nvdisasm (PyPI wheels: this toolkit ships neither) into build/cuda-tools/bin,
# where the SASS the cost model and the tests read comes from. Idempotent: when
# everything is there it only asks dpkg (well under a second) and never touches apt.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

install_cuda_tools() {
  local bin="$ROOT/build/cuda-tools/bin" wheels="$ROOT/build/cuda-tools/wheels" tool found
  [[ -x "$bin/cuobjdump" && -x "$bin/nvdisasm" ]] && return 0
  command -v nvcc >/dev/null 2>&1 || return 0  # no CUDA toolkit: no kernels to read
  echo "setup.sh: installing cuobjdump and nvdisasm into $bin"
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --target "$wheels" nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm ||
    { echo "setup.sh: could not install cuobjdump/nvdisasm; the SASS checks will say so" >&2; return 0; }
  mkdir -p "$bin"
  for tool in cuobjdump nvdisasm; do
    found="$(find "$wheels" -type f -name "$tool" | head -n1)"
    [[ -n "$found" ]] && chmod +x "$found" && ln -sf "$found" "$bin/$tool"
  done
}

PACKAGES=(
  build-essential cmake ninja-build ccache git
  libeigen3-dev       # benchmark peer; CPU backend GEMM
  libfmt-dev          # error message formatting
  libabsl-dev         # flat_hash_set for the e-graph hash-cons
  doctest-dev         # tests
  libbenchmark-dev    # benchmarks
  pkg-config          # finds PCRE2 and utf8proc (no CMake packages on Debian)
  nlohmann-json3-dev  # JSON: config.json, tokenizer.json, safetensors headers
  libpcre2-dev        # Unicode-class regex of tokenizer pre-tokenizers
  libutf8proc-dev     # NFC normalization of tokenizers
  clang libclang-rt-14-dev  # libFuzzer targets of the file parsers
  libcli11-dev        # command lines of the examples
  python3-dev python3-venv  # the Python package's extension and its test environment
)

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "setup.sh: dpkg not found; install these packages by hand: ${PACKAGES[*]}" >&2
  install_cuda_tools
  exit 0
fi

# One dpkg-query call for all packages; unknown packages print nothing, hence the join.
installed="$(dpkg-query -W -f='${Package} ${Status}\n' "${PACKAGES[@]}" 2>/dev/null \
             | awk '$NF == "installed" {print $1}' | sed 's/:.*//')" || true
missing=()
for p in "${PACKAGES[@]}"; do
  grep -qxF "$p" <<<"$installed" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  install_cuda_tools
  exit 0
fi

SUDO=()
if [[ "$(id -u)" -ne 0 ]]; then SUDO=(sudo); fi
echo "setup.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q
"${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
install_cuda_tools
