#pragma once
// Compile-time patterns. A pattern is a type:
//   Var<"x">                    binds (or, if already bound, must equal) a class
//   Pat<op, Child...>           an e-node with that op and exactly those children
//   As<"name", Pat<...>>        the same, naming the matched e-node for the rule
//   AnyArity<op>                an e-node with that op and any children
// Variables are named (Var<"x">) or numbered (Var<0>); a pattern uses one kind.
// The compiler turns each pattern into a specialised matcher (Matcher<P, ...>)
// whose loops and child accesses are unrolled; a variable used twice makes the
// pattern non-linear and is checked for class equality. Which variables are
// bound at each step is known at compile time (a template mask), so binding
// costs one store. Matched e-nodes are recorded in pre-order (the root is
// node 0); a rule reads them and the variables by name through MatchOf<P>.
#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <tuple>
#include <utility>

#include "luminal/egraph/egraph.hpp"

namespace luminal::egraph {

// A name usable as a template argument ("x", "mul").
struct Name {
    static constexpr std::size_t kCapacity = 24;
    char text[kCapacity] = {};
    template <std::size_t N>
    consteval Name(const char (&s)[N]) {  // NOLINT: names are written as string literals
        static_assert(N <= kCapacity, "pattern names are at most 23 characters");
        for (std::size_t i = 0; i < N; ++i) text[i] = s[i];
    }
    constexpr std::string_view view() const { return std::string_view(text); }
};

// A pattern variable: numbered (Var<0>) or named (Var<"x">).
struct VarId {
    int index = -1;
    char text[Name::kCapacity] = {};
    consteval VarId(int i) : index(i) {}  // NOLINT
    template <std::size_t N>
    consteval VarId(const char (&s)[N]) {  // NOLINT
        static_assert(N <= Name::kCapacity, "pattern names are at most 23 characters");
        for (std::size_t i = 0; i < N; ++i) text[i] = s[i];
    }
    constexpr bool named() const { return index < 0; }
    constexpr std::string_view name() const { return std::string_view(text); }
};

template <VarId Id>
struct Var {};

template <Symbol Op, typename... Children>
struct Pat {};

template <Name N, typename P>
struct As {};

// An e-node with this op and any number of children, left for apply() to read
// (backend ops such as fused regions have variable arity).
template <Symbol Op>
struct AnyArity {};

// Room enough for softmax or an attention head; a search stores each match
// packed to its own pattern's size, so the bound costs little.
inline constexpr int kMaxVars = 8;
inline constexpr int kMaxPatternNodes = 24;

// Left uninitialised: a match is filled up to its pattern's size only.
struct Match {
    std::array<ClassId, kMaxVars> vars;
    std::array<ENodeId, kMaxPatternNodes> nodes;

    ClassId var(int i) const { return vars[static_cast<std::size_t>(i)]; }
    ENodeId node(int i) const { return nodes[static_cast<std::size_t>(i)]; }
    ClassId root(const EGraph& g) const { return g.live_class(nodes[0]); }
};

// The names a pattern gives its variables (in order of first appearance) and
// its nodes (with their pre-order indexes), and the pattern with every name
// replaced by what the matcher uses: numbered variables, unnamed nodes.
namespace names {

struct Table {
    std::array<std::string_view, kMaxVars> vars{};
    int var_count = 0;
    bool numbered = false;
    std::array<std::string_view, kMaxPatternNodes> nodes{};
    std::array<int, kMaxPatternNodes> node_index{};
    int node_count = 0;
    int next_node = 0;  // pre-order index of the next pattern node

