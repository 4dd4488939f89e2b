#pragma once
// The rules that find ExpertMatmul (lowering/expert_matmul.hpp) in the graph a
// mixture of experts writes, and keep a quantized model's experts as blocks
// (ExpertMatmulOfDequantized). The first: a Matmul one of whose operands is the rows of
// stacked weights W [E, N, K] that index_select(0, experts) gathered (widened
// to f32 or not), the other the activation rows. The gather's index is what
// index_select builds: experts[r] * (N * K) + (z mod N * K), the expert
// broadcast over each row's N * K elements.
#include <optional>

#include "luminal/egraph/rule_support.hpp"
#include "luminal/lowering/expert_matmul.hpp"
#include "luminal/lowering/matmul.hpp"

namespace luminal::egraph {

namespace expert_detail {

struct RowSelect {
    ClassId weights;
    ShapeTracker weight_view;  // [E, N, K]
    ClassId experts;
    ShapeTracker expert_view;  // [R]
};

inline std::optional<ENodeId> live_node(const EGraph& g, const HlirContext& ctx, ClassId c, Symbol kind) {
    for (ENodeId n : g.class_nodes(g.find(c)))
        if (g.alive(n) && ctx.spec(g, n).kind == kind) return n;
    return std::nullopt;
}

// The Iota of class c whose expression is `expr`, read in order.
inline bool iota_of(const EGraph& g, const HlirContext& ctx, ClassId c, const ShapeTracker& view, const Expression& expr) {
    for (ENodeId n : g.class_nodes(g.find(c))) {
        if (!g.alive(n)) continue;
        const NodeSpec& s = ctx.spec(g, n);
        if (s.kind == sym(OpKind::Iota) && s.op.iota == expr && view.is_contiguous() && view.dims() == s.shape) return true;
    }
    return false;
}

// experts[r] broadcast over [R, N, K] as the Mul of index_select reads it: the experts
// tensor's own [R] elements in order, the two inner axes broadcast.
inline std::optional<ShapeTracker> broadcast_rows(const ShapeTracker& v) {
    if (v.rank() != 3 || has_padding(v) || !v.is_broadcast(1) || !v.is_broadcast(2)) return std::nullopt;
    ShapeTracker rows = v.remove_broadcast_axis(2).remove_broadcast_axis(1);
    if (!rows.is_contiguous()) return std::nullopt;
    return rows;
}

// The index of gather node `gather` selects whole [N, K] matrices of its data: the rows' experts.
inline std::optional<RowSelect> rows_selected(const EGraph& g, const HlirContext& ctx, ENodeId gather) {
    const NodeSpec& s = ctx.spec(g, gather);
    const ShapeTracker &data = s.views[0], &index = s.views[1];
    if (data.rank() != 3 || has_padding(data) || s.shape.size() != 3 || !index.is_contiguous() || index.dims() != s.shape)
        return std::nullopt;
    const Expression count = data.dim(0), n = data.dim(1), k = data.dim(2), rows = s.shape[0];
    if (!(s.shape[1] == n) || !(s.shape[2] == k)) return std::nullopt;
    const Expression inner = Expression(1) * n * k, z = Expression::index();
    const Expression base = z / (rows * inner) * (count * inner) + z % inner;
    const auto kids = g.children(gather);
    const auto add = live_node(g, ctx, kids[1], sym(OpKind::Add));
    if (!add) return std::nullopt;
    const NodeSpec& sum = ctx.spec(g, *add);
    const auto sum_kids = g.children(*add);
    for (std::size_t scaled_at : {0u, 1u}) {
        const std::size_t base_at = 1 - scaled_at;
        if (!iota_of(g, ctx, sum_kids[base_at], sum.views[base_at], base) &&
            !iota_of(g, ctx, sum_kids[base_at], sum.views[base_at], z % inner))
            continue;
        const auto mul = live_node(g, ctx, sum_kids[scaled_at], sym(OpKind::Mul));
        if (!mul || !reads_whole(sum, scaled_at)) continue;
        const NodeSpec& product = ctx.spec(g, *mul);
        const auto mul_kids = g.children(*mul);
        for (std::size_t expert_at : {0u, 1u}) {
            const std::size_t stride_at = 1 - expert_at;
            if (!iota_of(g, ctx, mul_kids[stride_at], product.views[stride_at], inner)) continue;
            const auto experts = broadcast_rows(product.views[expert_at]);
            if (!experts || !is_integer(ctx.facts(g, mul_kids[expert_at]).dtype)) continue;
            return RowSelect{g.find(kids[0]), data, g.find(mul_kids[expert_at]), *experts};
        }
    }
    return std::nullopt;
}

// Class c as the selected rows of stacked float weights, read whole, widened to f32 or as they are.
inline std::optional<RowSelect> selected_weights(const EGraph& g, const HlirContext& ctx, ClassId c) {
    for (ENodeId n : g.class_nodes(g.find(c))) {
        if (!g.alive(n)) continue;
        const NodeSpec& s = ctx.spec(g, n);
        std::optional<ENodeId> gather;
        if (s.kind == sym(OpKind::Gather)) gather = n;
        else if (s.kind == sym(OpKind::Cast) && s.dtype == DType::F32 && reads_whole(s, 0))
            gather = live_node(g, ctx, g.children(n)[0], sym(OpKind::Gather));
        if (!gather || !is_float(ctx.spec(g, *gather).dtype)) continue;
        if (auto select = rows_selected(g, ctx, *gather)) return select;
    }
    return std::nullopt;
}

}  // namespace expert_detail

// Matmul(W.index_select(0, experts), x) or Matmul(x, W.index_select(0, experts))
// over [R, N, K] and [R, 1, K] is ExpertMatmul(x, W, experts).
struct ExpertMatmulFromGather {
    static constexpr std::string_view name = "expert-matmul-from-gather";
    using pattern = As<"gemm", Pat<op_symbol<MatmulOp>, Var<"a">, Var<"b">>>;
    static constexpr bool reads_child_classes = true;
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec gemm = ctx.spec(g, m.node<"gemm">());
        if (gemm.dtype != DType::F32 || gemm.views[0].rank() != 3) return;
        const ClassId operands[] = {m.var<"a">(), m.var<"b">()};
        for (std::size_t w_at : {0u, 1u}) {
            const ShapeTracker& w_view = gemm.views[w_at];
            const ShapeTracker& x_view = gemm.views[1 - w_at];
            if (!w_view.is_contiguous() || x_view.rank() != 3 || !(x_view.dim(1) == Expression(1)) ||
                !is_float(ctx.facts(g, operands[1 - w_at]).dtype))
                continue;
            auto select = expert_detail::selected_weights(g, ctx, operands[w_at]);
            if (!select || !(w_view.dims() == Shape{select->expert_view.dim(0), select->weight_view.dim(1),
                                                     select->weight_view.dim(2)}))
                continue;
            NodeSpec product = NodeSpec::backend(ExpertMatmulOp{}, {x_view, select->weight_view, select->expert_view},
                                                 gemm.shape, DType::F32);
            ClassId children[] = {operands[1 - w_at], select->weights, select->experts};
            g.merge(m.root(g), add_spec(g, ctx, std::move(product), children));
            return;
        }
    }
};

