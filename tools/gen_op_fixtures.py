#!/usr/bin/env python3
"""Generates the op fixtures that tests/ops/test_ops_fixtures.cpp checks luminal against.

Rerun with

    python3 tools/gen_op_fixtures.py

from the repository root (needs torch and numpy). The output,
tests/data/ops/op_fixtures.txt, is committed: CI never runs Python. Generation is
deterministic (every case seeds its own torch.Generator from a CRC of its name,
so adding a case does not change the others); rerunning it must reproduce the
file byte for byte.

Expected values come from PyTorch (CPU). Float results are computed in float64
from the float32 inputs and rounded once to float32 (the correctly rounded
answer), except where the point of a case is torch's own dtype behaviour
(casts, f16/bf16 arithmetic, integer wrap-around), which runs natively.

File format (plain text, one token stream, trivially parsed without JSON):

    # comment lines
    case <name>
    tensor <role> <dtype> <ndim> <dim0> ... <dimN-1>
    <numel values separated by single spaces, row-major, on one line>
    ...
    end

dtype is one of f32 f16 bf16 i32 i64 u8 bool. Float values are printed with
'%.9g' (round-trips float32 exactly; f16/bf16 values are exact in float32);
nan, inf and -inf are spelled out. Integers are decimal, bools 0/1. A rank-0
tensor has ndim 0 and one value. A case's roles are its inputs (names the test
binds) and its expected outputs; symbolic-dimension cases carry one set per
size, suffixed ".<size>" (x.3, out.3, x.5, out.5).

Conventions where luminal differs from torch by design (the fixtures record
luminal's contract, computed independently):
  * index-producing ops (argmax/argmin, argsort, topk_indexes, one_hot) return
    i32; their values equal torch's int64 results, stored here as i32.
  * topk ties: lower index first. torch.topk's tie order is unspecified, so the
    expected indexes come from a stable descending sort.
  * argsort is stable (torch.argsort(..., stable=True)).
  * gather with repeated indexes reads the same element several times.
  * scatter / scatter_elements with repeated indexes: the last write in
    row-major order of the index tensor wins. torch documents repeated indexes
    as undefined, so the expected output is built with an explicit Python loop.
"""
import os
import zlib

import numpy as np
import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_PATH = os.path.join(REPO, "tests", "data", "ops", "op_fixtures.txt")

F32, F64, F16, BF16 = torch.float32, torch.float64, torch.float16, torch.bfloat16
I32, I64, U8, BOOL = torch.int32, torch.int64, torch.uint8, torch.bool
DTYPE_NAMES = {F32: "f32", F16: "f16", BF16: "bf16", I32: "i32", I64: "i64", U8: "u8", BOOL: "bool"}
NAN, INF = float("nan"), float("inf")

CASES = []


def case(name, tensors):
    """Records one case; `tensors` maps role -> torch tensor (insertion order kept)."""
    assert all(c.isalnum() or c in "_." for c in name), name
    assert name not in {n for n, _ in CASES}, f"duplicate case {name}"
    CASES.append((name, list(tensors.items())))


def fmt_tensor(role, t):
    t = t.detach().contiguous()
    dtype = DTYPE_NAMES[t.dtype]
    header = f"tensor {role} {dtype} {t.dim()}" + "".join(f" {d}" for d in t.shape)
    if t.dtype.is_floating_point:
        vals = t.to(F32).reshape(-1).tolist()
        body = " ".join("%.9g" % v for v in vals)
    else:
        body = " ".join(str(int(v)) for v in t.reshape(-1).tolist())
    return header + "\n" + body


def rng(name):
    return torch.Generator().manual_seed(zlib.crc32(name.encode()))


def randn(g, *shape, scale=1.0):
    return (torch.randn(*shape, generator=g, dtype=F64) * scale).to(F32)


def uniform(g, lo, hi, *shape):
    return (torch.rand(*shape, generator=g, dtype=F64) * (hi - lo) + lo).to(F32)


def randint(g, lo, hi, *shape, dtype=I32):
    return torch.randint(lo, hi, shape, generator=g, dtype=I64).to(dtype)


def f64(t):
    return t.to(F64)


def r32(t):
    """float64 result -> float32 (one rounding)."""
    return t.to(F32)


def stable_order(x, axis, descending):
    return torch.argsort(x, dim=axis, descending=descending, stable=True)