    constexpr int var_index(std::string_view name) const {
        for (int i = 0; i < var_count; ++i)
            if (vars[static_cast<std::size_t>(i)] == name) return i;
        return -1;
    }
    constexpr int node_position(std::string_view name) const {
        for (int i = 0; i < node_count; ++i)
            if (nodes[static_cast<std::size_t>(i)] == name) return node_index[static_cast<std::size_t>(i)];
        return -1;
    }
};

template <typename P>
struct Collect;
template <VarId Id>
struct Collect<Var<Id>> {
    static constexpr void into(Table& t) {
        if (!Id.named()) {
            t.numbered = true;
            return;
        }
        if (t.var_index(Id.name()) < 0) t.vars[static_cast<std::size_t>(t.var_count++)] = Id.name();
    }
};
template <Symbol Op, typename... C>
struct Collect<Pat<Op, C...>> {
    static constexpr void into(Table& t) {
        ++t.next_node;
        (Collect<C>::into(t), ...);
    }
};
template <Symbol Op>
struct Collect<AnyArity<Op>> {
    static constexpr void into(Table& t) { ++t.next_node; }
};
template <Name N, typename P>
struct Collect<As<N, P>> {
    static constexpr void into(Table& t) {
        t.nodes[static_cast<std::size_t>(t.node_count)] = N.view();
        t.node_index[static_cast<std::size_t>(t.node_count++)] = t.next_node;
        Collect<P>::into(t);
    }
};

template <typename P>
consteval Table table() {
    Table t;
    Collect<P>::into(t);
    return t;
}

template <typename P, typename Root>
struct Unnamed;
template <VarId Id, typename Root>
struct Unnamed<Var<Id>, Root> {
    using type = Var<Id.named() ? VarId(table<Root>().var_index(Id.name())) : Id>;
};
template <Symbol Op, typename... C, typename Root>
struct Unnamed<Pat<Op, C...>, Root> {
    using type = Pat<Op, typename Unnamed<C, Root>::type...>;
};
template <Symbol Op, typename Root>
struct Unnamed<AnyArity<Op>, Root> {
    using type = AnyArity<Op>;
};
template <Name N, typename P, typename Root>
struct Unnamed<As<N, P>, Root> {
    using type = typename Unnamed<P, Root>::type;
};

}  // namespace names

// What the matcher runs for pattern P.
template <typename P>
using matcher_pattern_t = typename names::Unnamed<P, P>::type;

// A match of pattern P, read by the names P gives: m.var<"x">(), m.node<"mul">().
template <typename P>
struct MatchOf : Match {
    static constexpr names::Table kNames = names::table<P>();
    static_assert(!(kNames.numbered && kNames.var_count > 0), "a pattern's variables are all named or all numbered");

    template <Name N>
    ClassId var() const {
        constexpr int i = kNames.var_index(N.view());
        static_assert(i >= 0, "the pattern has no variable of that name");
        return vars[static_cast<std::size_t>(i)];
    }
    template <Name N>
    ENodeId node() const {
        constexpr int i = kNames.node_position(N.view());
        static_assert(i >= 0, "the pattern names no node so (name it with As<\"...\", Pat<...>>)");
        return nodes[static_cast<std::size_t>(i)];
    }
    // The class a variable of the pattern is bound to, by its VarId.
    template <VarId Id>
    ClassId bound() const {
        constexpr int i = Id.named() ? kNames.var_index(Id.name()) : Id.index;
        static_assert(i >= 0, "the pattern has no variable of that name");
        return vars[static_cast<std::size_t>(i)];
    }
    using Match::node;
    using Match::var;
};

template <typename P>
struct PatternSize;
template <VarId Id>
struct PatternSize<Var<Id>> {
    static_assert(!Id.named(), "named variables are numbered before matching (matcher_pattern_t)");
    static constexpr int nodes = 0;
    static constexpr int vars = Id.index + 1;
    static constexpr std::uint32_t var_mask = 1u << Id.index;
};
template <Symbol Op, typename... C>
struct PatternSize<Pat<Op, C...>> {
    static constexpr int nodes = 1 + (0 + ... + PatternSize<C>::nodes);
    static constexpr int vars = std::max({0, PatternSize<C>::vars...});
    static constexpr std::uint32_t var_mask = (0u | ... | PatternSize<C>::var_mask);
};

template <Symbol Op>
struct PatternSize<AnyArity<Op>> {
    static constexpr int nodes = 1;
    static constexpr int vars = 0;
    static constexpr std::uint32_t var_mask = 0;
};

// Matches pattern P, whose first node has pre-order index First, given that
// the variables in Bound are bound already.
template <typename P, int First, std::uint32_t Bound>
struct Matcher;

template <Symbol Op, int First, std::uint32_t Bound>
struct Matcher<AnyArity<Op>, First, Bound> {
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

// Matching runs on a clean e-graph (EGraph::clean()): every live e-node's
// children are canonical then, so children and bound variables compare by id
// without find().
template <VarId Id, int First, std::uint32_t Bound>
struct Matcher<Var<Id>, First, Bound> {
    static constexpr int I = Id.index;
    template <typename K>
    static void in_class(const EGraph&, ClassId c, Match& m, K&& k) {
        if constexpr ((Bound >> I & 1u) != 0) {
            if (m.vars[I] == c) k(m);
        } else {
            m.vars[I] = c;
            k(m);
        }
    }
};

template <Symbol Op, typename... C, int First, std::uint32_t Bound>
struct Matcher<Pat<Op, C...>, First, Bound> {
    static constexpr std::size_t arity = sizeof...(C);

