#!/usr/bin/env python3
"""Re-quantizes a GGUF file (SmolLM2-135M-Instruct's Q4_1 by default) to another llama.cpp
type with llama.cpp's own quantizer (llama-cpp-python's llama_model_quantize, requantizing
allowed): the same weights in another format, for benchmarks of the quantized kernels.
The output is not committed; scripts/bench.sh writes it under build/bench/models. With
--source tools/random_smollm2_gguf.py's file it quantizes the SmolLM2-1.7B-sized random model.

    pip install llama-cpp-python gguf
    python3 tools/quantize_smollm2.py --type Q8_0 --out /tmp/SmolLM2-135M-Instruct.Q8_0.gguf
    python3 tools/quantize_smollm2.py --type Q4_K_M --out /tmp/SmolLM2-135M-Instruct.Q4_K_M.gguf

Prints the tensor types of the result: llama.cpp falls back to another type for a tensor
whose rows do not fit the target's block (K-quants need rows of 256; SmolLM2's are 576 wide),
so a "Q4_K" file is not Q4_K throughout.
"""
from __future__ import annotations

import argparse
import collections
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, help="GGUF file to re-quantize (default: scripts/fetch_model.sh)")
    parser.add_argument("--type", required=True, help="llama.cpp file type: Q8_0, Q4_0, Q4_K_S, Q4_K_M, Q6_K, ...")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    import gguf
    import llama_cpp

    ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{args.type.upper()}", None)
    if ftype is None:
        print(f"quantize_smollm2: llama.cpp has no file type {args.type}", file=sys.stderr)
        return 2
    source = args.source or Path(subprocess.run([str(REPO / "scripts" / "fetch_model.sh")], check=True,
                                                capture_output=True, text=True).stdout.strip().splitlines()[-1])
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.allow_requantize = True
    args.out.parent.mkdir(parents=True, exist_ok=True)
    partial = args.out.with_suffix(".partial")
    if llama_cpp.llama_model_quantize(str(source).encode(), str(partial).encode(), params) != 0:
        print(f"quantize_smollm2: llama_model_quantize failed on {source}", file=sys.stderr)
        partial.unlink(missing_ok=True)
        return 1
    partial.rename(args.out)
    types = collections.Counter(t.tensor_type.name for t in gguf.GGUFReader(args.out).tensors)
    print(f"{args.out}: {', '.join(f'{n} x {name}' for name, n in types.most_common())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
