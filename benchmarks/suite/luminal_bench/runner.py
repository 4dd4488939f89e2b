"""Runs a configuration: every model x setting x path in its own process, one progress line
each, every outcome (measured, failed or skipped) stored as a row.

Options of a run (Options): a time budget for the whole run (a row that would start after
it is skipped, and each path's timeout is cut to what is left, so a device call ends with
its summary); a build marker file (where our binaries build while the peers run: before a path of ours the runner waits for the file, and a row measured
while the build still ran says so in its raw fields); a raw log of every path's command
and output. With `bandwidth_gib`, a copy kernel measures the device's bandwidth first, and
every row of a model whose weights the suite can size carries the decode floor (bytes one
step reads / bandwidth) in its raw fields.

With `rounds` above 1, each model x setting runs its paths in turns, one process per path
per round (ours, peer, ours, peer, ...), and each path's row pools the samples of its
rounds (merge_rounds). A model with an `rss_over_file_and_kv` bound gets, in each row's
raw fields, the bytes its peak RSS is set against (models.memory_fields)."""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from . import process, stats
from .config import Config, Model, Setting
from .machine import cuda_gpus, git_info, machine_info
from .models import ModelError, decode_bytes, memory_fields, prepare
from .paths import COMPILE_ONLY, PATHS, SUITE_DIR, Job, PathSpec
from .prompt import PromptError, prompt_ids, seeded_ids
from .store import Result, Store
from .workers.measure import context_tokens


@dataclass
class Options:
    budget_s: float | None = None      # the whole run's wall-clock budget
    build_marker: Path | None = None   # exists once our binaries' build has ended
    raw_log: Path | None = None        # every path's command, stdout and stderr appended here
    started: float = 0.0               # time.monotonic() at the run's start

    def left_s(self) -> float | None:
        return None if self.budget_s is None else self.budget_s - (time.monotonic() - self.started)

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


def _suite_env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(SUITE_DIR), os.environ.get("PYTHONPATH")])))


def _log_raw(raw_log: Path | None, title: str, command: list[str], outcome: process.Outcome) -> None:
    if raw_log is None:
        return
    with raw_log.open("a") as log:
        log.write(f"===== {title}\n$ {' '.join(command)}\nexit {outcome.returncode}, {outcome.wall_s:.1f} s"
                  f"{', timed out' if outcome.timed_out else ''}\n--- stdout\n{outcome.stdout}\n"
                  f"--- stderr\n{outcome.stderr}\n")


