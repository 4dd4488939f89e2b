#pragma once
// A Scatter at the positions of an index expression that moves by one with
// the element (a KV cache write of the new rows, at p * row + z) writes each
// element once: a cuda.WriteAt, one pass with no claim table, which computes
// the region that makes the rows (RoPE's rotation, a cast to the cache's
// dtype) itself.
#include "luminal/cuda/region_rules.hpp"
#include "luminal/cuda/write_at_op.hpp"

namespace luminal::egraph {

struct ScatterWritesAtPositions {
    static constexpr std::string_view name = "cuda.scatter-write-at";
    using pattern = As<"scatter", Pat<sym(OpKind::Scatter), Var<"dest">, Var<"indexes">, Var<"src">>>;
    static constexpr bool reads_child_classes = true;
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        using namespace region_detail;
        const NodeSpec scatter = ctx.spec(g, m.node<"scatter">());  // a copy: add_spec may move the specs
        const ShapeTracker &dest_view = scatter.views[0], &index_view = scatter.views[1], &src_view = scatter.views[2];
        if (!reads_whole(scatter, 0) || index_view.is_padded_or_masked()) return;
        std::optional<Expression> at;
        for (ENodeId n : g.class_nodes(g.find(m.var<"indexes">())))
            if (g.alive(n) && ctx.spec(g, n).kind == sym(OpKind::Iota))
                at = ctx.spec(g, n).op.iota.substitute_index(index_view.index_expression());
        if (!at || (*at - Expression::index()).uses_index()) return;
        const Expression count = index_view.numel();
        const ClassId dest = g.find(m.var<"dest">()), src = g.find(m.var<"src">());
        auto emit = [&](Draft d) {
            std::vector<ShapeTracker> views{dest_view};
            for (std::size_t i = 1; i < d.children.size(); ++i) views.push_back(ShapeTracker(ctx.facts(g, d.children[i]).shape));
            const std::vector<ClassId> children = d.children;
            g.merge(m.root(g), add_spec(g, ctx, NodeSpec::backend(cuda::WriteAtOp{std::move(d.body), *at, count}, std::move(views),
                                                                  scatter.shape, scatter.dtype),
                                        children));
        };
        Draft plain;
        plain.child(dest);
        Step load;
        load.kind = StepKind::Load;
        load.dtype = ctx.facts(g, src).dtype;
        load.input = plain.child(src);
        load.view = src_view;
        plain.body.add(load);
        emit(std::move(plain));
        if (!src_view.is_contiguous() || !(src_view.numel() == count)) return;
        if (auto inner = producer(g, ctx, src); inner && inner->first.steps.size() <= kMaxRegionSteps) {
            Draft d;
            d.child(dest);
            append(d, inner->first, inner->second, std::nullopt, Expression::index());
            if (d.children.size() <= kMaxRegionInputs + 1) emit(std::move(d));
        }
    }
};

}  // namespace luminal::egraph
