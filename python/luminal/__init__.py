"""luminal: a header-only C++20 inference compiler, from Python.

    import luminal
    g = luminal.Graph()
    a = g.tensor([3, 1]); b = g.tensor([1, 4])
    c = a.matmul(b).output()
    rt = g.compile("cpu")
    rt.set_data(a, [1, 2, 3]); rt.set_data(b, [1, 2, 3, 3])
    rt.execute()
    rt.get(c)

The torch front end lives in luminal.torch (imported only when torch is
present, so `import luminal` never imports torch); generation in luminal.LLM.
"""
from __future__ import annotations

import importlib.util as _importlib_util
import sys as _sys

from . import _luminal  # noqa: F401  (luminal._luminal, the native module)
from ._luminal import DType, Error, Expr, Tensor, cat, stack, where
from .graph import Compiled, Graph, compile_graph
from .llm import LLM

f32, f16, bf16, i32, i64, u8 = DType.f32, DType.f16, DType.bf16, DType.i32, DType.i64, DType.u8
bool_ = DType.bool

__all__ = ["DType", "Error", "Expr", "Tensor", "Graph", "Compiled", "LLM", "cat", "stack", "where", "compile_graph",
           "f32", "f16", "bf16", "i32", "i64", "u8", "bool_"]


def _register_with_torch_if_loaded() -> None:
    """torch.compile(backend="luminal") right after `import luminal`, when torch is already
    imported; otherwise the torch_dynamo_backends entry point finds it without the import."""
    if "torch" in _sys.modules and _importlib_util.find_spec("torch") is not None:
        from .torch import backend as _backend  # noqa: F401  (registers the name)


_register_with_torch_if_loaded()
