"""Indexing aten ops: embedding, advanced indexing and its writes (StaticCache's
index_copy_/index_put_), gather/scatter, sorting, top-k, cumulative sums, histograms and
the grouped expert products of MoE layers."""
from __future__ import annotations

import torch

from .. import _luminal
from .._luminal import DType, Error, Expr, Tensor
from .table import Context, aten_ops, opmath, translates


def _row_major_strides(shape: list) -> list:
    strides, s = [], 1
    for d in reversed(shape):
        strides.append(s)
        s = s * d
    return list(reversed(strides))


def _broadcast_shapes(cx: Context, shapes: list[list]) -> list:
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        size = 1
        for s in shapes:
            d = s[i - (rank - len(s))] if i >= rank - len(s) else 1
            if isinstance(d, int) and d == 1:
                continue
            if isinstance(size, int) and size == 1:
                size = d
            elif not (d == size):
                raise Error(f"{cx.where()}: index shapes {shapes} do not broadcast")
        out.append(size)
    return out


def _wrapped(cx: Context, index: Tensor, size) -> Tensor:
    """Negative indexes count from the end, as in PyTorch. Integer arithmetic rather than a
    select: one elementwise pass, where a select gathers from both operands."""
    end = size if isinstance(size, int) else cx.tensor(size, index.dtype)
    return index + (index < 0).cast(index.dtype) * end


def advanced_index(cx: Context, x: Tensor, indices: list) -> tuple[list, Tensor]:
    """x[indices] with index tensors at some axes (None elsewhere): the result's shape and,
    for each of its elements, the flat offset into x it reads. Adjacent index tensors keep
    their place; apart, their broadcast shape comes first (PyTorch's rule)."""
    indices = list(indices) + [None] * (x.ndim - len(indices))
    axes = [a for a, t in enumerate(indices) if t is not None]
    if not axes:
        raise Error(f"{cx.where()}: no index tensor")
    for a in axes:
        if indices[a].dtype == DType.bool:
            raise Error(f"{cx.where()}: boolean-mask indexing has a data-dependent shape, which luminal cannot "
                        "compile")
    shape = x.shape
    index_tensors = [_wrapped(cx, cx.tensor(indices[a]), shape[a]) for a in axes]
    broadcast = _broadcast_shapes(cx, [t.shape for t in index_tensors])
    adjacent = axes == list(range(axes[0], axes[-1] + 1))
    first = axes[0] if adjacent else 0
    rest = [a for a in range(x.ndim) if a not in axes]
    if adjacent:
        result = shape[:axes[0]] + broadcast + shape[axes[-1] + 1:]
        rest_positions = [a if a < axes[0] else a - len(axes) + len(broadcast) for a in rest]
    else:
        result = broadcast + [shape[a] for a in rest]
        rest_positions = [len(broadcast) + i for i in range(len(rest))]
    x_strides, r_strides = _row_major_strides(shape), _row_major_strides(result)
    offset = Expr(0)
    for a, pos in zip(rest, rest_positions):
        coordinate = Expr.index() // r_strides[pos] % result[pos] if pos > 0 else Expr.index() // r_strides[pos]
        offset = offset + coordinate * x_strides[a]
    total = cx.graph.iota(offset, result, DType.i64)
    trailing = len(result) - first - len(broadcast)
    for a, t in zip(axes, index_tensors):
        placed = t.cast(DType.i64).expand(broadcast)
        for _ in range(first):
            placed = placed.unsqueeze(0)
        for _ in range(trailing):
            placed = placed.unsqueeze(-1)
        total = total + placed.expand(result) * x_strides[a]
    return result, total


@translates(*aten_ops("index.Tensor", "_unsafe_index.Tensor"))
def index(cx, x, indices):
    _, offsets = advanced_index(cx, x, indices)
    return x.gather(offsets)


