#pragma once
// Compile-time patterns. A pattern is a type:
//   Var<0>                      binds (or, if already bound, must equal) a class
//   Pat<op, Child...>           an e-node with that op and exactly those children
// The compiler turns each pattern into a specialised matcher (Matcher<P, N>)
// whose loops and child accesses are unrolled; a variable used twice makes the
// pattern non-linear and is checked for class equality. Matched e-nodes are
// recorded in pre-order (the root is node 0) so guards can read their attributes.
#include <algorithm>
#include <array>
#include <cstdint>
#include <tuple>
#include <utility>

#include "luminal/egraph/egraph.hpp"

namespace luminal::egraph {

template <int Index>
struct Var {};

template <Symbol Op, typename... Children>
struct Pat {};

// An e-node with this op and any number of children, left for apply() to read
// (backend ops such as fused regions have variable arity).
template <Symbol Op>
struct AnyArity {};

// Small on purpose: a saturation run can hold a million matches at once.
inline constexpr int kMaxVars = 4;
inline constexpr int kMaxPatternNodes = 6;

struct Match {
    std::array<ClassId, kMaxVars> vars{};
    std::array<ENodeId, kMaxPatternNodes> nodes{};
    std::uint32_t bound = 0;  // bit i: vars[i] is bound

    ClassId var(int i) const { return vars[static_cast<std::size_t>(i)]; }
    ENodeId node(int i) const { return nodes[static_cast<std::size_t>(i)]; }
    ClassId root(const EGraph& g) const { return g.class_of(nodes[0]); }
};

template <typename P>
struct PatternSize;
template <int I>
struct PatternSize<Var<I>> {
    static constexpr int nodes = 0;
    static constexpr int vars = I + 1;
};
template <Symbol Op, typename... C>
struct PatternSize<Pat<Op, C...>> {
    static constexpr int nodes = 1 + (0 + ... + PatternSize<C>::nodes);
    static constexpr int vars = std::max({0, PatternSize<C>::vars...});
};

template <Symbol Op>
struct PatternSize<AnyArity<Op>> {
    static constexpr int nodes = 1;
    static constexpr int vars = 0;
};

template <typename P, int First>
struct Matcher;

template <Symbol Op, int First>
struct Matcher<AnyArity<Op>, First> {
    template <typename K>
    static void at_node(const EGraph& g, ENodeId id, Match& m, K&& k) {
        if (g.node(id).op != Op || !g.alive(id)) return;
        m.nodes[First] = id;
        k(m);
    }
    template <typename K>
    static void in_class(const EGraph& g, ClassId c, Match& m, K&& k) {
        const auto& nodes = g.class_nodes(c);
        for (std::size_t i = 0; i < nodes.size(); ++i) at_node(g, nodes[i], m, k);
    }
};

template <int I, int First>
struct Matcher<Var<I>, First> {
    template <typename K>
    static void in_class(const EGraph& g, ClassId c, Match& m, K&& k) {
        constexpr std::uint32_t bit = 1u << I;
        if (m.bound & bit) {
            if (g.find(m.vars[I]) == c) k(m);
            return;
        }
        m.vars[I] = c;
        m.bound |= bit;
        k(m);
        m.bound &= ~bit;
    }
};

template <Symbol Op, typename... C, int First>
struct Matcher<Pat<Op, C...>, First> {
    static constexpr std::size_t arity = sizeof...(C);

    // Pre-order index of child i's first node.
    static constexpr std::array<int, arity + 1> offsets() {
        std::array<int, arity + 1> out{};
        int sizes[] = {PatternSize<C>::nodes..., 0};
        int next = First + 1;
        for (std::size_t i = 0; i <= arity; ++i) {
            out[i] = next;
            next += sizes[i];
        }
        return out;
    }

    template <typename K>
    static void at_node(const EGraph& g, ENodeId id, Match& m, K&& k) {
        const ENode& n = g.node(id);
        if (n.op != Op || n.arity != arity || !g.alive(id)) return;
        m.nodes[First] = id;
        children<0>(g, id, m, k);
    }

    template <typename K>
    static void in_class(const EGraph& g, ClassId c, Match& m, K&& k) {
        const auto& nodes = g.class_nodes(c);
        for (std::size_t i = 0; i < nodes.size(); ++i) at_node(g, nodes[i], m, k);
    }

private:
    template <std::size_t I, typename K>
    static void children(const EGraph& g, ENodeId id, Match& m, K&& k) {
        if constexpr (I == arity) {
            k(m);
        } else {
            using Child = std::tuple_element_t<I, std::tuple<C...>>;
            constexpr int first = offsets()[I];
            ClassId c = g.find(g.children(id)[I]);
            Matcher<Child, first>::in_class(g, c, m, [&](Match& mm) { children<I + 1>(g, id, mm, k); });
        }
    }
};

template <typename P>
struct RootOp;
template <Symbol Op, typename... C>
struct RootOp<Pat<Op, C...>> {
    static constexpr Symbol value = Op;
};
template <Symbol Op>
struct RootOp<AnyArity<Op>> {
    static constexpr Symbol value = Op;
};

// Calls k(match) for every match of P in the e-graph.
template <typename P, typename K>
void for_each_match(const EGraph& g, K&& k) {
    static_assert(PatternSize<P>::nodes <= kMaxPatternNodes && PatternSize<P>::vars <= kMaxVars, "pattern too large");
    Match m;
    for (ENodeId id : g.nodes_with_op(RootOp<P>::value)) Matcher<P, 0>::at_node(g, id, m, k);
}

}  // namespace luminal::egraph
