#pragma once
// Gather / scatter and the ordering ops built from them. Index tensors may be
// any integer dtype; index results are i32. Out-of-range indexes are an error
// at execution (reference runtime), never a silent read.
#include "luminal/graph/ops_common.hpp"

namespace luminal {
namespace detail {

inline void check_index_dtype(const GraphTensor& indexes, const char* where) {
    check(is_integer(indexes.dtype()), where, "indexes must have an integer dtype, got {}", name_of(indexes.dtype()));
}

// Row-major strides of a logical shape.
inline Shape row_major_strides(const Shape& shape) {
    Shape strides(shape.size());
    Expression s = 1;
    for (std::size_t i = shape.size(); i-- > 0;) {
        strides[i] = s;
        s = s * shape[i];
    }
    return strides;
}

// Flat index into `data` for torch.gather/scatter along `axis`: the coordinates
// of the index tensor's element on every other axis, plus indexes * stride(axis).
inline GraphTensor elementwise_flat_index(const GraphTensor& data, const GraphTensor& indexes, std::size_t axis,
                                          const char* where) {
    check(data.rank() == indexes.rank(), where, "data {} and indexes {} must have the same rank",
          to_string(data.shape()), to_string(indexes.shape()));
    Shape data_strides = row_major_strides(data.shape()), index_shape = indexes.shape();
    Shape index_strides = row_major_strides(index_shape);
    Expression offset = 0;
    for (std::size_t d = 0; d < index_shape.size(); ++d) {
        if (d == axis) continue;
        Expression coordinate = Expression::index() / index_strides[d];
        if (d > 0) coordinate = coordinate % index_shape[d];
        offset = offset + coordinate * data_strides[d];
    }
    GraphTensor rest = data.graph().iota(offset, index_shape);
    return ops::cast(indexes, DType::I32) * data.graph().iota(data_strides[axis], index_shape) + rest;
}

}  // namespace detail

namespace ops {

inline GraphTensor gather(const GraphTensor& data, const GraphTensor& indexes) {
    detail::check_same_graph(data, indexes, "gather");
    detail::check_index_dtype(indexes, "gather");
    return detail::make_node(Op(OpKind::Gather), {data, indexes}, indexes.shape(), data.dtype());
}

inline GraphTensor gather_elements(const GraphTensor& data, const GraphTensor& indexes, int axis) {
    detail::check_index_dtype(indexes, "gather_elements");
    std::size_t a = detail::normalize_axis(axis, data.rank(), "gather_elements");
    return gather(data, detail::elementwise_flat_index(data, indexes, a, "gather_elements"));
}

// data.index_select(axis, indexes) with 1-D indexes; embedding lookup is axis 0.
inline GraphTensor index_select(const GraphTensor& data, int axis, const GraphTensor& indexes) {
    detail::check_index_dtype(indexes, "index_select");
    check(indexes.rank() == 1, "index_select", "indexes must be 1-D, got shape {}", to_string(indexes.shape()));
    std::size_t a = detail::normalize_axis(axis, data.rank(), "index_select");
    Shape out_shape = data.shape();
    Expression rows = out_shape[a];
    out_shape[a] = indexes.view().dim(0);
    Expression inner = 1;
    for (std::size_t i = a + 1; i < out_shape.size(); ++i) inner = inner * out_shape[i];
    Expression z = Expression::index();
    Expression base = z / (out_shape[a] * inner) * (rows * inner) + z % inner;
    GraphTensor idx = cast(indexes, DType::I32);
    for (std::size_t i = 0; i < a; ++i) idx = idx.unsqueeze(0);
    for (std::size_t i = a + 1; i < out_shape.size(); ++i) idx = idx.unsqueeze(-1);
    idx = detail::broadcast_to(idx, out_shape, "index_select");
    Graph& g = data.graph();
    return gather(data, idx * g.iota(inner, out_shape) + g.iota(base, out_shape));
}

// Flat scatter: a copy of dest with dest[indexes[i]] = src[i] (last write wins).
inline GraphTensor scatter(const GraphTensor& dest, const GraphTensor& indexes, const GraphTensor& src) {
    detail::check_same_graph(dest, indexes, "scatter");
    detail::check_same_graph(dest, src, "scatter");
    detail::check_index_dtype(indexes, "scatter");
    GraphTensor values = detail::broadcast_to(cast(src, dest.dtype()), indexes.shape(), "scatter");
    return detail::make_node(Op(OpKind::Scatter), {dest, indexes, values}, dest.shape(), dest.dtype());
}

// torch.Tensor.scatter(axis, indexes, src): src may be larger than indexes
// (only its leading window is used) or a scalar.
inline GraphTensor scatter_elements(const GraphTensor& dest, int axis, const GraphTensor& indexes, const GraphTensor& src) {
    detail::check_index_dtype(indexes, "scatter_elements");
    std::size_t a = detail::normalize_axis(axis, dest.rank(), "scatter_elements");
    GraphTensor values = src;
    if (src.rank() == indexes.rank()) {
        Ranges window;
        for (std::size_t i = 0; i < indexes.rank(); ++i) window.emplace_back(0, indexes.view().dim(i));
        values = src.slice(window);
    }
    return scatter(dest, detail::elementwise_flat_index(dest, indexes, a, "scatter_elements"), values);
}

// Stable ranks: element i's position is the count of elements that sort before
// it, ties broken by original position; then each index is scattered to its rank.
inline GraphTensor argsort(const GraphTensor& x, int axis, bool descending) {
    std::size_t a = detail::normalize_axis(axis, x.rank(), "argsort");
    int last = static_cast<int>(x.rank()) - 1;
    GraphTensor moved = transpose(x, static_cast<int>(a), last);
    Shape shape = moved.shape();
    Expression n = shape.back();
    Shape pair_shape = shape;
    pair_shape.push_back(n);                                                  // [..., i, j]
    GraphTensor xi = detail::broadcast_to(moved.unsqueeze(-1), pair_shape, "argsort");
    GraphTensor xj = detail::broadcast_to(moved.unsqueeze(-2), pair_shape, "argsort");
    Graph& g = x.graph();
    Expression z = Expression::index();
    GraphTensor j_before_i = cast(g.iota(lt(z % n, z / n % n), pair_shape), DType::Bool);
    GraphTensor before = descending ? GraphTensor(xj > xi) : GraphTensor(xj < xi);
    GraphTensor tie = xj.eq(xi);
    if (is_float(x.dtype())) {  // NaN sorts as the largest value, as in torch
        GraphTensor ni = xi.isnan(), nj = xj.isnan();
        before = before | (descending ? GraphTensor(nj & !ni) : GraphTensor(ni & !nj));
        tie = tie | (ni & nj);
    }
    GraphTensor rank = sum(before | (tie & j_before_i), {-1});
    GraphTensor flat = cast(rank, DType::I32) + g.iota(z / n * n, shape);
    GraphTensor zeros = detail::broadcast_to(detail::constant(g, 0, DType::I32), shape, "argsort");
    GraphTensor order = scatter(zeros, flat, g.iota(z % n, shape));
    return transpose(order, static_cast<int>(a), last);
}

// Indexes of the k largest values along axis, largest first; ties keep the lower index first.
inline GraphTensor topk_indexes(const GraphTensor& x, Expression k, int axis) {
    return argsort(x, axis, true).slice_along(axis, 0, k);
}

inline GraphTensor topk(const GraphTensor& x, Expression k, int axis) {
    return gather_elements(x, topk_indexes(x, k, axis), axis);
}

// Inclusive prefix sum: y_i = sum over j <= i of x_j, selecting (not masking by
// multiplication) so infinities stay exact. Integers accumulate in i64.
inline GraphTensor cumsum(const GraphTensor& x, int axis) {
    std::size_t a = detail::normalize_axis(axis, x.rank(), "cumsum");
    int last = static_cast<int>(x.rank()) - 1;
    GraphTensor moved = transpose(is_float(x.dtype()) ? x : cast(x, DType::I64), static_cast<int>(a), last);
    Shape pair_shape = moved.shape();
    Expression n = pair_shape.back();
    pair_shape.push_back(n);  // [..., i, j]
    GraphTensor xj = detail::broadcast_to(moved.unsqueeze(-2), pair_shape, "cumsum");
    Expression z = Expression::index();
    GraphTensor j_le_i = cast(x.graph().iota(le(z % n, z / n % n), pair_shape), DType::Bool);
    return transpose(sum(where(j_le_i, xj, 0), {-1}), static_cast<int>(a), last);
}

inline GraphTensor one_hot(const GraphTensor& indexes, Expression num_classes) {
    detail::check_index_dtype(indexes, "one_hot");
    Shape shape = indexes.shape();
    shape.push_back(num_classes);
    GraphTensor expanded = detail::broadcast_to(cast(indexes, DType::I32).unsqueeze(-1), shape, "one_hot");
    return cast(expanded.eq(indexes.graph().iota(Expression::index() % num_classes, shape)), DType::I32);
}

// Keeps elements with column - row <= diagonal (tril) or >= diagonal (triu) of
// the last two axes; the rest become zero.
inline GraphTensor tril(const GraphTensor& x, int diagonal) {
    check(x.rank() >= 2, "tril", "needs rank >= 2, got shape {}", to_string(x.shape()));
    Expression cols = x.view().dim(x.rank() - 1), rows = x.view().dim(x.rank() - 2), z = Expression::index();
    GraphTensor keep = cast(x.graph().iota(le(z % cols, z / cols % rows + diagonal), x.shape()), DType::Bool);
    return where(keep, x, 0);
}

inline GraphTensor triu(const GraphTensor& x, int diagonal) {
    check(x.rank() >= 2, "triu", "needs rank >= 2, got shape {}", to_string(x.shape()));
    Expression cols = x.view().dim(x.rank() - 1), rows = x.view().dim(x.rank() - 2), z = Expression::index();
    GraphTensor keep = cast(x.graph().iota(ge(z % cols, z / cols % rows + diagonal), x.shape()), DType::Bool);
    return where(keep, x, 0);
}

}  // namespace ops
}  // namespace luminal