# ---------------------------------------------------------------------------
# Elementwise unary ops. Each takes x (f32) and gives out (f32).
def unary_cases():
    F = torch.nn.functional
    table = [
        # name, domain (lo, hi), extra values appended to x, torch fn on float64
        ("neg", (-5, 5), [INF, -INF, NAN, 0.0], torch.neg),
        ("abs", (-5, 5), [INF, -INF, NAN, -0.0], torch.abs),
        ("sign", (-5, 5), [INF, -INF, 0.0, -0.0, NAN], torch.sign),
        ("exp", (-8, 8), [INF, -INF, NAN, 0.0], torch.exp),
        ("exp2", (-10, 10), [INF, -INF, 0.0, 0.5], torch.exp2),
        ("log", (0.001, 50), [0.0, INF, -1.0, 1.0], torch.log),
        ("log2", (0.001, 50), [0.0, INF, -1.0, 8.0], torch.log2),
        ("sin", (-6, 6), [0.0, INF, NAN, 1.5707963705062866], torch.sin),
        ("cos", (-6, 6), [0.0, INF, NAN, 3.1415927410125732], torch.cos),
        ("sqrt", (0, 30), [0.0, INF, -1.0, 4.0], torch.sqrt),
        ("rsqrt", (0.01, 30), [0.0, INF, -1.0, 4.0], torch.rsqrt),
        ("recip", (-5, 5), [0.0, -0.0, INF, -INF], torch.reciprocal),
        ("square", (-5, 5), [INF, -INF, NAN, -3.0], torch.square),
        ("sigmoid", (-12, 12), [INF, -INF, NAN, 0.0], torch.sigmoid),
        ("tanh", (-6, 6), [INF, -INF, NAN, 0.0], torch.tanh),
        ("relu", (-5, 5), [INF, -INF, NAN, 0.0], torch.relu),
        ("gelu", (-6, 6), [INF, -INF, NAN, 0.0], F.gelu),
        ("gelu_tanh", (-6, 6), [INF, -INF, NAN, 0.0], lambda x: F.gelu(x, approximate="tanh")),
        ("silu", (-10, 10), [INF, -INF, NAN, 0.0], F.silu),
    ]
    for name, (lo, hi), extra, fn in table:
        g = rng("unary_" + name)
        x = torch.cat([uniform(g, lo, hi, 24 - len(extra)), torch.tensor(extra, dtype=F32)]).reshape(4, 6)
        case("unary_" + name, {"x": x, "out": r32(fn(f64(x)))})

    # f16 inputs stay f16 (the decomposition rounds intermediates to f16).
    g = rng("unary_f16")
    x = uniform(g, 0.05, 3, 3, 8).to(F16)
    xf = x.to(F32)
    case("unary_f16", {"x": x, "exp": torch.exp(xf).to(F16), "sqrt": torch.sqrt(xf).to(F16),
                       "sigmoid": torch.sigmoid(xf).to(F16)})


# ---------------------------------------------------------------------------
def binary_cases():
    # Arithmetic with broadcasting [3,1] x [1,4] and [2,3,4] x [4].
    g = rng("binary_broadcast")
    a = randn(g, 3, 1, scale=3)
    b = randn(g, 1, 4, scale=3)
    case("binary_broadcast", {"a": a, "b": b, "add": r32(f64(a) + f64(b)), "sub": r32(f64(a) - f64(b)),
                              "mul": r32(f64(a) * f64(b)), "div": r32(f64(a) / f64(b))})
    g = rng("binary_broadcast_rank")
    a = randn(g, 2, 3, 4)
    b = randn(g, 4)
    c = randn(g, 3, 1)
    case("binary_broadcast_rank", {"a": a, "b": b, "c": c, "out": r32(f64(a) * f64(b) + f64(c))})
    g = rng("binary_scalar")
    x = torch.cat([uniform(g, -4, 4, 11), torch.tensor([0.5])]).to(F32).reshape(3, 4)
    xd = f64(x)
    case("binary_scalar", {"x": x, "add": r32(xd + 2), "rsub": r32(3 - xd), "mul": r32(xd * -1.5),
                           "rdiv": r32(2 / xd), "div": r32(xd / 4), "sub": r32(xd - 0.25)})
    # Special values through + * /.
    a = torch.tensor([INF, -INF, INF, NAN, 1.0, -1.0, 0.0, 0.0], dtype=F32)
    b = torch.tensor([INF, INF, 0.0, 1.0, 0.0, 0.0, 0.0, -INF], dtype=F32)
    case("binary_special", {"a": a, "b": b, "add": a + b, "mul": a * b, "div": a / b})
    # Floor modulo (torch.remainder): result takes the divisor's sign.
    g = rng("mod_float")
    a = torch.cat([uniform(g, -10, 10, 10), torch.tensor([-7.5, 7.5, -6.0, 6.0, 0.0, -3.0]),
                   torch.tensor([1.0, -1.0, INF, 5.0, -5.0])]).to(F32)
    b = torch.cat([uniform(g, 0.5, 4, 5) * torch.tensor([1, -1, 1, -1, 1]),
                   uniform(g, -4, -0.5, 5), torch.tensor([2.0, -2.0, 3.0, -3.0, 5.0, 1.5]),
                   torch.tensor([0.0, 0.0, 2.0, INF, INF])]).to(F32)
    case("mod_float", {"a": a, "b": b, "mod": torch.remainder(a, b), "mod_s": torch.remainder(a, 2.5),
                       "mod_neg_s": torch.remainder(a, -3.0)})
    # pow: tensor exponents (negative bases with integral exponents, fractional -> nan, 0^0 = 1).
    g = rng("pow_tensor")
    base = torch.cat([uniform(g, 0.1, 4, 8), torch.tensor([-2.0, -2.0, -1.5, -3.0, 0.0, 0.0, 2.0, -2.0])]).to(F32)
    expo = torch.cat([uniform(g, -2, 3, 8), torch.tensor([3.0, 2.0, 0.5, -1.0, 0.0, 2.0, 0.0, 0.0])]).to(F32)
    case("pow_tensor", {"a": base, "b": expo, "out": r32(torch.pow(f64(base), f64(expo)))})
    g = rng("pow_scalar")
    x = torch.cat([uniform(g, -3, 3, 9), torch.tensor([0.0, -1.0, 2.0])]).to(F32)
    xd = f64(x)
    xp = f64(x.abs() + 0.5)
    case("pow_scalar", {"x": x, "p2": r32(xd ** 2), "p3": r32(xd ** 3), "pm1": r32(xd ** -1),
                        "p0": r32(xd ** 0), "half": r32(xp ** 0.5), "p2_5": r32(xp ** 2.5)})
    # NaN in either operand propagates (torch.maximum / torch.minimum).
    a = torch.tensor([1.0, NAN, NAN, 2.0, -INF], dtype=F32)
    b = torch.tensor([NAN, 1.0, NAN, 3.0, NAN], dtype=F32)
    case("nan_maximum", {"a": a, "b": b, "max": torch.maximum(a, b), "min": torch.minimum(a, b)})
    # maximum / minimum with broadcasting and ties; clamp.
    g = rng("max_min")
    a = torch.round(randn(g, 3, 4, scale=2))
    b = torch.round(randn(g, 4, scale=2))
    case("max_min", {"a": a, "b": b, "max": torch.maximum(a, b), "min": torch.minimum(a, b)})
    g = rng("clamp")
    x = torch.cat([randn(g, 10, scale=3), torch.tensor([INF, -INF, NAN])]).to(F32)
    case("clamp", {"x": x, "out": torch.clamp(x, -1.5, 2.0), "relu6": torch.clamp(x, 0.0, 6.0)})


