"""PyTorch (transformers) on the model: eager, torch.compile of the forward (default
inductor), or torch.compile with luminal's backend (--mode luminal: the Python package's
torch front end on our CPU runtime), on the CPU or a CUDA device. Both use a StaticCache sized for the run, so
prefill and decode see fixed shapes and torch.compile compiles once per shape; --dtype
throughout (f32 by default; a GGUF file is dequantized to f32 by transformers). A tensor
the model lacks or does not use in the file fails the run. Reading the picked token
back (int(argmax)) waits for the device, so every sample ends when its token is known. The
prefill computes the last position's logits only (logits_to_keep=1), as ours does."""
from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from .measure import arguments, context_tokens, emit, measure, ms_since


def main() -> None:
    args = arguments(__doc__.split("\n")[0], extra=[("--dtype", "float32"), ("--compile-mode", "default")])
    # A fresh inductor cache: torch.compile then compiles from scratch on every run, as ours
    # does (a warm on-disk cache made its warm-up 2-3x faster from one run to the next here).
    cache_dir = tempfile.TemporaryDirectory(prefix="luminal-bench-inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache_dir.name
    os.environ["TRITON_CACHE_DIR"] = os.path.join(cache_dir.name, "triton")
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, StaticCache

    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    model_path = Path(args.model)
    device = torch.device(args.device)
    torch_dtype = getattr(torch, args.dtype)
    if model_path.suffix == ".gguf":
        model = AutoModelForCausalLM.from_pretrained(model_path.parent, gguf_file=model_path.name,
                                                     dtype=torch_dtype)
        dtype = f"{args.dtype} (GGUF dequantized by transformers)"
    else:  # straight onto the device: a 16 GB model need not pass through host memory twice
        model, info = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch_dtype, device_map=str(device),
                                                           output_loading_info=True)
        problems = {kind: names for kind, names in info.items() if names}
        if problems:
            raise SystemExit(f"transformers loaded {model_path} with {problems}")
        dtype = args.dtype
    model.eval().to(device)
    load_ms = ms_since(start)
    if args.mode == "compile":
        forward = torch.compile(model.forward, mode=args.compile_mode)
    elif args.mode == "luminal":
        import luminal.torch  # noqa: F401  (registers the backend)
        forward = torch.compile(model.forward, backend="luminal",
                                options={"device": args.device, "threads": args.threads})
    else:
        forward = model.forward
    cache = StaticCache(config=model.config, max_cache_len=context_tokens(len(args.prompt_ids), args.decode_tokens))
    prompt = torch.tensor([args.prompt_ids], device=device)
    prompt_positions = torch.arange(len(args.prompt_ids), device=device)

    def prefill(_ids: list[int]) -> int:
        out = forward(input_ids=prompt, past_key_values=cache, cache_position=prompt_positions, use_cache=True,
                      logits_to_keep=1)
        return int(out.logits[0, -1].argmax())

    def step(token: int, position: int) -> int:
        out = forward(input_ids=torch.tensor([[token]], device=device), past_key_values=cache,
                      cache_position=torch.tensor([position], device=device), use_cache=True)
        return int(out.logits[0, -1].argmax())

    with torch.inference_mode():
        result = measure(cache.reset, prefill, step, args.prompt_ids, args.iters, args.decode_tokens)
    suffix = "" if device.type == "cpu" else f"-{device.type}"
    path = "luminal-python" if args.mode == "luminal" else f"torch-{args.mode}"
    result.update(path=f"{path}{suffix}", model=model_path.name, device=str(device), dtype=dtype,
                  load_ms=load_ms, kv_dtype=str(cache.layers[0].keys.dtype).removeprefix("torch."),
                  threads=args.threads, versions={"torch": torch.__version__,
                                                  "transformers": transformers.__version__})
    if args.mode in ("compile", "luminal"):  # torch.compile compiles (and recompiles) during the warm-up calls
        result.update(compile_mode=args.compile_mode if args.mode == "compile" else "luminal",
                      compile_ms=sum(result["ttft_ms_samples"][:args.warmups]) + result.pop("warmup_step_ms"),
                      compile_note="warm-up prefills + warm-up decode step")
    emit(result)
    cache_dir.cleanup()


if __name__ == "__main__":
    main()
