#pragma once
// Rewrite rules are structs, registered at compile time in RuleSet<...>. A
// pure rewrite states what the match equals:
//
//   template <OpKind K>
//   struct Commutes {
//       static constexpr std::string_view name = "commutes";
//       using pattern = As<"op", Pat<sym(K), Var<"a">, Var<"b">>>;
//       using rhs = Like<"op", Var<"b">, Var<"a">>;   // the same node, operands (and their views) swapped
//   };
//
// and any rule may instead (or for more than one result) write the step:
//
//       static bool guard(const EGraph&, Ctx&, const MatchOf<pattern>&);  // optional
//       static void apply(EGraph&, Ctx&, const MatchOf<pattern>&);         // add nodes, merge classes
//       static constexpr bool reads_child_classes = true;                  // optional, see below
//       static constexpr std::array reads_child_ops = {...};               // optional, see below
//       static void prefetch(const EGraph&, const Match&);                 // optional, see below
//
// A right-hand side is Var<"x"> (the class bound to x) or a node form of the
// language (HLIR: Like<"node", children...>, egraph/rule_support.hpp).
//
// The runner matches semi-naively: a match made only of e-nodes the rule has
// already seen (added, moved to another class or re-canonicalised before its
// last search) is skipped. A rule whose apply() or guard also looks at the
// e-nodes of its matched nodes' child classes, beyond its pattern, declares
// reads_child_classes: its match is then also found again whenever one of
// those child classes gains (or re-canonicalises) an e-node. If it reads
// only e-nodes of some ops there, it names them in reads_child_ops: an
// e-node of another op gained there then does not bring the match back
// (most of what a child class gains is of no interest to most such rules,
// and a match found again does the work of apply() to find nothing new).
// Only for a rule that reads no deeper: cuda.row-kernel, which grows through
// the classes below those, picks up what they gained when found again for any e-node.
//
// A rule whose apply() mostly finds e-nodes that exist already may declare
// prefetch(): the runner calls it a few matches ahead with the match apply()
// will get then, and it names the first e-node that apply() will add
// (EGraph::prefetch). That hash-cons slot is then in cache when apply() gets
// there; on a table larger than the L1 cache the lookup stalls otherwise.
//
// Ctx is the language's context (attribute tables and the like). Rule sets
// concatenate, so a backend's rules join the core rules with concat_t.
#include <span>
#include <string_view>

#include "luminal/egraph/pattern.hpp"

namespace luminal::egraph {

// Builds a right-hand side in the e-graph and returns its class.
template <typename Rhs, typename Pattern, typename Ctx>
struct Instantiate;
template <VarId Id, typename Pattern, typename Ctx>
struct Instantiate<Var<Id>, Pattern, Ctx> {
    static ClassId build(EGraph&, Ctx&, const MatchOf<Pattern>& m) { return m.template bound<Id>(); }
};

template <typename R, typename Ctx>
concept RewriteRule = requires(EGraph& g, Ctx& ctx, const MatchOf<typename R::pattern>& m) {
    { R::name } -> std::convertible_to<std::string_view>;
    typename R::pattern;
} && (requires(EGraph& g, Ctx& ctx, const MatchOf<typename R::pattern>& m) { R::apply(g, ctx, m); } ||
      requires(EGraph& g, Ctx& ctx, const MatchOf<typename R::pattern>& m) {
          Instantiate<typename R::rhs, typename R::pattern, Ctx>::build(g, ctx, m);
      });

template <typename R, typename Ctx>
bool rule_guard(const EGraph& g, Ctx& ctx, const MatchOf<typename R::pattern>& m) {
    if constexpr (requires { R::guard(g, ctx, m); }) return R::guard(g, ctx, m);
    else return true;
}

template <typename R, typename Ctx>
void rule_apply(EGraph& g, Ctx& ctx, const MatchOf<typename R::pattern>& m) {
    if constexpr (requires { typename R::rhs; })
        g.merge(m.root(g), Instantiate<typename R::rhs, typename R::pattern, Ctx>::build(g, ctx, m));
    else
        R::apply(g, ctx, m);
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

// The ops reads_child_ops names (empty: any).
template <typename R>
constexpr std::span<const Symbol> child_ops() {
    if constexpr (requires { R::reads_child_ops; }) return R::reads_child_ops;
    else return {};
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
