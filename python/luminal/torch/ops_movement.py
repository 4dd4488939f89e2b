"""Movement aten ops: views, slices, concatenation, padding. Most change only the view a
tensor is read through; strided slices and flips gather."""
from __future__ import annotations

from .. import _luminal
from .._luminal import DType, Error, Expr, Tensor
from .table import Context, aten_ops, is_static, translates

_INT64_MAX = 2**63 - 1


@translates(*aten_ops("view.default", "_unsafe_view.default", "reshape.default", "view_copy.default"))
def view(cx: Context, x, shape):
    # The metadata's shape has any -1 resolved (luminal's own inference of a -1 next to a
    # symbolic size leaves an unsimplified quotient).
    return cx.tensor(x).reshape(cx.out_shape())


@translates(*aten_ops("permute.default", "permute_copy.default"))
def permute(cx, x, dims):
    return x.permute(list(dims))


@translates(*aten_ops("transpose.int"))
def transpose(cx, x, a, b):
    return x if x.ndim < 2 else x.transpose(a, b)


@translates(*aten_ops("t.default"))
def t(cx, x):
    return x.t()


@translates(*aten_ops("expand.default", "expand_copy.default"))
def expand(cx, x, sizes, implicit=False):
    return cx.tensor(x).expand(cx.out_shape())


@translates(*aten_ops("unsqueeze.default", "unsqueeze_copy.default"))
def unsqueeze(cx, x, dim):
    return x.unsqueeze(dim)


def _squeeze_axes(x: Tensor, dims) -> list[int]:
    axes = [d + x.ndim if d < 0 else d for d in dims]
    return sorted({a for a in axes if x.shape[a] == 1}, reverse=True)


@translates(*aten_ops("squeeze.dim", "squeeze.dims", "squeeze.default", "squeeze_copy.dims"))
def squeeze(cx, x, dims=None):
    if x.ndim == 0:
        return x
    if dims is None:
        dims = list(range(x.ndim))
    elif isinstance(dims, int):
        dims = [dims]
    for a in _squeeze_axes(x, dims):
        x = x.squeeze(a)
    return x


def _clamp_index(value, size, default):
    """A slice bound as PyTorch reads it: None = default, negatives from the end, clamped to
    the size. A symbolic bound's sign comes from its range (x[-n:] gives -n)."""
    if value is None:
        return default
    if not isinstance(value, int):
        low, high = Expr(value).range
        if low >= 0:
            return _luminal.min_expr(value, size)
        if high is not None and high < 0:
            return _luminal.max_expr(Expr(size) + value, 0)
        raise Error(f"slice: the bound {value} may be negative or not (its range is [{low}, {high}]), "
                    "which selects from the end or from the start")
    if is_static(size):
        return min(max(value + size if value < 0 else value, 0), size)
    if value < 0:
        return _luminal.max_expr(Expr(size) + value, 0)
    return size if value >= _INT64_MAX // 2 else _luminal.min_expr(value, size)