// ExpertMatmul over the stacked experts of a Dequantize ([E * N, K] read as
// [E, N, K]): the product reads each chosen expert's blocks, with activations
// rounded to Q8 where the weight allows it, else f32 (one form, as for the
// quantized GEMV: on a GPU both move the same bytes).
struct ExpertMatmulOfDequantized {
    static constexpr std::string_view name = "expert-matmul-of-dequantized";
    using pattern = As<"product", Pat<op_symbol<ExpertMatmulOp>, Var<"x">, As<"deq", Pat<op_symbol<DequantizeOp>, Var<"q">>>,
                                      Var<"experts">>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& product = ctx.spec(g, m.node<"product">());
        const DequantizeOp* deq = ctx.spec(g, m.node<"deq">()).payload_as<DequantizeOp>();
        if (!deq || product.payload_as<ExpertMatmulOp>()->quant) return false;
        const ShapeTracker& w = product.views[1];
        const auto count = w.rank() == 3 ? w.dim(0).as_constant() : std::nullopt;
        return count && *count > 0 && w.is_contiguous() && !has_padding(w) && w.dim(1) == Expression(deq->rows / *count) &&
               w.dim(2) == Expression(deq->cols) && deq->rows % *count == 0;
    }
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec product = ctx.spec(g, m.node<"product">());
        const NodeSpec& deq_spec = ctx.spec(g, m.node<"deq">());
        const DequantizeOp deq = *deq_spec.payload_as<DequantizeOp>();
        const std::int64_t rows = *product.views[1].dim(1).as_constant();
        const ShapeTracker blocks = deq_spec.views[0];
        ClassId children[] = {m.var<"x">(), m.var<"q">(), m.var<"experts">()};
        const ClassId root = m.root(g);
        const Activations act = deq.q8_activations ? Activations::Q8 : Activations::F32;
        ExpertMatmulOp op{QuantizedMatmulOp{deq.format, rows, deq.cols, act, WeightLayout::Blocks}};
        NodeSpec quantized = NodeSpec::backend(op, {product.views[0], blocks, product.views[2]}, product.shape, DType::F32);
        g.merge(root, add_spec(g, ctx, std::move(quantized), children));
    }
};

using ExpertRules = RuleSet<ExpertMatmulFromGather, ExpertMatmulOfDequantized>;

}  // namespace luminal::egraph
