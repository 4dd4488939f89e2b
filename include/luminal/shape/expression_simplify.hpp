#pragma once
// Construction-time simplification and the other algorithms on Expression
// (evaluation, substitution, printing). Included by expression.hpp.
#include <map>

namespace luminal {
namespace detail {

inline const ExprNode* num_node(std::int64_t v) { return ExprPool::instance().constant(v); }
inline const ExprNode* raw_node(ExprOp op, const ExprNode* a, const ExprNode* b) {
    return ExprPool::instance().intern(op, 0, 0, a, b);
}
inline bool is_num(const ExprNode* n) { return n->op == ExprOp::Num; }
inline bool is_positive_num(const ExprNode* n) { return n->op == ExprOp::Num && n->value > 0; }
inline bool is_boolean(const ExprNode* n) { return n->lo >= 0 && n->hi <= 1; }

inline std::int64_t checked_add(std::int64_t a, std::int64_t b) {
    std::int64_t r;
    check(!__builtin_add_overflow(a, b, &r), "Expression", "integer overflow in {} + {}", a, b);
    return r;
}
inline std::int64_t checked_mul(std::int64_t a, std::int64_t b) {
    std::int64_t r;
    check(!__builtin_mul_overflow(a, b, &r), "Expression", "integer overflow in {} * {}", a, b);
    return r;
}

// A sum in canonical form: sum of coef * base (bases non-constant, distinct) plus a constant.
struct Sum {
    struct Term {
        std::int64_t coef;
        const ExprNode* base;
    };
    std::vector<Term> terms;
    std::int64_t constant = 0;
};

// Canonical products keep their constant factor as the right operand.
inline Sum::Term split_coefficient(const ExprNode* e) {
    if (e->op == ExprOp::Mul && is_num(e->b)) return {e->b->value, e->a};
    return {1, e};
}

inline void flatten_sum(const ExprNode* e, std::int64_t scale, Sum& out) {
    if (e->op == ExprOp::Add) {
        flatten_sum(e->a, scale, out);
        flatten_sum(e->b, scale, out);
    } else if (is_num(e)) {
        out.constant = checked_add(out.constant, checked_mul(scale, e->value));
    } else {
        auto term = split_coefficient(e);
        out.terms.push_back({checked_mul(scale, term.coef), term.base});
    }
}

inline bool key_less(const ExprNode* x, const ExprNode* y) {
    return x->key != y->key ? x->key < y->key : std::less<const ExprNode*>{}(x, y);
}

inline void merge_like_terms(Sum& sum) {
    std::sort(sum.terms.begin(), sum.terms.end(), [](auto& x, auto& y) { return key_less(x.base, y.base); });
    std::vector<Sum::Term> merged;
    for (auto& t : sum.terms) {
        if (!merged.empty() && merged.back().base == t.base)
            merged.back().coef = checked_add(merged.back().coef, t.coef);
        else
            merged.push_back(t);
    }
    std::erase_if(merged, [](auto& t) { return t.coef == 0; });
    sum.terms = std::move(merged);
}

const ExprNode* build_mod(const ExprNode* a, const ExprNode* b);

// Undo the digit decomposition a view produces:
//   k*(x % c) + k*c*(x / c)       -> k*x
//   k*(x % c) + k*c*((x / c) % m) -> k*(x % (c*m))
inline bool recombine_digits(Sum& sum) {
    for (std::size_t i = 0; i < sum.terms.size(); ++i) {
        const ExprNode* low = sum.terms[i].base;
        if (low->op != ExprOp::Mod || !is_positive_num(low->b)) continue;
        const ExprNode* x = low->a;
        std::int64_t c = low->b->value, k = sum.terms[i].coef;
        for (std::size_t j = 0; j < sum.terms.size(); ++j) {
            const ExprNode* high = sum.terms[j].base;
            if (j == i || sum.terms[j].coef != checked_mul(k, c)) continue;
            const ExprNode* replacement = nullptr;
            if (high->op == ExprOp::Div && high->a == x && high->b == low->b) {
                replacement = x;
            } else if (high->op == ExprOp::Mod && is_positive_num(high->b) && high->a->op == ExprOp::Div &&
                       high->a->a == x && high->a->b == low->b) {
                replacement = build_mod(x, num_node(checked_mul(c, high->b->value)));
            }
            if (!replacement) continue;
            sum.terms[i].base = replacement;
            sum.terms.erase(sum.terms.begin() + static_cast<std::ptrdiff_t>(j));
            return true;
        }
    }
    return false;
}

const ExprNode* build_mul(const ExprNode* a, const ExprNode* b);

inline const ExprNode* build_sum(Sum sum) {
    merge_like_terms(sum);
    while (recombine_digits(sum)) {
        Sum again;
        again.constant = sum.constant;
        for (auto& t : sum.terms) flatten_sum(t.base, t.coef, again);
        sum = std::move(again);
        merge_like_terms(sum);
    }
    const ExprNode* acc = nullptr;
    for (auto& t : sum.terms) {
        const ExprNode* term = t.coef == 1 ? t.base : raw_node(ExprOp::Mul, t.base, num_node(t.coef));
        acc = acc ? raw_node(ExprOp::Add, acc, term) : term;
    }
    if (!acc) return num_node(sum.constant);
    return sum.constant == 0 ? acc : raw_node(ExprOp::Add, acc, num_node(sum.constant));
}

inline const ExprNode* build_add(const ExprNode* a, const ExprNode* b) {
    if (is_num(a) && is_num(b)) return num_node(checked_add(a->value, b->value));
    Sum sum;
    flatten_sum(a, 1, sum);
    flatten_sum(b, 1, sum);
    return build_sum(std::move(sum));
}

inline void flatten_product(const ExprNode* e, std::int64_t& coef, std::vector<const ExprNode*>& bases) {
    if (e->op == ExprOp::Mul) {
        flatten_product(e->a, coef, bases);
        flatten_product(e->b, coef, bases);
    } else if (is_num(e)) {
        coef = checked_mul(coef, e->value);
    } else {
        bases.push_back(e);
    }
}

inline const ExprNode* build_mul(const ExprNode* a, const ExprNode* b) {
    std::int64_t coef = 1;
    std::vector<const ExprNode*> bases;
    flatten_product(a, coef, bases);
    flatten_product(b, coef, bases);
    if (coef == 0 || bases.empty()) return num_node(coef);
    if (bases.size() == 1 && bases[0]->op == ExprOp::Add) {  // distribute constants over sums
        Sum sum;
        flatten_sum(bases[0], coef, sum);
        return build_sum(std::move(sum));
    }
    std::sort(bases.begin(), bases.end(), key_less);
    const ExprNode* acc = bases[0];
    for (std::size_t i = 1; i < bases.size(); ++i) acc = raw_node(ExprOp::Mul, acc, bases[i]);
    return coef == 1 ? acc : raw_node(ExprOp::Mul, acc, num_node(coef));
}

// floor(a / c) when every value a's bounds allow gives the same quotient (c > 0):
// a / c is then that constant and a % c is a minus its multiple of c.
inline std::optional<std::int64_t> same_quotient(const ExprNode* a, std::int64_t c) {
    if (a->lo <= kNegInf || a->hi >= kPosInf) return std::nullopt;
    std::int64_t q = floor_div(a->lo, c);
    return q == floor_div(a->hi, c) ? std::optional(q) : std::nullopt;
}

inline const ExprNode* build_div(const ExprNode* a, const ExprNode* b) {
    if (is_num(b)) {
        std::int64_t c = b->value;
        check(c != 0, "Expression", "division by zero");
        if (is_num(a)) return num_node(floor_div(a->value, c));
        if (c == 1) return a;
        if (c == -1) return build_mul(a, num_node(-1));
        if (c > 0) {
            if (std::optional<std::int64_t> q = same_quotient(a, c)) return num_node(*q);
            if (a->op == ExprOp::Div && is_positive_num(a->b)) return build_div(a->a, num_node(checked_mul(c, a->b->value)));
            // (c*m + rest) / c == m + rest / c exactly under floor division.
            Sum sum, whole, rest;
            flatten_sum(a, 1, sum);
            whole.constant = floor_div(sum.constant, c);
            rest.constant = floor_mod(sum.constant, c);
            for (auto& t : sum.terms) (t.coef % c == 0 ? whole.terms.emplace_back(Sum::Term{t.coef / c, t.base})
                                                        : rest.terms.emplace_back(t));
            if (!whole.terms.empty() || whole.constant != 0) {
                const ExprNode* rest_node = build_sum(std::move(rest));
                return build_add(build_sum(std::move(whole)), build_div(rest_node, b));
            }
        }
    } else if (is_num(a) && a->value == 0) {
        return a;
    }
    return raw_node(ExprOp::Div, a, b);
}

inline const ExprNode* build_mod(const ExprNode* a, const ExprNode* b) {
    if (is_num(b)) {
        std::int64_t c = b->value;
        check(c != 0, "Expression", "modulo by zero");
        if (is_num(a)) return num_node(floor_mod(a->value, c));
        if (c == 1 || c == -1) return num_node(0);
        if (c > 0) {
            if (std::optional<std::int64_t> q = same_quotient(a, c)) return build_add(a, num_node(checked_mul(*q, -c)));
            if (a->op == ExprOp::Mod && is_positive_num(a->b) && a->b->value % c == 0) return build_mod(a->a, b);
            // Multiples of c vanish: (c*m + rest) % c == rest % c.
            Sum sum, rest;
            flatten_sum(a, 1, sum);
            bool dropped = floor_mod(sum.constant, c) != sum.constant;
            rest.constant = floor_mod(sum.constant, c);
            for (auto& t : sum.terms) {
                if (t.coef % c == 0) dropped = true;
                else rest.terms.push_back(t);
            }
            if (dropped) return build_mod(build_sum(std::move(rest)), b);
        }
    } else if (a == b || (is_num(a) && a->value == 0)) {
        return num_node(0);
    }
    return raw_node(ExprOp::Mod, a, b);
}

inline std::pair<const ExprNode*, const ExprNode*> ordered(const ExprNode* a, const ExprNode* b) {
    return key_less(a, b) ? std::pair{a, b} : std::pair{b, a};
}

// Bounds of b - a, which settle many comparisons the operands' own bounds cannot
// (s < s + 1, min(s, s + 2)).
inline const ExprNode* difference(const ExprNode* a, const ExprNode* b) {
    return build_add(b, build_mul(a, num_node(-1)));
}

inline const ExprNode* build_min(const ExprNode* a, const ExprNode* b) {
    if (is_num(a) && is_num(b)) return num_node(std::min(a->value, b->value));
    if (a == b || a->hi <= b->lo) return a;
    if (b->hi <= a->lo) return b;
    if (const ExprNode* d = difference(a, b); d->lo >= 0) return a;
    else if (d->hi <= 0) return b;
    auto [x, y] = ordered(a, b);
    return raw_node(ExprOp::Min, x, y);
}

inline const ExprNode* build_max(const ExprNode* a, const ExprNode* b) {
    if (is_num(a) && is_num(b)) return num_node(std::max(a->value, b->value));
    if (a == b || a->lo >= b->hi) return a;
    if (b->lo >= a->hi) return b;
    if (const ExprNode* d = difference(a, b); d->hi <= 0) return a;
    else if (d->lo >= 0) return b;
    auto [x, y] = ordered(a, b);
    return raw_node(ExprOp::Max, x, y);
}

inline const ExprNode* build_lt(const ExprNode* a, const ExprNode* b) {
    if (a == b) return num_node(0);
    if (a->hi < b->lo) return num_node(1);
    if (a->lo >= b->hi) return num_node(0);
    const ExprNode* d = difference(a, b);
    if (d->lo > 0) return num_node(1);
    if (d->hi <= 0) return num_node(0);
    return raw_node(ExprOp::Lt, a, b);
}

inline const ExprNode* build_eq(const ExprNode* a, const ExprNode* b) {
    if (a == b) return num_node(1);
    if (is_num(a) && is_num(b)) return num_node(0);
    if (a->hi < b->lo || b->hi < a->lo) return num_node(0);
    if (const ExprNode* d = difference(a, b); d->lo > 0 || d->hi < 0) return num_node(0);
    auto [x, y] = ordered(a, b);
    return raw_node(ExprOp::Eq, x, y);
}

inline const ExprNode* as_boolean(const ExprNode* a) {
    return is_boolean(a) ? a : build_eq(build_eq(a, num_node(0)), num_node(0));
}

inline const ExprNode* build_and(const ExprNode* a, const ExprNode* b) {
    if (is_num(a)) return a->value == 0 ? num_node(0) : as_boolean(b);
    if (is_num(b)) return b->value == 0 ? num_node(0) : as_boolean(a);
    if (a == b) return as_boolean(a);
    auto [x, y] = ordered(a, b);
    return raw_node(ExprOp::And, x, y);
}

inline const ExprNode* build_or(const ExprNode* a, const ExprNode* b) {
    if (is_num(a)) return a->value != 0 ? num_node(1) : as_boolean(b);
    if (is_num(b)) return b->value != 0 ? num_node(1) : as_boolean(a);
    if (a == b) return as_boolean(a);
    auto [x, y] = ordered(a, b);
    return raw_node(ExprOp::Or, x, y);
}

inline const ExprNode* build(ExprOp op, const ExprNode* a, const ExprNode* b) {
    switch (op) {
        case ExprOp::Add: return build_add(a, b);
        case ExprOp::Mul: return build_mul(a, b);
        case ExprOp::Div: return build_div(a, b);
        case ExprOp::Mod: return build_mod(a, b);
        case ExprOp::Min: return build_min(a, b);
        case ExprOp::Max: return build_max(a, b);
        case ExprOp::Lt: return build_lt(a, b);
        case ExprOp::Eq: return build_eq(a, b);
        case ExprOp::And: return build_and(a, b);
        case ExprOp::Or: return build_or(a, b);
        default: return raw_node(op, a, b);
    }
}

// Rebuilds `e` bottom-up with leaves replaced by `leaf(node)` (nullptr = keep).
template <typename Leaf>
const ExprNode* rebuild(const ExprNode* e, Leaf&& leaf, std::unordered_map<const ExprNode*, const ExprNode*>& memo) {
    if (auto it = memo.find(e); it != memo.end()) return it->second;
    const ExprNode* out;
    if (e->a == nullptr) {
        const ExprNode* replaced = leaf(e);
        out = replaced ? replaced : e;
    } else {
        out = build(e->op, rebuild(e->a, leaf, memo), rebuild(e->b, leaf, memo));
    }
    memo.emplace(e, out);
    return out;
}

inline std::int64_t evaluate(const ExprNode* e, const DynMap& dims, std::int64_t index) {
    switch (e->op) {
        case ExprOp::Num: return e->value;
        case ExprOp::Var: return dims.at(e->var);
        case ExprOp::Index: return index;
        default: break;
    }
    std::int64_t a = evaluate(e->a, dims, index), b = evaluate(e->b, dims, index);
    switch (e->op) {
        case ExprOp::Add: return a + b;
        case ExprOp::Mul: return a * b;
        case ExprOp::Div:
            check(b != 0, "Expression::eval", "division by zero");
            return floor_div(a, b);
        case ExprOp::Mod:
            check(b != 0, "Expression::eval", "modulo by zero");
            return floor_mod(a, b);
        case ExprOp::Min: return std::min(a, b);
        case ExprOp::Max: return std::max(a, b);
        case ExprOp::Lt: return a < b;
        case ExprOp::Eq: return a == b;
        case ExprOp::And: return a != 0 && b != 0;
        case ExprOp::Or: return a != 0 || b != 0;
        default: return 0;
    }
}

inline void print(const ExprNode* e, bool top, std::string& out) {
    auto infix = [&](const char* symbol) {
        if (!top) out += '(';
        print(e->a, false, out);
        out += symbol;
        print(e->b, false, out);
        if (!top) out += ')';
    };
    auto call = [&](const char* name) {
        out += name;
        out += '(';
        print(e->a, true, out);
        out += ", ";
        print(e->b, true, out);
        out += ')';
    };
    bool nonnegative = e->a && e->a->lo >= 0 && e->b->lo >= 0;
    switch (e->op) {
        case ExprOp::Num: out += std::to_string(e->value); break;
        case ExprOp::Var: out += e->var; break;
        case ExprOp::Index: out += "idx"; break;
        case ExprOp::Add:
            if (is_num(e->b) && e->b->value < 0) {
                if (!top) out += '(';
                print(e->a, false, out);
                out += " - " + std::to_string(-e->b->value);
                if (!top) out += ')';
            } else {
                infix(" + ");
            }
            break;
        case ExprOp::Mul: infix(" * "); break;
        case ExprOp::Div: nonnegative ? infix(" / ") : call("floordiv"); break;
        case ExprOp::Mod: nonnegative ? infix(" % ") : call("floormod"); break;
        case ExprOp::Min: call("min"); break;
        case ExprOp::Max: call("max"); break;
        case ExprOp::Lt: infix(" < "); break;
        case ExprOp::Eq: infix(" == "); break;
        case ExprOp::And: infix(" && "); break;
        case ExprOp::Or: infix(" || "); break;
    }
}

template <typename Visit>
void visit_leaves(const ExprNode* e, Visit&& visit, std::unordered_set<const ExprNode*>& seen) {
    if (!seen.insert(e).second) return;
    if (e->a == nullptr) return visit(e);
    visit_leaves(e->a, visit, seen);
    visit_leaves(e->b, visit, seen);
}

}  // namespace detail

inline Expression operator+(Expression a, Expression b) { return Expression(detail::build_add(a.node_, b.node_)); }
inline Expression operator*(Expression a, Expression b) { return Expression(detail::build_mul(a.node_, b.node_)); }
inline Expression operator/(Expression a, Expression b) { return Expression(detail::build_div(a.node_, b.node_)); }
inline Expression operator%(Expression a, Expression b) { return Expression(detail::build_mod(a.node_, b.node_)); }
inline Expression min(Expression a, Expression b) { return Expression(detail::build_min(a.node_, b.node_)); }
inline Expression max(Expression a, Expression b) { return Expression(detail::build_max(a.node_, b.node_)); }
inline Expression lt(Expression a, Expression b) { return Expression(detail::build_lt(a.node_, b.node_)); }
inline Expression eq(Expression a, Expression b) { return Expression(detail::build_eq(a.node_, b.node_)); }
inline Expression logical_and(Expression a, Expression b) { return Expression(detail::build_and(a.node_, b.node_)); }
inline Expression logical_or(Expression a, Expression b) { return Expression(detail::build_or(a.node_, b.node_)); }

inline Expression product(const std::vector<Expression>& values) {
    Expression acc = 1;
    for (auto& v : values) acc = acc * v;
    return acc;
}

inline std::int64_t Expression::eval(const DynMap& dims, std::int64_t index) const {
    return detail::evaluate(node_, dims, index);
}

inline Expression Expression::substitute(char dim, Expression with) const {
    std::unordered_map<const detail::ExprNode*, const detail::ExprNode*> memo;
    auto leaf = [&](const detail::ExprNode* n) { return n->op == ExprOp::Var && n->var == dim ? with.node_ : nullptr; };
    return Expression(detail::rebuild(node_, leaf, memo));
}

inline Expression Expression::substitute_index(Expression with) const {
    std::unordered_map<const detail::ExprNode*, const detail::ExprNode*> memo;
    auto leaf = [&](const detail::ExprNode* n) { return n->op == ExprOp::Index ? with.node_ : nullptr; };
    return Expression(detail::rebuild(node_, leaf, memo));
}

inline Expression Expression::bind(const DynMap& dims) const {
    std::unordered_map<const detail::ExprNode*, const detail::ExprNode*> memo;
    auto leaf = [&](const detail::ExprNode* n) -> const detail::ExprNode* {
        if (n->op != ExprOp::Var) return nullptr;
        auto value = dims.get(n->var);
        return value ? detail::num_node(*value) : nullptr;
    };
    return Expression(detail::rebuild(node_, leaf, memo));
}

inline std::string Expression::to_string() const {
    std::string out;
    detail::print(node_, true, out);
    return out;
}

inline bool Expression::uses_index() const {
    bool found = false;
    std::unordered_set<const detail::ExprNode*> seen;
    detail::visit_leaves(node_, [&](const detail::ExprNode* n) { found |= n->op == ExprOp::Index; }, seen);
    return found;
}

inline std::vector<char> Expression::dims() const {
    std::vector<char> out;
    for (const Expression& v : variables()) out.push_back(v.var());
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

inline std::vector<Expression> Expression::variables() const {
    std::vector<Expression> out;
    std::unordered_set<const detail::ExprNode*> seen;
    detail::visit_leaves(node_, [&](const detail::ExprNode* n) { if (n->op == ExprOp::Var) out.emplace_back(n); }, seen);
    return out;
}

}  // namespace luminal

template <>
struct fmt::formatter<luminal::Expression> : fmt::formatter<std::string> {
    auto format(const luminal::Expression& e, fmt::format_context& ctx) const {
        return fmt::formatter<std::string>::format(e.to_string(), ctx);
    }
};
