"""The engines a model can be measured on. Each path turns (model file, prompt ids,
setting) into one command line whose process prints `BENCH_RESULT {json}`, or says why it
cannot run here (a skipped row: no CUDA device, a Python package missing, not a GGUF file)."""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .config import DTYPES
from .machine import cuda_gpus
from .workers.measure import context_tokens

SUITE_DIR = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Job:
    model_file: Path
    prompt_ids: list[int]
    decode_tokens: int
    iters: int            # warm-ups included: every path runs warmups + iters prefills
    warmups: int
    threads: int | None   # None: the setting leaves threads alone (peers use 1)
    search: int
    binaries: Path        # build/release
    dtype: str = "f32"    # the weights' dtype (config.DTYPES): ours' --weights, torch's --dtype
    compile_mode: str = "default"  # torch.compile's mode


@dataclass(frozen=True)
class PathSpec:
    name: str
    label: str
    ours: bool
    command: Callable[[Job], list[str]]
    unavailable: Callable[[Job], str | None]   # a reason to skip, or None


def _generate(job: Job, extra: list[str]) -> list[str]:
    command = [str(job.binaries / "examples" / "generate"), "--model", str(job.model_file),
               "--prompt-ids", ",".join(map(str, job.prompt_ids)), "--max-tokens", str(job.decode_tokens + 2),
               "--iters", str(job.iters), "--search", str(job.search), "--ignore-eos", "--raw-ids",
               "--context", str(context_tokens(len(job.prompt_ids), job.decode_tokens)), *extra]
    if job.dtype != "f32":
        command += ["--weights", job.dtype]
    # Always passed: without it generate takes every core, and peers run on one thread unless asked.
    return command + ["--threads", str(job.threads or 1)]


def _worker(module: str, job: Job, mode: str = "eager", device: str = "cpu") -> list[str]:
    return [sys.executable, "-m", f"luminal_bench.workers.{module}", "--model", str(job.model_file),
            "--prompt-ids", ",".join(map(str, job.prompt_ids)), "--decode-tokens", str(job.decode_tokens),
            "--iters", str(job.iters), "--threads", str(job.threads or 1), "--warmups", str(job.warmups),
            "--mode", mode, "--device", device,
            *(["--dtype", DTYPES[job.dtype]] if job.dtype != "f32" else []),
            *(["--compile-mode", job.compile_mode] if mode == "compile" else [])]


def _missing_binary(relative: str) -> Callable[[Job], str | None]:
    def check(job: Job) -> str | None:
        binary = job.binaries / relative
        return None if binary.exists() else f"{binary} is not built"
    return check


def _missing_modules(*modules: str, gguf_only: bool = False) -> Callable[[Job], str | None]:
    def check(job: Job) -> str | None:
        if gguf_only and job.model_file.suffix != ".gguf":
            return "runs GGUF files only"
        missing = [m for m in modules if importlib.util.find_spec(m) is None]
        return f"Python package(s) not installed: {', '.join(missing)}" if missing else None
    return check


def _no_cuda(job: Job) -> str | None:
    return None if cuda_gpus() else "no CUDA device"


def _first(*checks: Callable[[Job], str | None]) -> Callable[[Job], str | None]:
    return lambda job: next((reason for check in checks if (reason := check(job))), None)


PATHS: dict[str, PathSpec] = {spec.name: spec for spec in (
    PathSpec("ours-cpu", "luminal (CPU)", True, lambda job: _generate(job, []),
             _missing_binary("examples/generate")),
    PathSpec("ours-cuda", "luminal (CUDA)", True, lambda job: _generate(job, ["--device", "cuda"]),
             _first(_no_cuda, _missing_binary("examples/generate"))),
    PathSpec("llama.cpp", "llama.cpp", False, lambda job: _worker("llama_cpp_worker", job),
             _missing_modules("llama_cpp", "numpy", gguf_only=True)),
    PathSpec("torch-eager", "PyTorch eager", False, lambda job: _worker("torch_worker", job),
             _missing_modules("torch", "transformers")),
    PathSpec("torch-compile", "torch.compile", False, lambda job: _worker("torch_worker", job, "compile"),
             _missing_modules("torch", "transformers")),
    PathSpec("luminal-python", "luminal (Python, torch.compile)", True,
             lambda job: _worker("torch_worker", job, "luminal"), _missing_modules("torch", "transformers", "luminal")),
    PathSpec("torch-eager-cuda", "PyTorch eager (CUDA)", False,
             lambda job: _worker("torch_worker", job, device="cuda"),
             _first(_no_cuda, _missing_modules("torch", "transformers"))),
    PathSpec("torch-compile-cuda", "torch.compile (CUDA)", False,
             lambda job: _worker("torch_worker", job, "compile", "cuda"),
             _first(_no_cuda, _missing_modules("torch", "transformers"))),
    PathSpec("ours-compile", "luminal compile", True,
             lambda job: [str(job.binaries / "benchmarks" / "bench_model_build"), str(job.iters),
                          str(job.model_file)],
             _missing_binary("benchmarks/bench_model_build")),
    # The CUDA plan's compile (generate --plan-only --weights bf16 --context 2048): no device needed.
    PathSpec("ours-compile-cuda", "luminal compile (CUDA plan)", True,
             lambda job: [str(job.binaries / "benchmarks" / "bench_model_build"), "--cuda", str(job.iters),
                          str(job.model_file)],
             _missing_binary("benchmarks/bench_model_build")),
)}

COMPILE_ONLY = {"ours-compile", "ours-compile-cuda"}


def cpu_twin(name: str) -> str:
    """The path that runs `name`'s engine on the CPU (--dry-run): ours-cuda -> ours-cpu,
    torch-eager-cuda -> torch-eager."""
    if not name.endswith("-cuda"):
        return name
    stem = name.removesuffix("-cuda")
    return next((twin for twin in (stem, f"{stem}-cpu") if twin in PATHS), name)
