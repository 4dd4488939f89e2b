#pragma once
// The CUDA backend's rules: the core rules, the backend-neutral lowering, and
// what is CUDA's own: each reduction also as a warp-per-output and a
// block-per-output kernel, and with the fused region it reads as its
// prologue; an elementwise result with the per-row values it reads as one
// row kernel (row_fusion.hpp); a Matmul of two matrices of one float dtype
// also through cuBLASLt, as is one whose activations were rounded to its 16-bit
// weights' dtype; a mixture of experts' products as ExpertMatmul, on
// a quantized model's blocks too (lowering/expert_rules.hpp), and those of bf16
// experts also as a tensor-core GEMM, gate and up as one GEMV with the
// activation in its epilogue; argsort's rank
// count as a sort of rows that fit a block's shared memory. The search profiles the alternatives.
#include "luminal/cuda/argsort_kernel.hpp"
#include "luminal/cuda/attention_rules.hpp"
#include "luminal/cuda/blas_matmul_op.hpp"
#include "luminal/cuda/expert_gate_up_rules.hpp"
#include "luminal/cuda/expert_gemm_kernel.hpp"
#include "luminal/cuda/gemv_rules.hpp"
#include "luminal/cuda/quant_rules.hpp"
#include "luminal/cuda/write_at_rules.hpp"
#include "luminal/cuda/reduce_op.hpp"
#include "luminal/cuda/row_fusion.hpp"
#include "luminal/egraph/core_rules.hpp"
#include "luminal/lowering/argsort_rules.hpp"
#include "luminal/lowering/expert_rules.hpp"
#include "luminal/lowering/rules.hpp"

namespace luminal::egraph {

template <OpKind Fold>
struct ReduceSpreadOverThreads {
    static constexpr std::string_view name = Fold == OpKind::SumReduce ? "cuda.sum-spread" : "cuda.max-spread";
    using pattern = As<"reduce", Pat<sym(Fold), Var<"x">>>;
    static bool guard(const EGraph&, HlirContext&, const MatchOf<pattern>&) { return true; }
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec reduce = ctx.spec(g, m.template node<"reduce">());  // a copy: add_spec may move the specs
        ClassId children[] = {m.template var<"x">()};
        const ClassId root = m.root(g);
        for (auto strategy : {cuda::ReduceStrategy::WarpPerOutput, cuda::ReduceStrategy::BlockPerOutput}) {
            cuda::ReduceOp op{Fold, reduce.op.axis, strategy, nullptr};
            g.merge(root, add_spec(g, ctx, NodeSpec::backend(op, reduce.views, reduce.shape, reduce.dtype), children));
        }
    }
};

// A reduction reading a fused region element for element folds the region's
// program as its prologue: one kernel reads the region's inputs, and the
// region's result is never written. Offered with each thread layout.
template <OpKind Fold>
struct ReduceAbsorbsRegion {
    static constexpr std::string_view name = Fold == OpKind::SumReduce ? "cuda.sum-absorbs-region" : "cuda.max-absorbs-region";
    using pattern = As<"reduce", Pat<sym(Fold), As<"region", AnyArity<op_symbol<FusedElementwiseOp>>>>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& reduce = ctx.spec(g, m.template node<"reduce">());
        const NodeSpec& region = ctx.spec(g, m.template node<"region">());
        return !region.views.empty() && reduce.views[0].is_contiguous() && reduce.views[0].dims() == region.shape;
    }
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec reduce = ctx.spec(g, m.template node<"reduce">());  // copies: add_spec may move the specs
        const NodeSpec region = ctx.spec(g, m.template node<"region">());
        auto kids = g.children(m.template node<"region">());
        const std::vector<ClassId> children(kids.begin(), kids.end());
        const auto program = region.payload_as<FusedElementwiseOp>()->program;
        const ClassId root = m.root(g);
        for (auto strategy : {cuda::ReduceStrategy::ThreadPerOutput, cuda::ReduceStrategy::WarpPerOutput,
                              cuda::ReduceStrategy::BlockPerOutput}) {
            cuda::ReduceOp op{Fold, reduce.op.axis, strategy, program};
            g.merge(root, add_spec(g, ctx, NodeSpec::backend(op, region.views, reduce.shape, reduce.dtype), children));
        }
    }
};

