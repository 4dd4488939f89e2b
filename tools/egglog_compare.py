#!/usr/bin/env python3
"""Side by side: luminal's e-graph against egglog on the same rules and terms.

Runs the C++ driver (benchmarks/bench_egraph_arith), which saturates each
workload with the rules of tests/egraph/arith_language.hpp and prints one line
per workload (fixpoint sizes, median wall time of saturate() alone, and the
input term as an egglog s-expression). Then it builds the same term in egglog
(the `egglog` package on PyPI; its engine is Rust), runs the same rules to
saturation, and prints both fixpoint sizes and the time ratio. Exits non-zero
if any fixpoint size differs (or a side fails to saturate).

    pip install egglog
    cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release
    cmake --build build/release --target bench_egraph_arith
    python3 tools/egglog_compare.py [--driver PATH] [--rounds R] [--reps N] [--only NAME] [--build]

Rules (written once per side, matched one to one):
    add-commutes    (Add a b)         -> (Add b a)
    mul-commutes    (Mul a b)         -> (Mul b a)
    add-associates  (Add a (Add b c)) -> (Add (Add a b) c)
    mul-associates  (Mul a (Mul b c)) -> (Mul (Mul a b) c)
    mul-by-one      (Mul x (Num 1))   -> x
    add-self        (Add x x)         -> (Mul x (Num 2))
    add-folds       (Add (Num a) (Num b)) -> (Num (+ a b))
    mul-folds       (Mul (Num a) (Num b)) -> (Num (* a b))
The "ac" set is the first + rules only (arith::AcRules); "classic" is all eight
(arith::ClassicRules). Variables are (Var i64) with the C++ variable index.

How sizes are counted (like with like: the sort Math, after rebuilding):
  luminal  classes = EGraph::num_classes(): union-find roots, i.e. canonical
           e-classes (every class holds a Num/Var/Add/Mul node; there is no
           other sort). nodes = EGraph::num_nodes(): live e-nodes, i.e.
           distinct canonical e-nodes; a node that became a duplicate of
           another after a merge is dropped ("dead") by rebuild and not counted.
  egglog   nodes = the number of rows in the tables of the four Math
           constructors Num, Var, Add, Mul (after (saturate), which ends on a
           rebuild, each table holds one row per distinct canonical e-node; the
           global holding the input term and the i64 primitive values are not
           counted: primitives are not e-classes and are not stored as rows).
           classes = the number of distinct output ids over those rows (every
           Math e-class has at least one constructor row).

Timing: each rep builds a fresh e-graph and the input term, untimed, then
times saturation alone. A workload is measured in rounds; in each round the
driver runs N reps, then egglog runs N reps, and the round's ratio is egglog's
fastest rep over luminal's fastest. The table shows the median over rounds of
those ratios and of each side's fastest rep. Pairing reps that ran seconds
apart, and taking the fastest of a few, keeps bursts of load on a shared
machine from landing on one side only (a ratio of medians taken minutes apart
swung by 2x between runs on a noisy 2-core VM). The driver saturates
untimed for 20 ms (at least once) before its timed reps, as egglog's process
is warm (it has just run the same workload), and keeps the
memory it frees in its heap (glibc would return it to the kernel after each
rep, and the next rep would fault its pages in again; egglog's reps in this
long-lived Python process reuse theirs). The driver is single-threaded and
runs pinned to one CPU: unpinned, the scheduler now and then moves a
sub-millisecond run to the other core, whose caches are cold (on a 2-core VM
classic_mixed took 0.25 ms in one process and 0.35-0.41 ms in the next).
egglog is left free to use every core (it runs some work on a thread pool).
luminal:
steady_clock around saturate() in the driver; by default
its backoff scheduler is off (egglog's saturate has none), so both run every
rule every iteration until nothing changes. egglog: time.perf_counter()
around EGraph.run_program(<pre-parsed (run-schedule (saturate (run R)))>), so
the Python-to-Rust call (microseconds) is included but parsing is not. CPU
time of the egglog process is shown as well (egglog may use threads). egglog
has a fixed cost per run (rule setup and the like, well under a millisecond);
it is printed below the table (saturating the one-node term (Num 0)), since it
dominates the ratio on the tiny classic_poly* terms.

iters: iterations including the last one that finds nothing to do; egglog's
run report lists only the iterations that changed the e-graph, so its count
here is that plus one. The counts differ: egglog searches every rule before
applying any, while luminal's runner runs the rules in turn (each searches
what the rules before it left), which reaches the same fixpoint sooner.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DRIVER = REPO / "build" / "release" / "benchmarks" / "bench_egraph_arith"

DECLS = """
(datatype Math (Num i64) (Var i64) (Add Math Math) (Mul Math Math))
(ruleset ac)
(ruleset classic)
"""
RULES = {
    "ac": [
        "(rewrite (Add a b) (Add b a) :ruleset {rs})",
        "(rewrite (Add a (Add b c)) (Add (Add a b) c) :ruleset {rs})",
    ],
    "classic": [
        "(rewrite (Add a b) (Add b a) :ruleset {rs})",
        "(rewrite (Mul a b) (Mul b a) :ruleset {rs})",
        "(rewrite (Add a (Add b c)) (Add (Add a b) c) :ruleset {rs})",
        "(rewrite (Mul a (Mul b c)) (Mul (Mul a b) c) :ruleset {rs})",
        "(rewrite (Mul x (Num 1)) x :ruleset {rs})",
        "(rewrite (Add x x) (Mul x (Num 2)) :ruleset {rs})",
        "(rewrite (Add (Num a) (Num b)) (Num (+ a b)) :ruleset {rs})",
        "(rewrite (Mul (Num a) (Num b)) (Num (* a b)) :ruleset {rs})",
    ],
}
CONSTRUCTORS = ("Num", "Var", "Add", "Mul")


def egglog_setup(rules: str, term: str) -> str:
    body = "\n".join(r.format(rs=rules) for r in RULES[rules])
    return f"{DECLS}\n{body}\n(let $root {term})\n"


def egglog_sizes(egraph) -> tuple[int, int]:
    frozen = egraph.freeze()
    nodes = 0
    classes = set()
    for name in CONSTRUCTORS:
        for row in frozen.functions[name].rows:
            if row.subsumed:
                continue
            nodes += 1
            classes.add(row.output)
    return len(classes), nodes


def run_egglog(rules: str, term: str, reps: int) -> dict:
    from egglog.bindings import EGraph

    setup = egglog_setup(rules, term)
    wall, cpu = [], []
    sizes = None
    iterations = None
    for _ in range(reps):
        g = EGraph()
        g.run_program(*g.parse_program(setup))
        cmd = g.parse_program(f"(run-schedule (saturate (run {rules})))")
        c0, t0 = time.process_time(), time.perf_counter()
        out = g.run_program(*cmd)
        t1, c1 = time.perf_counter(), time.process_time()
        wall.append((t1 - t0) * 1e3)
        cpu.append((c1 - c0) * 1e3)
        if sizes is None:
            sizes = egglog_sizes(g)
            try:  # egglog reports the iterations that changed the e-graph, not the final check
                iterations = len(out[0].report.iterations) + 1
            except AttributeError:
                iterations = None
        del g
    return {
        "classes": sizes[0],
        "nodes": sizes[1],
        "iterations": iterations,
        "median_ms": statistics.median(wall),
        "min_ms": min(wall),
        "cpu_ms": statistics.median(cpu),
    }


LINE = re.compile(r"^workload=")


def parse_driver(output: str) -> list[dict]:
    rows = []
    for line in output.splitlines():
        if not LINE.match(line):
            continue
        head, _, term = line.partition(" term=")
        fields = dict(kv.split("=", 1) for kv in head.split())
        fields["term"] = term.strip()
        for key in ("n", "classes", "nodes", "iterations", "reps"):
            fields[key] = int(fields[key])
        for key in ("median_ms", "min_ms"):
            fields[key] = float(fields[key])
        rows.append(fields)
    return rows


def build_driver(driver: Path) -> None:
    build_dir = driver.parent.parent
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    subprocess.run(["cmake", "-S", str(REPO), "-B", str(build_dir), *gen, "-DCMAKE_BUILD_TYPE=Release"], check=True)
    jobs = str(os.cpu_count() or 2)
    subprocess.run(["cmake", "--build", str(build_dir), "--target", "bench_egraph_arith", "-j", jobs], check=True)


def pin_to_one_cpu() -> None:
    """Keeps the (single-threaded) driver on one CPU; see Timing above."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--driver", type=Path, default=DEFAULT_DRIVER, help=f"C++ driver (default {DEFAULT_DRIVER})")
    ap.add_argument("--rounds", type=int, default=7, help="rounds per workload (median over rounds reported)")
    ap.add_argument("--reps", type=int, default=5, help="reps per round and side (the fastest counts)")
    ap.add_argument("--only", default="", help="one workload, e.g. ac_sum or ac_sum8 or classic_poly1")
    ap.add_argument("--build", action="store_true", help="configure and build the driver if it is missing")
    ap.add_argument("--target", type=float, default=10.0, help="speed-up to flag (egglog/luminal), default 10")
    ap.add_argument("--backoff", action="store_true", help="luminal with its default backoff scheduler")
    args = ap.parse_args()

    if importlib.util.find_spec("egglog") is None:
        print("egglog is not installed: pip install egglog", file=sys.stderr)
        return 2
    driver = args.driver
    if not driver.exists():
        if not args.build:
            print(f"driver {driver} not found: build it (cmake --build <dir> --target bench_egraph_arith), "
                  "pass --driver, or use --build", file=sys.stderr)
            return 2
        build_driver(driver)

    def run_driver(only: str, reps: int) -> tuple[list[dict], int]:
        cmd = [str(driver), "--reps", str(reps)] + (["--only", only] if only else [])
        if args.backoff:
            cmd.append("--backoff")
        proc = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=pin_to_one_cpu)
        sys.stderr.write(proc.stderr)
        return parse_driver(proc.stdout), proc.returncode

    rows, code = run_driver(args.only, 1)
    if not rows:
        print(f"no workloads from {driver} (exit {code})", file=sys.stderr)
        return 2
    status = 0 if code == 0 else 1

    header = (f"{'workload':<16} {'classes lum/egg':>17} {'nodes lum/egg':>17} {'iters':>7} "
              f"{'luminal ms':>11} {'egglog ms':>10} {'egglog cpu':>10} {'egg/lum':>8}")
    print(f"median over {args.rounds} rounds of the fastest of {args.reps} reps per side; time = saturation only; "
          f"luminal scheduler: {'backoff (default Limits)' if args.backoff else 'none (every rule, every iteration)'}")
    print(header)
    print("-" * len(header))
    slow = []
    for row in rows:
        label = row["workload"] + (str(row["n"]) if row["n"] else "")
        lum_ms, egg_ms, ratios, cpu_ms = [], [], [], []
        for _ in range(args.rounds):
            own = [r for r in run_driver(label, args.reps)[0] if r["term"] == row["term"]]
            egg = run_egglog(row["rules"], row["term"], args.reps)
            lum_ms.append(own[0]["min_ms"] if own else float("nan"))
            egg_ms.append(egg["min_ms"])
            cpu_ms.append(egg["cpu_ms"])
            ratios.append(egg["min_ms"] / lum_ms[-1] if lum_ms[-1] > 0 else float("inf"))
        row["median_ms"] = statistics.median(lum_ms)
        egg["median_ms"], egg["cpu_ms"] = statistics.median(egg_ms), statistics.median(cpu_ms)
        same = row["classes"] == egg["classes"] and row["nodes"] == egg["nodes"]
        ratio = statistics.median(ratios)
        mark = "" if same else "  FIXPOINT MISMATCH"
        if row["stop"] != "saturated":
            mark += f"  luminal stopped: {row['stop']}"
        if same and row["stop"] == "saturated" and ratio < args.target:
            mark += f"  (< {args.target:g}x)"
            slow.append(label)
        iters = f"{row['iterations']}/{egg['iterations'] if egg['iterations'] is not None else '?'}"
        print(f"{label:<16} {row['classes']:>8}/{egg['classes']:<8} {row['nodes']:>8}/{egg['nodes']:<8} {iters:>7} "
              f"{row['median_ms']:>11.3f} {egg['median_ms']:>10.3f} {egg['cpu_ms']:>10.3f} {ratio:>7.1f}x{mark}",
              flush=True)
        if not same or row["stop"] != "saturated":
            status = 1
    for rules in sorted({row["rules"] for row in rows}):
        fixed = run_egglog(rules, "(Num 0)", args.rounds * args.reps)
        print(f"egglog fixed cost per run ({rules} rules, term (Num 0)): {fixed['median_ms']:.3f} ms")
    if slow:
        print(f"below the {args.target:g}x target: {', '.join(slow)}")
    if status:
        print("FAIL: fixpoint sizes differ or a run did not saturate", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
