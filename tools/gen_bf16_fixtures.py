#!/usr/bin/env python3
"""References for 16-bit products: the five families' fixtures run by transformers in bf16.

For each model under tests/data/models/<name>/ (made by gen_model_fixtures.py)
this writes bf16_reference.safetensors beside it:
  narrow_prefill_logits [T, V] f32  prefill logits with every weight rounded to
                                    bf16 and every nn.Linear's input but a MoE
                                    router's rounded to bf16 (a forward
                                    pre-hook), computed in f32:
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


def round_inputs(module: torch.nn.Module, args: tuple) -> tuple:
    return (args[0].to(torch.bfloat16).float(),) + args[1:]


def main() -> None:
    for name in FAMILIES:
        folder = MODELS / name
        prompt = load_file(folder / "reference.safetensors")["prompt_ids"].unsqueeze(0)
        model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32).eval()
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.copy_(parameter.to(torch.bfloat16).float())
            hooks = [m.register_forward_pre_hook(round_inputs) for name_, m in model.named_modules()
                     if isinstance(m, torch.nn.Linear) and ".router." not in name_]
            narrow = model(prompt).logits[0].contiguous()
            for hook in hooks:
                hook.remove()
            hf_bf16 = model.to(torch.bfloat16)(prompt).logits[0].float().contiguous()
        error = (hf_bf16 - narrow).abs().max()
        save_file({"narrow_prefill_logits": narrow, "hf_bf16_prefill_logits": hf_bf16, "hf_bf16_error": error.reshape(())},
                  folder / "bf16_reference.safetensors")
        print(f"{name}: {len(hooks)} products rounded, transformers' bf16 run within {float(error):.4f} of it")


if __name__ == "__main__":
    main()
