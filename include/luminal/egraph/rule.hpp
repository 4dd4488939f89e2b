#pragma once
// Rewrite rules are structs, registered at compile time in RuleSet<...>:
//
//   struct MulCommutes {
//       static constexpr std::string_view name = "mul-commutes";
//       using pattern = Pat<Mul, Var<0>, Var<1>>;
//       static bool guard(const EGraph&, Ctx&, const Match&);   // optional
//       static void apply(EGraph&, Ctx&, const Match&);         // add nodes, merge classes
//       static constexpr bool reads_child_classes = true;      // optional, see below
//       static void prefetch(const EGraph&, const Match&);      // optional, see below
//   };
//
// The runner matches semi-naively: a match made only of e-nodes the rule has
// already seen (added, moved to another class or re-canonicalised before its
// last search) is skipped. A rule whose apply() or guard also looks at the
// e-nodes of its matched nodes' child classes, beyond its pattern, declares
// reads_child_classes: its match is then also found again whenever one of
// those child classes gains (or re-canonicalises) an e-node.
//
// A rule whose apply() mostly finds e-nodes that exist already may declare
// prefetch(): the runner calls it a few matches ahead with the match apply()
// will get then, and it names the first e-node that apply() will add
// (EGraph::prefetch). That hash-cons slot is then in cache when apply() gets
// there; on a table larger than the L1 cache the lookup stalls otherwise.
//
// Ctx is the language's context (attribute tables and the like). Rule sets
// concatenate, so a backend's rules join the core rules with concat_t.
#include <string_view>

#include "luminal/egraph/pattern.hpp"

namespace luminal::egraph {

template <typename R, typename Ctx>
concept RewriteRule = requires(EGraph& g, Ctx& ctx, const Match& m) {
    { R::name } -> std::convertible_to<std::string_view>;
    typename R::pattern;
    R::apply(g, ctx, m);
};

template <typename R, typename Ctx>
bool rule_guard(const EGraph& g, Ctx& ctx, const Match& m) {
    if constexpr (requires { R::guard(g, ctx, m); }) return R::guard(g, ctx, m);
    else return true;
}

template <typename R>
void rule_prefetch(const EGraph& g, const Match& m) {
    if constexpr (requires { R::prefetch(g, m); }) R::prefetch(g, m);
}

template <typename R>
constexpr bool reads_child_classes() {
    if constexpr (requires { R::reads_child_classes; }) return R::reads_child_classes;
    else return false;
}

template <typename... Rules>
struct RuleSet {
    static constexpr std::size_t size = sizeof...(Rules);
};

template <typename... Sets>
struct Concat;
template <>
struct Concat<> {
    using type = RuleSet<>;
};
template <typename... A>
struct Concat<RuleSet<A...>> {
    using type = RuleSet<A...>;
};
template <typename... A, typename... B, typename... Rest>
struct Concat<RuleSet<A...>, RuleSet<B...>, Rest...> {
    using type = typename Concat<RuleSet<A..., B...>, Rest...>::type;
};
template <typename... Sets>
using concat_t = typename Concat<Sets...>::type;

}  // namespace luminal::egraph
