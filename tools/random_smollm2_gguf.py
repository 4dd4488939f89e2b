#!/usr/bin/env python3
"""Writes a random-weight Llama GGUF at SmolLM2-1.7B's dimensions (hidden 2048, 24 layers,
32 heads and 32 KV heads of 64, FFN 8192, tied embeddings) with the tokenizer and metadata
of SmolLM2-135M's file, using the gguf package: a model of real size for the CPU
benchmarks, where memory bandwidth decides. The weights are f16 N(0, 0.02) (norms 1);
tools/quantize_smollm2.py --source <this file> re-quantizes it with llama.cpp's own
quantizer. Not committed (3.4 GB); benchmarks/suite writes it under build/bench/models.

    pip install gguf numpy
    python3 tools/random_smollm2_gguf.py --out /tmp/SmolLM2-1.7B-random.F16.gguf
    python3 tools/quantize_smollm2.py --source /tmp/SmolLM2-1.7B-random.F16.gguf --type Q4_0 \\
        --out /tmp/SmolLM2-1.7B-random.Q4_0.gguf
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# SmolLM2-1.7B's config.json
DIMS = {"hidden": 2048, "layers": 24, "heads": 32, "kv_heads": 32, "ffn": 8192}
# Metadata taken from the tokenizer's file as it is (the rest is this model's own).
COPIED_PREFIXES = ("tokenizer.", "general.quantization_version")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer-from", type=Path,
                        help="GGUF file whose tokenizer is copied (default: scripts/fetch_model.sh's SmolLM2-135M)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import gguf
    import numpy as np

    source_path = args.tokenizer_from or Path(subprocess.run(
        [str(REPO / "scripts" / "fetch_model.sh")], check=True, capture_output=True, text=True).stdout.strip()
        .splitlines()[-1])
    source = gguf.GGUFReader(source_path)
    vocab = len(source.fields["tokenizer.ggml.tokens"].data)
    head_dim = DIMS["hidden"] // DIMS["heads"]

    args.out.parent.mkdir(parents=True, exist_ok=True)
    partial = args.out.with_suffix(".partial")
    writer = gguf.GGUFWriter(str(partial), "llama")
    writer.add_name("SmolLM2-1.7B-shaped, random weights")
    writer.add_context_length(8192)
    writer.add_embedding_length(DIMS["hidden"])
    writer.add_block_count(DIMS["layers"])
    writer.add_feed_forward_length(DIMS["ffn"])
    writer.add_head_count(DIMS["heads"])
    writer.add_head_count_kv(DIMS["kv_heads"])
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(130000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(vocab)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    for name, field in source.fields.items():
        if not name.startswith(COPIED_PREFIXES):
            continue
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            writer.add_array(name, field.contents())
        else:
            writer.add_key_value(name, field.contents(), kind)

    rng = np.random.default_rng(args.seed)

    def matrix(rows: int, cols: int) -> np.ndarray:  # [rows, cols] as the file stores it (cols innermost)
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    hidden, ffn, kv = DIMS["hidden"], DIMS["ffn"], DIMS["kv_heads"] * head_dim
    writer.add_tensor("token_embd.weight", matrix(vocab, hidden))
    writer.add_tensor("output_norm.weight", np.ones(hidden, dtype=np.float32))
    for layer in range(DIMS["layers"]):
        block = f"blk.{layer}"
        writer.add_tensor(f"{block}.attn_norm.weight", np.ones(hidden, dtype=np.float32))
        writer.add_tensor(f"{block}.ffn_norm.weight", np.ones(hidden, dtype=np.float32))
        writer.add_tensor(f"{block}.attn_q.weight", matrix(hidden, hidden))
        writer.add_tensor(f"{block}.attn_k.weight", matrix(kv, hidden))
        writer.add_tensor(f"{block}.attn_v.weight", matrix(kv, hidden))
        writer.add_tensor(f"{block}.attn_output.weight", matrix(hidden, hidden))
        writer.add_tensor(f"{block}.ffn_gate.weight", matrix(ffn, hidden))
        writer.add_tensor(f"{block}.ffn_up.weight", matrix(ffn, hidden))
        writer.add_tensor(f"{block}.ffn_down.weight", matrix(hidden, ffn))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    partial.rename(args.out)
    print(f"{args.out}: {sum(1 for _ in gguf.GGUFReader(args.out).tensors)} tensors, "
          f"{args.out.stat().st_size / 2**30:.2f} GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
