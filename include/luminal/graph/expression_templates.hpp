#pragma once
// Elementwise arithmetic builds typed expression objects instead of nodes:
// `a * b + c` has type Binary<add_fn, Binary<mul_fn, GraphTensor, GraphTensor>, GraphTensor>.
// Nothing enters the graph until the expression is converted to a GraphTensor
// (assignment, .eval(), or any non-elementwise op), at which point each level
// emits its primitive decomposition, operands first, left to right. Each
// subexpression is lowered once: the result is remembered in a cell its copies
// share, so `auto t = a * b; t + t` or `t.sum(); t.max()` emit one Mul.
// Operands are held by value (a GraphTensor is a small handle), so an `auto`
// expression stays valid after the tensors it was built from go out of scope.
#include <concepts>
#include <memory>
#include <optional>
#include <type_traits>

namespace luminal {

class GraphTensor;
template <typename Derived> class TensorOps;

// A Python-style scalar operand: integral scalars keep an integer tensor's dtype,
// float scalars promote integer tensors to f32 (as torch does).
struct Scalar {
    double value;
    bool integral;
};

template <typename T>
concept TensorLike = std::derived_from<T, TensorOps<T>>;
template <typename T>
concept Arithmetic = std::is_arithmetic_v<T> && !std::is_same_v<T, bool>;
template <typename T>
concept Operand = TensorLike<T> || Arithmetic<T> || std::is_same_v<T, Scalar>;

template <typename T>
auto as_operand(const T& v) {
    if constexpr (TensorLike<T> || std::is_same_v<T, Scalar>) return v;
    else return Scalar{static_cast<double>(v), std::is_integral_v<T>};
}
template <typename T>
using operand_t = decltype(as_operand(std::declval<T>()));

namespace detail {
GraphTensor scalar_for(const Scalar& s, const GraphTensor& other);
}

// The tensor an expression was lowered to, once it has been.
using LoweredCell = std::shared_ptr<std::optional<GraphTensor>>;

template <typename Fn, typename A>
struct Unary : TensorOps<Unary<Fn, A>> {
    A a;
    LoweredCell lowered = std::make_shared<std::optional<GraphTensor>>();
    explicit Unary(A a_) : a(std::move(a_)) {}
    GraphTensor eval() const;
};

template <typename Fn, typename A, typename B>
struct Binary : TensorOps<Binary<Fn, A, B>> {
    static_assert(TensorLike<A> || TensorLike<B>, "a binary expression needs at least one tensor");
    A a;
    B b;
    LoweredCell lowered = std::make_shared<std::optional<GraphTensor>>();
    Binary(A a_, B b_) : a(std::move(a_)), b(std::move(b_)) {}
    GraphTensor eval() const;
};

// One tag per elementwise op; each apply() emits primitives (ops_elementwise.hpp).
#define LUMINAL_UNARY_FN(name) \
    struct name##_fn { static GraphTensor apply(const GraphTensor& x); };
#define LUMINAL_BINARY_FN(name) \
    struct name##_fn { static GraphTensor apply(const GraphTensor& a, const GraphTensor& b); };
LUMINAL_UNARY_FN(neg) LUMINAL_UNARY_FN(abs) LUMINAL_UNARY_FN(sign) LUMINAL_UNARY_FN(exp) LUMINAL_UNARY_FN(exp2)
LUMINAL_UNARY_FN(log) LUMINAL_UNARY_FN(log2) LUMINAL_UNARY_FN(sin) LUMINAL_UNARY_FN(cos) LUMINAL_UNARY_FN(sqrt)
LUMINAL_UNARY_FN(rsqrt) LUMINAL_UNARY_FN(recip) LUMINAL_UNARY_FN(square) LUMINAL_UNARY_FN(sigmoid)
LUMINAL_UNARY_FN(tanh) LUMINAL_UNARY_FN(relu) LUMINAL_UNARY_FN(gelu) LUMINAL_UNARY_FN(gelu_tanh)
LUMINAL_UNARY_FN(silu) LUMINAL_UNARY_FN(logical_not) LUMINAL_UNARY_FN(isnan)
LUMINAL_BINARY_FN(add) LUMINAL_BINARY_FN(sub) LUMINAL_BINARY_FN(mul) LUMINAL_BINARY_FN(div)
LUMINAL_BINARY_FN(mod) LUMINAL_BINARY_FN(pow) LUMINAL_BINARY_FN(maximum) LUMINAL_BINARY_FN(minimum)
LUMINAL_BINARY_FN(lt) LUMINAL_BINARY_FN(gt) LUMINAL_BINARY_FN(le) LUMINAL_BINARY_FN(ge)
LUMINAL_BINARY_FN(eq) LUMINAL_BINARY_FN(ne) LUMINAL_BINARY_FN(logical_and) LUMINAL_BINARY_FN(logical_or)
#undef LUMINAL_UNARY_FN
#undef LUMINAL_BINARY_FN

template <typename Fn, typename A, typename B>
auto make_binary(const A& a, const B& b) {
    return Binary<Fn, operand_t<A>, operand_t<B>>(as_operand(a), as_operand(b));
}

template <typename A, typename B>
concept BinaryOperands = Operand<A> && Operand<B> && (TensorLike<A> || TensorLike<B>);

template <typename A, typename B> requires BinaryOperands<A, B>
auto operator+(const A& a, const B& b) { return make_binary<add_fn>(a, b); }
template <typename A, typename B> requires BinaryOperands<A, B>
auto operator-(const A& a, const B& b) { return make_binary<sub_fn>(a, b); }
template <typename A, typename B> requires BinaryOperands<A, B>
auto operator*(const A& a, const B& b) { return make_binary<mul_fn>(a, b); }
template <typename A, typename B> requires BinaryOperands<A, B>
auto operator/(const A& a, const B& b) { return make_binary<div_fn>(a, b); }
template <typename A, typename B> requires BinaryOperands<A, B>
auto operator%(const A& a, const B& b) { return make_binary<mod_fn>(a, b); }
template <typename A, typename B> requires BinaryOperands<A, B>
auto operator<(const A& a, const B& b) { return make_binary<lt_fn>(a, b); }
template <typename A, typename B> requires BinaryOperands<A, B>
auto operator>(const A& a, const B& b) { return make_binary<gt_fn>(a, b); }
template <typename A, typename B> requires BinaryOperands<A, B>
auto operator<=(const A& a, const B& b) { return make_binary<le_fn>(a, b); }
template <typename A, typename B> requires BinaryOperands<A, B>
auto operator>=(const A& a, const B& b) { return make_binary<ge_fn>(a, b); }
template <typename A, typename B> requires BinaryOperands<A, B>
auto operator&(const A& a, const B& b) { return make_binary<logical_and_fn>(a, b); }
template <typename A, typename B> requires BinaryOperands<A, B>
auto operator|(const A& a, const B& b) { return make_binary<logical_or_fn>(a, b); }
template <TensorLike A>
auto operator-(const A& a) { return Unary<neg_fn, A>(a); }
template <TensorLike A>
auto operator!(const A& a) { return Unary<logical_not_fn, A>(a); }

template <typename A, typename B> requires BinaryOperands<A, B>
auto pow(const A& a, const B& b) { return make_binary<pow_fn>(a, b); }
template <typename A, typename B> requires BinaryOperands<A, B>
auto maximum(const A& a, const B& b) { return make_binary<maximum_fn>(a, b); }
template <typename A, typename B> requires BinaryOperands<A, B>
auto minimum(const A& a, const B& b) { return make_binary<minimum_fn>(a, b); }

}  // namespace luminal