# ---------------------------------------------------------------------------
def compare_logic_cases():
    a = torch.tensor([1.0, 2.0, 3.0, NAN, INF, -INF, 0.0, -0.0, 5.0, NAN], dtype=F32)
    b = torch.tensor([2.0, 2.0, 1.0, 1.0, INF, 0.0, -0.0, 0.0, NAN, NAN], dtype=F32)
    case("compare_f32", {"a": a, "b": b, "lt": a < b, "gt": a > b, "le": a <= b, "ge": a >= b,
                         "eq": a == b, "ne": a != b})
    g = rng("compare_i32")
    x = randint(g, -3, 4, 3, 5)
    y = randint(g, -3, 4, 5)
    case("compare_i32", {"x": x, "y": y, "lt": x < y, "ge": x >= y, "eq_s": x == 2, "ne_s": x != 0,
                         "gt_s": x > -1, "le_s": x <= 1})
    g = rng("logical_bool")
    p = torch.rand(3, 4, generator=g) < 0.5
    q = torch.rand(4, generator=g) < 0.5
    case("logical_bool", {"p": p, "q": q, "and": p & q, "or": p | q, "not": ~p,
                          "xor": torch.logical_xor(p, q), "sum": p.sum(1), "any": p.amax(1), "all": p.amin(1)})
    g = rng("logical_numeric")
    x = torch.tensor([0.0, 1.5, -2.0, 0.0, NAN, -0.0], dtype=F32)
    y = torch.tensor([1, 0, 3, 0, 0, 7], dtype=I32)
    case("logical_numeric", {"x": x, "y": y, "and": torch.logical_and(x, y), "or": torch.logical_or(x, y),
                             "not_x": torch.logical_not(x), "not_y": torch.logical_not(y)})
    # where: exact select (inf / nan in the branch not taken must not leak).
    g = rng("where_special")
    c = torch.tensor([True, False, True, False, True, False])
    a = torch.tensor([1.0, INF, -INF, NAN, NAN, 2.0], dtype=F32)
    b = torch.tensor([-INF, 3.0, NAN, -INF, 4.0, INF], dtype=F32)
    case("where_special", {"c": c, "a": a, "b": b, "out": torch.where(c, a, b),
                           "neg_inf": torch.where(c, a, -INF)})
    g = rng("where_broadcast")
    c = torch.rand(3, 1, generator=g) < 0.5
    a = randn(g, 1, 4)
    b = randn(g, 3, 4)
    case("where_broadcast", {"c": c, "a": a, "b": b, "out": torch.where(c, a, b),
                             "scalar": torch.where(c.expand(3, 4), 0.5, b), "scalars": torch.where(c, 1.0, -1.0)})
    # Masked softmax: where(mask, x, -inf) feeding softmax; one row fully masked except one.
    g = rng("where_mask_softmax")
    x = randn(g, 4, 5)
    mask = torch.tril(torch.ones(4, 5, dtype=BOOL))
    masked = torch.where(mask, f64(x), -INF)
    case("where_mask_softmax", {"x": x, "mask": mask, "out": r32(torch.softmax(masked, -1))})


# ---------------------------------------------------------------------------
def dtype_arith_cases():
    g = rng("int_arith")
    a = randint(g, -50, 50, 3, 4)
    b = torch.cat([randint(g, 1, 9, 6), -randint(g, 1, 9, 6)]).reshape(3, 4)[torch.randperm(3, generator=g)]
    case("int_arith", {"a": a, "b": b, "add": a + b, "sub": a - b, "mul": a * b, "mod": torch.remainder(a, b),
                       "mod_s": torch.remainder(a, 7), "mod_neg_s": torch.remainder(a, -4), "add_s": a + 3,
                       "mul_s": a * -2, "div": a / b, "add_f": a + 0.5})
    x = torch.tensor([-3, 0, 5, 9, -1, 2], dtype=I32)
    xd = f64(x)
    case("int_unary", {"x": x, "abs": x.abs(), "sign": x.sign(), "neg": -x, "square": x.square(), "relu": x.relu(),
                       "clamp": x.clamp(0, 6), "clamp_f": x.clamp(-1.5, 2.0), "exp": r32(xd.exp()),
                       "sqrt": r32(xd.sqrt()), "pow2": x.pow(2), "pow_half": r32(xd.pow(0.5))})
    c = torch.tensor([True, False, True, False, False, True])
    l = torch.tensor([10, 20, 30, 40, 50, 60], dtype=I64)
    case("where_int", {"c": c, "x": x, "l": l, "tensors": torch.where(c, x, l), "scalar": torch.where(c, x, 2)})
    a = torch.tensor([2147483647, -2147483648, 65536, 123456789], dtype=I32)
    b = torch.tensor([1, -1, 65536, 100], dtype=I32)
    case("int_wrap", {"a": a, "b": b, "add": a + b, "mul": a * b})
    a = torch.tensor([250, 7, 128, 0], dtype=U8)
    b = torch.tensor([10, 3, 128, 1], dtype=U8)
    case("u8_arith", {"a": a, "b": b, "add": a + b, "mul": a * b})
    u = torch.tensor([[3, 200, 17], [0, 7, 255]], dtype=U8)
    case("u8_reduce", {"x": u, "min1": u.amin(1), "max0": u.amax(0), "sum1": u.sum(1)})
    a = torch.tensor([3, -3, 0, 6], dtype=I32)
    b = torch.tensor([0, 0, 0, 4], dtype=I32)
    case("int_div_zero", {"a": a, "b": b, "div": a / b})
    g = rng("i64_arith")
    a = randint(g, -(2 ** 40), 2 ** 40, 6, dtype=I64)
    b = randint(g, 1, 1000, 6, dtype=I64)
    case("i64_arith", {"a": a, "b": b, "add": a + b, "mul": a * b, "mod": torch.remainder(a, b),
                       "sum": a.sum(0, keepdim=True)})
    # Promotion between tensor dtypes.
    g = rng("promotion")
    i = randint(g, -5, 5, 2, 3)
    f = randn(g, 2, 3)
    l = randint(g, -5, 5, 2, 3, dtype=I64)
    h = randn(g, 2, 3).to(F16)
    bo = torch.rand(2, 3, generator=g) < 0.5
    case("promotion", {"i": i, "f": f, "l": l, "h": h, "bo": bo, "i_f": r32(f64(i) + f64(f)), "i_l": i + l,
                       "h_f": r32(f64(h) * f64(f)), "bo_i": bo + i, "h_i": (h.to(F32) - i.to(F32)).to(F16)})
    g = rng("f16_bf16_arith")
    h1 = randn(g, 8, scale=10).to(F16)
    h2 = randn(g, 8, scale=10).to(F16)
    b1 = randn(g, 8, scale=10).to(BF16)
    b2 = randn(g, 8, scale=10).to(BF16)
    case("f16_bf16_arith", {"h1": h1, "h2": h2, "b1": b1, "b2": b2, "h_add": h1 + h2, "h_mul": h1 * h2,
                            "b_add": b1 + b2, "b_mul": b1 * b2, "h_sum": h1.to(F64).sum().to(F32).to(F16)})


