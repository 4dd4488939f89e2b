#!/usr/bin/env python3
"""Fixtures for the quantized-weight products (tests/runtime/test_cpu_quantized.cpp).

    python3 tools/gen_quantized_fixtures.py   # writes tests/data/quantized/products.safetensors

For each of Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1: a random weight W [40, 96] quantized by the gguf package
(gguf.quants.quantize) to its stored blocks, and activations X [13, 96]; for each of Q4_K and
Q6_K (super-blocks of 256): W [40, 512] and X [13, 512], quantized by quantize_q4_k /
quantize_q6_k below (the gguf package dequantizes these formats but does not quantize them;
these are plain min/max and abs-max quantizers written from the block layout, not llama.cpp's
search). Expected values, computed here in float64 from the gguf package's own dequantizer:
  {F}.blocks        the blocks, u8, as a GGUF file stores them (row after row)
  {F}.dequantized   gguf.quants.dequantize of the blocks, [40, cols]
  {F}.f32           X @ dequantized^T                          (activations kept in f32)
  {F}.q8            round_q8(X) @ dequantized^T                (activations rounded to Q8 blocks)
  x, x256           X for the 96- and the 512-column weights
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

ROWS, COLS, K_COLS, M = 40, 96, 512, 13


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


def f16(values: np.ndarray) -> np.ndarray:
    return values.astype(np.float16).astype(np.float32)


def divide_or_zero(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den == 0, 0, num / den)


def quantize_q4_k(w: np.ndarray) -> np.ndarray:
    """Q4_K super-blocks (144 bytes): f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, 128 of nibbles;
    x = d * sc * q - dmin * m per group of 32."""
    groups = w.astype(np.float32).reshape(-1, 8, 32)
    low = np.minimum(groups.min(axis=-1), 0)
    scale = (groups.max(axis=-1) - low) / 15
    d, dmin = f16(scale.max(axis=-1) / 63), f16(-low.min(axis=-1) / 63)
    sc = np.clip(np.rint(divide_or_zero(scale, d[:, None])), 0, 63).astype(np.uint8)
    mn = np.clip(np.rint(divide_or_zero(-low, dmin[:, None])), 0, 63).astype(np.uint8)
    group_scale = (d[:, None] * sc)[..., None]
    group_min = (dmin[:, None] * mn)[..., None]
    q = np.clip(np.rint(divide_or_zero(groups + group_min, group_scale)), 0, 15).astype(np.uint8)
    packed = np.empty((groups.shape[0], 12), np.uint8)
    packed[:, 0:4] = (sc[:, :4] & 63) | ((sc[:, 4:] >> 4) << 6)
    packed[:, 4:8] = (mn[:, :4] & 63) | ((mn[:, 4:] >> 4) << 6)
    packed[:, 8:12] = (sc[:, 4:] & 15) | ((mn[:, 4:] & 15) << 4)
    nibbles = (q[:, 0::2, :] | (q[:, 1::2, :] << 4)).reshape(-1, 128)
    heads = np.stack([d, dmin], axis=-1).astype(np.float16).view(np.uint8)
    return np.concatenate([heads, packed, nibbles], axis=-1)


def quantize_q6_k(w: np.ndarray) -> np.ndarray:
    """Q6_K super-blocks (210 bytes): 128 bytes of low nibbles, 64 of 2-bit high parts, 16 int8
    scales, f16 d; x = d * sc * (q - 32) per group of 16."""
    groups = w.astype(np.float32).reshape(-1, 16, 16)
    largest = np.take_along_axis(groups, np.abs(groups).argmax(axis=-1)[..., None], axis=-1)[..., 0]
    scale = largest / -32  # the largest magnitude maps to -32: signed scales
    d = f16(np.abs(scale).max(axis=-1) / 127)
    sc = np.clip(np.rint(divide_or_zero(scale, d[:, None])), -128, 127).astype(np.int8)
    group_scale = (d[:, None] * sc)[..., None]
    q = (np.clip(np.rint(divide_or_zero(groups, group_scale)), -32, 31) + 32).astype(np.uint8).reshape(-1, 2, 128)
    low, high = q & 15, q >> 4
    ql = (low[:, :, :64] | (low[:, :, 64:] << 4)).reshape(-1, 128)
    qh = (high[:, :, 0:32] | (high[:, :, 32:64] << 2) | (high[:, :, 64:96] << 4) | (high[:, :, 96:] << 6)).reshape(-1, 64)
    return np.concatenate([ql, qh, sc.view(np.uint8), d[:, None].astype(np.float16).view(np.uint8)], axis=-1)


K_QUANTIZERS = {"Q4_K": quantize_q4_k, "Q6_K": quantize_q6_k}


def main() -> None:
    rng = np.random.default_rng(19)
    x = rng.standard_normal((M, COLS)).astype(np.float32)
    x[3, 32:64] = 0  # an all-zero block: scale 0
    tensors = {"x": x}
    # New formats go last: each draw shifts the generator, and earlier fixtures stay as they were.
    for name in ("Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q6_K", "Q5_0", "Q5_1"):
        qtype = GGMLQuantizationType[name]
        if name in K_QUANTIZERS and "x256" not in tensors:  # drawn before the first K weight
            tensors["x256"] = rng.standard_normal((M, K_COLS)).astype(np.float32)
            tensors["x256"][3, 256:288] = 0
        activations = tensors["x256"] if name in K_QUANTIZERS else x
        shift = 0.2 if name in ("Q4_1", "Q5_1", "Q4_K") else 0  # formats with a minimum: not centred on 0
        w = (rng.standard_normal((ROWS, activations.shape[1])) * 0.5 + shift).astype(np.float32)
        blocks = K_QUANTIZERS[name](w) if name in K_QUANTIZERS else quants.quantize(w, qtype)
        dequantized = quants.dequantize(blocks.reshape(ROWS, -1), qtype).astype(np.float64)
        # A sanity check of the quantizers above (the oracle is the gguf package's dequantizer).
        assert np.abs(dequantized - w).max() < 0.25, (name, np.abs(dequantized - w).max())
        tensors[f"{name}.blocks"] = np.ascontiguousarray(blocks.reshape(-1)).view(np.uint8)
        tensors[f"{name}.dequantized"] = dequantized.astype(np.float32)
        tensors[f"{name}.f32"] = (activations.astype(np.float64) @ dequantized.T).astype(np.float32)
        tensors[f"{name}.q8"] = (round_q8(activations) @ dequantized.T).astype(np.float32)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(OUT))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