    // The variables bound before child i is matched: those of the children
    // before it (a skipped child's variables are in Bound already).
    static constexpr std::array<std::uint32_t, arity + 1> bound_before() {
        std::array<std::uint32_t, arity + 1> out{};
        std::uint32_t masks[] = {PatternSize<C>::var_mask..., 0u};
        std::uint32_t bound = Bound;
        for (std::size_t i = 0; i <= arity; ++i) {
            out[i] = bound;
            bound |= masks[i];
        }
        return out;
    }

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

    // Child i of e-node id, whose arity is checked already: a narrow node's
    // children are inline.
    static ClassId child(const EGraph& g, ENodeId id, std::size_t i) {
        if constexpr (arity <= kInlineChildren) return g.node(id).inline_children[i];
        else return g.children(id)[i];
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

    // Matches children I.. of e-node id, all but child Skip (already matched
    // when a delta match climbs up into this node from it).
    template <std::size_t I, std::size_t Skip = arity, typename K>
    static void children(const EGraph& g, ENodeId id, Match& m, K&& k) {
        if constexpr (I == arity) {
            k(m);
        } else if constexpr (I == Skip) {
            children<I + 1, Skip>(g, id, m, k);
        } else {
            using Child = std::tuple_element_t<I, std::tuple<C...>>;
            constexpr int first = offsets()[I];
            ClassId c = child(g, id, I);
            Matcher<Child, first, bound_before()[I]>::in_class(g, c, m, [&](Match& mm) { children<I + 1, Skip>(g, id, mm, k); });
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

// Patterns fit a Match, and the e-graph is rebuilt (see Matcher<Var>).
template <typename P>
void require_searchable(const EGraph& g) {
    static_assert(PatternSize<P>::nodes <= kMaxPatternNodes && PatternSize<P>::vars <= kMaxVars, "pattern too large");
    check(g.clean(), "egraph matching", "the e-graph has merges pending: call rebuild() before matching");
}

// Calls k(match) for every match of P in the e-graph.
template <typename Named, typename K>
void for_each_match(const EGraph& g, K&& k) {
    using P = matcher_pattern_t<Named>;
    require_searchable<P>(g);
    Match m;
    for (ENodeId id : g.nodes_with_op(RootOp<P>::value)) Matcher<P, 0, 0>::at_node(g, id, m, k);
}

// Delta matching. A match is fresh when one of its e-nodes is in a fresh set
// (FreshByOp, StampedOrAbove below). Each fresh match is found exactly once,
// from its first fresh pattern node (in pre-order): that node is a seed, taken
// from the fresh set; the seed's subtree is matched downwards as usual, then
// the match climbs to the root through the parent lists of the classes on
// the way, and is kept only if no pattern node before the seed is fresh. So
// old matches are never enumerated, unlike a scan with a freshness filter.
namespace delta {

// Where a subpattern sits: at the root, or as child Slot of the pattern node
// Parent (whose pre-order index is ParentFirst), itself somewhere (Up).
struct AtRoot {};
template <typename Parent, int ParentFirst, std::size_t Slot, typename Up>
struct InParent {};

// Climbs from a matched subpattern (whose variables, with those matched on
// the way, are Bound) to the root.
template <typename Where, std::uint32_t Bound>
struct Climb;
template <std::uint32_t Bound>
struct Climb<AtRoot, Bound> {
    template <typename K>
    static void from(const EGraph&, ClassId, Match& m, K&& k) {
        k(m);
    }
};
template <Symbol Op, typename... C, int ParentFirst, std::size_t Slot, typename Up, std::uint32_t Bound>
struct Climb<InParent<Pat<Op, C...>, ParentFirst, Slot, Up>, Bound> {
    using Parent = Matcher<Pat<Op, C...>, ParentFirst, Bound>;
    template <typename K>
    static void from(const EGraph& g, ClassId c, Match& m, K&& k) {
        // The parents listed for the slot's position: for a binary pattern
        // node, exactly those with c there, so the check below always passes
        // (a mixed list made it a mispredicted branch in two).
        for (ENodeId p : g.class_parents(c, std::min<std::size_t>(Slot, 1))) {
            const ENode& n = g.node(p);
            if (n.op != Op || n.arity != sizeof...(C) || !g.alive(p) || Parent::child(g, p, Slot) != c) continue;
            m.nodes[ParentFirst] = p;
            Parent::template children<0, Slot>(g, p, m, [&](Match& mm) {
                Climb<Up, Bound | PatternSize<Pat<Op, C...>>::var_mask>::from(g, g.live_class(p), mm, k);
            });
        }
    }
};

template <typename P, int First, typename Where>
struct Seeds {  // a variable: no e-node to seed from
    template <typename Fresh, typename K>
    static void run(const EGraph&, const Fresh&, Match&, K&&) {}
};

template <int First, typename Where, typename P, typename Fresh, typename K>
void seed_at(const EGraph& g, const Fresh& fresh, Match& m, K&& k) {
    auto first_fresh_here = [&](Match& mm) {
        for (int j = 0; j < First; ++j)
            if (fresh.contains(j == 0, mm.nodes[static_cast<std::size_t>(j)])) return;
        k(mm);
    };
    fresh.for_each(First == 0, RootOp<P>::value, [&](ENodeId id) {
        Matcher<P, First, 0>::at_node(g, id, m, [&](Match& mm) {
            Climb<Where, PatternSize<P>::var_mask>::from(g, g.live_class(id), mm, first_fresh_here);
        });
    });
}

template <Symbol Op, int First, typename Where>
struct Seeds<AnyArity<Op>, First, Where> {
    template <typename Fresh, typename K>
    static void run(const EGraph& g, const Fresh& fresh, Match& m, K&& k) {
        seed_at<First, Where, AnyArity<Op>>(g, fresh, m, k);
    }
};

template <Symbol Op, typename... C, int First, typename Where>
struct Seeds<Pat<Op, C...>, First, Where> {
    using Self = Pat<Op, C...>;
    template <typename Fresh, typename K>
    static void run(const EGraph& g, const Fresh& fresh, Match& m, K&& k) {
        seed_at<First, Where, Self>(g, fresh, m, k);
        if constexpr (sizeof...(C) > 0) children(g, fresh, m, k, std::index_sequence_for<C...>{});
    }

private:
    template <typename Fresh, typename K, std::size_t... I>
    static void children(const EGraph& g, const Fresh& fresh, Match& m, K& k, std::index_sequence<I...>) {
        constexpr auto offsets = Matcher<Self, First, 0>::offsets();
        (Seeds<std::tuple_element_t<I, std::tuple<C...>>, offsets[I], InParent<Self, First, I, Where>>::run(g, fresh, m, k),
         ...);
    }
};

// Fresh e-nodes: those changed at or after an epoch (EGraph::fresh_since),
// by op; at the pattern's root only stamped ones count. An index of the
// e-graph's change log by op, extended with the entries added since it last
// looked (catch_up) and read from the epoch a rule last searched (since): a
// seed position of a pattern visits only its own op's recent nodes, and rules
// searched in turn share one walk of the log.
class FreshByOp {
public:
    FreshByOp() = default;
    FreshByOp(const EGraph& g, std::uint32_t since) {
        catch_up(g);
        set_since(since);
    }
    // Indexes the change log's entries added since the last call (one e-graph per index).
    void catch_up(const EGraph& g) {
        g_ = &g;
        logged_ = g.for_each_change(logged_, [&](ENodeId id, Symbol op, std::uint32_t epoch) {
            if (op >= by_op_.size()) by_op_.resize(op + 1u);
            by_op_[op].push_back({id, epoch});
        });
    }
    void set_since(std::uint32_t since) { since_ = since; }
    template <typename F>
    void for_each(bool at_root, Symbol op, F&& f) const {
        if (op >= by_op_.size()) return;
        const std::vector<Change>& changes = by_op_[op];
        auto recent = std::partition_point(changes.begin(), changes.end(), [&](const Change& c) { return c.epoch < since_; });
        for (auto c = recent; c != changes.end(); ++c)
            if (g_->last_changed_in(c->id, c->epoch) && (!at_root || contains(true, c->id))) f(c->id);
    }
    bool contains(bool at_root, ENodeId id) const { return g_->fresh_since(id, since_, at_root); }

private:
    struct Change {
        ENodeId id;
        std::uint32_t epoch;
    };
    const EGraph* g_ = nullptr;
    std::uint32_t since_ = 0;
    std::size_t logged_ = 0;                  // change log entries indexed so far
    std::vector<std::vector<Change>> by_op_;  // in log order, so by epoch
};

// Fresh e-nodes: those stamped or moved at or after an epoch, and the parents
// of their classes (whose child classes gained or re-canonicalised an e-node),
// at any position in the pattern. With `child_ops`, only a fresh e-node of
// one of those ops makes its class's parents fresh.
class StampedOrAbove {
public:
    StampedOrAbove(const EGraph& g, std::uint32_t since, std::span<const Symbol> child_ops = {})
        : g_(g), marked_(g.total_nodes(), false) {
        auto mark = [&](ENodeId id) {
            if (marked_[id]) return;
            marked_[id] = true;
            nodes_.push_back(id);
        };
        // A fresh e-node that died since left its class nothing new: it was
        // a duplicate of a node there (and nodes that moved in are fresh).
        // A class's parents are marked once, however many fresh e-nodes it has.
        std::vector<bool> class_done(g.class_capacity(), false);
        g.for_each_fresh_since(since, false, [&](ENodeId id) {
            if (!g.alive(id)) return;
            mark(id);
            if (!child_ops.empty() && std::find(child_ops.begin(), child_ops.end(), g.node(id).op) == child_ops.end()) return;
            const ClassId c = g.live_class(id);
            if (class_done[c]) return;
            class_done[c] = true;
            for (std::size_t position = 0; position < EGraph::kParentPositions; ++position)
                for (ENodeId p : g.class_parents(c, position)) mark(p);
        });
    }
    template <typename F>
    void for_each(bool, Symbol op, F&& f) const {
        for (ENodeId id : nodes_)
            if (g_.node(id).op == op) f(id);
    }
    bool contains(bool, ENodeId id) const { return marked_[id]; }

private:
    const EGraph& g_;
    std::vector<bool> marked_;
    std::vector<ENodeId> nodes_;
};

}  // namespace delta

// Calls k(match) for every match of P with an e-node fresh since the index's
// epoch, each once.
template <typename Named, typename K>
void for_each_fresh_match(const EGraph& g, const delta::FreshByOp& fresh, K&& k) {
    using P = matcher_pattern_t<Named>;
    require_searchable<P>(g);
    Match m;
    delta::Seeds<P, 0, delta::AtRoot>::run(g, fresh, m, k);
}
// The same for the e-nodes changed at or after epoch `since`.
template <typename P, typename K>
void for_each_fresh_match(const EGraph& g, std::uint32_t since, K&& k) {
    for_each_fresh_match<P>(g, delta::FreshByOp(g, since), k);
}

// The same, also counting as fresh every match with an e-node whose child
// class holds an e-node stamped since (of one of `child_ops`, if any are
// given): for rules that read those classes.
template <typename Named, typename K>
void for_each_match_with_fresh_children(const EGraph& g, std::uint32_t since, K&& k, std::span<const Symbol> child_ops = {}) {
    using P = matcher_pattern_t<Named>;
    require_searchable<P>(g);
    Match m;
    delta::Seeds<P, 0, delta::AtRoot>::run(g, delta::StampedOrAbove(g, since, child_ops), m, k);
}

}  // namespace luminal::egraph