# ---------------------------------------------------------------------------
def reduce_cases():
    g = rng("reduce_sum")
    x = randn(g, 2, 3, 4)
    xd = f64(x)
    case("reduce_sum", {"x": x, "s1": r32(xd.sum(1)), "s02k": r32(xd.sum((0, 2), keepdim=True)),
                        "s_last_k": r32(xd.sum(-1, keepdim=True)), "all": r32(xd.sum())})
    g = rng("reduce_max_min")
    x = randn(g, 3, 5)
    x[1, 2] = -INF
    x[2, :] = torch.tensor([1.0, 3.0, 3.0, -2.0, 1.0])
    case("reduce_max_min", {"x": x, "max1": x.amax(1), "min0k": x.amin(0, keepdim=True), "max01": x.amax((0, 1)),
                            "min1k": x.amin(1, keepdim=True)})
    g = rng("reduce_max_nan")
    x = randn(g, 2, 4)
    x[0, 1] = NAN
    case("reduce_max_nan", {"x": x, "max": x.amax(1), "min": x.amin(1)})
    g = rng("reduce_mean_var")
    x = randn(g, 3, 4, 5, scale=2) + 1
    xd = f64(x)
    case("reduce_mean_var", {"x": x, "mean2": r32(xd.mean(2)), "mean01k": r32(xd.mean((0, 1), keepdim=True)),
                             "var1": r32(xd.var(1)), "var2_c0k": r32(xd.var(2, correction=0, keepdim=True)),
                             "std02": r32(xd.std((0, 2))), "std1_c0": r32(xd.std(1, correction=0))})
    # argmax / argmin: first index on ties; i32 results.
    x = torch.tensor([[1.0, 5.0, 5.0, 2.0], [-1.0, -1.0, -3.0, -3.0], [7.0, 0.0, 7.0, 7.0]], dtype=F32)
    case("argmax_ties", {"x": x, "amax1": x.argmax(1).to(I32), "amin1": x.argmin(1).to(I32),
                         "amax0k": x.argmax(0, keepdim=True).to(I32), "amin0": x.argmin(0).to(I32)})
    g = rng("argmax_int")
    x = randint(g, -3, 3, 4, 5)
    case("argmax_int", {"x": x, "amax1": x.argmax(1).to(I32), "amin0": x.argmin(0).to(I32)})
    # NaN counts as the maximum (torch): argmax / argmin give the first NaN.
    x = torch.tensor([[1.0, NAN, 3.0, NAN], [2.0, 0.5, 2.0, -1.0]], dtype=F32)
    case("nan_argmax", {"x": x, "amax1": x.argmax(1).to(I32), "amin1": x.argmin(1).to(I32)})
    g = rng("logsumexp")
    x = randn(g, 3, 4, scale=3)
    x[2, :] = -INF
    xd = f64(x)
    case("logsumexp", {"x": x, "lse1": r32(torch.logsumexp(xd, 1)), "lse0k": r32(torch.logsumexp(xd, 0, keepdim=True))})
    g = rng("logsumexp_multi")
    x = randn(g, 2, 3, 4, scale=5)
    case("logsumexp_multi", {"x": x, "lse12": r32(torch.logsumexp(f64(x), (1, 2)))})
    g = rng("int_reduce")
    x = randint(g, -100, 100, 3, 4)
    case("int_reduce", {"x": x, "sum1": x.sum(1), "max0": x.amax(0), "min1": x.amin(1), "sum_all": x.sum(),
                        "mean1": r32(f64(x).mean(1))})
    g = rng("softmax")
    x = randn(g, 3, 6, scale=4)
    x[0, 0] = 60.0  # large logits must not overflow
    x[1, 2] = -INF
    xd = f64(x)
    case("softmax", {"x": x, "sm1": r32(torch.softmax(xd, 1)), "sm0": r32(torch.softmax(xd, 0)),
                     "lsm1": r32(torch.log_softmax(xd, 1)), "lsm0": r32(torch.log_softmax(xd, 0))})
    g = rng("layer_norm")
    x = randn(g, 2, 3, 8, scale=3) + 2
    xd = f64(x)
    F = torch.nn.functional
    case("layer_norm", {"x": x, "ln_last": r32(F.layer_norm(xd, (8,), eps=1e-5)),
                        "ln_two": r32(F.layer_norm(xd, (3, 8), eps=1e-3))})
    g = rng("rms_norm")
    x = randn(g, 4, 8, scale=2)
    xd = f64(x)
    rms = lambda t, dims, eps: t * torch.rsqrt(t.pow(2).mean(dims, keepdim=True) + eps)
    case("rms_norm", {"x": x, "rms_last": r32(rms(xd, (1,), 1e-6)), "rms_all": r32(rms(xd, (0, 1), 1e-5))})


