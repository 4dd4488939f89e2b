#!/usr/bin/env python3
"""Generates the GGUF fixtures that tests/io/test_gguf.cpp reads.

Rerun with

    python3 tools/gen_gguf_fixtures.py

from the repository root (needs numpy and the `gguf` package). The output under
tests/data/gguf/ is committed: CI never runs Python. Generation is deterministic
(fixed values and a seeded generator), so rerunning reproduces the files byte
for byte.

Files (written by gguf.GGUFWriter, GGUF version 3):
  types.gguf       metadata of every value type (each scalar type, an empty
                   string, arrays of every element type, arrays of arrays up to
                   three deep, a 1000-token string array) and one tensor per
                   type luminal dequantizes: F32, F16, BF16 with special values
                   (+-0, +-inf, nan, subnormals, the largest finite); Q4_0,
                   Q4_1, Q5_0, Q5_1, Q8_0 quantized by gguf.quants.quantize from
                   3x64 values (negatives, an all-zero block); Q2_K..Q6_K as
                   2x512 elements of random block bytes with chosen f16 scales
                   (the package has no K-quant quantizer; its dequantizer is the
                   reference), one block with zero scales. Plus an I32 and an
                   IQ4_NL tensor, which luminal opens but cannot dequantize.
  aligned64.gguf   general.alignment = 64, a 3-D F16 tensor, a Q8_0 tensor and
                   an empty F32 tensor.
  expected.json    the independent reference, read back by gguf.GGUFReader:
                   per file the version, alignment, metadata in file order and,
                   per tensor, its type, dims (ggml order), element count,
                   absolute file offset of its data and its values as
                   gguf.quants.dequantize computes them. Floats (values, f32 and
                   f64 metadata) are bit patterns (uint32 / uint64), so nan, inf
                   and -0 survive JSON.
"""

import json
import os

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader, GGUFValueType as V, GGUFWriter
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "gguf")
ARCH = "luminal-test"

# Our names of the value types (GgufValueType in gguf_value.hpp).
VALUE_TYPE_NAMES = {
    V.UINT8: "u8", V.INT8: "i8", V.UINT16: "u16", V.INT16: "i16", V.UINT32: "u32", V.INT32: "i32",
    V.FLOAT32: "f32", V.BOOL: "bool", V.STRING: "string", V.ARRAY: "array", V.UINT64: "u64",
    V.INT64: "i64", V.FLOAT64: "f64",
}


def f32_bits(value):
    return int(np.array(value, dtype=np.float32).view(np.uint32))


def f64_bits(value):
    return int(np.array(value, dtype=np.float64).view(np.uint64))


def scalar_json(value, vtype):
    if vtype == V.FLOAT32:
        return f32_bits(value)
    if vtype == V.FLOAT64:
        return f64_bits(value)
    return value


def infer_type(value):
    # GGUFWriter's choice for an array's elements when no sub_type is given.
    return V.get_type(value)


def array_json(elements, element_type):
    if element_type == V.ARRAY:
        return {"element_type": "array",
                "elements": [array_json(inner, infer_type(inner[0])) for inner in elements]}
    return {"element_type": VALUE_TYPE_NAMES[element_type],
            "elements": [scalar_json(e, element_type) for e in elements]}


