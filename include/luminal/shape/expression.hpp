#pragma once
// Expression: an immutable, interned symbolic integer over named dynamic
// dimensions ('s', 'p', ...) and the element index of the tensor being read.
//
// Semantics (documented once, relied on everywhere):
//  * all values are 64-bit signed integers;
//  * `/` is floor division and `%` the matching floor modulo (the result has the
//    sign of the divisor), as in Python: (-7) / 2 == -4, (-7) % 2 == 1;
//  * comparisons and logical operators yield 0 or 1;
//  * dimensions are sizes, so the simplifier assumes every dimension and the
//    element index are >= 0. A dimension may carry a tighter range
//    (Expression::dim('s', 1, 4096)): the range is part of its identity (two
//    ranges of one name are two dimensions) and the simplifier uses it, e.g.
//    min(s, 1) == 1 when s >= 1. Graph::tensor records the ranges its shapes use
//    and every execution checks the dims it is given against them.
//
// Expressions are hash-consed in a process-wide pool, so structurally equal
// expressions share one node: `==` and hashing are O(1) pointer operations.
// Simplification happens at construction (constant folding, identities,
// combining like terms, floor div/mod algebra, interval bounds).
#include <absl/container/flat_hash_set.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "luminal/core/error.hpp"
#include "luminal/shape/dyn_map.hpp"

namespace luminal {

enum class ExprOp : std::uint8_t { Num, Var, Index, Add, Mul, Div, Mod, Min, Max, Lt, Eq, And, Or };

namespace detail {

inline constexpr std::int64_t kPosInf = std::int64_t{1} << 62;
inline constexpr std::int64_t kNegInf = -kPosInf;

struct ExprNode {
    ExprOp op;
    char var;               // Var only
    std::int64_t value;     // Num only
    const ExprNode* a;      // binary ops
    const ExprNode* b;
    std::uint64_t key;      // structural hash: deterministic across runs, used for ordering
    std::int64_t lo, hi;    // interval bounds (kNegInf / kPosInf when unbounded)
};

inline std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
    v *= 0x9E3779B97F4A7C15ull;
    h ^= v + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2);
    return h;
}

inline std::int64_t clamp_bound(__int128 v) {
    if (v >= kPosInf) return kPosInf;
    if (v <= kNegInf) return kNegInf;
    return static_cast<std::int64_t>(v);
}

inline std::int64_t floor_div(std::int64_t a, std::int64_t b) {
    std::int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
}
inline std::int64_t floor_mod(std::int64_t a, std::int64_t b) { return a - floor_div(a, b) * b; }

// Interval arithmetic on bounds that may be infinite.
inline std::pair<std::int64_t, std::int64_t> bounds_of(ExprOp op, const ExprNode* a, const ExprNode* b) {
    auto inf = [](std::int64_t v) { return v >= kPosInf || v <= kNegInf; };
    switch (op) {
        case ExprOp::Add:
            return {clamp_bound(__int128(a->lo) + b->lo), clamp_bound(__int128(a->hi) + b->hi)};
        case ExprOp::Mul: {
            // Products of the ends over the extended integers (an infinite end times 0 is 0:
            // the end is never reached), so -a has the upper bound -lo(a).
            auto times = [&](std::int64_t x, std::int64_t y) -> __int128 {
                if (x == 0 || y == 0) return 0;
                if (inf(x) || inf(y)) return (x < 0) != (y < 0) ? kNegInf : kPosInf;
                return __int128(x) * y;
            };
            __int128 c[4] = {times(a->lo, b->lo), times(a->lo, b->hi), times(a->hi, b->lo), times(a->hi, b->hi)};
            return {clamp_bound(*std::min_element(c, c + 4)), clamp_bound(*std::max_element(c, c + 4))};
        }
        case ExprOp::Div:
            if (b->lo == b->hi && b->lo > 0) {
                std::int64_t lo = inf(a->lo) ? kNegInf : floor_div(a->lo, b->lo);
                std::int64_t hi = inf(a->hi) ? kPosInf : floor_div(a->hi, b->lo);
                return {lo, hi};
            }
            if (a->lo >= 0 && b->lo > 0) return {0, a->hi};
            return {kNegInf, kPosInf};
        case ExprOp::Mod:
            if (b->lo > 0) return {0, inf(b->hi) ? kPosInf : b->hi - 1};
            return {kNegInf, kPosInf};
        case ExprOp::Min: return {std::min(a->lo, b->lo), std::min(a->hi, b->hi)};
        case ExprOp::Max: return {std::max(a->lo, b->lo), std::max(a->hi, b->hi)};
        default: return {0, 1};  // comparisons and logic
    }
}

class ExprPool {
public:
    static ExprPool& instance() {
        static ExprPool pool;
        return pool;
    }

