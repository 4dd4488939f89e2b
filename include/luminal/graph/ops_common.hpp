#pragma once
// Building blocks every op family uses: node emission, axis normalisation,
// broadcasting and dtype unification.
#include <algorithm>
#include <functional>
#include <numbers>
#include <optional>

#include "luminal/graph/graph_tensor.hpp"

namespace luminal::detail {

inline void check_same_graph(const GraphTensor& a, const GraphTensor& b, const char* where) {
    check(&a.graph() == &b.graph(), where,
          "tensors belong to two different graphs (node {} of one, node {} of the other)", a.id(), b.id());
}

// Appends a node reading each input through its current view.
inline GraphTensor make_node(Op op, std::initializer_list<GraphTensor> inputs, Shape shape, DType dtype) {
    const GraphTensor& first = *inputs.begin();
    std::vector<NodeInput> edges;
    for (const GraphTensor& in : inputs) {
        check_same_graph(first, in, op.name().data());
        edges.push_back(NodeInput{in.id(), in.view()});
    }
    Graph& graph = first.graph();
    ShapeTracker view(shape);
    NodeId id = graph.add_node(std::move(op), std::move(edges), std::move(shape), dtype);
    return GraphTensor(&graph, id, std::move(view), dtype);
}

inline GraphTensor source_node(Graph& graph, Op op, Shape shape, DType dtype) {
    ShapeTracker view(shape);
    NodeId id = graph.add_node(std::move(op), {}, std::move(shape), dtype);
    return GraphTensor(&graph, id, std::move(view), dtype);
}

inline GraphTensor constant(Graph& graph, double value, DType dtype) {
    return source_node(graph, Op::constant(value), {}, dtype);
}

// A scalar tensor holding a symbolic integer (e.g. a dynamic size), as `dtype`.
GraphTensor expression_scalar(Graph& graph, Expression value, DType dtype);

inline std::size_t normalize_axis(int axis, std::size_t rank, const char* where) {
    int r = static_cast<int>(rank);
    check(axis >= -r && axis < std::max(r, 1), where, "axis {} out of range for a tensor of rank {}", axis, rank);
    return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}

inline std::vector<std::size_t> normalize_axes(const Axes& axes, std::size_t rank, const char* where) {
    std::vector<std::size_t> out;
    for (int a : axes) out.push_back(normalize_axis(a, rank, where));
    std::sort(out.begin(), out.end());
    check(std::adjacent_find(out.begin(), out.end()) == out.end(), where, "axis listed twice in [{}]",
          fmt::join(axes, ", "));
    return out;
}

// Whether two sizes are equal for every value of the dims (their ranges included):
// true or false when the simplifier decides it, nullopt when only an execution can.
inline std::optional<bool> sizes_equal(const Expression& a, const Expression& b) {
    if (a == b) return true;
    if (eq(a, b) == Expression(0)) return false;
    return std::nullopt;
}

// Of two sizes guarded equal, the one to keep: the shorter to print (fewer terms).
inline const Expression& simpler_size(const Expression& a, const Expression& b) {
    return b.to_string().size() < a.to_string().size() ? b : a;
}

// Two sizes that must be equal: the one to use, after recording a shape guard when
// only an execution can tell; an Error when they are provably different.
inline Expression equal_size(Graph& graph, const Expression& a, const Expression& b, const char* where,
                             const std::function<std::string()>& describe) {
    std::optional<bool> same = sizes_equal(a, b);
    check(same.value_or(true), where, "{}", describe());
    if (same) return a;
    graph.guards().require_equal(a, b, where);
    return simpler_size(a, b);
}

inline Shape broadcast_shape(Graph& graph, const Shape& a, const Shape& b, const char* where) {
    std::size_t rank = std::max(a.size(), b.size());
    Shape out(rank);
    for (std::size_t i = 0; i < rank; ++i) {
        Expression da = i < rank - a.size() ? Expression(1) : a[i - (rank - a.size())];
        Expression db = i < rank - b.size() ? Expression(1) : b[i - (rank - b.size())];
        if (da == Expression(1) || db == Expression(1)) {
            out[i] = da == Expression(1) ? db : da;
            continue;
        }
        out[i] = equal_size(graph, da, db, where, [&] {
            return fmt::format("shapes {} and {} do not broadcast (dimension {} is {} vs {})", to_string(a), to_string(b),
                               i, da, db);
        });
    }
    return out;
}

GraphTensor broadcast_to(const GraphTensor& x, const Shape& shape, const char* where);

// PyTorch's result dtype for a scalar operand next to a tensor of dtype `other`.
inline DType scalar_dtype(const Scalar& s, DType other) {
    if (is_float(other)) return other;
    if (!s.integral) return DType::F32;
    return other == DType::Bool ? DType::I64 : other;
}

inline GraphTensor scalar_for(const Scalar& s, const GraphTensor& other) {
    return constant(other.graph(), s.value, scalar_dtype(s, other.dtype()));
}

inline GraphTensor to_float(const GraphTensor& x) { return is_float(x.dtype()) ? x : ops::cast(x, DType::F32); }

// Composite float math on f16/bf16 runs in f32 and rounds once at the end, as
// torch does internally, instead of rounding every intermediate primitive.
template <typename Compute>
GraphTensor in_f32(const GraphTensor& x, Compute&& compute) {
    GraphTensor f = to_float(x);
    if (f.dtype() == DType::F32) return compute(f);
    return ops::cast(compute(ops::cast(f, DType::F32)), f.dtype());
}

// Broadcasts a and b together and casts both to `dtype`.
inline std::pair<GraphTensor, GraphTensor> unify(const GraphTensor& a, const GraphTensor& b, DType dtype,
                                                 const char* where) {
    check_same_graph(a, b, where);
    Shape shape = broadcast_shape(a.graph(), a.shape(), b.shape(), where);
    return {broadcast_to(ops::cast(a, dtype), shape, where), broadcast_to(ops::cast(b, dtype), shape, where)};
}

inline GraphTensor unary(OpKind kind, const GraphTensor& x) { return make_node(Op(kind), {x}, x.shape(), x.dtype()); }

inline GraphTensor binary(OpKind kind, const GraphTensor& a, const GraphTensor& b, DType dtype, const char* where) {
    auto [x, y] = unify(a, b, dtype, where);
    return make_node(Op(kind), {x, y}, x.shape(), kind == OpKind::LessThan ? DType::Bool : dtype);
}

inline GraphTensor binary(OpKind kind, const GraphTensor& a, const GraphTensor& b, const char* where) {
    return binary(kind, a, b, promote(a.dtype(), b.dtype()), where);
}

// The constant value of a scalar Constant node, if `x` is one.
inline std::optional<double> constant_value(const GraphTensor& x) {
    const Node& node = x.graph().node(x.id());
    if (node.op.kind != OpKind::Constant) return std::nullopt;
    return node.op.value;
}

}  // namespace luminal::detail
