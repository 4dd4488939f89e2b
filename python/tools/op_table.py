"""The README's table of the aten ops the torch front end translates, from the table itself,
headed by the share of PyTorch's core ATen overloads it covers: prints it, or with --write
README.md replaces the text between its markers."""
from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import core_aten_coverage  # noqa: E402

BEGIN, END = "<!-- aten-ops:begin -->", "<!-- aten-ops:end -->"
FAMILIES = {"ops_elementwise": "elementwise", "ops_reduce": "reductions, normalisation, products, attention",
            "ops_movement": "movement", "ops_indexing": "indexing, sorting, MoE", "ops_creation": "creation"}


def table() -> str:
    import luminal.torch.translate  # noqa: F401  (fills the table)
    from luminal.torch.ops_indexing import register_late_ops
    from luminal.torch.table import TRANSLATIONS

    try:  # transformers' MoE op is in the table once transformers has registered it
        import transformers.integrations.moe  # noqa: F401
    except ImportError:
        pass
    register_late_ops()
    by_family = collections.defaultdict(set)
    for target, fn in TRANSLATIONS.items():
        by_family[FAMILIES[fn.__module__.rsplit(".", 1)[-1]]].add(str(target))
    lines = [f"{len(TRANSLATIONS)} overloads, covering {core_aten_coverage.summary()} "
             "(`python python/tools/core_aten_coverage.py` lists the rest by family):", "",
             "| family | aten overloads |", "| --- | --- |"]
    for family in FAMILIES.values():
        ops = sorted(by_family[family])
        lines.append(f"| {family} ({len(ops)}) | {', '.join(f'`{o}`' for o in ops)} |")
    return "\n".join(lines)


def replaced(text: str, body: str) -> str:
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:start] + "\n" + body + "\n" + text[end:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", type=Path, help="a Markdown file with the two markers")
    args = parser.parse_args()
    body = table()
    if args.write:
        args.write.write_text(replaced(args.write.read_text(), body))
    else:
        print(body)


if __name__ == "__main__":
    main()