    // `lo`/`hi` are read for Var only (a dimension's declared range); other nodes derive theirs.
    const ExprNode* intern(ExprOp op, char var, std::int64_t value, const ExprNode* a, const ExprNode* b,
                           std::int64_t lo = 0, std::int64_t hi = kPosInf) {
        if (op != ExprOp::Var) lo = 0, hi = kPosInf;
        ExprNode probe{op, var, value, a, b, 0, lo, hi};
        std::lock_guard lock(mutex_);
        if (auto it = set_.find(&probe); it != set_.end()) return *it;
        std::uint64_t key = mix(mix(static_cast<std::uint64_t>(op) + 1, static_cast<std::uint64_t>(var)),
                                static_cast<std::uint64_t>(value));
        if (a) key = mix(key, a->key);
        if (b) key = mix(key, b->key);
        // A declared range changes the key; the default one keeps keys (and so term order) as they were.
        if (op == ExprOp::Var && (lo != 0 || hi != kPosInf))
            key = mix(mix(key, static_cast<std::uint64_t>(lo)), static_cast<std::uint64_t>(hi));
        if (op == ExprOp::Num) lo = hi = value;
        else if (op == ExprOp::Index) lo = 0, hi = kPosInf;
        else if (op != ExprOp::Var) std::tie(lo, hi) = bounds_of(op, a, b);
        const ExprNode* node = &storage_.emplace_back(ExprNode{op, var, value, a, b, key, lo, hi});
        set_.insert(node);
        return node;
    }

    // The constant `value`'s node. Small constants are most of what is interned (every
    // default Expression is 0, every view's unit stride 1): their nodes are kept by each
    // thread once made (the pool never frees one), so they are found without the lock.
    const ExprNode* constant(std::int64_t value) {
        constexpr std::uint64_t kKept = 64;
        if (static_cast<std::uint64_t>(value) >= kKept) return intern(ExprOp::Num, 0, value, nullptr, nullptr);
        thread_local std::array<const ExprNode*, kKept> kept{};
        const ExprNode*& node = kept[static_cast<std::size_t>(value)];
        if (!node) node = intern(ExprOp::Num, 0, value, nullptr, nullptr);
        return node;
    }

private:
    struct Hash {
        std::size_t operator()(const ExprNode* n) const {
            std::uint64_t h = mix(static_cast<std::uint64_t>(n->op), static_cast<std::uint64_t>(n->var));
            h = mix(h, static_cast<std::uint64_t>(n->value));
            h = mix(h, reinterpret_cast<std::uintptr_t>(n->a));
            h = mix(h, reinterpret_cast<std::uintptr_t>(n->b));
            return n->op == ExprOp::Var ? mix(mix(h, static_cast<std::uint64_t>(n->lo)), static_cast<std::uint64_t>(n->hi)) : h;
        }
    };
    struct Eq {
        bool operator()(const ExprNode* x, const ExprNode* y) const {
            return x->op == y->op && x->var == y->var && x->value == y->value && x->a == y->a && x->b == y->b &&
                   (x->op != ExprOp::Var || (x->lo == y->lo && x->hi == y->hi));
        }
    };
    std::mutex mutex_;
    std::deque<ExprNode> storage_;
    // Open addressing: a compilation interns millions of expressions, nearly all found already,
    // and with a chained set interning took a fifth of a CUDA compile.
    absl::flat_hash_set<const ExprNode*, Hash, Eq> set_;
};

}  // namespace detail

class Expression {
public:
    Expression() : Expression(std::int64_t{0}) {}
    template <typename T>
        requires(std::is_integral_v<T> && !std::is_same_v<T, char> && !std::is_same_v<T, bool>)
    Expression(T value)  // NOLINT(google-explicit-constructor): literals read naturally in shapes
        : node_(pool().constant(static_cast<std::int64_t>(value))) {}
    Expression(char dim)  // NOLINT(google-explicit-constructor)
        : node_(pool().intern(ExprOp::Var, dim, 0, nullptr, nullptr)) {
        check(DynMap::valid_name(dim), "Expression", "dimension name '{}' must be a letter", dim);
    }

    // A dimension known to lie in [lo, hi] (hi = nullopt: unbounded). Sizes are never
    // negative, so lo >= 0; Expression(dim) is the same as dim(dim, 0).
    static Expression dim(char name, std::int64_t lo, std::optional<std::int64_t> hi = std::nullopt) {
        check(DynMap::valid_name(name), "Expression::dim", "dimension name '{}' must be a letter", name);
        check(lo >= 0, "Expression::dim", "dimension '{}' cannot have a negative lower bound ({})", name, lo);
        check(!hi || (*hi >= lo && *hi < detail::kPosInf), "Expression::dim",
              "dimension '{}' has an empty or unrepresentable range [{}, {}]", name, lo, hi.value_or(0));
        return Expression(pool().intern(ExprOp::Var, name, 0, nullptr, nullptr, lo, hi.value_or(detail::kPosInf)));
    }

