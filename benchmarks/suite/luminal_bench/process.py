"""Runs one path in its own process and reads its `BENCH_RESULT {json}` lines. The peak
resident memory comes from the kernel (wait4's ru_maxrss of that child), so it is measured
the same way for every engine."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass

MARKER = "BENCH_RESULT "


@dataclass
class Outcome:
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    peak_rss_mib: float
    timed_out: bool

    def tail(self, lines: int = 6) -> str:
        text = (self.stdout + "\n" + self.stderr).strip().splitlines()
        return " | ".join(line.strip() for line in text[-lines:] if line.strip())


def parse_results(stdout: str) -> list[dict]:
    """Every BENCH_RESULT line, decoded; a line that is not a JSON object raises ValueError."""
    results = []
    for line in stdout.splitlines():
        if line.startswith(MARKER):
            value = json.loads(line[len(MARKER):])
            if not isinstance(value, dict):
                raise ValueError(f"BENCH_RESULT is not a JSON object: {line[:80]}")
            results.append(value)
    return results


def run(command: list[str], timeout_s: float, env: dict | None = None) -> Outcome:
    with tempfile.TemporaryFile("w+", errors="replace") as out, tempfile.TemporaryFile("w+", errors="replace") as err:
        start = time.monotonic()
        proc = subprocess.Popen(command, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)  # its own group: a timeout ends its children too
        timed_out = threading.Event()

        def kill() -> None:
            timed_out.set()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout_s, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        return Outcome(proc.returncode, out.read(), err.read(), wall, usage.ru_maxrss / 1024, timed_out.is_set())