# (key, value, type, array element type): every value type, in file order after
# general.architecture, which GGUFWriter writes first.
METADATA = [
    ("test.u8", 200, V.UINT8, None),
    ("test.i8", -100, V.INT8, None),
    ("test.u16", 60000, V.UINT16, None),
    ("test.i16", -30000, V.INT16, None),
    ("test.u32", 4_000_000_000, V.UINT32, None),
    ("test.i32", -2_000_000_000, V.INT32, None),
    ("test.u64", (1 << 63) + 5, V.UINT64, None),
    ("test.i64", -(1 << 62) - 3, V.INT64, None),
    ("test.f32", 3.14159, V.FLOAT32, None),
    ("test.f32_negative_zero", -0.0, V.FLOAT32, None),
    ("test.f64", 2.718281828459045, V.FLOAT64, None),
    ("test.bool_true", True, V.BOOL, None),
    ("test.bool_false", False, V.BOOL, None),
    ("test.string", "hello, w\u00f6rld \u4e16\u754c", V.STRING, None),
    ("test.empty_string", "", V.STRING, None),
    ("test.array.u8", [0, 1, 255], V.ARRAY, V.UINT8),
    ("test.array.i8", [-128, 0, 127], V.ARRAY, V.INT8),
    ("test.array.u16", [0, 65535], V.ARRAY, V.UINT16),
    ("test.array.i16", [-32768, 32767], V.ARRAY, V.INT16),
    ("test.array.u32", [0, 4294967295, 7], V.ARRAY, V.UINT32),
    ("test.array.i32", [-2147483648, 2147483647, -1], V.ARRAY, V.INT32),
    ("test.array.u64", [0, (1 << 64) - 1], V.ARRAY, V.UINT64),
    ("test.array.i64", [-(1 << 63), (1 << 63) - 1], V.ARRAY, V.INT64),
    ("test.array.f32", [0.5, -1.25, 1e-30, float("inf")], V.ARRAY, V.FLOAT32),
    ("test.array.f64", [0.1, -1e300, float("-inf")], V.ARRAY, V.FLOAT64),
    ("test.array.bool", [True, False, True], V.ARRAY, V.BOOL),
    ("test.array.string", ["a", "", "\u00fcn\u00efc\u00f6d\u00e9", "with space"], V.ARRAY, V.STRING),
    ("test.array.nested_i32", [[1, 2, 3], [-4, 5]], V.ARRAY, V.ARRAY),
    ("test.array.nested_string", [["x", "y"], ["z"]], V.ARRAY, V.ARRAY),
    ("test.array.nested3", [[[1], [2, 3]], [[4]]], V.ARRAY, V.ARRAY),
    ("tokenizer.ggml.tokens", [f"tok{i}" for i in range(1000)], V.ARRAY, V.STRING),
]


def metadata_json(key, value, vtype, sub_type):
    if vtype == V.ARRAY:
        return {"key": key, "type": "array", "value": array_json(value, sub_type)}
    return {"key": key, "type": VALUE_TYPE_NAMES[vtype], "value": scalar_json(value, vtype)}


def random_k_blocks(rng, qtype, n_blocks):
    """Random block bytes with the f16 scale fields replaced by chosen values:
    random bits there would make nan/inf scales. The last block's scales are 0."""
    _, type_size = GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    scale_offsets = {Q.Q2_K: [80, 82], Q.Q3_K: [108], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208]}[qtype]
    for b in range(n_blocks):
        for offset in scale_offsets:
            magnitude = 0.0 if b == n_blocks - 1 else rng.uniform(1e-3, 5e-2) * rng.choice([-1.0, 1.0])
            blocks[b, offset:offset + 2] = np.array([magnitude], dtype=np.float16).view(np.uint8)
    return blocks


def float_specials(dtype):
    info = np.finfo(dtype)
    return [0.0, -0.0, 1.0, -2.5, float("inf"), float("-inf"), float("nan"), float(info.max),
            float(info.tiny), float(info.smallest_subnormal), -float(info.smallest_subnormal), 0.1]


def quant_input(rng, shape):
    values = rng.standard_normal(shape).astype(np.float32)
    values[0, :32] = 0.0  # an all-zero block: scale 0
    values[1, 3] = 0.0
    values[2, 32:64] = np.abs(values[2, 32:64])  # a block of positives only
    return values


