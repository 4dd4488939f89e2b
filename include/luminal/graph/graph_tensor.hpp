#pragma once
// GraphTensor: a small value handle (graph, node, view, dtype) to a tensor being
// recorded, and TensorOps: the fluent API shared by tensors and elementwise
// expressions. Every method here forwards to a free function in luminal::ops,
// written once in the ops_*.hpp headers.
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "luminal/graph/expression_templates.hpp"
#include "luminal/graph/graph.hpp"

namespace luminal {

using Axes = std::vector<int>;
using Ranges = std::vector<std::pair<Expression, Expression>>;

namespace ops {
// Reductions (ops_reduce.hpp); integer and bool sums accumulate in i64 like torch.
GraphTensor sum(const GraphTensor& x, const Axes& axes, bool keepdim = false);
GraphTensor max(const GraphTensor& x, const Axes& axes, bool keepdim = false);
GraphTensor min(const GraphTensor& x, const Axes& axes, bool keepdim = false);
GraphTensor mean(const GraphTensor& x, const Axes& axes, bool keepdim = false);
GraphTensor var(const GraphTensor& x, const Axes& axes, int correction = 1, bool keepdim = false);
GraphTensor std(const GraphTensor& x, const Axes& axes, int correction = 1, bool keepdim = false);
GraphTensor argmax(const GraphTensor& x, int axis, bool keepdim = false);
GraphTensor argmin(const GraphTensor& x, int axis, bool keepdim = false);
GraphTensor logsumexp(const GraphTensor& x, const Axes& axes, bool keepdim = false);
GraphTensor softmax(const GraphTensor& x, int axis);
GraphTensor log_softmax(const GraphTensor& x, int axis);
GraphTensor layer_norm(const GraphTensor& x, const Axes& axes, double epsilon = 1e-5);
GraphTensor rms_norm(const GraphTensor& x, const Axes& axes, double epsilon = 1e-6);
// Movement (ops_movement.hpp): views only, except where a copy is unavoidable.
GraphTensor reshape(const GraphTensor& x, Shape shape);
GraphTensor permute(const GraphTensor& x, const Axes& order);
GraphTensor transpose(const GraphTensor& x, int a, int b);
GraphTensor expand(const GraphTensor& x, const Shape& shape);
GraphTensor expand_dim(const GraphTensor& x, int axis, Expression size);
GraphTensor unsqueeze(const GraphTensor& x, int axis);
GraphTensor squeeze(const GraphTensor& x, int axis);
GraphTensor slice(const GraphTensor& x, const Ranges& ranges);
GraphTensor slice_along(const GraphTensor& x, int axis, Expression start, Expression end);
GraphTensor pad(const GraphTensor& x, const Ranges& padding, double value = 0);
GraphTensor pad_along(const GraphTensor& x, int axis, Expression before, Expression after, double value = 0);
GraphTensor concat_along(const GraphTensor& a, const GraphTensor& b, int axis);
GraphTensor stack(const std::vector<GraphTensor>& xs, int axis);
GraphTensor split_dims(const GraphTensor& x, int axis, Expression inner);
GraphTensor merge_dims(const GraphTensor& x, int axis);
GraphTensor flatten(const GraphTensor& x, int start = 0, int end = -1);
GraphTensor contiguous(const GraphTensor& x);
// Linear algebra (ops_matmul.hpp).
GraphTensor matmul(const GraphTensor& a, const GraphTensor& b);
// Indexing (ops_indexing.hpp); index results are i32.
GraphTensor gather(const GraphTensor& data, const GraphTensor& indexes);
GraphTensor gather_elements(const GraphTensor& data, const GraphTensor& indexes, int axis);
GraphTensor index_select(const GraphTensor& data, int axis, const GraphTensor& indexes);
GraphTensor scatter(const GraphTensor& dest, const GraphTensor& indexes, const GraphTensor& src);
GraphTensor scatter_elements(const GraphTensor& dest, int axis, const GraphTensor& indexes, const GraphTensor& src);
GraphTensor argsort(const GraphTensor& x, int axis, bool descending = false);
GraphTensor topk_indexes(const GraphTensor& x, Expression k, int axis);
GraphTensor topk(const GraphTensor& x, Expression k, int axis);
GraphTensor cumsum(const GraphTensor& x, int axis);
GraphTensor one_hot(const GraphTensor& indexes, Expression num_classes);
GraphTensor where(const GraphTensor& condition, const GraphTensor& a, const GraphTensor& b);
GraphTensor tril(const GraphTensor& x, int diagonal = 0);
GraphTensor triu(const GraphTensor& x, int diagonal = 0);
// Elementwise helpers that are not a single operator (ops_elementwise.hpp).
GraphTensor cast(const GraphTensor& x, DType dtype);
GraphTensor clamp(const GraphTensor& x, double lo, double hi);
GraphTensor zeros_like(const GraphTensor& x);
GraphTensor ones_like(const GraphTensor& x);
GraphTensor output(const GraphTensor& x);
}  // namespace ops

template <typename Derived>
class TensorOps {
public:
    GraphTensor self() const;  // materializes the expression (defined after GraphTensor)

