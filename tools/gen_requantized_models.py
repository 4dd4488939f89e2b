#!/usr/bin/env python3
"""SmolLM2-135M-Instruct in other GGUF block formats, for tools/llama_cpp_compare.py.

    python3 tools/gen_requantized_models.py [--source FILE.gguf] [--out DIR]

Writes SmolLM2-135M-Instruct.{Q8_0,Q4_0,Q4_K_M}.gguf beside the source (default: the Q4_1 file
scripts/fetch_model.sh keeps in $LUMINAL_MODEL_CACHE, ~/.cache/luminal). No network: the only
SmolLM2 weights at hand are that Q4_1 file, so these are requantized from it with llama.cpp's
own quantizer (llama-cpp-python's llama_model_quantize, allow_requantize): the speed of each
format is real, its accuracy is Q4_1's at best. Not committed (tens of MB each).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import llama_cpp

FORMATS = {"Q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0, "Q4_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0,
           "Q4_K_M": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M}


def main() -> int:
    cache = Path(os.environ.get("LUMINAL_MODEL_CACHE", Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
                                / "luminal"))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default=str(cache / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    parser.add_argument("--out", default=None, help="folder (default: the source's)")
    args = parser.parse_args()
    source = Path(args.source)
    if not source.exists():
        print(f"{source} not found (scripts/fetch_model.sh fetches it)", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else source.parent
    for name, ftype in FORMATS.items():
        target = out / source.name.replace(".Q4_1.", f".{name}.")
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = ftype
        params.allow_requantize = True
        params.nthread = os.cpu_count() or 1
        code = llama_cpp.llama_model_quantize(str(source).encode(), str(target).encode(), params)
        if code != 0:
            print(f"llama_model_quantize failed for {name} ({code})", file=sys.stderr)
            return 1
        print(f"wrote {target} ({target.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
