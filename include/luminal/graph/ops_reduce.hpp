#pragma once
// Reductions over one or several axes, and the normalisations built on them.
#include "luminal/graph/ops_common.hpp"

namespace luminal {
namespace detail {

inline GraphTensor expression_scalar(Graph& graph, Expression value, DType dtype) {
    return ops::cast(graph.iota(value, {}, DType::I64), dtype);
}

inline GraphTensor reduce(OpKind kind, const GraphTensor& x, const Axes& axes, bool keepdim, const char* where) {
    auto sorted = normalize_axes(axes, x.rank(), where);
    GraphTensor out = x;
    for (auto it = sorted.rbegin(); it != sorted.rend(); ++it) {
        Shape shape = out.shape();
        shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(*it));
        out = make_node(Op::reduce(kind, *it), {out}, shape, out.dtype());
    }
    if (keepdim)
        for (std::size_t a : sorted) out = ops::unsqueeze(out, static_cast<int>(a));
    return out;
}

inline Expression reduced_count(const GraphTensor& x, const Axes& axes, const char* where) {
    Expression n = 1;
    for (std::size_t a : normalize_axes(axes, x.rank(), where)) n = n * x.view().dim(a);
    return n;
}

// Keepdim results broadcast back over x.
inline GraphTensor broadcast_like(const GraphTensor& kept, const GraphTensor& x) {
    return broadcast_to(kept, x.shape(), "broadcast");
}

}  // namespace detail

namespace ops {

inline GraphTensor sum(const GraphTensor& x, const Axes& axes, bool keepdim) {
    GraphTensor in = is_float(x.dtype()) ? x : cast(x, DType::I64);
    return detail::reduce(OpKind::SumReduce, in, axes, keepdim, "sum");
}

inline GraphTensor max(const GraphTensor& x, const Axes& axes, bool keepdim) {
    return detail::reduce(OpKind::MaxReduce, x, axes, keepdim, "max");
}

inline GraphTensor min(const GraphTensor& x, const Axes& axes, bool keepdim) {
    if (x.dtype() == DType::Bool || x.dtype() == DType::U8)
        return cast(min(cast(x, DType::I32), axes, keepdim), x.dtype());
    return -max(-x, axes, keepdim);
}

inline GraphTensor mean(const GraphTensor& x, const Axes& axes, bool keepdim) {
    GraphTensor f = detail::to_float(x);
    GraphTensor n = detail::expression_scalar(x.graph(), detail::reduced_count(x, axes, "mean"), f.dtype());
    return sum(f, axes, keepdim) * n.recip();
}

inline GraphTensor var(const GraphTensor& x, const Axes& axes, int correction, bool keepdim) {
    GraphTensor f = detail::to_float(x);
    GraphTensor centered = f - detail::broadcast_like(mean(f, axes, true), f);
    Expression n = detail::reduced_count(x, axes, "var") - correction;
    GraphTensor divisor = detail::expression_scalar(x.graph(), n, f.dtype());
    return sum(centered * centered, axes, keepdim) * divisor.recip();
}

inline GraphTensor std(const GraphTensor& x, const Axes& axes, int correction, bool keepdim) {
    return var(x, axes, correction, keepdim).sqrt();
}

// Index of the first maximum along `axis` (torch.argmax), as i32.
inline GraphTensor argmax(const GraphTensor& x, int axis, bool keepdim) {
    std::size_t a = detail::normalize_axis(axis, x.rank(), "argmax");
    Expression n = x.view().dim(a);
    GraphTensor is_max = x.eq(detail::broadcast_like(max(x, {axis}, true), x));
    if (is_float(x.dtype())) is_max = is_max | x.isnan();  // NaN is the maximum, as in torch
    Expression inner = 1;
    for (std::size_t i = a + 1; i < x.rank(); ++i) inner = inner * x.view().dim(i);
    GraphTensor position = x.graph().iota((Expression::index() / inner) % n, x.shape());
    GraphTensor candidate = where(is_max, position, x.graph().iota(n, x.shape()));
    return min(candidate, {axis}, keepdim);
}

inline GraphTensor argmin(const GraphTensor& x, int axis, bool keepdim) {
    return argmax(x.dtype() == DType::Bool || x.dtype() == DType::U8 ? -cast(x, DType::I32) : -x, axis, keepdim);
}

inline GraphTensor logsumexp(const GraphTensor& x, const Axes& axes, bool keepdim) {
    GraphTensor total = detail::in_f32(x, [&](const GraphTensor& f) {
        GraphTensor m = max(f, axes, true);
        // An all -inf row has max -inf; shifting by 0 there keeps the result -inf instead of NaN.
        GraphTensor shift = where(m.isnan() | m.abs().eq(std::numeric_limits<double>::infinity()), 0.0, m);
        return GraphTensor(sum((f - detail::broadcast_like(shift, f)).exp(), axes, true).log() + shift);
    });
    if (keepdim) return total;
    auto sorted = detail::normalize_axes(axes, x.rank(), "logsumexp");
    for (auto it = sorted.rbegin(); it != sorted.rend(); ++it) total = squeeze(total, static_cast<int>(*it));
    return total;
}

inline GraphTensor softmax(const GraphTensor& x, int axis) {
    return detail::in_f32(x, [&](const GraphTensor& f) {
        GraphTensor e = (f - detail::broadcast_like(max(f, {axis}, true), f)).exp();
        return GraphTensor(e * detail::broadcast_like(sum(e, {axis}, true).recip(), e));
    });
}

inline GraphTensor log_softmax(const GraphTensor& x, int axis) {
    return detail::in_f32(x, [&](const GraphTensor& f) {
        return GraphTensor(f - detail::broadcast_like(logsumexp(f, {axis}, true), f));
    });
}

// (x - mean) / sqrt(biased variance + eps), without affine parameters.
inline GraphTensor layer_norm(const GraphTensor& x, const Axes& axes, double epsilon) {
    return detail::in_f32(x, [&](const GraphTensor& f) {
        GraphTensor centered = f - detail::broadcast_like(mean(f, axes, true), f);
        GraphTensor variance = mean(centered * centered, axes, true);
        return GraphTensor(centered * detail::broadcast_like((variance + epsilon).rsqrt(), f));
    });
}

// x / sqrt(mean(x^2) + eps): RMSNorm without the weight (luminal's std_norm).
inline GraphTensor rms_norm(const GraphTensor& x, const Axes& axes, double epsilon) {
    return detail::in_f32(x, [&](const GraphTensor& f) {
        return GraphTensor(f * detail::broadcast_like((mean(f * f, axes, true) + epsilon).rsqrt(), f));
    });
}

}  // namespace ops
}  // namespace luminal
