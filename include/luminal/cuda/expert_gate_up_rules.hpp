#pragma once
// A fused region that reads two ExpertMatmul products of the same rows (the
// same activations and experts, read alike) element for element, and nothing
// else, is one cuda.ExpertGateUp: the gated mixture's gate and up products,
// with the region (SiLU(gate) * up) as their epilogue.
#include <array>
#include <vector>

#include "luminal/cuda/expert_gate_up_op.hpp"
#include "luminal/egraph/rule_support.hpp"
#include "luminal/lowering/rules.hpp"

namespace luminal::egraph {

namespace gate_up_detail {

// The ExpertMatmul nodes of class c (over the stacked weights, and over their blocks where quantized).
inline std::vector<ENodeId> expert_products(const EGraph& g, const HlirContext& ctx, ClassId c) {
    std::vector<ENodeId> out;
    for (ENodeId n : g.class_nodes(g.find(c)))
        if (g.alive(n) && ctx.spec(g, n).kind == op_symbol<ExpertMatmulOp>) out.push_back(n);
    return out;
}

// Whether two ExpertMatmul nodes read the same rows with weights of one kind.
inline bool same_rows(const EGraph& g, const HlirContext& ctx, ENodeId a, ENodeId b) {
    const NodeSpec &x = ctx.spec(g, a), &y = ctx.spec(g, b);
    const auto xs = g.children(a), ys = g.children(b);
    return x.payload_as<ExpertMatmulOp>()->quant == y.payload_as<ExpertMatmulOp>()->quant && x.shape == y.shape &&
           g.find(xs[0]) == g.find(ys[0]) && x.views[0] == y.views[0] && g.find(xs[2]) == g.find(ys[2]) && x.views[2] == y.views[2] &&
           x.views[1].dims() == y.views[1].dims() && ctx.facts(g, xs[1]).dtype == ctx.facts(g, ys[1]).dtype;
}

}  // namespace gate_up_detail

struct ExpertGateUpFromRegion {
    static constexpr std::string_view name = "cuda.expert-gate-up";
    using pattern = As<"region", AnyArity<op_symbol<FusedElementwiseOp>>>;
    static constexpr bool reads_child_classes = true;
    static constexpr std::array<Symbol, 1> reads_child_ops = {op_symbol<ExpertMatmulOp>};
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        using namespace gate_up_detail;
        const NodeSpec region = ctx.spec(g, m.node<"region">());
        const auto kids = g.children(m.node<"region">());
        if (kids.size() != 2 || region.dtype != DType::F32 || !reads_whole(region, 0) || !reads_whole(region, 1)) return;
        const ClassId root = m.root(g);
        const std::vector<ENodeId> gates = expert_products(g, ctx, kids[0]), ups = expert_products(g, ctx, kids[1]);
        for (ENodeId gate : gates)
            for (ENodeId up : ups) {
                if (gate == up || !same_rows(g, ctx, gate, up)) continue;
                const NodeSpec first = ctx.spec(g, gate);
                if (first.shape != region.shape) continue;
                const auto gate_kids = g.children(gate), up_kids = g.children(up);
                const ClassId children[] = {gate_kids[0], gate_kids[1], up_kids[1], gate_kids[2]};
                cuda::ExpertGateUpOp op{first.payload_as<ExpertMatmulOp>()->quant, region.payload_as<FusedElementwiseOp>()->program};
                NodeSpec fused = NodeSpec::backend(op, {first.views[0], first.views[1], ctx.spec(g, up).views[1], first.views[2]},
                                                   region.shape, DType::F32);
                g.merge(root, add_spec(g, ctx, std::move(fused), children));
            }
    }
};

}  // namespace luminal::egraph
