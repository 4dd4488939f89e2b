"""Elementwise aten ops: arithmetic, comparisons, logic, float math, selection."""
from __future__ import annotations

import math

from .. import _luminal
from .._luminal import DType, Error, Tensor
from .table import FLOATS, Context, aten_ops, opmath, translates


def _arith(cx: Context, a, b, combine):
    """Both operands in the result's compute dtype (f32 for 16-bit floats), combined."""
    dtype = opmath(cx.out_dtype())
    x, y = cx.operand(a, dtype), cx.operand(b, dtype)
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        x = cx.tensor(x, dtype)
    return combine(x, y)


def _scaled(value, alpha):
    return value if alpha == 1 else value * alpha


@translates(*aten_ops("add.Tensor", "add.Scalar"))
def add(cx, a, b, alpha=1):
    if cx.out_dtype() == DType.bool:
        return cx.tensor(a, DType.bool).logical_or(cx.tensor(b, DType.bool))
    return _arith(cx, a, b, lambda x, y: x + _scaled(y, alpha))


@translates(*aten_ops("sub.Tensor", "sub.Scalar"))
def sub(cx, a, b, alpha=1):
    return _arith(cx, a, b, lambda x, y: x - _scaled(y, alpha))


@translates(*aten_ops("rsub.Tensor", "rsub.Scalar"))
def rsub(cx, a, b, alpha=1):
    return _arith(cx, a, b, lambda x, y: y - _scaled(x, alpha))


@translates(*aten_ops("mul.Tensor", "mul.Scalar"))
def mul(cx, a, b):
    if cx.out_dtype() == DType.bool:
        return cx.tensor(a, DType.bool).logical_and(cx.tensor(b, DType.bool))
    return _arith(cx, a, b, lambda x, y: x * y)


def _floor(x: Tensor) -> Tensor:
    return x - x % 1.0


def _trunc(x: Tensor) -> Tensor:
    return _luminal.where(x < 0, -_floor(-x), _floor(x))


@translates(*aten_ops("div.Tensor", "div.Scalar", "div.Tensor_mode", "div.Scalar_mode"))
def div(cx, a, b, rounding_mode=None):
    dtype = cx.out_dtype()
    if rounding_mode is None:
        return _arith(cx, a, b, lambda x, y: x / y)
    if dtype in FLOATS:
        q = _arith(cx, a, b, lambda x, y: x / y)
        return _floor(q) if rounding_mode == "floor" else _trunc(q)
    x, y = cx.tensor(a, dtype), cx.tensor(b, dtype)
    floor_q = ((x - x % y) / y).cast(dtype)
    if rounding_mode == "floor":
        return floor_q
    inexact = (x % y).ne(0).logical_and((x < 0).ne(y < 0))
    return _luminal.where(inexact, floor_q + 1, floor_q)


@translates(*aten_ops("floor_divide.default", "floor_divide.Scalar"))
def floor_divide(cx, a, b):
    return div(cx, a, b, rounding_mode="floor")


@translates(*aten_ops("remainder.Tensor", "remainder.Scalar", "remainder.Scalar_Tensor"))
def remainder(cx, a, b):
    return _arith(cx, a, b, lambda x, y: x % y)


@translates(*aten_ops("fmod.Tensor", "fmod.Scalar"))
def fmod(cx, a, b):
    def truncated(x, y):
        r = x % y
        yt = cx.tensor(y, x.dtype) if not isinstance(y, Tensor) else y
        return _luminal.where(r.ne(0).logical_and((x < 0).ne(yt < 0)), r - yt, r)
    return _arith(cx, a, b, truncated)


@translates(*aten_ops("pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar"))
def pow_(cx, a, b):
    return _arith(cx, a, b, lambda x, y: x.pow(y) if isinstance(x, Tensor) else y.__rpow__(x))


@translates(*aten_ops("atan2.default"))
def atan2(cx, a, b):
    dtype = opmath(cx.out_dtype())
    return _atan2(cx.tensor(a, dtype), cx.tensor(b, dtype))


@translates(*aten_ops("maximum.default", "fmax.default"))
def maximum(cx, a, b):
    return _arith(cx, a, b, lambda x, y: x.maximum(y))


@translates(*aten_ops("minimum.default", "fmin.default"))
def minimum(cx, a, b):
    return _arith(cx, a, b, lambda x, y: x.minimum(y))


def _compare(method):
    def translate(cx, a, b):
        dtype = cx.compute_dtype(a, b)
        x, y = cx.operand(a, dtype), cx.operand(b, dtype)
        if not isinstance(x, Tensor):  # scalar op tensor: flip the comparison
            x, y = cx.tensor(x, dtype), y
        return getattr(x, method)(y)
    return translate


