#!/usr/bin/env python3
"""Generates the safetensors fixtures that tests/io/test_safetensors.cpp reads.

Rerun with

    python3 tools/gen_safetensors_fixtures.py

from the repository root (needs torch, numpy and safetensors). The output under
tests/data/safetensors/ is committed: CI never runs Python. Generation is
deterministic (fixed values and a seeded generator), so rerunning reproduces the
files byte for byte.

Files:
  dtypes.safetensors   one tensor per dtype luminal reads (F32, F16, BF16, I32,
                       I64, U8, BOOL), special float values included (subnormals,
                       +-inf, nan, -0, the largest finite), plus a rank-0 and an
                       empty tensor, and a __metadata__ entry; written by
                       safetensors.torch.save_file.
  sharded/             model-0000{1,2}-of-00002.safetensors and
                       model.safetensors.index.json, as transformers'
                       save_pretrained lays out a sharded checkpoint.
  expected.json        the independent reference: for every tensor of both,
                       its dtype, shape and values as torch reads them. Float
                       values are the bit patterns (uint32) of the values
                       converted to float32 by torch (exact for f16/bf16), so
                       nan, inf and -0 survive JSON; integers and bools are
                       plain JSON integers.
"""

import json
import os

import torch
from safetensors.torch import load_file, save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "safetensors")

# Special values every float dtype is checked on; each dtype also gets its own
# extremes (largest finite, smallest normal and subnormal).
COMMON = [0.0, -0.0, 1.0, -2.5, 0.1, 3.140625, float("inf"), float("-inf"), float("nan"), 1e-3, -65504.0]


def floats(dtype, extra):
    return torch.tensor(COMMON + extra, dtype=torch.float32).to(dtype)


def dtype_tensors():
    g = torch.Generator().manual_seed(20240605)
    f32_extra = [3.4028234663852886e38, 1.1754943508222875e-38, 1.401298464324817e-45, -1.401298464324817e-45, 16777217.0]
    f16_extra = [65504.0, 6.103515625e-05, 5.960464477539063e-08, -5.960464477539063e-08, 2049.0, 1e5]  # 1e5 -> inf
    bf16_extra = [3.3895313892515355e38, 1.1754943508222875e-38, 9.183549615799121e-41, -9.183549615799121e-41, 257.0]
    return {
        "f32.special": floats(torch.float32, f32_extra),
        "f32.random": torch.randn(3, 5, generator=g, dtype=torch.float32),
        "f16.special": floats(torch.float16, f16_extra).reshape(1, -1),
        "bf16.special": floats(torch.bfloat16, bf16_extra),
        "bf16.random": torch.randn(2, 3, 4, generator=g, dtype=torch.float32).to(torch.bfloat16),
        "i32": torch.tensor([[0, 1, -1], [2147483647, -2147483648, 123456]], dtype=torch.int32),
        "i64": torch.tensor([0, -1, 9223372036854775807, -9223372036854775808, 1 << 40], dtype=torch.int64),
        "u8": torch.tensor([0, 1, 127, 128, 255], dtype=torch.uint8),
        "bool": torch.tensor([[True, False], [False, True]], dtype=torch.bool),
        "scalar": torch.tensor(-7.25, dtype=torch.float32),
        "empty": torch.zeros(0, 3, dtype=torch.float16),
    }


def shard_tensors():
    g = torch.Generator().manual_seed(7)
    return [
        {
            "model.embed_tokens.weight": torch.randn(6, 4, generator=g).to(torch.bfloat16),
            "model.layers.0.input_layernorm.weight": torch.randn(4, generator=g),
        },
        {
            "model.layers.0.mlp.up_proj.weight": torch.randn(8, 4, generator=g).to(torch.float16),
            "model.norm.weight": torch.randn(4, generator=g),
            "lm_head.weight": torch.randn(6, 4, generator=g).to(torch.bfloat16),
        },
    ]


DTYPE_NAMES = {
    torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int32: "I32",
    torch.int64: "I64", torch.uint8: "U8", torch.bool: "BOOL",
}


def expected_entry(tensor):
    entry = {"dtype": DTYPE_NAMES[tensor.dtype], "shape": list(tensor.shape)}
    flat = tensor.reshape(-1)
    if tensor.dtype.is_floating_point:
        entry["f32_bits"] = [int(b) & 0xFFFFFFFF for b in flat.to(torch.float32).view(torch.int32).tolist()]
    else:
        entry["values"] = [int(v) for v in flat.tolist()]
    return entry


def main():
    os.makedirs(os.path.join(OUT, "sharded"), exist_ok=True)
    expected = {}

    tensors = dtype_tensors()
    path = os.path.join(OUT, "dtypes.safetensors")
    # One metadata entry: the Rust writer emits the map in HashMap order, so two
    # would make the file differ from run to run.
    save_file(tensors, path, metadata={"format": "pt"})
    # The reference is what torch reads back, so a save_file quirk cannot hide.
    expected["dtypes.safetensors"] = {name: expected_entry(t) for name, t in sorted(load_file(path).items())}

    shards = shard_tensors()
    weight_map = {}
    total_size = 0
    for i, shard in enumerate(shards):
        name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        shard_path = os.path.join(OUT, "sharded", name)
        save_file(shard, shard_path, metadata={"format": "pt"})
        for tensor_name, t in load_file(shard_path).items():
            weight_map[tensor_name] = name
            total_size += t.numel() * t.element_size()
            expected.setdefault("sharded", {})[tensor_name] = expected_entry(t)
    index = {"metadata": {"total_size": total_size}, "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(OUT, "sharded", "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")

    expected["sharded"] = dict(sorted(expected["sharded"].items()))
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
