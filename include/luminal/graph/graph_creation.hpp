#pragma once
// Graph members that create source tensors (inputs, constants, iota).
#include <cmath>

#include "luminal/graph/ops_common.hpp"

namespace luminal {

inline GraphTensor Graph::tensor(const Shape& shape, DType dtype) {
    return named_tensor("input" + std::to_string(nodes_.size()), shape, dtype);
}

inline GraphTensor Graph::named_tensor(std::string name, const Shape& shape, DType dtype) {
    for (auto& d : shape)
        check(!d.uses_index(), "named_tensor", "shape of '{}' uses the element index: {}", name, to_string(shape));
    return detail::source_node(*this, Op::input(std::move(name)), shape, dtype);
}

inline GraphTensor Graph::constant(double value, DType dtype) { return detail::constant(*this, value, dtype); }

inline GraphTensor Graph::iota(Expression expr, const Shape& shape, DType dtype) {
    check(is_integer(dtype), "iota", "dtype must be an integer type, got {}", name_of(dtype));
    return detail::source_node(*this, Op::index_expression(expr), shape, dtype);
}

inline GraphTensor Graph::arange(Expression n, DType dtype) {
    if (is_integer(dtype)) return iota(Expression::index(), {n}, dtype);
    return ops::cast(iota(Expression::index(), {n}), dtype);
}

inline GraphTensor Graph::arange_options(double start, double end, double step, DType dtype) {
    check(step != 0, "arange_options", "step must be non-zero");
    double count = std::ceil((end - start) / step);
    check(count >= 0, "arange_options", "range [{}, {}) with step {} is empty in the wrong direction", start, end, step);
    GraphTensor positions = iota(Expression::index(), {static_cast<std::int64_t>(count)}, DType::I64);
    if (!is_float(dtype)) {
        bool integral = std::floor(start) == start && std::floor(step) == step;
        check(integral, "arange_options", "integer dtype {} needs integral start and step", name_of(dtype));
        return ops::cast(positions * static_cast<std::int64_t>(step) + static_cast<std::int64_t>(start), dtype);
    }
    return ops::cast(ops::cast(positions, DType::F32) * step + start, dtype);
}

inline Expression GraphTensor::dim(int axis) const {
    return view_.dim(detail::normalize_axis(axis, rank(), "dim"));
}

}  // namespace luminal
