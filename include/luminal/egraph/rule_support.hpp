#pragma once
// Small helpers rules over the HLIR language share.
#include "luminal/egraph/hlir.hpp"
#include "luminal/egraph/rule.hpp"

namespace luminal::egraph {

inline constexpr Symbol sym(OpKind k) { return symbol_of(k); }

// True when input i is read element for element: the producer's buffer in
// order, with the consumer's own shape (so the producer can stand in for it).
inline bool reads_whole(const NodeSpec& s, std::size_t i) {
    return s.views[i].is_contiguous() && s.views[i].dims() == s.shape;
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

inline NodeSpec scalar_constant(double value, DType dtype) {
    NodeSpec s;
    s.kind = sym(OpKind::Constant);
    s.op = Op::constant(value);
    s.dtype = dtype;
    return s;
}

}  // namespace luminal::egraph