@translates(*aten_ops("index_put.default", "_unsafe_index_put.default"))
def index_put(cx, x, indices, values, accumulate=False):
    if accumulate:
        return _index_add(cx, x, indices, values)
    result, offsets = advanced_index(cx, x, indices)
    return x.scatter(offsets, cx.tensor(values, x.dtype).expand(result))


def _index_add(cx, x, indices, values):
    """index_put with accumulate=True for one index tensor (MoE layers' index_add_): each
    value row goes to the position its index names, repeated indexes summed. A product with
    the one-hot matrix of the indexes does the sums: [.., rows, ..] x [rows, size]."""
    indices = list(indices) + [None] * (x.ndim - len(indices))
    axes = [a for a, t in enumerate(indices) if t is not None]
    if len(axes) != 1 or indices[axes[0]].dtype == DType.bool:
        raise Error(f"{cx.where()}: index_put with accumulate=True takes one integer index tensor, got "
                    f"{len(axes)} index tensors")
    axis = axes[0]
    size = x.shape[axis]
    idx = _wrapped(cx, indices[axis], size).cast(DType.i64)
    result = x.shape[:axis] + idx.shape + x.shape[axis + 1:]
    rows = Expr(1)
    for d in idx.shape:
        rows = rows * d
    pre, post = x.shape[:axis], x.shape[axis + 1:]
    v = cx.tensor(values, x.dtype).expand(result).reshape(pre + [rows] + post)
    order = [a for a in range(v.ndim) if a != axis] + [axis]
    one_hot = idx.reshape([rows]).unsqueeze(-1).eq(cx.graph.arange(size, DType.i64).unsqueeze(0)).cast(x.dtype)
    summed = v.permute(order).matmul(one_hot)  # [pre, post, size]
    back = list(range(len(pre))) + [summed.ndim - 1] + list(range(len(pre), summed.ndim - 1))
    return x + summed.permute(back)


@translates(*aten_ops("scatter_add.default"))
def scatter_add(cx, x, dim, index_, src):
    """out[.., index[p, j, q], ..] += src[p, j, q] along dim: a one-hot axis of x's size
    next to dim, summed over the index's positions, then padded to x where the index is
    smaller."""
    axis = cx.axis(dim, x.ndim)
    size = x.shape[axis]
    src = cx.tensor(src, x.dtype).slice([(0, d) for d in index_.shape])
    positions = cx.graph.arange(size, DType.i64).reshape([size] + [1] * (x.ndim - axis - 1))
    hits = _wrapped(cx, index_, size).cast(DType.i64).unsqueeze(axis + 1).eq(positions)
    summed = (hits.cast(x.dtype) * src.unsqueeze(axis + 1)).sum([axis])
    padding = [(0, 0) if a == axis else (0, Expr(x.shape[a]) - index_.shape[a]) for a in range(x.ndim)]
    return x + summed.pad(padding, 0.0)


@translates(*aten_ops("index_copy.default"))
def index_copy(cx, x, dim, index_, source):
    axis = cx.axis(dim, x.ndim)
    return index_put(cx, x, [None] * axis + [index_], source)


@translates(*aten_ops("index_select.default"))
def index_select(cx, x, dim, index_):
    axis = cx.axis(dim, x.ndim) if x.ndim else 0
    if x.ndim == 0:
        return x
    picks = index_.reshape([1]) if index_.ndim == 0 else index_
    return x.index_select(axis, _wrapped(cx, picks, x.shape[axis]))


