#!/usr/bin/env python3
"""A tiny Llama in one Q4_K_M GGUF file (llama.cpp's own quantizer), with transformers' outputs.

Writes tests/data/gguf_model_q4_k_m/ (committed: CI never runs Python):

  model.gguf       gen_gguf_model_fixtures.py's model (same tokenizer, metadata, key order and
                   Q/K row permutation) made wide enough for K super-blocks: hidden 256, 4 heads,
                   2 KV heads, head_dim 64, 1 layer, intermediate 512, tied embeddings. Written in
                   F32, then quantized by llama.cpp (llama-cpp-python's llama_model_quantize,
                   LLAMA_FTYPE_MOSTLY_Q4_K_M), which picks the mix: Q4_K for attn_q/k/output and
                   ffn_gate/up, Q6_K for attn_v, ffn_down (the last layer gets more bits) and the
                   token embedding (it doubles as the output matrix), F32 norms. The script
                   asserts both K formats are there.
  reference.safetensors  what transformers computes in f32 (eager attention) for the 12-token
                   prompt of gen_gguf_model_fixtures.py with every weight replaced by the gguf
                   package's dequantization of the stored blocks (Q/K rows un-permuted): what a
                   correct reader of the file computes. Tensors as in tests/data/gguf_model:
                   prompt_ids [12], prefill_logits [12, V], generated_ids [9], decode_logits [9, V].
                   Seeds are tried in order until every greedy step wins by MIN_MARGIN.

Checks (asserts, the differences are printed): transformers' own GGUF loader on model.gguf
reproduces ids and logits within 1e-4; llama.cpp (1 thread; 8-bit activations, f16 KV cache)
is printed for comparison.

    pip install numpy torch transformers accelerate tokenizers safetensors gguf llama-cpp-python
    python3 tools/gen_gguf_q4_k_m_fixtures.py
"""
from __future__ import annotations

import collections
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_gguf_model_fixtures as base  # noqa: E402  (sets the tokenizers environment first)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from gguf import GGMLQuantizationType as Q  # noqa: E402
from gguf import GGUFReader  # noqa: E402
from gguf.quants import dequantize  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

TOKENIZER = base.OUT / "tokenizer.json"
OUT = base.OUT.parent / "gguf_model_q4_k_m"

# The shapes gen_gguf_model_fixtures.py's functions read, widened for super-blocks of 256.
base.HIDDEN, base.FFN, base.LAYERS = 256, 512, 1
base.STORAGE = {suffix: Q.F32 for suffix in base.STORAGE}  # llama.cpp quantizes
base.OUT = OUT


def unpermute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """The inverse of base.permute (convert_hf_to_gguf.py's) on the rows of [out, in]."""
    return (weights.reshape(n_head, weights.shape[0] // n_head // 2, 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def quantize_q4_k_m(source: Path, out: Path) -> None:
    import llama_cpp
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M
    if llama_cpp.llama_model_quantize(str(source).encode(), str(out).encode(), params) != 0:
        raise RuntimeError(f"llama_model_quantize failed on {source}")


def load_dequantized(model: torch.nn.Module, path: Path) -> collections.Counter:
    """Replaces the model's weights with the file's, dequantized by the gguf package; returns
    the count of each storage type."""
    by_gguf = {base.gguf_name(name): name for name, _ in model.named_parameters() if name != "lm_head.weight"}
    params = dict(model.named_parameters())
    types = collections.Counter()
    with torch.no_grad():
        for tensor in GGUFReader(path).tensors:
            hf_name = by_gguf.pop(tensor.name)
            types[tensor.tensor_type.name] += 1
            shape = params[hf_name].shape
            values = dequantize(tensor.data, tensor.tensor_type).astype(np.float32).reshape(shape)
            if hf_name.endswith("q_proj.weight"):
                values = unpermute(values, base.HEADS)
            elif hf_name.endswith("k_proj.weight"):
                values = unpermute(values, base.KV_HEADS)
            params[hf_name].copy_(torch.from_numpy(np.ascontiguousarray(values)))
    assert not by_gguf, f"tensors missing from {path}: {sorted(by_gguf)}"
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    return types


def main() -> None:
    base.hf_logging.disable_progress_bar()
    tok = Tokenizer.from_file(str(TOKENIZER))
    prompt_ids = tok.encode(base.PROMPT_TEXT, add_special_tokens=False).ids
    assert len(prompt_ids) == base.PROMPT_LEN, (len(prompt_ids), prompt_ids)
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)

    for seed in range(100):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(base.config(), attn_implementation="eager",
                                                 dtype=torch.float32).eval()
        stored = base.randomize_and_quantize(model, seed)  # STORAGE is F32: the drawn weights as they are
        with tempfile.TemporaryDirectory() as folder:
            base.write_gguf(Path(folder) / "f32.gguf", stored, tok)
            quantize_q4_k_m(Path(folder) / "f32.gguf", OUT / "model.gguf")
        types = load_dequantized(model, OUT / "model.gguf")
        model.generation_config.eos_token_id = None
        prefill, generated, decode = base.run(model, prompt_ids)
        if base.margin(decode) >= base.MIN_MARGIN:
            break
    else:
        raise RuntimeError(f"no seed gives a greedy margin of {base.MIN_MARGIN}")
    assert types["Q4_K"] > 0 and types["Q6_K"] > 0, types

    save_file({"prompt_ids": torch.tensor(prompt_ids, dtype=torch.int64), "prefill_logits": prefill.contiguous(),
               "generated_ids": generated.to(torch.int64).contiguous(), "decode_logits": decode.contiguous()},
              OUT / "reference.safetensors")
    print(f"model: seed {seed}, greedy margin {base.margin(decode):.3f}, types {dict(types)}, "
          f"generated {generated.tolist()}")
    diff = base.check_transformers_gguf(prompt_ids, prefill, decode, generated)
    print(f"transformers GGUF loader: same greedy ids, max |logit diff| {diff:.2e}")
    got_prefill, ids, got_decode = base.llama_cpp_logits(OUT / "model.gguf", prompt_ids)
    quantized = max(float((got_prefill - prefill).abs().max()), float((got_decode - decode).abs().max()))
    print(f"llama.cpp on model.gguf: generated {ids}, max |logit diff| {quantized:.4f}")
    for path in sorted(OUT.iterdir()):
        print(f"  {path.name}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
