#!/usr/bin/env python3
"""Tiny GGUF files of the architectures and features beyond plain Llama, with transformers' outputs.

Each case writes tests/data/gguf_arch/<name>/ (committed: CI never runs Python):
  model.gguf             a random-weight transformers model written as llama.cpp's
                         convert_hf_to_gguf.py writes that architecture (its metadata keys,
                         tensor names and layout), matrices F16, vectors F32, and a byte-level
                         BPE ("gpt2") tokenizer trained here on the ASCII lines of
                         gen_tokenizer_fixtures.py's corpus
  reference.safetensors  what transformers computes in f32 (eager attention) with every
                         weight rounded to f16 as stored: prompt_ids, prefill_logits,
                         generated_ids, decode_logits, as gen_model_fixtures.py writes them
Where transformers' own GGUF loader reads a file (qwen2), it must give the same logits: a check
that the file is laid out as llama.cpp's converter lays it out. llama.cpp itself
(llama-cpp-python) is not run here.
Cases:
  qwen2     architecture "qwen2": q/k/v projections with biases, o_proj without, tied head,
            no Q/K row permutation, head size hidden / heads (no key_length), pre "qwen2".
  qwen3     architecture "qwen3": Q/K norms (attn_q_norm, attn_k_norm), a head size (16) other
            than hidden / heads (8) given by qwen3.attention.key_length, untied head, no Q/K row
            permutation (llama.cpp rotates Qwen's halves as transformers does), pre "qwen2".
  qwen3moe  architecture "qwen3moe": as qwen3, with 4 experts (top 2, renormalised) in layers 0
            and 2 stored stacked (ffn_{gate,up,down}_exps [experts, out, in], router ffn_gate_inp),
            layer 1 dense, expert_count / expert_used_count / expert_feed_forward_length keys.
  llama31   architecture "llama" with Llama 3.1's RoPE scaling (llama3 type: factor 8,
            low/high_freq_factor 1/4, a 64-token original context, so all three bands occur):
            the converter stores it as the per-pair divisors of tensor rope_freqs.weight,
            not as metadata; Q/K rows permuted; tied head.

    pip install numpy torch transformers accelerate safetensors tokenizers gguf
    python3 tools/gen_gguf_arch_fixtures.py
"""
from __future__ import annotations

import json
import math
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from gguf import GGMLQuantizationType as Q
from gguf import GGUFWriter, LlamaFileType, TokenType
from safetensors.torch import save_file
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config, Qwen3Config, Qwen3MoeConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_model_fixtures import margin  # noqa: E402
from gen_variant_fixtures import PROMPT, greedy, reference_tensors, train_tokenizer  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "gguf_arch"
VOCAB = 256
MIN_MARGIN = 1e-2
SIZES = dict(vocab_size=VOCAB, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
             num_hidden_layers=2, max_position_embeddings=256, bos_token_id=1, eos_token_id=2, pad_token_id=0)
LAYER_NAMES = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
               "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
               "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
               "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
               "mlp.gate": "ffn_gate_inp"}
EXPERT_NAMES = {"gate_proj": "ffn_gate_exps", "up_proj": "ffn_up_exps", "down_proj": "ffn_down_exps"}


def gguf_name(hf: str) -> str:
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    parts = hf.split(".")  # model.layers.N.<module...>.weight
    return f"blk.{parts[2]}.{LAYER_NAMES['.'.join(parts[3:-1])]}.{parts[-1]}"


def permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """convert_hf_to_gguf.py's LlamaModel.permute: each head's rotary halves interleaved."""
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def randomized_f16_model(config, seed: int):
    """Random weights as gen_model_fixtures.py draws them, matrices rounded to f16 (as stored)."""
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.float32).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, tensor in model.named_parameters():
            if tensor.dim() == 1:
                tensor.copy_(1.0 + 0.3 * torch.randn(tensor.shape, generator=generator))
            else:
                tensor.copy_((torch.randn(tensor.shape, generator=generator) / tensor.shape[-1] ** 0.5)
                             .to(torch.float16).float())
    model.generation_config.eos_token_id = None
    return model


def llama3_rope_factors(rope: dict, head_dim: int) -> np.ndarray:
    """LlamaModel.generate_extra_tensors of convert_hf_to_gguf.py: the divisor of each pair's frequency."""
    base, factor = rope["rope_theta"], rope["factor"]
    low, high, old_context = rope["low_freq_factor"], rope["high_freq_factor"], rope["original_max_position_embeddings"]
    freqs = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    low_wavelen, high_wavelen = old_context / low, old_context / high
    factors = []
    for freq in freqs.tolist():
        wavelen = 2 * math.pi / freq
        if wavelen < high_wavelen:
            factors.append(1)
        elif wavelen > low_wavelen:
            factors.append(factor)
        else:
            smooth = (old_context / wavelen - low) / (high - low)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(factors, dtype=np.float32)


