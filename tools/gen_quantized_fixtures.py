#!/usr/bin/env python3
"""Fixtures for the quantized-weight products (tests/runtime/test_cpu_quantized.cpp).

    python3 tools/gen_quantized_fixtures.py   # writes tests/data/quantized/products.safetensors

For each of Q8_0, Q4_0 and Q4_1: a random weight W [40, 96] quantized by the gguf package
(gguf.quants.quantize) to its stored blocks, and activations X [13, 96]. Expected values,
computed here in float64 from the gguf package's own dequantizer:
  {F}.blocks        the blocks, u8, as a GGUF file stores them (row after row)
  {F}.dequantized   gguf.quants.dequantize of the blocks, [40, 96]
  {F}.f32           X @ dequantized^T                          (activations kept in f32)
  {F}.q8            round_q8(X) @ dequantized^T                (activations rounded to Q8 blocks)
  x                 X
round_q8 rounds each block of 32 as llama.cpp's quantize_row_q8_0 does, keeping the scale in
f32: d = max|x| / 127, q = round-half-away-from-zero(x / d) (computed as x * (1 / d) in f32).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, quants
from safetensors.numpy import save_file

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "quantized" / "products.safetensors"

ROWS, COLS, M = 40, 96, 13


def round_q8(x: np.ndarray) -> np.ndarray:
    blocks = x.astype(np.float32).reshape(x.shape[0], -1, 32)
    d = (np.abs(blocks).max(axis=-1, keepdims=True) / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inverse = np.where(d == 0, np.float32(0), np.float32(1) / d).astype(np.float32)
    scaled = (blocks * inverse).astype(np.float32)
    # C's roundf (half away from zero), as the gguf package's np_roundf computes it.
    magnitude = np.abs(scaled)
    floored = np.floor(magnitude)
    q = np.sign(scaled) * (floored + np.floor(2 * (magnitude - floored)))
    return (q.astype(np.float64) * d.astype(np.float64)).reshape(x.shape)


def main() -> None:
    rng = np.random.default_rng(19)
    x = rng.standard_normal((M, COLS)).astype(np.float32)
    x[3, 32:64] = 0  # an all-zero block: scale 0
    tensors = {"x": x}
    for name in ("Q8_0", "Q4_0", "Q4_1"):
        qtype = GGMLQuantizationType[name]
        w = (rng.standard_normal((ROWS, COLS)) * 0.5 + (0.2 if name == "Q4_1" else 0)).astype(np.float32)
        blocks = quants.quantize(w, qtype)
        dequantized = quants.dequantize(blocks, qtype).astype(np.float64)
        tensors[f"{name}.blocks"] = np.ascontiguousarray(blocks.reshape(-1)).view(np.uint8)
        tensors[f"{name}.dequantized"] = dequantized.astype(np.float32)
        tensors[f"{name}.f32"] = (x.astype(np.float64) @ dequantized.T).astype(np.float32)
        tensors[f"{name}.q8"] = (round_q8(x) @ dequantized.T).astype(np.float32)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(OUT))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