for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    translates(*aten_ops(f"{_name}.Tensor", f"{_name}.Scalar"))(_compare(_name))


def _logical(method):
    def translate(cx, a, b):
        return getattr(cx.tensor(a, DType.bool), method)(cx.tensor(b, DType.bool))
    return translate


translates(*aten_ops("logical_and.default"))(_logical("logical_and"))
translates(*aten_ops("logical_or.default"))(_logical("logical_or"))


@translates(*aten_ops("logical_xor.default"))
def logical_xor(cx, a, b):
    return cx.tensor(a, DType.bool).ne(cx.tensor(b, DType.bool))


@translates(*aten_ops("logical_not.default"))
def logical_not(cx, x):
    return cx.tensor(x, DType.bool).logical_not()


# Integer widths; the bitwise ops compute in i64 and the translator casts back.
_SIGNED_BITS = {DType.i32: 32, DType.i64: 64}
_UNSIGNED_BITS = {DType.u8: 8}


def _powers_of_two(cx, count: int) -> Tensor:
    """[1, 2, 4, ..., 2^(count - 1)] (i64), doubled by concatenation: a handful of nodes
    however wide the integers."""
    powers = cx.graph.constant(1.0, DType.i64).reshape([1])
    while powers.shape[0] < count:
        powers = powers.concat_along(powers * 2 ** powers.shape[0], 0)
    return powers.slice_along(0, 0, count)


def _integer_and(cx, x: Tensor, y: Tensor, dtype: DType) -> Tensor:
    """x & y of two i64 tensors holding `dtype` values, from their two's-complement bits:
    the value bits below the sign bit (floor-mod by powers of two reads them; the top one by
    a comparison, as 2^63 is no i64), and the sign bit weighing -2^(width - 1)."""
    signed = dtype in _SIGNED_BITS
    width = _SIGNED_BITS.get(dtype) or _UNSIGNED_BITS[dtype]
    top = width - 1 if signed else width  # value bits
    if signed:
        # A negative value's bits below the sign are x + 2^(width - 1); in i64, adding -2^63
        # is adding 2^63 (modulo 2^64, as the runtime's integer sums wrap).
        offset = cx.tensor(2 ** (width - 1) if width < 64 else -(2 ** 63), DType.i64)
        zero = cx.tensor(0, DType.i64)
        x_low, y_low = x + _luminal.where(x < 0, offset, zero), y + _luminal.where(y < 0, offset, zero)
    else:
        x_low, y_low = x, y
    powers = _powers_of_two(cx, top - 1)
    doubled = powers * 2
    both = ((x_low.unsqueeze(-1) % doubled) >= powers).logical_and((y_low.unsqueeze(-1) % doubled) >= powers)
    out = (both.cast(DType.i64) * powers).sum([-1])
    high = cx.tensor(2 ** (top - 1), DType.i64)
    both_high = (x_low >= high).logical_and(y_low >= high)
    out = out + _luminal.where(both_high, high, cx.tensor(0, DType.i64))
    if signed:
        sign = cx.tensor(-(2 ** (width - 1)), DType.i64)
        out = out + _luminal.where((x < 0).logical_and(y < 0), sign, cx.tensor(0, DType.i64))
    return out


def _bitwise(cx, a, b, logical, from_and):
    """A bitwise op: its logical form on bools; on integers from x & y, as x | y is
    x + y - (x & y) and x ^ y is x + y - 2 (x & y)."""
    dtype = cx.out_dtype()
    if dtype == DType.bool:
        return logical(cx, a, b)
    if dtype not in _SIGNED_BITS and dtype not in _UNSIGNED_BITS:
        raise Error(f"{cx.where()}: bitwise ops take bool and integer tensors, got {dtype}")
    x, y = cx.tensor(a, DType.i64), cx.tensor(b, DType.i64)
    return from_and(x, y, _integer_and(cx, x, y, dtype))


@translates(*aten_ops("bitwise_and.Tensor", "bitwise_and.Scalar"))
def bitwise_and(cx, a, b):
    return _bitwise(cx, a, b, _logical("logical_and"), lambda x, y, both: both)


@translates(*aten_ops("bitwise_or.Tensor", "bitwise_or.Scalar"))
def bitwise_or(cx, a, b):
    return _bitwise(cx, a, b, _logical("logical_or"), lambda x, y, both: x + y - both)


@translates(*aten_ops("bitwise_xor.Tensor", "bitwise_xor.Scalar"))
def bitwise_xor(cx, a, b):
    return _bitwise(cx, a, b, logical_xor, lambda x, y, both: x + y - both * 2)


