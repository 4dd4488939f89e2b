"""Reductions, normalisations, softmax and matrix products."""
from __future__ import annotations

import math

from .._luminal import DType, Error, Expr, Tensor
from .table import FLOATS, Context, aten_ops, is_static, opmath, translates


def _dims(x: Tensor, dims) -> list[int]:
    """PyTorch's reduction dims: None or [] means every axis."""
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(x.ndim))
    if isinstance(dims, int):
        return [dims]
    return list(dims)


@translates(*aten_ops("sum.dim_IntList", "sum.default"))
def sum_(cx: Context, x, dims=None, keepdim=False, dtype=None):
    x = cx.tensor(x, opmath(cx.out_dtype()))
    if x.ndim == 0:
        return x
    return x.sum(_dims(x, dims), keepdim)


@translates(*aten_ops("mean.dim", "mean.default"))
def mean(cx, x, dims=None, keepdim=False, dtype=None):
    x = cx.tensor(x, opmath(cx.out_dtype()))
    if x.ndim == 0:
        return x
    return x.mean(_dims(x, dims), keepdim)


@translates(*aten_ops("prod.default", "prod.dim_int"))
def prod(cx, x, dim=None, keepdim=False, dtype=None):
    """A product over one axis (all of them by default) by halving: the two halves of the
    axis multiplied until one element is left, log2(size) exact f32 products."""
    x = cx.tensor(x, opmath(cx.out_dtype()))
    if dim is None:
        x = x.reshape([-1]) if x.ndim else x.reshape([1])
        dim = 0
    axis = cx.axis(dim, x.ndim) if x.ndim else 0
    if x.ndim == 0:
        return x
    size = x.shape[axis]
    if not isinstance(size, int):
        raise Error(f"{cx.where()}: a product over the dynamic size {size} is not supported")
    if size == 0:
        return cx.tensor(1, x.dtype).expand(cx.out_shape())
    while size > 1:
        half = size // 2
        paired = x.slice_along(axis, 0, half) * x.slice_along(axis, half, 2 * half)
        x = paired.concat_along(x.slice_along(axis, 2 * half, size), axis) if size % 2 else paired
        size = half + size % 2
    return x if keepdim else x.squeeze(axis)


@translates(*aten_ops("amax.default", "max.default"))
def amax(cx, x, dims=None, keepdim=False):
    if x.ndim == 0:
        return x
    return x.max(_dims(x, dims), keepdim)


@translates(*aten_ops("amin.default", "min.default"))
def amin(cx, x, dims=None, keepdim=False):
    if x.ndim == 0:
        return x
    return x.min(_dims(x, dims), keepdim)


@translates(*aten_ops("max.dim"))
def max_dim(cx, x, dim, keepdim=False):
    if x.ndim == 0:
        return x, cx.tensor(0, DType.i64)
    return x.max([dim], keepdim), x.argmax(dim, keepdim)


@translates(*aten_ops("min.dim"))
def min_dim(cx, x, dim, keepdim=False):
    if x.ndim == 0:
        return x, cx.tensor(0, DType.i64)
    return x.min([dim], keepdim), x.argmin(dim, keepdim)


def _arg(method):
    def translate(cx, x, dim=None, keepdim=False):
        if x.ndim == 0:
            return cx.tensor(0, DType.i64)
        if dim is None:
            flat = x.reshape([-1])
            out = getattr(flat, method)(0, False)
            return out.reshape([1] * x.ndim) if keepdim else out
        return getattr(x, method)(dim, keepdim)
    return translate


translates(*aten_ops("argmax.default"))(_arg("argmax"))
translates(*aten_ops("argmin.default"))(_arg("argmin"))


@translates(*aten_ops("any.dim", "any.dims", "any.default"))
def any_(cx, x, dims=None, keepdim=False):
    x = cx.tensor(x).ne(0) if x.dtype != DType.bool else x
    if x.ndim == 0:
        return x
    return x.cast(DType.i32).max(_dims(x, dims), keepdim).gt(0)


