#pragma once
// Movement ops change the view a tensor is read through, not the graph. The
// only exception is a reshape the view cannot express (after a permute, say),
// which first copies into a contiguous buffer with a Cast to the same dtype:
// a bit-exact copy that keeps -0.0 and NaN payloads, unlike x + 0 or x * 1.
#include "luminal/graph/ops_common.hpp"

namespace luminal {
namespace detail {

inline GraphTensor broadcast_to(const GraphTensor& x, const Shape& shape, const char* where) {
    check(x.rank() <= shape.size(), where, "cannot broadcast shape {} to {}", to_string(x.shape()), to_string(shape));
    ShapeTracker view = x.view();
    std::size_t lead = shape.size() - x.rank();
    for (std::size_t i = 0; i < lead; ++i) view = view.expand_dim(0, shape[lead - 1 - i]);
    GraphTensor out = x.with_view(view);
    for (std::size_t i = lead; i < shape.size(); ++i) {
        const Expression size = out.view().dim(i);
        if (size == shape[i]) continue;
        if (size != Expression(1)) {
            equal_size(x.graph(), size, shape[i], where, [&] {
                return fmt::format("cannot broadcast shape {} to {} (axis {} is {})", to_string(x.shape()),
                                   to_string(shape), i - lead, size);
            });
            out = out.with_view(out.view().with_size(i, shape[i]));
            continue;
        }
        if (!out.view().axis_fully_valid(i)) out = ops::contiguous(out);
        out = out.with_view(out.view().expand(i, shape[i]));
    }
    return out;
}

}  // namespace detail

namespace ops {

inline GraphTensor contiguous(const GraphTensor& x) {
    if (x.view().is_contiguous()) return x;
    return detail::make_node(Op(OpKind::Cast), {x}, x.shape(), x.dtype());
}

inline GraphTensor reshape(const GraphTensor& x, Shape shape) {
    // One -1 entry is inferred from the element count, as in torch.
    auto inferred = std::find_if(shape.begin(), shape.end(), [](const Expression& e) { return e == Expression(-1); });
    if (inferred != shape.end()) {
        Expression known = 1;
        for (auto it = shape.begin(); it != shape.end(); ++it)
            if (it != inferred) known = known * *it;
        *inferred = x.numel() / known;
    }
    if (auto view = x.view().reshape(shape)) return x.with_view(*view);
    GraphTensor copy = contiguous(x);
    if (auto view = copy.view().reshape(shape)) return copy.with_view(*view);
    // The axes do not group when the element counts can be equal only at run time (a static
    // size an earlier op kept, under a guard, for a symbolic one): guard the counts too, and
    // read the contiguous copy row-major in the new shape.
    detail::equal_size(x.graph(), x.numel(), product(shape), "reshape", [&] {
        return fmt::format("cannot reshape {} ({} elements) to {} ({} elements)", to_string(x.shape()), x.numel(),
                           to_string(shape), product(shape));
    });
    return copy.with_view(ShapeTracker(shape));
}

inline GraphTensor permute(const GraphTensor& x, const Axes& order) {
    check(order.size() == x.rank(), "permute", "order [{}] has {} axes but the tensor has shape {}",
          fmt::join(order, ", "), order.size(), to_string(x.shape()));
    std::vector<std::size_t> axes;
    for (int a : order) axes.push_back(detail::normalize_axis(a, x.rank(), "permute"));
    return x.with_view(x.view().permute(axes));
}

inline GraphTensor transpose(const GraphTensor& x, int a, int b) {
    Axes order(x.rank());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::swap(order[detail::normalize_axis(a, x.rank(), "transpose")], order[detail::normalize_axis(b, x.rank(), "transpose")]);
    return permute(x, order);
}

// torch.Tensor.expand: new leading axes, and -1 keeps an existing size.
inline GraphTensor expand(const GraphTensor& x, const Shape& shape) {
    Shape target = shape;
    std::size_t lead = shape.size() >= x.rank() ? shape.size() - x.rank() : 0;
    for (std::size_t i = lead; i < shape.size() && i - lead < x.rank(); ++i)
        if (target[i] == Expression(-1)) target[i] = x.view().dim(i - lead);
    return detail::broadcast_to(x, target, "expand");
}

inline GraphTensor expand_dim(const GraphTensor& x, int axis, Expression size) {
    std::size_t a = detail::normalize_axis(axis, x.rank() + 1, "expand_dim");
    return x.with_view(x.view().expand_dim(a, size));
}

inline GraphTensor unsqueeze(const GraphTensor& x, int axis) { return expand_dim(x, axis, 1); }

inline GraphTensor squeeze(const GraphTensor& x, int axis) {
    std::size_t a = detail::normalize_axis(axis, x.rank(), "squeeze");
    check(x.view().dim(a) == Expression(1), "squeeze", "axis {} of shape {} has size {}, not 1", axis,
          to_string(x.shape()), x.view().dim(a));
    Shape shape = x.shape();
    shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(a));
    return reshape(x, shape);
}

inline GraphTensor slice_along(const GraphTensor& x, int axis, Expression start, Expression end) {
    std::size_t a = detail::normalize_axis(axis, x.rank(), "slice_along");
    return x.with_view(x.view().slice(a, start, end));
}

// One (start, end) range per leading axis; end is clamped to the axis size.
inline GraphTensor slice(const GraphTensor& x, const Ranges& ranges) {
    check(ranges.size() <= x.rank(), "slice", "{} ranges for a tensor of shape {}", ranges.size(), to_string(x.shape()));
    GraphTensor out = x;
    for (std::size_t i = 0; i < ranges.size(); ++i)
        out = slice_along(out, static_cast<int>(i), ranges[i].first, ranges[i].second);
    return out;
}

inline GraphTensor pad_along(const GraphTensor& x, int axis, Expression before, Expression after, double value) {
    std::size_t a = detail::normalize_axis(axis, x.rank(), "pad_along");
    GraphTensor padded = x.with_view(x.view().pad(a, before, after));
    if (value == 0) return padded;
    GraphTensor ones = detail::broadcast_to(detail::constant(x.graph(), 1, DType::Bool), x.shape(), "pad_along");
    GraphTensor inside = ones.with_view(ones.view().pad(a, before, after));
    return ops::where(inside, padded, detail::constant(x.graph(), value, x.dtype()));
}

// One (before, after) pair per leading axis, filled with `value`.
inline GraphTensor pad(const GraphTensor& x, const Ranges& padding, double value) {
    check(padding.size() <= x.rank(), "pad", "{} paddings for a tensor of shape {}", padding.size(), to_string(x.shape()));
    GraphTensor out = x;
    for (std::size_t i = 0; i < padding.size(); ++i)
        out = pad_along(out, static_cast<int>(i), padding[i].first, padding[i].second, 0);
    if (value == 0) return out;
    GraphTensor inside = detail::broadcast_to(detail::constant(x.graph(), 1, DType::Bool), x.shape(), "pad");
    for (std::size_t i = 0; i < padding.size(); ++i)
        inside = inside.with_view(inside.view().pad(i, padding[i].first, padding[i].second));
    return ops::where(inside, out, detail::constant(x.graph(), value, x.dtype()));
}

// Each side is padded with zeros where the other lives, then the two are added.
inline GraphTensor concat_along(const GraphTensor& a, const GraphTensor& b, int axis) {
    detail::check_same_graph(a, b, "concat_along");
    check(a.rank() == b.rank(), "concat_along", "shapes {} and {} have different ranks", to_string(a.shape()),
          to_string(b.shape()));
    std::size_t ax = detail::normalize_axis(axis, a.rank(), "concat_along");
    for (std::size_t i = 0; i < a.rank(); ++i)
        check(i == ax || a.view().dim(i) == b.view().dim(i), "concat_along",
              "shapes {} and {} differ outside axis {}", to_string(a.shape()), to_string(b.shape()), axis);
    DType t = promote(a.dtype(), b.dtype());
    GraphTensor left = pad_along(cast(a, t), static_cast<int>(ax), 0, b.view().dim(ax), 0);
    GraphTensor right = pad_along(cast(b, t), static_cast<int>(ax), a.view().dim(ax), 0, 0);
    return detail::binary(OpKind::Add, left, right, t, "concat_along");
}

inline GraphTensor stack(const std::vector<GraphTensor>& xs, int axis) {
    check(!xs.empty(), "stack", "needs at least one tensor");
    std::size_t ax = detail::normalize_axis(axis, xs[0].rank() + 1, "stack");
    GraphTensor out = unsqueeze(xs[0], static_cast<int>(ax));
    for (std::size_t i = 1; i < xs.size(); ++i) {
        check(xs[i].shape() == xs[0].shape(), "stack", "tensor {} has shape {} but tensor 0 has {}", i,
              to_string(xs[i].shape()), to_string(xs[0].shape()));
        out = concat_along(out, unsqueeze(xs[i], static_cast<int>(ax)), static_cast<int>(ax));
    }
    return out;
}

inline GraphTensor split_dims(const GraphTensor& x, int axis, Expression inner) {
    std::size_t a = detail::normalize_axis(axis, x.rank(), "split_dims");
    Shape shape = x.shape();
    Expression outer = shape[a] / inner;
    check(!(outer * inner - shape[a]).is_constant() || outer * inner == shape[a], "split_dims",
          "axis {} of shape {} is not divisible by {}", axis, to_string(shape), inner);
    shape[a] = inner;
    shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(a), outer);
    return reshape(x, shape);
}

inline GraphTensor merge_dims(const GraphTensor& x, int axis) {
    std::size_t a = detail::normalize_axis(axis, x.rank(), "merge_dims");
    check(a + 1 < x.rank(), "merge_dims", "axis {} has no next axis to merge with in shape {}", axis, to_string(x.shape()));
    Shape shape = x.shape();
    shape[a] = shape[a] * shape[a + 1];
    shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(a) + 1);
    return reshape(x, shape);
}

inline GraphTensor flatten(const GraphTensor& x, int start, int end) {
    if (x.rank() == 0) return reshape(x, {1});
    std::size_t s = detail::normalize_axis(start, x.rank(), "flatten"), e = detail::normalize_axis(end, x.rank(), "flatten");
    check(s <= e, "flatten", "start axis {} is after end axis {}", start, end);
    Shape shape = x.shape(), out(shape.begin(), shape.begin() + static_cast<std::ptrdiff_t>(s));
    Expression merged = 1;
    for (std::size_t i = s; i <= e; ++i) merged = merged * shape[i];
    out.push_back(merged);
    out.insert(out.end(), shape.begin() + static_cast<std::ptrdiff_t>(e) + 1, shape.end());
    return reshape(x, out);
}

}  // namespace ops
}  // namespace luminal