@translates(*aten_ops("bitwise_not.default"))
def bitwise_not(cx, x):
    dtype = cx.out_dtype()
    if dtype == DType.bool:
        return x.logical_not()
    if dtype in _UNSIGNED_BITS:
        return cx.tensor(2 ** _UNSIGNED_BITS[dtype] - 1, DType.i64) - x.cast(DType.i64)
    if dtype in _SIGNED_BITS:
        return cx.tensor(-1, DType.i64) - x.cast(DType.i64)  # two's complement: ~x = -1 - x
    raise Error(f"{cx.where()}: bitwise ops take bool and integer tensors, got {dtype}")


def _unary(compute):
    """A float op in the result's compute dtype (integer inputs become floats first)."""
    def translate(cx, x, *args, **kwargs):
        return compute(cx.tensor(x, opmath(cx.out_dtype())), *args, **kwargs)
    return translate


def _atan_unit(t: Tensor) -> Tensor:
    """atan on [0, inf): Cephes' atanf, whose range reduction (by tan(3 pi / 8) and
    tan(pi / 8)) leaves a polynomial in t^2 accurate to f32 rounding."""
    big = t > 2.414213562373095
    mid = (t > 0.4142135623730950).logical_and(big.logical_not())
    u = _luminal.where(big, -t.recip(), _luminal.where(mid, (t - 1.0) / (t + 1.0), t))
    z = u * u
    poly = (((z * 8.05374449538e-2 - 1.38776856032e-1) * z + 1.99777106478e-1) * z - 3.33329491539e-1) * z * u + u
    return _luminal.where(big, poly + math.pi / 2, _luminal.where(mid, poly + math.pi / 4, poly))


def _atan(x: Tensor) -> Tensor:
    r = _atan_unit(x.abs())
    return _luminal.where(x < 0, -r, r)


def _atan2(y: Tensor, x: Tensor) -> Tensor:
    """The angle of (x, y): atan of the smaller magnitude over the larger (in [0, 1]), moved
    to its octant; 0 at the origin, as torch."""
    ax, ay = x.abs(), y.abs()
    low, high = ax.minimum(ay), ax.maximum(ay)
    r = _atan_unit(_luminal.where(high > 0, low / high, high * 0.0))
    r = _luminal.where(ay > ax, math.pi / 2 - r, r)
    r = _luminal.where(x < 0, math.pi - r, r)
    return _luminal.where(y < 0, -r, r)


def _round_half_even(x: Tensor) -> Tensor:
    """torch.round: to the nearest integer, halves to the even one."""
    f = _floor(x)
    d = x - f
    return _luminal.where(d > 0.5, f + 1.0, _luminal.where(d < 0.5, f, f + f % 2.0))


def _asinh(x: Tensor) -> Tensor:
    a = x.abs()
    r = (a + (a * a + 1.0).sqrt()).log()
    return _luminal.where(x < 0, -r, r)


_UNARY = {
    "exp": Tensor.exp, "exp2": Tensor.exp2, "log": Tensor.log, "log2": Tensor.log2, "sqrt": Tensor.sqrt,
    "rsqrt": Tensor.rsqrt, "reciprocal": Tensor.recip, "sin": Tensor.sin, "cos": Tensor.cos,
    "tanh": Tensor.tanh, "sigmoid": Tensor.sigmoid, "erf": Tensor.erf, "silu": Tensor.silu,
    "relu": Tensor.relu, "abs": Tensor.abs, "neg": Tensor.neg, "sign": Tensor.sign,
    "log10": lambda x: x.log2() * math.log10(2.0), "log1p": lambda x: (x + 1.0).log(),
    "expm1": lambda x: x.exp() - 1.0, "tan": lambda x: x.sin() / x.cos(),
    "floor": _floor, "ceil": lambda x: -_floor(-x), "trunc": _trunc, "frac": lambda x: x - _trunc(x),
    "square": Tensor.square, "round": _round_half_even, "atan": _atan,
    "asin": lambda x: _atan2(x, ((1.0 - x) * (x + 1.0)).sqrt()),
    "acos": lambda x: _atan2(((1.0 - x) * (x + 1.0)).sqrt(), x),
    "sinh": lambda x: (x.exp() - (-x).exp()) * 0.5, "cosh": lambda x: (x.exp() + (-x).exp()) * 0.5,
    "asinh": _asinh, "acosh": lambda x: (x + ((x - 1.0) * (x + 1.0)).sqrt()).log(),
    "atanh": lambda x: ((x + 1.0) / (1.0 - x)).log() * 0.5,
}
for _name, _fn in _UNARY.items():
    translates(*aten_ops(f"{_name}.default"))(_unary(_fn))


@translates(*aten_ops("round.decimals"))
def round_decimals(cx, x, decimals=0):
    x = cx.tensor(x, opmath(cx.out_dtype()))
    if decimals >= 0:
        return _round_half_even(x * 10.0 ** decimals) / 10.0 ** decimals
    return _round_half_even(x / 10.0 ** -decimals) * 10.0 ** -decimals


