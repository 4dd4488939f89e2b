#pragma once
// Elementwise ops, each expanded into HLIR primitives. Float math on integer or
// bool tensors first casts them to f32, as torch does.
#include <cmath>
#include <optional>
#include <vector>

#include "luminal/graph/ops_common.hpp"

namespace luminal {
namespace detail {

inline void check_not_bool(const GraphTensor& x, const char* what) {
    check(x.dtype() != DType::Bool, what, "not supported on bool tensors (use logical_not / logical ops)");
}

inline GraphTensor scale(const GraphTensor& x, double factor) {
    return binary(OpKind::Mul, x, constant(x.graph(), factor, x.dtype()), "mul");
}

// erf from Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7, below f32 resolution
// near 1): erf(x) = sign(x) * (1 - poly(t) * exp(-x^2)), t = 1 / (1 + p|x|).
inline GraphTensor erf(const GraphTensor& x) {
    constexpr double p = 0.3275911, a1 = 0.254829592, a2 = -0.284496736, a3 = 1.421413741, a4 = -1.453152027,
                     a5 = 1.061405429;
    GraphTensor ax = x.abs();
    GraphTensor t = (ax * p + 1.0).recip();
    GraphTensor poly = t * (t * (t * (t * (t * a5 + a4) + a3) + a2) + a1);
    GraphTensor e = 1.0 - poly * (x * x * -1.0).exp();
    return e * x.sign();
}

}  // namespace detail

inline GraphTensor add_fn::apply(const GraphTensor& a, const GraphTensor& b) {
    return detail::binary(OpKind::Add, a, b, "add");
}
inline GraphTensor mul_fn::apply(const GraphTensor& a, const GraphTensor& b) {
    return detail::binary(OpKind::Mul, a, b, "mul");
}
inline GraphTensor sub_fn::apply(const GraphTensor& a, const GraphTensor& b) {
    detail::check_not_bool(a, "sub");
    detail::check_not_bool(b, "sub");
    DType t = promote(a.dtype(), b.dtype());
    return detail::binary(OpKind::Add, a, detail::scale(ops::cast(b, t), -1), "sub");
}
// True division: integers divide as f32 (torch semantics), computed as a * (1 / b).
inline GraphTensor div_fn::apply(const GraphTensor& a, const GraphTensor& b) {
    DType t = promote(a.dtype(), b.dtype());
    if (!is_float(t)) t = DType::F32;
    return detail::binary(OpKind::Mul, a, detail::unary(OpKind::Recip, ops::cast(b, t)), t, "div");
}
inline GraphTensor mod_fn::apply(const GraphTensor& a, const GraphTensor& b) {
    detail::check_not_bool(a, "mod");
    return detail::binary(OpKind::Mod, a, b, "mod");
}
inline GraphTensor neg_fn::apply(const GraphTensor& x) {
    detail::check_not_bool(x, "neg");
    return detail::scale(x, -1);
}
inline GraphTensor recip_fn::apply(const GraphTensor& x) { return detail::unary(OpKind::Recip, detail::to_float(x)); }
inline GraphTensor sqrt_fn::apply(const GraphTensor& x) { return detail::unary(OpKind::Sqrt, detail::to_float(x)); }
inline GraphTensor rsqrt_fn::apply(const GraphTensor& x) {
    return detail::in_f32(x, [](const GraphTensor& f) { return GraphTensor(f.sqrt().recip()); });
}
inline GraphTensor exp2_fn::apply(const GraphTensor& x) { return detail::unary(OpKind::Exp2, detail::to_float(x)); }
inline GraphTensor log2_fn::apply(const GraphTensor& x) { return detail::unary(OpKind::Log2, detail::to_float(x)); }
inline GraphTensor sin_fn::apply(const GraphTensor& x) { return detail::unary(OpKind::Sin, detail::to_float(x)); }
inline GraphTensor exp_fn::apply(const GraphTensor& x) {
    return detail::in_f32(x, [](const GraphTensor& f) { return GraphTensor((f * std::numbers::log2e).exp2()); });
}
inline GraphTensor log_fn::apply(const GraphTensor& x) {
    return detail::in_f32(x, [](const GraphTensor& f) { return GraphTensor(f.log2() * std::numbers::ln2); });
}
inline GraphTensor cos_fn::apply(const GraphTensor& x) {
    return detail::in_f32(x, [](const GraphTensor& f) { return GraphTensor((f + std::numbers::pi / 2).sin()); });
}
inline GraphTensor square_fn::apply(const GraphTensor& x) { return x * x; }
inline GraphTensor sigmoid_fn::apply(const GraphTensor& x) {
    return detail::in_f32(x, [](const GraphTensor& f) { return GraphTensor(((-f).exp() + 1.0).recip()); });
}
inline GraphTensor tanh_fn::apply(const GraphTensor& x) {
    return detail::in_f32(x, [](const GraphTensor& f) { return GraphTensor((f * 2.0).sigmoid() * 2.0 - 1.0); });
}
inline GraphTensor silu_fn::apply(const GraphTensor& x) {
    return detail::in_f32(x, [](const GraphTensor& f) { return GraphTensor(f * f.sigmoid()); });
}
inline GraphTensor relu_fn::apply(const GraphTensor& x) { return x.maximum(0); }
inline GraphTensor gelu_fn::apply(const GraphTensor& x) {
    return detail::in_f32(x, [](const GraphTensor& f) {
        return GraphTensor(f * 0.5 * (detail::erf(f * std::numbers::sqrt2 / 2) + 1.0));
    });
}
inline GraphTensor gelu_tanh_fn::apply(const GraphTensor& x) {
    return detail::in_f32(x, [](const GraphTensor& f) {
        const double k = 0.7978845608028654;  // sqrt(2 / pi)
        return GraphTensor(f * 0.5 * (((f + f * f * f * 0.044715) * k).tanh() + 1.0));
    });
}
// x * (+1 or -1): exact, keeps infinities and NaN.
inline GraphTensor abs_fn::apply(const GraphTensor& x) {
    if (x.dtype() == DType::Bool || x.dtype() == DType::U8) return x;
    return x * (1 - ops::cast(x < 0, x.dtype()) * 2);
}
inline GraphTensor sign_fn::apply(const GraphTensor& x) {
    if (x.dtype() == DType::Bool) return x;
    return ops::cast(0 < x, x.dtype()) - ops::cast(x < 0, x.dtype());
}

inline GraphTensor lt_fn::apply(const GraphTensor& a, const GraphTensor& b) {
    return detail::binary(OpKind::LessThan, a, b, "lt");
}
inline GraphTensor gt_fn::apply(const GraphTensor& a, const GraphTensor& b) { return lt_fn::apply(b, a); }
// NaN is not finite in either direction: !(x < inf) && !(-inf < x) holds only for NaN.
inline GraphTensor isnan_fn::apply(const GraphTensor& x) {
    if (!is_float(x.dtype())) return ops::cast(ops::zeros_like(x), DType::Bool);
    double inf = std::numeric_limits<double>::infinity();
    return (!(x < inf)).logical_and(!(x > -inf));
}
// Equal when neither is below the other, excluding NaN (which compares unordered).
inline GraphTensor eq_fn::apply(const GraphTensor& a, const GraphTensor& b) {
    DType t = promote(a.dtype(), b.dtype());
    GraphTensor x = ops::cast(a, t), y = ops::cast(b, t);
    GraphTensor ordered_equal = (!(x < y)).logical_and(!(y < x));
    if (!is_float(t)) return ordered_equal;
    return ordered_equal & !x.isnan() & !y.isnan();
}
inline GraphTensor ne_fn::apply(const GraphTensor& a, const GraphTensor& b) { return !a.eq(b); }
inline GraphTensor le_fn::apply(const GraphTensor& a, const GraphTensor& b) { return (a < b) | a.eq(b); }
inline GraphTensor ge_fn::apply(const GraphTensor& a, const GraphTensor& b) { return le_fn::apply(b, a); }
inline GraphTensor logical_not_fn::apply(const GraphTensor& x) {
    if (x.dtype() == DType::Bool) return detail::binary(OpKind::LessThan, x, detail::constant(x.graph(), 1, DType::Bool), "logical_not");
    return x.eq(0);
}
inline GraphTensor logical_and_fn::apply(const GraphTensor& a, const GraphTensor& b) {
    return detail::binary(OpKind::Mul, ops::cast(a, DType::Bool), ops::cast(b, DType::Bool), DType::Bool, "logical_and");
}
inline GraphTensor logical_or_fn::apply(const GraphTensor& a, const GraphTensor& b) {
    return detail::binary(OpKind::Add, ops::cast(a, DType::Bool), ops::cast(b, DType::Bool), DType::Bool, "logical_or");
}
namespace detail {
// torch.maximum/minimum propagate NaN from either side; comparisons alone only
// catch it in `a`, so a `b` that may be NaN is tested explicitly.
inline GraphTensor take_b(GraphTensor b_wins, const GraphTensor& b) {
    auto value = constant_value(b);
    bool may_be_nan = is_float(b.dtype()) && !(value && !std::isnan(*value));
    return may_be_nan ? GraphTensor(b_wins.logical_or(b.isnan())) : b_wins;
}
}  // namespace detail
inline GraphTensor maximum_fn::apply(const GraphTensor& a, const GraphTensor& b) {
    return where(detail::take_b(a < b, b), b, a);
}
inline GraphTensor minimum_fn::apply(const GraphTensor& a, const GraphTensor& b) {
    return where(detail::take_b(b < a, b), b, a);
}

// Small integral scalar exponents multiply out exactly (negative bases work);
// otherwise exp2(y * log2|x|) with the sign of odd integer powers restored,
// NaN for negative bases with fractional exponents, and x^0 == 1.
inline GraphTensor pow_fn::apply(const GraphTensor& x, const GraphTensor& y) {
    if (auto e = detail::constant_value(y); e && std::floor(*e) == *e && std::abs(*e) <= 8 && y.rank() == 0) {
        int n = static_cast<int>(std::abs(*e));
        if (n == 0) return ops::ones_like(ops::cast(x, promote(x.dtype(), y.dtype())));
        GraphTensor result = ops::cast(x, promote(x.dtype(), y.dtype()));
        GraphTensor base = result;
        for (int i = 1; i < n; ++i) result = result * base;
        return *e < 0 ? result.recip() : result;
    }
    if (auto e = detail::constant_value(y); e && *e == 0.5) return x.sqrt();
    GraphTensor fx = detail::to_float(x), fy = ops::cast(y, fx.dtype());
    GraphTensor magnitude = (fy * fx.abs().log2()).exp2();
    GraphTensor integral = (fy % 1.0).eq(0);
    GraphTensor odd = (fy % 2.0).eq(1);
    double nan = std::numeric_limits<double>::quiet_NaN();
    GraphTensor negative_base = where(integral, where(odd, -magnitude, magnitude), nan);
    return where(fy.eq(0), 1.0, where(fx < 0, negative_base, magnitude));
}

namespace detail {

// The order that permutes the whole of `shape`, laid out in order, into `view`, if `view` is such a permutation.
inline std::optional<Axes> permutation_of(const ShapeTracker& view, const Shape& shape) {
    const ShapeTracker whole(shape);
    if (view.rank() != shape.size() || view.is_padded_or_masked()) return std::nullopt;
    Axes order;
    std::vector<bool> used(shape.size(), false);
    for (const ShapeTracker::Axis& axis : view.axes()) {
        std::size_t from = 0;
        while (from < shape.size() && (used[from] || !(whole.axes()[from].stride == axis.stride) || !(shape[from] == axis.size))) ++from;
        if (from == shape.size()) return std::nullopt;
        used[from] = true;
        order.push_back(static_cast<int>(from));
    }
    std::vector<std::size_t> unsigned_order(order.begin(), order.end());
    if (!(whole.permute(unsigned_order) == view)) return std::nullopt;
    return order;
}

}  // namespace detail

namespace ops {

// A permuted view of a whole node is cast as the node itself, then permuted: the same
// elements cast, but the Cast reads its input in order, which is what the rules that read a
// narrow matrix as stored look for (an ATen product of a bf16 weight reads it transposed).
inline GraphTensor cast(const GraphTensor& x, DType dtype) {
    if (x.dtype() == dtype) return x;
    const Shape& stored = x.graph().node(x.id()).shape;
    if (!x.view().is_contiguous())
        if (std::optional<Axes> order = detail::permutation_of(x.view(), stored))
            return detail::make_node(Op(OpKind::Cast), {x.with_view(ShapeTracker(stored))}, stored, dtype).permute(*order);
    return detail::make_node(Op(OpKind::Cast), {x}, x.shape(), dtype);
}

// Integral bounds keep an integer tensor's dtype (torch.clamp(int_tensor, 0, 6) is int).
inline GraphTensor clamp(const GraphTensor& x, double lo, double hi) {
    return x.maximum(Scalar{lo, std::floor(lo) == lo}).minimum(Scalar{hi, std::floor(hi) == hi});
}

inline GraphTensor zeros_like(const GraphTensor& x) {
    return detail::broadcast_to(detail::constant(x.graph(), 0, x.dtype()), x.shape(), "zeros_like");
}
inline GraphTensor ones_like(const GraphTensor& x) {
    return detail::broadcast_to(detail::constant(x.graph(), 1, x.dtype()), x.shape(), "ones_like");
}

inline GraphTensor output(const GraphTensor& x) {
    GraphTensor out = detail::make_node(Op(OpKind::Output), {x}, x.shape(), x.dtype());
    out.graph().mark_output(out.id());
    return out;
}

// Exact select: a and b are interleaved into one buffer and gathered from, so
// infinities and NaN in the branch not taken cannot leak (a multiply-by-mask
// would turn inf * 0 into NaN).
inline GraphTensor where(const GraphTensor& condition, const GraphTensor& a, const GraphTensor& b) {
    detail::check_same_graph(condition, a, "where");
    detail::check_same_graph(condition, b, "where");
    DType t = promote(a.dtype(), b.dtype());
    Graph& g = condition.graph();
    Shape shape = detail::broadcast_shape(g, detail::broadcast_shape(g, condition.shape(), a.shape(), "where"), b.shape(), "where");
    GraphTensor x = detail::broadcast_to(cast(a, t), shape, "where").unsqueeze(-1).pad_along(-1, 0, 1);
    GraphTensor y = detail::broadcast_to(cast(b, t), shape, "where").unsqueeze(-1).pad_along(-1, 1, 0);
    GraphTensor both = detail::binary(OpKind::Add, x, y, t, "where");
    GraphTensor c = detail::broadcast_to(cast(condition, DType::I32), shape, "where");
    GraphTensor index = ops::cast(c, DType::I32) * -1 + both.graph().iota(Expression::index() * 2 + 1, shape);
    return both.gather(index);
}

}  // namespace ops
}  // namespace luminal
