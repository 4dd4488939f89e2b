#pragma once
// A tiny arithmetic language (numbers, variables, +, *) over the generic
// e-graph, with the classic rule set. Used by the e-graph tests and by the
// egglog comparison benchmark, where the same rules are written in egglog.
#include <string>
#include <vector>

#include <luminal/egraph/runner.hpp>

namespace arith {

using namespace luminal::egraph;

enum Op : Symbol { Num = 1, Var = 2, Add = 3, Mul = 4 };

// Numbers are their own attribute (offset so negatives fit); variables use their index.
struct Context {};
inline AttrId number_attr(std::int64_t v) { return static_cast<AttrId>(v + (1 << 30)); }
inline std::int64_t number_of(AttrId a) { return static_cast<std::int64_t>(a) - (1 << 30); }

inline ClassId num(EGraph& g, std::int64_t v) { return g.add(Num, number_attr(v), {}); }
inline ClassId var(EGraph& g, AttrId index) { return g.add(Var, index, {}); }
inline ClassId add(EGraph& g, ClassId a, ClassId b) { return g.add(Add, 0, {a, b}); }
inline ClassId mul(EGraph& g, ClassId a, ClassId b) { return g.add(Mul, 0, {a, b}); }

// (a + b) -> (b + a); the same for *.
template <Symbol Op, const char* Name>
struct Commutes {
    static constexpr std::string_view name = Name;
    using pattern = Pat<Op, luminal::egraph::Var<0>, luminal::egraph::Var<1>>;
    static void apply(EGraph& g, Context&, const Match& m) { g.merge(m.root(g), g.add(Op, 0, {m.var(1), m.var(0)})); }
    static void prefetch(const EGraph& g, const Match& m) { g.prefetch(Op, 0, {m.var(1), m.var(0)}); }
};
// (a + (b + c)) -> ((a + b) + c): reassociation.
template <Symbol Op, const char* Name>
struct Associates {
    static constexpr std::string_view name = Name;
    using pattern = Pat<Op, luminal::egraph::Var<0>, Pat<Op, luminal::egraph::Var<1>, luminal::egraph::Var<2>>>;
    static void apply(EGraph& g, Context&, const Match& m) {
        ClassId ab = g.add(Op, 0, {m.var(0), m.var(1)});
        g.merge(m.root(g), g.add(Op, 0, {ab, m.var(2)}));
    }
    static void prefetch(const EGraph& g, const Match& m) { g.prefetch(Op, 0, {m.var(0), m.var(1)}); }
};
inline constexpr char kAddCommutes[] = "add-commutes", kMulCommutes[] = "mul-commutes";
inline constexpr char kAddAssociates[] = "add-associates", kMulAssociates[] = "mul-associates";

// x * 1 -> x (a guard reads the matched Num's attribute).
struct MulByOne {
    static constexpr std::string_view name = "mul-by-one";
    using pattern = Pat<Mul, luminal::egraph::Var<0>, Pat<Num>>;
    static bool guard(const EGraph& g, Context&, const Match& m) { return number_of(g.node(m.node(1)).attr) == 1; }
    static void apply(EGraph& g, Context&, const Match& m) { g.merge(m.root(g), m.var(0)); }
};
// x + x -> x * 2: non-linear (the same variable twice).
struct AddSelf {
    static constexpr std::string_view name = "add-self";
    using pattern = Pat<Add, luminal::egraph::Var<0>, luminal::egraph::Var<0>>;
    static void apply(EGraph& g, Context&, const Match& m) { g.merge(m.root(g), mul(g, m.var(0), num(g, 2))); }
};
// Folding: numbers combine.
template <Symbol Op, const char* Name>
struct Folds {
    static constexpr std::string_view name = Name;
    using pattern = Pat<Op, Pat<Num>, Pat<Num>>;
    static void apply(EGraph& g, Context&, const Match& m) {
        std::int64_t a = number_of(g.node(m.node(1)).attr), b = number_of(g.node(m.node(2)).attr);
        g.merge(m.root(g), num(g, Op == Add ? a + b : a * b));
    }
};
inline constexpr char kAddFolds[] = "add-folds", kMulFolds[] = "mul-folds";

using AcRules = RuleSet<Commutes<Add, kAddCommutes>, Associates<Add, kAddAssociates>>;
using ClassicRules = RuleSet<Commutes<Add, kAddCommutes>, Commutes<Mul, kMulCommutes>, Associates<Add, kAddAssociates>,
                             Associates<Mul, kMulAssociates>, MulByOne, AddSelf, Folds<Add, kAddFolds>, Folds<Mul, kMulFolds>>;

// x0 + (x1 + (... + x{n-1})): the standard input for AC saturation.
inline ClassId sum_of_vars(EGraph& g, int n) {
    ClassId acc = var(g, static_cast<AttrId>(n - 1));
    for (int i = n - 2; i >= 0; --i) acc = add(g, var(g, static_cast<AttrId>(i)), acc);
    return acc;
}

}  // namespace arith