@translates(*aten_ops("gelu.default"))
def gelu(cx, x, approximate="none"):
    x = cx.tensor(x, opmath(cx.out_dtype()))
    return x.gelu_tanh() if approximate == "tanh" else x.gelu()


@translates(*aten_ops("hardtanh.default"))
def hardtanh(cx, x, min_val=-1.0, max_val=1.0):
    return cx.tensor(x, opmath(cx.out_dtype())).clamp(min_val, max_val)


@translates(*aten_ops("leaky_relu.default"))
def leaky_relu(cx, x, negative_slope=0.01):
    x = cx.tensor(x, opmath(cx.out_dtype()))
    return _luminal.where(x > 0, x, x * negative_slope)


@translates(*aten_ops("elu.default"))
def elu(cx, x, alpha=1.0, scale=1.0, input_scale=1.0):
    x = cx.tensor(x, opmath(cx.out_dtype()))
    return _luminal.where(x > 0, x * scale, ((x * input_scale).exp() - 1.0) * (alpha * scale))


@translates(*aten_ops("softplus.default"))
def softplus(cx, x, beta=1.0, threshold=20.0):
    x = cx.tensor(x, opmath(cx.out_dtype()))
    return _luminal.where(x * beta > threshold, x, ((x * beta).exp() + 1.0).log() / beta)


@translates(*aten_ops("hardsigmoid.default"))
def hardsigmoid(cx, x):
    return (cx.tensor(x, opmath(cx.out_dtype())) / 6.0 + 0.5).clamp(0.0, 1.0)


@translates(*aten_ops("hardswish.default"))
def hardswish(cx, x):
    x = cx.tensor(x, opmath(cx.out_dtype()))
    return x * (x / 6.0 + 0.5).clamp(0.0, 1.0)


@translates(*aten_ops("isnan.default"))
def isnan(cx, x):
    return x.isnan()


@translates(*aten_ops("isinf.default"))
def isinf(cx, x):
    if x.dtype not in FLOATS:
        return x.ne(x)
    return x.abs().eq(math.inf)


@translates(*aten_ops("isfinite.default"))
def isfinite(cx, x):
    if x.dtype not in FLOATS:
        return x.eq(x)
    return x.isnan().logical_not().logical_and(x.abs().ne(math.inf))


def _bound(cx, value, dtype):
    return None if value is None else cx.operand(value, dtype)


@translates(*aten_ops("clamp.default", "clamp.Tensor"))
def clamp(cx, x, min=None, max=None):
    dtype = opmath(cx.out_dtype())
    out = cx.tensor(x, dtype)
    lo, hi = _bound(cx, min, dtype), _bound(cx, max, dtype)
    if lo is not None:
        out = out.maximum(lo)
    if hi is not None:
        out = out.minimum(hi)
    return out


@translates(*aten_ops("clamp_min.default", "clamp_min.Tensor"))
def clamp_min(cx, x, min):
    return clamp(cx, x, min=min)


@translates(*aten_ops("clamp_max.default", "clamp_max.Tensor"))
def clamp_max(cx, x, max):
    return clamp(cx, x, max=max)


@translates(*aten_ops("where.self", "where.ScalarSelf", "where.ScalarOther", "where.Scalar"))
def where(cx, condition, a, b):
    dtype = cx.out_dtype()
    return _luminal.where(cx.tensor(condition, DType.bool), cx.operand(a, dtype), cx.operand(b, dtype))


@translates(*aten_ops("masked_fill.Scalar", "masked_fill.Tensor"))
def masked_fill(cx, x, mask, value):
    dtype = cx.out_dtype()
    return _luminal.where(cx.tensor(mask, DType.bool), cx.operand(value, dtype), cx.tensor(x, dtype))


@translates(*aten_ops("_to_copy.default", "to.dtype", "_to_dtype.default"))
def to_copy(cx, x, *args, **kwargs):
    return cx.tensor(x).cast(cx.out_dtype())


@translates(*aten_ops("native_dropout.default"))
def native_dropout(cx, x, p, train):
    """Dropout at inference (train False): the input and a mask that keeps everything.
    Training draws random numbers, which luminal has no generator for."""
    if train:
        raise Error(f"{cx.where()}: dropout in training draws random numbers, which luminal does not")
    return x, cx.tensor(True, DType.bool).expand(x.shape)


@translates(*aten_ops("clone.default", "alias.default", "lift_fresh_copy.default", "detach.default",
                      "contiguous.default", "_assert_tensor_metadata.default"))
def identity(cx, x, *args, **kwargs):
    return x


@translates(*aten_ops("copy.default"))
def copy(cx, dest, src, non_blocking=False):
    return cx.tensor(src, cx.out_dtype()).expand(dest.shape)