// A fused region reading per-row values of its own rows becomes a row
// kernel, a warp or a block per row.
struct RowKernelFromRegion {
    static constexpr std::string_view name = "cuda.row-kernel";
    using pattern = As<"region", AnyArity<op_symbol<FusedElementwiseOp>>>;
    static constexpr bool reads_child_classes = true;
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& region = ctx.spec(g, m.node<"region">());
        if (region.shape.empty() || region.shape.back() == Expression(1) || region.views.empty()) return;
        // Most regions read nothing per row: they are passed over before a draft is built.
        const row_detail::Reads& broadcast = row_detail::row_broadcast(region.shape);
        if (!broadcast.read_by_any(region.views)) return;
        // The draft copies what it reads of the spec: add_spec may move the specs.
        row_detail::RowDraft row{region.shape, region.dtype, {}, region.views, {}};
        for (ClassId c : g.children(m.node<"region">())) row.children.push_back(g.find(c));
        row.op.program = region.payload_as<FusedElementwiseOp>()->program;
        for (std::uint16_t i = 0; i < row.children.size(); ++i) row.op.operands.push_back({cuda::RowOperand::Kind::Input, i});
        if (!row_detail::grow(g, ctx, row, broadcast)) return;
        const ClassId root = m.root(g);
        for (auto strategy : {cuda::ReduceStrategy::WarpPerOutput, cuda::ReduceStrategy::BlockPerOutput}) {
            row.op.strategy = strategy;
            row_detail::add_row(g, ctx, root, row);
        }
    }
};

// A row kernel absorbs the per-row inputs its children's classes gained since it was made.
struct RowKernelGrows {
    static constexpr std::string_view name = "cuda.row-kernel-grows";
    using pattern = As<"row", AnyArity<op_symbol<cuda::RowOp>>>;
    static constexpr bool reads_child_classes = true;
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& spec = ctx.spec(g, m.node<"row">());
        const row_detail::Reads& broadcast = row_detail::row_broadcast(spec.shape);
        if (!broadcast.read_by_any(spec.views)) return;
        row_detail::RowDraft row{spec.shape, spec.dtype, {}, spec.views, *spec.payload_as<cuda::RowOp>()};
        for (ClassId c : g.children(m.node<"row">())) row.children.push_back(g.find(c));
        if (row_detail::grow(g, ctx, row, broadcast)) row_detail::add_row(g, ctx, m.root(g), row);
    }
};

// Casts to f32 of a row kernel's result read in order (a bf16 model's RMSNorm
// rounded to bf16, then widened for the product; torch graphs also reshape
// between): the row kernel computes the casts too, in the region's shape, so
// a Gemv, whose prologue takes f32 rows, takes the whole row.
struct RowKernelThroughCasts {
    static constexpr std::string_view name = "cuda.row-through-casts";
    using pattern = As<"region", AnyArity<op_symbol<FusedElementwiseOp>>>;
    static constexpr bool reads_child_classes = true;
    static constexpr std::array<Symbol, 1> reads_child_ops = {op_symbol<cuda::RowOp>};
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const auto kids = g.children(m.node<"region">());
        if (kids.size() != 1) return;
        // Most regions compute more than casts or read no row op: passed over before anything is copied.
        std::optional<ENodeId> best;
        {
            const NodeSpec& region = ctx.spec(g, m.node<"region">());
            const auto& steps = region.payload_as<FusedElementwiseOp>()->program->steps;
            if (region.dtype != DType::F32 || region.shape.empty() ||
                !std::all_of(steps.begin(), steps.end(), [](const FusedStep& s) { return s.kind == OpKind::Cast; }))
                return;
            for (ENodeId n : g.class_nodes(g.find(kids[0])))
                if (g.alive(n) && g.node(n).op == op_symbol<cuda::RowOp> && same_row_layout(ctx.spec(g, n).shape, region.shape) &&
                    (!best || row_detail::consumer_rank(g, ctx, n) < row_detail::consumer_rank(g, ctx, *best)))
                    best = n;
            if (!best || !reads_in_order(region.views[0])) return;
        }
        const NodeSpec region = ctx.spec(g, m.node<"region">());  // copies: add_spec may move the specs
        const NodeSpec row = ctx.spec(g, *best);
        const auto row_kids = g.children(*best);
        const std::vector<ClassId> children(row_kids.begin(), row_kids.end());
        // The row's inputs read in the region's shape: the same flat positions, as both read in order.
        std::vector<ShapeTracker> views;
        for (const ShapeTracker& v : row.views)
            if (auto reshaped = v.reshape(region.shape)) views.push_back(std::move(*reshaped));
        if (views.size() != row.views.size()) return;
        cuda::RowOp op = *row.payload_as<cuda::RowOp>();
        auto program = std::make_shared<FusedProgram>(*op.program);
        // The region's slot 0 is the row's result, the program's last step; its step j follows the row's steps.
        const auto inputs = static_cast<std::uint16_t>(op.operands.size());
        const auto result = static_cast<std::uint16_t>(inputs + program->steps.size() - 1);
        for (FusedStep cast : region.payload_as<FusedElementwiseOp>()->program->steps) {
            cast.a = cast.a == 0 ? result : static_cast<std::uint16_t>(result + cast.a);
            program->steps.push_back(cast);
        }
        op.program = std::move(program);
        g.merge(m.root(g), add_spec(g, ctx, NodeSpec::backend(std::move(op), std::move(views), region.shape, region.dtype), children));
    }
};

