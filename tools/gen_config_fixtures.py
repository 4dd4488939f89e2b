#!/usr/bin/env python3
"""Writes config.json fixtures of the five model families and what transformers
makes of each, for tests/io/test_model_config.cpp.

Each case is a folder tests/data/configs/<case>/ with
  config.json    either the field layout of a real Hugging Face hub config
                 (old style: rope_theta + rope_scaling, sparse Gemma text_config)
                 or one written by transformers' own save_pretrained (new style:
                 rope_parameters, layer_types, per_layer_config)
  expected.json  transformers' reading of it (AutoConfig.from_pretrained), reduced
                 to the fields luminal parses, with per-layer attention kind, head
                 size, KV heads, RoPE parameters and MoE use resolved the way the
                 transformers modeling code resolves them.

    pip install transformers torch
    python3 tools/gen_config_fixtures.py
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from transformers import (AutoConfig, Gemma3TextConfig, Gemma4TextConfig, LlamaConfig, Qwen3Config,
                          Qwen3MoeConfig)

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "configs"

# Field layouts as published on the hub (values of the named checkpoints).
HUB_CONFIGS = {
    "llama31_8b": {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
        "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
        "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "llama",
        "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
        "pretraining_tp": 1, "rms_norm_eps": 1e-05,
        "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "transformers_version": "4.43.0.dev0", "use_cache": True, "vocab_size": 128256,
    },
    "llama32_1b": {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
        "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
        "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "llama",
        "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
        "pretraining_tp": 1, "rms_norm_eps": 1e-05,
        "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "rope_theta": 500000.0, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
        "transformers_version": "4.45.0.dev0", "use_cache": True, "vocab_size": 128256,
    },
    "smollm2_135m": {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 576,
        "initializer_range": 0.041666666666666664, "intermediate_size": 1536,
        "max_position_embeddings": 8192, "mlp_bias": False, "model_type": "llama",
        "num_attention_heads": 9, "num_hidden_layers": 30, "num_key_value_heads": 3,
        "pad_token_id": 2, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": None,
        "rope_theta": 100000, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
        "transformers_version": "4.42.3", "use_cache": True, "vocab_size": 49152,
    },
    "qwen3_4b": {
        "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
        "hidden_size": 2560, "initializer_range": 0.02, "intermediate_size": 9728,
        "max_position_embeddings": 40960, "max_window_layers": 36, "model_type": "qwen3",
        "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
        "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None,
        "tie_word_embeddings": True, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
        "use_cache": True, "use_sliding_window": False, "vocab_size": 151936,
    },
    "qwen3_moe_30b_a3b": {
        "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
        "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
        "intermediate_size": 6144, "max_position_embeddings": 40960, "max_window_layers": 48,
        "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768,
        "norm_topk_prob": True, "num_attention_heads": 32, "num_experts": 128,
        "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4,
        "output_router_logits": False, "rms_norm_eps": 1e-06, "rope_scaling": None,
        "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": None,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
        "use_cache": True, "use_sliding_window": False, "vocab_size": 151936,
    },
    # Multimodal: the text model's fields sit under text_config and rely on
    # Gemma3TextConfig's defaults for everything not given.
    "gemma3_4b_it": {
        "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999,
        "eoi_token_index": 256000, "eos_token_id": [1, 106], "image_token_index": 262144,
        "initializer_range": 0.02, "mm_tokens_per_image": 256, "model_type": "gemma3",
        "text_config": {
            "hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
            "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
            "sliding_window": 1024,
        },
        "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
        "vision_config": {
            "hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
            "model_type": "siglip_vision_model", "num_attention_heads": 16,
            "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": False,
        },
    },
    "gemma3_1b_it": {
        "architectures": ["Gemma3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "attn_logit_softcapping": None, "bos_token_id": 2, "cache_implementation": "hybrid",
        "eos_token_id": [1, 106], "final_logit_softcapping": None, "head_dim": 256,
        "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152, "initializer_range": 0.02,
        "intermediate_size": 6912, "max_position_embeddings": 32768, "model_type": "gemma3_text",
        "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1,
        "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06,
        "rope_local_base_freq": 10000, "rope_scaling": None, "rope_theta": 1000000,
        "sliding_window": 512, "sliding_window_pattern": 6, "torch_dtype": "bfloat16",
        "transformers_version": "4.50.0.dev0", "use_cache": True, "vocab_size": 262144,
    },
    # Gemma 4 checkpoints name the full-attention layers' head size and KV heads
    # with global_* keys; transformers turns them into per_layer_config.
    "gemma4_moe_hub": {
        "architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4",
        "text_config": {
            "model_type": "gemma4_text", "vocab_size": 262144, "hidden_size": 2816,
            "intermediate_size": 2112, "num_hidden_layers": 12, "num_attention_heads": 16,
            "num_key_value_heads": 8, "head_dim": 256, "global_head_dim": 512,
            "num_global_key_value_heads": 2, "attention_k_eq_v": True,
            "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 262144,
            "rms_norm_eps": 1e-06, "sliding_window": 1024, "final_logit_softcapping": 30.0,
            "enable_moe_block": True, "num_experts": 128, "top_k_experts": 8,
            "moe_intermediate_size": 704, "hidden_size_per_layer_input": 0,
            "tie_word_embeddings": True,
            "rope_parameters": {
                "full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0,
                                   "rope_type": "proportional"},
                "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"},
            },
        },
        "vision_config": {"model_type": "gemma4_vision"},
    },
}


def saved_configs() -> dict[str, object]:
    """Configs as transformers itself writes them (new-style fields)."""
    return {
        "llama_saved": LlamaConfig(vocab_size=320, hidden_size=96, intermediate_size=160,
                                   num_hidden_layers=3, num_attention_heads=6, num_key_value_heads=2,
                                   max_position_embeddings=512, rope_theta=10000.0,
                                   tie_word_embeddings=True, bos_token_id=1, eos_token_id=2),
        "qwen3_saved": Qwen3Config(vocab_size=300, hidden_size=64, intermediate_size=128,
                                   num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                                   head_dim=32, use_sliding_window=True, sliding_window=8,
                                   max_window_layers=2),
        "qwen3_moe_saved": Qwen3MoeConfig(vocab_size=300, hidden_size=64, intermediate_size=128,
                                          num_hidden_layers=4, num_attention_heads=4,
                                          num_key_value_heads=2, head_dim=16, num_experts=6,
                                          num_experts_per_tok=2, moe_intermediate_size=32,
                                          decoder_sparse_step=2, mlp_only_layers=[3],
                                          norm_topk_prob=True),
        "gemma3_saved": Gemma3TextConfig(vocab_size=300, hidden_size=64, intermediate_size=128,
                                         num_hidden_layers=7, num_attention_heads=4,
                                         num_key_value_heads=2, head_dim=32, sliding_window=6,
                                         query_pre_attn_scalar=24, final_logit_softcapping=30.0,
                                         attn_logit_softcapping=50.0,
                                         rope_parameters={
                                             "full_attention": {"rope_type": "linear", "factor": 8.0,
                                                                "rope_theta": 1000000.0},
                                             "sliding_attention": {"rope_type": "default",
                                                                   "rope_theta": 10000.0}}),
        "gemma4_saved": Gemma4TextConfig(vocab_size=300, hidden_size=64, intermediate_size=96,
                                         num_hidden_layers=6, num_attention_heads=4,
                                         num_key_value_heads=2, head_dim=16, sliding_window=4,
                                         final_logit_softcapping=30.0, enable_moe_block=True,
                                         num_experts=4, top_k_experts=2, moe_intermediate_size=32,
                                         attention_k_eq_v=True, global_head_dim=32,
                                         num_global_key_value_heads=1, hidden_size_per_layer_input=0,
                                         vocab_size_per_layer_input=300),
    }


def rope_of(params: dict) -> dict:
    rope_type = params.get("rope_type", "default")
    out = {"type": rope_type, "theta": float(params["rope_theta"]),
           "partial_rotary_factor": float(params.get("partial_rotary_factor", 1.0))}
    if rope_type in ("linear", "llama3"):
        out["factor"] = float(params["factor"])
    if rope_type == "llama3":
        out["low_freq_factor"] = float(params["low_freq_factor"])
        out["high_freq_factor"] = float(params["high_freq_factor"])
        out["original_max_position_embeddings"] = int(params["original_max_position_embeddings"])
    return out


def as_list(value) -> list[int]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def expected_of(config) -> dict:
    text = config.get_text_config()
    model_type = text.model_type
    layers = []
    for i in range(text.num_hidden_layers):
        layer_type = text.layer_types[i] if getattr(text, "layer_types", None) else "full_attention"
        rope_params = text.rope_parameters
        if "full_attention" in rope_params or "sliding_attention" in rope_params:
            rope_params = rope_params[layer_type]
        if model_type == "gemma4_text":  # head size and KV heads differ per layer type
            head_dim = text.per_layer_config[i].head_dim
            kv_heads = text.per_layer_config[i].num_key_value_heads
        else:
            head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
            kv_heads = text.num_key_value_heads
        if model_type == "qwen3_moe":
            # Qwen3MoeDecoderLayer's rule for a sparse (MoE) MLP.
            moe = (i not in text.mlp_only_layers and text.num_experts > 0
                   and (i + 1) % text.decoder_sparse_step == 0)
        elif model_type == "gemma4_text":
            moe = bool(text.enable_moe_block)
        else:
            moe = False
        layers.append({"attention": "sliding" if layer_type == "sliding_attention" else "full",
                       "head_dim": head_dim, "num_key_value_heads": kv_heads,
                       "rope": rope_of(rope_params), "moe": moe})
    expected = {
        "model_type": model_type,
        "vocab_size": text.vocab_size, "hidden_size": text.hidden_size,
        "intermediate_size": text.intermediate_size, "num_hidden_layers": text.num_hidden_layers,
        "num_attention_heads": text.num_attention_heads,
        "max_position_embeddings": text.max_position_embeddings,
        "rms_norm_eps": text.rms_norm_eps,
        "hidden_act": getattr(text, "hidden_act", None) or text.hidden_activation,
        "tie_word_embeddings": bool(config.tie_word_embeddings if hasattr(config, "tie_word_embeddings")
                                    else text.tie_word_embeddings),
        "attention_bias": bool(text.attention_bias),
        "bos_token_id": text.bos_token_id,
        "eos_token_ids": as_list(config.eos_token_id if getattr(config, "eos_token_id", None) is not None
                                 else text.eos_token_id),
        "sliding_window": text.sliding_window if any(l["attention"] == "sliding" for l in layers) else None,
        "layers": layers,
    }
    if model_type == "qwen3_moe":
        expected["moe"] = {"num_experts": text.num_experts, "top_k": text.num_experts_per_tok,
                           "intermediate_size": text.moe_intermediate_size,
                           "norm_topk_prob": bool(text.norm_topk_prob)}
    if model_type == "gemma4_text" and text.enable_moe_block:
        expected["moe"] = {"num_experts": text.num_experts, "top_k": text.top_k_experts,
                           "intermediate_size": text.moe_intermediate_size, "norm_topk_prob": True}
    if model_type == "gemma3_text":
        expected["query_pre_attn_scalar"] = float(text.query_pre_attn_scalar)
        expected["attn_logit_softcapping"] = text.attn_logit_softcapping
    if model_type in ("gemma3_text", "gemma4_text"):
        expected["final_logit_softcapping"] = text.final_logit_softcapping
    if model_type == "gemma4_text":
        expected["attention_k_eq_v"] = bool(text.attention_k_eq_v)
        expected["num_kv_shared_layers"] = text.num_kv_shared_layers
        expected["hidden_size_per_layer_input"] = text.hidden_size_per_layer_input
        expected["use_double_wide_mlp"] = bool(text.use_double_wide_mlp)
    return expected


def main() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    cases: dict[str, Path] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, fields in HUB_CONFIGS.items():
            folder = OUT / name
            folder.mkdir(parents=True)
            (folder / "config.json").write_text(json.dumps(fields, indent=2) + "\n")
            cases[name] = folder
        for name, config in saved_configs().items():
            folder = OUT / name
            config.save_pretrained(scratch + "/" + name)
            folder.mkdir(parents=True)
            shutil.copy(scratch + "/" + name + "/config.json", folder / "config.json")
            cases[name] = folder
    for name, folder in cases.items():
        config = AutoConfig.from_pretrained(folder)
        (folder / "expected.json").write_text(json.dumps(expected_of(config)) + "\n")
        print(f"{name}: {config.get_text_config().model_type}")


if __name__ == "__main__":
    main()
