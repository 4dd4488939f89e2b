"""The measurement loop every Python peer runs, written once; examples/generate runs the
same protocol in C++:
  prefill  `iters` times from an empty KV cache: one batched forward of all prompt ids
           (logits of the last position, as ours computes) + their argmax; each is
           one TTFT sample (the suite drops the first `warmups` of them);
  decode   from the last prefill, decode_tokens + 1 greedy single-token steps (forward +
           argmax); the first is an untimed warm-up, the rest are the TPOT samples."""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Callable


def arguments(description: str, extra: list[tuple[str, str]] = ()) -> argparse.Namespace:
    """The common flags, plus `extra` (flag, default) string options of one worker."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", required=True)
    parser.add_argument("--prompt-ids", required=True, help="comma-separated token ids")
    parser.add_argument("--decode-tokens", type=int, required=True)
    parser.add_argument("--iters", type=int, required=True, help="prefills, warm-ups included")
    parser.add_argument("--warmups", type=int, default=0, help="how many of the prefills are warm-ups")
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--mode", default="eager")
    parser.add_argument("--device", default="cpu")
    for flag, default in extra:
        parser.add_argument(flag, default=default)
    args = parser.parse_args()
    args.prompt_ids = [int(x) for x in args.prompt_ids.split(",")]
    return args


def context_tokens(prompt_tokens: int, decode_tokens: int) -> int:
    """The KV cache size in tokens every path allocates for a run: the prompt, the decode
    steps and their warm-up, and a small margin."""
    return prompt_tokens + decode_tokens + 8


def ms_since(start: float) -> float:
    return (time.perf_counter() - start) * 1e3


def measure(reset: Callable[[], None], prefill: Callable[[list[int]], int], step: Callable[[int, int], int],
            prompt_ids: list[int], iters: int, decode_tokens: int) -> dict:
    """prefill(ids) -> first token; step(token, position) -> next token."""
    ttft = []
    token = 0
    for _ in range(iters):
        reset()
        start = time.perf_counter()
        token = prefill(prompt_ids)
        ttft.append(ms_since(start))
    generated, steps = [token], []
    for i in range(decode_tokens + 1):
        start = time.perf_counter()
        token = step(token, len(prompt_ids) + i)
        steps.append(ms_since(start))
        generated.append(token)
    tpot = steps[1:]
    return {"prompt_tokens": len(prompt_ids), "iters": iters, "ttft_ms_samples": ttft, "tpot_ms_samples": tpot,
            "decode_tokens": len(tpot), "prompt_ids": prompt_ids, "generated_ids": generated,
            "warmup_step_ms": steps[0]}


def emit(result: dict) -> None:
    print("BENCH_RESULT " + json.dumps(result), flush=True)
    sys.stdout.flush()