def write_types(path, rng):
    writer = GGUFWriter(path, ARCH)
    for key, value, vtype, sub_type in METADATA:
        writer.add_key_value(key, value, vtype, sub_type=sub_type if sub_type != V.ARRAY else None)

    f32 = np.array(float_specials(np.float32) + list(rng.standard_normal(4)), dtype=np.float32).reshape(2, 8)
    writer.add_tensor("f32", f32)
    f16 = np.array(float_specials(np.float16) + list(rng.standard_normal(4)), dtype=np.float16).reshape(2, 8)
    writer.add_tensor("f16", f16)
    bf16_source = np.array(float_specials(np.float32) + list(rng.standard_normal(4)), dtype=np.float32)
    writer.add_tensor("bf16", quantize(bf16_source.reshape(2, 8), Q.BF16), raw_dtype=Q.BF16)
    for qtype in (Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0):
        writer.add_tensor(qtype.name.lower(), quantize(quant_input(rng, (3, 64)), qtype), raw_dtype=qtype)
    for qtype in (Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K):
        blocks = random_k_blocks(rng, qtype, 4).reshape(2, -1)
        writer.add_tensor(qtype.name.lower(), blocks, raw_dtype=qtype)
    writer.add_tensor("i32", np.arange(-3, 3, dtype=np.int32).reshape(2, 3))
    iq4_nl = rng.integers(0, 256, size=(1, GGML_QUANT_SIZES[Q.IQ4_NL][1]), dtype=np.uint8)
    iq4_nl[0, 0:2] = np.array([0.01], dtype=np.float16).view(np.uint8)
    writer.add_tensor("iq4_nl", iq4_nl, raw_dtype=Q.IQ4_NL)
    finish(writer)


def write_aligned(path, rng):
    writer = GGUFWriter(path, ARCH)
    writer.add_custom_alignment(64)
    writer.add_key_value("test.note", "alignment 64", V.STRING)
    writer.add_tensor("blk.0.attn_q.weight", rng.standard_normal((2, 3, 4)).astype(np.float16))
    writer.add_tensor("q8", quantize(rng.standard_normal((2, 32)).astype(np.float32), Q.Q8_0), raw_dtype=Q.Q8_0)
    writer.add_tensor("empty", np.zeros((0, 4), dtype=np.float32))
    finish(writer)


def finish(writer):
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def expected_file(path, metadata):
    reader = GGUFReader(path)
    version = int(reader.fields["GGUF.version"].contents())
    assert [entry["key"] for entry in metadata] == [k for k in reader.fields if not k.startswith("GGUF.")]
    for entry in metadata:
        assert VALUE_TYPE_NAMES[reader.fields[entry["key"]].types[0]] == entry["type"], entry["key"]
    tensors = []
    for t in reader.tensors:
        qtype = Q(t.tensor_type)
        entry = {"name": t.name, "type": qtype.name, "dims": [int(d) for d in t.shape],
                 "numel": int(t.n_elements), "file_offset": int(t.data_offset)}
        try:
            values = dequantize(np.asarray(t.data), qtype).astype(np.float32).ravel()
            entry["values"] = [int(v) for v in values.view(np.uint32)]
        except NotImplementedError:
            pass  # a type the reference cannot dequantize (I32)
        tensors.append(entry)
    return {"version": version, "alignment": int(reader.alignment), "metadata": metadata, "tensors": tensors}


def flat_reader_check(path):
    """Scalars and flat arrays as GGUFReader reads them equal what was written
    (its contents() does not handle arrays of arrays)."""
    reader = GGUFReader(path)
    for key, value, vtype, sub_type in METADATA:
        if sub_type == V.ARRAY:
            continue
        contents = reader.fields[key].contents()
        if vtype in (V.FLOAT32, V.FLOAT64) or sub_type in (V.FLOAT32, V.FLOAT64):
            dtype = np.float32 if V.FLOAT32 in (vtype, sub_type) else np.float64
            assert np.array_equal(np.array(contents, dtype=dtype), np.array(value, dtype=dtype)), key
        else:
            assert contents == value, (key, contents, value)


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20240611)
    types_path = os.path.join(OUT, "types.gguf")
    aligned_path = os.path.join(OUT, "aligned64.gguf")
    write_types(types_path, rng)
    write_aligned(aligned_path, rng)
    flat_reader_check(types_path)

    architecture = {"key": "general.architecture", "type": "string", "value": ARCH}
    types_metadata = [architecture] + [metadata_json(*m) for m in METADATA]
    aligned_metadata = [architecture,
                        {"key": "general.alignment", "type": "u32", "value": 64},
                        {"key": "test.note", "type": "string", "value": "alignment 64"}]
    expected = {
        "types.gguf": expected_file(types_path, types_metadata),
        "aligned64.gguf": expected_file(aligned_path, aligned_metadata),
    }
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=None, separators=(",", ":"), ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