    // Lazy elementwise ops: return expressions.
    auto neg() const { return make_unary<neg_fn>(); }
    auto abs() const { return make_unary<abs_fn>(); }
    auto sign() const { return make_unary<sign_fn>(); }
    auto exp() const { return make_unary<exp_fn>(); }
    auto exp2() const { return make_unary<exp2_fn>(); }
    auto log() const { return make_unary<log_fn>(); }
    auto log2() const { return make_unary<log2_fn>(); }
    auto sin() const { return make_unary<sin_fn>(); }
    auto cos() const { return make_unary<cos_fn>(); }
    auto sqrt() const { return make_unary<sqrt_fn>(); }
    auto rsqrt() const { return make_unary<rsqrt_fn>(); }
    auto recip() const { return make_unary<recip_fn>(); }
    auto square() const { return make_unary<square_fn>(); }
    auto sigmoid() const { return make_unary<sigmoid_fn>(); }
    auto tanh() const { return make_unary<tanh_fn>(); }
    auto relu() const { return make_unary<relu_fn>(); }
    auto gelu() const { return make_unary<gelu_fn>(); }            // erf form
    auto gelu_tanh() const { return make_unary<gelu_tanh_fn>(); }  // tanh approximation
    auto silu() const { return make_unary<silu_fn>(); }
    auto logical_not() const { return make_unary<logical_not_fn>(); }
    auto isnan() const { return make_unary<isnan_fn>(); }
    template <typename O> auto pow(const O& o) const { return make_binary<pow_fn>(derived(), o); }
    template <typename O> auto maximum(const O& o) const { return make_binary<maximum_fn>(derived(), o); }
    template <typename O> auto minimum(const O& o) const { return make_binary<minimum_fn>(derived(), o); }
    template <typename O> auto lt(const O& o) const { return make_binary<lt_fn>(derived(), o); }
    template <typename O> auto gt(const O& o) const { return make_binary<gt_fn>(derived(), o); }
    template <typename O> auto le(const O& o) const { return make_binary<le_fn>(derived(), o); }
    template <typename O> auto ge(const O& o) const { return make_binary<ge_fn>(derived(), o); }
    template <typename O> auto eq(const O& o) const { return make_binary<eq_fn>(derived(), o); }
    template <typename O> auto ne(const O& o) const { return make_binary<ne_fn>(derived(), o); }
    template <typename O> auto logical_and(const O& o) const { return make_binary<logical_and_fn>(derived(), o); }
    template <typename O> auto logical_or(const O& o) const { return make_binary<logical_or_fn>(derived(), o); }

    // Everything else materializes the expression first.
    GraphTensor cast(DType dtype) const;
    GraphTensor clamp(double lo, double hi) const;
    GraphTensor output() const;