@translates(*aten_ops("slice.Tensor", "slice_copy.Tensor"))
def slice_(cx, x, dim=0, start=None, end=None, step=1):
    axis = cx.axis(dim, x.ndim)
    size = x.shape[axis]
    lo, hi = _clamp_index(start, size, 0), _clamp_index(end, size, size)
    out = x.slice_along(axis, lo, hi)
    if step == 1:
        length = cx.out_shape()[axis]
        if is_static(length) and not is_static(out.shape[axis]):
            # torch knows a static length where ours is an expression equal to it only for the
            # sizes its guards allow (x[..., -1:] is 1 long when the size is >= 1): take
            # torch's (the reshape guards it), so that broadcasting sees the 1.
            out = out.reshape(out.shape[:axis] + [length] + out.shape[axis + 1:])
        return out
    if cx.out_shape()[axis] == 0:
        raise Error(f"{cx.where()}: the strided slice is empty, and luminal has no zero-size tensors")
    count = out.shape[axis]
    picks = cx.graph.iota(Expr.index() * step, [(Expr(count) + (step - 1)) // step], DType.i32)
    return out.index_select(axis, picks)


@translates(*aten_ops("slice_scatter.default"))
def slice_scatter(cx, x, src, dim=0, start=None, end=None, step=1):
    """x with x[..., start:end:step, ...] (along dim) replaced by src: an index_put at the
    slice's positions."""
    from .ops_indexing import index_put

    axis = cx.axis(dim, x.ndim)
    size = x.shape[axis]
    lo, hi = _clamp_index(start, size, 0), _clamp_index(end, size, size)
    count = (Expr(hi) - lo + (step - 1)) // step
    positions = cx.graph.iota(Expr.index() * step + lo, [count], DType.i64)
    return index_put(cx, x, [None] * axis + [positions], src)


@translates(*aten_ops("diagonal.default", "diagonal_copy.default"))
def diagonal(cx, x, offset=0, dim1=0, dim2=1):
    """The diagonal of axes dim1 and dim2 as a new last axis: those two axes moved last and
    merged, then the elements (i + rows before) * columns + i + columns before picked."""
    a, b = cx.axis(dim1, x.ndim), cx.axis(dim2, x.ndim)
    order = [d for d in range(x.ndim) if d not in (a, b)] + [a, b]
    rows, columns = x.shape[a], x.shape[b]
    skip_rows, skip_columns = max(-offset, 0), max(offset, 0)
    length = cx.out_shape()[-1]
    merged = x.permute(order).merge_dims(x.ndim - 2)
    picks = cx.graph.iota((Expr.index() + skip_rows) * columns + Expr.index() + skip_columns, [length], DType.i64)
    return merged.index_select(x.ndim - 2, picks)


@translates(*aten_ops("select_scatter.default"))
def select_scatter(cx, x, src, dim, index):
    """x with x.select(dim, index) replaced by src: a one-wide slice_scatter."""
    axis = cx.axis(dim, x.ndim)
    if isinstance(index, int) and index < 0:
        index = x.shape[axis] + index
    return slice_scatter(cx, x, src.unsqueeze(axis), axis, index, index + 1)


@translates(*aten_ops("select.int", "select_copy.int"))
def select(cx, x, dim, index):
    axis = cx.axis(dim, x.ndim)
    if isinstance(index, int) and index < 0:
        index = x.shape[axis] + index
    picked = x.slice_along(axis, index, Expr(index) + 1 if not isinstance(index, int) else index + 1)
    if is_static(picked.shape[axis]):
        return picked.squeeze(axis)
    # One long only for the sizes torch's guards allow (min(chunks, 1) with chunks >= 1):
    # the reshape drops the axis under a guard.
    return picked.reshape(picked.shape[:axis] + picked.shape[axis + 1:])


@translates(*aten_ops("narrow.default"))
def narrow(cx, x, dim, start, length):
    axis = cx.axis(dim, x.ndim)
    return x.slice_along(axis, start, Expr(start) + length if not isinstance(start, int) else start + length)


def _is_empty_1d(t: Tensor) -> bool:
    return t.ndim == 1 and t.shape[0] == 0


@translates(*aten_ops("cat.default", "concat.default"))
def cat(cx, tensors, dim=0):
    dtype = cx.out_dtype()
    parts = [cx.tensor(t, dtype) for t in tensors if not _is_empty_1d(t)]
    if not parts:
        return cx.tensor(tensors[0], dtype)
    axis = cx.axis(dim, parts[0].ndim)
    out = parts[0]
    for p in parts[1:]:
        out = out.concat_along(p, axis)
    return out


@translates(*aten_ops("stack.default"))
def stack(cx, tensors, dim=0):
    dtype = cx.out_dtype()
    return _luminal.stack([cx.tensor(t, dtype) for t in tensors], dim)


@translates(*aten_ops("split_with_sizes.default", "split_with_sizes_copy.default"))
def split_with_sizes(cx, x, sizes, dim=0):
    axis = cx.axis(dim, x.ndim)
    parts, start = [], 0
    for size in sizes:
        end = start + size
        parts.append(x.slice_along(axis, start, end))
        start = end
    return parts


@translates(*aten_ops("split.Tensor", "split_copy.Tensor"))
def split(cx, x, split_size, dim=0):
    axis = cx.axis(dim, x.ndim)
    size = x.shape[axis]
    if not is_static(size) or not isinstance(split_size, int):
        raise Error(f"{cx.where()}: splitting a symbolic axis needs split_with_sizes")
    return [x.slice_along(axis, s, min(s + split_size, size)) for s in range(0, size, split_size)]


@translates(*aten_ops("unbind.int"))
def unbind(cx, x, dim=0):
    axis = cx.axis(dim, x.ndim)
    return [select(cx, x, axis, i) for i in range(x.shape[axis])]


@translates(*aten_ops("flip.default"))
def flip(cx, x, dims):
    for d in dims:
        axis = cx.axis(d, x.ndim)
        n = x.shape[axis]
        x = x.index_select(axis, cx.graph.iota(Expr(n) - 1 - Expr.index(), [n], DType.i32))
    return x


@translates(*aten_ops("roll.default"))
def roll(cx, x, shifts, dims=()):
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    if not dims:
        flat = x.reshape([-1])
        return roll(cx, flat, shifts, [0]).reshape(x.shape)
    for shift, d in zip(shifts, dims):
        axis = cx.axis(d, x.ndim)
        n = x.shape[axis]
        if not is_static(n):
            raise Error(f"{cx.where()}: rolling a symbolic axis is not supported")
        s = shift % n
        if s:
            x = x.slice_along(axis, n - s, n).concat_along(x.slice_along(axis, 0, n - s), axis)
    return x


@translates(*aten_ops("constant_pad_nd.default"))
def constant_pad_nd(cx, x, pad, value=0):
    out = x
    for i in range(len(pad) // 2):
        axis = x.ndim - 1 - i
        before, after = pad[2 * i], pad[2 * i + 1]
        if isinstance(before, int) and before < 0:
            out = out.slice_along(axis, -before, out.shape[axis])
            before = 0
        if isinstance(after, int) and after < 0:
            out = out.slice_along(axis, 0, Expr(out.shape[axis]) + after)
            after = 0
        if before or after:
            out = out.pad_along(axis, before, after, float(value))
    return out


def _edge_pad(cx, x, pad, source):
    """Pads the last len(pad) // 2 axes by reading each output position's element at
    source(position - before, size): an index_select along each axis."""
    out = x
    for i in range(len(pad) // 2):
        axis = x.ndim - 1 - i
        before, after = pad[2 * i], pad[2 * i + 1]
        size = out.shape[axis]
        picks = cx.graph.iota(source(Expr.index() - before, Expr(size)), [Expr(size) + before + after], DType.i32)
        out = out.index_select(axis, picks)
    return out


def _reflect(p, size):
    # p mirrored at both ends without repeating them: size - 1 - |size - 1 - |p||
    return size - 1 - _abs_expr(size - 1 - _abs_expr(p))


def _abs_expr(e):
    return _luminal.max_expr(e, Expr(0) - e)


@translates(*aten_ops("reflection_pad1d.default", "reflection_pad2d.default", "reflection_pad3d.default"))
def reflection_pad(cx, x, padding):
    return _edge_pad(cx, x, list(padding), _reflect)


@translates(*aten_ops("replication_pad1d.default", "replication_pad2d.default", "replication_pad3d.default"))
def replication_pad(cx, x, padding):
    return _edge_pad(cx, x, list(padding), lambda p, size: _luminal.min_expr(_luminal.max_expr(p, 0), size - 1))


@translates(*aten_ops("repeat.default"))
def repeat(cx, x, repeats):
    repeats = list(repeats)
    x = x.reshape([1] * (len(repeats) - x.ndim) + x.shape)
    for axis, r in enumerate(repeats):
        if r != 1:
            inner = x.unsqueeze(axis)
            full = inner.shape
            full[axis] = r
            x = inner.expand(full).merge_dims(axis)
    return x


@translates(*aten_ops("tril.default"))
def tril(cx, x, diagonal=0):
    return x.tril(diagonal)


@translates(*aten_ops("triu.default"))
def triu(cx, x, diagonal=0):
    return x.triu(diagonal)
