#pragma once
// Small helpers rules over the HLIR language share.
#include "luminal/egraph/hlir.hpp"
#include "luminal/egraph/rule.hpp"

#include <type_traits>
#include <vector>

namespace luminal::egraph {

inline constexpr Symbol sym(OpKind k) { return symbol_of(k); }

// True when input i is read element for element: the producer's buffer in
// order, with the consumer's own shape (so the producer can stand in for it).
inline bool reads_whole(const NodeSpec& s, std::size_t i) {
    return s.views[i].is_contiguous() && s.views[i].dims() == s.shape;
}

// Whether `v` reads its buffer in order from its start, as is_contiguous says, but a size-1 axis at any
// stride: torch's views give such axes strides of 0 or of a neighbour, and they read one place whatever it is.
inline bool reads_in_order(const ShapeTracker& v) {
    if (!(v.base() == Expression(0))) return false;
    Expression stride = 1;
    for (std::size_t i = v.rank(); i-- > 0;) {
        const ShapeTracker::Axis& a = v.axes()[i];
        const bool any_stride = a.size == Expression(1);
        if ((!(a.stride == stride) && !any_stride) || !(a.offset == Expression(0)) || !v.axis_fully_valid(i)) return false;
        stride = stride * a.size;
    }
    return true;
}

// Whether shapes a and b hold the same rows: equal sizes and row lengths (the same flat layout, read in order).
inline bool same_row_layout(const Shape& a, const Shape& b) {
    return a == b || (!a.empty() && !b.empty() && a.back() == b.back() && product(a) == product(b));
}

inline bool has_padding(const ShapeTracker& v) { return v.is_padded_or_masked(); }

// Any live e-node of class c with op `op`.
inline std::optional<ENodeId> node_with_op(const EGraph& g, ClassId c, Symbol op) {
    for (ENodeId n : g.class_nodes(c))
        if (g.alive(n) && g.node(n).op == op) return n;
    return std::nullopt;
}

inline ClassId add_spec(EGraph& g, HlirContext& ctx, NodeSpec spec, std::span<const ClassId> children) {
    return add_node(g, ctx, std::move(spec), children);
}

// A right-hand side node: the matched node `N` again (its op, attributes,
// shape and dtype) over new children, each a variable that is one of N's own
// children in the pattern; it reads each through the view N read it with.
// Like<"op", Var<"b">, Var<"a">> is N with its operands swapped.
template <Name N, typename... Children>
struct Like {};

namespace detail {

template <typename P, Name N>
struct NamedNode {
    using type = void;
};
template <Name M, typename Q, Name N>
struct NamedNode<As<M, Q>, N> {
    using type = std::conditional_t<M.view() == N.view(), Q, typename NamedNode<Q, N>::type>;
};
template <Symbol Op, typename... C, Name N>
struct NamedNode<Pat<Op, C...>, N> {
    template <typename... T>
    struct First {
        using type = void;
    };
    template <typename T, typename... Rest>
    struct First<T, Rest...> {
        using type = std::conditional_t<std::is_void_v<T>, typename First<Rest...>::type, T>;
    };
    using type = typename First<typename NamedNode<C, N>::type...>::type;
};

constexpr bool same_var(VarId a, VarId b) { return a.named() ? b.named() && a.name() == b.name() : a.index == b.index; }

template <typename T>
struct AsVar {
    static constexpr bool is_var = false;
    static constexpr VarId id = -1;
};
template <VarId I>
struct AsVar<Var<I>> {
    static constexpr bool is_var = true;
    static constexpr VarId id = I;
};

// The position of variable Id among the direct children of pattern node P (-1: none).
template <typename P, VarId Id>
struct ChildSlot {
    static constexpr int value = -1;
};
template <Symbol Op, typename... C, VarId Id>
struct ChildSlot<Pat<Op, C...>, Id> {
    static constexpr int value = [] {
        int slot = -1, i = 0;
        ((slot = slot < 0 && AsVar<C>::is_var && same_var(AsVar<C>::id, Id) ? i : slot, ++i), ...);
        return slot;
    }();
};

}  // namespace detail

template <Name N, typename... Children, typename Pattern>
struct Instantiate<Like<N, Children...>, Pattern, HlirContext> {
    using Node = typename detail::NamedNode<Pattern, N>::type;
    static_assert(!std::is_void_v<Node>, "Like<name, ...> needs a node of the pattern named so");
    static_assert((detail::AsVar<Children>::is_var && ...), "the children of Like<...> are variables");
    static_assert(((detail::ChildSlot<Node, detail::AsVar<Children>::id>::value >= 0) && ...),
                  "each child of Like<name, ...> is a variable that is a child of the node named so");

    static ClassId build(EGraph& g, HlirContext& ctx, const MatchOf<Pattern>& m) {
        NodeSpec spec = ctx.spec(g, m.template node<N>());
        std::vector<ShapeTracker> views{
            spec.views[static_cast<std::size_t>(detail::ChildSlot<Node, detail::AsVar<Children>::id>::value)]...};
        spec.views = std::move(views);
        const ClassId children[] = {m.template bound<detail::AsVar<Children>::id>()...};
        return add_node(g, ctx, std::move(spec), children);
    }
};

inline NodeSpec scalar_constant(double value, DType dtype) {
    NodeSpec s;
    s.kind = sym(OpKind::Constant);
    s.op = Op::constant(value);
    s.dtype = dtype;
    return s;
}

// Where a product's operand of class c is read from: c itself, or for a 16-bit
// buffer widened by a Cast of its first rows, that buffer (whose rows are laid
// out as the Cast's output, so the Matmul's view reads it unchanged).
inline ClassId stored_operand(const EGraph& g, const HlirContext& ctx, ClassId c) {
    for (ENodeId n : g.class_nodes(g.find(c))) {
        if (!g.alive(n) || ctx.spec(g, n).kind != sym(OpKind::Cast)) continue;
        const NodeSpec& cast = ctx.spec(g, n);
        const ClassId source = g.find(g.children(n)[0]);
        const DType stored = ctx.facts(g, source).dtype;
        if (stored != DType::BF16 && stored != DType::F16) continue;
        const ShapeTracker& v = cast.views[0];
        const ShapeTracker whole(ctx.facts(g, source).shape);
        if (v.is_padded_or_masked() || v.rank() != whole.rank() || v.rank() == 0 || !(v.base() == Expression(0))) continue;
        bool rows = true;
        for (std::size_t a = 0; a < v.rank(); ++a)
            rows = rows && v.axes()[a].stride == whole.axes()[a].stride && v.axes()[a].offset == Expression(0) &&
                   (a == 0 || v.axes()[a].size == whole.axes()[a].size);
        if (rows) return source;
    }
    return g.find(c);
}

}  // namespace luminal::egraph
