#!/usr/bin/env python3
"""References for 16-bit products: the five families' fixtures run by transformers in bf16.

For each model under tests/data/models/<name>/ (made by gen_model_fixtures.py)
this writes bf16_reference.safetensors beside it:
  narrow_prefill_logits [T, V] f32  prefill logits with every weight rounded to
                                    bf16 and the input of every product with a
                                    weight matrix (F.linear: the dense layers'
                                    and the experts', eager) but a MoE router's
                                    rounded to bf16, computed in f32:
                                    exactly what nn::ModelOptions::narrow_activations
                                    asks of our model, so a tight tolerance holds
  hf_bf16_prefill_logits [T, V] f32 the same model run by transformers in bf16
                                    (model.to(torch.bfloat16)): every op rounds,
                                    the looser reference a 16-bit user compares to
  hf_bf16_error         []     f32  max |hf_bf16 - narrow| over the logits: the
                                    tolerance the bf16 comparison states

    pip install torch transformers safetensors
    python3 tools/gen_bf16_fixtures.py
"""
from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM

MODELS = Path(__file__).resolve().parent.parent / "tests" / "data" / "models"
FAMILIES = ["llama", "qwen3", "qwen3_moe", "gemma3", "gemma4_moe"]


def router_weights(model: torch.nn.Module) -> set[int]:
    """The matrices a MoE router multiplies: rounding their input could change a token's experts."""
    return {id(p) for name, m in model.named_modules()
            if "router" in type(m).__name__.lower() or ".router." in f"{name}."
            for p in m.parameters(recurse=False)}


def narrow_logits(model: torch.nn.Module, prompt: torch.Tensor) -> tuple[torch.Tensor, int]:
    """The logits with every F.linear input but a router's rounded to bf16, and the count of products rounded."""
    exact, linear, rounded = router_weights(model), torch.nn.functional.linear, 0

    def rounding_linear(x, weight, bias=None):
        nonlocal rounded
        matrix = weight if weight._base is None else weight._base  # an expert's matrix is a view of the stacked ones
        if id(matrix) not in exact:
            x = x.to(torch.bfloat16).to(x.dtype)
            rounded += 1
        return linear(x, weight, bias)

    torch.nn.functional.linear = rounding_linear
    try:
        return model(prompt).logits[0].contiguous(), rounded
    finally:
        torch.nn.functional.linear = linear


def main() -> None:
    for name in FAMILIES:
        folder = MODELS / name
        prompt = load_file(folder / "reference.safetensors")["prompt_ids"].unsqueeze(0)
        # The experts' eager loop multiplies through F.linear, where the rounding is applied.
        model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", experts_implementation="eager",
                                                     dtype=torch.float32).eval()
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.copy_(parameter.to(torch.bfloat16).float())
            narrow, rounded = narrow_logits(model, prompt)
            hf_bf16 = model.to(torch.bfloat16)(prompt).logits[0].float().contiguous()
        error = (hf_bf16 - narrow).abs().max()
        save_file({"narrow_prefill_logits": narrow, "hf_bf16_prefill_logits": hf_bf16, "hf_bf16_error": error.reshape(())},
                  folder / "bf16_reference.safetensors")
        print(f"{name}: {rounded} products rounded, transformers' bf16 run within {float(error):.4f} of it")


if __name__ == "__main__":
    main()
