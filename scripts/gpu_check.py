"""The PyTorch side of scripts/gpu_check.sh, on the lent device (torch and transformers are there).

  facts                   the device, a measured device-to-device copy bandwidth and a bf16 GEMM rate:
                          the two ceilings every ratio of the check is taken against
  peer MODE CONFIG_DIR    transformers' model of CONFIG_DIR with random bf16 weights made on the device,
                          MODE eager or compile (torch.compile, inductor): TTFT at each --prompts length
                          and TPOT of greedy decode after --decode-after prompt tokens
  summary RESULTS.JSONL   the table the check ends with, from the lines the steps recorded

Each prints one line 'RESULT <json>' (the shell script collects them); errors are printed, not raised,
so a failing peer never hides the rows gathered before it.
"""
import argparse
import json
import statistics
import sys
import time


def cuda_time(fn, reps):
    """Median device seconds of fn() over reps runs after one warm-up, CUDA events around each."""
    import torch
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e-3)
    return statistics.median(times)


def facts():
    import torch
    if not torch.cuda.is_available():
        return {"device": None, "reason": "torch.cuda.is_available() is False"}
    props = torch.cuda.get_device_properties(0)
    result = {"device": props.name, "sms": props.multi_processor_count, "memory_bytes": props.total_memory,
              "capability": f"{props.major}.{props.minor}", "torch": torch.__version__, "cuda": torch.version.cuda}
    # 2 x 4 GiB: far past the L2, so the copy streams from DRAM; a copy reads and writes each byte.
    src = torch.empty(1 << 32, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    seconds = cuda_time(lambda: dst.copy_(src), 10)
    result["copy_bandwidth"] = 2 * src.numel() / seconds
    del src, dst
    n = 8192
    a = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    seconds = cuda_time(lambda: a @ b, 20)
    result["bf16_gemm_flops"] = 2 * n ** 3 / seconds
    return result


def peer(mode, config_dir, prompts, decode_after, decode_tokens):
    import torch
    import transformers
    config = transformers.AutoConfig.from_pretrained(config_dir)
    torch.manual_seed(0)
    start = time.perf_counter()
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16)
    model.eval()
    result = {"mode": mode, "model": config_dir, "transformers": transformers.__version__,
              "init_s": time.perf_counter() - start}
    forward = torch.compile(model) if mode == "compile" else model
    vocab = config.vocab_size

    def ids(n):
        return torch.randint(0, vocab, (1, n), device="cuda", generator=torch.Generator("cuda").manual_seed(n))

    with torch.inference_mode():
        for n in prompts:
            prompt = ids(n)
            # TTFT: the prompt's forward and the first token's pick, as our TTFT.
            start = time.perf_counter()
            result[f"ttft_{n}_s"] = cuda_time(lambda: forward(prompt).logits[:, -1].argmax(-1), 3)
            result[f"ttft_{n}_first_call_s"] = time.perf_counter() - start
        # TPOT: greedy steps through the cache after `decode_after` tokens (generate's own loop; with
        # compile, generate's static cache, which transformers compiles for decoding).
        prompt = ids(decode_after)
        kwargs = {"do_sample": False, "pad_token_id": 0}
        if mode == "compile":
            kwargs["cache_implementation"] = "static"

        def generate(tokens):
            model.generate(prompt, max_new_tokens=tokens, min_new_tokens=tokens, **kwargs)

        start = time.perf_counter()
        generate(decode_tokens + 1)
        result["decode_warmup_s"] = time.perf_counter() - start
        one = cuda_time(lambda: generate(1), 3)
        many = cuda_time(lambda: generate(decode_tokens + 1), 3)
        result["tpot_s"] = (many - one) / decode_tokens
        result["decode_after"] = decode_after
    return result


def summary(path):
    """The check's closing table: each step's status, then every timing against its peer and its floor."""
    import os
    records = [json.loads(line) for line in open(path) if line.strip()]
    steps = [r for r in records if "step" in r]
    results = {(r["kind"], r["label"]): r["result"] for r in records if "kind" in r}
    lines = ["step                                                                    status       s"]
    lines += [f"{s['step'][:70]:<70}  {s['status']:<10} {s['seconds']:>4}" for s in steps]
    facts = results.get(("facts", "device"), {})
    if facts.get("device"):
        lines.append(f"device: {facts['device']}, {facts['sms']} SMs, {facts['memory_bytes'] / 2**30:.0f} GiB; "
                     f"copy {facts['copy_bandwidth'] * 1e-12:.2f} TB/s; bf16 GEMM {facts['bf16_gemm_flops'] * 1e-12:.0f} TFLOP/s")
    profile_path = os.path.join(os.path.dirname(path), "profile_8b_bf16.json")
    floors = {}
    if os.path.exists(profile_path):
        for step in json.load(open(profile_path))["steps"]:
            floors[step["step"]] = step["plan"]["floor_seconds"]
            worst = sorted((l for l in step["launches"] if l.get("model_us")),
                           key=lambda l: l["device_us"] - l["model_us"], reverse=True)[:5]
            lines.append(f"{step['step']} after {step['cached']}: launches one by one {step['device_us']:.0f} us, "
                         f"model {step['plan']['modelled_seconds'] * 1e6:.0f} us, floor {step['plan']['floor_seconds'] * 1e6:.0f} us; "
                         "most over the model: " + ", ".join(f"#{l['index']} {l['kernel']} {l['device_us']:.1f}/{l['model_us']:.1f} us"
                                                            for l in worst))
    lines.append(f"{'run':<34} {'TTFT ms':>9} {'TPOT ms':>9} {'TPOT/floor':>10}")
    for (kind, label), r in results.items():
        if kind == "ours":
            floor = floors.get("decode") if label.startswith("8b-bf16") else None
            ratio = f"{r['tpot_ms'] * 1e-3 / floor:.2f}" if floor and r.get("decode_tokens") else "-"
            lines.append(f"ours {label:<29} {r['ttft_ms']:>9.2f} {r['tpot_ms']:>9.2f} {ratio:>10}")
        elif kind == "peer":
            if "error" in r:
                lines.append(f"{label:<34} {r['error'][:80]}")
                continue
            for key, value in r.items():
                if key.startswith("ttft_") and key.endswith("_s") and "first_call" not in key:
                    lines.append(f"{label + ' ' + key[5:-2] + ' tokens':<34} {value * 1e3:>9.2f}")
            lines.append(f"{label + ' decode':<34} {'':>9} {r['tpot_s'] * 1e3:>9.2f}")
        elif kind == "plan":
            lines.append(f"plan {label}: modelled {r['modelled_seconds'] * 1e6:.0f} us, {r['modelled_over_floor']:.3f}x the floor, "
                         f"{r['launches']} launches")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("facts")
    sub.add_parser("summary").add_argument("results")
    p = sub.add_parser("peer")
    p.add_argument("mode", choices=["eager", "compile"])
    p.add_argument("config_dir")
    p.add_argument("--prompts", default="128,1024")
    p.add_argument("--decode-after", type=int, default=1024)
    p.add_argument("--decode-tokens", type=int, default=32)
    args = parser.parse_args()
    if args.what == "summary":
        print(summary(args.results))
        return 0
    try:
        if args.what == "facts":
            result = facts()
        else:
            result = peer(args.mode, args.config_dir, [int(n) for n in args.prompts.split(",")], args.decode_after,
                          args.decode_tokens)
    except Exception as error:  # a peer's failure is a row of the table, not the end of the check
        result = {"error": f"{type(error).__name__}: {error}"}
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