def write_gguf(path: Path, arch: str, model, config, tokenizer, pre: str, permute_qk: bool,
               extra: dict[str, np.ndarray]) -> None:
    by_id = {index: token for token, index in tokenizer.get_vocab(with_added_tokens=True).items()}
    specials = {t.content for t in tokenizer.get_added_tokens_decoder().values() if t.special}
    merges = [m if isinstance(m, str) else " ".join(m) for m in json.loads(tokenizer.to_str())["model"]["merges"]]
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    writer = GGUFWriter(str(path), arch)
    writer.add_type("model")
    writer.add_name(f"Luminal Test {arch}")
    writer.add_block_count(config.num_hidden_layers)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_freq_base(config.rope_parameters["rope_theta"])
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    if head_dim * config.num_attention_heads != config.hidden_size:  # as the converter: only when it differs
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    if getattr(config, "num_experts", None):
        writer.add_expert_count(config.num_experts)
        writer.add_expert_used_count(config.num_experts_per_tok)
        writer.add_expert_feed_forward_length(config.moe_intermediate_size)
    writer.add_file_type(LlamaFileType.MOSTLY_F16)
    writer.add_vocab_size(VOCAB)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list([by_id[i] for i in range(VOCAB)])
    writer.add_token_types([TokenType.CONTROL if by_id[i] in specials else TokenType.NORMAL for i in range(VOCAB)])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(False)
    writer.add_quantization_version(2)
    for name, array in extra.items():
        writer.add_tensor(name, array)
    for hf, tensor in checkpoint_tensors(model, config).items():
        if hf == "lm_head.weight" and config.tie_word_embeddings:
            continue
        array = tensor.numpy()
        if permute_qk and hf.endswith("q_proj.weight"):
            array = permute(array, config.num_attention_heads)
        elif permute_qk and hf.endswith("k_proj.weight"):
            array = permute(array, config.num_key_value_heads)
        array = np.ascontiguousarray(array.astype(np.float16 if array.ndim >= 2 else np.float32))
        writer.add_tensor(hf if hf.startswith("blk.") else gguf_name(hf), array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def checkpoint_tensors(model, config) -> dict[str, torch.Tensor]:
    """The tensors as a checkpoint names them (save_pretrained: per-expert MoE weights), with
    each MoE layer's experts stacked into llama.cpp's blk.N.ffn_{gate,up,down}_exps [E, out, in]."""
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder, safe_serialization=True)
        tensors = load_file(Path(folder) / "model.safetensors")
    experts = getattr(config, "num_experts", 0) or 0
    for layer in range(config.num_hidden_layers):
        prefix = f"model.layers.{layer}.mlp.experts."
        for projection, gguf in EXPERT_NAMES.items():
            parts = [tensors.pop(f"{prefix}{e}.{projection}.weight", None) for e in range(experts)]
            if parts and parts[0] is not None:
                tensors[f"blk.{layer}.{gguf}.weight"] = torch.stack(parts)
    return tensors


def case(name: str, arch: str, config, pre: str, permute_qk: bool, extra_of) -> None:
    folder = OUT / name
    folder.mkdir(parents=True)
    tokenizer = train_tokenizer(VOCAB)
    for seed in range(500, 600):
        model = randomized_f16_model(config, seed)
        prefill, generated, decode = greedy(model, PROMPT)
        if margin(decode) >= MIN_MARGIN and len(set(generated.tolist())) >= 4:
            break
    else:
        raise RuntimeError(f"{name}: no seed gives a greedy margin of {MIN_MARGIN}")
    write_gguf(folder / "model.gguf", arch, model, config, tokenizer, pre, permute_qk, extra_of(config))
    save_file(reference_tensors(PROMPT, prefill, generated, decode), folder / "reference.safetensors")
    print(f"{name}: seed {seed}, generated {generated.tolist()}")
    if name in TRANSFORMERS_READS:
        check_with_transformers_gguf(folder, prefill)


# transformers' own GGUF loader reads these files as written; it reads no qwen3 key_length
# (so not the qwen3 case) and no rope_freqs tensor (so not llama31).
TRANSFORMERS_READS = {"qwen2"}


def check_with_transformers_gguf(folder: Path, prefill: torch.Tensor) -> None:
    model = AutoModelForCausalLM.from_pretrained(str(folder), gguf_file="model.gguf", dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    with torch.no_grad():
        got = model(torch.tensor([PROMPT])).logits[0]
    diff = float((got - prefill).abs().max())
    assert diff <= 1e-5, diff
    print(f"{folder.name}: transformers' GGUF loader agrees (max diff {diff})")


def qwen3() -> None:
    config = Qwen3Config(**SIZES, head_dim=16, tie_word_embeddings=False,
                         rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
    case("qwen3", "qwen3", config, "qwen2", False, lambda c: {})


def qwen2() -> None:
    config = Qwen2Config(**SIZES, tie_word_embeddings=True,
                         rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
    case("qwen2", "qwen2", config, "qwen2", False, lambda c: {})


def qwen3moe() -> None:
    # Layer 1 dense (mlp_only_layers), layers 0 and 2 sparse: which layers route follows from
    # which hold ffn_gate_inp. Qwen3-MoE checkpoints renormalise the top-k weights, which
    # llama.cpp does for this architecture without a metadata key.
    config = Qwen3MoeConfig(**{**SIZES, "num_hidden_layers": 3}, head_dim=16, num_experts=4, num_experts_per_tok=2,
                            moe_intermediate_size=16, norm_topk_prob=True, mlp_only_layers=[1],
                            tie_word_embeddings=False,
                            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
    case("qwen3moe", "qwen3moe", config, "qwen2", False, lambda c: {})


def llama31() -> None:
    rope = {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
    config = LlamaConfig(**SIZES, head_dim=8, tie_word_embeddings=True, rope_parameters=rope)
    factors = llama3_rope_factors(rope, 8)
    assert len(set(factors.tolist())) >= 3, factors  # every band: 1, factor, and between
    case("llama31", "llama", config, "llama-bpe", True, lambda c: {"rope_freqs.weight": factors})


def main() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    qwen2()
    qwen3()
    qwen3moe()
    llama31()


if __name__ == "__main__":
    main()
