"""Model files a configuration names, prepared once and kept under the work folder:
  smollm2       SmolLM2-135M-Instruct Q4_1 GGUF, fetched by scripts/fetch_model.sh
  random_llama  a random-weight f32 Llama directory written by examples/random_model
  random_hf     random weights (dtype, bf16 say) for a config.json of the repository, with
                overrides (`set = { num_hidden_layers = 8 }`), written once by torch
                (workers/random_weights.py) and read by every path
  quantized     SmolLM2's weights re-quantized by tools/quantize_smollm2.py (type = "Q8_0", ...); with
                base = "random-1.7b", random weights at SmolLM2-1.7B's dims (tools/random_smollm2_gguf.py)
  file          a file or folder in the repository (e.g. a tests/data fixture)
  hf_config     a config.json folder (compile-time paths only: no weights)"""
from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

from .config import DTYPES, Model
from .machine import REPO

# --dry-run's dims: the same families and code paths on a CPU in seconds. Only keys the
# config.json has are replaced (head_dim only where the family sets it).
TINY = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "num_hidden_layers": 2, "num_experts": 4, "num_experts_per_tok": 2,
        "moe_intermediate_size": 32}


class ModelError(RuntimeError):
    pass


def _run(command: list[str], what: str) -> str:
    try:
        out = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ModelError(f"{what}: {error}") from error
    if out.returncode != 0:
        tail = " | ".join((out.stdout + out.stderr).strip().splitlines()[-4:])
        raise ModelError(f"{what} exited with {out.returncode}: {tail}")
    return out.stdout


def smollm2() -> Path:
    return Path(_run([str(REPO / "scripts" / "fetch_model.sh")], "scripts/fetch_model.sh").strip().splitlines()[-1])


def _random_llama(model: Model, work: Path, binaries: Path) -> Path:
    shape = {k: int(model.options[k]) for k in ("hidden", "layers", "heads", "kv_heads", "intermediate")}
    tokenizer = REPO / model.options.get("tokenizer", "tests/data/gguf_model/tokenizer.json")
    folder = work / "models" / model.key
    stamp = folder / "luminal_bench_shape.json"
    wanted = json.dumps({**shape, "tokenizer": str(tokenizer)}, sort_keys=True)
    if stamp.exists() and stamp.read_text() == wanted:
        return folder
    binary = binaries / "examples" / "random_model"
    if not binary.exists():
        raise ModelError(f"{binary} is not built")
    _run([str(binary), "--tokenizer", str(tokenizer), "--out", str(folder),
          *[arg for k, v in shape.items() for arg in (f"--{k.replace('_', '-')}", str(v))]], "random_model")
    stamp.write_text(wanted)
    return folder


def random_hf_overrides(model: Model) -> dict:
    """config.json keys the written model changes: the model's `set`, and under --dry-run
    (option tiny) TINY's keys the config has."""
    overrides = dict(model.options.get("set", {}))
    if model.options.get("tiny"):
        config = json.loads((REPO / model.options["config"] / "config.json").read_text())
        overrides.update({k: v for k, v in TINY.items() if k in config})
    return overrides


def _random_hf(model: Model, work: Path, device: str, timeout_s: float) -> Path:
    folder = work / "models" / model.key
    overrides = random_hf_overrides(model)
    command = [sys.executable, "-m", "luminal_bench.workers.random_weights",
               "--config", str(REPO / model.options["config"]), "--tokenizer", str(REPO / model.options["tokenizer"]),
               "--out", str(folder), "--dtype", DTYPES[model.dtype], "--device", device,
               "--seed", str(model.options.get("seed", 0)),
               *[arg for k, v in sorted(overrides.items()) for arg in ("--set", f"{k}={json.dumps(v)}")],
               # a dry run also proves the file round-trips through transformers (cheap at tiny dims)
               *(["--verify"] if model.options.get("tiny") else [])]
    stamp = folder / "luminal_bench_weights.json"
    wanted = json.dumps(command[3:], sort_keys=True)
    if stamp.exists() and stamp.read_text() == wanted:
        return folder
    stamp.unlink(missing_ok=True)
    suite = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": suite}
    try:
        out = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=timeout_s, env=env)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ModelError(f"random_weights: {error}") from error
    if out.returncode != 0:
        tail = " | ".join((out.stdout + out.stderr).strip().splitlines()[-4:])
        raise ModelError(f"random_weights exited with {out.returncode}: {tail}")
    print(f"      {out.stdout.strip().splitlines()[-1]}", file=sys.stderr, flush=True)
    stamp.write_text(wanted)
    return folder


