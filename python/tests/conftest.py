"""Shared pytest setup: exact float32 products in eager (the oracle), dynamo errors raised
rather than hidden, and the per-op pass counts of the OpInfo suite printed at the end."""
from __future__ import annotations

import collections
import os
import sys

OP_COUNTS: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)


def pytest_configure(config):
    try:
        import torch
    except ImportError:
        return
    torch.set_float32_matmul_precision("highest")
    torch._dynamo.config.suppress_errors = False


def pytest_runtest_logreport(report):
    if report.when != "call" and not (report.when == "setup" and report.skipped):
        return
    if "test_opinfo.py" not in report.nodeid or "[" not in report.nodeid:
        return
    op = report.nodeid.split("[", 1)[1].split("-", 1)[0]
    outcome = "xfail" if hasattr(report, "wasxfail") else report.outcome
    OP_COUNTS[op][outcome] += 1


def pytest_terminal_summary(terminalreporter):
    if not OP_COUNTS:
        return
    write = terminalreporter.write_line
    write("OpInfo samples per op through torch.compile(backend='luminal') vs eager (passed / xfail / failed):")
    totals = collections.Counter()
    for op in sorted(OP_COUNTS):
        c = OP_COUNTS[op]
        totals.update(c)
        write(f"  {op}: {c['passed']} passed, {c['xfail']} xfail, {c['failed']} failed")
    write(f"OpInfo total over {len(OP_COUNTS)} ops: {totals['passed']} passed, {totals['xfail']} xfail, "
          f"{totals['failed']} failed")


REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.dirname(__file__))
