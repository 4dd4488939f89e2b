#pragma once
// The CPU backend's rules: the core rules, the backend-neutral lowering, and
// what is the CPU's own: products and lookups of block-quantized weights read
// the blocks; products read a 16-bit KV cache as stored; argsort's rank count
// is a sort (any row length); attention is one kernel (cpu/attention.hpp). Mixture-of-experts
// products read the chosen experts in place, as blocks where quantized
// (lowering/expert_rules.hpp).
#include "luminal/egraph/core_rules.hpp"
#include "luminal/lowering/argsort_rules.hpp"
#include "luminal/lowering/attention_rules.hpp"
#include "luminal/lowering/expert_rules.hpp"
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

// Whether `view` reads element i of its producer's buffer as its own element i
// for every i it has: base and offsets 0, row-major strides of its own dims,
// and no padding; a prefix of the outer axis (the KV cache's positions
// 0 .. p+s-1, whose valid window still says the capacity) is such a view.
inline bool reads_prefix_in_order(const ShapeTracker& view) {
    if (view.base() != Expression(0)) return false;
    const ShapeTracker plain(view.dims());
    for (std::size_t i = 0; i < view.rank(); ++i) {
        const ShapeTracker::Axis& a = view.axes()[i];
        const bool valid = view.axis_fully_valid(i) ||
                           (a.valid_lo == Expression(0) && min(a.size, a.valid_hi) == a.size);
        if (a.stride != plain.axes()[i].stride || a.offset != Expression(0) || !valid) return false;
    }
    return true;
}

}  // namespace detail

// Matmul(a, Cast(b)) where the Cast widens a 16-bit b that it reads as a prefix
// in order (the attention's read of a 16-bit KV cache): the Matmul reads b's
// buffer through its own view instead, and the CPU's Matmul widens 16-bit
// operands as it multiplies (cpu/matmul.hpp), so the cache is not copied to
// f32 in a pass of its own. The backend-neutral rule (lowering/rules.hpp) takes
// only a Cast of the whole buffer.
struct MatmulReadsNarrowPrefix {
    static constexpr std::string_view name = "cpu.matmul-reads-narrow-prefix";
    using pattern = As<"gemm", Pat<op_symbol<MatmulOp>, Var<"a">, As<"cast", Pat<sym(OpKind::Cast), Var<"b">>>>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& cast = ctx.spec(g, m.node<"cast">());
        const DType stored = ctx.facts(g, m.var<"b">()).dtype;
        return cast.dtype == DType::F32 && (stored == DType::BF16 || stored == DType::F16) && !reads_whole(cast, 0) &&
               cast.views[0].dims() == cast.shape && detail::reads_prefix_in_order(cast.views[0]);
    }
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        NodeSpec gemm = ctx.spec(g, m.node<"gemm">());
        ClassId children[] = {m.var<"a">(), m.var<"b">()};
        g.merge(m.root(g), add_spec(g, ctx, std::move(gemm), children));
    }
};

// Matmul(Cast(a), b) where the Cast widens a 16-bit a, read whole and in
// order, to f32: the Matmul reads a as stored (the CPU's Matmul widens it
// exactly as the Cast does), so a bf16 model's activations stay bf16 and
// gemm.hpp can multiply them as bf16 pairs. The weight's side is
// lowering/rules.hpp's MatmulReadsNarrowOperand.
struct MatmulReadsNarrowActivations {
    static constexpr std::string_view name = "cpu.matmul-reads-narrow-activations";
    using pattern = As<"gemm", Pat<op_symbol<MatmulOp>, As<"cast", Pat<sym(OpKind::Cast), Var<"a">>>, Var<"b">>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& cast = ctx.spec(g, m.node<"cast">());
        const DType stored = ctx.facts(g, m.var<"a">()).dtype;
        return cast.dtype == DType::F32 && (stored == DType::BF16 || stored == DType::F16) && reads_whole(cast, 0);
    }
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        NodeSpec gemm = ctx.spec(g, m.node<"gemm">());
        ClassId children[] = {m.var<"a">(), m.var<"b">()};
        g.merge(m.root(g), add_spec(g, ctx, std::move(gemm), children));
    }
};

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
                if (layout == WeightLayout::Interleaved8 && (act != Activations::Q8 || !can_interleave(deq.format, deq.rows)))
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

// The CPU's attention kernel reads every view (as the elementwise kernels do),
// the keys and values once per KV head: those of its query heads must be one.
struct CpuAttentionReads {
    static constexpr std::string_view rule_name = "cpu.attention";
    static bool accepts(const EGraph& g, const HlirContext& ctx, const NodeSpec& spec, ClassId k, ClassId v) {
        const ShapeTracker &qv = spec.views[0], &kv = spec.views[1], &vv = spec.views[2], &bv = spec.views[3];
        if (qv.rank() != 4 || kv.rank() != 4 || vv.rank() != 4 || bv.rank() != 4) return false;
        auto shared = [](const ShapeTracker& view) { return view.is_broadcast(1) || view.dim(1) == Expression(1); };
        return is_float(ctx.facts(g, k).dtype) && is_float(ctx.facts(g, v).dtype) && shared(kv) && shared(vv);
    }
};

using CpuRules = concat_t<CoreRules, LoweringRules, ExpertRules,
                          RuleSet<MatmulOfDequantized, GatherOfDequantized, MatmulReadsNarrowPrefix, MatmulReadsNarrowActivations, ArgsortFromRanks<>,
                                  AttentionFromSoftmax<CpuAttentionReads>>>;

}  // namespace luminal::egraph
