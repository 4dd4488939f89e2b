#pragma once
// The rules that keep GGUF block formats quantized on CUDA, from the graph a
// quantized model writes (Matmul(a, Dequantize(q)), Gather(Dequantize(q), idx)):
//  * the product also as a quantized cuda.Gemv reading the blocks (the decode
//    GEMV of quant_gemv_kernel.hpp, which gemv_rules.hpp then gives its
//    RMSNorm prologue and epilogues), with activations rounded to 8-bit blocks
//    where the weight allows it, else f32 (not both: they move the same
//    bytes, so the cost model could not tell them apart); the Dequantize
//    itself stays an alternative (a device decode feeding cuBLASLt), which
//    the cost model prefers for many rows, where the GEMV would stream the
//    blocks once per token tile;
//  * the lookup as QuantizedGather, decoding only the rows it reads.
#include "luminal/cuda/gemv_kernel.hpp"
#include "luminal/egraph/rule_support.hpp"
#include "luminal/lowering/quantized.hpp"

namespace luminal::egraph {

namespace quant_detail {

// Whether `view` reads a Dequantize node's whole [rows, cols] output in order.
inline bool reads_whole_matrix(const ShapeTracker& view, const DequantizeOp& deq) {
    const Shape& dims = view.dims();
    return view.rank() == 2 && view.is_contiguous() && !has_padding(view) && dims[0] == Expression(deq.rows) &&
           dims[1] == Expression(deq.cols);
}

// Whether a block's staged activation rows fit its shared memory for one token at least.
inline bool stageable(Activations a, std::int64_t cols) { return cuda::quant_staged_bytes(a, cols) <= 3 * cuda::kGemvSharedBudget; }

}  // namespace quant_detail

struct QuantGemvFromMatmul {
    static constexpr std::string_view name = "cuda.quant-gemv";
    using pattern = As<"gemm", Pat<op_symbol<MatmulOp>, Var<"a">, As<"deq", Pat<op_symbol<DequantizeOp>, Var<"q">>>>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& gemm = ctx.spec(g, m.node<"gemm">());
        const NodeSpec& deq = ctx.spec(g, m.node<"deq">());
        const auto* op = deq.payload_as<DequantizeOp>();
        return op && gemm.views[0].rank() == 2 && !has_padding(gemm.views[0]) && gemm.dtype == DType::F32 &&
               ctx.facts(g, m.var<"a">()).dtype == DType::F32 && ctx.facts(g, m.var<"q">()).dtype == DType::U8 &&
               deq.views[0].is_contiguous() && quant_detail::reads_whole_matrix(gemm.views[1], *op);
    }
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec gemm = ctx.spec(g, m.node<"gemm">());  // copies: add_spec may move the specs
        const NodeSpec deq_spec = ctx.spec(g, m.node<"deq">());
        const DequantizeOp deq = *deq_spec.payload_as<DequantizeOp>();
        ClassId children[] = {m.var<"a">(), m.var<"q">()};
        const ClassId root = m.root(g);
        const Activations act = deq.q8_activations ? Activations::Q8 : Activations::F32;
        if (quant_detail::stageable(act, deq.cols)) {
            cuda::GemvOp gemv;
            gemv.quant = QuantizedMatmulOp{deq.format, deq.rows, deq.cols, act, WeightLayout::Blocks};
            NodeSpec product = NodeSpec::backend(gemv, {gemm.views[0], deq_spec.views[0]}, gemm.shape, DType::F32);
            g.merge(root, add_spec(g, ctx, std::move(product), children));
        }
    }
};

struct QuantizedGatherFromGather {
    static constexpr std::string_view name = "cuda.quantized-gather";
    using pattern = As<"gather", Pat<sym(OpKind::Gather), As<"deq", Pat<op_symbol<DequantizeOp>, Var<"q">>>, Var<"idx">>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& gather = ctx.spec(g, m.node<"gather">());
        const NodeSpec& deq = ctx.spec(g, m.node<"deq">());
        const auto* op = deq.payload_as<DequantizeOp>();
        return op && gather.dtype == DType::F32 && deq.views[0].is_contiguous() &&
               quant_detail::reads_whole_matrix(gather.views[0], *op);
    }
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec gather = ctx.spec(g, m.node<"gather">());
        const NodeSpec deq_spec = ctx.spec(g, m.node<"deq">());
        const DequantizeOp deq = *deq_spec.payload_as<DequantizeOp>();
        NodeSpec lookup = NodeSpec::backend(QuantizedGatherOp{deq.format, deq.rows, deq.cols}, {deq_spec.views[0], gather.views[1]},
                                            gather.shape, DType::F32);
        ClassId children[] = {m.var<"q">(), m.var<"idx">()};
        g.merge(m.root(g), add_spec(g, ctx, std::move(lookup), children));
    }
};

using QuantRules = RuleSet<QuantGemvFromMatmul, QuantizedGatherFromGather>;

}  // namespace luminal::egraph