struct MatmulThroughBlas {
    static constexpr std::string_view name = "cuda.matmul-blas";
    using pattern = As<"gemm", Pat<op_symbol<MatmulOp>, Var<"a">, Var<"b">>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& gemm = ctx.spec(g, m.node<"gemm">());
        const DType a = ctx.facts(g, m.var<"a">()).dtype, b = ctx.facts(g, m.var<"b">()).dtype;
        const bool supported = a == DType::F32 || a == DType::BF16 || a == DType::F16;
        return supported && a == b && gemm.dtype == DType::F32 && cuda::blas_layout(gemm.views[0]) &&
               cuda::blas_layout(gemm.views[1]);
    }
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& gemm = ctx.spec(g, m.node<"gemm">());
        ClassId children[] = {m.var<"a">(), m.var<"b">()};
        g.merge(m.root(g),
                add_spec(g, ctx, NodeSpec::backend(cuda::BlasMatmulOp{}, gemm.views, gemm.shape, gemm.dtype), children));
    }
};

// Matmul(Cast(a), b) where the Cast widens a 16-bit a to f32 and b is of a's
// dtype (a model that rounds its activations to its weights' dtype,
// nn::ModelOptions::narrow_activations): cuBLASLt multiplies a and b as
// stored, on tensor cores. Equal to the widened product: a product of two
// 16-bit values is exact in f32, and both accumulate in f32.
struct NarrowMatmulThroughBlas {
    static constexpr std::string_view name = "cuda.narrow-matmul-blas";
    using pattern = As<"gemm", Pat<op_symbol<MatmulOp>, As<"cast", Pat<sym(OpKind::Cast), Var<"a">>>, Var<"b">>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& gemm = ctx.spec(g, m.node<"gemm">());
        const NodeSpec& cast = ctx.spec(g, m.node<"cast">());
        const DType a = ctx.facts(g, m.var<"a">()).dtype, b = ctx.facts(g, m.var<"b">()).dtype;
        return (a == DType::BF16 || a == DType::F16) && a == b && cast.dtype == DType::F32 && reads_whole(cast, 0) &&
               gemm.dtype == DType::F32 && cuda::blas_layout(gemm.views[0]) && cuda::blas_layout(gemm.views[1]);
    }
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& gemm = ctx.spec(g, m.node<"gemm">());
        ClassId children[] = {m.var<"a">(), m.var<"b">()};
        g.merge(m.root(g),
                add_spec(g, ctx, NodeSpec::backend(cuda::BlasMatmulOp{}, gemm.views, gemm.shape, gemm.dtype), children));
    }
};

