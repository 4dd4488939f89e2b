"""python3 -m luminal_bench [--config NAME] | --report | --list  (scripts/bench.sh wraps it)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import config as configs
from . import report, runner
from .machine import REPO
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
            config = configs.load(args.config)
        except configs.ConfigError as error:
            print(f"bench: {error}", file=sys.stderr)
            return 2
        run_id = runner.run(config, store, args.bin.resolve(), (args.work or args.db.parent).resolve())
        rows = store.results(run_id)
        counts = {status: sum(r["status"] == status for r in rows) for status in ("ok", "failed", "skipped")}
        print(f"run {run_id} ({config.name}): {counts['ok']} measured, {counts['failed']} failed, "
              f"{counts['skipped']} skipped; stored in {args.db}")
        return 1 if args.require_ok and counts["ok"] != len(rows) else 0
    finally:
        store.close()


if __name__ == "__main__":
    sys.exit(main())
