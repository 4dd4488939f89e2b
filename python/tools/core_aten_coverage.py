"""How much of PyTorch's core ATen op set (the torch.ops.aten overloads tagged
torch.Tag.core, what torch.export's decompositions lower to) the torch front end
translates: prints the covered fraction and the overloads left, by family.

    python python/tools/core_aten_coverage.py
"""
from __future__ import annotations

import argparse
import collections

# The families of the core overloads the front end does not translate, by name: the first
# pattern that occurs in an overload's name decides.
FAMILIES = (
    ("backward", "training (backward)"), ("dropout", "training (backward)"),
    ("rand", "random numbers"), ("fft", "complex / FFT"),
    ("pool", "pooling"), ("upsample", "image resampling and folding"),
    ("grid_sampler", "image resampling and folding"), ("col2im", "image resampling and folding"),
    ("nonzero", "data-dependent sizes"), ("_local_scalar_dense", "data-dependent sizes"),
    ("masked_scatter", "data-dependent sizes"),
    ("as_strided", "strided memory, resizing"), ("resize_", "strided memory, resizing"),
    ("dist", "distances"), ("embedding_bag", "embedding bags"),
    ("batch_norm", "batch and group normalisation"), ("group_norm", "batch and group normalisation"),
    ("scatter_reduce", "scatter with a reduction"), (".out", "out= variants"),
)


def core_overloads() -> list:
    import torch

    # Every registered operator (torch.ops.aten lists only the packets already looked up).
    out = []
    for qualified in torch._C._dispatch_get_all_op_names():
        namespace, _, name = qualified.partition("::")
        if namespace != "aten":
            continue
        packet, _, overload = name.partition(".")
        op = getattr(getattr(torch.ops.aten, packet), overload or "default")
        if torch.Tag.core in op.tags:
            out.append(op)
    return sorted(out, key=str)


def is_translated(op) -> bool:
    """Whether the translator handles a node of `op`: a translation in the table, or an
    integer or bool it reads from the node's metadata (sym_size and kin)."""
    from luminal.torch.ops_indexing import register_late_ops
    from luminal.torch.table import TRANSLATIONS
    from luminal.torch.translate import _IGNORED

    register_late_ops()
    if op in TRANSLATIONS or op._schema.name.split("::")[-1] in _IGNORED:
        return True
    returns = op._schema.returns
    return len(returns) == 1 and str(returns[0].type) in ("int", "SymInt", "bool", "SymBool")


def family(name: str) -> str:
    return next((label for pattern, label in FAMILIES if pattern in name), "other")


def coverage() -> tuple[int, int, dict[str, list[str]]]:
    """(translated, core overloads, the overloads left by family)."""
    ops = core_overloads()
    missing = collections.defaultdict(list)
    for op in ops:
        if not is_translated(op):
            name = str(op).removeprefix("aten.")
            missing[family(name)].append(name)
    covered = len(ops) - sum(len(v) for v in missing.values())
    return covered, len(ops), dict(missing)


def summary() -> str:
    covered, total, _ = coverage()
    return f"{covered} of {total} core ATen overloads ({100 * covered / total:.0f}%)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    covered, total, missing = coverage()
    print(f"{covered} of {total} core ATen overloads translated ({100 * covered / total:.1f}%)")
    for label, names in sorted(missing.items(), key=lambda kv: -len(kv[1])):
        print(f"- {label} ({len(names)}): {', '.join(sorted(names))}")


if __name__ == "__main__":
    main()
