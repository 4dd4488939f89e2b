"""TTFT and TPOT of transformers' Llama under torch.compile(backend="luminal") beside PyTorch
eager and torch.compile (inductor), in one process: each path with its own StaticCache, the
rounds run in turns, medians of the pooled samples, and the ratios of ours to each peer.
The model is the benchmark suite's `python` configuration (a ~100M random-weight f32 Llama)
or, with --model 1b, Llama-3.2-1B's shape (1.2B parameters), or with --model tiny ten
layers so narrow that a step is mostly the per-call overhead around the kernels, built in
memory, so no C++ build is needed; the greedy ids of every path are compared. --dtype bf16
builds the model's weights and cache in bf16, as a checkpoint saved in bf16 loads.

    python python/tools/compile_speed.py [--model 100m|1b|tiny] [--paths eager,inductor,luminal]
        [--rounds 5] [--prompt 64] [--decode 16] [--threads 1] [--clock wall|cpu] [--dtype f32|bf16]

--clock cpu times by this process's CPU time instead of the wall clock: on a machine that
other work keeps busy, one thread's CPU time leaves out the time it waited for a core.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import warnings


MODELS = {
    "100m": dict(vocab_size=49152, hidden_size=768, num_hidden_layers=10, num_attention_heads=12,
                 num_key_value_heads=4, intermediate_size=2048, tie_word_embeddings=False),
    "1b": dict(vocab_size=128256, hidden_size=2048, num_hidden_layers=16, num_attention_heads=32,
               num_key_value_heads=8, intermediate_size=8192, tie_word_embeddings=True),
    "tiny": dict(vocab_size=128, hidden_size=64, num_hidden_layers=10, num_attention_heads=4,
                 num_key_value_heads=2, intermediate_size=128, tie_word_embeddings=False),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="100m")
    parser.add_argument("--paths", default="eager,inductor,luminal")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--prompt", type=int, default=64)
    parser.add_argument("--decode", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--dtype", choices=("f32", "bf16"), default="f32")
    args = parser.parse_args()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    # A fresh inductor cache, as the suite's torch worker uses: inductor compiles from scratch.
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="luminal-speed-inductor-")
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, StaticCache

    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = LlamaConfig(**MODELS[args.model])
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    model = LlamaForCausalLM(config).to(dtype).eval()
    prompt = torch.randint(0, config.vocab_size, (1, args.prompt))
    positions = torch.arange(args.prompt)
    paths = {}
    for name in args.paths.split(","):
        if name == "eager":
            forward = model.forward
        elif name == "inductor":
            forward = torch.compile(model.forward)
        elif name == "luminal":
            import luminal.torch  # noqa: F401  (registers the backend)
            forward = torch.compile(model.forward, backend="luminal", options={"threads": args.threads})
        else:
            raise SystemExit(f"unknown path {name!r} (eager, inductor, luminal)")
        paths[name] = (forward, StaticCache(config=config, max_cache_len=args.prompt + args.decode + 1))

    def generate(name: str) -> tuple[float, list[float], list[int]]:
        forward, cache = paths[name]
        cache.reset()
        start = clock()
        out = forward(input_ids=prompt, past_key_values=cache, cache_position=positions, use_cache=True,
                      logits_to_keep=1)
        token = int(out.logits[0, -1].argmax())
        ttft = (clock() - start) * 1e3
        ids, steps = [token], []
        for i in range(args.decode):
            start = clock()
            out = forward(input_ids=torch.tensor([[token]]), past_key_values=cache,
                          cache_position=torch.tensor([args.prompt + i]), use_cache=True)
            token = int(out.logits[0, -1].argmax())
            steps.append((clock() - start) * 1e3)
            ids.append(token)
        return ttft, steps[1:], ids  # the first step compiles the decode graph on a compiled path

    ttft = {name: [] for name in paths}
    tpot = {name: [] for name in paths}
    ids = {}
    with torch.inference_mode():
        for name in paths:
            start = time.perf_counter()
            generate(name)
            generate(name)
            print(f"{name}: warm-up (compiles) {time.perf_counter() - start:.1f} s", flush=True)
        for _ in range(args.rounds):
            for name in paths:
                first, steps, ids[name] = generate(name)
                ttft[name].append(first)
                tpot[name] += steps
    med = {name: (statistics.median(ttft[name]), statistics.median(tpot[name])) for name in paths}
    reference = next(iter(ids.values()))
    for name, (first, step) in med.items():
        print(f"{name:9s} TTFT {first:8.1f} ms   TPOT {step:7.2f} ms   same ids: {ids[name] == reference}")
    if "luminal" in med:
        for name in med:
            if name != "luminal":
                print(f"luminal over {name}: TTFT {med['luminal'][0] / med[name][0]:.2f}x   "
                      f"TPOT {med['luminal'][1] / med[name][1]:.2f}x")


if __name__ == "__main__":
    main()
