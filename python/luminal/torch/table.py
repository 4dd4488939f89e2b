"""The one table of translations, aten op -> composition of luminal Tensor ops, and what a
translation sees: the node's arguments (luminal tensors, Python scalars, Exprs for symbolic
sizes, lists), its result type from the FX metadata, and helpers for PyTorch's dtype rules.

A translation returns a luminal Tensor (or a tuple/list of them, or a size); the
translator then casts it to the dtype PyTorch's metadata says the node has, so the result
dtype is PyTorch's by construction. Arithmetic on f16/bf16 runs in f32 and rounds once, as
PyTorch's CPU kernels do (their "opmath" type)."""
from __future__ import annotations

from typing import Callable

import torch

from .. import _luminal
from .._luminal import DType, Error, Expr, Tensor

TRANSLATIONS: dict[object, Callable] = {}

TORCH_TO_LUMINAL = {
    torch.float32: DType.f32, torch.float16: DType.f16, torch.bfloat16: DType.bf16, torch.int32: DType.i32,
    torch.int64: DType.i64, torch.uint8: DType.u8, torch.bool: DType.bool,
}
LUMINAL_TO_TORCH = {v: k for k, v in TORCH_TO_LUMINAL.items()}
HALF = (DType.f16, DType.bf16)
FLOATS = (DType.f32, DType.f16, DType.bf16)


def translates(*targets):
    """Registers a translation for one or more aten overloads (OpOverload objects)."""
    def register(fn):
        for target in targets:
            TRANSLATIONS[target] = fn
        return fn
    return register


def aten_ops(*names: str) -> list:
    """aten overloads by name ("add.Tensor"), skipping ones this torch does not have."""
    out = []
    for name in names:
        packet_name, _, overload = name.partition(".")
        packet = getattr(torch.ops.aten, packet_name, None)
        if packet is not None and hasattr(packet, overload or "default"):
            out.append(getattr(packet, overload or "default"))
    return out


def luminal_dtype(dtype: torch.dtype, where: str) -> DType:
    if dtype not in TORCH_TO_LUMINAL:
        supported = ", ".join(str(d).removeprefix("torch.") for d in TORCH_TO_LUMINAL)
        raise Error(f"{where}: dtype {dtype} is not supported (luminal computes in {supported})")
    return TORCH_TO_LUMINAL[dtype]


def opmath(dtype: DType) -> DType:
    """The dtype PyTorch computes an op of `dtype` in: f32 for 16-bit floats."""
    return DType.f32 if dtype in HALF else dtype


class Context:
    """What a translation needs besides its arguments."""

    def __init__(self, graph: _luminal.Graph, symbols, node: torch.fx.Node):
        self.graph = graph
        self.symbols = symbols
        self.node = node

    # ---- the node's result, from FX metadata ----
    def meta(self, index: int | None = None):
        val = self.node.meta.get("val")
        return val[index] if index is not None else val

    def out_dtype(self, index: int | None = None) -> DType:
        val = self.meta(index)
        if not isinstance(val, torch.Tensor):
            raise Error(f"{self.where()}: has no tensor metadata to take its dtype from")
        return luminal_dtype(val.dtype, self.where())

    def out_shape(self, index: int | None = None) -> list:
        return [self.symbols.size(d) for d in self.meta(index).shape]

    def where(self) -> str:
        return f"{self.node.target} (FX node '{self.node.name}')"

    # ---- operands ----
    def tensor(self, value, dtype: DType | None = None) -> Tensor:
        """A luminal tensor for a tensor, Python scalar or symbolic size, cast to dtype if given."""
        if isinstance(value, Tensor):
            return value if dtype is None or value.dtype == dtype else value.cast(dtype)
        if isinstance(value, Expr):
            t = self.graph.expr_scalar(value, DType.i64)
            return t if dtype is None else t.cast(dtype)
        if isinstance(value, bool):
            return self.graph.constant(float(value), dtype or DType.bool)
        if isinstance(value, int):
            return self.graph.constant(float(value), dtype or DType.i64)
        if isinstance(value, float):
            return self.graph.constant(value, dtype or DType.f32)
        raise Error(f"{self.where()}: cannot use {value!r} ({type(value).__name__}) as a tensor")

    def operand(self, value, dtype: DType):
        """A tensor cast to dtype, or a Python scalar kept a scalar (luminal makes it a
        constant of the other operand's dtype), as float when dtype is a float."""
        if isinstance(value, (Tensor, Expr)):
            return self.tensor(value, dtype)
        if isinstance(value, (bool, int, float)):
            return float(value) if dtype in FLOATS else int(value)
        raise Error(f"{self.where()}: cannot use {value!r} ({type(value).__name__}) as an operand")

    def compute_dtype(self, *values) -> DType:
        """PyTorch's promoted dtype of tensors and Python scalars (0-dim tensors count as
        scalars of their category, as in PyTorch)."""
        from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

        probes = []
        for v in values:
            if isinstance(v, Tensor):
                probes.append(torch.empty((1,) * v.ndim, dtype=LUMINAL_TO_TORCH[v.dtype]))
            else:
                probes.append(1 if isinstance(v, Expr) else v)
        _, result = elementwise_dtypes(*probes, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
        return luminal_dtype(result, self.where())

    def axis(self, dim: int, rank: int) -> int:
        return dim + rank if dim < 0 else dim

    def size_of(self, x: Tensor, dim: int):
        return x.shape[self.axis(dim, x.ndim)]


def is_static(size) -> bool:
    return isinstance(size, int)