    GraphTensor sum(const Axes& axes, bool keepdim = false) const;
    GraphTensor max(const Axes& axes, bool keepdim = false) const;
    GraphTensor min(const Axes& axes, bool keepdim = false) const;
    GraphTensor mean(const Axes& axes, bool keepdim = false) const;
    GraphTensor var(const Axes& axes, int correction = 1, bool keepdim = false) const;
    GraphTensor std(const Axes& axes, int correction = 1, bool keepdim = false) const;
    GraphTensor sum(int axis, bool keepdim = false) const;
    GraphTensor max(int axis, bool keepdim = false) const;
    GraphTensor min(int axis, bool keepdim = false) const;
    GraphTensor mean(int axis, bool keepdim = false) const;
    GraphTensor argmax(int axis, bool keepdim = false) const;
    GraphTensor argmin(int axis, bool keepdim = false) const;
    GraphTensor logsumexp(const Axes& axes, bool keepdim = false) const;
    GraphTensor softmax(int axis) const;
    GraphTensor log_softmax(int axis) const;
    GraphTensor layer_norm(const Axes& axes, double epsilon = 1e-5) const;
    GraphTensor rms_norm(const Axes& axes, double epsilon = 1e-6) const;
    GraphTensor std_norm(const Axes& axes, double epsilon = 1e-6) const;

    GraphTensor reshape(const Shape& shape) const;
    GraphTensor permute(const Axes& order) const;
    GraphTensor transpose(int a, int b) const;
    GraphTensor t() const;
    GraphTensor expand(const Shape& shape) const;
    GraphTensor expand_dim(int axis, Expression size) const;
    GraphTensor unsqueeze(int axis) const;
    GraphTensor squeeze(int axis) const;
    GraphTensor slice(const Ranges& ranges) const;
    GraphTensor slice_along(int axis, Expression start, Expression end) const;
    GraphTensor pad(const Ranges& padding, double value = 0) const;
    GraphTensor pad_along(int axis, Expression before, Expression after, double value = 0) const;
    template <TensorLike O> GraphTensor concat_along(const O& other, int axis) const;
    GraphTensor split_dims(int axis, Expression inner) const;
    GraphTensor merge_dims(int axis) const;
    GraphTensor flatten(int start = 0, int end = -1) const;
    GraphTensor contiguous() const;

    template <TensorLike O> GraphTensor matmul(const O& other) const;

    template <TensorLike O> GraphTensor gather(const O& indexes) const;
    template <TensorLike O> GraphTensor gather_elements(const O& indexes, int axis) const;
    template <TensorLike O> GraphTensor index_select(int axis, const O& indexes) const;
    template <TensorLike I, TensorLike S> GraphTensor scatter(const I& indexes, const S& src) const;
    template <TensorLike I, TensorLike S> GraphTensor scatter_elements(int axis, const I& indexes, const S& src) const;
    GraphTensor argsort(int axis, bool descending = false) const;
    GraphTensor topk_indexes(Expression k, int axis) const;
    GraphTensor topk(Expression k, int axis) const;
    GraphTensor cumsum(int axis) const;
    GraphTensor one_hot(Expression num_classes) const;
    GraphTensor tril(int diagonal = 0) const;
    GraphTensor triu(int diagonal = 0) const;

private:
    const Derived& derived() const { return static_cast<const Derived&>(*this); }
    template <typename Fn>
    auto make_unary() const { return Unary<Fn, Derived>(derived()); }
};

class GraphTensor : public TensorOps<GraphTensor> {
public:
    GraphTensor(Graph* graph, NodeId id, ShapeTracker view, DType dtype)
        : graph_(graph), id_(id), view_(std::move(view)), dtype_(dtype) {}
    template <TensorLike E>
    GraphTensor(const E& expression) : GraphTensor(expression.eval()) {}  // NOLINT: materializes