# ---------------------------------------------------------------------------
def matmul_cases():
    shapes = [
        ("matmul_1d_1d", (5,), (5,)),
        ("matmul_1d_2d", (4,), (4, 3)),
        ("matmul_2d_1d", (3, 4), (4,)),
        ("matmul_2d_2d", (5, 7), (7, 6)),
        ("matmul_3d_batched", (2, 3, 4), (2, 4, 5)),
        ("matmul_3d_2d", (2, 3, 4), (4, 5)),
        ("matmul_4d_broadcast", (2, 1, 3, 4), (1, 3, 4, 2)),
        ("matmul_1d_3d", (4,), (2, 4, 3)),
    ]
    for name, sa, sb in shapes:
        g = rng(name)
        a = randn(g, *sa)
        b = randn(g, *sb)
        case(name, {"a": a, "b": b, "out": r32(torch.matmul(f64(a), f64(b)))})
    # A larger one to exercise accumulation.
    g = rng("matmul_large")
    a = randn(g, 16, 64)
    b = randn(g, 64, 24)
    case("matmul_large", {"a": a, "b": b, "out": r32(f64(a) @ f64(b))})
    # Half-precision operands: expected is the exact product rounded once to the dtype.
    g = rng("matmul_half")
    h1 = randn(g, 4, 16).to(F16)
    h2 = randn(g, 16, 3).to(F16)
    b1 = randn(g, 4, 16).to(BF16)
    b2 = randn(g, 16, 3).to(BF16)
    case("matmul_half", {"h1": h1, "h2": h2, "b1": b1, "b2": b2, "h": (f64(h1) @ f64(h2)).to(F16),
                         "b": (f64(b1) @ f64(b2)).to(BF16), "h_softmax": torch.softmax(f64(h1), 1).to(F16)})
    # Integer matmul stays integer.
    g = rng("matmul_int")
    a = randint(g, -5, 5, 3, 4)
    b = randint(g, -5, 5, 4, 2)
    case("matmul_int", {"a": a, "b": b, "out": a @ b})


# ---------------------------------------------------------------------------
# Movement ops, each feeding compute so the view is read by a kernel.
def movement_cases():
    g = rng("permute_matmul")
    a = randn(g, 4, 2, 3)   # permute(1, 0, 2) -> [2, 4, 3]
    b = randn(g, 5, 3)      # .t() -> [3, 5]
    case("permute_matmul", {"a": a, "b": b, "out": r32(f64(a).permute(1, 0, 2) @ f64(b).t())})
    g = rng("transpose_matmul")
    a = randn(g, 2, 4, 3)
    b = randn(g, 2, 4, 5)
    case("transpose_matmul", {"a": a, "b": b, "out": r32(f64(a).transpose(1, 2) @ f64(b))})
    g = rng("slice_reduce")
    x = randn(g, 4, 7)
    xd = f64(x)
    case("slice_reduce", {"x": x, "sum": r32(xd[1:3, 2:6].sum(1)), "max": x[:, 3:5].amax(0),
                          "mean": r32(xd[2:, 1:].mean((0, 1)))})
    g = rng("pad_add")
    x = randn(g, 2, 3)
    y = randn(g, 3, 5)
    padded = torch.nn.functional.pad(x, (0, 2, 1, 0))  # rows: 1 before; cols: 2 after
    case("pad_add", {"x": x, "y": y, "out": padded + y})
    g = rng("pad_value")
    x = randn(g, 2, 3)
    padded = torch.nn.functional.pad(x, (1, 1, 0, 2), value=-7.5)
    along = torch.nn.functional.pad(x, (2, 0), value=3.0)
    case("pad_value", {"x": x, "pad": padded, "pad_max": padded.amax(1), "along": along,
                       "neg_inf_lse": r32(torch.logsumexp(torch.nn.functional.pad(f64(x), (0, 3), value=-INF), 1))})
    g = rng("transpose_reshape")
    x = randn(g, 3, 4)
    case("transpose_reshape", {"x": x, "perm": x.reshape(3, 2, 2).permute(2, 0, 1).contiguous(),
                               "t_sum": x.t().reshape(4, 3, 1).sum(2)})
    g = rng("reshape_ops")
    x = randn(g, 2, 3, 4)
    case("reshape_ops", {"x": x, "reshape": x.reshape(4, -1) + 1, "split": x.reshape(2, 3, 2, 2).sum(3),
                         "merge": x.reshape(6, 4).amax(0), "flatten": x.flatten(1, 2).sum(1),
                         "flat_all": x.flatten() * 3, "unsq_sq": x.unsqueeze(1).squeeze(1).sum(2)})
    g = rng("expand_ops")
    x = randn(g, 3, 1)
    v = randn(g, 4)
    case("expand_ops", {"x": x, "v": v, "expand": x.expand(3, 4) * v,
                        "expand_dim": v.unsqueeze(0).expand(2, 4) + torch.arange(2, dtype=F32).unsqueeze(1),
                        "lead": x.expand(2, 3, 5).sum(0)})
    # Broadcasting a padded (all-zero) row needs a copy first.
    g = rng("expand_padded")
    x = randn(g, 1, 4)
    y = randn(g, 3, 4)
    case("expand_padded", {"x": x, "y": y, "out": y + x.expand(3, 4)})
    # Reshapes a view cannot express: copied first (transpose / slice / pad / permute).
    g = rng("reshape_copy")
    x = randn(g, 3, 4)
    z = randn(g, 2, 3, 4)
    case("reshape_copy", {"x": x, "z": z, "t_reshape": x.t().reshape(2, 6), "t_flat2": x.t().reshape(-1) * 2,
                          "slice_flat": x[:, 1:3].reshape(-1), "pad_flat": torch.nn.functional.pad(x, (1, 0)).reshape(5, 3),
                          "perm_merge": z.permute(0, 2, 1).reshape(8, 3), "perm_flatten": z.permute(2, 1, 0).flatten(1, 2),
                          "perm_split": z.permute(2, 0, 1).reshape(4, 2, 3, 1).sum(3)})
    g = rng("concat_stack")
    a = randn(g, 2, 3)
    b = randn(g, 4, 3)
    c = randn(g, 2, 2)
    case("concat_stack", {"a": a, "b": b, "c": c, "cat0": torch.cat([a, b], 0), "cat1": torch.cat([a, c], 1),
                          "stack0": torch.stack([a, a * 2, a + 1], 0), "stack2": torch.stack([a, c[:, :1].expand(2, 3)], 2)})
    g = rng("concat_dtypes")
    a = randint(g, -5, 5, 2, 2)
    b = randn(g, 2, 1)
    case("concat_dtypes", {"a": a, "b": b, "out": torch.cat([a.to(F32), b], 1)})
    g = rng("slice_permute_chain")
    x = randn(g, 3, 4, 5)
    y = x.permute(2, 0, 1)[1:4, :, 1:3]   # [3, 3, 2]
    case("slice_permute_chain", {"x": x, "out": y * 2 + 1, "sum": r32(f64(y).sum(1))})


