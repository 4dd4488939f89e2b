#!/usr/bin/env python3
"""Tiny random-weight models of the five families, with transformers' logits.

For each family this writes tests/data/models/<name>/:
  config.json, model.safetensors   the model as save_pretrained writes it (f32)
  reference.safetensors            what transformers computes for PROMPT:
      prompt_ids      [T]      i64  the input tokens
      prefill_logits  [T, V]   f32  logits of every prompt position (one forward pass)
      generated_ids   [N]      i64  greedy tokens, N = DECODE_STEPS + 1
      decode_logits   [N, V]   f32  logits each greedy step argmaxed: row 0 is the
                                    prompt's last position, rows 1..N-1 are the
                                    decode steps, each one token with the KV cache
      bf16_prefill_logits [T, V] f32  (llama only) prefill logits with every
                                    weight rounded to bf16 and computed in f32,
                                    the reference for bf16 weight storage

Every feature of a family is switched on (GQA, qk-norm, llama3 RoPE scaling,
tied embeddings, a sliding window shorter than the sequence, partial rotary,
softcapping, MoE top-2 with dense layers between), and every parameter and
buffer is drawn at random (norm weights included), so that no feature hides
behind an identity. The eager attention path runs in f32. Seeds are tried in
order until every greedy step wins by a clear margin, so that a 1e-4 logit
difference can never flip a token.

    pip install torch transformers safetensors
    python3 tools/gen_model_fixtures.py
"""
from __future__ import annotations

import shutil
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import (AutoModelForCausalLM, Gemma3TextConfig, Gemma4TextConfig, LlamaConfig,
                          Qwen3Config, Qwen3MoeConfig)

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "models"
VOCAB = 384
PROMPT = [5, 17, 200, 3, 99, 42, 42, 311, 8, 150, 260, 77]
DECODE_STEPS = 8
MIN_MARGIN = 1e-2  # smallest allowed gap between the best and second-best logit

COMMON = dict(vocab_size=VOCAB, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
              max_position_embeddings=256, bos_token_id=1, eos_token_id=2, pad_token_id=0)


def configs() -> dict[str, object]:
    return {
        "llama": LlamaConfig(**COMMON, intermediate_size=128, num_hidden_layers=2, rms_norm_eps=1e-5,
                             tie_word_embeddings=True,
                             rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                                              "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                              "original_max_position_embeddings": 16}),
        "qwen3": Qwen3Config(**COMMON, intermediate_size=128, num_hidden_layers=2, head_dim=32,
                             rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
        "qwen3_moe": Qwen3MoeConfig(**COMMON, intermediate_size=128, num_hidden_layers=3, head_dim=16,
                                    num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                                    norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[1]),
        "gemma3": Gemma3TextConfig(**COMMON, intermediate_size=128, num_hidden_layers=4, head_dim=16,
                                   sliding_window=4, query_pre_attn_scalar=24,
                                   final_logit_softcapping=30.0, attn_logit_softcapping=50.0,
                                   layer_types=["sliding_attention", "full_attention", "sliding_attention",
                                                "full_attention"],
                                   rope_parameters={
                                       "full_attention": {"rope_type": "linear", "factor": 2.0,
                                                          "rope_theta": 1000000.0},
                                       "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}),
        "gemma4_moe": Gemma4TextConfig(**COMMON, intermediate_size=96, num_hidden_layers=3, head_dim=16,
                                       global_head_dim=32, num_global_key_value_heads=1, attention_k_eq_v=True,
                                       sliding_window=4, final_logit_softcapping=30.0, enable_moe_block=True,
                                       num_experts=4, top_k_experts=2, moe_intermediate_size=32,
                                       hidden_size_per_layer_input=0, vocab_size_per_layer_input=VOCAB,
                                       layer_types=["sliding_attention", "sliding_attention", "full_attention"]),
    }


def randomize(model: torch.nn.Module, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
            if not tensor.is_floating_point() or "inv_freq" in name or "embed_scale" in name:
                continue
            if tensor.dim() <= 1:  # norm weights, scales: around their neutral value
                neutral = 0.0 if "norm" in name and "gemma3" in type(model).__name__.lower() else 1.0
                tensor.copy_(neutral + 0.3 * torch.randn(tensor.shape, generator=generator))
            else:
                tensor.copy_(torch.randn(tensor.shape, generator=generator) / tensor.shape[-1] ** 0.5)


def margin(logits: torch.Tensor) -> float:
    top2 = torch.topk(logits, 2, dim=-1).values
    return float((top2[..., 0] - top2[..., 1]).min())


def run(name: str, config, seed: int):
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.float32).eval()
    randomize(model, seed)
    model.generation_config.eos_token_id = None
    prompt = torch.tensor([PROMPT])
    with torch.no_grad():
        prefill = model(prompt).logits[0]
        out = model.generate(prompt, max_new_tokens=DECODE_STEPS + 1, do_sample=False, output_logits=True,
                             return_dict_in_generate=True, eos_token_id=None, pad_token_id=0)
    decode = torch.cat(out.logits, dim=0).float()
    generated = out.sequences[0, len(PROMPT):]
    assert torch.equal(decode.argmax(-1), generated), name
    assert torch.allclose(decode[0], prefill[-1], atol=1e-5), name
    return model, prompt, prefill, generated, decode


def generate(name: str, config, first_seed: int) -> None:
    for seed in range(first_seed, first_seed + 100):
        model, prompt, prefill, generated, decode = run(name, config, seed)
        if margin(decode) >= MIN_MARGIN:
            break
    else:
        raise RuntimeError(f"{name}: no seed gives a greedy margin of {MIN_MARGIN}")

    folder = OUT / name
    model.save_pretrained(folder, safe_serialization=True)
    for extra in folder.iterdir():  # only what a model directory needs
        if extra.name not in ("config.json", "model.safetensors"):
            extra.unlink()
    tensors = {"prompt_ids": prompt[0].to(torch.int64), "prefill_logits": prefill.contiguous(),
               "generated_ids": generated.to(torch.int64).contiguous(), "decode_logits": decode.contiguous()}
    if name == "llama":
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.copy_(parameter.to(torch.bfloat16).float())
            tensors["bf16_prefill_logits"] = model(prompt).logits[0].contiguous()
    save_file(tensors, folder / "reference.safetensors")
    print(f"{name}: seed {seed}, {sum(p.numel() for p in model.parameters())} parameters, greedy margin "
          f"{margin(decode):.3f}, generated {generated.tolist()}")


def main() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    for index, (name, config) in enumerate(configs().items()):
        generate(name, config, 1000 * index)


if __name__ == "__main__":
    main()