@translates(*aten_ops("all.dim", "all.dims", "all.default"))
def all_(cx, x, dims=None, keepdim=False):
    x = cx.tensor(x).ne(0) if x.dtype != DType.bool else x
    if x.ndim == 0:
        return x
    return x.cast(DType.i32).min(_dims(x, dims), keepdim).gt(0)


@translates(*aten_ops("var.correction", "var.dim"))
def var(cx, x, dims=None, correction=None, keepdim=False, **kwargs):
    x = cx.tensor(x, opmath(cx.out_dtype()))
    if isinstance(correction, bool):  # var.dim's `unbiased`
        correction = 1 if correction else 0
    c = 1 if correction is None else correction
    if c != int(c):
        raise Error(f"{cx.where()}: a fractional correction ({c}) is not supported")
    return x.var(_dims(x, dims), int(c), keepdim)


@translates(*aten_ops("std.correction"))
def std(cx, x, dims=None, correction=None, keepdim=False):
    return var(cx, x, dims, correction, keepdim).sqrt()


@translates(*aten_ops("_softmax.default", "softmax.int"))
def softmax(cx, x, dim, half_to_float=False):
    x = cx.tensor(x, opmath(cx.out_dtype()))
    return x if x.ndim == 0 else x.softmax(dim)


@translates(*aten_ops("_log_softmax.default", "log_softmax.int"))
def log_softmax(cx, x, dim, half_to_float=False):
    x = cx.tensor(x, opmath(cx.out_dtype()))
    return x * 0.0 if x.ndim == 0 else x.log_softmax(dim)


@translates(*aten_ops("logsumexp.default"))
def logsumexp(cx, x, dims, keepdim=False):
    x = cx.tensor(x, opmath(cx.out_dtype()))
    return x.logsumexp(_dims(x, dims), keepdim)


@translates(*aten_ops("native_layer_norm.default"))
def native_layer_norm(cx, x, normalized_shape, weight, bias, eps):
    dtype = opmath(cx.out_dtype(0))
    x = cx.tensor(x, dtype)
    axes = list(range(x.ndim - len(normalized_shape), x.ndim))
    mean = x.mean(axes, True)
    centered = x - mean
    rstd = ((centered * centered).mean(axes, True) + eps).rsqrt()
    out = centered * rstd
    if weight is not None:
        out = out * cx.tensor(weight, dtype)
    if bias is not None:
        out = out + cx.tensor(bias, dtype)
    return out, mean, rstd


def _per_channel(cx, t, ndim: int, dtype):
    """A [C] tensor shaped to broadcast over axis 1 of a rank-ndim input."""
    return cx.tensor(t, dtype).reshape([-1] + [1] * (ndim - 2))


def _affine(cx, out, weight, bias, dtype):
    if weight is not None:
        out = out * _per_channel(cx, weight, out.ndim, dtype)
    if bias is not None:
        out = out + _per_channel(cx, bias, out.ndim, dtype)
    return out


@translates(*aten_ops("_native_batch_norm_legit_no_training.default"))
def batch_norm_inference(cx, x, weight, bias, running_mean, running_var, momentum, eps):
    """Batch norm with the running statistics; the two saved statistics are empty, as in
    torch (nothing reads them at inference)."""
    dtype = opmath(cx.out_dtype(0))
    x = cx.tensor(x, dtype)
    rstd = (_per_channel(cx, running_var, x.ndim, dtype) + eps).rsqrt()
    out = _affine(cx, (x - _per_channel(cx, running_mean, x.ndim, dtype)) * rstd, weight, bias, dtype)
    empty = cx.tensor(0.0, dtype).expand([0])
    return out, empty, empty


