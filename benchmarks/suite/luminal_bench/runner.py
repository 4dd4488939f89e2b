"""Runs a configuration: every model x setting x path in its own process, one progress line
each, every outcome (measured, failed or skipped) stored as a row."""
from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from pathlib import Path

from . import process, stats
from .config import Config, Model, Setting
from .machine import git_info, machine_info
from .models import ModelError, prepare
from .paths import COMPILE_ONLY, PATHS, SUITE_DIR, Job, PathSpec
from .prompt import PromptError, prompt_ids
from .store import Result, Store

REQUIRED_FIELDS = {"ttft_ms_samples", "tpot_ms_samples", "prompt_ids", "generated_ids"}


def result_from_bench(raw: dict, base: Result, warmups: int, sent_ids: list[int] | None) -> Result:
    """A row from a path's BENCH_RESULT: statistics recomputed from its samples."""
    if base.path in COMPILE_ONLY:
        samples = [float(x) for x in raw.get("compile_ms_samples", [])]
        if not samples:
            raise ValueError("BENCH_RESULT has no compile_ms_samples")
        base.compile_ms_samples, base.compile_ms = samples, stats.median(samples)
    else:
        missing = sorted(REQUIRED_FIELDS - raw.keys())
        if missing:
            raise ValueError(f"BENCH_RESULT lacks {missing}")
        if sent_ids is not None and list(raw["prompt_ids"]) != sent_ids:
            raise ValueError("the path ran other prompt ids than it was given")
        ttft = stats.after_warmup([float(x) for x in raw["ttft_ms_samples"]], warmups)
        tpot = [float(x) for x in raw["tpot_ms_samples"]]
        if not ttft or not tpot:
            raise ValueError(f"too few samples: {len(ttft)} TTFT after warm-up, {len(tpot)} TPOT")
        base.ttft_ms_samples, base.tpot_ms_samples = ttft, tpot
        base.ttft_ms, base.tpot_ms = stats.median(ttft), stats.median(tpot)
        base.throughput_tps = 1000.0 / base.tpot_ms
        base.compile_ms = raw.get("compile_ms")
        base.prompt_ids, base.generated_ids = list(raw["prompt_ids"]), list(raw["generated_ids"])
    base.load_ms, base.dtype, base.device = raw.get("load_ms"), raw.get("dtype"), raw.get("device")
    base.raw = {k: v for k, v in raw.items() if k not in REQUIRED_FIELDS | {"compile_ms_samples"}}
    base.status = "ok"
    return base


class Progress:
    def __init__(self, total: int, stream=sys.stderr):
        self.total, self.done, self.stream = total, 0, stream

    def start(self, text: str) -> None:
        self.done += 1
        print(f"[{self.done}/{self.total}] {text} ...", file=self.stream, flush=True)

    def end(self, result: Result) -> None:
        if result.status == "ok" and result.path in COMPILE_ONLY:
            summary = f"compile {result.compile_ms:.0f} ms"
        elif result.status == "ok":
            summary = (f"TTFT {result.ttft_ms:.1f} ms, TPOT {result.tpot_ms:.2f} ms, "
                       f"peak RSS {result.peak_rss_mib:.0f} MiB")
        else:
            summary = f"{result.status}: {result.error}"
        wall = f" ({result.wall_s:.1f} s)" if result.wall_s is not None else ""
        print(f"      {summary}{wall}", file=self.stream, flush=True)


def _measure(spec: PathSpec, job: Job, base: Result, timeout_s: int, warmups: int) -> Result:
    reason = spec.unavailable(job)
    if reason:
        base.status, base.error = "skipped", reason
        return base
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(SUITE_DIR), os.environ.get("PYTHONPATH")])))
    threads = str(job.threads or 1)
    env.update(OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
    try:
        outcome = process.run(spec.command(job), timeout_s, env)
    except OSError as error:
        base.status, base.error = "failed", f"could not start: {error}"
        return base
    base.wall_s, base.peak_rss_mib = round(outcome.wall_s, 2), round(outcome.peak_rss_mib, 1)
    if outcome.timed_out:
        base.status, base.error = "failed", f"timed out after {timeout_s} s"
        return base
    try:
        results = process.parse_results(outcome.stdout)
    except ValueError as error:
        base.status, base.error = "failed", f"unparsable BENCH_RESULT: {error}"
        return base
    if outcome.returncode != 0 or not results:
        base.status = "failed"
        base.error = f"exit code {outcome.returncode}, {len(results)} BENCH_RESULT lines: {outcome.tail()}"
        return base
    try:
        return result_from_bench(results[-1], base, warmups, None if spec.name in COMPILE_ONLY else job.prompt_ids)
    except (ValueError, TypeError, KeyError) as error:
        base.status, base.error = "failed", str(error)
        return base


def count_jobs(config: Config) -> int:
    return sum(1 if path in COMPILE_ONLY else len(config.settings) for m in config.models for path in m.paths)


def run(config: Config, store: Store, binaries: Path, work: Path) -> int:
    run_id = store.begin_run(config.name, git_info(), machine_info())
    progress = Progress(count_jobs(config))
    for model in config.models:
        model_file, model_error = None, None
        try:
            model_file = prepare(model, work, binaries)
        except ModelError as error:
            model_error = f"model not prepared: {error}"
        for path in model.paths:
            spec = PATHS[path]
            settings = config.settings[:1] if path in COMPILE_ONLY else config.settings
            for setting in settings:
                _run_one(config, store, run_id, progress, model, model_file, model_error, spec, setting, binaries,
                         work)
    store.finish_run(run_id)
    return run_id


def _run_one(config: Config, store: Store, run_id: int, progress: Progress, model: Model, model_file: Path | None,
             model_error: str | None, spec: PathSpec, setting: Setting, binaries: Path, work: Path) -> None:
    compile_only = spec.name in COMPILE_ONLY
    base = Result(model=model.key, model_title=model.title, path=spec.name,
                  setting="compile only" if compile_only else setting.label, status="failed",
                  prompt_tokens=None if compile_only else setting.prompt_tokens,
                  decode_tokens=None if compile_only else setting.decode_tokens,
                  threads=1 if compile_only else setting.effective_threads, iters=config.iters,
                  warmups=0 if compile_only else config.warmups)
    progress.start(f"{model.key} · {spec.label} · {base.setting}")
    started = time.monotonic()
    if model_error is not None:
        base.error = model_error
    else:
        job = Job(model_file=model_file, prompt_ids=[], decode_tokens=setting.decode_tokens,
                  iters=config.iters if compile_only else config.warmups + config.iters, warmups=config.warmups,
                  threads=None if compile_only else setting.threads, search=config.search, binaries=binaries)
        reason = spec.unavailable(job)  # before tokenizing: a path that cannot run here is skipped, not failed
        if reason:
            base.status, base.error = "skipped", reason
        elif compile_only:
            base = _measure(spec, job, base, config.timeout_s, config.warmups)
        else:
            try:
                ids = prompt_ids(model_file, config.prompt_text, setting.prompt_tokens, binaries, work)
                base = _measure(spec, replace(job, prompt_ids=ids), base, config.timeout_s, config.warmups)
            except PromptError as failure:
                base.error = f"prompt ids: {failure}"
    if base.wall_s is None:
        base.wall_s = round(time.monotonic() - started, 2)
    store.add_result(run_id, base)
    progress.end(base)