    // The index of the element being computed (printed as `idx`).
    static Expression index() { return Expression(pool().intern(ExprOp::Index, 0, 0, nullptr, nullptr)); }

    ExprOp op() const { return node_->op; }
    bool is_constant() const { return node_->op == ExprOp::Num; }
    std::int64_t constant_value() const {
        check(is_constant(), "Expression", "'{}' is not a constant", to_string());
        return node_->value;
    }
    std::optional<std::int64_t> as_constant() const {
        return is_constant() ? std::optional(node_->value) : std::nullopt;
    }
    char var() const { return node_->var; }
    Expression lhs() const { return Expression(node_->a); }
    Expression rhs() const { return Expression(node_->b); }
    // Interval the value is known to lie in (inclusive); unbounded sides are +-2^62.
    std::int64_t lower_bound() const { return node_->lo; }
    std::int64_t upper_bound() const { return node_->hi; }
    bool bounded_above() const { return node_->hi < detail::kPosInf; }
    bool uses_index() const;
    std::vector<char> dims() const;  // free dimension names, sorted
    std::vector<Expression> variables() const;  // its dimensions, each with its range

    std::int64_t eval(const DynMap& dims, std::int64_t index = 0) const;
    Expression substitute(char dim, Expression with) const;
    Expression substitute_index(Expression with) const;
    Expression bind(const DynMap& dims) const;  // replaces every dimension set in `dims`

    // C/C++/CUDA source. Division and modulo print as `/` and `%` where both
    // operands are known non-negative, else as floordiv(a, b) / floormod(a, b),
    // which generated code must define.
    std::string to_string() const;

    friend bool operator==(Expression a, Expression b) { return a.node_ == b.node_; }
    // The structural key, not the address: hashes of views and specs decide orders (a region's
    // canonical operand order, hence the kernels' sources), which must be the same in every run.
    std::size_t hash() const { return node_->key; }
    std::uint64_t structural_key() const { return node_->key; }

    friend Expression operator+(Expression a, Expression b);
    friend Expression operator-(Expression a, Expression b) { return a + b * Expression(-1); }
    friend Expression operator-(Expression a) { return a * Expression(-1); }
    friend Expression operator*(Expression a, Expression b);
    friend Expression operator/(Expression a, Expression b);
    friend Expression operator%(Expression a, Expression b);
    Expression& operator+=(Expression o) { return *this = *this + o; }
    Expression& operator-=(Expression o) { return *this = *this - o; }
    Expression& operator*=(Expression o) { return *this = *this * o; }
    Expression& operator/=(Expression o) { return *this = *this / o; }
    friend Expression min(Expression a, Expression b);
    friend Expression max(Expression a, Expression b);
    friend Expression lt(Expression a, Expression b);
    friend Expression eq(Expression a, Expression b);
    friend Expression logical_and(Expression a, Expression b);
    friend Expression logical_or(Expression a, Expression b);
    friend Expression gt(Expression a, Expression b) { return lt(b, a); }
    friend Expression le(Expression a, Expression b) { return lt(a, b + 1); }
    friend Expression ge(Expression a, Expression b) { return lt(b, a + 1); }
    friend Expression ne(Expression a, Expression b) { return Expression(1) - eq(a, b); }
    friend Expression logical_not(Expression a) { return eq(a, 0); }
    // ceil(a / b) for positive b.
    friend Expression ceil_div(Expression a, Expression b) { return (a + b - 1) / b; }

    const detail::ExprNode* node() const { return node_; }
    explicit Expression(const detail::ExprNode* node) : node_(node) {}

private:
    static detail::ExprPool& pool() { return detail::ExprPool::instance(); }
    const detail::ExprNode* node_;
};

// Namespace-scope declarations so luminal::lt(...) etc. also work when qualified.
Expression min(Expression a, Expression b);
Expression max(Expression a, Expression b);
Expression lt(Expression a, Expression b);
Expression eq(Expression a, Expression b);
Expression gt(Expression a, Expression b);
Expression le(Expression a, Expression b);
Expression ge(Expression a, Expression b);
Expression ne(Expression a, Expression b);
Expression logical_and(Expression a, Expression b);
Expression logical_or(Expression a, Expression b);
Expression logical_not(Expression a);
Expression ceil_div(Expression a, Expression b);
Expression product(const std::vector<Expression>& values);

}  // namespace luminal

template <>
struct std::hash<luminal::Expression> {
    std::size_t operator()(const luminal::Expression& e) const { return e.hash(); }
};

#include "luminal/shape/expression_simplify.hpp"