    GraphTensor eval() const { return *this; }
    Graph& graph() const { return *graph_; }
    NodeId id() const { return id_; }
    const ShapeTracker& view() const { return view_; }
    DType dtype() const { return dtype_; }
    Shape shape() const { return view_.dims(); }
    std::size_t rank() const { return view_.rank(); }
    Expression numel() const { return view_.numel(); }
    Expression dim(int axis) const;
    GraphTensor with_view(ShapeTracker view) const { return GraphTensor(graph_, id_, std::move(view), dtype_); }

private:
    Graph* graph_;
    NodeId id_;
    ShapeTracker view_;
    DType dtype_;
};

// ---- TensorOps forwarding ----
template <typename D> GraphTensor TensorOps<D>::self() const { return derived().eval(); }
template <typename D> GraphTensor TensorOps<D>::cast(DType t) const { return ops::cast(self(), t); }
template <typename D> GraphTensor TensorOps<D>::clamp(double lo, double hi) const { return ops::clamp(self(), lo, hi); }
template <typename D> GraphTensor TensorOps<D>::output() const { return ops::output(self()); }
template <typename D> GraphTensor TensorOps<D>::sum(const Axes& a, bool k) const { return ops::sum(self(), a, k); }
template <typename D> GraphTensor TensorOps<D>::max(const Axes& a, bool k) const { return ops::max(self(), a, k); }
template <typename D> GraphTensor TensorOps<D>::min(const Axes& a, bool k) const { return ops::min(self(), a, k); }
template <typename D> GraphTensor TensorOps<D>::mean(const Axes& a, bool k) const { return ops::mean(self(), a, k); }
template <typename D> GraphTensor TensorOps<D>::sum(int a, bool k) const { return ops::sum(self(), {a}, k); }
template <typename D> GraphTensor TensorOps<D>::max(int a, bool k) const { return ops::max(self(), {a}, k); }
template <typename D> GraphTensor TensorOps<D>::min(int a, bool k) const { return ops::min(self(), {a}, k); }
template <typename D> GraphTensor TensorOps<D>::mean(int a, bool k) const { return ops::mean(self(), {a}, k); }
template <typename D> GraphTensor TensorOps<D>::std_norm(const Axes& a, double e) const { return ops::rms_norm(self(), a, e); }
template <typename D> GraphTensor TensorOps<D>::var(const Axes& a, int c, bool k) const { return ops::var(self(), a, c, k); }
template <typename D> GraphTensor TensorOps<D>::std(const Axes& a, int c, bool k) const { return ops::std(self(), a, c, k); }
template <typename D> GraphTensor TensorOps<D>::argmax(int a, bool k) const { return ops::argmax(self(), a, k); }
template <typename D> GraphTensor TensorOps<D>::argmin(int a, bool k) const { return ops::argmin(self(), a, k); }
template <typename D> GraphTensor TensorOps<D>::logsumexp(const Axes& a, bool k) const { return ops::logsumexp(self(), a, k); }
template <typename D> GraphTensor TensorOps<D>::softmax(int a) const { return ops::softmax(self(), a); }
template <typename D> GraphTensor TensorOps<D>::log_softmax(int a) const { return ops::log_softmax(self(), a); }
template <typename D> GraphTensor TensorOps<D>::layer_norm(const Axes& a, double e) const { return ops::layer_norm(self(), a, e); }
template <typename D> GraphTensor TensorOps<D>::rms_norm(const Axes& a, double e) const { return ops::rms_norm(self(), a, e); }
template <typename D> GraphTensor TensorOps<D>::reshape(const Shape& s) const { return ops::reshape(self(), s); }
template <typename D> GraphTensor TensorOps<D>::permute(const Axes& o) const { return ops::permute(self(), o); }
template <typename D> GraphTensor TensorOps<D>::transpose(int a, int b) const { return ops::transpose(self(), a, b); }
template <typename D> GraphTensor TensorOps<D>::t() const {
    GraphTensor x = self();
    return x.rank() < 2 ? x : ops::transpose(x, 0, 1);
}
template <typename D> GraphTensor TensorOps<D>::expand(const Shape& s) const { return ops::expand(self(), s); }
template <typename D> GraphTensor TensorOps<D>::expand_dim(int a, Expression n) const { return ops::expand_dim(self(), a, n); }
template <typename D> GraphTensor TensorOps<D>::unsqueeze(int a) const { return ops::unsqueeze(self(), a); }
template <typename D> GraphTensor TensorOps<D>::squeeze(int a) const { return ops::squeeze(self(), a); }
template <typename D> GraphTensor TensorOps<D>::slice(const Ranges& r) const { return ops::slice(self(), r); }
template <typename D> GraphTensor TensorOps<D>::slice_along(int a, Expression s, Expression e) const {
    return ops::slice_along(self(), a, s, e);
}
template <typename D> GraphTensor TensorOps<D>::pad(const Ranges& p, double v) const { return ops::pad(self(), p, v); }
template <typename D> GraphTensor TensorOps<D>::pad_along(int a, Expression b, Expression e, double v) const {
    return ops::pad_along(self(), a, b, e, v);
}
template <typename D> template <TensorLike O> GraphTensor TensorOps<D>::concat_along(const O& o, int a) const {
    return ops::concat_along(self(), o.eval(), a);
}
template <typename D> GraphTensor TensorOps<D>::split_dims(int a, Expression n) const { return ops::split_dims(self(), a, n); }
template <typename D> GraphTensor TensorOps<D>::merge_dims(int a) const { return ops::merge_dims(self(), a); }
template <typename D> GraphTensor TensorOps<D>::flatten(int s, int e) const { return ops::flatten(self(), s, e); }
template <typename D> GraphTensor TensorOps<D>::contiguous() const { return ops::contiguous(self()); }
template <typename D> template <TensorLike O> GraphTensor TensorOps<D>::matmul(const O& o) const {
    return ops::matmul(self(), o.eval());
}
template <typename D> template <TensorLike O> GraphTensor TensorOps<D>::gather(const O& i) const {
    return ops::gather(self(), i.eval());
}
template <typename D> template <TensorLike O> GraphTensor TensorOps<D>::gather_elements(const O& i, int a) const {
    return ops::gather_elements(self(), i.eval(), a);
}
template <typename D> template <TensorLike O> GraphTensor TensorOps<D>::index_select(int a, const O& i) const {
    return ops::index_select(self(), a, i.eval());
}
template <typename D> template <TensorLike I, TensorLike S> GraphTensor TensorOps<D>::scatter(const I& i, const S& s) const {
    return ops::scatter(self(), i.eval(), s.eval());
}
template <typename D> template <TensorLike I, TensorLike S>
GraphTensor TensorOps<D>::scatter_elements(int a, const I& i, const S& s) const {
    return ops::scatter_elements(self(), a, i.eval(), s.eval());
}
template <typename D> GraphTensor TensorOps<D>::argsort(int a, bool d) const { return ops::argsort(self(), a, d); }
template <typename D> GraphTensor TensorOps<D>::topk_indexes(Expression k, int a) const { return ops::topk_indexes(self(), k, a); }
template <typename D> GraphTensor TensorOps<D>::topk(Expression k, int a) const { return ops::topk(self(), k, a); }
template <typename D> GraphTensor TensorOps<D>::cumsum(int a) const { return ops::cumsum(self(), a); }
template <typename D> GraphTensor TensorOps<D>::one_hot(Expression n) const { return ops::one_hot(self(), n); }
template <typename D> GraphTensor TensorOps<D>::tril(int d) const { return ops::tril(self(), d); }
template <typename D> GraphTensor TensorOps<D>::triu(int d) const { return ops::triu(self(), d); }

template <typename Fn, typename A>
GraphTensor Unary<Fn, A>::eval() const {
    if (!*lowered) *lowered = Fn::apply(a.eval());
    return **lowered;
}

template <typename Fn, typename A, typename B>
GraphTensor Binary<Fn, A, B>::eval() const {
    if (*lowered) return **lowered;
    if constexpr (std::is_same_v<A, Scalar>) {
        GraphTensor rhs = b.eval();
        *lowered = Fn::apply(detail::scalar_for(a, rhs), rhs);
    } else if constexpr (std::is_same_v<B, Scalar>) {
        GraphTensor lhs = a.eval();
        *lowered = Fn::apply(lhs, detail::scalar_for(b, lhs));
    } else {
        GraphTensor lhs = a.eval();
        *lowered = Fn::apply(lhs, b.eval());
    }
    return **lowered;
}

// torch.where(condition, a, b); a scalar branch takes the other branch's dtype.
template <TensorLike C, typename A, typename B> requires(Operand<A> && Operand<B>)
GraphTensor where(const C& condition, const A& a, const B& b) {
    GraphTensor c = condition.eval();
    if constexpr (TensorLike<A> && TensorLike<B>) {
        return ops::where(c, a.eval(), b.eval());
    } else if constexpr (TensorLike<A>) {
        GraphTensor lhs = a.eval();
        return ops::where(c, lhs, detail::scalar_for(as_operand(b), lhs));
    } else if constexpr (TensorLike<B>) {
        GraphTensor rhs = b.eval();
        return ops::where(c, detail::scalar_for(as_operand(a), rhs), rhs);
    } else {
        GraphTensor lhs = detail::scalar_for(as_operand(a), c);
        return ops::where(c, lhs, detail::scalar_for(as_operand(b), lhs));
    }
}

}  // namespace luminal
