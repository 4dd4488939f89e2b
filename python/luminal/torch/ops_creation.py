"""Creation aten ops: constants, filled tensors, ranges. Uninitialised memory (empty) reads
as zeros, so results never depend on garbage."""
from __future__ import annotations

from .._luminal import DType, Error, Expr
from .table import Context, aten_ops, translates


def _filled(cx: Context, value, shape, index=None):
    dtype = cx.out_dtype(index)
    return cx.tensor(value, dtype).expand(list(shape)) if len(shape) else cx.tensor(value, dtype)


@translates(*aten_ops("full.default"))
def full(cx, size, fill_value, **kwargs):
    return _filled(cx, fill_value, size)


@translates(*aten_ops("full_like.default"))
def full_like(cx, x, fill_value, **kwargs):
    return _filled(cx, fill_value, x.shape)


@translates(*aten_ops("fill.Scalar", "fill.Tensor"))
def fill(cx, x, value):
    return _filled(cx, value, x.shape)


@translates(*aten_ops("zeros.default", "empty.memory_format", "new_zeros.default", "new_empty.default",
                      "empty_strided.default"))
def zeros(cx, *args, **kwargs):
    return _filled(cx, 0, cx.out_shape())


@translates(*aten_ops("ones.default", "new_ones.default"))
def ones(cx, *args, **kwargs):
    return _filled(cx, 1, cx.out_shape())


@translates(*aten_ops("new_full.default"))
def new_full(cx, x, size, fill_value, **kwargs):
    return _filled(cx, fill_value, size)


@translates(*aten_ops("zeros_like.default", "empty_like.default"))
def zeros_like(cx, x, **kwargs):
    return _filled(cx, 0, x.shape)


@translates(*aten_ops("ones_like.default"))
def ones_like(cx, x, **kwargs):
    return _filled(cx, 1, x.shape)


@translates(*aten_ops("empty_permuted.default"))
def empty_permuted(cx, size, physical_layout, **kwargs):
    return _filled(cx, 0, size)


@translates(*aten_ops("scalar_tensor.default"))
def scalar_tensor(cx, value, **kwargs):
    return cx.tensor(value, cx.out_dtype())


@translates(*aten_ops("arange.default", "arange.start", "arange.start_step"))
def arange(cx, *args, **kwargs):
    numbers = [a for a in args if not isinstance(a, (DType,)) and a is not None]
    if len(numbers) == 1:
        start, end, step = 0, numbers[0], 1
    elif len(numbers) == 2:
        (start, end), step = numbers, 1
    else:
        start, end, step = numbers[:3]
    dtype = cx.out_dtype()
    count = cx.out_shape()[0]
    symbolic = any(isinstance(v, Expr) for v in (start, end, step))
    if symbolic:
        if not isinstance(step, int):
            raise Error(f"{cx.where()}: a symbolic range needs an integral step")
        return cx.graph.iota(Expr.index() * step + start, [count], DType.i64).cast(dtype)
    if all(isinstance(v, int) for v in (start, end, step)):
        return cx.graph.iota(Expr.index() * step + start, [count], DType.i64).cast(dtype)
    positions = cx.graph.iota(Expr.index(), [count], DType.i64).cast(DType.f32)
    return (positions * float(step) + float(start)).cast(dtype)


@translates(*aten_ops("linspace.default"))
def linspace(cx, start, end, steps, **kwargs):
    if steps == 1:
        return cx.tensor(float(start), cx.out_dtype()).expand([1])
    positions = cx.graph.iota(Expr.index(), [steps], DType.i64).cast(DType.f32)
    return positions * ((end - start) / (steps - 1)) + float(start)


@translates(*aten_ops("eye.default"))
def eye(cx, n, m=None, **kwargs):
    m = n if m is None else m
    return cx.graph.iota(Expr.index() // m - Expr.index() % m, [n, m], DType.i64).eq(0)