def _batch_statistics(cx, x, weight, bias, eps, dtype):
    """Batch norm with the batch's own statistics: mean and biased variance over every axis
    but the channels. The normalised input, the [C] mean and rstd, and the centred input."""
    axes = [a for a in range(x.ndim) if a != 1]
    mean = x.mean(axes, True)
    centered = x - mean
    rstd = ((centered * centered).mean(axes, True) + eps).rsqrt()
    return _affine(cx, centered * rstd, weight, bias, dtype), mean.reshape([-1]), rstd.reshape([-1]), centered


@translates(*aten_ops("_native_batch_norm_legit.no_stats"))
def batch_norm_batch_statistics(cx, x, weight, bias, training, momentum, eps):
    dtype = opmath(cx.out_dtype(0))
    return _batch_statistics(cx, cx.tensor(x, dtype), weight, bias, eps, dtype)[:3]


@translates(*aten_ops("_native_batch_norm_legit_functional.default"))
def batch_norm_functional(cx, x, weight, bias, running_mean, running_var, training, momentum, eps):
    """Batch norm that also returns the running statistics: in training, moved toward the
    batch's (its variance unbiased, as torch keeps it); otherwise used and kept."""
    dtype = opmath(cx.out_dtype(0))
    x = cx.tensor(x, dtype)
    if not training:
        rstd = (_per_channel(cx, running_var, x.ndim, dtype) + eps).rsqrt()
        out = _affine(cx, (x - _per_channel(cx, running_mean, x.ndim, dtype)) * rstd, weight, bias, dtype)
        empty = cx.tensor(0.0, dtype).expand([0])
        return out, empty, empty, running_mean, running_var
    out, mean, rstd, centered = _batch_statistics(cx, x, weight, bias, eps, dtype)
    count = Expr(1)
    for a in range(x.ndim):
        count = count * (x.shape[a] if a != 1 else 1)
    unbiased = (centered * centered).sum([a for a in range(x.ndim) if a != 1]) / cx.tensor(count - 1, dtype)
    keep = 1.0 - momentum
    new_mean = cx.tensor(running_mean, dtype) * keep + mean * momentum
    new_var = cx.tensor(running_var, dtype) * keep + unbiased * momentum
    return out, mean, rstd, new_mean, new_var


@translates(*aten_ops("native_group_norm.default"))
def native_group_norm(cx, x, weight, bias, n, c, hw, group, eps):
    """Group norm: statistics over each group of channels and all positions; mean and rstd
    come back as [N, group]."""
    dtype = opmath(cx.out_dtype(0))
    x = cx.tensor(x, dtype)
    grouped = x.reshape([n, group, -1])
    mean = grouped.mean([2], True)
    centered = grouped - mean
    rstd = ((centered * centered).mean([2], True) + eps).rsqrt()
    out = _affine(cx, (centered * rstd).reshape(x.shape), weight, bias, dtype)
    return out, mean.reshape([n, group]), rstd.reshape([n, group])


@translates(*aten_ops("linalg_solve_triangular.default"))
def solve_triangular(cx, a, b, *, upper, left=True, unitriangular=False):
    """X with A X = B (X A = B when not left) for triangular A. With D its diagonal and N
    the rest, A = D (I + D^-1 N), and I + M for a strictly triangular M has the inverse
    (I - M)(I + M^2)(I + M^4)... (M^n = 0): log2(n) pairs of products instead of n
    dependent substitution steps (the gated delta rule's chunk-sized UT systems)."""
    dtype = opmath(cx.out_dtype())
    a, b = cx.tensor(a, dtype), cx.tensor(b, dtype)
    if not left:  # X A = B is A^T X^T = B^T
        return solve_triangular(cx, a.transpose(-1, -2), b.transpose(-1, -2), upper=not upper,
                                unitriangular=unitriangular).transpose(-1, -2)
    n = a.shape[-1]
    if not is_static(n):
        raise Error(f"{cx.where()}: a triangular solve over the dynamic size {n} is not supported")
    strict = a.triu(1) if upper else a.tril(-1)
    x, m = b, -strict
    if not unitriangular:
        diagonal = (a.tril(0) - a.tril(-1)).sum([-1], True)  # [.., n, 1]
        x, m = b / diagonal, m / diagonal
    power = 1
    while power < n:
        x = x + m.matmul(x)
        power *= 2
        if power < n:
            m = m.matmul(m)
    return x


