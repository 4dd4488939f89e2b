"""What a result was measured on: git commit and the machine (CPU model, cores, memory, GPU)."""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _run(command: list[str], cwd: Path | None = None) -> str | None:
    try:
        out = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_info(repo: Path = REPO) -> dict:
    commit = _run(["git", "rev-parse", "HEAD"], repo)
    status = _run(["git", "status", "--porcelain", "--untracked-files=no"], repo)
    return {"git_commit": commit, "git_branch": _run(["git", "rev-parse", "--abbrev-ref", "HEAD"], repo),
            "git_dirty": bool(status) if status is not None else None,
            "git_subject": _run(["git", "log", "-1", "--format=%s"], repo)}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def cuda_gpus() -> list[str]:
    """GPU names from nvidia-smi; empty when there is no NVIDIA driver or device."""
    if not shutil.which("nvidia-smi"):
        return []
    out = _run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"])
    return [line.strip() for line in out.splitlines() if line.strip()] if out else []


def machine_info() -> dict:
    gpus = cuda_gpus()
    return {"cpu_model": cpu_model(), "cpu_cores": os.cpu_count(), "memory_gib": memory_gib(),
            "gpu": "; ".join(gpus) or None, "os": platform.platform(), "hostname": platform.node()}
