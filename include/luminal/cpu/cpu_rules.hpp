#pragma once
// The CPU backend's rules: the core rules, the backend-neutral lowering, and
// what is the CPU's own: products and lookups of block-quantized weights read
// the blocks.
#include "luminal/egraph/core_rules.hpp"
#include "luminal/lowering/quantized.hpp"
#include "luminal/lowering/rules.hpp"

namespace luminal::egraph {

namespace detail {

// Whether `view` reads a Dequantize node's whole [rows, cols] output in order.
inline bool reads_matrix(const ShapeTracker& view, const DequantizeOp& deq) {
    const Shape& dims = view.dims();
    return view.rank() == 2 && view.is_contiguous() && !has_padding(view) && dims[0] == Expression(deq.rows) &&
           dims[1] == Expression(deq.cols);
}

// Whether the CPU repacks a weight of format f with 8 rows interleaved: every
// format it has kernels for, any row count of at least one group (the rows
// after the last whole group stay as blocks; cpu/quant_interleaved.hpp).
inline bool cpu_interleaves(QuantFormat f, std::int64_t rows) {
    switch (f) {
        case QuantFormat::Q8_0: case QuantFormat::Q4_0: case QuantFormat::Q4_1: case QuantFormat::Q5_0:
        case QuantFormat::Q5_1: case QuantFormat::Q4_K: case QuantFormat::Q6_K: return rows >= 8;
        default: return false;
    }
}

}  // namespace detail

// Matmul(a, Dequantize(q)) with the weight read whole as b [rows, cols]: a
// QuantizedMatmul that reads the blocks, with f32 activations, and (when the
// weight allows it) with activations rounded to 8-bit blocks, from the blocks
// as stored or repacked with 8 rows interleaved.
struct MatmulOfDequantized {
    static constexpr std::string_view name = "matmul-of-dequantized";
    using pattern = As<"gemm", Pat<op_symbol<MatmulOp>, Var<"a">, As<"deq", Pat<op_symbol<DequantizeOp>, Var<"q">>>>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& gemm = ctx.spec(g, m.node<"gemm">());
        const DequantizeOp* deq = ctx.spec(g, m.node<"deq">()).payload_as<DequantizeOp>();
        return deq && gemm.views[0].rank() == 2 && gemm.dtype == DType::F32 && ctx.facts(g, m.var<"a">()).dtype == DType::F32 &&
               detail::reads_matrix(gemm.views[1], *deq);
    }
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec gemm = ctx.spec(g, m.node<"gemm">());
        const NodeSpec& deq_spec = ctx.spec(g, m.node<"deq">());
        const DequantizeOp deq = *deq_spec.payload_as<DequantizeOp>();
        const ShapeTracker blocks = deq_spec.views[0];
        ClassId children[] = {m.var<"a">(), m.var<"q">()};
        const ClassId root = m.root(g);
        for (Activations act : {Activations::F32, Activations::Q8})
            for (WeightLayout layout : {WeightLayout::Blocks, WeightLayout::Interleaved8}) {
                if (act == Activations::Q8 && !deq.q8_activations) continue;
                // The interleaved kernels take 8-bit activations; the exact path reads the blocks.
                if (layout == WeightLayout::Interleaved8 && (act != Activations::Q8 || !detail::cpu_interleaves(deq.format, deq.rows)))
                    continue;
                NodeSpec product = NodeSpec::backend(QuantizedMatmulOp{deq.format, deq.rows, deq.cols, act, layout},
                                                     {gemm.views[0], blocks}, gemm.shape, DType::F32);
                g.merge(root, add_spec(g, ctx, std::move(product), children));
            }
    }
};

// Gather(Dequantize(q), idx) reading the weight in order: decode only the
// elements gathered (an embedding lookup in a quantized table).
struct GatherOfDequantized {
    static constexpr std::string_view name = "gather-of-dequantized";
    using pattern = As<"gather", Pat<sym(OpKind::Gather), As<"deq", Pat<op_symbol<DequantizeOp>, Var<"q">>>, Var<"idx">>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& gather = ctx.spec(g, m.node<"gather">());
        const DequantizeOp* deq = ctx.spec(g, m.node<"deq">()).payload_as<DequantizeOp>();
        return deq && gather.dtype == DType::F32 && detail::reads_matrix(gather.views[0], *deq);
    }
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec gather = ctx.spec(g, m.node<"gather">());
        const NodeSpec& deq_spec = ctx.spec(g, m.node<"deq">());
        const DequantizeOp deq = *deq_spec.payload_as<DequantizeOp>();
        NodeSpec lookup = NodeSpec::backend(QuantizedGatherOp{deq.format, deq.rows, deq.cols},
                                            {deq_spec.views[0], gather.views[1]}, gather.shape, DType::F32);
        ClassId children[] = {m.var<"q">(), m.var<"idx">()};
        g.merge(m.root(g), add_spec(g, ctx, std::move(lookup), children));
    }
};

using CpuRules = concat_t<CoreRules, LoweringRules, RuleSet<MatmulOfDequantized, GatherOfDequantized>>;

}  // namespace luminal::egraph