def _product(cx, a, b):
    dtype = opmath(cx.out_dtype())
    if dtype not in FLOATS and dtype not in (DType.i32, DType.i64):
        raise Error(f"{cx.where()}: matrix products of {dtype} are not supported")
    return cx.tensor(a, dtype).matmul(cx.tensor(b, dtype))


@translates(*aten_ops("mm.default", "bmm.default", "matmul.default", "dot.default", "mv.default"))
def mm(cx, a, b):
    return _product(cx, a, b)


@translates(*aten_ops("addmm.default", "baddbmm.default"))
def addmm(cx, bias, a, b, beta=1, alpha=1):
    dtype = opmath(cx.out_dtype())
    product = _product(cx, a, b)
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product
    return cx.tensor(bias, dtype) * beta + product if beta != 1 else cx.tensor(bias, dtype) + product


@translates(*aten_ops("linear.default"))
def linear(cx, x, weight, bias=None):
    dtype = opmath(cx.out_dtype())
    out = cx.tensor(x, dtype).matmul(cx.tensor(weight, dtype).t())
    return out if bias is None else out + cx.tensor(bias, dtype)


def _attention(cx, q, k, v, attn_mask, is_causal, scale, enable_gqa):
    """softmax(q k^T * scale + bias) v as PyTorch computes it, written as the runtimes'
    attention rules find it (nn::attention's form): queries [key heads, group, L, E] against
    keys and values broadcast over the group, the mask (causal, boolean or float) one
    additive bias of 0 and -inf, leading sizes of 1 dropped. A query row the mask hides
    entirely gives zeros, as in PyTorch: its bias is taken as 0 (so the softmax is finite)
    and its result multiplied by 0. Returns the result in [..., heads, L, E] and the biased
    scores' log-sum-exp in [..., heads, L]."""
    from .._luminal import where
    dtype = opmath(cx.out_dtype(0) if isinstance(cx.meta(), (tuple, list)) else cx.out_dtype())
    q, k, v = (cx.tensor(t, dtype) for t in (q, k, v))
    head_dim = q.shape[-1]
    if not isinstance(head_dim, int):
        raise Error(f"{cx.where()}: the head size must be static")
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    heads, kv_heads = q.shape[-3], k.shape[-3]
    groups = heads // kv_heads if heads != kv_heads and (enable_gqa or kv_heads == 1) else 1
    lead = q.shape[:-3]
    bias = _additive_mask(cx, attn_mask, dtype) if attn_mask is not None else None
    if is_causal:
        # Query i sees keys j <= i (PyTorch's top-left alignment): the key's offset from the query, from an index
        # expression, as nn::attention builds its mask.
        rows, cols = q.shape[-2], k.shape[-2]
        index = Expr.index()
        offset = cx.graph.iota(index % cols - index // cols, [rows, cols], DType.i32)
        causal = where(offset > 0, -math.inf, 0.0)
        bias = causal if bias is None else bias + causal
    hidden_rows = None
    if attn_mask is not None:
        hidden_rows = bias.max([-1], True).eq(-math.inf)
        bias = where(hidden_rows, 0.0, bias)
    if bias is not None and bias.ndim >= 3:
        bias = bias.unsqueeze(-3) if bias.shape[-3] == 1 else bias.reshape(bias.shape[:-3] + [heads // groups, groups]
                                                                           + bias.shape[-2:])
    if hidden_rows is not None and hidden_rows.ndim >= 3:
        hidden_rows = hidden_rows.unsqueeze(-3) if hidden_rows.shape[-3] == 1 else hidden_rows.reshape(
            hidden_rows.shape[:-3] + [heads // groups, groups] + hidden_rows.shape[-2:])
    q = q.reshape(lead + [heads // groups, groups] + q.shape[-2:])
    k, v = k.unsqueeze(-3), v.unsqueeze(-3)
    if all(d == 1 for t in (q, k, v) for d in t.shape[:-4]) and all(
            d == 1 for t in (bias, hidden_rows) if t is not None for d in t.shape[:-4]):
        q, k, v = (t.reshape(t.shape[-4:]) for t in (q, k, v))
        bias, hidden_rows = (t if t is None or t.ndim <= 4 else t.reshape(t.shape[-4:]) for t in (bias, hidden_rows))
    scores = q.matmul(k.transpose(-1, -2)) * scale
    if bias is not None:
        scores = scores + bias
    out = scores.softmax(-1).matmul(v)
    if hidden_rows is not None:
        out = out * (1.0 - hidden_rows.cast(dtype))
    scores = scores.reshape(lead + [heads] + scores.shape[-2:])
    return out.reshape(lead + [heads] + out.shape[-2:]), scores.logsumexp([-1])


def _additive_mask(cx, mask: Tensor, dtype: DType) -> Tensor:
    """A boolean mask (True: attend) as a bias of 0 and -inf; a float mask is one already."""
    from .._luminal import where
    if mask.dtype == DType.bool:
        return where(mask, 0.0, -math.inf).cast(dtype)
    return cx.tensor(mask, dtype)


@translates(*aten_ops("scaled_dot_product_attention.default"))
def sdpa(cx, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    if dropout_p:
        raise Error(f"{cx.where()}: attention dropout is not supported (inference only)")
    return _attention(cx, q, k, v, attn_mask, is_causal, scale, enable_gqa)[0]


@translates(*aten_ops("_scaled_dot_product_flash_attention_for_cpu.default"))
def sdpa_flash_cpu(cx, q, k, v, dropout_p=0.0, is_causal=False, attn_mask=None, scale=None):
    if dropout_p:
        raise Error(f"{cx.where()}: attention dropout is not supported (inference only)")
    # The CPU flash kernel shares each key/value head among its group of query heads (GQA), as
    # scaled_dot_product_attention(enable_gqa=True) hands it down.
    return _attention(cx, q, k, v, attn_mask, is_causal, scale, True)


@translates(*aten_ops("convolution.default"))
def convolution(cx, x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """1-d convolution (the causal depthwise convolutions of Mamba-style layers): each output
    position gathers its kernel's window of the padded input, then a product summed over the
    group's channels and the kernel."""
    if transposed or x.ndim != 3:
        kind = "transposed convolution" if transposed else f"a {x.ndim - 2}-d convolution"
        raise Error(f"{cx.where()}: {kind} is not supported (1-d convolutions over [batch, channels, length] are)")
    dtype = opmath(cx.out_dtype())
    x, weight = cx.tensor(x, dtype), cx.tensor(weight, dtype)
    (stride,), (pad,), (dilation,) = stride, padding, dilation
    batch, channels, _ = x.shape
    out_channels, group_channels, kernel = weight.shape
    length = cx.out_shape()[2]
    if pad:
        x = x.pad_along(2, pad, pad, 0.0)
    # Window element i = t * kernel + k reads input position t * stride + k * dilation.
    i = Expr.index()
    positions = cx.graph.iota(i // kernel * stride + i % kernel * dilation, [Expr(length) * kernel], DType.i32)
    windows = x.index_select(2, positions).reshape([batch, groups, 1, group_channels, length, kernel])
    w = weight.reshape([1, groups, out_channels // groups, group_channels, 1, kernel])
    out = (windows * w).sum([3, 5]).reshape([batch, out_channels, length])
    return out if bias is None else out + cx.tensor(bias, dtype).reshape([out_channels, 1])