def _safetensors_sizes(folder: Path) -> dict[str, int]:
    """Tensor name -> stored bytes, from the headers of every .safetensors file in `folder`."""
    sizes = {}
    for file in sorted(folder.glob("*.safetensors")):
        with file.open("rb") as f:
            (length,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(length))
        for name, entry in header.items():
            if name != "__metadata__":
                begin, end = entry["data_offsets"]
                sizes[name] = end - begin
    return sizes


EXPERT_TENSOR = re.compile(r"\.mlp\.experts\.\d+\.")


def decode_bytes(folder: Path) -> dict | None:
    """The weight bytes one decode step must read (at batch 1): every tensor once, except
    the embedding table when the LM head is another tensor (a step gathers one row of it),
    and, of a MoE layer's experts, only the top-k a token is routed to. The KV cache is not
    counted (at these contexts it is well under 1% of the weights). None: not a
    safetensors model directory."""
    if not folder.is_dir() or not (folder / "config.json").exists():
        return None
    sizes = _safetensors_sizes(folder)
    if not sizes:
        return None
    config = json.loads((folder / "config.json").read_text())
    tied = bool(config.get("tie_word_embeddings", False))
    experts, active = config.get("num_experts"), config.get("num_experts_per_tok")
    read = 0.0
    for name, size in sizes.items():
        if name == "model.embed_tokens.weight" and not tied:
            continue
        if EXPERT_TENSOR.search(name) and experts and active:
            read += size * active / experts
        else:
            read += size
    return {"weight_bytes": sum(sizes.values()), "decode_bytes": round(read)}


KV_DTYPE_BYTES = {"f32": 4, "float32": 4, "bf16": 2, "bfloat16": 2, "f16": 2, "float16": 2}


def memory_fields(folder: Path, context: int, kv_dtype: str | None) -> dict:
    """What a row's peak RSS is set against: the bytes of the model's .safetensors files
    and of a KV cache of `context` tokens in `kv_dtype` (the dtype the path reports):
    layers x 2 (K and V) x KV heads x head_dim x context x the dtype's bytes. Empty when
    `folder` is not a safetensors model directory or the dtype is unknown."""
    files = sorted(folder.glob("*.safetensors")) if folder.is_dir() else []
    if not files or not (folder / "config.json").exists() or kv_dtype not in KV_DTYPE_BYTES:
        return {}
    config = json.loads((folder / "config.json").read_text())
    heads = config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    kv_heads = config.get("num_key_value_heads", heads)
    kv_bytes = config["num_hidden_layers"] * 2 * kv_heads * head_dim * context * KV_DTYPE_BYTES[kv_dtype]
    return {"file_bytes": sum(f.stat().st_size for f in files), "kv_bytes": kv_bytes, "kv_context": context,
            "kv_dtype": kv_dtype}


QUANTIZED_BASES = {"smollm2", "random-1.7b"}


def _random_1_7b(work: Path) -> Path:
    out = work / "models" / "SmolLM2-1.7B-random.F16.gguf"
    if not out.exists():
        _run([sys.executable, str(REPO / "tools" / "random_smollm2_gguf.py"), "--tokenizer-from", str(smollm2()),
              "--out", str(out)], "tools/random_smollm2_gguf.py")
    return out


def _quantized(model: Model, work: Path) -> Path:
    qtype = model.options.get("type")
    if not qtype:
        raise ModelError(f"{model.key}: a quantized model needs type = \"Q8_0\" (or another llama.cpp type)")
    base = model.options.get("base", "smollm2")
    if base not in QUANTIZED_BASES:
        raise ModelError(f"{model.key}: base must be one of {sorted(QUANTIZED_BASES)}, got {base!r}")
    source = smollm2() if base == "smollm2" else _random_1_7b(work)
    stem = "SmolLM2-135M-Instruct" if base == "smollm2" else "SmolLM2-1.7B-random"
    out = work / "models" / f"{stem}.{qtype}.gguf"
    if not out.exists():
        _run([sys.executable, str(REPO / "tools" / "quantize_smollm2.py"), "--source", str(source),
              "--type", qtype, "--out", str(out)], "tools/quantize_smollm2.py")
    return out


def prepare(model: Model, work: Path, binaries: Path, device: str = "cpu", timeout_s: float = 1800) -> Path:
    """The file or folder to hand to the paths; ModelError says why there is none.
    `device`: where random_hf draws its weights, within `timeout_s`."""
    if model.source == "smollm2":
        return smollm2()
    if model.source == "random_llama":
        return _random_llama(model, work, binaries)
    if model.source == "random_hf":
        return _random_hf(model, work, device, timeout_s)
    if model.source == "quantized":
        return _quantized(model, work)
    path = REPO / model.options.get("path", "")
    if not model.options.get("path") or not path.exists():
        raise ModelError(f"{model.key}: path {model.options.get('path')!r} does not exist in the repository")
    return path
