"""Runs the breadth check (python/tests/causal_lm_zoo.py) on every decoder-only
*ForCausalLM of the installed transformers, each in its own process (a crash or a hang
is reported, not fatal), and prints the README's table: the architectures that pass and,
for the rest, the first missing aten op or the reason.

    python python/tools/causal_lm_table.py [--timeout 300] [model_type ...]
"""
from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"

# Run in a child process: one architecture, its outcome as one JSON line on stdout.
_CHILD = """
import json, sys, torch
torch.set_float32_matmul_precision("highest")
sys.path.insert(0, {tests!r})
import causal_lm_zoo as zoo
arch = zoo.Architecture({model_type!r}, {class_name!r})
try:
    model, vocab = zoo.tiny_model(arch)
except zoo.NotGeneric as error:
    print(json.dumps({{"outcome": "not generic", "reason": str(error)}})); sys.exit(0)
try:
    zoo.check_against_eager(model, vocab)
    outcome = {{"outcome": "pass", "reason": ""}}
except zoo.NotGeneric as error:
    outcome = {{"outcome": "not generic", "reason": str(error)}}
except AssertionError as error:
    outcome = {{"outcome": "wrong answer", "reason": zoo.first_line(error)}}
except Exception as error:
    cause = zoo.luminal_error_in(error)
    outcome = {{"outcome": "error", "reason": zoo.first_line(cause)}} if cause is not None else \\
        {{"outcome": "other exception", "reason": type(zoo.innermost(error)).__name__ + ": " +
                                                  zoo.first_line(zoo.innermost(error))}}
print(json.dumps(outcome))
"""


def run_one(arch, timeout: float) -> dict:
    code = _CHILD.format(tests=str(TESTS), model_type=arch.model_type, class_name=arch.class_name)
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"outcome": "timeout", "reason": f"over {timeout:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        if done.returncode < 0:
            return {"outcome": "crash", "reason": f"killed by {signal.Signals(-done.returncode).name}"}
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"outcome": "crash", "reason": f"exit {done.returncode}: {tail}"}
    return json.loads(lines[-1])


def short_reason(reason: str) -> str:
    missing = re.search(r"no luminal translation for (\S+)", reason)
    if missing:
        return f"missing `{missing.group(1)}`" + (" (complex tensors: luminal has no complex dtype)"
                                                  if "result is complex" in reason else "")
    return reason.replace("|", "\\|")[:160]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_types", nargs="*")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--no-run", action="store_true", help="only print the table of the outcomes in --json")
    parser.add_argument("--json", type=Path, help="keep every outcome here, after each architecture; "
                                                   "architectures already in it are not run again")
    args = parser.parse_args()
    sys.path.insert(0, str(TESTS))
    import causal_lm_zoo as zoo

    archs = [a for a in zoo.decoder_only_architectures() if not args.model_types or a.model_type in args.model_types]
    results = json.loads(args.json.read_text()) if args.json and args.json.exists() else {}
    for arch in archs:
        if arch.model_type in results or args.no_run:
            continue
        results[arch.model_type] = {"class": arch.class_name, **run_one(arch, args.timeout)}
        print(f"{arch.model_type}: {results[arch.model_type]['outcome']} {results[arch.model_type]['reason']}",
              file=sys.stderr, flush=True)
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))
    results = {k: v for k, v in results.items() if any(a.model_type == k for a in archs)}
    in_scope = {k: v for k, v in results.items() if v["outcome"] != "not generic"}
    passed = sorted(k for k, v in in_scope.items() if v["outcome"] == "pass")
    not_run = len(archs) - len(results)
    share = f" ({100 * len(passed) / len(in_scope):.0f}%)" if in_scope else ""
    print(f"{len(passed)} of {len(in_scope)} pass{share} ({len(results) - len(in_scope)} more have no generic tiny config"
          + (f"; {not_run} not run" if not_run else "") + ")\n")
    # One row per model type: several share a class (exaone, internlm3 and llama build LlamaForCausalLM).
    print("| architecture | model type | result |\n|---|---|---|")
    for arch in archs:
        r = results.get(arch.model_type, {"outcome": "not run", "reason": ""})
        result = "pass" if r["outcome"] == "pass" else r["outcome"] + (f": {short_reason(r['reason'])}" if r["reason"] else "")
        print(f"| {arch.class_name} | `{arch.model_type}` | {result} |")


if __name__ == "__main__":
    main()
