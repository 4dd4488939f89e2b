"""Graph and Compiled: the C++ classes with Python-friendly arguments (runtime by name,
inputs from anything numpy can read)."""
from __future__ import annotations

import numpy as np

from . import _luminal

Compiled = _luminal.Compiled


class Graph(_luminal.Graph):
    """Records a model: tensors, their ops, outputs. Nothing runs until compile()."""

    def compile(self, runtime: str = "cpu", *, search: int = 1, search_seconds: float = 0.0, seed: int = 0,
                threads: int = 0, verbosity: int = 0, dump_dir: str = "") -> "Compiled":
        """Saturates the e-graph with the runtime's rules, extracts (search > 1: profiles that many
        candidate programs and keeps the fastest) and loads the program. runtime: "cpu",
        "reference" (the interpreter every backend is checked against) or "cuda"."""
        return compile_graph(self, runtime, search=search, search_seconds=search_seconds, seed=seed,
                             threads=threads, verbosity=verbosity, dump_dir=dump_dir)


def compile_graph(graph: _luminal.Graph, runtime: str = "cpu", *, search: int = 1, search_seconds: float = 0.0,
                  seed: int = 0, threads: int = 0, verbosity: int = 0, dump_dir: str = "") -> "Compiled":
    if not isinstance(search, int) or search < 1:
        raise _luminal.Error(f"compile: search must be a positive number of candidates, got {search!r}")
    return graph._compile(runtime, threads, search, search_seconds, seed, verbosity, dump_dir)


def _as_array(values) -> np.ndarray:
    if isinstance(values, np.ndarray):
        return np.ascontiguousarray(values)
    if hasattr(values, "__dlpack__"):
        return values
    return np.ascontiguousarray(np.asarray(values))


_raw_set_data = _luminal.Compiled.set_data


def _set_data(self, tensor, values) -> bool:
    """Binds values to an input: a numpy array (or anything np.asarray reads, or a DLPack
    tensor). With the input's dtype and C-contiguous, the CPU runtime reads it in place (and a
    writable one of carried state it updates in place is written there); returns whether it does."""
    return _raw_set_data(self, tensor, _as_array(values))


_luminal.Compiled.set_data = _set_data
