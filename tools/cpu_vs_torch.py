#!/usr/bin/env python3
"""CPU inference speed: luminal's CpuRuntime against PyTorch eager, same model.

Writes a Llama-architecture model of about 100M parameters with random weights
(f32, transformers' save_pretrained) unless --model names a directory, runs
benchmarks/bench_llm_cpu on it, then PyTorch eager (transformers'
LlamaForCausalLM, eager attention, f32) on the same weights and the same prompt
ids, both on the same number of threads (--threads, default 1; the CpuRuntime gets it as
its pool width). Prints both sides' time to first token (one batched prefill of
the prompt, median of --iters), decode step time (greedy, KV cache, median after
a warm-up step), and the ratios torch / luminal (> 1: luminal is faster). The
greedy tokens of both sides are printed too; they should agree (random weights
make near-ties possible, so a late divergence is not an error by itself).

    pip install torch transformers safetensors
    cmake --build build/release --target bench_llm_cpu
    python3 tools/cpu_vs_torch.py [--model DIR] [--prompt-tokens 128] [--decode-tokens 16] [--threads 1]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, LlamaConfig

REPO = Path(__file__).resolve().parent.parent


def write_model(folder: Path) -> None:
    config = LlamaConfig(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
                         num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=2048,
                         rope_theta=10000.0, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(folder, safe_serialization=True)
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters (random weights) in {folder}")


def torch_side(folder: Path, prompt: list[int], decode_tokens: int, iters: int) -> dict:
    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32).eval()
    ids = torch.tensor([prompt])
    ttft = []
    with torch.inference_mode():
        for _ in range(iters):
            start = time.perf_counter()
            out = model(ids, use_cache=True)
            token = int(out.logits[0, -1].argmax())
            ttft.append((time.perf_counter() - start) * 1e3)
        cache = out.past_key_values
        generated, steps = [token], []
        for i in range(decode_tokens + 1):
            start = time.perf_counter()
            out = model(torch.tensor([[token]]), past_key_values=cache, use_cache=True)
            token = int(out.logits[0, -1].argmax())
            cache = out.past_key_values
            if i > 0:  # step 0 warms up, as on the C++ side
                steps.append((time.perf_counter() - start) * 1e3)
            generated.append(token)
    return {"ttft_ms": statistics.median(ttft), "tpot_ms": statistics.median(steps), "generated": generated}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path)
    parser.add_argument("--driver", type=Path, default=REPO / "build" / "release" / "benchmarks" / "bench_llm_cpu")
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--decode-tokens", type=int, default=16)
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as scratch:
        folder = args.model or Path(scratch)
        if args.model is None:
            write_model(folder)
        config = json.loads((folder / "config.json").read_text())
        prompt = [(i * 7919 + 13) % config["vocab_size"] for i in range(args.prompt_tokens)]  # as the driver
        env = {"OMP_NUM_THREADS": str(args.threads)}
        ours = json.loads(subprocess.run([str(args.driver), str(folder), str(args.prompt_tokens),
                                          str(args.decode_tokens), str(args.iters), str(args.threads)], check=True,
                                         capture_output=True, text=True, env=env).stdout)
        theirs = torch_side(folder, prompt, args.decode_tokens, args.iters)

    print(f"threads {args.threads}, prompt {args.prompt_tokens} tokens, {args.decode_tokens} decode steps")
    print(f"{'':10} {'TTFT ms':>10} {'step ms':>10} {'tok/s':>8}")
    for name, side in (("luminal", ours), ("torch", theirs)):
        print(f"{name:10} {side['ttft_ms']:10.1f} {side['tpot_ms']:10.2f} {1000 / side['tpot_ms']:8.1f}")
    print(f"ratio torch/luminal: TTFT {theirs['ttft_ms'] / ours['ttft_ms']:.2f}x, "
          f"decode step {theirs['tpot_ms'] / ours['tpot_ms']:.2f}x  (> 1: luminal faster)")
    print(f"luminal compile: {ours['compile_ms']:.0f} ms")
    print(f"greedy tokens luminal: {ours['generated']}")
    print(f"greedy tokens torch:   {theirs['generated']}")


if __name__ == "__main__":
    main()
