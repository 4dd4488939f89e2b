"""python3 -m luminal_bench [--config NAME] | --report | --list  (scripts/bench.sh wraps it)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import config as configs
from . import report, runner
from .machine import REPO
from .paths import PATHS
from .store import Store


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench.sh", description=__doc__.split("(")[0].strip())
    parser.add_argument("--config", default="default", help="a name in benchmarks/suite/configs, or a file path")
    parser.add_argument("--report", action="store_true", help="write the HTML report from the database and exit")
    parser.add_argument("--list", action="store_true", help="list the configurations and exit")
    parser.add_argument("--markdown", metavar="CONFIG", help="print the newest run of CONFIG as a Markdown table")
    parser.add_argument("--db", type=Path, default=REPO / "build" / "bench" / "bench.db")
    parser.add_argument("--out", type=Path, help="report file (default: report.html beside the database)")
    parser.add_argument("--bin", type=Path, default=REPO / "build" / "release", help="build folder of our binaries")
    parser.add_argument("--work", type=Path, help="folder for prepared models (default: beside the database)")
    parser.add_argument("--require-ok", action="store_true", help="exit 1 unless every row of the run measured")
    parser.add_argument("--dry-run", action="store_true",
                        help="the configuration's code paths on the CPU: tiny random models, CPU twins of CUDA paths")
    parser.add_argument("--skip", action="append", default=[], metavar="PATH", help="leave a path out (repeatable)")
    parser.add_argument("--model", action="append", default=[], metavar="PATTERN",
                        help="only the models whose key matches (fnmatch, repeatable)")
    parser.add_argument("--threads", action="append", default=[], type=int, metavar="N",
                        help="only the settings with this thread count (repeatable)")
    parser.add_argument("--prompt-tokens", action="append", default=[], type=int, metavar="N",
                        help="only the settings with this prompt length (repeatable)")
    parser.add_argument("--rounds", type=int, help="processes per path and setting, run in turns (default: the config's)")
    parser.add_argument("--budget-s", type=float, help="wall-clock budget of the whole run; later rows are skipped")
    parser.add_argument("--build-marker", type=Path,
                        help="a file that exists once our binaries are built: paths of ours wait for it")
    parser.add_argument("--raw-log", type=Path, help="append every path's command and output to this file")
    args = parser.parse_args(argv)

    if args.list:
        for name in configs.available():
            print(f"{name:20} {configs.load(name).description}")
        return 0
    store = Store(args.db)
    try:
        if args.markdown:
            print(report.markdown(store, args.markdown))
            return 0
        if args.report:
            out = args.out or args.db.with_name("report.html")
            report.write(store, out)
            print(f"report: {out}")
            return 0
        try:
            config = configs.select(configs.load(args.config), args.model, args.threads, args.prompt_tokens,
                                    args.rounds)
        except configs.ConfigError as error:
            print(f"bench: {error}", file=sys.stderr)
            return 2
        unknown = sorted(set(args.skip) - set(PATHS))
        if unknown:
            print(f"bench: --skip names unknown paths {unknown}; known: {sorted(PATHS)}", file=sys.stderr)
            return 2
        if args.dry_run:
            config = configs.dry_run(config)
        config = configs.without_paths(config, set(args.skip))
        options = runner.Options(budget_s=args.budget_s, build_marker=args.build_marker, raw_log=args.raw_log)
        run_id = runner.run(config, store, args.bin.resolve(), (args.work or args.db.parent).resolve(), options)
        print(report.summary(store, run_id))
        rows = store.results(run_id)
        counts = {status: sum(r["status"] == status for r in rows) for status in ("ok", "failed", "skipped")}
        print(f"run {run_id} ({config.name}): {counts['ok']} measured, {counts['failed']} failed, "
              f"{counts['skipped']} skipped; stored in {args.db}")
        return 1 if args.require_ok and counts["ok"] != len(rows) else 0
    finally:
        store.close()


if __name__ == "__main__":
    sys.exit(main())
