#pragma once
// Graph members that need GraphTensor: source tensors (inputs, constants,
// iota) and carried state.
#include <cmath>

#include "luminal/graph/ops_common.hpp"

namespace luminal {

inline GraphTensor Graph::tensor(const Shape& shape, DType dtype) {
    return named_tensor("input" + std::to_string(nodes_.size()), shape, dtype);
}

inline GraphTensor Graph::named_tensor(std::string name, const Shape& shape, DType dtype) {
    for (auto& d : shape) {
        check(!d.uses_index(), "named_tensor", "shape of '{}' uses the element index: {}", name, to_string(shape));
        guards_.record_ranges(d);
    }
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

inline void Graph::carry(const GraphTensor& output, const GraphTensor& input) {
    check(&output.graph() == this && &input.graph() == this, "carry", "tensors belong to another graph");
    const Node& in = nodes_[input.id()];
    std::optional<NodeId> out = output_of(output.id());
    auto describe_input = [&] {
        const bool is_input = in.op.kind == OpKind::Input;
        return fmt::format("{}node {} ({} {} {})", is_input ? "input " : "", input.id(),
                           is_input ? std::string_view(in.op.label) : name_of(in.op.kind), to_string(in.shape),
                           name_of(in.dtype));
    };
    auto describe_output = [&] {
        const Node& o = nodes_[out.value_or(output.id())];
        return fmt::format("{} node {} ({} {})", out ? "output" : name_of(o.op.kind), out.value_or(output.id()),
                           to_string(o.shape), name_of(o.dtype));
    };
    check(out.has_value(), "carry", "{} is not an output (call .output() on it) so it cannot be carried into {}",
          describe_output(), describe_input());
    check(in.op.kind == OpKind::Input, "carry", "{} cannot carry into {}: that is not an Input", describe_output(),
          describe_input());
    const Node& o = nodes_[*out];
    check(o.shape == in.shape && o.dtype == in.dtype, "carry", "{} cannot carry into {}: shapes or dtypes differ",
          describe_output(), describe_input());
    for (const CarriedState& c : carried_) {
        check(c.input != input.id(), "carry", "{} cannot carry into {}: output node {} already does", describe_output(),
              describe_input(), c.output);
        check(c.output != *out, "carry", "{} cannot carry into {}: it already carries into input node {}",
              describe_output(), describe_input(), c.input);
    }
    carried_.push_back({*out, input.id()});
}

inline Expression GraphTensor::dim(int axis) const {
    return view_.dim(detail::normalize_axis(axis, rank(), "dim"));
}

}  // namespace luminal
