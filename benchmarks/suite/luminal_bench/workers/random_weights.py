"""Writes a Hugging Face model directory with random weights for a config.json (any family
transformers and ours both know): config.json (the given one, with --set overrides), one
model.safetensors in the checkpoint layout the hub uses, and tokenizer.json. Every engine
then loads this one file, so "the same weights" is literal.

The weights are drawn on --device (a GPU fills 16 GB in moments), every parameter afresh
from one seeded generator: matrices N(0, initializer_range), 1-D parameters (norms)
N(1, 0.1), so no router or norm is left at a constant. transformers 5 keeps a MoE layer's
experts fused (gate_up_proj [E, 2I, H], down_proj [E, H, I]); the file gets the hub's
per-expert tensors (experts.{e}.gate_proj/up_proj/down_proj.weight), which transformers
fuses again on load and ours stacks. --verify reloads the directory with transformers and
checks that every tensor came back bit for bit."""
from __future__ import annotations

import argparse
import json
import re
import shutil
import time
from pathlib import Path

FUSED_EXPERTS = re.compile(r"^(?P<prefix>.*\.experts)\.(?P<name>gate_up_proj|down_proj)$")


def checkpoint_tensors(state: dict, tie_word_embeddings: bool) -> dict:
    """The model's state dict under the hub's checkpoint names (per-expert MoE weights,
    no lm_head when it is the embedding table)."""
    import torch

    out = {}
    for name, tensor in state.items():
        if tie_word_embeddings and name == "lm_head.weight":
            continue
        fused = FUSED_EXPERTS.match(name)
        if fused is None:
            out[name] = tensor
            continue
        prefix = fused["prefix"]
        for expert, weight in enumerate(tensor.unbind(0)):
            if fused["name"] == "down_proj":
                out[f"{prefix}.{expert}.down_proj.weight"] = weight
            else:  # transformers concatenates [gate; up] along the output rows
                gate, up = weight.chunk(2, dim=0)
                out[f"{prefix}.{expert}.gate_proj.weight"] = gate
                out[f"{prefix}.{expert}.up_proj.weight"] = up
    # Each into its own host buffer: an expert's slice must not share storage with the
    # fused tensor (safetensors refuses shared tensors), and the file is written from host memory.
    return {name: torch.empty(t.shape, dtype=t.dtype).copy_(t) for name, t in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True, help="folder with a config.json")
    parser.add_argument("--tokenizer", required=True, help="tokenizer.json to copy into the model")
    parser.add_argument("--out", required=True)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                        help="override a config.json key (e.g. num_hidden_layers=8)")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verify", action="store_true", help="reload with transformers and compare every tensor")
    args = parser.parse_args()

    import torch
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoModelForCausalLM

    start = time.perf_counter()
    raw = json.loads((Path(args.config) / "config.json").read_text())
    for item in args.set:
        key, _, value = item.partition("=")
        raw[key] = json.loads(value)
    raw["torch_dtype"] = args.dtype
    raw["luminal_note"] = "random weights, written by benchmarks/suite/luminal_bench/workers/random_weights.py"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # Our config.json, not transformers' re-serialisation: both loaders read the format the hub ships.
    (out / "config.json").write_text(json.dumps(raw, indent=2) + "\n")
    shutil.copyfile(args.tokenizer, out / "tokenizer.json")

    dtype = getattr(torch, args.dtype)
    config = AutoConfig.from_pretrained(out)
    device = torch.device(args.device)
    with device:
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    generator = torch.Generator(device=device).manual_seed(args.seed)
    std = getattr(config, "initializer_range", 0.02)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 1:
                parameter.normal_(1.0, 0.1, generator=generator)
            else:
                parameter.normal_(0.0, std, generator=generator)
    tie = bool(getattr(config, "tie_word_embeddings", False))
    tensors = checkpoint_tensors(model.state_dict(), tie)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    print(f"wrote {out}: {len(tensors)} tensors, {total / 1e9:.2f} GB {args.dtype}, "
          f"{time.perf_counter() - start:.1f} s", flush=True)

    if args.verify:
        reloaded, info = AutoModelForCausalLM.from_pretrained(out, dtype=dtype, output_loading_info=True)
        problems = {k: v for k, v in info.items() if v}
        if problems:
            raise SystemExit(f"transformers reloaded {out} with {problems}")
        expected = model.state_dict()
        for name, tensor in reloaded.state_dict().items():
            if not torch.equal(tensor, expected[name].to(tensor.device)):
                raise SystemExit(f"{name} differs after reloading {out}")
        print(f"verified: transformers reloads all {len(expected)} tensors unchanged", flush=True)


if __name__ == "__main__":
    main()