# ---------------------------------------------------------------------------
def indexing_cases():
    g = rng("gather_flat")
    data = randn(g, 3, 4)
    idx = torch.tensor([[0, 5, 5, 11, 3], [2, 2, 2, 7, 0]], dtype=I32)  # repeats read the same element
    sidx = torch.tensor([5, 0, 0, 3], dtype=I64)  # into the logical [3, 2] slice data[:, 1:3]
    case("gather_flat", {"data": data, "idx": idx, "sidx": sidx, "out": data.reshape(-1)[idx.long()],
                         "sliced": data[:, 1:3].reshape(-1)[sidx]})
    g = rng("gather_elements")
    data = randn(g, 3, 4)
    i0 = torch.tensor([[2, 0, 1, 2], [2, 2, 0, 0]], dtype=I64)
    i1 = torch.tensor([[3, 3, 0], [1, 0, 1], [2, 2, 2]], dtype=I64)
    case("gather_elements", {"data": data, "i0": i0, "i1": i1, "ax0": torch.gather(data, 0, i0),
                             "ax1": torch.gather(data, 1, i1)})
    g = rng("gather_elements_transposed")
    data = randn(g, 4, 3)
    idx = torch.tensor([[1, 0, 3, 3], [2, 2, 0, 1]], dtype=I32)
    case("gather_elements_transposed", {"data": data, "idx": idx, "out": torch.gather(data.t(), 1, idx.long())})
    g = rng("index_select")
    data = randn(g, 5, 3)
    rows = torch.tensor([4, 0, 4, 2], dtype=I32)
    cols = torch.tensor([2, 2, 0], dtype=I64)
    data3 = randn(g, 2, 4, 3)
    mid = torch.tensor([3, 1, 3], dtype=I32)
    case("index_select", {"data": data, "rows": rows, "cols": cols, "data3": data3, "mid": mid,
                          "ax0": data.index_select(0, rows.long()), "ax1": data.index_select(1, cols),
                          "mid1": data3.index_select(1, mid.long())})
    g = rng("embedding_int")
    table = randint(g, -1000, 1000, 6, 3)
    ids = torch.tensor([5, 1, 1, 0], dtype=I32)
    case("embedding_int", {"table": table, "ids": ids, "out": table[ids.long()]})
    # Flat scatter, repeated indexes: last write wins.
    g = rng("scatter_flat")
    dest = randn(g, 3, 4)
    idx = torch.tensor([1, 5, 1, 11, 5, 5], dtype=I32)
    src = randn(g, 6)
    out = dest.clone().reshape(-1)
    for i, v in zip(idx.tolist(), src.tolist()):
        out[i] = v
    const = dest.clone().reshape(-1)
    const[idx.long()] = 7.0
    dest_t = dest.t().contiguous().reshape(-1)  # scatter into the logical [4, 3] transposed view
    for i, v in zip(idx.tolist(), src.tolist()):
        dest_t[i] = v
    case("scatter_flat", {"dest": dest, "idx": idx, "src": src, "out": out.reshape(3, 4), "const": const.reshape(3, 4),
                          "dest_t": dest_t.reshape(4, 3)})
    # scatter_elements (torch.Tensor.scatter) with repeated indexes within a row / column.
    g = rng("scatter_elements")
    dest = randn(g, 3, 5)
    i1 = torch.tensor([[0, 4, 0], [2, 2, 1], [3, 1, 3]], dtype=I64)
    src = randn(g, 3, 4)  # larger than the indexes: only its leading window is used
    i0 = torch.tensor([[2, 0, 2, 1, 0], [2, 1, 1, 1, 0]], dtype=I64)
    src0 = randn(g, 2, 5)

    def scatter_loop(dst, axis, index, source):
        res = dst.clone()
        for pos in np.ndindex(*index.shape):
            target = list(pos)
            target[axis] = int(index[pos])
            res[tuple(target)] = source[pos]
        return res

    unique = torch.tensor([[4, 0, 1], [2, 3, 1], [0, 1, 3]], dtype=I64)
    assert torch.equal(scatter_loop(dest, 1, unique, src), dest.clone().scatter(1, unique, src))
    case("scatter_elements", {"dest": dest, "i1": i1, "src": src, "i0": i0, "src0": src0,
                              "ax1": scatter_loop(dest, 1, i1, src), "ax0": scatter_loop(dest, 0, i0, src0),
                              "scalar": dest.clone().scatter(1, i1, -2.5)})
    # argsort with ties: stable.
    x = torch.tensor([[3.0, 1.0, 2.0, 1.0, 3.0, 0.0], [5.0, 5.0, 5.0, -1.0, 5.0, -1.0]], dtype=F32)
    case("argsort_ties", {"x": x, "asc": stable_order(x, 1, False).to(I32), "desc": stable_order(x, 1, True).to(I32),
                          "asc0": stable_order(x, 0, False).to(I32), "desc0": stable_order(x, 0, True).to(I32)})
    # NaN sorts as the largest value (torch.sort).
    x = torch.tensor([[3.0, NAN, 1.0, NAN, 2.0]], dtype=F32)
    case("nan_argsort", {"x": x, "asc": stable_order(x, 1, False).to(I32), "desc": stable_order(x, 1, True).to(I32)})
    g = rng("argsort_int")
    x = randint(g, 0, 4, 3, 7)
    case("argsort_int", {"x": x, "asc": stable_order(x, 1, False).to(I32), "desc": stable_order(x, -1, True).to(I32)})
    g = rng("argsort_random")
    x = randn(g, 4, 9)
    case("argsort_random", {"x": x, "asc": stable_order(x, 1, False).to(I32), "desc0": stable_order(x, 0, True).to(I32)})
    # topk: largest first, ties lower index first.
    x = torch.tensor([[1.0, 4.0, 4.0, 2.0, 4.0, 0.0], [2.0, 2.0, 2.0, 2.0, 1.0, 3.0]], dtype=F32)
    order = stable_order(x, 1, True)[:, :3]
    order0 = stable_order(x, 0, True)[:1, :]
    case("topk_ties", {"x": x, "idx": order.to(I32), "vals": torch.gather(x, 1, order), "idx0": order0.to(I32),
                       "vals0": torch.gather(x, 0, order0)})
    g = rng("topk_random")
    x = randn(g, 3, 10)
    vals, idx = torch.topk(x, 4, dim=1)  # no ties among random floats, so torch.topk is well defined
    case("topk_random", {"x": x, "idx": idx.to(I32), "vals": vals})
    g = rng("cumsum")
    x = randn(g, 3, 5)
    x[2, 1] = INF
    xd = f64(x)
    case("cumsum", {"x": x, "c1": r32(torch.cumsum(xd, 1)), "c0": r32(torch.cumsum(xd, 0))})
    g = rng("cumsum_int")
    x = randint(g, -10, 10, 2, 6)
    p = torch.rand(7, generator=g) < 0.5
    case("cumsum_int", {"x": x, "p": p, "c1": torch.cumsum(x, 1), "cb": torch.cumsum(p, 0)})
    idx = torch.tensor([[0, 3, 1], [3, 3, 2]], dtype=I64)
    case("one_hot", {"idx": idx, "out": torch.nn.functional.one_hot(idx, 5).to(I32)})
    g = rng("tril_triu")
    x = randn(g, 2, 3, 4)
    case("tril_triu", {"x": x, "tril": torch.tril(x), "tril1": torch.tril(x, 1), "trilm1": torch.tril(x, -1),
                       "triu": torch.triu(x), "triu1": torch.triu(x, 1), "triu_m2": torch.triu(x, -2)})