@translates(*aten_ops("embedding.default"))
def embedding(cx, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    # No wrapping: PyTorch rejects a negative index here, and so does the Gather's range check.
    rows = weight.index_select(0, indices.reshape([-1]))
    return rows.reshape(indices.shape + [weight.shape[1]])


@translates(*aten_ops("gather.default"))
def gather(cx, x, dim, index_, sparse_grad=False):
    if x.ndim == 0:
        return x
    axis = cx.axis(dim, x.ndim)
    return x.gather_elements(_wrapped(cx, index_, x.shape[axis]), axis)


@translates(*aten_ops("scatter.src", "scatter.value"))
def scatter(cx, x, dim, index_, src):
    axis = cx.axis(dim, x.ndim)
    values = cx.tensor(src, x.dtype) if isinstance(src, Tensor) else cx.tensor(src, x.dtype).expand(index_.shape)
    return x.scatter_elements(axis, _wrapped(cx, index_, x.shape[axis]), values)


@translates(*aten_ops("sort.default", "sort.stable"))
def sort(cx, x, dim=-1, descending=False, *, stable=None):
    if x.ndim == 0:
        return x, cx.tensor(0, DType.i64)
    order = x.argsort(dim, descending)
    return x.gather_elements(order, dim), order


@translates(*aten_ops("argsort.default", "argsort.stable"))
def argsort(cx, x, dim=-1, descending=False, *, stable=None):
    return sort(cx, x, dim, descending)[1]


@translates(*aten_ops("topk.default"))
def topk(cx, x, k, dim=-1, largest=True, sorted=True):
    keys = x if largest else -x.cast(opmath(x.dtype) if x.dtype != DType.bool else DType.i32)
    order = keys.topk_indexes(k, dim)
    return x.gather_elements(order, dim), order


@translates(*aten_ops("cumsum.default"))
def cumsum(cx, x, dim, dtype=None):
    x = cx.tensor(x, opmath(cx.out_dtype()))
    return x if x.ndim == 0 else x.cumsum(dim)


@translates(*aten_ops("histc.default"))
def histc(cx, x, bins=100, min=0, max=0):
    if not min < max:
        raise Error(f"{cx.where()}: histc needs min < max (a data-dependent range is not supported), got "
                    f"min={min}, max={max}")
    values = cx.tensor(x, DType.f32).reshape([-1])
    bin_of = ((values - float(min)) * (bins / (max - min)))
    bin_of = (bin_of - bin_of % 1.0).cast(DType.i64)
    bin_of = _luminal.where(values.eq(float(max)), bins - 1, bin_of)
    inside = (values >= float(min)).logical_and(values <= float(max))
    targets = cx.graph.iota(Expr.index(), [bins, 1], DType.i64)
    hits = bin_of.unsqueeze(0).eq(targets).logical_and(inside.unsqueeze(0))
    return hits.cast(DType.f32).sum([1])


def grouped_mm(cx: Context, input_, weight, offs):
    """Rows of `input_` sorted by expert, offs the running count of rows per expert: row r
    goes through expert e with offs[e-1] <= r < offs[e]; rows past the last count are 0."""
    dtype = opmath(cx.out_dtype())
    rows, experts = input_.shape[0], weight.shape[0]
    row_ids = cx.graph.iota(Expr.index(), [rows, 1], DType.i64)
    expert = offs.cast(DType.i64).unsqueeze(0).le(row_ids).cast(DType.i64).sum([1])
    valid = expert < experts
    chosen = expert.minimum(experts - 1)
    k, n = weight.shape[1], weight.shape[2]
    w = cx.tensor(weight, dtype).reshape([experts, -1]).index_select(0, chosen).reshape([rows, k, n])
    out = cx.tensor(input_, dtype).unsqueeze(1).matmul(w).squeeze(1)
    return _luminal.where(valid.unsqueeze(-1), out, 0.0)


def register_late_ops() -> None:
    """Ops of libraries imported after luminal.torch: transformers' MoE layers call their own
    grouped product under torch.compile."""
    ops = getattr(torch.ops, "transformers", None)
    try:
        target = ops.grouped_mm_fallback.default
    except (AttributeError, RuntimeError):
        return
    translates(target)(grouped_mm)


@translates(*aten_ops("_grouped_mm.default"))
def aten_grouped_mm(cx, input_, weight, offs=None, bias=None, out_dtype=None):
    if offs is None or bias is not None or input_.ndim != 2 or weight.ndim != 3:
        raise Error(f"{cx.where()}: only the 2-D input x 3-D weight form with offs and no bias is supported")
    return grouped_mm(cx, input_, weight, offs)