// Add(BlasMatmul(a, b), c) with c an f32 array laid out as the product (a
// residual stream): cuBLASLt adds c in its epilogue (beta = 1), so the sum is
// one library call and the product is never written apart. Both operands must
// suit the library at every size: such an op has no generated fallback. Not
// for a single row: that is a GEMV's, which adds the residual in its own epilogue.
struct BlasMatmulAddsAddend {
    static constexpr std::string_view name = "cuda.blas-adds-addend";
    using pattern = As<"add", Pat<sym(OpKind::Add), Var<"c">, As<"gemm", Pat<op_symbol<cuda::BlasMatmulOp>, Var<"a">, Var<"b">>>>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& add = ctx.spec(g, m.node<"add">());
        const NodeSpec& gemm = ctx.spec(g, m.node<"gemm">());
        const bool one_row = gemm.shape.size() >= 2 && gemm.shape[gemm.shape.size() - 2] == Expression(1);
        return !gemm.payload_as<cuda::BlasMatmulOp>()->adds_addend && !one_row && add.dtype == DType::F32 && gemm.dtype == DType::F32 &&
               ctx.facts(g, m.var<"c">()).dtype == DType::F32 && reads_whole(add, 0) && reads_whole(add, 1) &&
               cuda::blas_accepts_always(gemm.views[0]) && cuda::blas_accepts_always(gemm.views[1]);
    }
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec gemm = ctx.spec(g, m.node<"gemm">());  // a copy: add_spec may move the specs
        const NodeSpec& add = ctx.spec(g, m.node<"add">());
        std::vector<ShapeTracker> views = gemm.views;
        views.push_back(add.views[0]);
        ClassId children[] = {m.var<"a">(), m.var<"b">(), m.var<"c">()};
        g.merge(m.root(g), add_spec(g, ctx, NodeSpec::backend(cuda::BlasMatmulOp{true}, std::move(views), gemm.shape, gemm.dtype),
                                    children));
    }
};

// ExpertMatmul of bf16 experts (rows of whole 16-byte vectors) also as the
// expert GEMM on tensor cores: where
// many rows choose each expert (a prefill) it reads each expert once per 64 of
// them; the cost model weighs it against the expert GEMV at each workload.
// Activations the model rounded to bf16 are read as stored, one part each.
struct ExpertMatmulThroughGemm {
    static constexpr std::string_view name = "cuda.expert-gemm";
    using pattern = As<"product", Pat<op_symbol<ExpertMatmulOp>, Var<"x">, Var<"w">, Var<"experts">>>;
    static bool guard(const EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec& product = ctx.spec(g, m.node<"product">());
        const ShapeTracker& w = product.views[1];
        return !product.payload_as<ExpertMatmulOp>()->quant && ctx.facts(g, m.var<"w">()).dtype == DType::BF16 &&
               cuda::expert_gemv_detail::streams_rows(w, DType::BF16) && is_float(ctx.facts(g, m.var<"x">()).dtype);
    }
    static void apply(EGraph& g, HlirContext& ctx, const MatchOf<pattern>& m) {
        const NodeSpec product = ctx.spec(g, m.node<"product">());
        const ClassId stored = stored_operand(g, ctx, m.var<"x">());
        const ClassId x = ctx.facts(g, stored).dtype == DType::BF16 ? stored : m.var<"x">();
        const cuda::ExpertGemmOp op{cuda::gemm_parts(ctx.facts(g, x).dtype)};
        ClassId children[] = {x, m.var<"w">(), m.var<"experts">()};
        g.merge(m.root(g), add_spec(g, ctx, NodeSpec::backend(op, product.views, product.shape, DType::F32), children));
    }
};

using CudaRules = concat_t<CoreRules, LoweringRules, ExpertRules,
                           RuleSet<ReduceSpreadOverThreads<OpKind::SumReduce>, ReduceSpreadOverThreads<OpKind::MaxReduce>,
                                   ReduceAbsorbsRegion<OpKind::SumReduce>, ReduceAbsorbsRegion<OpKind::MaxReduce>,
                                   RowKernelFromRegion, RowKernelGrows, RowKernelThroughCasts, MatmulThroughBlas, NarrowMatmulThroughBlas,
                                   BlasMatmulAddsAddend>,
                           GemvRules, QuantRules, RegionRules,
                           RuleSet<ScatterWritesAtPositions, AttentionFromSoftmax<CudaAttentionReads>, FlashAttentionFromAttention, FlashAttentionWritesTokenRows,
                                   ArgsortFromRanks<cuda::CudaSortableRows>,
                                   ExpertMatmulThroughGemm, ExpertGateUpFromRegion>>;

}  // namespace luminal::egraph