# ---------------------------------------------------------------------------
def creation_cast_cases():
    case("arange", {"out": torch.arange(7, dtype=I32), "f32": torch.arange(5, dtype=F32) * 0.5})
    case("arange_options", {
        "f_half": torch.arange(0.5, 3.0, 0.25, dtype=F32),
        "f_neg": torch.arange(5.0, -5.0, -1.5, dtype=F32),
        "f_frac": torch.arange(0.1, 1.0, 0.3, dtype=F32),
        "i32": torch.arange(2, 20, 3, dtype=I32),
        "i64_neg": torch.arange(10, 0, -3, dtype=I64),
    })
    n = torch.arange(12)
    case("iota", {"out": ((n // 3) * 10 + n % 3).reshape(4, 3).to(I32), "mod": (n % 5).to(I32)})
    g = rng("zeros_ones_like")
    x = randn(g, 2, 3)
    case("zeros_ones_like", {"x": x, "out": x + torch.ones_like(x) * 2 + torch.zeros_like(x)})
    # Casts.
    x = torch.tensor([-2.7, -0.5, 0.5, 2.7, 100.9, -100.9, 123456.75, -0.0, 3.0], dtype=F32)
    case("cast_f32_int", {"x": x, "i32": x.to(I32), "i64": x.to(I64)})
    x = torch.tensor([0.0, 0.4, 1.0, 2.9, 255.0, 100.5], dtype=F32)
    case("cast_f32_u8", {"x": x, "u8": x.to(U8)})
    x = torch.tensor([0.0, -0.0, 0.1, -3.0, NAN, INF], dtype=F32)
    i = torch.tensor([0, 3, -1], dtype=I32)
    case("cast_f32_bool", {"x": x, "i": i, "bool": x.to(BOOL), "i32_bool": i.to(BOOL)})
    x = torch.tensor([1.0 + 2 ** -11, 1.0 + 3 * 2 ** -11, 1.0 + 2 ** -12, 65504.0, 65519.0, 65520.0, 1e6,
                      1e-8, 3e-6, -2.5e-5, 6.1e-5, -0.1, 0.1, 3.14159265, NAN, -INF], dtype=F32)
    case("cast_f16", {"x": x, "f16": x.to(F16), "round_trip": x.to(F16).to(F32)})
    x = torch.tensor([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, 1.0 + 2 ** -9, 3.0e38, 1e-39, -0.1, 0.1, 3.14159265,
                      65504.0, 123456.0, NAN, INF], dtype=F32)
    case("cast_bf16", {"x": x, "bf16": x.to(BF16), "f16_to_bf16": x.to(F16).to(BF16)})
    h = torch.tensor([0.5, -1.25, 1000.0, 0.0999755859375, 65504.0], dtype=F16)
    case("cast_from_f16", {"h": h, "f32": h.to(F32), "i32": h.to(I32), "bf16": h.to(BF16)})
    l = torch.tensor([2 ** 31 + 5, -(2 ** 31) - 7, 123, -1, 2 ** 40 + 3], dtype=I64)
    i = torch.tensor([300, -1, 2049, 16777217, 255, 0], dtype=I32)
    b = torch.tensor([True, False, True])
    u = torch.tensor([0, 200, 255], dtype=U8)
    case("cast_ints", {"l": l, "i": i, "b": b, "u": u, "l_i32": l.to(I32), "i_u8": i.to(U8), "i_f16": i.to(F16),
                       "i_f32": i.to(F32), "i_i64": i.to(I64), "b_f32": b.to(F32), "b_i32": b.to(I32),
                       "u_i32": u.to(I32), "u_f32": u.to(F32)})


# ---------------------------------------------------------------------------
# Symbolic dimensions: one graph, executed at two sizes of 's'.
def symbolic_cases():
    sizes = (3, 5)

    def per_size(name, make):
        tensors = {}
        for s in sizes:
            for role, t in make(rng(f"{name}.{s}"), s).items():
                tensors[f"{role}.{s}"] = t
        case(name, tensors)

    def ew_reduce(g, s):
        x = randn(g, s, 4)
        xd = f64(x)
        centered = xd - xd.mean(0, keepdim=True)
        return {"x": x, "out": r32((centered * centered).sum(0)), "ew": r32(torch.exp(xd * 0.5) + 1),
                "rowmax": x.amax(1), "var": r32(xd.var(0))}

    def matmul_batch(g, s):
        a = randn(g, s, 3, 4)
        b = randn(g, 4, 2)
        return {"a": a, "b": b, "out": r32(f64(a) @ f64(b))}

    def matmul_inner(g, s):
        a = randn(g, 2, s)
        b = randn(g, s, 3)
        return {"a": a, "b": b, "out": r32(f64(a) @ f64(b))}

    def causal_softmax(g, s):
        x = randn(g, s, s)
        mask = torch.tril(torch.ones(s, s, dtype=BOOL))
        return {"x": x, "out": r32(torch.softmax(torch.where(mask, f64(x), -INF), -1))}

    def concat_slice(g, s):
        a = randn(g, s, 2)
        b = randn(g, 2, 2)
        cat = torch.cat([a, b], 0)
        return {"a": a, "b": b, "cat": cat, "tail": cat[1:].sum(0), "pad": torch.nn.functional.pad(a, (0, 0, 1, 1))}

    def arange_scale(g, s):
        x = randn(g, s)
        return {"x": x, "out": x * torch.arange(s, dtype=F32), "cum": r32(torch.cumsum(f64(x), 0)),
                "argsort": stable_order(x, 0, False).to(I32)}

    def reshape(g, s):
        x = randn(g, s, 4)
        return {"x": x, "flat": x.reshape(-1) * 2, "split": x.reshape(s, 2, 2).sum(2), "t_flat": x.t().reshape(-1)}

    def embedding(g, s):
        table = randn(g, 6, 3)
        ids = torch.randint(0, 6, (s,), generator=g, dtype=I64).to(I32)
        return {"table": table, "ids": ids, "out": table[ids.long()],
                "onehot": torch.nn.functional.one_hot(ids.long(), 6).to(I32)}

    per_size("sym_ew_reduce", ew_reduce)
    per_size("sym_reshape", reshape)
    per_size("sym_embedding", embedding)
    per_size("sym_matmul_batch", matmul_batch)
    per_size("sym_matmul_inner", matmul_inner)
    per_size("sym_causal_softmax", causal_softmax)
    per_size("sym_concat_slice", concat_slice)
    per_size("sym_arange_scale", arange_scale)


def main():
    torch.manual_seed(0)
    unary_cases()
    binary_cases()
    compare_logic_cases()
    dtype_arith_cases()
    reduce_cases()
    matmul_cases()
    movement_cases()
    indexing_cases()
    creation_cast_cases()
    symbolic_cases()
    lines = ["# Generated by tools/gen_op_fixtures.py; do not edit. Rerun: python3 tools/gen_op_fixtures.py",
             f"# torch {torch.__version__.split('+')[0]}, {len(CASES)} cases"]
    for name, tensors in CASES:
        lines.append(f"case {name}")
        lines.extend(fmt_tensor(role, t) for role, t in tensors)
        lines.append("end")
    os.makedirs(os.path.dirname(OUT_PATH), exist_ok=True)
    with open(OUT_PATH, "w", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {len(CASES)} cases to {os.path.relpath(OUT_PATH, REPO)} ({os.path.getsize(OUT_PATH)} bytes)")


if __name__ == "__main__":
    main()