def _measure(spec: PathSpec, job: Job, base: Result, timeout_s: float, warmups: int,
             raw_log: Path | None = None) -> Result:
    reason = spec.unavailable(job)
    if reason:
        base.status, base.error = "skipped", reason
        return base
    env = _suite_env()
    threads = str(job.threads or 1)
    env.update(OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
    command = spec.command(job)
    try:
        outcome = process.run(command, timeout_s, env)
    except OSError as error:
        base.status, base.error = "failed", f"could not start: {error}"
        return base
    _log_raw(raw_log, f"{base.model} · {spec.name} · {base.setting}", command, outcome)
    base.wall_s, base.peak_rss_mib = round(outcome.wall_s, 2), round(outcome.peak_rss_mib, 1)
    if outcome.timed_out:
        base.status, base.error = "failed", f"timed out after {timeout_s:.0f} s"
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
    """Processes the run starts (one per round of a timed path)."""
    return sum(1 if path in COMPILE_ONLY else len(config.settings) * config.rounds
               for m in config.models for path in m.paths)


def merge_rounds(rounds: list[Result]) -> Result:
    """A path's row from its rounds (one Result each): the first round that did not
    measure, else the first round with every round's samples pooled and the statistics
    recomputed, the highest peak RSS, the summed wall time, and each round's own samples,
    peak RSS and greedy ids in raw["rounds"]."""
    if len(rounds) == 1:
        return rounds[0]
    for index, result in enumerate(rounds):
        if result.status != "ok":
            result.error = f"round {index + 1} of {len(rounds)}: {result.error}"
            return result
    row = replace(rounds[0], raw=dict(rounds[0].raw))
    row.ttft_ms_samples = [x for r in rounds for x in r.ttft_ms_samples]
    row.tpot_ms_samples = [x for r in rounds for x in r.tpot_ms_samples]
    row.ttft_ms, row.tpot_ms = stats.median(row.ttft_ms_samples), stats.median(row.tpot_ms_samples)
    row.throughput_tps = 1000.0 / row.tpot_ms
    row.iters = sum(r.iters for r in rounds)
    for key in ("compile_ms", "load_ms"):
        setattr(row, key, stats.median([getattr(r, key) for r in rounds if getattr(r, key) is not None]))
    row.peak_rss_mib = max(r.peak_rss_mib for r in rounds)
    row.wall_s = round(sum(r.wall_s for r in rounds), 2)
    row.raw["rounds"] = [{"ttft_ms_samples": r.ttft_ms_samples, "tpot_ms_samples": r.tpot_ms_samples,
                          "peak_rss_mib": r.peak_rss_mib, "wall_s": r.wall_s, "generated_ids": r.generated_ids}
                         for r in rounds]
    return row


def _uses_cuda(model: Model) -> bool:
    return any(path.endswith("-cuda") for path in model.paths)


def measure_bandwidth(config: Config, options: Options) -> dict:
    """The copy worker's BANDWIDTH_RESULT on the GPU when a CUDA path is configured and
    there is a GPU, else on the CPU; {"error": reason} when it did not measure."""
    device = "cuda" if any(_uses_cuda(m) for m in config.models) and cuda_gpus() else "cpu"
    command = [sys.executable, "-m", "luminal_bench.workers.copy_bandwidth", "--device", device,
               "--gib", str(config.bandwidth_gib)]
    try:
        outcome = process.run(command, 300, _suite_env())
    except OSError as error:
        return {"error": f"could not start: {error}"}
    _log_raw(options.raw_log, "copy bandwidth", command, outcome)
    for line in outcome.stdout.splitlines():
        if line.startswith("BANDWIDTH_RESULT ") and outcome.returncode == 0:
            return json.loads(line.split(" ", 1)[1])
    return {"error": f"exit code {outcome.returncode}: {outcome.tail(3)}"}


def floor_fields(model_file: Path | None, bandwidth: dict | None) -> dict:
    """What a row records about the decode floor of its model (empty when unknown)."""
    sizes = decode_bytes(model_file) if model_file is not None else None
    if not sizes:
        return {}
    fields = dict(sizes)
    if bandwidth and "bandwidth_gbs" in bandwidth:
        fields.update(bandwidth_gbs=bandwidth["bandwidth_gbs"], bandwidth_device=bandwidth.get("name"),
                      floor_ms=sizes["decode_bytes"] / (bandwidth["bandwidth_gbs"] * 1e9) * 1e3)
    return fields


def run(config: Config, store: Store, binaries: Path, work: Path, options: Options | None = None) -> int:
    options = options or Options()
    options.started = time.monotonic()
    run_id = store.begin_run(config.name, git_info(), machine_info())
    progress = Progress(count_jobs(config))
    bandwidth = None
    if config.bandwidth_gib > 0:
        bandwidth = measure_bandwidth(config, options)
        if "error" in bandwidth:
            print(f"copy bandwidth: FAILED ({bandwidth['error']})", file=sys.stderr, flush=True)
        else:
            print(f"copy bandwidth ({bandwidth['name']}, {bandwidth['buffer_bytes'] / 2**30:.1f} GiB buffer): "
                  f"{bandwidth['bandwidth_gbs']:.0f} GB/s, median of {len(bandwidth['copy_ms_samples'])} copies",
                  file=sys.stderr, flush=True)
    for model in config.models:
        model_file, model_error = None, None
        left = options.left_s()
        if left is not None and left <= 0:
            model_error = f"not prepared: the run's budget of {options.budget_s:.0f} s was spent"
        else:
            try:
                model_file = prepare(model, work, binaries, "cuda" if _uses_cuda(model) and cuda_gpus() else "cpu",
                                     1800 if left is None else left)
            except ModelError as error:
                model_error = f"model not prepared: {error}"
        floor = floor_fields(model_file, bandwidth)

        def attempt(spec: PathSpec, setting: Setting, round_label: str = "") -> Result:
            return _run_one(config, progress, model, model_file, model_error, spec, setting, binaries, work,
                            options, floor, round_label)

        for path in model.paths:
            if path in COMPILE_ONLY:
                store.add_result(run_id, attempt(PATHS[path], config.settings[0]))
        timed = [PATHS[path] for path in model.paths if path not in COMPILE_ONLY]
        for setting in config.settings:
            attempts: dict[str, list[Result]] = {spec.name: [] for spec in timed}
            for round_index in range(config.rounds):
                label = f" · round {round_index + 1}/{config.rounds}" if config.rounds > 1 else ""
                for spec in timed:
                    done = attempts[spec.name]
                    if not done or done[-1].status == "ok":  # a path that failed once is not run again
                        done.append(attempt(spec, setting, label))
                    if round_index == config.rounds - 1:
                        store.add_result(run_id, merge_rounds(done))
        if model_file is not None and model.options.get("delete_after"):
            shutil.rmtree(model_file, ignore_errors=True)  # a 16 GB file need not outlive its rows
    store.finish_run(run_id)
    return run_id


def _wait_for_build(options: Options) -> None:
    """Until the build marker exists or the budget ends."""
    while options.build_marker is not None and not options.build_marker.exists():
        left = options.left_s()
        if left is not None and left <= 0:
            return
        time.sleep(1)


def _run_one(config: Config, progress: Progress, model: Model, model_file: Path | None, model_error: str | None,
             spec: PathSpec, setting: Setting, binaries: Path, work: Path, options: Options, floor: dict,
             round_label: str = "") -> Result:
    """One process of a path (one round of it), as a row not yet stored."""
    compile_only = spec.name in COMPILE_ONLY
    base = Result(model=model.key, model_title=model.title, path=spec.name,
                  setting="compile only" if compile_only else setting.label, status="failed",
                  prompt_tokens=None if compile_only else setting.prompt_tokens,
                  decode_tokens=None if compile_only else setting.decode_tokens,
                  threads=1 if compile_only else setting.effective_threads, iters=config.iters,
                  warmups=0 if compile_only else config.warmups)
    progress.start(f"{model.key} · {spec.label} · {base.setting}{round_label}")
    if spec.ours:
        _wait_for_build(options)
    started = time.monotonic()
    left = options.left_s()
    timeout_s = model.timeout_s(spec.name, config.timeout_s)
    if left is not None:
        timeout_s = min(timeout_s, left)
    if model_error is not None:
        base.error = model_error
    elif timeout_s <= 0:
        base.status, base.error = "skipped", f"the run's budget of {options.budget_s:.0f} s was spent"
    else:
        job = Job(model_file=model_file, prompt_ids=[], decode_tokens=setting.decode_tokens,
                  iters=config.iters if compile_only else config.warmups + config.iters, warmups=config.warmups,
                  threads=None if compile_only else setting.threads, search=config.search, binaries=binaries,
                  dtype=model.dtype, compile_mode=model.options.get("compile_mode", "default"))
        building = options.build_marker is not None and not options.build_marker.exists()
        reason = spec.unavailable(job)  # before tokenizing: a path that cannot run here is skipped, not failed
        if reason:
            base.status, base.error = "skipped", reason
        elif compile_only:
            base = _measure(spec, job, base, timeout_s, config.warmups, options.raw_log)
        else:
            try:
                if model.options.get("prompt") == "seeded":
                    ids = seeded_ids(model_file, setting.prompt_tokens, model.options.get("seed", 0))
                else:
                    ids = prompt_ids(model_file, config.prompt_text, setting.prompt_tokens, binaries, work)
                base = _measure(spec, replace(job, prompt_ids=ids), base, timeout_s, config.warmups,
                                options.raw_log)
            except PromptError as failure:
                base.error = f"prompt ids: {failure}"
        if base.status == "ok":
            base.raw.update(floor)
            bounds = model.options.get("bounds", {})
            if bounds:
                base.raw["bounds"] = bounds
                if "rss_over_file_and_kv" in bounds and not compile_only:
                    context = context_tokens(setting.prompt_tokens, setting.decode_tokens)
                    base.raw.update(memory_fields(model_file, context, base.raw.get("kv_dtype")))
            if building:
                base.raw["measured_during_our_build"] = True
    if base.wall_s is None:
        base.wall_s = round(time.monotonic() - started, 2)
    progress.end(base)
    return base
