#pragma once
// The attention nn::attention records, found in the HLIR: softmax over the
// keys of scale * (q k^T) + bias, times v, summed over the keys, is one
// Attention (lowering/attention.hpp). The keys and values may be a 16-bit
// cache widened to f32 (a Cast of its first rows): the kernel reads the cache
// itself. Each backend says which views its kernel reads (Reads::accepts).
#include <optional>

#include "luminal/egraph/rule_support.hpp"
#include "luminal/lowering/attention.hpp"
#include "luminal/lowering/matmul.hpp"

namespace luminal::egraph {

namespace attention_detail {

// softmax(x) over the last axis as ops::softmax records it: e = exp2((x + max(x) * -1) * log2(e)), e * recip(sum(e)).
template <typename X>
using ExpShifted = Pat<sym(OpKind::Exp2),
                       Pat<sym(OpKind::Mul),
                           Pat<sym(OpKind::Add), X, Pat<sym(OpKind::Mul), Pat<sym(OpKind::MaxReduce), X>, Pat<sym(OpKind::Constant)>>>,
                           Pat<sym(OpKind::Constant)>>>;
template <typename X>
using Softmax = As<"softmax", Pat<sym(OpKind::Mul), ExpShifted<X>, Pat<sym(OpKind::Recip), Pat<sym(OpKind::SumReduce), ExpShifted<X>>>>>;
using AttentionHead = As<"out", Pat<sym(OpKind::SumReduce), Pat<sym(OpKind::Mul), Softmax<Var<"scores">>, Var<"v">>>>;

// A Matmul node of class c, if any.
inline std::optional<ENodeId> matmul_in(const EGraph& g, const HlirContext& ctx, ClassId c) {
    for (ENodeId n : g.class_nodes(g.find(c)))
        if (g.alive(n) && ctx.spec(g, n).kind == op_symbol<MatmulOp>) return n;
    return std::nullopt;
}

}  // namespace attention_detail

// Reads: rule_name, and accepts(g, ctx, spec, k, v): whether the backend's
// kernel reads the Attention `spec` with keys k and values v as stored.
template <typename Reads>
struct AttentionFromSoftmax {
    static constexpr std::string_view name = Reads::rule_name;
    using pattern = attention_detail::AttentionHead;
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        using namespace attention_detail;
        const ClassId root = m.root(g), probabilities = g.class_of(m.node<"softmax">());
        const auto pv_node = matmul_in(g, ctx, root);
        if (!pv_node || g.find(g.children(*pv_node)[0]) != g.find(probabilities)) return;
        const NodeSpec pv = ctx.spec(g, *pv_node);
        for (ENodeId add : g.class_nodes(g.find(m.var<"scores">()))) {
            if (!g.alive(add) || ctx.spec(g, add).kind != sym(OpKind::Add)) continue;
            const NodeSpec sum = ctx.spec(g, add);
            for (std::size_t side = 0; side < 2; ++side) {
                if (!reads_whole(sum, side)) continue;
                for (ENodeId scaled : g.class_nodes(g.find(g.children(add)[side]))) {
                    if (!g.alive(scaled) || ctx.spec(g, scaled).kind != sym(OpKind::Mul)) continue;
                    const NodeSpec mul = ctx.spec(g, scaled);
                    for (std::size_t factor = 0; factor < 2; ++factor) {
                        const auto scale = ctx.facts(g, g.children(scaled)[factor]).constant;
                        const auto qk = matmul_in(g, ctx, g.children(scaled)[1 - factor]);
                        if (!scale || !qk || !reads_whole(mul, 1 - factor)) continue;
                        const NodeSpec product = ctx.spec(g, *qk);
                        const ClassId q = g.find(g.children(*qk)[0]), k = stored_operand(g, ctx, g.children(*qk)[1]),
                                      v = stored_operand(g, ctx, g.children(*pv_node)[1]), bias = g.find(g.children(add)[1 - side]);
                        const NodeSpec spec = NodeSpec::backend(AttentionOp{*scale},
                                                                {product.views[0], product.views[1], pv.views[1], sum.views[1 - side]},
                                                                ctx.facts(g, root).shape, DType::F32);
                        if (!Reads::accepts(g, ctx, spec, k, v)) continue;
                        ClassId children[] = {q, k, v, bias};
                        g.merge(root, add_spec(g, ctx, spec, children));
                        return;
                    }
                }
            }
        }
    }
};

}  // namespace luminal::egraph
