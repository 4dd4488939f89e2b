#!/usr/bin/env bash
# Installs the Debian 12 packages luminal needs. Idempotent: when everything is
# already installed it only asks dpkg (well under a second) and never touches apt.
set -euo pipefail

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
  exit 0
fi

SUDO=()
if [[ "$(id -u)" -ne 0 ]]; then SUDO=(sudo); fi
echo "setup.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q
"${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
