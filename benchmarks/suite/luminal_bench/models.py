"""Model files a configuration names, prepared once and kept under the work folder:
  smollm2       SmolLM2-135M-Instruct Q4_1 GGUF, fetched by scripts/fetch_model.sh
  random_llama  a random-weight f32 Llama directory written by examples/random_model
  quantized     SmolLM2's weights re-quantized by tools/quantize_smollm2.py (type = "Q8_0", ...)
  file          a file or folder in the repository (e.g. a tests/data fixture)
  hf_config     a config.json folder (compile-time paths only: no weights)"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .config import Model
from .machine import REPO


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


def _quantized(model: Model, work: Path) -> Path:
    qtype = model.options.get("type")
    if not qtype:
        raise ModelError(f"{model.key}: a quantized model needs type = \"Q8_0\" (or another llama.cpp type)")
    out = work / "models" / f"SmolLM2-135M-Instruct.{qtype}.gguf"
    if not out.exists():
        _run([sys.executable, str(REPO / "tools" / "quantize_smollm2.py"), "--source", str(smollm2()),
              "--type", qtype, "--out", str(out)], "tools/quantize_smollm2.py")
    return out


def prepare(model: Model, work: Path, binaries: Path) -> Path:
    """The file or folder to hand to the paths; ModelError says why there is none."""
    if model.source == "smollm2":
        return smollm2()
    if model.source == "random_llama":
        return _random_llama(model, work, binaries)
    if model.source == "quantized":
        return _quantized(model, work)
    path = REPO / model.options.get("path", "")
    if not model.options.get("path") or not path.exists():
        raise ModelError(f"{model.key}: path {model.options.get('path')!r} does not exist in the repository")
    return path
